import CPlatform
import Foundation
import Records

/// Ctrl-C and SIGTERM, and cancelled tasks, turned into an error that long work throws where it
/// can stop cleanly: every row a query reads or a write stores checks for it, so a transaction
/// rolls back and outputs are discarded as for any other failure.
///
/// What is checked is the operation under way (``Cancellation/current``): a signal cancels the
/// operation the command line runs (see ``whenInterrupted(_:)``); a library caller cancels one
/// operation by cancelling the task that awaits it (``Cancellation/operation(_:)``,
/// which the asynchronous store calls run in, ties the two), and the work beside it goes on.
public enum Interruption {
    /// Catches SIGINT and SIGTERM from now on: the first is held for ``whenInterrupted(_:)``
    /// (one that comes before it is called is handed over when it is), a second exits at once
    /// with status 130.
    public static func install() { ckport_install_interrupt_handler() }

    /// Calls `interrupt` with the first signal's number, on a thread of its own (not in the
    /// signal handler), once it comes.
    public static func whenInterrupted(_ interrupt: @escaping @Sendable (Int32) -> Void) {
        WorkerThread.start(name: "ckport signals") {
            interrupt(ckport_wait_for_interrupt())
        }
    }

    /// Whether the operation under way was asked to stop.
    public static var requested: Bool { reason != nil }

    /// Why the operation under way was asked to stop (a signal's number, or
    /// ``Cancellation/cancelledTask``), nil while it was not.
    public static var reason: Int32? {
        guard Cancellation.anyCancelled else { return nil }
        return Cancellation.current?.stopReason
    }

    /// Throws ``InterruptedError`` once the operation under way was asked to stop.
    @inline(__always) public static func check() throws {
        if let reason { throw InterruptedError(signal: reason) }
    }
}

/// The work stopped because SIGINT or SIGTERM asked it to, or its task was cancelled.
public struct InterruptedError: CKPortError, Sendable, Equatable {
    public var category: ErrorCategory { .environment }

    /// The signal's number; ``Cancellation/cancelledTask`` for a cancelled task.
    public var signal: Int32

    public init(signal: Int32) { self.signal = signal }
    public var description: String {
        switch signal {
        case 15: "terminated"
        case Cancellation.cancelledTask: "cancelled"
        default: "interrupted"
        }
    }
}
