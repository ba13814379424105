import Foundation

/// Signing a person in with their Apple ID, for a web auth token of their own: CloudKit answers
/// a request that carries only the API token with AUTHENTICATION_REQUIRED and a `redirectURL`;
/// the person opens it in a browser and signs in; CloudKit then sends the browser to the API
/// token's sign-in callback (set to "URL Redirect" in CloudKit Console) with the new token in
/// the `ckWebAuthToken` query parameter. ``SignInCallback`` is that callback on a loopback port.
public enum CloudKitSignIn {
    /// The URL where the person signs in, as CloudKit gives it.
    public static func signInURL(database: CloudKitDatabase, apiToken: String, transport: CloudKitTransport) async throws -> String {
        let client = try CloudKitClient(database: database, credentials: .apiToken(apiToken), transport: transport, policy: RetryPolicy(maxAttempts: 3))
        do {
            _ = try await client.send("users/current")
        } catch let error as CloudKitServerError where error.code == .authenticationRequired {
            if let url = error.redirectURL { return url }
            throw error
        }
        throw CloudKitRequestError.signInNotOffered
    }
}

/// Waits on a loopback port for the browser's return from signing in, and takes the web auth
/// token it brings. Any other request to the port is answered 404 and otherwise ignored.
public final class SignInCallback: @unchecked Sendable {
    private let server: LoopbackHTTPServer
    private let arrival = Arrival()
    /// The path the callback is registered under.
    public let path: String

    public init(port: Int, path: String = "/callback") throws {
        self.path = path
        let arrival = self.arrival
        server = try LoopbackHTTPServer(port: port) { request in
            guard request.url.path == path else {
                return CloudKitHTTPResponse(status: 404, headers: [("Content-Type", "text/plain; charset=utf-8")], body: Data("Not here.\n".utf8))
            }
            let items = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems ?? []
            guard let token = items.first(where: { $0.name == "ckWebAuthToken" })?.value, !token.isEmpty else {
                return CloudKitHTTPResponse(status: 400, headers: [("Content-Type", "text/plain; charset=utf-8")],
                                            body: Data("No ckWebAuthToken came with this request: is the API token's sign-in callback set to URL Redirect?\n".utf8))
            }
            arrival.deliver(token)
            return CloudKitHTTPResponse(status: 200, headers: [("Content-Type", "text/html; charset=utf-8")],
                                        body: Data("<!doctype html><title>ckport</title><p>Signed in. ckport has the token; you can close this page.</p>\n".utf8))
        }
    }

    /// The URL to set as the API token's sign-in callback.
    public var callbackURL: URL { URL(string: "http://127.0.0.1:\(server.port)\(path)")! }

    public func start() { server.start() }
    public func stop() { server.stop() }

    /// The token, once the browser brought it; nil after `seconds` without it.
    public func wait(seconds: Double) -> String? { arrival.wait(seconds: seconds) }
}

/// The first token the callback received.
private final class Arrival: @unchecked Sendable {
    private let lock = NSLock()
    private let received = DispatchSemaphore(value: 0)
    private var token: String?

    func deliver(_ token: String) {
        lock.lock()
        let first = self.token == nil
        if first { self.token = token }
        lock.unlock()
        if first { received.signal() }
    }

    func wait(seconds: Double) -> String? {
        guard received.wait(timeout: .now() + seconds) == .success else { return nil }
        lock.lock()
        defer { lock.unlock() }
        return token
    }
}

/// How long a sign-in's web auth tokens last. CloudKit Web Services Reference ("Accessing
/// CloudKit Using an API Token"): 30 minutes after the sign-in, or two weeks when the person
/// ticked "Keep me signed in" on Apple's sign-in page. ckport cannot see which was chosen; a
/// token that still worked over 30 minutes after its sign-in shows the long one.
public enum WebAuthTokenLifetime {
    public static let standard: TimeInterval = 30 * 60
    public static let keptSignedIn: TimeInterval = 14 * 24 * 3600

    /// Where a sign-in's tokens stand at a moment.
    public enum Standing: Sendable, Equatable {
        /// No sign-in time is known (a token written by hand, or from the environment).
        case unknown
        /// Valid until `until`; `kept` says whether "Keep me signed in" is known to have been
        /// ticked (nil: not known, and `until` is the 30-minute end).
        case valid(until: Date, kept: Bool?)
        /// Past 30 minutes: valid until `keptUntil` only if "Keep me signed in" was ticked.
        case expiredUnlessKept(at: Date, keptUntil: Date)
        case expired(at: Date)
    }

    public static func standing(signedIn: Date?, lastAnswer: Date?, now: Date) -> Standing {
        guard let signedIn else { return .unknown }
        let shortEnd = signedIn.addingTimeInterval(standard)
        let longEnd = signedIn.addingTimeInterval(keptSignedIn)
        let provenLong = lastAnswer.map { $0.timeIntervalSince(signedIn) > standard } ?? false
        if provenLong { return now < longEnd ? .valid(until: longEnd, kept: true) : .expired(at: longEnd) }
        if now < shortEnd { return .valid(until: shortEnd, kept: nil) }
        if now < longEnd { return .expiredUnlessKept(at: shortEnd, keptUntil: longEnd) }
        return .expired(at: longEnd)
    }
}
