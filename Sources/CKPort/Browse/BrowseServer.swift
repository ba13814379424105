import CloudKitWeb
import Foundation
import HTTPTypes
import Hummingbird
import Records
import WebServing

/// `ckport serve`'s web server: the read-only view of ``BrowseSites`` on a `WebServer`, one
/// route per page (each also at its path with `.json`), the security headers on every answer,
/// requests for another host refused (421), and every method but GET and HEAD refused (405).
public final class BrowseServer: Sendable {
    private let server: WebServer
    public let sites: BrowseSites

    private init(server: WebServer, sites: BrowseSites) {
        self.server = server
        self.sites = sites
    }

    /// The port it listens on.
    public var port: Int { server.port }
    /// The server's base URL.
    public var baseURL: URL { server.baseURL }

    /// Serves `sites` on `host`:`port` (127.0.0.1 unless the caller asks for another; 0: any
    /// free port) and returns once it listens.
    public static func start(
        _ sites: BrowseSites, host: String = "127.0.0.1", port: Int = 0,
        limits: WebServer.Limits = WebServer.Limits(connections: 64, body: 64 << 10, idle: 15)
    ) async throws -> BrowseServer {
        let bound = ListeningAddress()
        let server = try await WebServer.start(
            routes(sites, bound: bound), host: host, port: port, limits: limits, address: bound)
        return BrowseServer(server: server, sites: sites)
    }

    /// Stops listening and closes every connection.
    public func stop() async { await server.stop() }

    /// The route table.
    static func routes(_ sites: BrowseSites, bound: ListeningAddress) -> Router<BasicRequestContext> {
        let router = Router(options: .autoGenerateHeadEndpoints)
        let site = sites.all[0]
        // Outermost first: every answer gets the headers, a foreign Host nothing but 421.
        router.add(middleware: HeadersMiddleware(BrowseSite.securityHeaders))
        router.add(
            middleware: HostCheckMiddleware(bound) { _ in
                Response(
                    status: .misdirectedRequest, headers: [.contentType: "text/plain; charset=utf-8"],
                    body: ResponseBody(
                        byteBuffer: ByteBuffer(
                            string: "this server answers to requests for 127.0.0.1 and localhost only\n")
                    ))
            })
        router.add(
            middleware: ReadOnlyMiddleware { request in
                site.problem(
                    request.uri.path.hasSuffix(".json"), 405, "Not allowed",
                    "This view only reads: \(request.method.rawValue) is not answered.", extra: [("Allow", "GET, HEAD")]
                ).served
            })
        // An address no route takes gets the site's own 404 (its JSON form for a .json path).
        router.add(middleware: NotFoundPageMiddleware(site: site))

        /// A page at `path` and its JSON form at `path`.json: the page's model, rendered once.
        func page(
            _ path: String, alsoAt aliases: [String] = [],
            _ make: @escaping @Sendable (BrowseSite, [String: String]) throws -> any BrowsePage
        ) {
            for (shown, json) in ([path] + aliases).flatMap({ [($0, false), ($0 + ".json", true)] }) {
                router.get(RouterPath(shown)) { request, _ in
                    await answer(request, json: json) { site, query in try make(site, query).rendered(json: json) }
                }
            }
        }
        /// The answer of the first free site, or the error page when the query is not text or
        /// the store cannot be read.
        @Sendable func answer(
            _ request: Request, json: Bool,
            _ make: @escaping @Sendable (BrowseSite, [String: String]) throws -> CloudKitHTTPResponse
        ) async -> Response {
            guard let query = BrowseSite.formQuery(request.uri.query) else {
                return site.problem(json, 400, "Not a query", "The address's query is not UTF-8 text.").served
            }
            return await sites.answer(
                { site in
                    do {
                        return try make(site, query)
                    } catch {
                        return site.problem(json, 500, "Could not read the store", "\(error)")
                    }
                },
                busy: {
                    site.problem(
                        json, 503, "Busy",
                        "Every view of the store is busy and \(sites.waitingLimit) requests wait already: try again in a moment."
                    )
                }
            ).served
        }

        page("/", alsoAt: ["/index"]) { site, _ in try site.overview() }
        router.get("/style.css") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/css; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: BrowseSite.style)))
        }
        page("/shares") { site, _ in try site.shares() }
        page("/migrations") { site, _ in try site.rehearsal() }
        page("/bundle") { site, _ in site.bundlePage() }
        page("/calendar") { site, query in try site.month(query: query) }
        page("/calendar/agenda") { site, query in try site.agenda(query: query) }
        // A type's records: a page (or its JSON), or the whole selection as a download.
        router.get("/records/:type") { request, context in
            let raw = context.parameters.get("type") ?? ""
            // NAME.json is the page's JSON; NAME.jsonl, .csv and .ics download the selection
            // (and NAME.csv.json the same, its errors in JSON).
            let json = raw.hasSuffix(".json")
            let named = json ? String(raw.dropLast(".json".count)) : raw
            for (suffix, format) in [
                (".jsonl", RecordFormat.jsonLines), (".csv", RecordFormat.csv), (".ics", RecordFormat.iCalendar),
            ] where named.hasSuffix(suffix) {
                let type = decoded(String(named.dropLast(suffix.count)))
                return await answer(request, json: json) { site, query in
                    try site.download(type: type, query: query, format: format, json: json)
                }
            }
            let type = decoded(named)
            return await answer(request, json: json) { site, query in
                try site.records(type: type, query: query).rendered(json: json)
            }
        }
        router.get("/record/:scope/:owner/:zone/:name") { request, context in
            let raw = context.parameters.get("name") ?? ""
            let json = raw.hasSuffix(".json")
            let name = decoded(json ? String(raw.dropLast(".json".count)) : raw)
            let scopeName = decoded(context.parameters.get("scope") ?? "")
            guard let scope = DatabaseScope(rawValue: scopeName) else {
                return site.notFound(json, "no scope \(scopeName)").served
            }
            let id = RecordID(
                recordName: name,
                zone: ZoneID(
                    scope: scope, zoneName: decoded(context.parameters.get("zone") ?? ""),
                    ownerRecordName: decoded(context.parameters.get("owner") ?? "")))
            return await answer(request, json: json) { site, _ in try site.record(id: id).rendered(json: json) }
        }
        // The store's calendar feeds, as `serve --feeds-only` answers them.
        FeedResponder(sites).add(to: router)
        router.get("**") { request, _ in
            site.notFound(request.uri.path.hasSuffix(".json"), "no page at \(request.uri.path)").served
        }
        return router
    }

    /// A path segment as the router hands it over (percent-encoded), decoded.
    private static func decoded(_ segment: String) -> String { segment.removingPercentEncoding ?? segment }
}

/// The site's 404 page for an address the route table does not take (the router's own answer
/// is an empty 404).
struct NotFoundPageMiddleware: RouterMiddleware {
    let site: BrowseSite

    func handle(
        _ request: Request, context: BasicRequestContext,
        next: (Request, BasicRequestContext) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            return site.notFound(request.uri.path.hasSuffix(".json"), "no page at \(request.uri.path)").served
        }
    }
}
