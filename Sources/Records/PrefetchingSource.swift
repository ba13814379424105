import Foundation

/// Runs another source on a background thread and hands its items over in batches.
///
/// Reading and decoding (one core) then overlap with whatever consumes the records — the
/// store's writes, on the other core. At most `depth` batches wait at any time, so memory
/// stays bounded however large the input is.
public final class PrefetchingSource: RecordSource, @unchecked Sendable {
    private final class Shared: @unchecked Sendable {
        let condition = NSCondition()
        var batches: [[SourceItem]] = []
        var finished = false
        var failure: Error?
        var cancelled = false
        var bytesRead: Int64 = 0
    }

    private let source: RecordSource
    private let transform: (@Sendable (SourceItem) -> SourceItem)?
    private let shared = Shared()
    private let batchSize: Int
    private let depth: Int
    private var started = false
    private var current: [SourceItem] = []

    /// - Parameter transform: work to do on each item on the background thread too, such as
    ///   validation.
    public init(_ source: RecordSource, batchSize: Int = 512, depth: Int = 8, transform: (@Sendable (SourceItem) -> SourceItem)? = nil) {
        self.source = source
        self.transform = transform
        self.batchSize = batchSize
        self.depth = depth
    }

    deinit {
        shared.condition.lock()
        shared.cancelled = true
        shared.condition.broadcast()
        shared.condition.unlock()
    }

    public var name: String { source.name }
    public var totalBytes: Int64? { source.totalBytes }

    public var bytesRead: Int64 {
        shared.condition.lock()
        defer { shared.condition.unlock() }
        return shared.bytesRead
    }

    private func start() {
        started = true
        let shared = self.shared
        // Only the background thread touches the source from here on.
        nonisolated(unsafe) let source = self.source
        let batchSize = self.batchSize
        let depth = self.depth
        let transform = self.transform
        let thread = Thread {
            while true {
                var batch: [SourceItem] = []
                batch.reserveCapacity(batchSize)
                var failure: Error?
                var ended = false
                do {
                    while batch.count < batchSize {
                        guard let item = try source.next() else { ended = true; break }
                        batch.append(transform?(item) ?? item)
                    }
                } catch {
                    failure = error
                    ended = true
                }
                let bytes = source.bytesRead
                shared.condition.lock()
                while shared.batches.count >= depth && !shared.cancelled { shared.condition.wait() }
                if shared.cancelled {
                    shared.condition.unlock()
                    return
                }
                // Reversed, so that the consumer can pop items off the end: moving each out of
                // the batch rather than copying it costs no reference counting.
                batch.reverse()
                if !batch.isEmpty { shared.batches.append(batch) }
                shared.bytesRead = bytes
                if ended {
                    shared.failure = failure
                    shared.finished = true
                }
                shared.condition.broadcast()
                shared.condition.unlock()
                if ended { return }
            }
        }
        thread.stackSize = 8 << 20
        thread.start()
    }

    public func next() throws -> SourceItem? {
        if let item = current.popLast() { return item }
        if !started { start() }
        shared.condition.lock()
        while shared.batches.isEmpty && !shared.finished { shared.condition.wait() }
        guard !shared.batches.isEmpty else {
            let failure = shared.failure
            shared.condition.unlock()
            if let failure { throw failure }
            return nil
        }
        current = shared.batches.removeFirst()
        shared.condition.broadcast()
        shared.condition.unlock()
        return current.popLast()
    }
}
