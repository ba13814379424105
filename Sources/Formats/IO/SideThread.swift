import Foundation

/// A second thread for fork-join work: hand it one job, do other work meanwhile, then collect
/// the job's result. The reader of a JSON Lines file decodes one batch of lines here while it
/// decodes the next batch itself, so decoding uses both cores when the consumer is light.
///
/// One job at a time; `collect` must follow every `start` before the next. The thread ends
/// when the owner goes away.
final class SideThread<Result>: @unchecked Sendable {
    private final class Shared: @unchecked Sendable {
        let condition = NSCondition()
        var job: (() -> Result)?
        var result: Result?
        var stopped = false
    }

    private let shared = Shared()
    private var running = false

    init() {}

    deinit {
        shared.condition.lock()
        shared.stopped = true
        shared.condition.broadcast()
        shared.condition.unlock()
    }

    /// Starts `job` on the side thread.
    func start(_ job: @escaping () -> Result) {
        if !running { launch() }
        shared.condition.lock()
        precondition(shared.job == nil && shared.result == nil, "SideThread: collect the last job before starting another")
        shared.job = job
        shared.condition.broadcast()
        shared.condition.unlock()
    }

    /// Waits for the job started last and returns what it returned.
    func collect() -> Result {
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
        let thread = Thread {
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
        thread.name = "ckport decode"
        thread.start()
    }
}
