import Foundation

/// ckport's one fork-join helper, a second thread: hand it one job, do other work meanwhile,
/// then collect the job's result. The JSON Lines reader decodes one batch of lines here while
/// it decodes the next itself; a bundle's reader hashes and parses here; a migration
/// transforms one batch of records here while the store reads the next.
///
/// One job at a time; `collect` must follow every `start` before the next. The thread ends
/// with ``stop()`` or when the owner goes away. (``PrefetchingSource`` and ``BackgroundSink``,
/// beside it, are the producer–consumer helpers: a queue of batches in one direction.)
public final class SideThread<Result> {
    /// `@unchecked Sendable`: every property is used with `condition` locked. The job and its
    /// result are not `Sendable`: the job is handed to the side thread and its result back, and
    /// ``start(_:)``'s caller promises (as the type's description says) to touch nothing the job
    /// uses until ``collect()`` has returned, which the lock orders after the job's end.
    private final class Shared: @unchecked Sendable {
        let condition = NSCondition()
        var job: (() -> Result)?
        var result: Result?
        var stopped = false
    }

    private let shared = Shared()
    private var running = false
    private let name: String
    private let stackSize: Int?

    /// `stackSize` in bytes, for jobs that recurse deeply (nil: the system's default).
    public init(name: String = "ckport decode", stackSize: Int? = nil) {
        self.name = name
        self.stackSize = stackSize
    }

    deinit { stop() }

    /// Ends the thread once its current job, if any, is done.
    public func stop() {
        shared.condition.lock()
        shared.stopped = true
        shared.condition.broadcast()
        shared.condition.unlock()
    }

    /// Starts `job` on the side thread.
    public func start(_ job: @escaping () -> Result) {
        if !running { launch() }
        shared.condition.lock()
        precondition(
            shared.job == nil && shared.result == nil, "SideThread: collect the last job before starting another")
        shared.job = job
        shared.condition.broadcast()
        shared.condition.unlock()
    }

    /// Waits for the job started last and returns what it returned.
    public func collect() -> Result {
        shared.condition.lock()
        defer { shared.condition.unlock() }
        while shared.result == nil { shared.condition.wait() }
        let result = shared.result!
        shared.result = nil
        return result
    }

    private func launch() {
        running = true
        let shared = self.shared
        WorkerThread.start(name: name, stackSize: stackSize) {
            while true {
                shared.condition.lock()
                while shared.job == nil && !shared.stopped { shared.condition.wait() }
                if shared.stopped {
                    shared.condition.unlock()
                    return
                }
                let job = shared.job!
                shared.condition.unlock()
                let result = job()
                shared.condition.lock()
                shared.job = nil
                shared.result = result
                shared.condition.broadcast()
                shared.condition.unlock()
            }
        }
    }
}
