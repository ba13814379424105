import CKPort
import CloudKitEmulator
import CloudKitWeb
import Crypto
import Foundation
import Records
import TestSupport
import Testing

/// Lets `limit` requests through to the emulator, then cuts every connection: a pull killed
/// part way.
final class CuttingTransport: CloudKitTransport, @unchecked Sendable {
    let inner: CloudKitTransport
    var remaining: Int
    init(_ inner: CloudKitTransport, after limit: Int) {
        self.inner = inner
        remaining = limit
    }
    func send(_ request: CloudKitHTTPRequest) async throws -> CloudKitHTTPResponse {
        remaining -= 1
        if remaining < 0 { throw CloudKitEmulator.ConnectionDropped() }
        return try await inner.send(request)
    }
}

final class Waits: @unchecked Sendable {
    var seconds: [Double] = []
}

/// Collects what a pull left out.
final class Collected: RejectSink, @unchecked Sendable {
    var issues: [InputIssue] = []
    var raw: [[UInt8]?] = []
    func reject(_ issue: InputIssue, raw: [UInt8]?) throws {
        issues.append(issue)
        self.raw.append(raw)
    }
}

@Suite("pulling from CloudKit (the emulator)")
struct PullTests {
    static let schema = """
        DEFINE SCHEMA
            RECORD TYPE Note (
                "___recordID" REFERENCE QUERYABLE,
                title         STRING QUERYABLE,
                pinned        INT64 QUERYABLE,
                GRANT WRITE TO "_creator",
                GRANT CREATE TO "_icloud",
                GRANT READ TO "_world"
            );
        """

    let emulator = CloudKitEmulator(container: "iCloud.com.example.Notes")
    let database = try! CloudKitDatabase(
        container: "iCloud.com.example.Notes", environment: .development, scope: .private)

    init() {
        emulator.freezeClock()
        emulator.registerUser(apiToken: "api-1", webAuthToken: "web-1")
        emulator.settings.pageSize = 7
    }

    func client(
        _ transport: CloudKitTransport? = nil, policy: RetryPolicy = RetryPolicy(), waits: Waits? = nil,
        token: String = "web-1"
    ) throws -> CloudKitClient {
        try CloudKitClient(
            database: database, credentials: .webToken(apiToken: "api-1", webAuthToken: token),
            transport: transport ?? emulator,
            policy: policy, sleep: { seconds in waits?.seconds.append(seconds) })
    }

    func body(_ object: [String: Any]) throws -> Data { try JSONSerialization.data(withJSONObject: object) }

    /// Creates the zone and `count` notes in it, through the client as an app would.
    func seed(_ client: CloudKitClient, count: Int, zone: String = "Notes") async throws {
        _ = try await client.send(
            "zones/modify",
            body: try body(["operations": [["operationType": "create", "zone": ["zoneID": ["zoneName": zone]]]]]))
        var batcher = ModifyBatcher(maxOperations: 50)
        var batches: [[[UInt8]]] = []
        for n in 0..<count {
            let operation: [String: Any] = [
                "operationType": "create",
                "record": [
                    "recordName": String(format: "note-%04d", n), "recordType": "Note",
                    "fields": [
                        "title": ["value": "Note \(n)", "type": "STRING"], "pinned": ["value": n % 2, "type": "INT64"],
                    ],
                ],
            ]
            if let full = batcher.add(Array(try body(operation))) { batches.append(full) }
        }
        if let last = batcher.finish() { batches.append(last) }
        for batch in batches {
            let operations = try batch.map { try JSONSerialization.jsonObject(with: Data($0)) }
            _ = try await client.send(
                "records/modify", body: try body(["zoneID": ["zoneName": zone], "operations": operations]))
        }
    }

    func names(_ store: RecordStore) throws -> [String] {
        try store.read { session in
            var names: [String] = []
            try session.forEach(RecordQuery(recordTypes: ["Note"])) { names.append($0.recordName) }
            return names
        }
    }

    @Test(
        "a pull reads every page of a zone's change feed, then only what changed; the web auth token turns over on each answer"
    )
    func incremental() async throws {
        let scratch = Scratch()
        let app = try client(token: "web-1")
        try await seed(app, count: 60)
        let store = try scratch.store(Self.schema)
        // ckport signs in as the same user with the token the app's last answer gave.
        let pulling = try client(token: try #require(await app.webAuthToken))
        let first = try await CloudSync.pull(pulling, into: store)
        let notes = try #require(first.zones.first { $0.zone.zoneName == "Notes" })
        #expect(notes.incremental && notes.saved == 60 && notes.pages == 9 && notes.token != nil)
        #expect(try names(store).count == 60)
        let stored = try store.read {
            try $0.record(RecordID(recordName: "note-0007", zone: ZoneID(scope: .private, zoneName: "Notes")))
        }
        #expect(stored?["title"] == .string("Note 7") && stored?["pinned"] == .int64(1))
        #expect(
            try store.read { try $0.syncStates(source: "iCloud.com.example.Notes/development/private") }.filter(
                CloudSync.isZoneState
            ).map(\.token) == [notes.token!])
        // Changes in CloudKit: one record edited, two deleted.
        let other = try client(token: try #require(await pulling.webAuthToken))
        let edit: [String: Any] = [
            "operationType": "forceUpdate",
            "record": [
                "recordName": "note-0003", "recordType": "Note",
                "fields": ["title": ["value": "Milk", "type": "STRING"]],
            ],
        ]
        let deletions = ["note-0010", "note-0011"].map {
            ["operationType": "forceDelete", "record": ["recordName": $0]] as [String: Any]
        }
        _ = try await other.send(
            "records/modify", body: try body(["zoneID": ["zoneName": "Notes"], "operations": [edit] + deletions]))
        let second = try await CloudSync.pull(try client(token: try #require(await other.webAuthToken)), into: store)
        let changed = try #require(second.zones.first { $0.zone.zoneName == "Notes" })
        #expect(changed.saved == 1 && changed.deleted == 2 && changed.pages == 1, "\(changed)")
        #expect(try names(store).count == 58 && !(try names(store)).contains("note-0010"))
        let edited = try store.read {
            try $0.record(RecordID(recordName: "note-0003", zone: ZoneID(scope: .private, zoneName: "Notes")))
        }
        #expect(edited?["title"] == .string("Milk"))
        // Every answer brought a new token; the sign-in's older ones still work (as in public
        // captures of CloudKit's answers), until the sign-in ends: 30 minutes after it began.
        let again = try await CloudSync.pull(try client(token: "web-1"), into: store)
        #expect(again.saved == 0 && again.deleted == 0)
        emulator.advanceClock(by: 31 * 60)
        let before = try store.read { $0.currentToken }
        do {
            _ = try await CloudSync.pull(try client(token: try #require(await other.webAuthToken)), into: store)
            Issue.record("a token of a sign-in 31 minutes old was accepted")
        } catch let error as CloudKitServerError {
            #expect(error.code == .authenticationRequired && error.status == 421 && error.category == .authentication)
            #expect(
                error.redirectURL?.contains("/signin?ckAPIToken=api-1") == true
                    && error.description.contains("sign in again"), "\(error)")
        }
        #expect(try store.read { $0.currentToken } == before)
    }

    @Test("a pull cut off between pages resumes where it stopped: nothing lost, nothing read twice")
    func resumes() async throws {
        let scratch = Scratch()
        let app = try client()
        try await seed(app, count: 100)
        var token = try #require(await app.webAuthToken)
        let store = try scratch.store(Self.schema)
        // zones/list, zones/changes, then five pages of changes, then the connection is gone.
        let cut = try client(CuttingTransport(emulator, after: 7), policy: RetryPolicy(maxAttempts: 1), token: token)
        // One unit at a time, so that the cut falls at a known page.
        await #expect(throws: CloudKitUnavailable.self) {
            _ = try await CloudSync.pull(cut, into: store, concurrency: 1)
        }
        #expect(try names(store).count == 35)
        // The emulator spent the token the cut request carried: take the one the last answer gave.
        token = try #require(await cut.webAuthToken)
        let resumed = try await CloudSync.pull(try client(token: token), into: store)
        let notes = try #require(resumed.zones.first { $0.zone.zoneName == "Notes" })
        #expect(notes.saved == 65 && notes.pages == 10, "\(notes)")
        #expect(try names(store) == (0..<100).map { String(format: "note-%04d", $0) })
    }

    @Test(
        "throttling, 503 and a dropped connection are retried after the waits CloudKit asks for; a final error is not")
    func retries() async throws {
        let scratch = Scratch()
        let app = try client()
        try await seed(app, count: 20)
        let store = try scratch.store(Self.schema)
        emulator.inject(.throttled(retryAfter: 3), on: "records/changes")
        emulator.inject(.unavailable, on: "records/changes")
        emulator.inject(.droppedConnection, on: "zones/list")
        let waits = Waits()
        let pulling = try client(
            policy: RetryPolicy(maxAttempts: 4, baseDelay: 0.5, maxDelay: 10), waits: waits,
            token: try #require(await app.webAuthToken))
        let result = try await CloudSync.pull(pulling, into: store)
        #expect(result.saved == 20)
        #expect(waits.seconds.count == 3 && waits.seconds.contains(3), "\(waits.seconds)")
        #expect(waits.seconds.allSatisfy { $0 >= 0.25 && $0 <= 10 })
        emulator.inject(.quotaExceeded, on: "records/changes")
        do {
            _ = try await CloudSync.pull(try client(token: try #require(await pulling.webAuthToken)), into: store)
            Issue.record("QUOTA_EXCEEDED without retryAfter is final")
        } catch let error as CloudKitServerError {
            #expect(error.code == .quotaExceeded && error.status == 413)
        }
    }

    @Test(
        "a record that does not fit the schema is left out, with its reason and its JSON, and the feed moves on: its page's other records are saved, and the zone is read again until it fits"
    )
    func badRecord() async throws {
        let scratch = Scratch()
        let app = try client()
        try await seed(app, count: 10)
        let bad: [String: Any] = [
            "zoneID": ["zoneName": "Notes"],
            "operations": [
                [
                    "operationType": "forceReplace",
                    "record": [
                        "recordName": "note-0004", "recordType": "Note",
                        "fields": ["pinned": ["value": "yes", "type": "STRING"]],
                    ],
                ]
            ],
        ]
        _ = try await app.send("records/modify", body: try body(bad))
        let store = try scratch.store(Self.schema)
        let rejects = Collected()
        let result = try await CloudSync.pull(
            try client(token: try #require(await app.webAuthToken)), into: store, rejects: rejects)
        // Pages of 7: the first holds note-0000…0003 and 0005…0007 (note-0004 changed last).
        #expect(result.saved == 9 && result.leftOut == 1 && result.leftOutByType == ["Note": 1])
        let issue = try #require(rejects.issues.first)
        #expect(
            rejects.issues.count == 1 && issue.position.file == "CloudKit page 2 of zone Notes"
                && issue.recordName == "note-0004" && issue.field == "pinned")
        #expect(String(decoding: try #require(rejects.raw.first ?? nil), as: UTF8.self).contains(#""value":"yes""#))
        #expect(try names(store).count == 9 && !(try names(store)).contains("note-0004"))
        // The zone keeps the left-out mark instead of a token past the page: the next pull reads
        // the zone again from the start, keeps the nine it has (CloudKit did not change them) and
        // asks for note-0004 again, which is left out again while it does not fit.
        let source = "iCloud.com.example.Notes/development/private"
        let states = try store.read { try $0.syncStates(source: source) }.filter(CloudSync.isZoneState)
        #expect(states.count == 1 && states[0].token == "ckport:left-out", "\(states)")
        let next = try await CloudSync.pull(try client(token: try #require(await app.webAuthToken)), into: store)
        #expect(next.saved == 0 && next.leftOut == 1, "\(next)")
        // What was left out is kept with the store, for cloud status.
        let report = try #require(try CloudSync.lastPull(in: store, source: source))
        #expect(report.leftOut == ["Note": 1] && report.saved == 0, "\(report)")
        // Once the record fits, the next pull brings it in, and the zone has a token again.
        let fixed: [String: Any] = [
            "zoneID": ["zoneName": "Notes"],
            "operations": [
                [
                    "operationType": "forceReplace",
                    "record": [
                        "recordName": "note-0004", "recordType": "Note",
                        "fields": ["pinned": ["value": 1, "type": "INT64"]],
                    ],
                ]
            ],
        ]
        _ = try await app.send("records/modify", body: try body(fixed))
        let fitting = try await CloudSync.pull(try client(token: try #require(await app.webAuthToken)), into: store)
        #expect(fitting.saved == 1 && fitting.leftOut == 0, "\(fitting)")
        #expect(try names(store).count == 10)
        let after = try store.read { try $0.syncStates(source: source) }.filter(CloudSync.isZoneState)
        #expect(after.count == 1 && after[0].token != "ckport:left-out", "\(after)")
    }

    @Test(
        "several zones at once: requests signed with a key overlap; requests with a web auth token go one at a time, and every zone arrives whole"
    )
    func concurrency() async throws {
        let scratch = Scratch()
        let app = try client()
        for zone in ["A", "B", "C", "D", "E"] { try await seed(app, count: 30, zone: zone) }
        let watched = InFlight(emulator)
        let store = try scratch.store(Self.schema)
        let tokens = try CloudKitClient(
            database: database,
            credentials: .webToken(apiToken: "api-1", webAuthToken: try #require(await app.webAuthToken)),
            transport: watched)
        let result = try await CloudSync.pull(tokens, into: store, concurrency: 4)
        #expect(result.saved == 150 && result.zones.filter(\.incremental).map(\.saved) == [30, 30, 30, 30, 30])
        #expect(watched.most == 1, "web auth token requests overlapped: \(watched.most)")
        // The public database with a key: queries per record type and zone may overlap.
        let key = try ServerToServerKey(keyID: "k1", pem: P256PEM.make())
        emulator.registerKey(id: "k1", publicKeyPEM: key.publicKeyPEM)
        let publicDatabase = try CloudKitDatabase(
            container: "iCloud.com.example.Notes", environment: .development, scope: .public)
        let signed = try CloudKitClient(database: publicDatabase, credentials: .serverToServer(key), transport: watched)
        let operations: [[String: Any]] = (0..<40).map { n in
            [
                "operationType": "create",
                "record": [
                    "recordName": "pub-\(n)", "recordType": "Note",
                    "fields": ["title": ["value": "Public \(n)", "type": "STRING"]],
                ],
            ]
        }
        _ = try await signed.send("records/modify", body: try body(["operations": operations]))
        let twoTypes = try scratch.store(
            Self.schema + """

                    RECORD TYPE Folder (
                        "___recordID" REFERENCE QUERYABLE,
                        name          STRING,
                        GRANT READ TO "_world"
                    );
                """, name: "public.sqlite")
        watched.most = 0
        watched.meet = 2
        let pulled = try await CloudSync.pull(signed, into: twoTypes, concurrency: 4)
        #expect(pulled.saved == 40)
        #expect(watched.most == 2, "requests in flight at most: \(watched.most)")
    }

    @Test(
        "assets: with downloads on, each asset a record names is fetched and stored with its page; without, the record keeps checksum and size only"
    )
    func assets() async throws {
        let scratch = Scratch()
        let app = try client()
        let photo = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let receipt = emulator.storeAsset(photo)
        _ = try await app.send(
            "zones/modify",
            body: try body(["operations": [["operationType": "create", "zone": ["zoneID": ["zoneName": "Notes"]]]]]))
        let create: [String: Any] = [
            "zoneID": ["zoneName": "Notes"],
            "operations": [
                [
                    "operationType": "create",
                    "record": [
                        "recordName": "note-photo", "recordType": "Note",
                        "fields": [
                            "title": ["value": "With a photo", "type": "STRING"],
                            "attachment": ["value": ["receipt": receipt], "type": "ASSETID"],
                        ],
                    ],
                ]
            ],
        ]
        _ = try await app.send("records/modify", body: try body(create))
        let schema = Self.schema.replacingOccurrences(
            of: "pinned        INT64 QUERYABLE,", with: "pinned        INT64 QUERYABLE,\n        attachment    ASSET,")
        let id = RecordID(recordName: "note-photo", zone: ZoneID(scope: .private, zoneName: "Notes"))
        let bare = try scratch.store(schema, name: "bare.sqlite")
        let token = try #require(await app.webAuthToken)
        let first = try client(token: token)
        _ = try await CloudSync.pull(first, into: bare)
        guard case .asset(let kept)? = try bare.read({ try $0.record(id) })?["attachment"] else {
            Issue.record("no asset value")
            return
        }
        #expect(kept.size == 300_000 && kept.sha256 == nil && kept.downloadURL?.contains("/download/") == true)
        let full = try scratch.store(schema, name: "full.sqlite")
        let second = try client(token: try #require(await first.webAuthToken))
        let result = try await CloudSync.pull(second, into: full, assets: true)
        #expect(result.saved == 1)
        guard case .asset(let stored)? = try full.read({ try $0.record(id) })?["attachment"] else {
            Issue.record("no asset value")
            return
        }
        let expected = SHA256.hash(data: photo).map { String(format: "%02x", $0) }.joined()
        #expect(stored.sha256 == expected && stored.size == 300_000)
        var bytes = Data()
        #expect(try full.read { session in try session.readAsset(expected) { bytes.append(contentsOf: $0) } })
        #expect(bytes == photo)
        #expect(emulator.log.filter { $0 == "records/changes" }.count == 2)
    }

    @Test("server-to-server keys: the public database through queries; a wrong key is refused")
    func serverToServer() async throws {
        let scratch = Scratch()
        let key = try ServerToServerKey(keyID: "abc123", pem: P256PEM.make())
        emulator.registerKey(id: "abc123", publicKeyPEM: key.publicKeyPEM)
        let publicDatabase = try CloudKitDatabase(
            container: "iCloud.com.example.Notes", environment: .development, scope: .public)
        let signed = try CloudKitClient(
            database: publicDatabase, credentials: .serverToServer(key), transport: emulator)
        var operations: [[String: Any]] = []
        for n in 0..<12 {
            operations.append([
                "operationType": "create",
                "record": [
                    "recordName": "pub-\(n)", "recordType": "Note",
                    "fields": ["title": ["value": "Public \(n)", "type": "STRING"]],
                ],
            ])
        }
        _ = try await signed.send("records/modify", body: try body(["operations": operations]))
        let store = try scratch.store(Self.schema)
        let result = try await CloudSync.pull(signed, into: store)
        #expect(result.zones.map(\.incremental) == [false] && result.saved == 12 && result.zones[0].pages == 2)
        let stranger = try ServerToServerKey(keyID: "abc123", pem: P256PEM.make())
        let forged = try CloudKitClient(
            database: publicDatabase, credentials: .serverToServer(stranger), transport: emulator)
        do {
            _ = try await forged.send("zones/list")
            Issue.record("a signature by another key was accepted")
        } catch let error as CloudKitServerError {
            #expect(error.code == .authenticationFailed && error.category == .authentication)
        }
        // A request dated more than ten minutes from the server's clock is refused.
        emulator.advanceClock(by: 11 * 60)
        do {
            _ = try await signed.send("zones/list")
            Issue.record("a request dated eleven minutes back was accepted")
        } catch let error as CloudKitServerError {
            #expect(error.code == .authenticationFailed)
        }
        emulator.advanceClock(by: -11 * 60)
        _ = try await signed.send("zones/list")
        #expect(throws: CloudKitRequestError.keyNeedsPublicDatabase(.private)) {
            _ = try CloudKitClient(database: database, credentials: .serverToServer(key), transport: emulator)
        }
    }
}

enum P256PEM {
    static func make() -> String { P256.Signing.PrivateKey().pemRepresentation }
}

@Suite("the emulator over HTTP")
struct HTTPTests {
    @Test(
        "a pull and a push over HTTP on loopback, through each transport, with a fault that cuts the connection on the way",
        arguments: ["URLSession", "AsyncHTTPClient"])
    func overHTTP(_ transportName: String) async throws {
        let scratch = Scratch()
        let emulator = CloudKitEmulator(container: "iCloud.com.example.Notes")
        emulator.settings.pageSize = 5
        emulator.registerUser(apiToken: "api-1", webAuthToken: "web-1")
        emulator.load(
            (0..<23).map { n in
                [
                    "recordName": "note-\(n)", "recordType": "Note", "zoneID": ["zoneName": "Notes"],
                    "fields": [
                        "title": ["value": "Note \(n)", "type": "STRING"], "pinned": ["value": 0, "type": "INT64"],
                    ],
                ] as [String: Any]
            })
        let server = try await EmulatorServer.start(emulator)
        do {
            try await droppedConnections(emulator, server, transportName: transportName, scratch: scratch)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    func droppedConnections(
        _ emulator: CloudKitEmulator, _ server: EmulatorServer, transportName: String, scratch: Scratch
    ) async throws {
        emulator.inject(.droppedConnection, on: "records/changes")
        let database = try CloudKitDatabase(
            container: "iCloud.com.example.Notes", environment: .development, scope: .private, baseURL: server.baseURL)
        let waits = Waits()
        // URLSession notices a connection cut before the answer only when its timeout runs out.
        let transport: CloudKitTransport =
            transportName == "URLSession" ? URLSessionTransport(timeout: 60) : HTTPClientTransport(timeout: 60)
        let client = try CloudKitClient(
            database: database, credentials: .webToken(apiToken: "api-1", webAuthToken: "web-1"),
            transport: transport, sleep: { waits.seconds.append($0) })
        let store = try scratch.store(PullTests.schema)
        let result = try await CloudSync.pull(client, into: store)
        #expect(result.saved == 23 && waits.seconds.count == 1)
        #expect(result.zones.first { $0.zone.zoneName == "Notes" }?.pages == 5)
        #expect(emulator.log.filter { $0 == "records/changes" }.count == 6)
        // Back up again, forced: bodies of many operations go up the same way.
        emulator.inject(.droppedConnection, on: "records/modify")
        let pushed = try await CloudSync.push(client, from: store, request: PushRequest(force: true)) { _ in }
        #expect(pushed.total.saved == 23 && pushed.requests == 1 && waits.seconds.count == 2)
        #expect(emulator.log.filter { $0 == "records/modify" }.count == 2)
    }
}

/// Counts requests in flight at once. With `meet` set, a request waits (up to ten seconds) until
/// that many are in flight together, so that overlap is decided by the code under test and not
/// by timing: a client that sends one at a time makes every request wait out the ten seconds
/// and `most` stays 1. Without it, each request is held 20 ms, so that overlaps a client
/// should not make have time to show.
final class InFlight: CloudKitTransport, @unchecked Sendable {
    let inner: CloudKitTransport
    private let lock = NSLock()
    private var now = 0
    var most = 0
    var meet = 0
    private var met = false
    init(_ inner: CloudKitTransport) { self.inner = inner }
    func send(_ request: CloudKitHTTPRequest) async throws -> CloudKitHTTPResponse {
        let meet = lock.withLock { () -> Int in
            now += 1
            most = max(most, now)
            if self.meet > 0 && now >= self.meet { met = true }
            return self.meet
        }
        defer { lock.withLock { now -= 1 } }
        if meet > 0 {
            let deadline = Date().addingTimeInterval(10)
            while !lock.withLock({ met }) && Date() < deadline { try await Task.sleep(nanoseconds: 1_000_000) }
        } else {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        return try await inner.send(request)
    }
}
