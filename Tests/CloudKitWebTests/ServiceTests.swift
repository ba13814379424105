import CloudKitEmulator
import CloudKitWeb
import Foundation
import Records
import SQLiteStore
import StoreCore
import TestSupport
import Testing

@testable import CKPort

/// Passes requests on, rewriting the URL first (a client that encoded the query otherwise).
final class RewritingTransport: CloudKitTransport, @unchecked Sendable {
    let inner: CloudKitTransport
    let rewrite: @Sendable (URL) -> URL
    init(_ inner: CloudKitTransport, rewrite: @escaping @Sendable (URL) -> URL) {
        self.inner = inner
        self.rewrite = rewrite
    }
    func send(_ request: CloudKitHTTPRequest) async throws -> CloudKitHTTPResponse {
        var request = request
        request.url = rewrite(request.url)
        return try await inner.send(request)
    }
}

/// A pull and push against the emulator where it answers as Apple's service does (see
/// CaptureTests for what that rests on): tokens, feeds, faults, queries, zones and owners.
@Suite("CloudKit as Apple's servers answer")
struct ServiceTests {
    static let schema = """
        DEFINE SCHEMA
            RECORD TYPE Note (
                "___recordID" REFERENCE QUERYABLE,
                title         STRING QUERYABLE,
                pinned        INT64 QUERYABLE,
                tags          LIST<STRING>,
                secret        ENCRYPTED STRING,
                blob          ENCRYPTED BYTES,
                attachment    ASSET,
                photos        LIST<ASSET>,
                GRANT WRITE TO "_creator",
                GRANT READ TO "_world"
            );
            RECORD TYPE Users (
                "___recordID" REFERENCE,
                roles         LIST<INT64>,
                GRANT READ TO "_world"
            );
            RECORD TYPE Draft (
                "___recordID" REFERENCE,
                title         STRING,
                GRANT READ TO "_world"
            );
        """
    static let container = "iCloud.com.example.Notes"
    static let notes = ZoneID(scope: .private, zoneName: "Notes")

    let emulator = CloudKitEmulator(container: container)
    let token: String

    init() throws {
        emulator.defineSchema(try SchemaParser.parse(Self.schema))
        emulator.freezeClock()
        emulator.settings.pageSize = 7
        token = emulator.signIn(apiToken: "api-1")
    }

    func client(
        _ scope: CloudKitDatabase.Scope = .private, transport: CloudKitTransport? = nil, waits: Waits? = nil,
        token: String? = nil,
        policy: RetryPolicy = RetryPolicy(), keeper: WebAuthTokenFile? = nil
    ) throws -> CloudKitClient {
        let database = try CloudKitDatabase(container: Self.container, environment: .development, scope: scope)
        var kept: (@Sendable (String) -> Void)? = nil
        if let keeper { kept = { keeper.keep($0) } }
        let carrier: CloudKitTransport = transport ?? emulator
        return try CloudKitClient(
            database: database, credentials: .webToken(apiToken: "api-1", webAuthToken: token ?? self.token),
            transport: carrier,
            policy: policy, onWebAuthToken: kept, sleep: { waits?.seconds.append($0) })
    }

    func body(_ object: [String: Any]) throws -> Data { try JSONSerialization.data(withJSONObject: object) }

    /// Notes in a custom zone, made through the client as an app would.
    func seed(_ client: CloudKitClient, count: Int, zone: String = "Notes", first: Int = 0) async throws {
        _ = try await client.send(
            "zones/modify",
            body: try body(["operations": [["operationType": "create", "zone": ["zoneID": ["zoneName": zone]]]]]))
        for start in stride(from: first, to: first + count, by: 100) {
            let operations = (start..<min(first + count, start + 100)).map { n -> [String: Any] in
                [
                    "operationType": "create",
                    "record": [
                        "recordName": String(format: "note-%04d", n), "recordType": "Note",
                        "fields": [
                            "title": ["value": "Note \(n)", "type": "STRING"],
                            "pinned": ["value": n % 2, "type": "INT64"],
                        ],
                    ],
                ]
            }
            _ = try await client.send(
                "records/modify", body: try body(["zoneID": ["zoneName": zone], "operations": operations]))
        }
    }

    func names(_ store: RecordStore, zone: ZoneID = notes) throws -> [String] {
        try store.read { session in
            var names: [String] = []
            try session.forEach(RecordQuery(scope: zone.scope, zoneName: zone.zoneName)) {
                if $0.zone == zone { names.append($0.recordName) }
            }
            return names.sorted()
        }
    }

    // MARK: 1, 2: tokens

    @Test(
        "tokens as Apple issues them (with + / =) go percent-encoded and work; sent bare, CloudKit reads the + as a space and refuses them"
    )
    func tokenEncoding() async throws {
        var token = self.token
        for _ in 0..<20 where !token.contains("+") { token = emulator.signIn(apiToken: "api-1") }
        #expect(token.contains("__54__") && token.contains("+"))
        let scratch = Scratch()
        let store = try scratch.store(Self.schema)
        try await seed(try client(token: token), count: 3)
        let result = try await CloudSync.pull(try client(token: token), into: store)
        #expect(result.saved == 3)
        #expect(
            emulator.requests.allSatisfy { !($0.query ?? "").contains("+") }
                && emulator.requests.contains { ($0.query ?? "").contains("%2B") })
        // The same request with the query's %2B, %2F and %3D undone, as URLComponents.queryItems leaves them.
        let careless = RewritingTransport(emulator) { url in
            URL(
                string: url.absoluteString.replacingOccurrences(of: "%2B", with: "+").replacingOccurrences(
                    of: "%2F", with: "/"
                ).replacingOccurrences(of: "%3D", with: "="))!
        }
        do {
            _ = try await CloudSync.pull(try client(transport: careless, token: token), into: store)
            Issue.record("a token whose + went unencoded was accepted")
        } catch let error as CloudKitServerError {
            #expect(error.code == .authenticationFailed && error.status == 401 && error.category == .authentication)
        }
    }

    @Test(
        "a sign-in lasts 30 minutes, two weeks with Keep me signed in; every token of it works until then; then AUTHENTICATION_REQUIRED with where to sign in, and nothing is written"
    )
    func tokenLifetime() async throws {
        let scratch = Scratch()
        let store = try scratch.store(Self.schema)
        let kept = emulator.signIn(apiToken: "api-1", keepSignedIn: true)
        try await seed(try client(), count: 5)
        let early = try client(token: token)
        #expect(try await CloudSync.pull(early, into: store).saved == 5)
        emulator.advanceClock(by: 29 * 60)
        _ = try await CloudSync.pull(try client(token: token), into: store)
        emulator.advanceClock(by: 2 * 60)
        let before = try store.read { $0.currentToken }
        let sources = try store.read { try $0.syncStates(source: "iCloud.com.example.Notes/development/private") }
        for stale in [token, try #require(await early.webAuthToken)] {
            do {
                _ = try await CloudSync.pull(try client(token: stale), into: store)
                Issue.record("a 31-minute-old sign-in was accepted")
            } catch let error as CloudKitServerError {
                #expect(
                    error.code == .authenticationRequired && error.status == 421
                        && error.redirectURL?.contains("/signin?ckAPIToken=api-1") == true)
            }
        }
        #expect(try store.read { $0.currentToken } == before)
        #expect(try store.read { try $0.syncStates(source: "iCloud.com.example.Notes/development/private") } == sources)
        // "Keep me signed in": two weeks.
        #expect(try await CloudSync.pull(try client(token: kept), into: store).saved == 0)
        emulator.advanceClock(by: 14 * 24 * 3600)
        await #expect(throws: CloudKitServerError.self) {
            _ = try await CloudSync.pull(try client(token: kept), into: store)
        }
    }

    @Test(
        "the token file: each new token replaces the old for the owner alone, the sign-in time stays, the last answer is noted; cloud status reads where the sign-in stands"
    )
    func tokenFile() throws {
        let scratch = Scratch()
        let path = scratch.path("web.txt")
        let signedIn = Date(timeIntervalSince1970: 1_790_000_000)
        try WebAuthTokenFile.write(WebAuthTokenFile.Contents(token: "t-1", signedIn: signedIn), to: path)
        let later = signedIn.addingTimeInterval(45 * 60)
        let file = WebAuthTokenFile(path: path, clock: { later })
        file.keep("106__54__a+b/c=__e30=")
        try file.checkKept()
        #expect(try CloudKitCredentials.token(fromFile: path) == "106__54__a+b/c=__e30=")
        #expect(
            file.read()
                == WebAuthTokenFile.Contents(token: "106__54__a+b/c=__e30=", signedIn: signedIn, lastAnswer: later))
        let mode = (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600)
        // A token that answered 45 minutes after its sign-in shows "Keep me signed in": two weeks.
        #expect(
            WebAuthTokenLifetime.standing(signedIn: signedIn, lastAnswer: later, now: later)
                == .valid(until: signedIn.addingTimeInterval(14 * 24 * 3600), kept: true))
        // Otherwise ckport can say only that 30 minutes have passed.
        #expect(
            WebAuthTokenLifetime.standing(
                signedIn: signedIn, lastAnswer: signedIn.addingTimeInterval(60),
                now: signedIn.addingTimeInterval(10 * 60))
                == .valid(until: signedIn.addingTimeInterval(30 * 60), kept: nil))
        #expect(
            WebAuthTokenLifetime.standing(signedIn: signedIn, lastAnswer: nil, now: signedIn.addingTimeInterval(3600))
                == .expiredUnlessKept(
                    at: signedIn.addingTimeInterval(1800), keptUntil: signedIn.addingTimeInterval(14 * 24 * 3600)))
        #expect(
            WebAuthTokenLifetime.standing(
                signedIn: signedIn, lastAnswer: later, now: signedIn.addingTimeInterval(15 * 24 * 3600))
                == .expired(at: signedIn.addingTimeInterval(14 * 24 * 3600)))
        #expect(WebAuthTokenLifetime.standing(signedIn: nil, lastAnswer: later, now: later) == .unknown)
        // A token that cannot be kept is reported (once), not ignored.
        let blocked = WebAuthTokenFile(path: scratch.path("no-such-folder/web.txt"))
        blocked.keep("t-2")
        #expect(throws: TokenFileError.self) { try blocked.checkKept() }
        try blocked.checkKept()
    }

    // MARK: 3, 4: feeds that never stall; types CloudKit adds

    @Test(
        "a share's cloudkit.share is kept with its participants (the schema gains CloudKit's share type); a type added after the schema was exported is left out, counted and handed to the rejects; the next pull asks for it again; --allow-new-types keeps the new type"
    )
    func feedNeverStalls() async throws {
        let scratch = Scratch()
        let app = try client()
        try await seed(app, count: 10)
        #expect(
            emulator.share(
                "note-0003", zone: "Notes", title: "Family notes", participants: [("_grandma", "READ_WRITE", true)])
                != nil)
        let later: [String: Any] = [
            "zoneID": ["zoneName": "Notes"],
            "operations": [
                [
                    "operationType": "create",
                    "record": [
                        "recordName": "rem-1", "recordType": "Reminder",
                        "fields": ["note": ["value": "Buy milk", "type": "STRING"]],
                    ],
                ]
            ],
        ]
        _ = try await app.send("records/modify", body: try body(later))
        let store = try scratch.store(Self.schema)
        let rejects = Collected()
        let result = try await CloudSync.pull(try client(), into: store, rejects: rejects)
        #expect(
            result.saved == 11 && result.leftOut == 1 && result.leftOutByType == ["Reminder": 1],
            "\(result.leftOutByType)")
        #expect(result.schemaChanges.contains { $0.contains("cloudkit.share") }, "\(result.schemaChanges)")
        #expect(Set(rejects.issues.compactMap(\.recordType)) == ["Reminder"])
        #expect(
            rejects.issues.allSatisfy { $0.message.description.contains("unknown record type") }, "\(rejects.issues)")
        #expect(try names(store).count == 11)
        // The share, with who takes part; its root names it.
        var pulled: [Record] = []
        try store.read { session in try session.forEach(RecordQuery()) { pulled.append($0) } }
        let share = try #require(pulled.first { $0.isShare })
        let details = try #require(share.shareDetails.flatMap(ShareDetails.init(json:)))
        #expect(
            details.participants.map(\.userRecordName) == ["_user", "_grandma"] && details.publicPermission == "NONE")
        #expect(
            details.participants.map(\.acceptanceStatus) == ["ACCEPTED", "ACCEPTED"] && details.owner?.type == "OWNER")
        #expect(pulled.first { $0.recordName == "note-0003" }?.share == share.recordName)
        // The zone's token does not move past them: the next pull reads the zone again for them
        // (and leaves the record out again while the schema still lacks its type).
        let next = try await CloudSync.pull(try client(), into: store)
        #expect(
            next.leftOut == 1 && next.zones.contains { $0.refetched?.contains("left some of its records out") == true },
            "\(next.zones)")
        #expect(try names(store).count == 11)
        // Once the store can take it, a pull brings it in, and the zone's token moves on.
        let taking = try await CloudSync.pull(try client(), into: store, allowNewTypes: true)
        // Only the record left out is saved: the others are in the store as CloudKit has them.
        #expect(taking.leftOut == 0 && taking.saved == 1, "\(taking.zones)")
        #expect(try names(store).count == 12)
        let after = try await CloudSync.pull(try client(), into: store)
        #expect(
            after.saved == 0 && after.leftOut == 0 && after.zones.allSatisfy { $0.refetched == nil }, "\(after.zones)")
        // With new types allowed, Reminder joins the schema and its record is kept too.
        let open = try scratch.store(Self.schema, name: "open.sqlite")
        let kept = try await CloudSync.pull(try client(), into: open, allowNewTypes: true, rejects: Collected())
        #expect(
            kept.saved == 12 && kept.leftOutByType.isEmpty && kept.schemaChanges.contains { $0.contains("Reminder") },
            "\(kept.schemaChanges)")
        #expect(open.schema.recordType(named: "Reminder")?.field(named: "note")?.type == .string)
    }

    @Test(
        "UNKNOWN_LIST is read as the schema's list type; a type name ckport does not know reads as the schema says; one it cannot place is left out, not a stalled feed"
    )
    func unknownTypes() async throws {
        let scratch = Scratch()
        let app = try client()
        try await seed(app, count: 2)
        let operations: [[String: Any]] = [
            [
                "operationType": "create",
                "record": [
                    "recordName": "empty-tags", "recordType": "Note",
                    "fields": ["tags": ["value": [] as [Any], "type": "STRING_LIST"]],
                ],
            ]
        ]
        _ = try await app.send(
            "records/modify", body: try body(["zoneID": ["zoneName": "Notes"], "operations": operations]))
        // What a later CloudKit might send: a type name of its own for a field the schema has,
        // and one for a field it has not.
        emulator.load([
            [
                "recordName": "future-1", "recordType": "Note", "zoneID": ["zoneName": "Notes"],
                "fields": ["title": ["value": "From the future", "type": "STRING_V2"]],
            ],
            [
                "recordName": "future-2", "recordType": "Note", "zoneID": ["zoneName": "Notes"],
                "fields": ["title": ["value": "Kept"], "mood": ["value": [] as [Any], "type": "UNKNOWN_LIST"]],
            ],
            [
                "recordName": "future-3", "recordType": "Note", "zoneID": ["zoneName": "Notes"],
                "fields": ["title": ["value": "Placed nowhere"], "mood": ["value": "sunny", "type": "MOOD_V2"]],
            ],
        ])
        let store = try scratch.store(Self.schema)
        let rejects = Collected()
        let result = try await CloudSync.pull(try client(), into: store, rejects: rejects)
        #expect(result.saved == 5 && result.leftOut == 1, "\(result.zones)")
        let held = try store.read { try $0.record(RecordID(recordName: "empty-tags", zone: Self.notes)) }
        #expect(held?["tags"] == .list(.string, []))
        #expect(
            try store.read { try $0.record(RecordID(recordName: "future-1", zone: Self.notes)) }?["title"]
                == .string("From the future"))
        // An empty list of a lost type, in a field the schema lacks, holds nothing: the record is kept.
        #expect(
            try store.read { try $0.record(RecordID(recordName: "future-2", zone: Self.notes)) }?.fields.names == [
                "title"
            ])
        // A value of a type ckport does not know, in a field the schema lacks: left out, with why.
        let issue = try #require(rejects.issues.first)
        #expect(
            issue.recordName == "future-3" && issue.field == "mood" && issue.message.description.contains("MOOD_V2"),
            "\(issue)")
    }

    // MARK: 5: queries

    @Test(
        "the public database and default zones: only types CloudKit can query are asked for; the others, and a type CloudKit refuses, are reported with why, and the pull goes on"
    )
    func queriesCloudKitAnswers() async throws {
        let scratch = Scratch()
        let key = try ServerToServerKey(keyID: "k1", pem: P256PEM.make())
        emulator.registerKey(id: "k1", publicKeyPEM: key.publicKeyPEM)
        let publicDatabase = try CloudKitDatabase(container: Self.container, environment: .development, scope: .public)
        let signed = try CloudKitClient(
            database: publicDatabase, credentials: .serverToServer(key), transport: emulator)
        let operations: [[String: Any]] = (0..<9).map { n in
            [
                "operationType": "create",
                "record": [
                    "recordName": "pub-\(n)", "recordType": "Note",
                    "fields": ["title": ["value": "Public \(n)", "type": "STRING"]],
                ],
            ]
        }
        _ = try await signed.send("records/modify", body: try body(["operations": operations]))
        // The store believes Draft is queryable; the container's schema does not.
        let store = try scratch.store(
            Self.schema.replacingOccurrences(
                of: """
                    RECORD TYPE Draft (
                            "___recordID" REFERENCE,
                    """,
                with: """
                    RECORD TYPE Draft (
                            "___recordID" REFERENCE QUERYABLE,
                    """))
        let result = try await CloudSync.pull(signed, into: store)
        #expect(result.saved == 9)
        let notPulled = Dictionary(uniqueKeysWithValues: result.notPulled.map { ($0.recordType, $0.reason) })
        #expect(notPulled.keys.sorted() == ["Draft", "Users"], "\(notPulled)")
        #expect(notPulled["Users"]?.contains("system type") == true)
        #expect(notPulled["Draft"]?.contains("Queried type is not marked indexable") == true)
        // Users was never asked for; Draft was, once, and Note twice (9 records in pages of 7).
        #expect(emulator.log.filter { $0 == "records/query" }.count == 3)
        let report = try #require(
            try CloudSync.lastPull(in: store, source: "iCloud.com.example.Notes/development/public"))
        #expect(report.notPulled.map(\.recordType).sorted() == ["Draft", "Users"] && report.saved == 9)
        // A store whose schema marks a type unqueryable does not ask for it at all.
        let strict = try scratch.store(Self.schema, name: "strict.sqlite")
        let before = emulator.log.count
        let again = try await CloudSync.pull(signed, into: strict)
        #expect(again.notPulled.first { $0.recordType == "Draft" }?.reason.contains("not QUERYABLE") == true)
        #expect(emulator.log[before...].filter { $0 == "records/query" }.count == 2)
    }

    // MARK: 6: retries

    @Test(
        "503 TRY_AGAIN_LATER and 500 INTERNAL_ERROR without retryAfter, 429 with or without it, and a retryAfter over a minute: waited out, announced, every record fetched"
    )
    func retries() async throws {
        let scratch = Scratch()
        try await seed(try client(), count: 20)
        let store = try scratch.store(Self.schema)
        emulator.inject(.tryAgainLater(retryAfter: nil), on: "records/changes")
        emulator.inject(.internalError, on: "records/changes")
        emulator.inject(.throttled(retryAfter: nil), on: "zones/list")
        emulator.inject(.throttled(retryAfter: 120), on: "records/changes")
        let waits = Waits()
        let announced = Waits()
        let pulling = try CloudKitClient(
            database: try CloudKitDatabase(container: Self.container, environment: .development, scope: .private),
            credentials: .webToken(apiToken: "api-1", webAuthToken: token), transport: emulator,
            policy: RetryPolicy(maxAttempts: 5, baseDelay: 0.5, maxDelay: 10),
            onRetry: { _, seconds, _ in announced.seconds.append(seconds) }, sleep: { waits.seconds.append($0) })
        let result = try await CloudSync.pull(pulling, into: store)
        #expect(result.saved == 20)
        #expect(
            waits.seconds.count == 4 && waits.seconds.contains(120) && announced.seconds == waits.seconds,
            "\(waits.seconds)")
        #expect(waits.seconds.filter { $0 != 120 }.allSatisfy { $0 >= 0.25 && $0 <= 10 })
        // Over the longest wait: not waited, and said so.
        emulator.inject(.throttled(retryAfter: 3600), on: "zones/list")
        do {
            _ = try await CloudSync.pull(try client(), into: store)
            Issue.record("a wait of an hour was taken")
        } catch let error as CloudKitUnavailable {
            #expect(
                error.description.contains("it asked to wait 60 min, longer than the 15 min ckport waits"), "\(error)")
        }
    }

    @Test(
        "a per-record retryAfter in a records/modify answer means: send that record again; the push ends with every record saved"
    )
    func perRecordRetry() async throws {
        let scratch = Scratch()
        let records = (0..<12).map { n in
            Record(
                id: RecordID(recordName: "note-\(n)", zone: Self.notes), recordType: "Note",
                fields: ["title": .string("Note \(n)")])
        }
        let source = try scratch.store("source.sqlite", schema: Self.schema, records: records)
        emulator.inject(.recordsBusy(count: 5, retryAfter: 2), on: "records/modify")
        let waits = Waits()
        let rejected = Rejections()
        let result = try await CloudSync.push(try client(waits: waits), from: source, request: PushRequest()) {
            rejected.all.append($0)
        }
        #expect(
            result.total.saved == 12 && rejected.all.isEmpty && result.requests == 2,
            "\(result.total) \(rejected.codes)")
        #expect(waits.seconds == [2])
    }

    // MARK: 7: encrypted fields

    @Test(
        "encrypted fields go as CloudKit takes them: the plain type with isEncrypted, ENCRYPTED_BYTES for bytes; and come back the same"
    )
    func encryptedFields() async throws {
        let scratch = Scratch()
        let record = Record(
            id: RecordID(recordName: "secret-1", zone: Self.notes), recordType: "Note",
            fields: [
                "title": .string("Where the key is"), "secret": .string("under the mat"), "blob": .bytes([1, 2, 3]),
            ])
        let source = try scratch.store("source.sqlite", schema: Self.schema, records: [record])
        var sent: [String] = []
        try CloudSync.plan(
            source, request: PushRequest(),
            database: try CloudKitDatabase(container: Self.container, environment: .development, scope: .private)
        ) {
            sent.append(String(decoding: $0.json, as: UTF8.self))
        }
        #expect(
            sent.count == 1
                && sent[0].contains(#""secret":{"value":"under the mat","type":"STRING","isEncrypted":true}"#),
            "\(sent)")
        #expect(
            sent[0].contains(#""blob":{"value":"AQID","type":"ENCRYPTED_BYTES"}"#)
                && !sent[0].contains("ENCRYPTED_STRING"))
        let rejected = Rejections()
        let pushed = try await CloudSync.push(try client(), from: source, request: PushRequest()) {
            rejected.all.append($0)
        }
        #expect(pushed.total.saved == 1 && rejected.all.isEmpty, "\(rejected.all.map(\.reason))")
        let copy = try scratch.store(Self.schema, name: "copy.sqlite")
        _ = try await CloudSync.pull(try client(), into: copy)
        let back = try copy.read { try $0.record(record.id) }
        #expect(back?["secret"] == .string("under the mat") && back?["blob"] == .bytes([1, 2, 3]))
        // What earlier ckport wrote, ENCRYPTED_STRING as a value's type, CloudKit does not take.
        let legacy: [String: Any] = [
            "zoneID": ["zoneName": "Notes"],
            "operations": [
                [
                    "operationType": "create",
                    "record": [
                        "recordName": "old-1", "recordType": "Note",
                        "fields": ["secret": ["value": "x", "type": "ENCRYPTED_STRING"]],
                    ],
                ]
            ],
        ]
        let answer =
            try JSONSerialization.jsonObject(with: try await client().send("records/modify", body: try body(legacy)))
            as? [String: Any]
        #expect(((answer?["records"] as? [[String: Any]])?.first?["serverErrorCode"] as? String) == "BAD_REQUEST")
    }

    // MARK: 8: assets

    @Test(
        "assets: none of ckport's own keys go to CloudKit; an asset whose bytes the store lacks is not sent by create, kept as CloudKit has it by update; ASSETID_LIST up and down"
    )
    func assets() async throws {
        let scratch = Scratch()
        let photos = [Data("first photo".utf8), Data(repeating: 7, count: 70_000)]
        let folder = scratch.path("files")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for (n, bytes) in photos.enumerated() { try bytes.write(to: URL(fileURLWithPath: folder + "/p\(n).jpg")) }
        let source = try scratch.store(Self.schema, name: "source.sqlite")
        let listed = Record(
            id: RecordID(recordName: "album-1", zone: Self.notes), recordType: "Note",
            fields: [
                "title": .string("Album"),
                "photos": .list(
                    .asset,
                    [
                        .asset(Asset(fileChecksum: "local-0", size: 11, localPath: "p0.jpg")),
                        .asset(Asset(fileChecksum: "local-1", size: 70_000, localPath: "p1.jpg")),
                    ]),
            ])
        var options = ImportOptions()
        options.assetDirectory = folder
        _ = try source.importRecords([ArrayRecordSource([listed])], schema: nil, options: options, hooks: ImportHooks())
        let rejected = Rejections()
        let pushed = try await CloudSync.push(try client(), from: source, request: PushRequest()) {
            rejected.all.append($0)
        }
        #expect(pushed.total.saved == 1 && rejected.all.isEmpty, "\(rejected.all.map(\.reason))")
        // What CloudKit holds names each file by its upload, and nothing of ckport's.
        let stored = try #require(
            try JSONSerialization.jsonObject(
                with: try await client().send("records/changes", body: try body(["zoneID": ["zoneName": "Notes"]])))
                as? [String: Any])
        let text = String(decoding: try JSONSerialization.data(withJSONObject: stored), as: UTF8.self)
        #expect(
            !text.contains("localPath") && !text.contains("sha256")
                && text.components(separatedBy: "downloadURL").count == 3, "\(text)")
        // Pulled with the files: each element's bytes come back.
        let copy = try scratch.store(Self.schema, name: "copy.sqlite")
        _ = try await CloudSync.pull(try client(), into: copy, assets: true)
        guard case .list(.asset, let elements)? = try copy.read({ try $0.record(listed.id) })?["photos"] else {
            Issue.record("no list")
            return
        }
        for (element, bytes) in zip(elements, photos) {
            guard case .asset(let asset) = element, let sha = asset.sha256 else {
                Issue.record("no bytes kept for \(element)")
                continue
            }
            var back = Data()
            #expect(
                try copy.read { session in try session.readAsset(sha) { back.append(contentsOf: $0) } } && back == bytes
            )
        }
        // A store that kept only what CloudKit said of an asset (no --assets) cannot create it
        // anew, and says so; an update leaves CloudKit's copy of the field alone.
        let bare = try scratch.store(Self.schema, name: "bare.sqlite")
        _ = try await CloudSync.pull(try client(), into: bare)
        try bare.write { session in
            var record = try #require(try session.record(listed.id))
            record["title"] = .string("Album, renamed")
            _ = try session.save(record, mode: .replace)
        }
        let other = CloudKitEmulator(container: Self.container)
        let otherClient = try CloudKitClient(
            database: try CloudKitDatabase(container: Self.container, environment: .development, scope: .private),
            credentials: .webToken(apiToken: "api-1", webAuthToken: other.signIn(apiToken: "api-1")), transport: other)
        let refused = Rejections()
        let created = try await CloudSync.push(otherClient, from: bare, request: PushRequest()) {
            refused.all.append($0)
        }
        #expect(
            created.total.saved == 0 && refused.all.first?.serverErrorCode == "NOT_SENT"
                && refused.all.first?.reason.contains("photos[0], photos[1]") == true,
            "\(refused.all.map(\.reason))")
        let updated = try await CloudSync.push(try client(), from: bare, request: PushRequest(mode: .update)) {
            Issue.record("\($0.reason)")
        }
        #expect(updated.total.saved == 1)
        let after = try #require(
            try JSONSerialization.jsonObject(
                with: try await client().send("records/changes", body: try body(["zoneID": ["zoneName": "Notes"]])))
                as? [String: Any])
        let record = try #require(
            (after["records"] as? [[String: Any]])?.first { $0["recordName"] as? String == "album-1" })
        let fields = record["fields"] as? [String: Any]
        #expect(((fields?["title"] as? [String: Any])?["value"] as? String) == "Album, renamed")
        #expect(((fields?["photos"] as? [String: Any])?["value"] as? [Any])?.count == 2)
    }

    // MARK: 9: zones and owners

    @Test(
        "zones: the private database's owner stays home; shared zones are told apart by owner and pushed back to theirs; a zone CloudKit will not make is reported per record"
    )
    func zonesAndOwners() async throws {
        let scratch = Scratch()
        try await seed(try client(), count: 3)
        let store = try scratch.store(Self.schema)
        _ = try await CloudSync.pull(try client(), into: store)
        // CloudKit names the zone's owner (the signed-in user); the store keeps the default owner.
        #expect(try store.read { session in session.zones }.contains(Self.notes))
        // Pushed to another container, no owner goes with the zone.
        let other = CloudKitEmulator(container: Self.container)
        other.settings.keepRequestBodies = true
        let otherClient = try CloudKitClient(
            database: try CloudKitDatabase(container: Self.container, environment: .development, scope: .private),
            credentials: .webToken(apiToken: "api-1", webAuthToken: other.signIn(apiToken: "api-1", user: "_stranger")),
            transport: other)
        let pushed = try await CloudSync.push(otherClient, from: store, request: PushRequest()) {
            Issue.record("\($0.reason)")
        }
        #expect(pushed.total.saved == 3 && pushed.zonesCreated == ["Notes"])
        let bodies = try await otherClientBodies(other)
        #expect(!bodies.isEmpty && bodies.allSatisfy { !$0.contains("ownerRecordName") }, "\(bodies)")
        // The shared database: two people share a zone called Family with the same user.
        for owner in ["_anna", "_ben"] {
            emulator.load(
                [
                    [
                        "recordName": "chore-\(owner)", "recordType": "Note",
                        "zoneID": ["zoneName": "Family", "ownerRecordName": owner],
                        "fields": ["title": ["value": "Chore of \(owner)", "type": "STRING"]],
                    ]
                ], scope: .shared)
        }
        let shared = try scratch.store(Self.schema, name: "shared.sqlite")
        let pulled = try await CloudSync.pull(try client(.shared), into: shared)
        #expect(
            pulled.zones.map(\.zone)
                == ["_anna", "_ben"].map { ZoneID(scope: .shared, zoneName: "Family", ownerRecordName: $0) }
                && pulled.saved == 2)
        let anna = ZoneID(scope: .shared, zoneName: "Family", ownerRecordName: "_anna")
        try shared.write { session in
            var chore = try #require(try session.record(RecordID(recordName: "chore-_anna", zone: anna)))
            chore["title"] = .string("Done")
            _ = try session.save(chore, mode: .replace)
        }
        let back = try await CloudSync.push(
            try client(.shared), from: shared, request: PushRequest(query: RecordQuery(scope: .shared), mode: .update)
        ) { Issue.record("\($0.reason)") }
        #expect(back.total.saved == 2 && back.zonesCreated.isEmpty)
        let annas =
            try JSONSerialization.jsonObject(
                with: try await client(.shared).send(
                    "records/changes", body: try body(["zoneID": ["zoneName": "Family", "ownerRecordName": "_anna"]])))
            as? [String: Any]
        #expect(
            ((((annas?["records"] as? [[String: Any]])?.first?["fields"] as? [String: Any])?["title"] as? [String: Any])?[
                "value"] as? String) == "Done")
        // A zone CloudKit refuses to make: each of its records says why; the others go on.
        let refusing = CloudKitEmulator(container: Self.container)
        refusing.inject(.zoneRefused(code: "QUOTA_EXCEEDED", reason: "no room for another zone"), on: "zones/modify")
        let refusingClient = try CloudKitClient(
            database: try CloudKitDatabase(container: Self.container, environment: .development, scope: .private),
            credentials: .webToken(apiToken: "api-1", webAuthToken: refusing.signIn(apiToken: "api-1")),
            transport: refusing)
        let refused = Rejections()
        let result = try await CloudSync.push(refusingClient, from: store, request: PushRequest()) {
            refused.all.append($0)
        }
        #expect(
            result.total.failed == 3
                && refused.all.allSatisfy { $0.reason.contains("did not create zone Notes: QUOTA_EXCEEDED: no room") },
            "\(refused.all.map(\.reason))")
    }

    /// The bodies of the zone and record requests an emulator received, as text.
    func otherClientBodies(_ emulator: CloudKitEmulator) async throws -> [String] {
        emulator.sentBodies.filter { !$0.isEmpty }.map { String(decoding: $0, as: UTF8.self) }
    }

    // MARK: 10: expired tokens, reset and deleted zones

    @Test(
        "an expired sync token or a reset zone: the zone is read again from the start, and what CloudKit no longer holds becomes tombstones; a second pull fetches nothing"
    )
    func expiredSyncToken() async throws {
        let scratch = Scratch()
        try await seed(try client(), count: 30)
        let store = try scratch.store(Self.schema)
        _ = try await CloudSync.pull(try client(), into: store)
        // Records made locally in a zone no pull reaches are never touched.
        try store.write { session in
            _ = try session.save(
                Record(
                    id: RecordID(recordName: "local-1", zone: ZoneID(scope: .private, zoneName: "Scratchpad")),
                    recordType: "Note"), mode: .replace)
        }
        // The zone is reset: ten records survive, and no tombstone tells of the others.
        let survivors = Set((0..<10).map { String(format: "note-%04d", $0) })
        emulator.expireSyncTokens(zone: "Notes", keeping: survivors)
        let since = try store.read { $0.currentToken }
        let result = try await CloudSync.pull(try client(), into: store)
        let notes = try #require(result.zones.first { $0.zone == Self.notes })
        #expect(
            notes.refetched?.contains("CHANGE_TOKEN_EXPIRED") == true && notes.removed == 20 && notes.saved == 10,
            "\(notes)")
        #expect(try names(store) == survivors.sorted())
        #expect(try names(store, zone: ZoneID(scope: .private, zoneName: "Scratchpad")) == ["local-1"])
        // The removed records are tombstones, for the store's own change feed.
        var tombstones = 0
        try store.read { session in
            try session.forEachChange(since: since, recordTypes: [], scope: nil, zoneName: "Notes") {
                if $0.isDeleted { tombstones += 1 }
            }
        }
        #expect(tombstones == 20)
        let next = try await CloudSync.pull(try client(), into: store)
        #expect(next.saved == 0 && next.removed == 0 && next.zones.allSatisfy { $0.refetched == nil })
    }

    @Test(
        "a fetch from the start cut off half way starts over at the next pull, and still removes what CloudKit no longer holds"
    )
    func refetchCutOff() async throws {
        let scratch = Scratch()
        try await seed(try client(), count: 40)
        let store = try scratch.store(Self.schema)
        _ = try await CloudSync.pull(try client(), into: store)
        emulator.expireSyncTokens(zone: "Notes", keeping: Set((0..<25).map { String(format: "note-%04d", $0) }))
        // zones/list, zones/changes, the expired token, then two pages of the fetch again.
        let cut = try client(transport: CuttingTransport(emulator, after: 5), policy: RetryPolicy(maxAttempts: 1))
        await #expect(throws: CloudKitUnavailable.self) {
            _ = try await CloudSync.pull(cut, into: store, concurrency: 1)
        }
        let states = try store.read { try $0.syncStates(source: "iCloud.com.example.Notes/development/private") }
        #expect(states.first { $0.zone == Self.notes }?.token == CloudSync.refetchMarker)
        #expect(try names(store).count == 40)
        let resumed = try await CloudSync.pull(try client(), into: store)
        let notes = try #require(resumed.zones.first { $0.zone == Self.notes })
        #expect(notes.refetched != nil && notes.removed == 15 && notes.saved == 25, "\(notes)")
        #expect(try names(store).count == 25)
    }

    @Test(
        "a zone deleted in CloudKit (zones/changes) loses its records here, tombstones kept, and its token; a shared zone no longer shared too; a second pull fetches nothing"
    )
    func deletedZones() async throws {
        let scratch = Scratch()
        try await seed(try client(), count: 12)
        try await seed(try client(), count: 5, zone: "Trips")
        let store = try scratch.store(Self.schema)
        #expect(try await CloudSync.pull(try client(), into: store).saved == 17)
        emulator.deleteZone("Trips")
        let result = try await CloudSync.pull(try client(), into: store)
        let trips = try #require(result.zones.first { $0.zone.zoneName == "Trips" })
        #expect(trips.gone && trips.removed == 5)
        #expect(
            try names(store, zone: ZoneID(scope: .private, zoneName: "Trips")).isEmpty && (try names(store)).count == 12
        )
        let states = try store.read { try $0.syncStates(source: "iCloud.com.example.Notes/development/private") }
        #expect(
            !states.contains { $0.zone.zoneName == "Trips" }
                && states.contains { $0.zone.zoneName == CloudSync.zoneChangesName })
        #expect(
            try CloudSync.lastPull(in: store, source: "iCloud.com.example.Notes/development/private")?.gone == ["Trips"]
        )
        let next = try await CloudSync.pull(try client(), into: store)
        #expect(next.saved == 0 && next.removed == 0 && next.zones.allSatisfy { !$0.gone })
        // The shared database: a zone that stops being listed is no longer shared with us.
        emulator.load(
            [
                [
                    "recordName": "chore-1", "recordType": "Note",
                    "zoneID": ["zoneName": "Family", "ownerRecordName": "_anna"],
                ]
            ], scope: .shared)
        let shared = try scratch.store(Self.schema, name: "shared.sqlite")
        #expect(try await CloudSync.pull(try client(.shared), into: shared).saved == 1)
        emulator.deleteZone("Family", scope: .shared, owner: "_anna")
        let unshared = try await CloudSync.pull(try client(.shared), into: shared)
        #expect(unshared.zones.first?.gone == true && unshared.zones.first?.removed == 1)
    }

    // MARK: What a pull must never delete

    @Test(
        "a store an earlier ckport pulled (zones kept under CloudKit's owner name) goes on where it stopped: nothing is taken for gone, nothing stored twice"
    )
    func storeFromBefore() async throws {
        let scratch = Scratch()
        try await seed(try client(), count: 5)
        // What ckport stored before it kept the default owner: the zone under the owner CloudKit
        // names, with the records of a full read of its feed and the feed's token.
        let legacy = ZoneID(scope: .private, zoneName: "Notes", ownerRecordName: "_user")
        let answer = try #require(
            try JSONSerialization.jsonObject(
                with: try await client().send("records/changes", body: try body(["zoneID": ["zoneName": "Notes"]])))
                as? [String: Any])
        let store = try scratch.store(Self.schema)
        try store.write { session in
            for case let json as [String: Any] in answer["records"] as? [Any] ?? [] {
                let fields = (json["fields"] as? [String: Any])?["title"] as? [String: Any]
                _ = try session.save(
                    Record(
                        id: RecordID(recordName: json["recordName"] as! String, zone: legacy), recordType: "Note",
                        fields: ["title": .string(fields?["value"] as? String ?? "")],
                        changeTag: json["recordChangeTag"] as? String), mode: .replace)
            }
            try session.saveSyncToken(
                answer["syncToken"] as? String, source: "iCloud.com.example.Notes/development/private", zone: legacy)
        }
        let result = try await CloudSync.pull(try client(), into: store)
        #expect(
            result.saved == 0 && result.removed == 0 && result.zones.allSatisfy { !$0.gone && $0.refetched == nil },
            "\(result.zones)")
        let kept = try names(store, zone: legacy)
        let stored = try names(store)
        #expect(kept.count == 5 && stored.isEmpty)
        try await seed(try client(), count: 1, first: 5)
        let next = try await CloudSync.pull(try client(), into: store)
        let legacyNames = try names(store, zone: legacy)
        let defaultNames = try names(store)
        #expect(next.saved == 1 && legacyNames.count == 6 && defaultNames.isEmpty)
    }

    @Test("credentials of another account: refused before anything is written, whatever that account's zones are")
    func anotherAccount() async throws {
        let scratch = Scratch()
        try await seed(try client(), count: 4)
        let store = try scratch.store(Self.schema)
        _ = try await CloudSync.pull(try client(), into: store)
        let before = try store.read { $0.currentToken }
        // Somebody else's container: no zone Notes at all, and a zone of their own.
        let theirs = CloudKitEmulator(container: Self.container)
        let stranger = try CloudKitClient(
            database: try CloudKitDatabase(container: Self.container, environment: .development, scope: .private),
            credentials: .webToken(
                apiToken: "api-1", webAuthToken: theirs.signIn(apiToken: "api-1", user: "_stranger")), transport: theirs
        )
        _ = try await stranger.send(
            "zones/modify",
            body: try body(["operations": [["operationType": "create", "zone": ["zoneID": ["zoneName": "Theirs"]]]]]))
        do {
            _ = try await CloudSync.pull(stranger, into: store)
            Issue.record("another account's container was pulled into this store")
        } catch let error as AccountMismatch {
            #expect(error.pulledAs == "_user" && error.signedInAs == "_stranger" && error.category == .usage)
        }
        let after = try store.read { $0.currentToken }
        let held = try names(store)
        #expect(after == before && held.count == 4)
    }

    @Test(
        "a private zone no longer listed is not taken for gone unless zones/changes says it was deleted; a zone deleted and made again is read again and swept"
    )
    func deletedOrRecreated() async throws {
        let scratch = Scratch()
        try await seed(try client(), count: 6)
        let store = try scratch.store(Self.schema)
        _ = try await CloudSync.pull(try client(), into: store)
        // The zone is deleted and made again with two new records: the old ones are gone.
        emulator.deleteZone("Notes")
        try await seed(try client(), count: 2, first: 100)
        let result = try await CloudSync.pull(try client(), into: store)
        let notes = try #require(result.zones.first { $0.zone == Self.notes })
        #expect(notes.refetched != nil && notes.removed == 6 && notes.saved == 2 && !notes.gone, "\(notes)")
        #expect(try names(store) == ["note-0100", "note-0101"])
    }

    @Test("records made here (no change tag) in a zone CloudKit resets or deletes are kept, and said so")
    func localRecordsKept() async throws {
        let scratch = Scratch()
        try await seed(try client(), count: 5)
        try await seed(try client(), count: 3, zone: "Trips")
        let store = try scratch.store(Self.schema)
        _ = try await CloudSync.pull(try client(), into: store)
        try store.write { session in
            _ = try session.save(
                Record(
                    id: RecordID(recordName: "my-draft", zone: Self.notes), recordType: "Note",
                    fields: ["title": .string("Mine")]), mode: .replace)
            _ = try session.save(
                Record(
                    id: RecordID(recordName: "my-trip", zone: ZoneID(scope: .private, zoneName: "Trips")),
                    recordType: "Note"), mode: .replace)
        }
        emulator.expireSyncTokens(zone: "Notes", keeping: ["note-0000"])
        emulator.deleteZone("Trips")
        let result = try await CloudSync.pull(try client(), into: store)
        let notes = try #require(result.zones.first { $0.zone == Self.notes })
        let trips = try #require(result.zones.first { $0.zone.zoneName == "Trips" })
        #expect(
            notes.removed == 4 && notes.keptLocal == 1 && trips.gone && trips.removed == 3 && trips.keptLocal == 1,
            "\(result.zones)")
        #expect(try names(store) == ["my-draft", "note-0000"])
        #expect(try names(store, zone: ZoneID(scope: .private, zoneName: "Trips")) == ["my-trip"])
    }

    @Test(
        "a metaSyncToken CloudKit no longer takes does not stall the pull: the zone changes are read again from the start"
    )
    func staleMetaToken() async throws {
        let scratch = Scratch()
        try await seed(try client(), count: 3)
        let store = try scratch.store(Self.schema)
        _ = try await CloudSync.pull(try client(), into: store)
        try store.write {
            try $0.saveSyncToken(
                "not-a-token-of-cloudkits", source: "iCloud.com.example.Notes/development/private",
                zone: ZoneID(scope: .private, zoneName: CloudSync.zoneChangesName))
        }
        try await seed(try client(), count: 1, first: 3)
        let result = try await CloudSync.pull(try client(), into: store)
        #expect(
            result.saved == 1 && result.notes.contains { $0.contains("read again from the start") }, "\(result.notes)")
        let kept = try store.read { try $0.syncStates(source: "iCloud.com.example.Notes/development/private") }.first {
            $0.zone.zoneName == CloudSync.zoneChangesName
        }
        #expect(kept?.token != "not-a-token-of-cloudkits")
    }

    @Test(
        "a push goes on past a record CloudKit refuses a whole request for (the request is halved until it stands alone); more than 200 asset uploads go in several requests"
    )
    func pushSplits() async throws {
        let scratch = Scratch()
        let records = (0..<40).map { n in
            Record(
                id: RecordID(recordName: "note-\(n)", zone: Self.notes), recordType: "Note",
                fields: ["title": .string("Note \(n)")])
        }
        let source = try scratch.store("source.sqlite", schema: Self.schema, records: records)
        emulator.inject(.refuseRequestsHolding(recordName: "note-17"))
        let rejected = Rejections()
        let result = try await CloudSync.push(try client(), from: source, request: PushRequest()) {
            rejected.all.append($0)
        }
        #expect(
            result.total.saved == 39 && rejected.all.map(\.operation.recordName) == ["note-17"]
                && rejected.codes == ["BAD_REQUEST"], "\(result.total)")
        // 90 records with three photos each: 270 upload tokens.
        let folder = scratch.path("files")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for n in 0..<3 { try Data("photo \(n)".utf8).write(to: URL(fileURLWithPath: folder + "/p\(n).jpg")) }
        let albums = (0..<90).map { n in
            Record(
                id: RecordID(recordName: "album-\(n)", zone: Self.notes), recordType: "Note",
                fields: [
                    "photos": .list(
                        .asset, (0..<3).map { .asset(Asset(fileChecksum: "c", size: -1, localPath: "p\($0).jpg")) })
                ])
        }
        let withPhotos = try scratch.store(Self.schema, name: "photos.sqlite")
        var options = ImportOptions()
        options.assetDirectory = folder
        _ = try withPhotos.importRecords(
            [ArrayRecordSource(albums)], schema: nil, options: options, hooks: ImportHooks())
        let before = emulator.log.filter { $0 == "assets/upload" }.count
        let uploaded = try await CloudSync.push(try client(), from: withPhotos, request: PushRequest()) {
            Issue.record("\($0.reason)")
        }
        #expect(uploaded.total.saved == 90 && emulator.log.filter { $0 == "assets/upload" }.count - before == 2)
    }

    // MARK: 11: the rest

    @Test("resultsLimit stays within CloudKit's 200; users/current goes under public; deletions go by name alone")
    func theRest() async throws {
        let scratch = Scratch()
        let store = try scratch.store(Self.schema)
        await #expect(throws: PullRequestError.self) {
            _ = try await CloudSync.pull(try client(), into: store, resultsLimit: 201)
        }
        _ = try await client().send("users/current")
        #expect(emulator.requests.last?.path == "/database/1/iCloud.com.example.Notes/development/public/users/current")
        // A deletion since a token, forced: its record is its name alone.
        let records = (0..<3).map {
            Record(
                id: RecordID(recordName: "note-\($0)", zone: Self.notes), recordType: "Note",
                fields: ["title": .string("x")])
        }
        let source = try scratch.store("source.sqlite", schema: Self.schema, records: records)
        _ = try await CloudSync.push(try client(), from: source, request: PushRequest()) { _ in }
        let token = try source.read { $0.currentToken }
        _ = try source.write { try $0.delete([records[1].id]) }
        var operations: [PushOperation] = []
        try CloudSync.plan(
            source, request: PushRequest(since: token, force: true),
            database: try CloudKitDatabase(container: Self.container, environment: .development, scope: .private)
        ) {
            operations.append($0)
        }
        #expect(
            operations.map { String(decoding: $0.json, as: UTF8.self) } == [
                #"{"operationType":"forceDelete","record":{"recordName":"note-1"}}"#
            ])
        let deleted = try await CloudSync.push(
            try client(), from: source, request: PushRequest(since: token, force: true)
        ) { Issue.record("\($0.reason)") }
        #expect(deleted.total.deleted == 1)
    }

    // MARK: Done means: a whole pull through faults

    @Test(
        "a pull of the private and the shared database with a user's token, through 503, 500 and 429: every record, the last rotated token in the token file, and nothing on the second pull",
        arguments: [CloudKitDatabase.Scope.private, .shared])
    func wholePull(_ scope: CloudKitDatabase.Scope) async throws {
        let scratch = Scratch()
        if scope == .private {
            try await seed(try client(), count: 45)
            try await seed(try client(), count: 20, zone: "Trips")
        } else {
            emulator.load(
                (0..<45).map {
                    [
                        "recordName": "note-\($0)", "recordType": "Note",
                        "zoneID": ["zoneName": "Family", "ownerRecordName": "_anna"],
                        "fields": ["title": ["value": "Note \($0)", "type": "STRING"]],
                    ]
                }, scope: .shared)
            emulator.load(
                (0..<20).map {
                    [
                        "recordName": "trip-\($0)", "recordType": "Note",
                        "zoneID": ["zoneName": "Trips", "ownerRecordName": "_ben"],
                    ]
                }, scope: .shared)
        }
        emulator.inject(.unavailable, on: "records/changes")
        emulator.inject(.tryAgainLater(retryAfter: nil), on: "records/changes")
        emulator.inject(.internalError, on: "records/changes")
        emulator.inject(.throttled(retryAfter: nil), on: "records/changes")
        emulator.inject(.throttled(retryAfter: 2), on: "zones/list")
        let file = scratch.path("web.txt")
        try WebAuthTokenFile.write(WebAuthTokenFile.Contents(token: token, signedIn: Date()), to: file)
        let keeper = WebAuthTokenFile(path: file)
        let waits = Waits()
        let store = try scratch.store(Self.schema)
        let pulling = try client(
            scope, waits: waits, token: try CloudKitCredentials.token(fromFile: file), keeper: keeper)
        let result = try await CloudSync.pull(pulling, into: store)
        try keeper.checkKept()
        #expect(
            result.saved == 65 && result.leftOut == 0 && waits.seconds.count == 5, "\(result.zones) \(waits.seconds)")
        let last = try #require(await pulling.webAuthToken)
        #expect(try CloudKitCredentials.token(fromFile: file) == last && last != token)
        #expect(keeper.read()?.lastAnswer != nil && keeper.read()?.signedIn != nil)
        let second = try await CloudSync.pull(
            try client(scope, token: try CloudKitCredentials.token(fromFile: file), keeper: keeper), into: store)
        #expect(second.saved == 0 && second.deleted == 0)
    }
}
