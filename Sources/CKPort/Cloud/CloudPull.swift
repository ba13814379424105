import CloudKitWeb
import Foundation
import Formats
import Records
import Store

/// Moving records between a store and CloudKit itself.
public enum CloudSync {}

/// What a pull fetched from one zone.
public struct ZonePullResult: Sendable, Equatable {
    public var zone: ZoneID
    /// Whether the zone was read through its change feed (else by queries, per record type).
    public var incremental: Bool
    public var pages = 0
    public var saved = 0
    public var deleted = 0
    /// The sync token the store now holds for the zone.
    public var token: String?
}

/// What a pull did.
public struct PullResult: Sendable {
    public var source: String
    public var zones: [ZonePullResult]
    public var saved: Int { zones.reduce(0) { $0 + $1.saved } }
    public var deleted: Int { zones.reduce(0) { $0 + $1.deleted } }
}

extension CloudSync {
    /// The name a pull's sync tokens are kept under: container, environment and database.
    public static func source(_ database: CloudKitDatabase) -> String {
        "\(database.container)/\(database.environment.rawValue)/\(database.scope.rawValue)"
    }

    /// Pulls the database `client` speaks to into `store`. Custom zones of the private and
    /// shared databases come through their change feeds, from the sync token the store kept
    /// for each; each page and its token commit together, so a pull cut off anywhere resumes
    /// where it stopped. The public database and default zones have no change feed: they are
    /// read by queries per record type of the store's schema (which needs each type's
    /// `___recordID` QUERYABLE in CloudKit), and deletions there are not seen.
    public static func pull(_ client: CloudKitClient, into store: some RecordStoring, resultsLimit: Int? = nil,
                            progress: ProgressHandler? = nil) async throws -> PullResult {
        let database = client.database
        let source = source(database)
        let zoneIDs = try await zones(client)
        var results: [ZonePullResult] = []
        var total = 0
        for zone in zoneIDs.sorted() {
            let feed = database.scope != .public && zone.zoneName != ZoneID.defaultZoneName
            var result = ZonePullResult(zone: zone, incremental: feed)
            let zoneJSON = zoneJSON(zone)
            let codec = JSONRecordCodec(schema: store.schema, readStyle: .canonical, defaultZone: zone)
            if feed {
                var first: [String: Any] = ["zoneID": zoneJSON]
                if let token = try store.readSession({ try $0.syncStates(source: source) }).first(where: { $0.zone == zone })?.token {
                    first["syncToken"] = token
                }
                if let resultsLimit { first["resultsLimit"] = resultsLimit }
                try await forEachPage(client, "records/changes", first: first, next: { page in
                    guard page.moreComing, let token = page.syncToken else { return nil }
                    var request: [String: Any] = ["zoneID": zoneJSON, "syncToken": token]
                    if let resultsLimit { request["resultsLimit"] = resultsLimit }
                    return request
                }) { page in
                    result.pages += 1
                    let counts = try save(page, codec: codec, zone: zone, into: store, number: result.pages) { session in
                        try session.saveSyncToken(page.syncToken, source: source, zone: zone)
                    }
                    result.saved += counts.saved
                    result.deleted += counts.deleted
                    total += counts.saved + counts.deleted
                    result.token = page.syncToken
                    progress?(OperationProgress(records: total))
                }
            } else {
                for type in store.schema.recordTypes.map(\.name).sorted() {
                    var first: [String: Any] = ["zoneID": zoneJSON, "query": ["recordType": type]]
                    if let resultsLimit { first["resultsLimit"] = resultsLimit }
                    try await forEachPage(client, "records/query", first: first, next: { page in
                        guard let marker = page.continuationMarker else { return nil }
                        var request = first
                        request["continuationMarker"] = marker
                        return request
                    }) { page in
                        result.pages += 1
                        let counts = try save(page, codec: codec, zone: zone, into: store, number: result.pages) { _ in }
                        result.saved += counts.saved
                        total += counts.saved
                        progress?(OperationProgress(records: total))
                    }
                }
            }
            results.append(result)
        }
        return PullResult(source: source, zones: results)
    }

    /// Fetches page after page, asking for the next (`next` builds its request from the page
    /// before) while `body` saves the one before it, so that the network and the store work at
    /// the same time.
    private static func forEachPage(_ client: CloudKitClient, _ operation: String, first: [String: Any],
                                    next: (CloudPage) -> [String: Any]?, _ body: (CloudPage) throws -> Void) async throws {
        func fetch(_ request: [String: Any]) throws -> Task<CloudPage, Error> {
            let bytes = try JSONSerialization.data(withJSONObject: request, options: [.sortedKeys])
            return Task { try CloudPage(try await client.send(operation, body: bytes), operation: operation) }
        }
        var pending: Task<CloudPage, Error>? = try fetch(first)
        while let current = pending {
            let page = try await current.value
            pending = try next(page).map(fetch)
            do {
                try body(page)
            } catch {
                // Let the request under way finish: cutting it could lose the web auth token
                // its answer brings (the one it carried is spent).
                _ = try? await pending?.value
                throw error
            }
        }
    }

    /// One page in one transaction: the records (checked against the schema, replacing what the
    /// store holds), the deletions, then `finishing` (the page's sync token).
    private static func save(_ page: CloudPage, codec: JSONRecordCodec, zone: ZoneID, into store: some RecordStoring, number: Int,
                             finishing: @escaping (any RecordSession) throws -> Void) throws -> (saved: Int, deleted: Int) {
        let source = PageRecordSource(page: page, codec: codec, name: "CloudKit page \(number) of zone \(zone.zoneName)")
        var deleted = 0
        let gone = page.deletedNames
        let hooks = ImportHooks(finishing: { session in
            let present = try gone.map { RecordID(recordName: $0, zone: zone) }.filter { try session.record($0) != nil }
            deleted = try session.delete(present).count
            try finishing(session)
        })
        let summary = try store.importRecords([source], schema: nil, options: ImportOptions(mode: .replace), hooks: hooks)
        return (summary.totals.inserted + summary.totals.updated + summary.totals.unchanged, deleted)
    }
}

/// One answer of `records/changes` or `records/query`, parsed once.
struct CloudPage: @unchecked Sendable {
    var records: [JSONValue] = []
    var deletedNames: [String] = []
    var syncToken: String?
    var moreComing = false
    var continuationMarker: String?

    init(_ data: Data, operation: String) throws {
        let json: JSONValue
        do {
            json = try JSONParser.parse([UInt8](data))
        } catch {
            throw CloudKitServerError(serverErrorCode: "BAD_ANSWER", reason: "\(operation) answered with JSON that does not parse (\(error.description))", status: 200)
        }
        guard case .object(let object) = json else {
            throw CloudKitServerError(serverErrorCode: "BAD_ANSWER", reason: "\(operation) answered with \(json.summary), not an object", status: 200)
        }
        if case .array(let records) = object["records"] {
            for record in records {
                if case .object(let fields) = record, case .bool(true) = fields["deleted"] {
                    if let name = fields["recordName"]?.stringValue { deletedNames.append(name) }
                } else {
                    self.records.append(record)
                }
            }
        }
        syncToken = object["syncToken"]?.stringValue
        if case .bool(let more) = object["moreComing"] { moreComing = more }
        continuationMarker = object["continuationMarker"]?.stringValue
    }
}

/// A page's records, decoded as the importer asks for them; one that does not decode is an
/// issue at its place in the page.
final class PageRecordSource: RecordSource {
    private let page: CloudPage
    private let codec: JSONRecordCodec
    private var index = 0
    let name: String

    init(page: CloudPage, codec: JSONRecordCodec, name: String) {
        self.page = page
        self.codec = codec
        self.name = name
    }

    func next() throws -> SourceItem? {
        guard index < page.records.count else { return nil }
        let json = page.records[index]
        index += 1
        let position = SourcePosition(file: name, line: index)
        do {
            return .record(SourcedRecord(record: try codec.decode(json), position: position))
        } catch {
            return .invalid(InputIssue(position: position, recordName: error.recordName, recordType: error.recordType, field: error.field,
                                       message: error.message), raw: nil)
        }
    }

    var bytesRead: Int64 { 0 }
    var totalBytes: Int64? { nil }
}
