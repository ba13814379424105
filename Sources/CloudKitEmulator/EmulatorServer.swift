import CloudKitWeb
import Foundation

/// Puts an emulator on a loopback port (see ``LoopbackHTTPServer``).
public final class EmulatorServer: @unchecked Sendable {
    public let emulator: CloudKitEmulator
    private let server: LoopbackHTTPServer

    public init(emulator: CloudKitEmulator, port: Int = 0) throws {
        self.emulator = emulator
        server = try LoopbackHTTPServer(port: port) { request in try emulator.respond(request) }
    }

    /// The port it listens on (chosen by the system when 0 was asked for).
    public var port: Int { server.port }
    /// The server's base URL, for `--base-url`.
    public var baseURL: URL { server.baseURL }
    public func start() { server.start() }
    public func stop() { server.stop() }
}
