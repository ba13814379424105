import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// HTTP through swift-server's AsyncHTTPClient (SwiftNIO): persistent connections, TLS from
/// swift-nio-ssl, and request bodies written as they are. ckport's default: Foundation's
/// URLSession on Linux sends a request body in hundreds of small writes through its event
/// loop, which made a push of 200-operation requests spend most of its time in the kernel.
public final class HTTPClientTransport: CloudKitTransport, @unchecked Sendable {
    private let client: HTTPClient
    private let timeout: TimeAmount
    /// The largest answer read: CloudKit's pages are far smaller; this stops a runaway server.
    private let maxAnswer = 256 << 20

    /// `timeout`: seconds a request may take, answer included, before it counts as failed.
    public init(timeout: TimeInterval = 60) {
        client = HTTPClient.shared
        self.timeout = .milliseconds(Int64(timeout * 1000))
    }

    public func send(_ request: CloudKitHTTPRequest) async throws -> CloudKitHTTPResponse {
        var outgoing = HTTPClientRequest(url: request.url.absoluteString)
        outgoing.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.headers { outgoing.headers.add(name: name, value: value) }
        if request.method != "GET" {
            outgoing.headers.replaceOrAdd(name: "Content-Length", value: String(request.body.count))
            outgoing.body = .bytes(request.body)
        }
        let response = try await client.execute(outgoing, timeout: timeout)
        let bytes = try await response.body.collect(upTo: maxAnswer)
        return CloudKitHTTPResponse(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                                    body: Data(bytes.readableBytesView))
    }
}
