import Foundation
import Records

/// Runs a record transform on a thread of its own, a batch at a time, so that the store's
/// reads and writes (on the calling thread) overlap with the work of migrating the records.
///
/// The caller submits a batch, reads the next one while the worker transforms the first,
/// then collects the results in order. Only the worker ever calls `transform`, and only one
/// batch is in flight, so the transform needs no locking of its own.
final class TransformPipeline: @unchecked Sendable {
    typealias Transform = (Record) throws -> [Record]?

    private let condition = NSCondition()
    private var job: [Record]?
    private var results: [[Record]?]?
    private var failure: Error?
    private var stopped = false
    nonisolated(unsafe) private let transform: Transform

    init(_ transform: @escaping Transform) {
        self.transform = transform
        let thread = Thread { [self] in work() }
        thread.stackSize = 8 << 20
        thread.start()
    }

    private func work() {
        while true {
            condition.lock()
            while job == nil && !stopped { condition.wait() }
            if stopped { condition.unlock(); return }
            let batch = job!
            job = nil
            condition.unlock()
            var output: [[Record]?] = []
            output.reserveCapacity(batch.count)
            var error: Error?
            for record in batch {
                do { output.append(try transform(record)) } catch let thrown { error = thrown; break }
            }
            condition.lock()
            results = output
            failure = error
            condition.broadcast()
            condition.unlock()
        }
    }

    /// Hands a batch to the worker; the previous one must have been collected.
    func submit(_ batch: [Record]) {
        condition.lock()
        job = batch
        condition.broadcast()
        condition.unlock()
    }

    /// The results of the batch submitted last, in order; rethrows what the transform threw.
    func collect() throws -> [[Record]?] {
        condition.lock()
        while results == nil { condition.wait() }
        let output = results!
        let error = failure
        results = nil
        failure = nil
        condition.unlock()
        if let error { throw error }
        return output
    }

    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }
}
