import Foundation

/// Elements from a thread to a task, in order, at most `depth` waiting: the thread (a bulk
/// loop reading a store) waits for room, the task (sending to the network) suspends until an
/// element comes. Nothing blocks a task's thread.
package final class ThreadToTask<Element: Sendable>: Sendable {
    private struct State {
        var queue: [Element] = []
        var finished = false
        var failure: (any Error)?
        var cancelled = false
        var receiver: CheckedContinuation<Element?, any Error>?
    }
    private let state = Monitor(State())
    private let depth: Int

    package init(depth: Int) {
        precondition(depth > 0, "a bridge needs room for one element")
        self.depth = depth
    }

    /// Thread: waits for room and hands `element` on; false when the task has gone.
    package func put(_ element: Element) -> Bool {
        let depth = self.depth
        return state.withLock(
            when: { $0.queue.count < depth || $0.cancelled },
            then: { state in
                if state.cancelled { return false }
                if let receiver = state.receiver {
                    state.receiver = nil
                    receiver.resume(returning: element)
                } else {
                    state.queue.append(element)
                }
                return true
            })
    }

    /// Thread: no more elements; with `failure`, the task's next `next()` throws it.
    package func finish(throwing failure: (any Error)? = nil) {
        state.withLock { state in
            state.finished = true
            state.failure = failure
            if let receiver = state.receiver {
                state.receiver = nil
                if let failure { receiver.resume(throwing: failure) } else { receiver.resume(returning: nil) }
            }
        }
    }

    /// Task: the next element, nil after the last.
    package func next() async throws -> Element? {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Element?, any Error>) in
            state.withLock { state in
                if !state.queue.isEmpty {
                    continuation.resume(returning: state.queue.removeFirst())
                } else if let failure = state.failure {
                    continuation.resume(throwing: failure)
                } else if state.finished || state.cancelled {
                    continuation.resume(returning: nil)
                } else {
                    state.receiver = continuation
                }
            }
        }
    }

    /// Task: no more elements are wanted; the thread's next `put` returns false.
    package func cancel() {
        state.withLock { state in
            state.cancelled = true
            state.queue.removeAll()
            if let receiver = state.receiver {
                state.receiver = nil
                receiver.resume(returning: nil)
            }
        }
    }
}

/// Elements from a task to a thread, in order, at most `depth` waiting: the task (reading from
/// the network) suspends until there is room, the thread (a bulk loop writing a store) waits
/// for elements.
package final class TaskToThread<Element: Sendable>: Sendable {
    private struct State {
        var queue: [Element] = []
        var finished = false
        var failure: (any Error)?
        var cancelled = false
        var sender: (element: Element, continuation: CheckedContinuation<Bool, Never>)?
        var roomWaiter: CheckedContinuation<Bool, Never>?
    }
    private let state = Monitor(State())
    private let depth: Int

    package init(depth: Int) {
        precondition(depth > 0, "a bridge needs room for one element")
        self.depth = depth
    }

    /// Task: suspends until an element could be handed on without waiting (false when the
    /// thread has gone), so that the next one is made only once it has room.
    package func room() async -> Bool {
        let depth = self.depth
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            state.withLock { state in
                if state.cancelled {
                    continuation.resume(returning: false)
                } else if state.queue.count < depth && state.sender == nil {
                    continuation.resume(returning: true)
                } else {
                    state.roomWaiter = continuation
                }
            }
        }
    }

    /// Task: hands `element` on, suspending until there is room; false when the thread has gone.
    package func send(_ element: Element) async -> Bool {
        let depth = self.depth
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            state.withLock { state in
                if state.cancelled {
                    continuation.resume(returning: false)
                } else if state.queue.count < depth {
                    state.queue.append(element)
                    continuation.resume(returning: true)
                } else {
                    state.sender = (element, continuation)
                }
            }
        }
    }

    /// Task: no more elements; with `failure`, the thread's next `take()` throws it.
    package func finish(throwing failure: (any Error)? = nil) {
        state.withLock { state in
            state.finished = true
            state.failure = failure
        }
    }

    /// Thread: waits for the next element; nil after the last.
    package func take() throws -> Element? {
        try state.withLock(
            when: { !$0.queue.isEmpty || $0.finished || $0.cancelled },
            then: { (state) throws -> Element? in
                if !state.queue.isEmpty {
                    let element = state.queue.removeFirst()
                    if let waiting = state.sender {
                        state.sender = nil
                        state.queue.append(waiting.element)
                        waiting.continuation.resume(returning: true)
                    } else if let waiting = state.roomWaiter {
                        state.roomWaiter = nil
                        waiting.resume(returning: true)
                    }
                    return element
                }
                if let failure = state.failure { throw failure }
                return nil
            })
    }

    /// Thread: no more elements are wanted; a waiting task's `send` returns false.
    package func cancel() {
        state.withLock { state in
            state.cancelled = true
            state.queue.removeAll()
            if let waiting = state.sender {
                state.sender = nil
                waiting.continuation.resume(returning: false)
            }
            if let waiting = state.roomWaiter {
                state.roomWaiter = nil
                waiting.resume(returning: false)
            }
        }
    }
}

/// Runs `body` on a thread of its own and waits for it without holding a task's thread: for
/// the synchronous bulk loops (a store's reads and writes) behind an asynchronous operation.
package func onOwnThread<T: Sendable>(_ name: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let thread = Thread {
            continuation.resume(with: Result { try body() })
        }
        thread.name = name
        thread.stackSize = 8 << 20
        thread.start()
    }
}
