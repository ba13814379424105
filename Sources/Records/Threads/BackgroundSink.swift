import Foundation

/// Hands records to another sink on a background thread, in batches.
///
/// Reading records out of the store (this thread) then overlaps with encoding and writing
/// them (the other core). At most `depth` batches wait, so memory stays bounded. An error
/// on the background thread surfaces at the next `write` or at `finish`.
public final class BackgroundSink: RecordSink {
    private struct Shared {
        var batches: [[Record]] = []
        var closing = false
        var done = false
        var failure: Error?
    }

    private let sink: RecordSink
    private let shared = Monitor(Shared())
    private let batchSize: Int
    private let depth: Int
    private var batch: [Record] = []
    private var started = false

    public init(_ sink: RecordSink, batchSize: Int = 512, depth: Int = 8) {
        self.sink = sink
        self.batchSize = batchSize
        self.depth = depth
        batch.reserveCapacity(batchSize)
    }

    private func start() {
        started = true
        let shared = self.shared
        // Only the background thread touches the sink until finish() has joined it.
        WorkerThread.start(name: "ckport write-behind", stackSize: 8 << 20, handing: sink) { sink in
            while true {
                let (next, failed) = shared.withLock(
                    when: { !$0.batches.isEmpty || $0.closing },
                    then: {
                        state -> ([Record]?, Bool) in
                        if state.batches.isEmpty {
                            state.done = true
                            return (nil, false)
                        }
                        return (state.batches.removeFirst(), state.failure != nil)
                    })
                guard let next else { return }
                if failed { continue }
                do {
                    for record in next { try sink.write(record) }
                } catch {
                    shared.withLock { $0.failure = error }
                }
            }
        }
    }

    public func write(_ record: Record) throws {
        batch.append(record)
        if batch.count >= batchSize { try hand(over: false) }
    }

    private func hand(over closing: Bool) throws {
        if !started { start() }
        let depth = self.depth
        let handed = batch
        try shared.withLock(
            when: { $0.batches.count < depth || $0.failure != nil },
            then: { state throws -> Void in
                if let failure = state.failure { throw failure }
                if !handed.isEmpty { state.batches.append(handed) }
                if closing { state.closing = true }
            })
        if !batch.isEmpty {
            batch = []
            batch.reserveCapacity(batchSize)
        }
    }

    /// Waits for the background thread to write everything, then finishes the sink.
    public func finish() throws {
        try hand(over: true)
        if let failure = shared.withLock(when: { $0.done }, then: { $0.failure }) {
            sink.discard()
            throw failure
        }
        try sink.finish()
    }

    public func discard() {
        if started {
            shared.withLock { state in
                state.batches = []
                state.closing = true
            }
            shared.withLock(when: { $0.done }, then: { _ in })
        }
        sink.discard()
    }
}
