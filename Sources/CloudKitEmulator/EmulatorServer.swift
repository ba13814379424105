import CloudKitWeb
import Foundation
import HTTPTypes
import Hummingbird
import WebServing

/// Puts an emulator on a loopback port, on a ``WebServer``: CloudKit Web Services' paths
/// (`/database/1/…`), the asset upload and download addresses it hands out, and its sign-in
/// page. Each request is answered by ``CloudKitEmulator/respond(_:)``, as the in-process
/// transport answers it; a fault that cuts the connection cuts it here.
public final class EmulatorServer: Sendable {
    public let emulator: CloudKitEmulator
    private let server: WebServer

    private init(emulator: CloudKitEmulator, server: WebServer) {
        self.emulator = emulator
        self.server = server
    }

    /// Starts serving `emulator` on 127.0.0.1:`port` (0: any free port).
    public static func start(_ emulator: CloudKitEmulator, port: Int = 0) async throws -> EmulatorServer {
        let router = Router()
        let bound = ListeningAddress()
        @Sendable func answer(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
            let exchange = try await CloudKitHTTPRequest(
                request, port: bound.current?.port ?? port, bodyLimit: 64 << 20)
            do {
                return try emulator.respond(exchange).served
            } catch {
                return CloudKitHTTPResponse.cutConnection
            }
        }
        router.get("/signin", use: answer)
        router.on("/upload/**", method: .post, use: answer)
        router.on("/upload/**", method: .put, use: answer)
        router.get("/download/**", use: answer)
        router.post("/database/1/**", use: answer)
        router.get("/database/1/**", use: answer)
        // Whatever else, by any method: CloudKit's NOT_FOUND, as the emulator words it.
        for method in [HTTPRequest.Method.get, .post, .put, .delete, .patch, .head] {
            router.on("**", method: method, use: answer)
        }
        let server = try await WebServer.start(router, port: port, address: bound)
        return EmulatorServer(emulator: emulator, server: server)
    }

    /// The port it listens on.
    public var port: Int { server.port }
    /// The server's base URL, for `--base-url`.
    public var baseURL: URL { server.baseURL }
    public func stop() async { await server.stop() }
}
