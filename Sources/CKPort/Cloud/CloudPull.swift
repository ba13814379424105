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
    /// in order, while one writer saves the pages as they come, all that have arrived in one
    /// transaction; at most 48 pages (or twice `concurrency`, if more) are on their way or
    /// waiting at any moment, so memory stays flat.
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
        let schema = store.schema
        let feeds = { (zone: ZoneID) in database.scope != .public && zone.zoneName != ZoneID.defaultZoneName }
        // What to fetch: a zone's change feed, or one record type of a zone by queries.
        var units: [PullUnit] = []
        var results: [ZoneID: ZonePullResult] = [:]
        for zone in zoneIDs {
            results[zone] = ZonePullResult(zone: zone, incremental: feeds(zone))
            if feeds(zone) {
                units.append(PullUnit(zone: zone, recordType: nil, startToken: tokens.first { $0.zone == zone }?.token))
            } else {
                units += schema.recordTypes.map(\.name).sorted().map { PullUnit(zone: zone, recordType: $0, startToken: nil) }
            }
        }
        let width = max(1, concurrency)
        // Pages on their way or waiting: enough that the fetchers keep fetching while the writer
        // saves what has arrived, and that a writer which falls behind commits many at once.
        let slots = PageSlots(max(2 * width, 48))
        let arrivals = PageQueue()
        let fetching = Task {
            // A fetch that fails stops the others from asking for more; each finishes the request
            // it has under way (cutting one could lose the web auth token its answer brings, as
            // the one it carried is spent), then the first failure ends the queue.
            let firstFailure = await withTaskGroup(of: Error?.self) { group -> Error? in
                var next = units.makeIterator()
                var first: Error?
                func start(_ unit: PullUnit) {
                    group.addTask {
                        do {
                            try await fetch(unit, client: client, schema: schema, resultsLimit: resultsLimit, slots: slots, staging: staging) { await arrivals.put(unit, $0) }
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
            await arrivals.finish(firstFailure)
        }
        // Saving blocks on SQLite, so it has a thread of its own: the cooperative pool's few
        // threads stay free for the requests, each of which starts when the one before answers.
        let writer = DispatchQueue(label: "ckport.pull.writer")
        nonisolated(unsafe) let writerStore = store
        var total = 0
        var failure: Error?
        do {
            // Every page that has arrived is saved in one transaction (each zone's newest token
            // with them): a writer that falls behind catches up with fewer, larger commits.
            while let batch = try await arrivals.take() {
                guard failure == nil else {
                    for _ in batch { await slots.release() }
                    continue
                }
                let pages = batch.map { PulledPage(unit: $0.0, page: $0.1) }
                for page in pages { results[page.unit.zone]!.pages += 1 }
                func commit(_ pages: [PulledPage]) async throws {
                    let counts = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[(saved: Int, deleted: Int)], Error>) in
                        writer.async { continuation.resume(with: Result { try save(pages, into: writerStore, source: source, assetDirectory: staging) }) }
                    }
                    for (entry, count) in zip(pages, counts) {
                        results[entry.unit.zone]!.saved += count.saved
                        results[entry.unit.zone]!.deleted += count.deleted
                        total += count.saved + count.deleted
                        if entry.unit.recordType == nil { results[entry.unit.zone]!.token = entry.page.syncToken }
                    }
                    progress?(OperationProgress(records: total))
                }
                do {
                    defer { for entry in batch { for file in entry.1.stagedFiles { unlink(file) } } }
                    do {
                        try await commit(pages)
                    } catch where pages.count > 1 {
                        // The pages before the one that failed are kept, each with its token, as
                        // if they had come one at a time; the failure is the first page's that fails.
                        for page in pages { try await commit([page]) }
                    }
                } catch {
                    // No new requests; the ones under way finish (see above).
                    failure = error
                    await slots.close()
                }
                for _ in batch { await slots.release() }
            }
        } catch {
            failure = failure ?? error
        }
        _ = await fetching.result
        if let failure { throw failure }
        return PullResult(source: source, zones: zoneIDs.map { results[$0]! })
    }

    /// Fetches one unit's pages in order, each when a slot is free, handing each to `deliver`.
    private static func fetch(_ unit: PullUnit, client: CloudKitClient, schema: Schema, resultsLimit: Int?, slots: PageSlots, staging: String?,
                              deliver: (CloudPage) async -> Void) async throws {
        let codec = JSONRecordCodec(schema: schema, readStyle: .canonical, defaultZone: unit.zone)
        var number = 0
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
                // Decoded here, beside the writer, which then only saves.
                number += 1
                page.decode(with: codec, name: "CloudKit page \(number) of \(unit.recordType.map { "type \($0) in " } ?? "")zone \(unit.zone.zoneName)")
            } catch {
                await slots.release()
                throw error
            }
            await deliver(page)
            if unit.recordType == nil {
                guard page.moreComing, let token = page.syncToken else { return }
                request["syncToken"] = token
            } else {
                guard let marker = page.continuationMarker else { return }
                request["continuationMarker"] = marker
            }
        }
    }

    /// Pages in one transaction: each page's records (checked against the schema, replacing
    /// what the store holds) in order, the deletions, then each change feed's newest sync
    /// token. A deletion a later page of the batch undoes (the record made again) is not
    /// applied; a record a later page deletes is deleted. Returns what each page saved.
    static func save(_ batch: [PulledPage], into store: some RecordStoring, source: String,
                             assetDirectory: String?) throws -> [(saved: Int, deleted: Int)] {
        // The deletions left standing at the end of the batch, with the page that made each.
        var deletions: [RecordID: Int] = [:]
        for (index, entry) in batch.enumerated() {
            for case let name? in entry.page.records.map(\.name) { deletions[RecordID(recordName: name, zone: entry.unit.zone)] = nil }
            for name in entry.page.deletedNames { deletions[RecordID(recordName: name, zone: entry.unit.zone)] = index }
        }
        var counts = batch.map { (saved: $0.page.records.count, deleted: 0) }
        let hooks = ImportHooks(finishing: { session in
            let ordered = deletions.sorted { ($0.value, $0.key.recordName) < ($1.value, $1.key.recordName) }.map(\.key)
            let present = try ordered.filter { try session.record($0) != nil }
            // A record deleted because it pointed at one (DELETE_SELF) counts with that one's page.
            var pageOf = deletions
            for gone in try session.delete(present) {
                let page = gone.cause.flatMap { pageOf[$0] } ?? deletions[gone.id] ?? batch.count - 1
                pageOf[gone.id] = page
                counts[page].deleted += 1
            }
            for entry in batch where entry.unit.recordType == nil {
                try session.saveSyncToken(entry.page.syncToken, source: source, zone: entry.unit.zone)
            }
        })
        var options = ImportOptions(mode: .replace)
        options.assetDirectory = assetDirectory
        _ = try store.importRecords([PagesRecordSource(batch.map(\.page))], schema: nil, options: options, hooks: hooks)
        return counts
    }
}

/// A page as the writer saves it, and the unit it came from.
struct PulledPage: Sendable {
    var unit: PullUnit
    var page: CloudPage
}

/// The pages fetched and not yet taken by the writer, in the order they arrived.
actor PageQueue {
    private var pages: [(PullUnit, CloudPage)] = []
    private var finished = false
    private var failure: Error?
    private var waiter: CheckedContinuation<Void, Never>?

    func put(_ unit: PullUnit, _ page: CloudPage) {
        pages.append((unit, page))
        wake()
    }

    /// No more pages come; `failure` is thrown once the pages already here are taken.
    func finish(_ failure: Error?) {
        finished = true
        self.failure = failure
        wake()
    }

    /// Every page waiting (at least one, waiting for it if need be); nil when finished.
    func take() async throws -> [(PullUnit, CloudPage)]? {
        while pages.isEmpty, !finished { await withCheckedContinuation { waiter = $0 } }
        if !pages.isEmpty {
            defer { pages = [] }
            return pages
        }
        if let failure { throw failure }
        return nil
    }

    private func wake() {
        waiter?.resume()
        waiter = nil
    }
}

/// One answer of `records/changes` or `records/query`. The answer is walked once to find
/// each record's bytes, its name and whether it is a deletion; the records themselves are
/// read from those bytes as the writer asks for them, by the same reader as an import's.
struct CloudPage: @unchecked Sendable {
    /// The answer's bytes, until the records are decoded.
    var bytes: [UInt8]
    /// Where each record (not deleted) lies in `bytes`, and its name.
    var records: [(range: Range<Int>, name: String?)] = []
    /// Records rewritten after the answer came (asset values pointed at downloaded files), by index.
    var rewritten: [Int: JSONValue] = [:]
    /// Asset files downloaded for the page's records, until the page is saved.
    var stagedFiles: [String] = []
    var deletedNames: [String] = []
    var syncToken: String?
    var moreComing = false
    var continuationMarker: String?
    /// The records decoded (or why one does not decode), in the page's order.
    var items: [SourceItem] = []

    init(_ data: Data, operation: String) throws {
        bytes = [UInt8](data)
        func bad(_ what: String) -> CloudKitServerError {
            CloudKitServerError(serverErrorCode: "BAD_ANSWER", reason: "\(operation) answered with \(what)", status: 200)
        }
        do {
            (records, deletedNames, syncToken, moreComing, continuationMarker) = try bytes.withUnsafeBytes { buffer in try CloudPage.walk(buffer) }
        } catch {
            throw bad("JSON that does not parse (\(error))")
        }
    }
}

extension CloudPage {
    /// The answer's parts: where each record lies, the deleted records' names, and the paging keys.
    private static func walk(_ buffer: UnsafeRawBufferPointer) throws(JSONSyntaxError)
        -> ([(range: Range<Int>, name: String?)], [String], String?, Bool, String?) {
        var records: [(range: Range<Int>, name: String?)] = []
        var deletedNames: [String] = []
        var syncToken: String?, continuationMarker: String?
        var moreComing = false
        var parser = JSONParser(buffer)
        var keys: Set<String> = []
        if try parser.walkObject() {
            repeat {
                let key = try parser.walkKey()
                guard keys.insert(key).inserted else { throw JSONSyntaxError(offset: parser.i, message: "key \"\(key)\" appears twice in one object") }
                switch key {
                case "records":
                    guard try parser.walkArray() else { continue }
                    repeat {
                        let start = parser.i
                        var name: String?
                        var deleted = false
                        if try parser.walkObject() {
                            repeat {
                                switch try parser.walkKey() {
                                case "recordName": name = try parser.parseValue().stringValue
                                case "deleted": deleted = try parser.parseValue() == .bool(true)
                                default: try parser.skipValue()
                                }
                            } while try parser.walkNextMember()
                        }
                        if deleted {
                            if let name { deletedNames.append(name) }
                        } else {
                            records.append((start..<parser.i, name))
                        }
                    } while try parser.walkNextElement()
                case "syncToken": syncToken = try parser.parseValue().stringValue
                case "continuationMarker": continuationMarker = try parser.parseValue().stringValue
                case "moreComing": moreComing = try parser.parseValue() == .bool(true)
                default: try parser.skipValue()
                }
            } while try parser.walkNextMember()
        }
        parser.skipWhitespace()
        if parser.i < buffer.count { throw JSONSyntaxError(offset: parser.i, message: "unexpected bytes after the answer's object") }
        return (records, deletedNames, syncToken, moreComing, continuationMarker)
    }

    /// Downloads every asset the page's records name into `directory`, and points each asset
    /// value at its file (`localPath`), for the import to store with the record.
    mutating func downloadAssets(_ client: CloudKitClient, into directory: String) async throws {
        let marker = Array("downloadURL".utf8)
        for index in records.indices {
            // Only a record that mentions a download URL can hold an asset to fetch.
            guard bytes[records[index].range].firstRange(of: marker) != nil else { continue }
            let json = try bytes[records[index].range].withUnsafeBytes { buffer in try JSONParser.parse(buffer) }
            guard case .object(var record) = json, case .object(var fields)? = record["fields"] else { continue }
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
                rewritten[index] = .object(record)
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

extension CloudPage {
    /// Decodes the records, each placed in the page called `name` for an error; the answer's
    /// bytes are let go.
    mutating func decode(with codec: JSONRecordCodec, name: String) {
        items.reserveCapacity(records.count)
        for (index, record) in records.enumerated() {
            let position = SourcePosition(file: name, line: index + 1)
            let decoded: Result<Record, RecordDecodingError>
            if let json = rewritten[index] {
                decoded = Result { () throws(RecordDecodingError) in try codec.decode(json) }
            } else {
                decoded = bytes[record.range].withUnsafeBytes { buffer in
                    Result { () throws(RecordDecodingError) in try codec.decode(bytes: buffer).0 }
                }
            }
            switch decoded {
            case .success(let decoded):
                items.append(.record(SourcedRecord(record: decoded, position: position)))
            case .failure(let error):
                items.append(.invalid(InputIssue(position: position, recordName: error.recordName ?? record.name, recordType: error.recordType,
                                                 field: error.field, message: error.message), raw: nil))
            }
        }
        bytes = []
        rewritten = [:]
    }
}

/// The decoded records of pages, one page after another.
final class PagesRecordSource: RecordSource {
    private var pages: [CloudPage]
    private var page = 0
    private var index = 0

    init(_ pages: [CloudPage]) { self.pages = pages }

    var name: String { "CloudKit" }

    func next() throws -> SourceItem? {
        while page < pages.count {
            if index < pages[page].items.count {
                index += 1
                return pages[page].items[index - 1]
            }
            pages[page].items = []
            page += 1
            index = 0
        }
        return nil
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
