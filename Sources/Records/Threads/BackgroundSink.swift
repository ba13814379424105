import Foundation

/// Hands records to another sink on a background thread, in batches.
///
/// Reading records out of the store (this thread) then overlaps with encoding and writing
/// them (the other core). At most `depth` batches wait, so memory stays bounded. An error
/// on the background thread surfaces at the next `write` or at `finish`.
public final class BackgroundSink: RecordSink, @unchecked Sendable {
    private final class Shared: @unchecked Sendable {
        let condition = NSCondition()
        var batches: [[Record]] = []
        var closing = false
        var done = false
        var failure: Error?
    }

    private let sink: RecordSink
    private let shared = Shared()
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
        nonisolated(unsafe) let sink = self.sink
        let thread = Thread {
            while true {
                shared.condition.lock()
                while shared.batches.isEmpty && !shared.closing { shared.condition.wait() }
                if shared.batches.isEmpty {
                    shared.done = true
                    shared.condition.broadcast()
                    shared.condition.unlock()
                    return
                }
                let next = shared.batches.removeFirst()
                shared.condition.broadcast()
                let failed = shared.failure != nil
                shared.condition.unlock()
                if failed { continue }
                do {
                    for record in next { try sink.write(record) }
                } catch {
                    shared.condition.lock()
                    shared.failure = error
                    shared.condition.unlock()
                }
            }
        }
        thread.stackSize = 8 << 20
        thread.start()
    }

    public func write(_ record: Record) throws {
        batch.append(record)
        if batch.count >= batchSize { try hand(over: false) }
    }

    private func hand(over closing: Bool) throws {
        if !started { start() }
        shared.condition.lock()
        defer { shared.condition.unlock() }
        while shared.batches.count >= depth && shared.failure == nil { shared.condition.wait() }
        if let failure = shared.failure { throw failure }
        if !batch.isEmpty {
            shared.batches.append(batch)
            batch = []
            batch.reserveCapacity(batchSize)
        }
        if closing { shared.closing = true }
        shared.condition.broadcast()
    }

    /// Waits for the background thread to write everything, then finishes the sink.
    public func finish() throws {
        try hand(over: true)
        shared.condition.lock()
        while !shared.done { shared.condition.wait() }
        let failure = shared.failure
        shared.condition.unlock()
        if let failure {
            sink.discard()
            throw failure
        }
        try sink.finish()
    }

    public func discard() {
        if started {
            shared.condition.lock()
            shared.batches = []
            shared.closing = true
            shared.condition.broadcast()
            while !shared.done { shared.condition.wait() }
            shared.condition.unlock()
        }
        sink.discard()
    }
}
