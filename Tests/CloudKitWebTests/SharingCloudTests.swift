import CloudKitEmulator
import CloudKitWeb
import Formats
import Foundation
import Records
import SQLiteStore
import SampleApps
import StoreCore
import TestSupport
import Testing

@testable import CKPort

/// Shares through CloudKit Web Services, against the emulator (checked against captures of
/// real share answers in CaptureTests): a pull keeps them, a push sends parents first and
/// creates again what CloudKit lets a client create.
@Suite("sharing through CloudKit")
struct SharingCloudTests {
    static let container = "iCloud.com.example.Family"
    let emulator = CloudKitEmulator(container: container)
    let token: String

    init() {
        emulator.freezeClock()
        emulator.settings.pageSize = 13
        token = emulator.signIn(apiToken: "api-1")
    }

    func client(_ scope: CloudKitDatabase.Scope = .private) throws -> CloudKitClient {
        let database = try CloudKitDatabase(container: Self.container, environment: .development, scope: scope)
        return try CloudKitClient(
            database: database, credentials: .webToken(apiToken: "api-1", webAuthToken: token), transport: emulator,
            policy: RetryPolicy(), onWebAuthToken: nil, sleep: { _ in })
    }

    /// A sample's records, as its records.jsonl holds them.
    static func sampleRecords(_ app: SampleApp) throws -> [Record] {
        let codec = JSONRecordCodec(schema: app.schema)
        let text = try String(contentsOfFile: sample(app.rawValue, "records.jsonl"), encoding: .utf8)
        return try text.split(separator: "\n").map { try codec.decode(try JSONParser.parse(String($0))) }
    }

    /// The sample's schema without CloudKit's share type: what a schema exported before the
    /// app shared anything holds.
    static func schemaWithoutShares(_ app: SampleApp) -> String {
        var schema = app.schema
        schema.recordTypes.removeAll { $0.name == Record.shareType }
        return SchemaPrinter.print(schema)
    }

    func everything(_ store: RecordStore) throws -> [Record] {
        try store.read { session in
            var all: [Record] = []
            try session.forEach(RecordQuery()) { all.append($0) }
            return all
        }
    }

    @Test(
        "a pull of the shared database keeps each zone under its owner, its share with every participant, and every record's parent and share"
    )
    func pullShared() async throws {
        let scratch = Scratch()
        let records = try Self.sampleRecords(.familyTodo)
        let lines = try String(contentsOfFile: sample("family-todo", "records.jsonl"), encoding: .utf8).split(
            separator: "\n")
        emulator.load(json: try lines.map { try JSONParser.parse(String($0)) }, scope: .shared)
        let store = try scratch.store(Self.schemaWithoutShares(.familyTodo))
        let result = try await CloudSync.pull(try client(.shared), into: store)
        #expect(result.saved == records.count && result.leftOut == 0, "\(result.leftOutByType)")
        #expect(store.schema.recordType(named: Record.shareType) == RecordTypeDefinition.share)
        // Every record as the app saved it, but for the change tags CloudKit gave.
        let pulled = Dictionary(uniqueKeysWithValues: try everything(store).map { ($0.id, $0) })
        for var record in records {
            let got = try #require(pulled[record.id], "\(record.id) was not pulled")
            record.changeTag = got.changeTag
            #expect(got == record, "\(record.recordName)")
        }
        let owners = Set(pulled.keys.map(\.zone.ownerRecordName))
        #expect(owners.count == 2 && !owners.contains(ZoneID.defaultOwnerName))
        let shares = try store.read { try Shares.list($0) }
        #expect(shares.map(\.participants.count) == [4, 4] && shares.map(\.recordCount) == [39, 39])
    }

    /// A sample's records moved to the private database, as their owner holds them.
    func ownersStore(_ app: SampleApp, _ scratch: Scratch) throws -> RecordStore {
        let records = try Self.sampleRecords(app).map { record -> Record in
            var record = record
            record.id.zone = ZoneID(scope: .private, zoneName: record.zone.zoneName)
            return record
        }
        return try scratch.store("\(app.rawValue).sqlite", schema: app.schemaText, records: records)
    }

    @Test(
        "a push sends every record with its parent, parents first (two levels deep too), and creates each share of a hierarchy again, inviting its people anew"
    )
    func pushHierarchies() async throws {
        let scratch = Scratch()
        let store = try ownersStore(.familyTodo, scratch)
        // Small requests, so that a zone's records span several: a child whose parent has not
        // gone yet would be refused.
        let pushed = try await CloudSync.push(try client(), from: store, request: PushRequest(byteBudget: 4096)) {
            Issue.record("turned away: \($0.operation.recordName) \($0.serverErrorCode) \($0.reason)")
        }
        #expect(
            pushed.total.saved == 80 && pushed.total.rejected == 0 && pushed.requests > 10,
            "\(pushed.requests) requests")
        #expect(pushed.shares.count == 2)
        for share in pushed.shares {
            guard case .created(let url) = share.state else {
                Issue.record("\(share.shareName): \(share.state)")
                continue
            }
            #expect(url?.hasPrefix("https://www.icloud.com/share/0") == true)
            #expect(
                share.invited.count == 3
                    && share.invited.allSatisfy { $0.emailAddress?.hasSuffix("@example.com") == true })
            #expect(share.notInvited.isEmpty)
            // The store was pulled by the second adult, who now owns the share: the owner
            // before is invited like the others.
            #expect(
                share.notes.map { String($0.why.prefix(12)) } == ["owned the sh", "pulled this "],
                "\(share.notes.map(\.why))")
        }
        // What CloudKit now holds, pulled into a new store: the links, and the shares with their
        // owner and everyone invited again, none of whom has accepted yet.
        let back = try scratch.store(Self.schemaWithoutShares(.familyTodo), name: "back.sqlite")
        _ = try await CloudSync.pull(try client(), into: back)
        let records = try everything(back)
        #expect(
            records.filter { $0.parent == "household-1" }.count == 38
                && records.filter { $0.parent == "household-2" }.count == 38,
            "\(records.count) records, \(records.filter { $0.parent != nil }.count) with a parent")
        let shares = try back.read { try Shares.list($0) }
        #expect(
            shares.map { $0.root?.recordName } == ["household-1", "household-2"]
                && shares.map(\.recordCount) == [39, 39])
        #expect(shares[0].title == "Smith Family To-Do" && shares[0].details?.publicPermission == "NONE")
        #expect(shares[0].participants.map(\.acceptanceStatus) == ["ACCEPTED", "INVITED", "INVITED", "INVITED"])
        #expect(shares[0].participants.map(\.permission) == ["READ_WRITE", "READ_WRITE", "READ_WRITE", "READ_ONLY"])
        #expect(
            shares[0].participants.dropFirst().map(\.emailAddress) == [
                "noah.smith@example.com", "nora.smith@example.com", "felix.smith@example.com",
            ])

        // Family calendar: participants under events under the family (two levels); its zone
        // share cannot be created through Web Services, and the push says whom to invite again.
        let calendar = try ownersStore(.familyCalendar, scratch)
        let second = try await CloudSync.push(try client(), from: calendar, request: PushRequest()) {
            Issue.record("turned away: \($0.operation.recordName) \($0.serverErrorCode) \($0.reason)")
        }
        #expect(second.total.rejected == 0 && second.total.saved > 100)
        let zoneShare = try #require(second.shares.first)
        #expect(second.shares.allSatisfy { $0.shareName == Record.zoneShareName })
        guard case .notCreated(let why) = zoneShare.state else {
            Issue.record("\(zoneShare.state)")
            return
        }
        #expect(why.contains("cannot create a share of a whole zone"))
        #expect(zoneShare.invited.count == 3)
    }

    @Test(
        "what a push cannot re-create is said, share by share: update leaves shares alone, the shared database's zones are their owners', people without an address are not invited"
    )
    func pushDecisions() throws {
        let scratch = Scratch()
        let store = try ownersStore(.familyTodo, scratch)
        // Someone the share gave no address for, and someone who left it.
        try store.write { session in
            var share = try #require(
                try session.record(
                    RecordID(
                        recordName: "Share-C5F036E1-AAEE-5907-405B-CD6E427EE896",
                        zone: ZoneID(scope: .private, zoneName: "household-1"))))
            var details = try #require(share.shareDetails.flatMap(ShareDetails.init(json:)))
            var people = details.participants
            people[2].emailAddress = nil
            people[3].acceptanceStatus = "REMOVED"
            details.object.members[details.object.keys.firstIndex(of: "participants")!].value = .array(
                people.map(\.json))
            share.shareDetails = details.text
            _ = try session.save(share, mode: .replace)
        }
        func plan(_ mode: PushMode, scope: CloudKitDatabase.Scope = .private) throws -> [ShareRestoration] {
            var shares: [ShareRestoration] = []
            let database = try CloudKitDatabase(container: Self.container, environment: .development, scope: scope)
            try CloudSync.plan(
                store, request: PushRequest(query: RecordQuery(scope: .private), mode: mode), database: database,
                shares: { shares.append($0) }, { _ in })
            return shares
        }
        let create = try plan(.create)
        #expect(create.map(\.state) == [.wouldCreate, .wouldCreate])
        #expect(
            create[0].invited.map(\.displayName) == ["Noah Smith"] && create[0].invited[0].permission == "READ_WRITE"
                && create[0].invited[0].type == "USER")
        #expect(create[0].notInvited.map(\.participant.displayName) == ["Nora Smith", "Felix Smith"])
        #expect(
            create[0].notInvited[0].why.contains("no e-mail address or phone number")
                && create[0].notInvited[1].why == "had left the share (REMOVED)")
        #expect(create[0].notes.map(\.participant.displayName) == ["Noah Smith", "Sofia Smith"])
        for state in try plan(.update).map(\.state) {
            guard case .leftAlone(let why) = state else {
                Issue.record("\(state)")
                continue
            }
            #expect(why.contains("changes records, not shares"))
        }
        for state in try plan(.create, scope: .shared).map(\.state) {
            guard case .notCreated(let why) = state else {
                Issue.record("\(state)")
                continue
            }
            #expect(why.contains("only its owner can share its records"))
        }
    }

    @Test(
        "CloudKit's rules for shares and parents, as the emulator keeps them: a missing parent is refused, deleting a root deletes its share, deleting a share leaves its root"
    )
    func emulatorRules() async throws {
        let app = try client()
        func send(_ body: [String: Any]) async throws -> [[String: Any]] {
            let data = try await app.send("records/modify", body: try JSONSerialization.data(withJSONObject: body))
            return (try JSONSerialization.jsonObject(with: data) as? [String: Any])?["records"] as? [[String: Any]]
                ?? []
        }
        _ = try await app.send(
            "zones/modify",
            body: try JSONSerialization.data(withJSONObject: [
                "operations": [["operationType": "create", "zone": ["zoneID": ["zoneName": "Family"]]]]
            ]))
        let orphan = try await send([
            "zoneID": ["zoneName": "Family"],
            "operations": [
                [
                    "operationType": "create",
                    "record": [
                        "recordName": "task-1", "recordType": "Task", "parent": ["recordName": "household-1"],
                        "fields": [:] as [String: Any],
                    ],
                ]
            ],
        ])
        #expect(orphan.first?["serverErrorCode"] as? String == "VALIDATING_REFERENCE_ERROR")
        // A parent later in the same request does not count; one earlier does.
        let late = try await send([
            "zoneID": ["zoneName": "Family"],
            "operations": [
                [
                    "operationType": "create",
                    "record": [
                        "recordName": "task-1", "recordType": "Task", "parent": ["recordName": "household-1"],
                        "fields": [:] as [String: Any],
                    ],
                ],
                [
                    "operationType": "create",
                    "record": ["recordName": "household-0", "recordType": "Household", "fields": [:] as [String: Any]],
                ],
            ],
        ])
        #expect(late.first?["serverErrorCode"] as? String == "VALIDATING_REFERENCE_ERROR")
        let both = try await send([
            "zoneID": ["zoneName": "Family"],
            "operations": [
                [
                    "operationType": "create",
                    "record": [
                        "recordName": "household-1", "recordType": "Household", "createShortGUID": true,
                        "fields": [:] as [String: Any],
                    ],
                ],
                [
                    "operationType": "create",
                    "record": [
                        "recordName": "task-1", "recordType": "Task", "parent": ["recordName": "household-1"],
                        "fields": [:] as [String: Any],
                    ],
                ],
            ],
        ])
        #expect(
            both.allSatisfy { $0["serverErrorCode"] == nil }
                && both.last?["parent"] as? [String: String] == ["recordName": "household-1"])
        // Saving the child changed its parent's change tag: a client sharing the parent looks it up anew.
        let lookedUp = try await app.send(
            "records/lookup",
            body: try JSONSerialization.data(withJSONObject: [
                "zoneID": ["zoneName": "Family"], "records": [["recordName": "household-1"]],
            ]))
        let current =
            ((try JSONSerialization.jsonObject(with: lookedUp) as? [String: Any])?["records"] as? [[String: Any]])?
            .first?["recordChangeTag"] as? String
        #expect(current != nil && current != both.first?["recordChangeTag"] as? String)
        let shareName = try #require(emulator.share("household-1", zone: "Family", title: "Smiths"))
        let deleted = try await send([
            "zoneID": ["zoneName": "Family"],
            "operations": [["operationType": "forceDelete", "record": ["recordName": "household-1"]]],
        ])
        #expect(deleted.first?["deleted"] as? Bool == true)
        let lookup = try await app.send(
            "records/lookup",
            body: try JSONSerialization.data(withJSONObject: [
                "zoneID": ["zoneName": "Family"], "records": [["recordName": shareName], ["recordName": "task-1"]],
            ]))
        let found =
            (try JSONSerialization.jsonObject(with: lookup) as? [String: Any])?["records"] as? [[String: Any]] ?? []
        #expect(found.first?["serverErrorCode"] as? String == "NOT_FOUND", "the share went with its root")
        #expect(
            found.last?["recordName"] as? String == "task-1" && found.last?["serverErrorCode"] == nil, "a child stays")
    }
}
