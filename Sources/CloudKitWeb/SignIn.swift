import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization
import WebServing

/// Signing a person in with their Apple ID, for a web auth token of their own: CloudKit answers
/// a request that carries only the API token with AUTHENTICATION_REQUIRED and a `redirectURL`;
/// the person opens it in a browser and signs in; CloudKit then sends the browser to the API
/// token's sign-in callback (set to "URL Redirect" in CloudKit Console) with the new token in
/// the `ckWebAuthToken` query parameter. ``SignInCallback`` is that callback on a loopback port.
public enum CloudKitSignIn {
    /// The URL where the person signs in, as CloudKit gives it.
    public static func signInURL(database: CloudKitDatabase, apiToken: String, transport: CloudKitTransport)
        async throws -> String
    {
        let client = try CloudKitClient(
            database: database, credentials: .apiToken(apiToken), transport: transport,
            policy: RetryPolicy(maxAttempts: 3))
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
/// token it brings, from that browser only.
///
/// The person opens ``startURL`` (not CloudKit's sign-in address directly): that page gives
/// their browser a cookie holding a random state value, then sends it on to CloudKit. When
/// CloudKit sends the browser back to the callback, the cookie comes with it; a token that
/// arrives without the state (another user on the machine, or a web page making a request to
/// the loopback port) is refused, as is a request whose `Host` is not the loopback address (a
/// page that renamed itself to 127.0.0.1), and a second token that differs from the first.
public final class SignInCallback: Sendable {
    private let server: WebServer
    private let arrival: Arrival
    /// The path the callback is registered under.
    public let path: String
    /// The random value only this sign-in's browser is given.
    let state: String
    static let cookie = "ckport-sign-in"

    private init(server: WebServer, arrival: Arrival, path: String, state: String) {
        self.server = server
        self.arrival = arrival
        self.path = path
        self.state = state
    }

    /// Starts the callback on 127.0.0.1:`port` (0: any free port). `signInURL`: where the
    /// start page sends the browser (CloudKit's sign-in address).
    public static func start(port: Int, path: String = "/callback", signInURL: @escaping @Sendable () -> String?)
        async throws -> SignInCallback
    {
        var random = SystemRandomNumberGenerator()
        let state = (0..<4).map { _ in String(format: "%016llx", random.next() as UInt64) }.joined()
        let arrival = Arrival()
        let cookie = SignInCallback.cookie
        @Sendable func page(_ status: HTTPResponse.Status, _ text: String, html: Bool = false) -> Response {
            Response(
                status: status,
                headers: [
                    .contentType: html ? "text/html; charset=utf-8" : "text/plain; charset=utf-8",
                    .cacheControl: "no-store",
                ],
                body: ResponseBody(byteBuffer: ByteBuffer(string: text + "\n")))
        }
        let bound = ListeningAddress()
        let router = Router()
        // Only the loopback names: a page that points its own name at 127.0.0.1 says it.
        router.add(
            middleware: HostCheckMiddleware(bound, allows: HostCheck.loopbackOnly) { _ in
                page(.misdirectedRequest, "This server answers for 127.0.0.1:\(bound.current?.port ?? port) only.")
            })
        router.get("/start") { request, _ -> Response in
            guard request.uri.queryParameters.get("state") == state, let target = signInURL() else {
                return page(.notFound, "Not here.")
            }
            return Response(
                status: .found,
                headers: [
                    .location: target, .cacheControl: "no-store",
                    .setCookie: "\(cookie)=\(state); Path=/; HttpOnly; SameSite=Lax; Max-Age=3600",
                ])
        }
        router.get(RouterPath(path)) { request, _ -> Response in
            guard let token = request.uri.queryParameters.get("ckWebAuthToken"), !token.isEmpty else {
                return page(
                    .badRequest,
                    "No ckWebAuthToken came with this request: is the API token's sign-in callback set to URL Redirect?"
                )
            }
            let cookies = request.headers[values: .cookie].flatMap { $0.split(separator: ";") }.map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            let given = cookies.first { $0.hasPrefix(cookie + "=") }.map { String($0.dropFirst(cookie.count + 1)) }
            guard SignInCallback.same(given ?? "", state) else {
                arrival.refused()
                return page(
                    .forbidden,
                    "This sign-in did not start from the address ckport printed: open that address in your browser.")
            }
            guard arrival.deliver(token) else {
                return page(.conflict, "ckport already has a different token from this sign-in; this one is refused.")
            }
            return page(
                .ok,
                "<!doctype html><title>ckport</title><p>Signed in. ckport has the token; you can close this page.</p>",
                html: true)
        }
        router.get("**") { _, _ in page(.notFound, "Not here.") }
        let server = try await WebServer.start(
            router, port: port, limits: WebServer.Limits(connections: 16, body: 64 << 10, idle: 15), address: bound)
        return SignInCallback(server: server, arrival: arrival, path: path, state: state)
    }

    /// Compares two strings in time that does not depend on where they differ.
    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// The URL to set as the API token's sign-in callback.
    public var callbackURL: URL { URL(string: "http://127.0.0.1:\(server.port)\(path)")! }

    /// The address the person opens: it sends their browser to CloudKit's sign-in page, with
    /// this sign-in's state.
    public var startURL: URL { URL(string: "http://127.0.0.1:\(server.port)/start?state=\(state)")! }

    /// Stops listening; returns once the server has stopped.
    public func stop() async { await server.stop() }

    /// The token, once the browser brought it; nil after `seconds` without it.
    public func wait(seconds: Double) async -> String? { await arrival.wait(seconds: seconds) }

    /// How many tokens came without this sign-in's state, and were refused.
    public var refusedCount: Int { arrival.refusals }
}

/// The first token the callback received, and who waits for it.
private final class Arrival: Sendable {
    private struct State {
        var token: String?
        var refusedTokens = 0
        var waiters: [Int: CheckedContinuation<String?, Never>] = [:]
        var nextWaiter = 0
    }
    /// The continuations are resumed after the lock is let go.
    private let state = Mutex(State())

    /// Takes the token; false when a different one came first.
    func deliver(_ token: String) -> Bool {
        let outcome: (taken: Bool, waiting: [CheckedContinuation<String?, Never>]) = state.withLock { state in
            if let first = state.token { return (first == token, []) }
            state.token = token
            let waiting = Array(state.waiters.values)
            state.waiters = [:]
            return (true, waiting)
        }
        for waiter in outcome.waiting { waiter.resume(returning: token) }
        return outcome.taken
    }

    func refused() {
        state.withLock { $0.refusedTokens += 1 }
    }

    var refusals: Int { state.withLock { $0.refusedTokens } }

    /// The token, once it came; nil after `seconds` without it, or when the waiting task is
    /// cancelled.
    func wait(seconds: Double) async -> String? {
        let first = await withTaskGroup(of: String?.self) { group in
            group.addTask { await self.arrival() }
            group.addTask {
                try? await Task.sleep(for: .seconds(seconds))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        return first ?? state.withLock { $0.token }
    }

    /// Waits for the token until it comes or the task is cancelled (then nil).
    private func arrival() async -> String? {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
                enum Now {
                    case token(String)
                    case cancelled, waiting
                }
                let now: Now = state.withLock { state in
                    if let token = state.token { return .token(token) }
                    if Task.isCancelled { return .cancelled }
                    state.waiters[id] = continuation
                    return .waiting
                }
                switch now {
                case .token(let token): continuation.resume(returning: token)
                case .cancelled: continuation.resume(returning: nil)
                case .waiting: break
                }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(returning: nil)
        }
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
