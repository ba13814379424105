import CloudKitWeb
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import Records
import StoreCore
import WebServing
import _NIOFileSystem

/// The answers at `/feeds/NAME.ics?token=TOKEN`: the feed's calendar to a holder of one of its
/// tokens, 404 to anyone else (an unknown feed, a missing, wrong or revoked token: the same
/// answer, so that nothing tells them apart).
///
/// Each answer carries an ETag (from the store's identity, its change token and the feed's
/// definition) and Last-Modified; a request whose `If-None-Match` names the current ETag, or
/// whose `If-Modified-Since` is not before the last change, gets 304 without the calendar being
/// built. A calendar once built is kept in a private file and served again until the store
/// changes. The token is checked against the store on every request, so a revoked token stops
/// working at once; it is compared by its hash, in constant time, and never written anywhere.
public final class FeedResponder: Sendable {
    /// A built calendar: its file (removed when nothing holds it) and what it was built from.
    private final class Built: Sendable {
        let path: String
        let etag: String
        let lastModified: Date
        let size: Int

        init(path: String, etag: String, lastModified: Date, size: Int) {
            self.path = path
            self.etag = etag
            self.lastModified = lastModified
            self.size = size
        }

        deinit { unlink(path) }
    }

    private let sites: BrowseSites
    private let built = NIOLockedValueBox<[String: Built]>([:])

    /// `sites`: handles on the store the feeds are kept in.
    public init(_ sites: BrowseSites) { self.sites = sites }

    /// Headers of every feed answer: nothing is sniffed or sent on, and caches between the
    /// server and the subscriber keep nothing (the address holds a token).
    static let headers: [(name: String, value: String)] = [
        ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"),
        ("Cache-Control", "private, no-cache"),
    ]

    /// Adds the feed route to `router`.
    public func add<Context: RequestContext>(to router: Router<Context>) {
        router.get("/feeds/:file") { request, context in
            await self.answer(request, file: context.parameters.get("file") ?? "")
        }
    }

    /// The answer to a GET (or HEAD) of `/feeds/FILE`.
    func answer(_ request: Request, file: String) async -> Response {
        let name = file.hasSuffix(".ics") ? String(file.dropLast(4)) : ""
        guard Feeds.isValidName(name), let token = Self.token(in: request.uri.query) else { return Self.notFound }
        let ifNoneMatch = request.headers[.ifNoneMatch]
        let ifModifiedSince = request.headers[.ifModifiedSince].flatMap(HTTPDate.parse)
        let cached = built.withLockedValue { $0[name] }
        let sent = NIOLockedValueBox<Built?>(nil)
        let outcome = await sites.answer { site in
            do {
                return try self.respond(
                    site.store, name: name, token: token, cached: cached, ifNoneMatch: ifNoneMatch,
                    ifModifiedSince: ifModifiedSince, sent: sent)
            } catch {
                // Nothing of the store's state to someone who may hold no token.
                return CloudKitHTTPResponse(
                    status: 500, headers: [("Content-Type", "text/plain; charset=utf-8")],
                    body: Data("the feed could not be built\n".utf8))
            }
        }
        guard let file = sent.withLockedValue({ $0 }) else {
            var fields = HTTPFields()
            for (header, value) in Self.headers + outcome.headers {
                if let header = HTTPField.Name(header) { fields.append(HTTPField(name: header, value: value)) }
            }
            return Response(
                status: HTTPResponse.Status(code: outcome.status), headers: fields,
                body: ResponseBody(byteBuffer: ByteBuffer(data: outcome.body)))
        }
        return Self.served(file, name: name)
    }

    /// The answer, worked out on a store handle's own thread: 404, 304, or 200 with the
    /// calendar built (and kept) when the store changed since it was last built.
    private func respond(
        _ store: any RecordStoring, name: String, token: String, cached: Built?, ifNoneMatch: String?,
        ifModifiedSince: Date?, sent: NIOLockedValueBox<Built?>
    ) throws -> CloudKitHTTPResponse {
        let found = try store.readSession { session -> (Feeds.Feed, ChangeToken)? in
            guard let feed = try Feeds.feed(named: name, in: session) else { return nil }
            return (feed, session.currentToken)
        }
        // The token is hashed and compared whether or not the feed exists: an unknown name takes
        // the time a wrong token does.
        let admitted = Feeds.admits(token, found?.0.tokens ?? [])
        guard let (feed, current) = found, admitted else { return Self.notFoundAnswer }
        let etag = try Self.etag(store: store.storeID, token: current, definition: feed.definition)
        if let ifNoneMatch {
            // RFC 9110 §13.1.2: a list of entity tags, weak ones compared weakly, or "*".
            let tags = ifNoneMatch.split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "W/", with: "")
            }
            if tags.contains(etag) || tags.contains("*") { return notModified(etag, cached: cached) }
        } else if let ifModifiedSince, let cached, cached.etag == etag,
            Int64(ifModifiedSince.timeIntervalSince1970) >= Int64(cached.lastModified.timeIntervalSince1970)
        {
            return notModified(etag, cached: cached)
        }
        if let cached, cached.etag == etag {
            sent.withLockedValue { $0 = cached }
            return Self.ok(cached)
        }
        // Built from one state of the store: the ETag is that state's, which may be newer
        // than the one read above.
        let folder = try PrivateFiles.folder()
        let (descriptor, path) = try PrivateFiles.create("feed", in: folder)
        close(descriptor)
        // A feed whose selection is empty today is a calendar of no events: its subscribers
        // see the last one go.
        let result: ExportResult
        do {
            result = try Feeds.write(feed.definition, from: store, to: path)
        } catch {
            unlink(path)
            throw error
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
        let made = Built(
            path: path,
            etag: try Self.etag(store: store.storeID, token: result.token, definition: feed.definition),
            // Whole seconds, as HTTP dates have them, and a second back: never later than the
            // answer's Date header, which the server renews once a second.
            lastModified: Date(timeIntervalSince1970: Double(Int64(Date().timeIntervalSince1970) - 1)), size: size)
        built.withLockedValue { $0[name] = made }
        sent.withLockedValue { $0 = made }
        return Self.ok(made)
    }

    private func notModified(_ etag: String, cached: Built?) -> CloudKitHTTPResponse {
        var headers = [("ETag", etag)]
        if let cached, cached.etag == etag { headers.append(("Last-Modified", HTTPDate.format(cached.lastModified))) }
        return CloudKitHTTPResponse(status: 304, headers: headers, body: Data())
    }

    /// The marker of a 200 whose body is the built file (``answer(_:file:)`` sends it).
    private static func ok(_ built: Built) -> CloudKitHTTPResponse {
        CloudKitHTTPResponse(status: 200, headers: [("ETag", built.etag)], body: Data())
    }

    private static func served(_ built: Built, name: String) -> Response {
        var fields = HTTPFields()
        for (header, value) in headers + [
            ("Content-Type", "text/calendar; charset=utf-8"), ("ETag", built.etag),
            ("Last-Modified", HTTPDate.format(built.lastModified)),
            ("Content-Disposition", "inline; filename=\"\(name).ics\""),
        ] {
            if let header = HTTPField.Name(header) { fields.append(HTTPField(name: header, value: value)) }
        }
        // The body holds `built`, so its file stays while it is sent, even when a newer
        // calendar has taken its place.
        return Response(
            status: .ok, headers: fields,
            body: ResponseBody(contentLength: built.size) { writer in
                try await FileSystem.shared.withFileHandle(forReadingAt: FilePath(built.path)) { handle in
                    for try await chunk in handle.readChunks(chunkLength: .kibibytes(64)) {
                        try await writer.write(chunk)
                    }
                }
                try await writer.finish(nil)
            })
    }

    /// The entity tag of a feed built from state `token` of store `store`.
    static func etag(store: String, token: ChangeToken, definition: Feeds.Definition) throws -> String {
        let text = "\(store)\n\(token.description)\n\(try Feeds.json(definition))\n\(CKPortVersion.current)"
        return "\"" + Feeds.sha256Hex(text).prefix(32) + "\""
    }

    /// The `token` parameter of a query string.
    static func token(in query: String?) -> String? {
        for pair in (query ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0] == "token" {
                let value = String(parts[1]).removingPercentEncoding ?? ""
                return value.isEmpty ? nil : value
            }
        }
        return nil
    }

    private static let notFoundAnswer = CloudKitHTTPResponse(
        status: 404, headers: [("Content-Type", "text/plain; charset=utf-8")], body: Data("not found\n".utf8))

    static var notFound: Response {
        var fields = HTTPFields()
        for (header, value) in headers + [("Content-Type", "text/plain; charset=utf-8")] {
            if let header = HTTPField.Name(header) { fields.append(HTTPField(name: header, value: value)) }
        }
        return Response(
            status: .notFound, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(string: "not found\n")))
    }
}

/// `ckport serve --feeds-only`: a server that answers nothing but `/feeds/…` — the listener to
/// put beyond this machine (behind a TLS proxy), where the browser view, which shows every
/// record to whoever reaches it, must not be.
public final class FeedServer: Sendable {
    private let server: WebServer

    private init(server: WebServer) { self.server = server }

    public var port: Int { server.port }
    public var baseURL: URL { server.baseURL }

    /// Serves the feeds of the store `sites` read on `host`:`port`; any other address gets 404,
    /// any method but GET and HEAD 405. Requests for any host name are answered (the phones
    /// reach it by the proxy's name): what guards a feed is its token.
    public static func start(
        _ sites: BrowseSites, host: String = "127.0.0.1", port: Int = 0,
        limits: WebServer.Limits = WebServer.Limits(connections: 256, body: 1 << 10, idle: 15)
    ) async throws -> FeedServer {
        let router = Router(options: .autoGenerateHeadEndpoints)
        router.add(
            middleware: ReadOnlyMiddleware { _ in
                Response(
                    status: .methodNotAllowed,
                    headers: [.allow: "GET, HEAD", .contentType: "text/plain; charset=utf-8"],
                    body: ResponseBody(byteBuffer: ByteBuffer(string: "only GET and HEAD are answered\n")))
            })
        router.add(middleware: FeedNotFoundMiddleware())
        FeedResponder(sites).add(to: router)
        router.get("**") { _, _ in FeedResponder.notFound }
        return FeedServer(server: try await WebServer.start(router, host: host, port: port, limits: limits))
    }

    public func stop() async { await server.stop() }
}

/// The router's own 404 (an address no route takes) as the feeds' plain one.
struct FeedNotFoundMiddleware: RouterMiddleware {
    func handle(
        _ request: Request, context: BasicRequestContext,
        next: (Request, BasicRequestContext) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            return FeedResponder.notFound
        }
    }
}

/// HTTP dates (RFC 9110 §5.6.7): IMF-fixdate written, and the three forms a client may send read.
enum HTTPDate {
    private static func formatter(_ format: String) -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = format
        return formatter
    }

    static func format(_ date: Date) -> String {
        formatter("EEE, dd MMM yyyy HH:mm:ss 'GMT'").string(from: date)
    }

    static func parse(_ text: String) -> Date? {
        for format in ["EEE, dd MMM yyyy HH:mm:ss 'GMT'", "EEEE, dd-MMM-yy HH:mm:ss 'GMT'", "EEE MMM d HH:mm:ss yyyy"] {
            if let date = formatter(format).date(from: text.trimmingCharacters(in: .whitespaces)) { return date }
        }
        return nil
    }
}
