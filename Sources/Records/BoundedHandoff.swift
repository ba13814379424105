import Foundation

/// Hands elements from one producer thread to one consumer, in order, with at most `depth`
/// waiting, so that memory stays bounded however far the producer could run ahead. A consumer
/// that goes away cancels it, and the producer's next `put` says to stop.
///
/// `PrefetchingSource` (batches of records) and the bundle reader's read-ahead (chunks of
/// decompressed bytes) are both built on it.
package final class BoundedHandoff<Element: Sendable>: Sendable {
    private struct State {
        var waiting: [Element] = []
        var cancelled = false
    }
    private let state = Monitor(State())
    private let depth: Int

    package init(depth: Int) {
        precondition(depth > 0, "a handoff needs room for one element")
        self.depth = depth
    }

    /// Producer: waits for room and adds `element`; false when the consumer has gone, and the
    /// producer should stop.
    package func put(_ element: Element) -> Bool {
        let depth = self.depth
        return state.withLock(
            when: { $0.waiting.count < depth || $0.cancelled },
            then: { state in
                if state.cancelled { return false }
                state.waiting.append(element)
                return true
            })
    }

    /// Consumer: waits for the next element.
    package func take() -> Element {
        state.withLock(when: { !$0.waiting.isEmpty }, then: { $0.waiting.removeFirst() })
    }

    /// Consumer: waits for the next element; nil once the handoff is cancelled (by whichever
    /// side), so that a consumer on a thread of its own is never left waiting.
    package func takeUnlessCancelled() -> Element? {
        state.withLock(
            when: { !$0.waiting.isEmpty || $0.cancelled },
            then: { $0.cancelled ? nil : $0.waiting.removeFirst() })
    }

    /// Consumer: no more elements are wanted; wakes a producer waiting for room.
    package func cancel() {
        state.withLock { state in
            state.cancelled = true
            state.waiting.removeAll()
        }
    }
}
