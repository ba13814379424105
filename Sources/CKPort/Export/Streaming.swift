import Records

extension Exports {
    /// Streams what `produce` emits into `sink`, reporting progress every 8,192 records: the sink
    /// is finished when all went well and discarded (nothing left behind) when anything failed.
    public static func stream<Result>(
        into sink: RecordSink, progress: ProgressHandler?, total: Int? = nil,
        _ produce: (_ emit: (Record) throws -> Void) throws -> Result
    ) throws -> Result {
        var count = 0
        do {
            let result = try produce { record in
                try sink.write(record)
                count += 1
                if count % 8192 == 0, let progress {
                    progress(
                        OperationProgress(
                            records: count, done: total.map { _ in Int64(count) }, total: total.map(Int64.init)))
                }
            }
            try sink.finish()
            return result
        } catch {
            sink.discard()
            throw error
        }
    }
}
