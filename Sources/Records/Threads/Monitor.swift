import Foundation
import Synchronization

/// State that threads share, and a condition to wait on until it is as a thread needs it: the
/// producer–consumer helpers (``BoundedHandoff``, ``SideThread``, ``BackgroundSink``, the
/// deflate workers) keep theirs in one. Every access holds the lock, and every access wakes
/// the threads that wait, so that they look again.
public final class Monitor<State>: Sendable {
    private let condition = NSCondition()
    private let state: Mutex<State>

    public init(_ state: sending State) {
        self.state = Mutex(state)
    }

    /// Runs `body` with the state, under the lock.
    public func withLock<T, E: Error>(_ body: (inout sending State) throws(E) -> sending T) throws(E) -> sending T {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        return try state.withLock(body)
    }

    /// Waits, letting the lock go meanwhile, until `ready` holds for the state, then runs
    /// `body` with it under the lock.
    public func withLock<T, E: Error>(
        when ready: (inout sending State) -> Bool, then body: (inout sending State) throws(E) -> sending T
    ) throws(E) -> sending T {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        while !state.withLock({ ready(&$0) }) { condition.wait() }
        return try state.withLock(body)
    }

    /// ``withLock(when:then:)`` that gives up at `deadline`: nil when `ready` did not hold by then.
    public func withLock<T, E: Error>(
        when ready: (inout sending State) -> Bool, before deadline: Date,
        then body: (inout sending State) throws(E) -> sending T
    ) throws(E) -> sending T? {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        while !state.withLock({ ready(&$0) }) {
            if !condition.wait(until: deadline) && !state.withLock({ ready(&$0) }) { return nil }
        }
        return try state.withLock(body)
    }
}
