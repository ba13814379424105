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
    ///
    /// Up to `concurrency` zones (or record types) are fetched at once, each a page at a time
    /// in order, while one writer saves the pages as they come; at most `concurrency` pages
    /// are on their way or waiting at any moment, so memory stays flat.
    ///
    /// With `assets`, each asset a record names is downloaded and stored with the record's
    /// page, in the same transaction; without, the store keeps the asset's checksum and size.
    public static func pull(_ client: CloudKitClient, into store: some RecordStoring, resultsLimit: Int? = nil,
                            concurrency: Int = 4, assets: Bool = false, progress: ProgressHandler? = nil) async throws -> PullResult {
        let staging: String? = assets ? try makeStagingDirectory() : nil
        defer { if let staging { try? FileManager.default.removeItem(atPath: staging) } }
        let database = client.database
        let source = source(database)
        let zoneIDs = try await zones(client).sorted()
        let tokens = try store.readSession { try $0.syncStates(source: source) }
        let feeds = { (zone: ZoneID) in database.scope != .public && zone.zoneName != ZoneID.defaultZoneName }
        // What to fetch: a zone's change feed, or one record type of a zone by queries.
        var units: [PullUnit] = []
        var results: [ZoneID: ZonePullResult] = [:]
        for zone in zoneIDs {
            results[zone] = ZonePullResult(zone: zone, incremental: feeds(zone))
            if feeds(zone) {
                units.append(PullUnit(zone: zone, recordType: nil, startToken: tokens.first { $0.zone == zone }?.token))
            } else {
                units += store.schema.recordTypes.map(\.name).sorted().map { PullUnit(zone: zone, recordType: $0, startToken: nil) }
            }
        }
        let width = max(1, concurrency)
        let slots = PageSlots(width)
        let (pages, pageSink) = AsyncThrowingStream<(PullUnit, CloudPage), Error>.makeStream()
        let fetching = Task {
            // A fetch that fails stops the others from asking for more; each finishes the request
            // it has under way (cutting one could lose the web auth token its answer brings, as
            // the one it carried is spent), then the first failure ends the stream.
            let firstFailure = await withTaskGroup(of: Error?.self) { group -> Error? in
                var next = units.makeIterator()
                var first: Error?
                func start(_ unit: PullUnit) {
                    group.addTask {
                        do {
                            try await fetch(unit, client: client, resultsLimit: resultsLimit, slots: slots, staging: staging) { pageSink.yield((unit, $0)) }
                            return nil
                        } catch {
                            return error
                        }
                    }
                }
                for _ in 0..<width {
                    guard let unit = next.next() else { break }
                    start(unit)
                }
                while let outcome = await group.next() {
                    if let outcome, first == nil {
                        first = outcome
                        await slots.close()
                    }
                    if first == nil, let unit = next.next() { start(unit) }
                }
                return first
            }
            if let firstFailure { pageSink.finish(throwing: firstFailure) } else { pageSink.finish() }
        }
        var total = 0
        var failure: Error?
        do {
            for try await (unit, page) in pages {
                guard failure == nil else {
                    await slots.release()
                    continue
                }
                var result = results[unit.zone]!
                result.pages += 1
                let codec = JSONRecordCodec(schema: store.schema, readStyle: .canonical, defaultZone: unit.zone)
                do {
                    defer { for file in page.stagedFiles { unlink(file) } }
                    let counts = try save(page, codec: codec, zone: unit.zone, into: store, number: result.pages, assetDirectory: staging) { session in
                        if unit.recordType == nil { try session.saveSyncToken(page.syncToken, source: source, zone: unit.zone) }
                    }
                    result.saved += counts.saved
                    result.deleted += counts.deleted
                    total += counts.saved + counts.deleted
                    if unit.recordType == nil { result.token = page.syncToken }
                    results[unit.zone] = result
                    progress?(OperationProgress(records: total))
                } catch {
                    // No new requests; the ones under way finish (see above).
                    failure = error
                    await slots.close()
                }
                await slots.release()
            }
        } catch {
            failure = failure ?? error
        }
        _ = await fetching.result
        if let failure { throw failure }
        return PullResult(source: source, zones: zoneIDs.map { results[$0]! })
    }

    /// Fetches one unit's pages in order, each when a slot is free, handing each to `deliver`.
    private static func fetch(_ unit: PullUnit, client: CloudKitClient, resultsLimit: Int?, slots: PageSlots, staging: String?,
                              deliver: (CloudPage) -> Void) async throws {
        var request: [String: Any] = ["zoneID": zoneJSON(unit.zone)]
        if let recordType = unit.recordType { request["query"] = ["recordType": recordType] }
        if let token = unit.startToken { request["syncToken"] = token }
        if let resultsLimit { request["resultsLimit"] = resultsLimit }
        let operation = unit.recordType == nil ? "records/changes" : "records/query"
        while true {
            guard await slots.acquire() else { return }
            let body = try JSONSerialization.data(withJSONObject: request, options: [.sortedKeys])
            var page: CloudPage
            do {
                page = try CloudPage(try await client.send(operation, body: body), operation: operation)
                if let staging { try await page.downloadAssets(client, into: staging) }
            } catch {
                await slots.release()
                throw error
            }
            deliver(page)
            if unit.recordType == nil {
                guard page.moreComing, let token = page.syncToken else { return }
                request["syncToken"] = token
            } else {
                guard let marker = page.continuationMarker else { return }
                request["continuationMarker"] = marker
            }
        }
    }

    /// One page in one transaction: the records (checked against the schema, replacing what the
    /// store holds), the deletions, then `finishing` (the page's sync token).
    private static func save(_ page: CloudPage, codec: JSONRecordCodec, zone: ZoneID, into store: some RecordStoring, number: Int,
                             assetDirectory: String?, finishing: @escaping (any RecordSession) throws -> Void) throws -> (saved: Int, deleted: Int) {
        let source = PageRecordSource(page: page, codec: codec, name: "CloudKit page \(number) of zone \(zone.zoneName)")
        var deleted = 0
        let gone = page.deletedNames
        let hooks = ImportHooks(finishing: { session in
            let present = try gone.map { RecordID(recordName: $0, zone: zone) }.filter { try session.record($0) != nil }
            deleted = try session.delete(present).count
            try finishing(session)
        })
        var options = ImportOptions(mode: .replace)
        options.assetDirectory = assetDirectory
        let summary = try store.importRecords([source], schema: nil, options: options, hooks: hooks)
        return (summary.totals.inserted + summary.totals.updated + summary.totals.unchanged, deleted)
    }
}

/// One answer of `records/changes` or `records/query`, parsed once.
struct CloudPage: @unchecked Sendable {
    var records: [JSONValue] = []
    /// Asset files downloaded for the page's records, until the page is saved.
    var stagedFiles: [String] = []
    var deletedNames: [String] = []
    var syncToken: String?
    var moreComing = false
    var continuationMarker: String?

    init(_ data: Data, operation: String) throws {
        let json: JSONValue
        do {
            json = try data.withUnsafeBytes { bytes throws(JSONSyntaxError) in try JSONParser.parse(bytes) }
        } catch {
            throw CloudKitServerError(serverErrorCode: "BAD_ANSWER", reason: "\(operation) answered with JSON that does not parse (\(error))", status: 200)
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

extension CloudPage {
    /// Downloads every asset the page's records name into `directory`, and points each asset
    /// value at its file (`localPath`), for the import to store with the record.
    mutating func downloadAssets(_ client: CloudKitClient, into directory: String) async throws {
        for index in records.indices {
            guard case .object(var record) = records[index], case .object(var fields)? = record["fields"] else { continue }
            var changed = false
            for fieldIndex in fields.members.indices {
                guard case .object(var field) = fields.members[fieldIndex].value, case .object(var value)? = field["value"],
                      let address = value["downloadURL"]?.stringValue else { continue }
                let name = fields.members[fieldIndex].key
                guard let url = URL(string: address.replacingOccurrences(of: "${f}", with: name)) else {
                    throw CloudKitServerError(serverErrorCode: "BAD_ANSWER", reason: "record \(record["recordName"]?.stringValue ?? "?") field \(name): the download URL \(address) does not parse", status: 200)
                }
                let bytes = try await client.download(url)
                if case .number(let size)? = value["size"], Int(size) != bytes.count {
                    throw CloudKitServerError(serverErrorCode: "BAD_ANSWER", reason: "record \(record["recordName"]?.stringValue ?? "?") field \(name): the asset downloaded holds \(bytes.count) bytes; the record says \(size)", status: 200)
                }
                let file = UUID().uuidString.lowercased()
                let path = (directory as NSString).appendingPathComponent(file)
                guard FileManager.default.createFile(atPath: path, contents: bytes, attributes: [.posixPermissions: 0o600]) else {
                    throw OutputError(path: path, message: "cannot write the asset of record \(record["recordName"]?.stringValue ?? "?") field \(name)")
                }
                stagedFiles.append(path)
                value.members.append(JSONObject.Member(key: "localPath", value: .string(file)))
                field.members = field.members.map { $0.key == "value" ? JSONObject.Member(key: "value", value: .object(value)) : $0 }
                fields.members[fieldIndex].value = .object(field)
                changed = true
            }
            if changed {
                record.members = record.members.map { $0.key == "fields" ? JSONObject.Member(key: "fields", value: .object(fields)) : $0 }
                records[index] = .object(record)
            }
        }
    }
}

/// A folder of its own for the asset files a pull downloads before it stores them.
func makeStagingDirectory() throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-pull-assets-\(getpid())-\(UUID().uuidString.prefix(8))").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    return path
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

/// One thing a pull fetches: a zone's change feed (no record type), or a record type of a zone
/// by queries.
struct PullUnit: Sendable {
    var zone: ZoneID
    var recordType: String?
    var startToken: String?
}

/// Pages on their way or waiting to be saved, at most `limit`; once closed, no more are asked
/// for.
actor PageSlots {
    private let limit: Int
    private var used = 0
    private var closed = false
    private var waiting: [CheckedContinuation<Bool, Never>] = []

    init(_ limit: Int) { self.limit = limit }

    /// Waits for a free slot; false once closed.
    func acquire() async -> Bool {
        if closed { return false }
        if used < limit {
            used += 1
            return true
        }
        return await withCheckedContinuation { waiting.append($0) }
    }

    func release() {
        if !closed, !waiting.isEmpty {
            waiting.removeFirst().resume(returning: true)
        } else {
            used -= 1
        }
    }

    func close() {
        closed = true
        for waiter in waiting { waiter.resume(returning: false) }
        waiting = []
    }
}
