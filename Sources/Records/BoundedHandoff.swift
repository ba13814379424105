import Foundation

/// Hands elements from one producer thread to one consumer, in order, with at most `depth`
/// waiting, so that memory stays bounded however far the producer could run ahead. A consumer
/// that goes away cancels it, and the producer's next `put` says to stop.
///
/// `PrefetchingSource` (batches of records) and the bundle reader's read-ahead (chunks of
/// decompressed bytes) are both built on it.
package final class BoundedHandoff<Element>: @unchecked Sendable {
    private let condition = NSCondition()
    private var waiting: [Element] = []
    private var cancelled = false
    private let depth: Int

    package init(depth: Int) {
        precondition(depth > 0, "a handoff needs room for one element")
        self.depth = depth
    }

    /// Producer: waits for room and adds `element`; false when the consumer has gone, and the
    /// producer should stop.
    package func put(_ element: Element) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while waiting.count >= depth && !cancelled { condition.wait() }
        if cancelled { return false }
        waiting.append(element)
        condition.broadcast()
        return true
    }

    /// Consumer: waits for the next element.
    package func take() -> Element {
        condition.lock()
        defer { condition.unlock() }
        while waiting.isEmpty { condition.wait() }
        let element = waiting.removeFirst()
        condition.broadcast()
        return element
    }

    /// Consumer: no more elements are wanted; wakes a producer waiting for room.
    package func cancel() {
        condition.lock()
        cancelled = true
        waiting.removeAll()
        condition.broadcast()
        condition.unlock()
    }
}
