import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers

/// Headers every answer carries, errors included.
public struct HeadersMiddleware<Context: RequestContext>: RouterMiddleware {
    let headers: HTTPFields

    public init(_ headers: [(name: String, value: String)]) {
        var fields = HTTPFields()
        for (name, value) in headers {
            if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) }
        }
        self.headers = fields
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        }
        for field in headers where response.headers[field.name] == nil { response.headers.append(field) }
        return response
    }
}

/// Answers only the methods a read-only site takes (GET and HEAD): anything else gets 405 with
/// an `Allow` header, whatever the path.
public struct ReadOnlyMiddleware<Context: RequestContext>: RouterMiddleware {
    let refusal: @Sendable (Request) -> Response

    /// `refusal`: the 405 answer (a page or JSON, as the site writes its errors).
    public init(refusal: @escaping @Sendable (Request) -> Response) { self.refusal = refusal }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        guard request.method == .get || request.method == .head else { return refusal(request) }
        return try await next(request, context)
    }
}

/// Where a server listens, once it does: the port is the system's choice when 0 was asked for,
/// so it is known only after the server started.
public final class ListeningAddress: Sendable {
    private let value = NIOLockedValueBox<(port: Int, bound: String)?>(nil)

    public init() {}

    public func set(port: Int, bound: String) { value.withLockedValue { $0 = (port, bound) } }

    public var current: (port: Int, bound: String)? { value.withLockedValue { $0 } }
}

/// Answers 421 to a request whose `Host` does not name this server: a page of another site
/// whose name was pointed at 127.0.0.1 (DNS rebinding) reads nothing. Until the address is
/// known, every request is refused.
public struct HostCheckMiddleware<Context: RequestContext>: RouterMiddleware {
    let address: ListeningAddress
    let allows: @Sendable (_ host: String?, _ port: Int, _ bound: String) -> Bool
    let refusal: @Sendable (Request) -> Response

    public init(
        _ address: ListeningAddress,
        allows: @escaping @Sendable (_ host: String?, _ port: Int, _ bound: String) -> Bool = HostCheck.allows,
        refusal: @escaping @Sendable (Request) -> Response
    ) {
        self.address = address
        self.allows = allows
        self.refusal = refusal
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        guard let listening = address.current,
            allows(request.head.authority, listening.port, listening.bound)
        else { return refusal(request) }
        return try await next(request, context)
    }
}

/// Which `Host` values name a server on this machine.
public enum HostCheck {
    /// 127.0.0.1 or localhost at `port`, or the address it was bound to; bound to every
    /// interface (0.0.0.0), any of this machine's addresses by number. A name (which a DNS
    /// trick could point here) is refused, as is a request without a Host.
    @Sendable public static func allows(_ host: String?, port: Int, bound: String) -> Bool {
        guard let host = host?.lowercased() else { return false }
        if ["127.0.0.1:\(port)", "localhost:\(port)", "\(bound):\(port)"].contains(host) { return true }
        guard bound == "0.0.0.0", host.hasSuffix(":\(port)") else { return false }
        let address = host.dropLast(":\(port)".count).split(separator: ".", omittingEmptySubsequences: false)
        // ASCII digits only: `isNumber` holds for digits of other scripts too, which no address has.
        return address.count == 4
            && address.allSatisfy { part in
                part.count <= 3 && part.utf8.allSatisfy { (48...57).contains($0) } && UInt8(part) != nil
            }
    }

    /// Only the loopback names at `port` (the sign-in callback's rule).
    @Sendable public static func loopbackOnly(_ host: String?, port: Int, bound: String) -> Bool {
        host == "127.0.0.1:\(port)" || host == "localhost:\(port)"
    }
}
