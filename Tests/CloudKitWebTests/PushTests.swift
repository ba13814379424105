import CloudKitEmulator
import CloudKitWeb
import Crypto
import Foundation
import Records
import Synchronization
import TestSupport
import Testing

@testable import CKPort

/// An emulated container and a client that follows its web auth tokens, as ckport does.
struct Container {
    let emulator = CloudKitEmulator(container: "iCloud.com.example.Notes")
    let database = try! CloudKitDatabase(
        container: "iCloud.com.example.Notes", environment: .development, scope: .private)
    let client: CloudKitClient

    init(pageSize: Int = 50, maxOperations: Int = ModifyBatcher.maxOperations, waits: Waits? = nil) throws {
        emulator.registerUser(apiToken: "api-1", webAuthToken: "web-1")
        emulator.settings.pageSize = pageSize
        emulator.settings.maxOperations = maxOperations
        client = try CloudKitClient(
            database: database, credentials: .webToken(apiToken: "api-1", webAuthToken: "web-1"), transport: emulator,
            policy: RetryPolicy(maxAttempts: 4, baseDelay: 0.1, maxDelay: 5),
            sleep: { seconds in waits?.seconds.append(seconds) })
    }

    /// Records as CloudKit holds them, by name: type, change tag and fields.
    func records(zone: String) async throws -> [String: [String: Any]] {
        let body = try JSONSerialization.data(withJSONObject: ["zoneID": ["zoneName": zone], "resultsLimit": 200])
        var all: [String: [String: Any]] = [:]
        var request = try JSONSerialization.jsonObject(with: body) as! [String: Any]
        while true {
            let answer =
                try JSONSerialization.jsonObject(
                    with: try await client.send(
                        "records/changes", body: try JSONSerialization.data(withJSONObject: request))) as! [String: Any]
            for record in answer["records"] as! [[String: Any]] {
                let name = record["recordName"] as! String
                all[name] = record["deleted"] as? Bool == true ? nil : record
            }
            guard answer["moreComing"] as? Bool == true else { break }
            request["syncToken"] = answer["syncToken"]
        }
        return all
    }

    func title(_ record: [String: Any]?) -> String? {
        ((record?["fields"] as? [String: Any])?["title"] as? [String: Any])?["value"] as? String
    }
}

/// Collects what a push turned away.
final class Rejections: @unchecked Sendable {
    var all: [PushRejection] = []
    var codes: [String] { all.map(\.serverErrorCode) }
}

@Suite("pushing to CloudKit (the emulator)")
struct PushTests {
    static let schema = PullTests.schema
    /// The notes schema with an asset field.
    static let assetSchema = schema.replacingOccurrences(
        of: "pinned        INT64 QUERYABLE,", with: "pinned        INT64 QUERYABLE,\n        attachment    ASSET,")
    static let notes = ZoneID(scope: .private, zoneName: "Notes")

    /// A store with `count` notes in the Notes zone and three in the default zone.
    func store(_ scratch: Scratch, count: Int, name: String = "store.sqlite") throws -> RecordStore {
        var records = (0..<count).map { n in
            Record(
                id: RecordID(recordName: String(format: "note-%04d", n), zone: Self.notes), recordType: "Note",
                fields: ["title": .string("Note \(n) — ünïcode \"quoted\""), "pinned": .int64(Int64(n % 2))])
        }
        records += (0..<3).map { n in
            Record(
                id: RecordID(recordName: "loose-\(n)", zone: ZoneID(scope: .private, zoneName: ZoneID.defaultZoneName)),
                recordType: "Note",
                fields: ["title": .string("Loose \(n)")])
        }
        return try scratch.store(name, schema: Self.schema, records: records)
    }

    func export(_ store: RecordStore) throws -> String {
        let scratch = Scratch()
        _ = try Exports.records(from: store, to: .file(scratch.path("out.jsonl")), request: ExportRequest())
        // CloudKit keeps the system fields (change tag, created, modified) itself.
        return scratch.text("out.jsonl").replacing(
            try Regex(#""recordChangeTag":"[^"]*",|"(created|modified)":\{[^}]*\},"#), with: "")
    }

    @Test(
        "push → pull gives the same records; missing zones are created; requests hold at most 200 operations and the byte budget"
    )
    func roundTrip() async throws {
        let scratch = Scratch()
        let source = try store(scratch, count: 450)
        let cloud = try Container()
        let rejections = Rejections()
        let result = try await CloudSync.push(cloud.client, from: source, request: PushRequest()) {
            rejections.all.append($0)
        }
        #expect(rejections.all.isEmpty)
        #expect(result.total.saved == 453 && result.total.rejected == 0 && result.zonesCreated == ["Notes"])
        // 450 in Notes: 200 + 200 + 50; 3 in the default zone.
        #expect(result.requests == 4)
        #expect(cloud.emulator.log.filter { $0 == "records/modify" }.count == 4)
        // The records come back as they went.
        let copy = try scratch.store(Self.schema, name: "copy.sqlite")
        let pulled = try await CloudSync.pull(cloud.client, into: copy)
        #expect(pulled.saved == 453)
        #expect(try export(copy) == (try export(source)))
        #expect(try export(copy).contains(#"ünïcode \"quoted\""#))
        let stamped = try copy.read { try $0.record(RecordID(recordName: "note-0001", zone: Self.notes)) }
        #expect(stamped?.created?.userRecordName == "_user" && stamped?.modified?.deviceID == "2")
        // A small byte budget closes requests sooner.
        let other = try Container()
        let small = try await CloudSync.push(other.client, from: source, request: PushRequest(byteBudget: 4096)) { _ in
        }
        #expect(small.total.saved == 453 && small.requests > 20)
    }

    @Test(
        "safe by default: create reports EXISTS, update a stale change tag as CONFLICT and a missing record as NOT_FOUND; --force overwrites"
    )
    func conflicts() async throws {
        let scratch = Scratch()
        let cloud = try Container()
        let source = try store(scratch, count: 10)
        _ = try await CloudSync.push(cloud.client, from: source, request: PushRequest()) { _ in }
        // Someone edits note-0002 in CloudKit.
        let edit: [String: Any] = [
            "zoneID": ["zoneName": "Notes"],
            "operations": [
                [
                    "operationType": "forceUpdate",
                    "record": [
                        "recordName": "note-0002", "recordType": "Note",
                        "fields": ["title": ["value": "Edited in the app", "type": "STRING"]],
                    ],
                ]
            ],
        ]
        _ = try await cloud.client.send("records/modify", body: try JSONSerialization.data(withJSONObject: edit))
        // Creating again: every record exists; nothing is overwritten.
        let again = Rejections()
        let create = try await CloudSync.push(cloud.client, from: source, request: PushRequest()) {
            again.all.append($0)
        }
        #expect(create.total.exists == 13 && create.total.saved == 0 && again.codes.allSatisfy { $0 == "EXISTS" })
        #expect(cloud.title(try await cloud.records(zone: "Notes")["note-0002"]) == "Edited in the app")
        // The store pulls (taking CloudKit's change tags), then the edit there makes its tag stale.
        let mirror = try scratch.store(Self.schema, name: "mirror.sqlite")
        _ = try await CloudSync.pull(cloud.client, into: mirror)
        _ = try await cloud.client.send("records/modify", body: try JSONSerialization.data(withJSONObject: edit))
        try mirror.write { session in
            var record = try #require(try session.record(RecordID(recordName: "note-0005", zone: Self.notes)))
            record["title"] = .string("Edited in the store")
            _ = try session.save(record, mode: .replace)
            var clashing = try #require(try session.record(RecordID(recordName: "note-0002", zone: Self.notes)))
            clashing["title"] = .string("The store's version")
            _ = try session.save(clashing, mode: .replace)
            _ = try session.save(
                Record(
                    id: RecordID(recordName: "note-new", zone: Self.notes), recordType: "Note",
                    fields: ["title": .string("New")]), mode: .replace)
        }
        // Someone deletes note-0007 in CloudKit; the store still has it, with its change tag.
        let deletion: [String: Any] = [
            "zoneID": ["zoneName": "Notes"],
            "operations": [["operationType": "forceDelete", "record": ["recordName": "note-0007"]]],
        ]
        _ = try await cloud.client.send("records/modify", body: try JSONSerialization.data(withJSONObject: deletion))
        let update = Rejections()
        let updated = try await CloudSync.push(cloud.client, from: mirror, request: PushRequest(mode: .update)) {
            update.all.append($0)
        }
        #expect(
            updated.total.conflicts == 1 && updated.total.missing == 1 && updated.total.failed == 1
                && updated.total.saved == 11, "\(updated.total)")
        // note-new has no change tag (CloudKit never saw it): an update cannot carry one, so it
        // is not sent at all (CloudKit would refuse the whole request).
        #expect(
            Set(update.all.map { "\($0.operation.recordName) \($0.serverErrorCode)" }) == [
                "note-0002 CONFLICT", "note-0007 NOT_FOUND", "note-new NOT_SENT",
            ])
        #expect(update.all.first { $0.serverErrorCode == "NOT_SENT" }?.reason.contains("no change tag") == true)
        #expect(update.all.first { $0.serverErrorCode == "CONFLICT" }?.operation.json.count ?? 0 > 40)
        // Every update that went carried the change tag the store pulled.
        let sentTags = update.all.filter { $0.serverErrorCode != "NOT_SENT" }.map {
            String(decoding: $0.operation.json, as: UTF8.self)
        }
        #expect(sentTags.count == 2 && sentTags.allSatisfy { $0.contains(#""recordChangeTag":""#) })
        var inCloud = try await cloud.records(zone: "Notes")
        #expect(
            cloud.title(inCloud["note-0002"]) == "Edited in the app"
                && cloud.title(inCloud["note-0005"]) == "Edited in the store")
        // Forced, the store's version wins, and the missing record is created.
        let forced = try await CloudSync.push(
            cloud.client, from: mirror, request: PushRequest(mode: .update, force: true)
        ) { _ in }
        #expect(forced.total.saved == 14 && forced.total.rejected == 0)
        #expect(inCloud["note-0007"] == nil)
        inCloud = try await cloud.records(zone: "Notes")
        #expect(cloud.title(inCloud["note-0002"]) == "The store's version" && inCloud["note-new"] != nil)
    }

    @Test("changes since a token: records and, when forced, deletions")
    func sinceToken() async throws {
        let scratch = Scratch()
        let cloud = try Container()
        let source = try store(scratch, count: 20)
        _ = try await CloudSync.push(cloud.client, from: source, request: PushRequest()) { _ in }
        let token = try source.read { $0.currentToken }
        try source.write { session in
            _ = try session.delete([
                RecordID(recordName: "note-0004", zone: Self.notes),
                RecordID(recordName: "note-0005", zone: Self.notes),
            ])
            _ = try session.save(
                Record(
                    id: RecordID(recordName: "note-0100", zone: Self.notes), recordType: "Note",
                    fields: ["title": .string("Later")]), mode: .replace)
        }
        let unforced = Rejections()
        let first = try await CloudSync.push(cloud.client, from: source, request: PushRequest(since: token)) {
            unforced.all.append($0)
        }
        #expect(first.total.saved == 1 && first.total.failed == 2 && unforced.codes == ["NOT_SENT", "NOT_SENT"])
        #expect(try await cloud.records(zone: "Notes").count == 21)
        let forced = try await CloudSync.push(
            cloud.client, from: source, request: PushRequest(since: token, force: true)
        ) { _ in }
        #expect(forced.total.deleted == 2 && forced.total.saved == 1)
        let names = try await cloud.records(zone: "Notes").keys
        #expect(names.count == 19 && !names.contains("note-0004") && names.contains("note-0100"))
    }

    @Test("throttling is waited out; a final error stops the push and says what CloudKit had accepted")
    func faults() async throws {
        let scratch = Scratch()
        let waits = Waits()
        let cloud = try Container(waits: waits)
        let source = try store(scratch, count: 450)
        cloud.emulator.inject(.throttled(retryAfter: 2), on: "records/modify")
        cloud.emulator.inject(.unavailable, on: "records/modify")
        let result = try await CloudSync.push(cloud.client, from: source, request: PushRequest()) { _ in }
        #expect(result.total.saved == 453 && waits.seconds.contains(2))
        // The first request goes through; the second finds the container full.
        let full = try Container()
        let passing = Passing(full.emulator, failing: "records/modify", after: 1)
        let client = try CloudKitClient(
            database: full.database, credentials: .webToken(apiToken: "api-1", webAuthToken: "web-1"),
            transport: passing)
        do {
            _ = try await CloudSync.push(client, from: source, request: PushRequest()) { _ in }
            Issue.record("QUOTA_EXCEEDED is final")
        } catch let error as CloudPushStopped {
            #expect(error.partial.total.saved == 200 && error.partial.requests == 1)
            #expect(
                error.description.contains("QUOTA_EXCEEDED") && error.description.contains("accepted 200 records"),
                "\(error.description)")
        }
    }

    @Test(
        "assets in a push of many requests: the asset of a record in a later request is read while the store's reader waits with requests in hand (one SQLite connection: it used to hang)"
    )
    func assetsInALongPush() async throws {
        let scratch = Scratch()
        let schema = Self.assetSchema
        let source = try scratch.store(schema)
        let file = scratch.path("photo.bin")
        try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 13) }).write(to: URL(fileURLWithPath: file))
        try source.write { session in
            let stored = try session.putAsset(file: file, expectedSHA256: nil, expectedSize: nil)
            for n in 0..<1500 {
                var fields: RecordFields = ["title": .string("Note \(n)")]
                // Every request holds assets, the first and the last.
                if n % 100 == 7 {
                    fields["attachment"] = .asset(
                        Asset(fileChecksum: "local", size: stored.size, sha256: stored.sha256))
                }
                _ = try session.save(
                    Record(
                        id: RecordID(recordName: String(format: "note-%04d", n), zone: Self.notes), recordType: "Note",
                        fields: fields),
                    mode: .replace)
            }
        }
        let cloud = try Container()
        let push = Task { try await CloudSync.push(cloud.client, from: source, request: PushRequest()) { _ in } }
        // A hang fails the test instead of stopping the run: the push is waited for with a bound.
        // Alone the push takes half a second; the bound is wide because the whole suite shares
        // Swift's two cooperative threads on this machine with the push, and once took longer
        // than two minutes to let it through.
        let deadline = Date().addingTimeInterval(600)
        let finished = Mutex(false)
        Task {
            _ = try? await push.value
            finished.withLock { $0 = true }
        }
        while !finished.withLock({ $0 }) && Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        guard finished.withLock({ $0 }) else {
            Issue.record("the push did not end within ten minutes")
            return
        }
        let pushed = try await push.value
        #expect(pushed.total.saved == 1500)
        #expect(cloud.emulator.log.filter { $0 == "assets/upload" }.count >= 8)
        let inCloud = try await cloud.records(zone: "Notes")
        #expect(inCloud.count == 1500)
        let withFile = inCloud.values.filter {
            (($0["fields"] as? [String: Any])?["attachment"] as? [String: Any])?["value"] != nil
        }
        #expect(withFile.count == 15)
    }

    @Test(
        "assets: a push uploads the bytes the store holds (assets/upload, then the file) and the record carries the receipt; a pull with assets brings the same bytes back"
    )
    func assetsRoundTrip() async throws {
        let scratch = Scratch()
        let schema = Self.assetSchema
        let source = try scratch.store(schema)
        let bytes = Data((0..<123_457).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
        let file = scratch.path("photo.bin")
        try bytes.write(to: URL(fileURLWithPath: file))
        try source.write { session in
            let stored = try session.putAsset(file: file, expectedSHA256: nil, expectedSize: nil)
            for n in 0..<3 {
                var fields: RecordFields = ["title": .string("Photo \(n)")]
                fields["attachment"] = .asset(Asset(fileChecksum: "local", size: stored.size, sha256: stored.sha256))
                _ = try session.save(
                    Record(
                        id: RecordID(recordName: "photo-\(n)", zone: Self.notes), recordType: "Note", fields: fields),
                    mode: .replace)
            }
        }
        let cloud = try Container()
        let pushed = try await CloudSync.push(cloud.client, from: source, request: PushRequest()) { _ in }
        #expect(pushed.total.saved == 3)
        #expect(cloud.emulator.log.filter { $0 == "assets/upload" }.count == 1)
        let inCloud = try await cloud.records(zone: "Notes")
        let value =
            ((inCloud["photo-1"]?["fields"] as? [String: Any])?["attachment"] as? [String: Any])?["value"]
            as? [String: Any]
        #expect(
            value?["receipt"] == nil && (value?["downloadURL"] as? String)?.contains("/download/") == true
                && value?["size"] as? Int == 123_457)
        let copy = try scratch.store(schema, name: "copy.sqlite")
        _ = try await CloudSync.pull(cloud.client, into: copy, assets: true)
        let sha = SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
        for n in 0..<3 {
            guard
                case .asset(let asset)? = try copy.read({
                    try $0.record(RecordID(recordName: "photo-\(n)", zone: Self.notes))
                })?["attachment"]
            else {
                Issue.record("photo-\(n) has no asset")
                continue
            }
            #expect(asset.sha256 == sha && asset.size == 123_457)
        }
        var back = Data()
        #expect(
            try copy.read { session in try session.readAsset(sha) { back.append(contentsOf: $0) } } && back == bytes)
        // A file over the server's limit is refused, and the push says so.
        cloud.emulator.settings.maxAssetSize = 100_000
        do {
            _ = try await CloudSync.push(cloud.client, from: source, request: PushRequest(force: true)) { _ in }
            Issue.record("an asset over the limit was taken")
        } catch let error as CloudPushStopped {
            #expect(error.description.contains("at most 100000 bytes"), "\(error.description)")
        }
    }

    @Test(
        "a dry run lists the operations without reaching CloudKit; records an update cannot send (no change tag) are listed apart"
    )
    func dryRun() throws {
        let scratch = Scratch()
        let source = try store(scratch, count: 5)
        let database = try CloudKitDatabase(
            container: "iCloud.com.example.Notes", environment: .development, scope: .private)
        var operations: [PushOperation] = []
        var notSent: [PushRejection] = []
        try CloudSync.plan(
            source, request: PushRequest(mode: .update), database: database, notSent: { notSent.append($0) },
            { operations.append($0) })
        // The store made these records itself: they carry no change tag of CloudKit's, and
        // CloudKit refuses a whole request with an update that lacks one.
        #expect(
            operations.isEmpty && notSent.count == 8
                && notSent.allSatisfy { $0.serverErrorCode == "NOT_SENT" && $0.reason.contains("no change tag") })
        try CloudSync.plan(source, request: PushRequest(mode: .create), database: database) { operations.append($0) }
        #expect(operations.count == 8 && operations.allSatisfy { $0.operationType == "create" })
        let first = try #require(operations.first)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(first.json)) as? [String: Any])
        let record = try #require(json["record"] as? [String: Any])
        #expect(json["operationType"] as? String == "create" && record["recordType"] as? String == "Note")
        #expect((record["fields"] as? [String: Any])?["pinned"] as? [String: Any] != nil)
        #expect(
            record["recordChangeTag"] == nil && record["scope"] == nil && record["zoneID"] == nil
                && record["created"] == nil)
        // Records of another scope are not the private database's.
        try CloudSync.plan(
            source, request: PushRequest(),
            database: try CloudKitDatabase(
                container: "iCloud.com.example.Notes", environment: .development, scope: .public)
        ) { _ in
            Issue.record("a private record planned for the public database")
        }
    }
}

/// Passes `after` requests to `operation` through, then answers QUOTA_EXCEEDED.
final class Passing: CloudKitTransport, @unchecked Sendable {
    let inner: CloudKitEmulator
    let operation: String
    var remaining: Int
    init(_ inner: CloudKitEmulator, failing operation: String, after: Int) {
        self.inner = inner
        self.operation = operation
        remaining = after
    }
    func send(_ request: CloudKitHTTPRequest) async throws -> CloudKitHTTPResponse {
        if request.url.path.hasSuffix(operation) {
            remaining -= 1
            if remaining < 0 { inner.inject(.quotaExceeded, on: operation) }
        }
        return try await inner.send(request)
    }
}

@Suite("the push's feed from its reader")
struct BatchFeedTests {
    /// A producer thread: puts `count` numbers, then finishes or fails.
    /// The context is the producer thread's identity.
    static func produce(_ feed: BatchFeed<Int, String>, count: Int, failing: Bool = false) {
        WorkerThread.start(name: "test producer") {
            let producer = "producer \(pthread_self())"
            for n in 0..<count where !feed.put(n, context: producer) { return }
            if failing {
                feed.fail(CloudKitServerError(serverErrorCode: "BROKEN", reason: "reader failed", status: 0))
            } else {
                feed.finish(context: producer)
            }
        }
    }

    @Test(
        "errands run on the producer's thread while it waits for room, and after it finished until the last batch is taken"
    )
    func errandsWhileWaiting() async throws {
        let feed = BatchFeed<Int, String>(depth: 2)
        Self.produce(feed, count: 10)
        var seen: [Int] = []
        while let n = try await feed.next() {
            seen.append(n)
            // The producer is blocked in put (the feed is full) or has finished: either way it answers.
            let answer = try await feed.errand { context in (context, "producer \(pthread_self())", n) }
            #expect(answer.0 == answer.1 && answer.2 == n)
        }
        #expect(seen == Array(0..<10))
        // The consumer has taken the end: the producer has gone, and an errand is refused, not left waiting.
        await #expect(throws: CancellationError.self) { try await feed.errand { $0 } }
    }

    @Test("an errand waiting when the producer fails is refused with the producer's failure")
    func errandRefusedOnFailure() async throws {
        let feed = BatchFeed<Int, String>(depth: 1)
        Self.produce(feed, count: 1, failing: true)
        #expect(try await feed.next() == 0)
        do {
            _ = try await feed.errand { _ in "read" }
            // The producer may have run it before it failed; then the end is the failure.
            _ = try await feed.next()
            Issue.record("the failure was not passed on")
        } catch let error as CloudKitServerError {
            #expect(error.serverErrorCode == "BROKEN")
        }
    }
}
