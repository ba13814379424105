import Foundation
import Records

/// Runs a record transform on a thread of its own, a batch at a time, so that the store's
/// reads and writes (on the calling thread) overlap with the work of migrating the records.
///
/// The caller submits a batch, reads the next one while the worker transforms the first,
/// then collects the results in order. Only the worker ever calls `transform`, and only one
/// batch is in flight, so the transform needs no locking of its own.
final class TransformPipeline {
    typealias Transform = (Record) throws -> [Record]?

    private let side = SideThread<Result<[[Record]?], Error>>(name: "ckport migrate", stackSize: 8 << 20)
    private let transform: Transform

    /// Results the caller is done with, freed by the worker that allocated them: glibc makes
    /// a thread that frees another thread's memory wait for that thread's arena lock.
    private final class Retired: @unchecked Sendable {
        var results: [[[Record]?]] = []
    }
    private var retired = Retired()

    init(_ transform: @escaping Transform) {
        self.transform = transform
    }

    /// Hands a batch to the worker; the previous one must have been collected.
    func submit(_ batch: [Record]) {
        let transform = self.transform
        let retired = self.retired
        self.retired = Retired()
        side.start {
            retired.results = []
            return Result {
                var output: [[Record]?] = []
                output.reserveCapacity(batch.count)
                // By index: the records are lent to the transform, not copied for it.
                for index in batch.indices { output.append(try transform(batch[index])) }
                return output
            }
        }
    }

    /// Hands back results the caller has written; the worker frees them with its next batch.
    func retire(_ results: [[Record]?]) {
        retired.results.append(results)
    }

    /// The results of the batch submitted last, in order; rethrows what the transform threw.
    func collect() throws -> [[Record]?] {
        try side.collect().get()
    }

    func stop() {
        side.stop()
    }
}
