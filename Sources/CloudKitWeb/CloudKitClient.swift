import Foundation
import Records

/// An HTTP request to CloudKit Web Services, and its answer.
public struct CloudKitHTTPRequest: Sendable {
    public var method: String
    public var url: URL
    public var headers: [(name: String, value: String)]
    public var body: Data

    public init(method: String, url: URL, headers: [(name: String, value: String)], body: Data) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }
}

public struct CloudKitHTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: Data
    /// A file whose bytes are the body instead of `body`, which a ``WebServing/WebServer`` sends a
    /// piece at a time; removed once sent when `removesBodyFile`.
    public var bodyFile: String?
    public var removesBodyFile = false

    public init(status: Int, headers: [(name: String, value: String)] = [], body: Data) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }
}

/// What carries requests to a server: HTTP in production, the emulator's handler in-process
/// in tests. Throws when no answer came (the connection failed or was cut).
public protocol CloudKitTransport: Sendable {
    func send(_ request: CloudKitHTTPRequest) async throws -> CloudKitHTTPResponse
}

/// How requests prove who sends them.
public enum CloudKitCredentials: Sendable {
    /// A token kept in a file: its first line, without surrounding white space. Tokens are read
    /// from files (or the environment), never from command lines, where others could see them.
    public static func token(fromFile path: String) throws -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let line = text.split(separator: "\n").first.map({ $0.trimmingCharacters(in: .whitespacesAndNewlines) }),
            !line.isEmpty
        else {
            throw CloudKitRequestError.unreadableToken(path: path)
        }
        return line
    }

    /// A server-to-server key: the public database only.
    case serverToServer(ServerToServerKey)
    /// An API token and a user's web auth token: the private and shared databases (and the
    /// public one as that user). The web auth token changes with every answer.
    case webToken(apiToken: String, webAuthToken: String)
    /// An API token alone: the public database, read as nobody in particular; every other
    /// request is answered AUTHENTICATION_REQUIRED with the URL where a user signs in.
    case apiToken(String)

    /// `text` with the values of `ckAPIToken=` and `ckWebAuthToken=` (and any `ck…Token=`)
    /// hidden: `…ckWebAuthToken=…&…`. For text a server sent back (a proxy's error page that
    /// echoes the address asked for) before it reaches a message or a log.
    public static func redactingTokens(_ text: String) -> String {
        guard text.contains("Token=") else { return text }
        var out = ""
        var rest = Substring(text)
        while let marker = rest.range(of: "Token=") {
            let name = rest[..<marker.lowerBound].reversed().prefix { $0.isLetter }
            out += rest[..<marker.upperBound]
            rest = rest[marker.upperBound...]
            if String(name.reversed()).hasPrefix("ck") {
                let value = rest.prefix { !"&\" '<>()[],;\n\t\r".contains($0) }
                if !value.isEmpty { out += "…" }
                rest = rest.dropFirst(value.count)
            }
        }
        return out + rest
    }
}

/// No answer could be had, after the retries the policy allows.
public struct CloudKitUnavailable: CKPortError, Sendable {
    public var operation: String
    public var attempts: Int
    public var lastProblem: String

    public init(operation: String, attempts: Int, lastProblem: String) {
        self.operation = operation
        self.attempts = attempts
        self.lastProblem = lastProblem
    }

    public var category: ErrorCategory { .environment }
    public var description: String {
        "CloudKit did not answer \(operation)" + (attempts == 1 ? "" : " after \(attempts) attempts")
            + ": \(lastProblem)"
    }
}

/// Sends CloudKit Web Services requests for one database: signs them or adds the tokens,
/// keeps the newest web auth token, and retries as the policy and the server say.
public actor CloudKitClient {
    nonisolated public let database: CloudKitDatabase
    private var credentials: CloudKitCredentials
    private let transport: CloudKitTransport
    /// How failed requests are retried.
    nonisolated public let policy: RetryPolicy
    private let sleep: @Sendable (Double) async throws -> Void
    /// Hears of every wait before a retry: the operation, the seconds, and why.
    private let onRetry: (@Sendable (String, Double, String) -> Void)?
    /// Hears of every new web auth token as it arrives. CloudKit spends a token on use, so a
    /// program that may be killed keeps each one at once (the one it sent no longer works).
    private let onWebAuthToken: (@Sendable (String) -> Void)?

    public init(
        database: CloudKitDatabase, credentials: CloudKitCredentials, transport: CloudKitTransport,
        policy: RetryPolicy = RetryPolicy(),
        onRetry: (@Sendable (String, Double, String) -> Void)? = nil,
        onWebAuthToken: (@Sendable (String) -> Void)? = nil,
        sleep: @escaping @Sendable (Double) async throws -> Void = {
            try await Task.sleep(nanoseconds: UInt64($0 * 1_000_000_000))
        }
    ) throws {
        if case .serverToServer = credentials, database.scope != .public {
            throw CloudKitRequestError.keyNeedsPublicDatabase(database.scope)
        }
        self.database = database
        self.credentials = credentials
        self.transport = transport
        self.policy = policy
        self.sleep = sleep
        self.onRetry = onRetry
        self.onWebAuthToken = onWebAuthToken
    }

    /// The web auth token to use next, after the rotations so far (nil with a key).
    public var webAuthToken: String? {
        if case .webToken(_, let token) = credentials { return token }
        return nil
    }

    /// POSTs `body` to `operation` (GET for `zones/list`) and returns the answer's body;
    /// throws ``CloudKitServerError`` for an error answer, ``CloudKitUnavailable`` when none
    /// came.
    public func send(_ operation: String, body: Data = Data()) async throws -> Data {
        // Each answer brings the next web auth token (the reference says the one sent is spent;
        // captures of the service show it still working): requests signed in
        // with one go one at a time. Keys sign each request alone, so those run side by side.
        let chained: Bool
        if case .serverToServer = credentials { chained = false } else { chained = true }
        if chained { await takeTurn() }
        defer { if chained { endTurn() } }
        var attempt = 0
        while true {
            attempt += 1
            let request = try makeRequest(operation, body: body)
            var failure = RetryPolicy.Failure.transport
            var problem = ""
            do {
                let response = try await transport.send(request)
                if let rotated = response.header("X-Apple-CloudKit-Web-Auth-Token"), !rotated.isEmpty {
                    switch credentials {
                    case .webToken(let api, _), .apiToken(let api):
                        credentials = .webToken(apiToken: api, webAuthToken: rotated)
                        onWebAuthToken?(rotated)
                    case .serverToServer: break
                    }
                }
                if (200..<300).contains(response.status) { return response.body }
                if let error = CloudKitServerError.parse(status: response.status, body: response.body) {
                    failure = .server(retryAfter: error.retryAfter, busy: error.isRetryable)
                    problem = error.description
                    guard let wait = policy.delay(after: attempt, failure: failure) else {
                        if let asked = error.retryAfter, asked > policy.longestWait, attempt < policy.maxAttempts {
                            throw CloudKitUnavailable(
                                operation: operation, attempts: attempt,
                                lastProblem:
                                    "\(problem); it asked to wait \(Self.duration(asked)), longer than the \(Self.duration(policy.longestWait)) ckport waits"
                            )
                        }
                        guard error.isRetryable else { throw error }
                        throw CloudKitUnavailable(operation: operation, attempts: attempt, lastProblem: problem)
                    }
                    onRetry?(operation, wait, problem)
                    try await sleep(wait)
                    continue
                }
                guard response.status >= 500 || response.status == 429 else {
                    throw CloudKitServerError(
                        serverErrorCode: "HTTP_\(response.status)",
                        reason: CloudKitCredentials.redactingTokens(
                            String(decoding: response.body.prefix(200), as: UTF8.self)),
                        status: response.status)
                }
                failure = .transport
                problem = "HTTP \(response.status) without an error dictionary"
            } catch let error as CloudKitServerError {
                throw error
            } catch let error as CloudKitUnavailable {
                throw error
            } catch is CancellationError {
                throw CancellationError()
            } catch let error as ConnectionFailure where error.isRefused {
                // Nothing listens there: waiting would not change that.
                throw CloudKitUnavailable(operation: operation, attempts: attempt, lastProblem: error.description)
            } catch {
                failure = .transport
                problem = CloudKitCredentials.redactingTokens("\(error)")
            }
            guard let wait = policy.delay(after: attempt, failure: failure) else {
                throw CloudKitUnavailable(operation: operation, attempts: attempt, lastProblem: problem)
            }
            onRetry?(operation, wait, problem)
            try await sleep(wait)
        }
    }

    /// A wait as people say it: `45 s`, `5 min`, `2 h 10 min`.
    static func duration(_ seconds: Double) -> String {
        if seconds < 120 { return "\(Int(seconds.rounded())) s" }
        let minutes = Int((seconds / 60).rounded())
        return minutes < 120 ? "\(minutes) min" : "\(minutes / 60) h\(minutes % 60 == 0 ? "" : " \(minutes % 60) min")"
    }

    /// Tells whoever hears of retries (the `onRetry` handler) of a wait a caller decided on:
    /// records CloudKit asked to send again later, say.
    public func announceWait(_ operation: String, seconds: Double, reason: String) {
        onRetry?(operation, seconds, reason)
    }

    /// Waits `seconds` as the client waits between attempts (a test's client may not wait at all).
    public func pause(_ seconds: Double) async throws {
        try await sleep(seconds)
    }

    /// POSTs an asset's bytes to the URL `assets/upload` gave for it (signed by CloudKit
    /// already) and returns the answer, `{"singleFile": {…}}`. Retried as any request.
    public func upload(_ bytes: Data, to url: URL) async throws -> Data {
        try await sendAsIs(
            CloudKitHTTPRequest(
                method: "POST", url: url, headers: [("Content-Type", "application/octet-stream")], body: bytes),
            what: "an asset upload")
    }

    /// Downloads an asset from the URL a record gives for it (signed by CloudKit already: no
    /// token is added). Retried as any request.
    public func download(_ url: URL) async throws -> Data {
        try await sendAsIs(
            CloudKitHTTPRequest(method: "GET", url: url, headers: [], body: Data()), what: "an asset download")
    }

    /// Sends a request to an address CloudKit signed, as it is, retrying after failures that
    /// left no answer.
    private func sendAsIs(_ request: CloudKitHTTPRequest, what: String) async throws -> Data {
        var attempt = 0
        while true {
            attempt += 1
            var problem: String
            do {
                let response = try await transport.send(request)
                if (200..<300).contains(response.status) { return response.body }
                problem = "HTTP \(response.status)"
                guard response.status >= 500 || response.status == 429 else {
                    if let error = CloudKitServerError.parse(status: response.status, body: response.body) {
                        throw error
                    }
                    throw CloudKitServerError(
                        serverErrorCode: "HTTP_\(response.status)",
                        reason: "\(what) at \(request.url.host ?? "?") failed", status: response.status)
                }
            } catch let error as CloudKitServerError {
                throw error
            } catch is CancellationError {
                throw CancellationError()
            } catch let error as ConnectionFailure where error.isRefused {
                throw CloudKitUnavailable(operation: what, attempts: attempt, lastProblem: error.description)
            } catch {
                problem = "\(error)"
            }
            guard let wait = policy.delay(after: attempt, failure: .transport) else {
                throw CloudKitUnavailable(operation: what, attempts: attempt, lastProblem: problem)
            }
            onRetry?(what, wait, problem)
            try await sleep(wait)
        }
    }

    private var turnTaken = false
    private var waitingForTurn: [CheckedContinuation<Void, Never>] = []

    private func takeTurn() async {
        if !turnTaken {
            turnTaken = true
            return
        }
        await withCheckedContinuation { waitingForTurn.append($0) }
    }

    private func endTurn() {
        if waitingForTurn.isEmpty { turnTaken = false } else { waitingForTurn.removeFirst().resume() }
    }

    private func makeRequest(_ operation: String, body: Data) throws -> CloudKitHTTPRequest {
        let method = CloudKitClient.getOperations.contains(operation) ? "GET" : "POST"
        let sent = method == "GET" ? Data() : body
        let scope: CloudKitDatabase.Scope? = CloudKitClient.publicOperations.contains(operation) ? .public : nil
        var headers: [(name: String, value: String)] = method == "POST" ? [("Content-Type", "application/json")] : []
        switch credentials {
        case .serverToServer(let key):
            headers += try key.headers(body: sent, path: database.path(operation, scope: scope))
            return CloudKitHTTPRequest(
                method: method, url: database.url(operation, scope: scope), headers: headers, body: sent)
        case .webToken(let api, let web):
            let url = database.url(
                operation,
                query: [
                    URLQueryItem(name: "ckAPIToken", value: api), URLQueryItem(name: "ckWebAuthToken", value: web),
                ], scope: scope)
            return CloudKitHTTPRequest(method: method, url: url, headers: headers, body: sent)
        case .apiToken(let api):
            return CloudKitHTTPRequest(
                method: method,
                url: database.url(operation, query: [URLQueryItem(name: "ckAPIToken", value: api)], scope: scope),
                headers: headers, body: sent)
        }
    }

    /// The operations CloudKit Web Services reads with GET; every other one is a POST.
    static let getOperations: Set<String> = ["zones/list", "users/current"]
    /// The operations CloudKit answers under the public database only, whichever database a
    /// client speaks to ("Fetching Current User Identity": `…/public/users/current`).
    static let publicOperations: Set<String> = ["users/current"]
}
