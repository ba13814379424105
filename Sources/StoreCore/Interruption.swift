import CPlatform
import Records

/// Ctrl-C and SIGTERM, turned into an error that long work throws where it can stop cleanly:
/// every row a query reads or a write stores checks for it, so a transaction rolls back and
/// outputs are discarded as for any other failure.
public enum Interruption {
    /// Catches SIGINT and SIGTERM from now on (a second signal exits at once).
    public static func install() { ckport_install_interrupt_handler() }

    /// Whether a signal asked to stop.
    public static var requested: Bool { ckport_interrupted() != 0 }

    /// Throws ``InterruptedError`` once a signal has asked to stop.
    @inline(__always) public static func check() throws {
        if ckport_interrupted() != 0 { throw InterruptedError(signal: ckport_interrupted()) }
    }
}

/// The work stopped because SIGINT or SIGTERM asked it to.
public struct InterruptedError: CKPortError, Sendable {
    public var category: ErrorCategory { .environment }

    public var signal: Int32

    public init(signal: Int32) { self.signal = signal }
    public var description: String { signal == 15 ? "terminated" : "interrupted" }
}
