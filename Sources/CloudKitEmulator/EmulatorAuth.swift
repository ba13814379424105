import CloudKitWeb
import Foundation

/// A person's sign-in: its tokens all work until it ends.
struct SignInSession {
    var user: String
    var signedInAt: Date
    var lifetime: TimeInterval
    /// The tokens handed out, oldest first; the oldest go once there are many (a long push
    /// turns thousands over).
    var issued: [String] = []
}

/// Who a request comes from, and the token its answer carries.
struct Caller {
    var user: String
    var nextToken: String?
}

enum Authentication {
    case caller(Caller)
    case refused(CloudKitHTTPResponse)
}

extension EmulatedContainer {
    /// At most this many tokens of one sign-in are remembered.
    static let tokensKept = 1000

    func startSession(user: String, keepSignedIn: Bool) -> Int {
        nextSession += 1
        sessions[nextSession] = SignInSession(
            user: user, signedInAt: now,
            lifetime: keepSignedIn ? WebAuthTokenLifetime.keptSignedIn : WebAuthTokenLifetime.standard)
        return nextSession
    }

    /// A new token of sign-in `session`, shaped like Apple's: a partition number, `54`, 432
    /// characters of base64 and the base64 of a small JSON object, joined by `__` (so it holds
    /// `+`, `/` and `=`).
    func issueToken(for session: Int) -> String {
        var random = SystemRandomNumberGenerator()
        let key = Data((0..<324).map { _ in UInt8.random(in: 0...255, using: &random) }).base64EncodedString()
        let cookie = Data((0..<48).map { _ in UInt8.random(in: 0...255, using: &random) }).base64EncodedString()
        let tail = Data("{\"X-APPLE-WEBAUTH-PCS-Cloudkit\":\"\(cookie)\"}".utf8).base64EncodedString()
        let token = "106__54__\(key)__\(tail)"
        tokens[token] = session
        sessions[session]!.issued.append(token)
        if sessions[session]!.issued.count > EmulatedContainer.tokensKept {
            tokens[sessions[session]!.issued.removeFirst()] = nil
        }
        return token
    }

    /// The query string's items, read as CloudKit reads them: as a form, where `+` is a space
    /// and `%XX` a byte. A token sent with a bare `+` arrives with a space in its place.
    static func formItems(_ url: URL) -> [String: String] {
        guard let query = URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedQuery else {
            return [:]
        }
        var items: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text)
            }
            let name = decode(parts[0])
            if items[name] == nil { items[name] = parts.count > 1 ? decode(parts[1]) : "" }
        }
        return items
    }

    /// Checks a request's credentials: a server-to-server signature, or an API token and a web
    /// auth token (`users/*` and the private and shared databases take only those).
    func authenticate(_ request: CloudKitHTTPRequest, scope: CloudKitDatabase.Scope, operation: String)
        -> Authentication
    {
        if let keyID = request.header(ServerToServerKey.keyIDHeader) {
            guard scope == .public, !operation.hasPrefix("users/") else {
                return .refused(
                    error(
                        403, "ACCESS_DENIED", "server-to-server keys reach the public database's records and zones only"
                    ))
            }
            guard let pem = keys[keyID], let date = request.header(ServerToServerKey.dateHeader),
                let signature = request.header(ServerToServerKey.signatureHeader),
                ServerToServerKey.verify(
                    signature: signature, publicKeyPEM: pem, date: date, body: request.body, path: request.url.path)
            else {
                return .refused(error(401, "AUTHENTICATION_FAILED", "Authentication failed"))
            }
            // The date is the caller's clock, which runs on while a test has this one frozen for
            // sign-ins: it is held against the real clock, moved as far as the test moved this one.
            guard let sent = ISO8601DateFormatter().date(from: date),
                abs(sent.timeIntervalSince(Date().addingTimeInterval(clockOffset))) <= settings.clockSkew
            else {
                return .refused(error(401, "AUTHENTICATION_FAILED", "Authentication failed"))
            }
            return .caller(Caller(user: "_server", nextToken: nil))
        }
        let query = EmulatedContainer.formItems(request.url)
        guard let api = query["ckAPIToken"], apiTokens.contains(api) else {
            return .refused(error(401, "AUTHENTICATION_FAILED", "Authentication failed"))
        }
        let signInPage = signInAddress(base: request.url, apiToken: api)
        guard let web = query["ckWebAuthToken"], !web.isEmpty else {
            return .refused(
                error(421, "AUTHENTICATION_REQUIRED", "request needs authorization", redirectURL: signInPage))
        }
        // A token CloudKit never issued (or one mangled on the way, a `+` read as a space)
        // fails as any bad credential does.
        guard let id = tokens[web], let session = sessions[id] else {
            return .refused(error(401, "AUTHENTICATION_FAILED", "Authentication failed"))
        }
        guard now < session.signedInAt.addingTimeInterval(session.lifetime) else {
            return .refused(
                error(421, "AUTHENTICATION_REQUIRED", "request needs authorization", redirectURL: signInPage))
        }
        // Each answer carries a new token of the same sign-in; the one used still works (as in
        // captures of the real service, where the reference says it would not).
        return .caller(Caller(user: session.user, nextToken: issueToken(for: id)))
    }

    private func signInAddress(base: URL, apiToken: String) -> String {
        var page = URLComponents()
        page.scheme = base.scheme
        page.host = base.host
        page.port = base.port
        page.path = "/signin"
        page.percentEncodedQuery = "ckAPIToken=" + CloudKitDatabase.percentEncoded(apiToken)
        return page.url!.absoluteString
    }

    /// The sign-in page: a browser that opens it is signed in as the registered user at once
    /// (ticking "Keep me signed in" when the settings or `keep=1` say so) and sent to the
    /// callback with a new web auth token, percent-encoded.
    func signInPage(_ request: CloudKitHTTPRequest) -> CloudKitHTTPResponse {
        let query = EmulatedContainer.formItems(request.url)
        guard let api = query["ckAPIToken"], apiTokens.contains(api) else {
            return error(401, "AUTHENTICATION_FAILED", "Authentication failed")
        }
        guard let callback = settings.signInCallback, let target = URLComponents(string: callback) else {
            return error(
                400, "BAD_REQUEST", "this API token has no sign-in callback (ckport-emulator --sign-in-callback URL)")
        }
        let keep = query["keep"] == "1" || settings.keepSignedIn
        let token = issueToken(for: startSession(user: signInUser, keepSignedIn: keep))
        var address = target
        address.percentEncodedQuery =
            (target.percentEncodedQuery.map { $0 + "&" } ?? "") + "ckWebAuthToken="
            + CloudKitDatabase.percentEncoded(token)
        return CloudKitHTTPResponse(status: 302, headers: [("Location", address.url!.absoluteString)], body: Data())
    }
}
