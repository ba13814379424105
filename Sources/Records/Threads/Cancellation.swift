import Foundation
import Synchronization

/// One operation's request to stop: Ctrl-C for the command it interrupts, a cancelled task for
/// the work it started. Long work checks it where it can stop cleanly (a row read or stored, a
/// chunk written), so a transaction rolls back and outputs are discarded as for any failure.
///
/// The operation under way is ``current``, a task-local value: work started inside it (a
/// child task, or a thread started with ``WorkerThread``) sees the same one, and cancelling an
/// operation cancels what it started, never the work beside it. An operation started inside
/// another is cancelled with it (its `parent`) or on its own.
public final class Cancellation: Sendable {
    /// The signal that asked to stop (2 for SIGINT, 15 for SIGTERM), ``cancelledTask`` for a
    /// cancelled task, 0 while nothing has asked.
    private let reason = Atomic<Int32>(0)
    private let parent: Cancellation?

    /// The reason of an operation whose task was cancelled (not a signal).
    public static let cancelledTask: Int32 = -1

    /// An operation inside `parent` (by default the one under way): cancelled when it is.
    public init(inside parent: Cancellation? = Cancellation.current) {
        self.parent = parent
    }

    /// The operation under way in this task (or on this thread), nil outside any.
    @TaskLocal public static var current: Cancellation?

    /// Asks the operation, and every one started inside it, to stop; the first reason stays.
    public func cancel(signal: Int32 = Cancellation.cancelledTask) {
        if reason.compareExchange(expected: 0, desired: signal, ordering: .relaxed).exchanged {
            Cancellation.cancelled.add(1, ordering: .relaxed)
        }
    }

    /// How many operations this process has cancelled. Long work checks for cancellation at
    /// every row; while nothing has been cancelled, that check is this one load (a few
    /// nanoseconds), not a look-up of the task's ``current`` operation (tens of them).
    private static let cancelled = Atomic<Int>(0)

    /// Whether any operation of this process has been cancelled.
    public static var anyCancelled: Bool { cancelled.load(ordering: .relaxed) != 0 }

    /// Why the operation was asked to stop, nil while it was not: the outermost reason (a
    /// signal that stopped the command, rather than the cancelled task it stopped it through).
    public var stopReason: Int32? {
        if let outer = parent?.stopReason { return outer }
        let own = reason.load(ordering: .relaxed)
        return own != 0 ? own : nil
    }

    /// Whether the operation was asked to stop.
    public var isCancelled: Bool { stopReason != nil }

    /// Runs `body` as an operation of its own: cancelling the task that runs it (or
    /// cancelling the operation it runs inside) cancels it.
    public static func operation<T>(_ body: () async throws -> T) async throws -> T {
        let operation = Cancellation()
        return try await withTaskCancellationHandler {
            try await Cancellation.$current.withValue(operation) { try await body() }
        } onCancel: {
            operation.cancel()
        }
    }

    /// ``operation(_:)`` for work that hands the operation on itself (to a dispatch queue or a
    /// thread, which do not carry task-local values), and cannot fail.
    public static func withOperation<T>(_ body: (Cancellation) async -> T) async -> T {
        let operation = Cancellation()
        return await withTaskCancellationHandler {
            await Cancellation.$current.withValue(operation) { await body(operation) }
        } onCancel: {
            operation.cancel()
        }
    }
}

/// A thread for the synchronous half of a pipeline (reading ahead, writing behind, decoding
/// beside), which works for the operation that started it: ``Cancellation/current`` there is
/// the starter's.
public enum WorkerThread {
    /// Starts a thread that runs `body` with `owned`, which the caller hands over: from here on
    /// the new thread is its only user (the caller keeps no other use of it, or uses it again only
    /// after the thread has ended and said so through a lock).
    public static func start<Owned>(
        name: String, stackSize: Int? = nil, handing owned: Owned, _ body: @escaping @Sendable (Owned) -> Void
    ) {
        let handover = Handover(value: owned)
        let operation = Cancellation.current
        let thread = Thread {
            Cancellation.$current.withValue(operation) { body(handover.value) }
        }
        thread.name = name
        if let stackSize { thread.stackSize = stackSize }
        thread.start()
    }

    /// Starts a thread that runs `body`.
    public static func start(name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) {
        start(name: name, stackSize: stackSize, handing: ()) { _ in body() }
    }

    /// A value passed from the thread that starts a worker to the worker.
    ///
    /// `@unchecked Sendable`: the value moves, it is not shared. ``start(name:stackSize:handing:_:)``
    /// documents the promise its caller makes: once handed over, only the new thread uses it.
    private struct Handover<Value>: @unchecked Sendable {
        let value: Value
    }
}
