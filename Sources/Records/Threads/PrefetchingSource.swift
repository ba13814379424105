import Foundation

/// Runs another source on a background thread and hands its items over in batches.
///
/// Reading and decoding (one core) then overlap with whatever consumes the records — the
/// store's writes, on the other core. At most `depth` batches wait at any time, so memory
/// stays bounded however large the input is.
public final class PrefetchingSource: RecordSource {
    /// Items in order (the consumer takes each out of its place, leaving nil: moved, not
    /// copied, so that handing one over costs no reference counting), with the source's
    /// progress after them and, in the last batch, how the source ended.
    private struct Batch {
        var items: [SourceItem?]
        var next = 0
        var bytesRead: Int64
        var isLast: Bool
        var failure: Error?
    }

    private let source: RecordSource
    private let transform: (@Sendable (SourceItem) -> SourceItem?)?
    private let handoff: BoundedHandoff<Batch>
    private let batchSize: Int
    private var started = false
    private var current = Batch(items: [], bytesRead: 0, isLast: false, failure: nil)
    /// Items the consumer is done with, handed back a batch at a time so that the background
    /// thread, which allocated them, frees them (see ``retire(_:)``).
    private var retiring: [SourceItem] = []
    private let retired = LockedValue<[[SourceItem]]>([])

    /// - Parameter transform: work to do on each item on the background thread too, such as
    ///   validation: the item to hand over instead, or nil to hand over the item itself.
    public init(
        _ source: RecordSource, batchSize: Int = 512, depth: Int = 8,
        transform: (@Sendable (SourceItem) -> SourceItem?)? = nil
    ) {
        self.source = source
        self.transform = transform
        self.batchSize = batchSize
        handoff = BoundedHandoff(depth: depth)
    }

    deinit {
        handoff.cancel()
    }

    public var name: String { source.name }
    public var totalBytes: Int64? { source.totalBytes }

    /// The source's progress as of the batch being handed out now.
    public var bytesRead: Int64 { current.bytesRead }

    private func start() {
        started = true
        let handoff = self.handoff
        let batchSize = self.batchSize
        let transform = self.transform
        let retired = self.retired
        // Only the background thread touches the source from here on.
        WorkerThread.start(name: "ckport read-ahead", stackSize: 8 << 20, handing: source) { source in
            while true {
                // What the consumer handed back is freed here, where it was allocated (outside
                // the lock: the consumer may be waiting to hand back more).
                _ = retired.withLock { list -> [[SourceItem]] in
                    let taken = list
                    list = []
                    return taken
                }
                var items: [SourceItem?] = []
                items.reserveCapacity(batchSize)
                var failure: Error?
                var ended = false
                do {
                    while items.count < batchSize {
                        guard let item = try source.next() else {
                            ended = true
                            break
                        }
                        if let replaced = transform?(item) { items.append(replaced) } else { items.append(item) }
                    }
                } catch {
                    failure = error
                    ended = true
                }
                let batch = Batch(items: items, bytesRead: source.bytesRead, isLast: ended, failure: failure)
                if !handoff.put(batch) || ended { return }
            }
        }
    }

    /// Hands back an item the consumer is done with, to be freed on the background thread
    /// that read it. Freeing a record on another thread than the one that allocated it waits
    /// for that thread's malloc arena lock, for every string and array in it: the writer of
    /// an import, the slower of the two threads, spent about a tenth of its instructions on
    /// that (callgrind, 50,000 records). Once the source has ended, items are freed at once.
    public func retire(_ item: consuming SourceItem) {
        guard !current.isLast else { return }
        retiring.append(item)
        guard retiring.count >= batchSize else { return }
        let full = retiring
        retiring = []
        retiring.reserveCapacity(batchSize)
        retired.withLock { $0.append(full) }
    }

    public func next() throws -> SourceItem? {
        while true {
            if current.next < current.items.count {
                current.next += 1
                return current.items[current.next - 1].take()
            }
            if current.isLast {
                // What was handed back after the background thread ended is freed here: a
                // source that has ended keeps nothing (an import of a chain of bundles would
                // otherwise hold each one's last batches until the end).
                if !retiring.isEmpty || !retired.withLock({ $0.isEmpty }) {
                    retiring = []
                    retired.withLock { $0 = [] }
                }
                if let failure = current.failure { throw failure }
                return nil
            }
            if !started { start() }
            current = handoff.take()
        }
    }
}
