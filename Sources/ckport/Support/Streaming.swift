import Records

/// Streams what `produce` emits into `sink`, with progress: the sink is finished when all went
/// well and discarded (nothing left behind) when anything failed.
func stream<Result>(into sink: RecordSink, progress: ProgressLine, total: Int? = nil,
                    _ produce: (_ emit: (Record) throws -> Void) throws -> Result) throws -> Result {
    var count = 0
    do {
        let result = try produce { record in
            try sink.write(record)
            count += 1
            if count % 8192 == 0 { progress.update(records: count, total: total) }
        }
        try sink.finish()
        progress.finish()
        return result
    } catch {
        progress.finish()
        sink.discard()
        throw error
    }
}
