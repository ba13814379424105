import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Records

/// HTTP through swift-server's AsyncHTTPClient (SwiftNIO): persistent connections, TLS from
/// swift-nio-ssl, and request bodies written as they are. ckport's default: Foundation's
/// URLSession on Linux sends a request body in hundreds of small writes through its event
/// loop, which made a push of 200-operation requests spend most of its time in the kernel.
public final class HTTPClientTransport: CloudKitTransport, Sendable {
    private let client: HTTPClient
    private let timeout: TimeAmount
    /// The largest answer read: CloudKit's pages are far smaller; this stops a runaway server.
    private let maxAnswer = 256 << 20

    /// `timeout`: seconds a request may take, answer included, before it counts as failed.
    public init(timeout: TimeInterval = 60) {
        client = HTTPClientTransport.shared
        self.timeout = .milliseconds(Int64(timeout * 1000))
    }

    /// One client for the process, as `HTTPClient.shared`, but a connection that cannot be made
    /// fails the request at once instead of being tried again until the request's deadline:
    /// ckport's own retries (``RetryPolicy``) say each attempt, and a refused connection (nothing
    /// listens there) is not tried again at all. Never shut down, as the shared one.
    private static let shared: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.timeout.connect = .seconds(30)
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    public func send(_ request: CloudKitHTTPRequest) async throws -> CloudKitHTTPResponse {
        var outgoing = HTTPClientRequest(url: request.url.absoluteString)
        outgoing.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.headers { outgoing.headers.add(name: name, value: value) }
        if request.method != "GET" {
            outgoing.headers.replaceOrAdd(name: "Content-Length", value: String(request.body.count))
            outgoing.body = .bytes(request.body)
        }
        do {
            let response = try await client.execute(outgoing, timeout: timeout)
            let bytes = try await response.body.collect(upTo: maxAnswer)
            return CloudKitHTTPResponse(
                status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                body: Data(bytes.readableBytesView))
        } catch let error as IOError {
            throw ConnectionFailure(url: request.url, code: error.errnoCode, underlying: error)
        } catch let error as NIOConnectionError {
            // A host name: every address it resolved to was tried; refused when each refused.
            let codes = error.connectionErrors.map { ($0.error as? IOError)?.errnoCode }
            let code =
                !codes.isEmpty && codes.allSatisfy({ $0 == ECONNREFUSED })
                ? ECONNREFUSED : codes.compactMap { $0 }.first
            throw ConnectionFailure(url: request.url, code: code, underlying: error)
        }
    }
}

/// A request that got no answer because the connection failed, in words: "refused" when
/// nothing listens at the address, which no retry mends.
public struct ConnectionFailure: CKPortError, Sendable {
    public var category: ErrorCategory { .environment }
    /// The server, `host:port`.
    public var server: String
    /// The system's error number, when the connection failed with one.
    public var code: Int32?
    private var underlying: String

    init(url: URL, code: Int32?, underlying: any Error) {
        self.init(server: (url.host ?? "?") + (url.port.map { ":\($0)" } ?? ""), code: code, reason: "\(underlying)")
    }

    /// `reason`: what the connection's failure said, for a failure without an error number.
    public init(server: String, code: Int32?, reason: String) {
        self.server = server
        self.code = code
        underlying = reason
    }

    /// Nothing listens at the address: the server is not running there, or the address is wrong.
    public var isRefused: Bool { code == ECONNREFUSED }

    public var description: String {
        if isRefused { return "\(server) refused the connection (nothing is listening there)" }
        if let code { return "the connection to \(server) failed: \(String(cString: strerror(code)))" }
        return "the connection to \(server) failed: \(underlying)"
    }
}
