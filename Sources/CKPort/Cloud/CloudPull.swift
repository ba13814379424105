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
            if feed {
                var token = try store.readSession { try $0.syncStates(source: source) }.first { $0.zone == zone }?.token
                while true {
                    var request: [String: Any] = ["zoneID": zoneJSON]
                    if let token { request["syncToken"] = token }
                    if let resultsLimit { request["resultsLimit"] = resultsLimit }
                    let page = try await client.send("records/changes", body: try JSONSerialization.data(withJSONObject: request, options: [.sortedKeys]))
                    let answer = try JSONSerialization.jsonObject(with: page) as? [String: Any] ?? [:]
                    let next = answer["syncToken"] as? String
                    let counts = try save(answer["records"] as? [[String: Any]] ?? [], zone: zone, into: store, page: result.pages + 1) { session in
                        try session.saveSyncToken(next, source: source, zone: zone)
                    }
                    result.pages += 1
                    result.saved += counts.saved
                    result.deleted += counts.deleted
                    total += counts.saved + counts.deleted
                    progress?(OperationProgress(records: total))
                    token = next
                    result.token = next
                    guard answer["moreComing"] as? Bool == true else { break }
                }
            } else {
                for type in store.schema.recordTypes.map(\.name).sorted() {
                    var marker: String?
                    repeat {
                        var request: [String: Any] = ["zoneID": zoneJSON, "query": ["recordType": type]]
                        if let marker { request["continuationMarker"] = marker }
                        if let resultsLimit { request["resultsLimit"] = resultsLimit }
                        let page = try await client.send("records/query", body: try JSONSerialization.data(withJSONObject: request, options: [.sortedKeys]))
                        let answer = try JSONSerialization.jsonObject(with: page) as? [String: Any] ?? [:]
                        let counts = try save(answer["records"] as? [[String: Any]] ?? [], zone: zone, into: store, page: result.pages + 1) { _ in }
                        result.pages += 1
                        result.saved += counts.saved
                        total += counts.saved
                        progress?(OperationProgress(records: total))
                        marker = answer["continuationMarker"] as? String
                    } while marker != nil
                }
            }
            results.append(result)
        }
        return PullResult(source: source, zones: results)
    }

    /// One page in one transaction: the records (checked against the schema, replacing what the
    /// store holds), the deletions, then `finishing` (the page's sync token).
    private static func save(_ records: [[String: Any]], zone: ZoneID, into store: some RecordStoring, page: Int,
                             finishing: @escaping (any RecordSession) throws -> Void) throws -> (saved: Int, deleted: Int) {
        let live = records.filter { $0["deleted"] as? Bool != true }
        let gone = records.filter { $0["deleted"] as? Bool == true }.compactMap { $0["recordName"] as? String }
        let bytes = Array(try JSONSerialization.data(withJSONObject: ["records": live], options: [.sortedKeys, .withoutEscapingSlashes]))
        let codec = JSONRecordCodec(schema: store.schema, readStyle: .canonical, defaultZone: zone)
        let reader = JSONRecordReader(input: ByteInput(name: "CloudKit page \(page) of zone \(zone.zoneName)", bytes: bytes), layout: .document, codec: codec)
        var deleted = 0
        let hooks = ImportHooks(finishing: { session in
            let present = try gone.map { RecordID(recordName: $0, zone: zone) }.filter { try session.record($0) != nil }
            deleted = try session.delete(present).count
            try finishing(session)
        })
        let summary = try store.importRecords([reader], schema: nil, options: ImportOptions(mode: .replace), hooks: hooks)
        return (summary.totals.inserted + summary.totals.updated + summary.totals.unchanged, deleted)
    }
}
