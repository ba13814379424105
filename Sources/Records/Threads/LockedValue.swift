import Synchronization

/// A value behind a lock, that a class (or a static) can keep and closures capture: a
/// `Mutex` of the standard library, which cannot be copied, in a box that can be shared.
final class LockedValue<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) { mutex = Mutex(value) }

    func withLock<T: Sendable, E: Error>(_ body: (inout Value) throws(E) -> T) throws(E) -> T {
        try mutex.withLock { (value: inout sending Value) throws(E) -> T in try body(&value) }
    }
}
