import CloudKitWeb
import Formats
import Foundation
import Records
import Synchronization

/// Why a CalDAV server did not do what was asked.
public struct CalDAVError: CKPortError, Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// 401 or 403: the user or password is wrong, or the user may not do this.
        case refused
        /// The address is not a calendar collection, and none could be found or made there.
        case notACalendar
        /// The server answered what CalDAV does not allow (a body that is not a multistatus…).
        case badAnswer
        /// 5xx, 507 or no answer, after every retry.
        case unavailable
        /// Any other status.
        case failed
    }

    public var kind: Kind
    /// The request: its method and address (never a credential).
    public var request: String
    public var status: Int?
    public var detail: String

    public init(kind: Kind, request: String, status: Int?, detail: String) {
        self.kind = kind
        self.request = request
        self.status = status
        self.detail = detail
    }

    public var category: ErrorCategory {
        switch kind {
        case .refused: .authentication
        case .notACalendar: .usage
        case .badAnswer: .invalidInput
        case .unavailable, .failed: .environment
        }
    }

    public var description: String {
        let status = self.status.map { " answered \($0)" } ?? ""
        switch kind {
        case .refused:
            return
                "the CalDAV server refused \(request)\(status): \(detail) (check the user and the password file; nothing was changed by this request)"
        case .notACalendar, .badAnswer, .failed:
            return "\(request)\(status): \(detail)"
        case .unavailable:
            return "the CalDAV server could not be reached or kept failing (\(request)\(status)): \(detail)"
        }
    }
}

/// A CalDAV (RFC 4791) and WebDAV (RFC 4918) client: the requests publishing and pulling a
/// calendar make, each answer's multistatus read with libxml2 under ckport's limits, HTTP Basic
/// authentication, and retries with backoff for 5xx, 507 and failed connections.
public final class CalDAVClient: Sendable {
    public struct Credentials: Sendable {
        public var user: String
        public var password: String

        public init(user: String, password: String) {
            self.user = user
            self.password = password
        }
    }

    /// One `<response>` of a multistatus: its address and the properties found (200), by
    /// local name, each with its text or the hrefs inside it.
    public struct Resource: Sendable, Equatable {
        public var href: String
        /// The status of a response without properties (a member gone, in a sync report).
        public var status: Int?
        public var properties: [String: Property] = [:]

        public var etag: String? {
            properties["getetag"].map { $0.text.trimmingCharacters(in: .whitespacesAndNewlines) }
        }
        public var isCalendar: Bool { properties["resourcetype"]?.children.contains("calendar") ?? false }
        public var isCollection: Bool { properties["resourcetype"]?.children.contains("collection") ?? false }
    }

    public struct Property: Sendable, Equatable {
        public var text: String = ""
        /// The hrefs inside it (current-user-principal, calendar-home-set).
        public var hrefs: [String] = []
        /// The local names of the elements directly inside it (resourcetype's `calendar`).
        public var children: [String] = []
    }

    private let transport: any CloudKitTransport
    private let credentials: Credentials?
    private let retry: RetryPolicy
    private let sent = Mutex<[String]>([])

    /// The method of every request sent so far, in order (retries included).
    public var methodsSent: [String] { sent.withLock { $0 } }

    public init(
        transport: any CloudKitTransport = HTTPClientTransport(timeout: 120), credentials: Credentials?,
        retry: RetryPolicy = RetryPolicy(maxAttempts: 6, baseDelay: 0.5, maxDelay: 20)
    ) {
        self.transport = transport
        self.credentials = credentials
        self.retry = retry
    }

    /// Sends a request: with the credentials, retried with backoff while the server answers
    /// 5xx, 429 or 423 (Locked: Xandikos says so while another request holds its git index) or
    /// cannot be reached; 401 and 403 are ``CalDAVError/Kind/refused``.
    public func send(
        _ method: String, _ url: URL, headers: [(String, String)] = [], body: Data = Data(),
        forbiddenIsAnswer: Bool = false
    ) async throws -> CloudKitHTTPResponse {
        var all = headers.map { (name: $0.0, value: $0.1) }
        if let credentials {
            let basic = Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString()
            all.append((name: "Authorization", value: "Basic \(basic)"))
        }
        if !body.isEmpty && !all.contains(where: { $0.name.lowercased() == "content-type" }) {
            all.append((name: "Content-Type", value: "application/xml; charset=utf-8"))
        }
        let shown = "\(method) \(Self.shown(url))"
        var attempt = 0
        while true {
            attempt += 1
            sent.withLock { $0.append(method) }
            let answer: CloudKitHTTPResponse
            do {
                answer = try await transport.send(
                    CloudKitHTTPRequest(method: method, url: url, headers: all, body: body))
            } catch let error as CancellationError {
                throw error
            } catch {
                guard let delay = retry.delay(after: attempt, failure: .transport) else {
                    throw CalDAVError(kind: .unavailable, request: shown, status: nil, detail: "\(error)")
                }
                try await Task.sleep(for: .seconds(delay))
                continue
            }
            // 403 is also how a server says a precondition failed (a sync token it no longer
            // knows, a UID it holds elsewhere): a caller that reads those takes it as an answer.
            if answer.status == 401 || (answer.status == 403 && !forbiddenIsAnswer) {
                throw CalDAVError(
                    kind: .refused, request: shown, status: answer.status,
                    detail: answer.status == 401 ? "not signed in" : "not allowed")
            }
            // 501 (not implemented) and 505 (version) do not pass; the others may.
            if (answer.status >= 500 && answer.status != 501 && answer.status != 505) || answer.status == 429
                || answer.status == 423
            {
                let retryAfter = answer.header("Retry-After").flatMap { Self.retryAfter($0) }
                guard
                    let delay = retry.delay(
                        after: attempt, failure: .server(retryAfter: retryAfter, busy: true))
                else {
                    let asked =
                        retryAfter.map { $0 > retry.longestWait ? " (it asked for a wait of \(Int($0)) s)" : "" } ?? ""
                    throw CalDAVError(
                        kind: .unavailable, request: shown, status: answer.status,
                        detail:
                            "gave up after \(attempt) attempt\(attempt == 1 ? "" : "s")\(asked): \(Self.excerpt(answer.body))"
                    )
                }
                try await Task.sleep(for: .seconds(delay))
                continue
            }
            return answer
        }
    }

    /// The seconds a `Retry-After` asks for: a number of seconds or an HTTP date (RFC 9110
    /// §10.2.3), a date past as none.
    static func retryAfter(_ value: String, now: Date = Date()) -> Double? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Double(text), seconds >= 0, seconds.isFinite { return seconds }
        return HTTPDate.parse(text).map { max(0, $0.timeIntervalSince(now)) }
    }

    /// PROPFIND `props` (each `namespace local-name`) of `url` at `depth`: the resources
    /// found; nil when the address does not exist (404).
    public func propfind(_ url: URL, depth: Int, props: [(namespace: String, name: String)]) async throws
        -> [Resource]?
    {
        let body = Self.xml(
            "propfind", ns: Self.dav,
            inner: "<D:prop>" + props.map { "<X:\($0.name) xmlns:X=\"\($0.namespace)\"/>" }.joined() + "</D:prop>")
        let answer = try await send(
            "PROPFIND", url, headers: [("Depth", String(depth))], body: Data(body.utf8))
        if answer.status == 404 { return nil }
        guard answer.status == 207 else {
            throw CalDAVError(
                kind: .failed, request: "PROPFIND \(Self.shown(url))", status: answer.status,
                detail: Self.excerpt(answer.body))
        }
        let found = try Self.multistatus(answer.body, request: "PROPFIND \(Self.shown(url))")
        // A server may say "not found" inside the multistatus (Xandikos does) rather than with 404.
        if depth == 0, let only = found.first, only.status == 404 || only.status == 410 { return nil }
        return found
    }

    /// MKCALENDAR at `url` with a display name.
    public func makeCalendar(_ url: URL, displayName: String) async throws {
        let body = """
            <?xml version="1.0" encoding="utf-8"?>
            <C:mkcalendar xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:set><D:prop>\
            <D:displayname>\(Self.escaped(displayName))</D:displayname>\
            <C:supported-calendar-component-set><C:comp name="VEVENT"/><C:comp name="VTODO"/></C:supported-calendar-component-set>\
            </D:prop></D:set></C:mkcalendar>
            """
        let answer = try await send("MKCALENDAR", url, body: Data(body.utf8))
        guard answer.status == 201 else {
            throw CalDAVError(
                kind: answer.status == 405 || answer.status == 409 ? .notACalendar : .failed,
                request: "MKCALENDAR \(Self.shown(url))", status: answer.status,
                detail: answer.status == 409
                    ? "the collection above it does not exist"
                    : "the calendar could not be made: \(Self.excerpt(answer.body))"
            )
        }
    }

    /// What changed in a collection since `token` (RFC 6578 sync-collection; nil: everything):
    /// members changed or added, with their ETags, members removed (status 404), and the token
    /// to ask from next. ``SyncAnswer/unsupported`` when the server has no sync-collection,
    /// ``SyncAnswer/tokenExpired`` when it no longer knows the token.
    public func syncCollection(_ url: URL, token: String?) async throws -> SyncAnswer {
        let body = """
            <?xml version="1.0" encoding="utf-8"?>
            <D:sync-collection xmlns:D="DAV:"><D:sync-token>\(Self.escaped(token ?? ""))</D:sync-token>\
            <D:sync-level>1</D:sync-level><D:prop><D:getetag/></D:prop></D:sync-collection>
            """
        let answer = try await send("REPORT", url, body: Data(body.utf8), forbiddenIsAnswer: true)
        let text = String(decoding: answer.body.prefix(4096), as: UTF8.self)
        if (answer.status == 403 || answer.status == 409) && text.contains("valid-sync-token") {
            return .tokenExpired
        }
        if answer.status == 403 && token == nil {
            throw CalDAVError(
                kind: .refused, request: "REPORT \(Self.shown(url))", status: 403, detail: "not allowed")
        }
        if [400, 403, 404, 405, 415, 422, 501].contains(answer.status) { return .unsupported }
        guard answer.status == 207 else {
            throw CalDAVError(
                kind: .failed, request: "REPORT \(Self.shown(url))", status: answer.status,
                detail: Self.excerpt(answer.body))
        }
        let (resources, newToken) = try Self.multistatusWithToken(answer.body, request: "REPORT \(Self.shown(url))")
        guard let newToken, !newToken.isEmpty else {
            throw CalDAVError(
                kind: .badAnswer, request: "REPORT \(Self.shown(url))", status: 207,
                detail: "the sync-collection answer has no sync-token")
        }
        return .changes(resources, token: newToken)
    }

    /// How many parts a server may hand its changes out in (`syncChanges(_:token:)`).
    static let maximumParts = 1000

    /// sync-collection, whole: a server that hands its changes out in parts (RFC 6578 §3.6:
    /// the collection itself answers 507) is asked for the rest with each part's token, up to
    /// a thousand parts. Only members of `url` are in the answer, each once, as the last part
    /// that names it says.
    public func syncChanges(_ url: URL, token: String?) async throws -> SyncAnswer {
        let answer = try await syncCollection(url, token: token)
        guard case .changes(var resources, var next) = answer else { return answer }
        var parts = 1
        while resources.contains(where: { !Self.isMember($0.href, of: url) && $0.status == 507 }) {
            guard parts < Self.maximumParts else {
                throw CalDAVError(
                    kind: .badAnswer, request: "REPORT \(Self.shown(url))", status: 207,
                    detail: "the server handed out its changes in more than \(Self.maximumParts) parts")
            }
            guard case .changes(let more, let after) = try await syncCollection(url, token: next) else {
                throw CalDAVError(
                    kind: .badAnswer, request: "REPORT \(Self.shown(url))", status: nil,
                    detail: "the server refused the sync token it had just handed out")
            }
            resources = resources.filter { Self.isMember($0.href, of: url) } + more
            next = after
            parts += 1
        }
        var seen = Set<String>()
        var members: [Resource] = []
        for resource in resources.reversed() where Self.isMember(resource.href, of: url) {
            guard seen.insert(Self.canonicalPath(resource.href, base: url)).inserted else { continue }
            members.append(resource)
        }
        return .changes(members.reversed(), token: next)
    }

    /// Whether `href` names something inside the collection `collection`, not the collection.
    public static func isMember(_ href: String, of collection: URL) -> Bool {
        guard let url = resolve(href, against: collection) else { return false }
        let collectionPath = collection.path
        return url.path != collectionPath && url.path != collectionPath + "/" && url.path + "/" != collectionPath
    }

    public enum SyncAnswer: Sendable {
        case changes([Resource], token: String)
        case unsupported
        case tokenExpired
    }

    /// The calendar data and ETags of `hrefs` (RFC 4791 calendar-multiget): by href.
    public func multiget(_ collection: URL, hrefs: [String]) async throws -> [Resource] {
        let body = """
            <?xml version="1.0" encoding="utf-8"?>
            <C:calendar-multiget xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav">\
            <D:prop><D:getetag/><C:calendar-data/></D:prop>\
            \(hrefs.map { "<D:href>\(Self.escaped($0))</D:href>" }.joined())</C:calendar-multiget>
            """
        // No Depth header (RFC 4791 §7.9).
        let answer = try await send("REPORT", collection, body: Data(body.utf8))
        guard answer.status == 207 else {
            throw CalDAVError(
                kind: .failed, request: "REPORT \(Self.shown(collection))", status: answer.status,
                detail: Self.excerpt(answer.body))
        }
        return try Self.multistatus(answer.body, request: "REPORT \(Self.shown(collection))")
    }

    // MARK: Multistatus

    static let dav = "DAV:"
    static let caldav = "urn:ietf:params:xml:ns:caldav"

    /// The `<response>`s of a multistatus body, read with libxml2 under ckport's limits (depth,
    /// text size). Nothing outside DAV's response, href, propstat, status and prop is kept
    /// but the properties' text, hrefs and child names.
    static func multistatus(_ body: Data, request: String) throws -> [Resource] {
        try multistatusWithToken(body, request: request).resources
    }

    /// The responses, and the multistatus's own `sync-token` (RFC 6578), when it has one.
    static func multistatusWithToken(_ body: Data, request: String) throws -> (resources: [Resource], token: String?) {
        var resources: [Resource] = []
        var syncToken: String?
        do {
            let reader = try XMLReader(
                bytes: Array(body), name: request, limits: XMLReader.Limits(depth: 64, textBytes: 16 << 20))
            var stack: [(namespace: String?, name: String)] = []
            var current: Resource?
            var propstatProps: [String: Property] = [:]
            var propstatStatus: Int?
            var property: (name: String, value: Property)?
            var sawMultistatus = false
            while let event = try reader.next() {
                switch event {
                case .start:
                    let namespace = reader.namespaceURI
                    let name = reader.localName
                    let depth = stack.count
                    stack.append((namespace, name))
                    if depth == 0 {
                        guard namespace == dav, name == "multistatus" else {
                            throw CalDAVError(
                                kind: .badAnswer, request: request, status: 207,
                                detail: "the answer is not a multistatus")
                        }
                        sawMultistatus = true
                    } else if depth == 1, namespace == dav, name == "response" {
                        current = Resource(href: "")
                    } else if depth == 2, current != nil, namespace == dav, name == "propstat" {
                        propstatProps = [:]
                        propstatStatus = nil
                    } else if depth == 4, stack[3].name == "prop", stack[2].name == "propstat" {
                        property = (name, Property())
                    } else if depth == 5, property != nil {
                        property!.value.children.append(name)
                    }
                case .end:
                    guard let closed = stack.popLast() else { break }
                    let depth = stack.count
                    if depth == 1, closed.name == "response", let resource = current {
                        resources.append(resource)
                        current = nil
                    } else if depth == 2, closed.name == "propstat" {
                        if (propstatStatus ?? 200) == 200 {
                            current?.properties.merge(propstatProps) { _, new in new }
                        }
                    } else if depth == 4, let (name, value) = property {
                        propstatProps[name] = value
                        property = nil
                    }
                case .text(let text):
                    // Calendar data is kept as it is; only the short texts are trimmed.
                    var trimmed: String { text.trimmingCharacters(in: .whitespacesAndNewlines) }
                    guard let top = stack.last else { break }
                    let depth = stack.count - 1
                    if depth == 1, top.name == "sync-token", top.namespace == dav {
                        syncToken = (syncToken ?? "") + trimmed
                    } else if depth == 2, top.name == "href" {
                        current?.href += trimmed
                    } else if depth == 2, top.name == "status" {
                        current?.status = Self.statusCode(trimmed)
                    } else if depth == 3, top.name == "status", stack[2].name == "propstat" {
                        propstatStatus = Self.statusCode(trimmed)
                    } else if depth == 4, property != nil {
                        property!.value.text += text
                    } else if depth >= 5, property != nil, top.name == "href" {
                        property!.value.hrefs.append(trimmed)
                    }
                }
            }
            guard sawMultistatus else {
                throw CalDAVError(kind: .badAnswer, request: request, status: 207, detail: "the answer is empty")
            }
        } catch let error as XMLInputError {
            throw CalDAVError(
                kind: .badAnswer, request: request, status: 207,
                detail:
                    "its multistatus is not well-formed XML (line \(error.line), column \(error.column)): \(error.message.description)"
            )
        }
        return (resources, syncToken)
    }

    /// `HTTP/1.1 200 OK` → 200.
    static func statusCode(_ line: String) -> Int? {
        line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
    }

    static func xml(_ root: String, ns: String, inner: String) -> String {
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><D:\(root) xmlns:D=\"\(ns)\">\(inner)</D:\(root)>"
    }

    static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }

    /// An address for messages: without user, password, query or fragment.
    public static func shown(_ url: URL) -> String {
        guard var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "?" }
        parts.user = nil
        parts.password = nil
        parts.query = nil
        parts.fragment = nil
        return parts.string ?? "?"
    }

    /// The start of an answer's body, on one line, for messages.
    static func excerpt(_ body: Data) -> String {
        let text = String(decoding: body.prefix(300), as: UTF8.self)
            .split(whereSeparator: \.isNewline).joined(separator: " ")
        return text.isEmpty ? "no details" : ServerText.clean(text)
    }

    /// A collection's address as ckport names it in the store: scheme and host in lower case,
    /// the scheme's own port left out, the path (percent-encoded as given) ending in `/`. The
    /// same calendar reached as `…/family` or `https://DAV.example.org:443/…/family/` is one.
    public static func canonical(_ url: URL) -> URL {
        guard var parts = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return url }
        parts.scheme = parts.scheme?.lowercased()
        parts.host = parts.host?.lowercased()
        if (parts.scheme == "https" && parts.port == 443) || (parts.scheme == "http" && parts.port == 80) {
            parts.port = nil
        }
        parts.user = nil
        parts.password = nil
        parts.query = nil
        parts.fragment = nil
        if !parts.percentEncodedPath.hasSuffix("/") { parts.percentEncodedPath += "/" }
        return parts.url ?? url
    }

    /// The path of `href` (a path or an address, against `base`) in one spelling: each
    /// segment decoded and encoded again, every byte but the unreserved ones (RFC 3986)
    /// percent-encoded. Servers differ in what they encode (`@`, spaces); ckport's keys and
    /// requests use this form, which every server reads as the same address.
    public static func canonicalPath(_ href: String, base: URL) -> String {
        guard let url = resolve(href, against: base),
            let encoded = URLComponents(url: url, resolvingAgainstBaseURL: true)?.percentEncodedPath
        else { return href }
        return encoded.split(separator: "/", omittingEmptySubsequences: false).map { segment in
            let decoded = String(segment).removingPercentEncoding ?? String(segment)
            return decoded.addingPercentEncoding(withAllowedCharacters: unreserved) ?? String(segment)
        }.joined(separator: "/")
    }

    static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// `href` (a path or an address) against `base`.
    public static func resolve(_ href: String, against base: URL) -> URL? {
        URL(string: href, relativeTo: base)?.absoluteURL
    }
}

enum ServerText {
    /// Text from a server, with control characters shown as `?` (a terminal runs none).
    static func clean(_ text: String) -> String {
        String(text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0) })
    }
}
