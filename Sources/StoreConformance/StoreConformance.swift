import Foundation
import Records
import StoreCore
import Synchronization

/// The checks every record store must pass, whatever keeps it: the SQLite and PostgreSQL
/// stores pass them in ckport's CI, and a store of your own is held to the same ones. Each
/// check starts from new, empty stores that `create` makes (`open` opens a second handle on
/// the same store, as another process would) and throws ``Failure`` naming what broke. The
/// checks come in groups, one per part of the contract (``Part``); they need no test framework:
///
///     @Test(arguments: StoreConformance<MyStore>.Part.allCases)
///     func conformance(_ part: StoreConformance<MyStore>.Part) throws {
///         try StoreConformance<MyStore>(create: { … }, open: { … }).run(part)
///     }
public struct StoreConformance<Store: RecordStoring> {
    /// A part of the store contract, and the protocol behind it.
    public enum Part: String, CaseIterable, Sendable, CustomStringConvertible {
        /// ``RecordStoring``: schemas, transactions, bulk loads, several handles, one handle on
        /// many threads, cancellation.
        case store
        /// ``RecordReading``: queries, change tokens, share hierarchies, names.
        case reading
        /// ``RecordWriting``: save modes, deletes and reference actions, shares.
        case writing
        /// ``AssetStoring``.
        case assets
        /// ``SyncStateStoring``: sync tokens and connector state.
        case syncState = "sync state"
        /// ``MigrationRewriting``: rewrites and the migration history.
        case migrationRewrites = "migration rewrites"

        public var description: String { rawValue }

        /// The checks of this part, by name.
        public var checks: [String] {
            switch self {
            case .store:
                ["schema", "transactions", "bulk load", "two handles", "one handle, many threads", "cancellation"]
            case .reading: ["queries", "change tokens", "share hierarchies", "names byte for byte"]
            case .writing: ["save modes", "deletes and reference actions", "sharing"]
            case .assets: ["assets"]
            case .syncState: ["sync tokens", "connector state"]
            case .migrationRewrites: ["migration history", "migration rewrites"]
            }
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String

        public init(description: String) { self.description = description }
    }

    /// A new, empty store; `name` tells stores of one check apart.
    public let create: (_ name: String) throws -> Store
    /// A second handle on the store at `location`.
    public let open: (_ location: String) throws -> Store

    public init(create: @escaping (String) throws -> Store, open: @escaping (String) throws -> Store) {
        self.create = create
        self.open = open
    }

    /// Every check, part by part.
    public static var checks: [String] { Part.allCases.flatMap(\.checks) }

    /// Runs every check of `part`; the first that fails throws, naming its check.
    public func run(_ part: Part) throws {
        for check in part.checks {
            do {
                try run(check)
            } catch let failure as Failure {
                throw Failure(description: "\(part) / \(check): \(failure.description)")
            } catch {
                throw Failure(description: "\(part) / \(check): \(error)")
            }
        }
    }

    public func run(_ check: String) throws {
        switch check {
        case "schema": try schema()
        case "save modes": try saveModes()
        case "queries": try queries()
        case "transactions": try transactions()
        case "change tokens": try changeTokens()
        case "deletes and reference actions": try deletes()
        case "assets": try assets()
        case "migration history": try history()
        case "migration rewrites": try rewrites()
        case "sync tokens": try syncTokens()
        case "connector state": try connectorState()
        case "bulk load": try bulkLoad()
        case "two handles": try twoHandles()
        case "one handle, many threads": try manyThreads()
        case "cancellation": try cancellation()
        case "sharing": try sharing()
        case "share hierarchies": try shareHierarchies()
        case "names byte for byte": try namesByteForByte()
        default: throw Failure(description: "no check named \(check)")
        }
    }

    // MARK: - Fixtures

    static var schemaText: String {
        """
        DEFINE SCHEMA
            RECORD TYPE Folder (
                "___recordID" REFERENCE QUERYABLE,
                title         STRING QUERYABLE SORTABLE,
                GRANT WRITE TO "_creator",
                GRANT CREATE TO "_icloud",
                GRANT READ TO "_world"
            );
            RECORD TYPE Note (
                "___recordID" REFERENCE QUERYABLE,
                title         STRING QUERYABLE SORTABLE,
                pinned        INT64 QUERYABLE SORTABLE,
                due           TIMESTAMP QUERYABLE SORTABLE,
                folder        REFERENCE QUERYABLE,
                attachment    ASSET,
                GRANT WRITE TO "_creator",
                GRANT CREATE TO "_icloud",
                GRANT READ TO "_world"
            );
        """
    }

    static var zone: ZoneID { ZoneID(scope: .private, zoneName: "Notes") }

    static func note(
        _ name: String, _ title: String, pinned: Int64 = 0, folder: Reference? = nil,
        modified: Int64 = 1_700_000_000_000,
        due: Int64? = nil, zone: ZoneID = zone
    ) -> Record {
        var record = Record(
            id: RecordID(recordName: name, zone: zone), recordType: "Note",
            created: RecordStamp(timestamp: 1_700_000_000_000), modified: RecordStamp(timestamp: modified))
        record["title"] = .string(title)
        record["pinned"] = .int64(pinned)
        if let folder { record["folder"] = .reference(folder) }
        if let due { record["due"] = .timestamp(due) }
        return record
    }

    static func folder(_ name: String, zone: ZoneID = zone) -> Record {
        var record = Record(
            id: RecordID(recordName: name, zone: zone), recordType: "Folder",
            created: RecordStamp(timestamp: 1_700_000_000_000), modified: RecordStamp(timestamp: 1_700_000_000_000))
        record["title"] = .string(name)
        return record
    }

    func require(_ condition: Bool, _ message: @autoclosure () throws -> String) throws {
        if !condition { throw Failure(description: try message()) }
    }

    func requireThrows<E: Error>(_ type: E.Type, _ what: String, _ body: () throws -> Void) throws {
        do {
            try body()
        } catch is E {
            return
        } catch {
            throw Failure(description: "\(what): expected \(E.self), got \(error)")
        }
        throw Failure(description: "\(what): expected \(E.self), nothing was thrown")
    }

    func newStore(_ name: String, with records: [Record] = []) throws -> Store {
        let store = try create(name)
        try store.importSchema(try SchemaParser.parse(Self.schemaText), dryRun: false)
        if !records.isEmpty {
            _ = try store.importRecords(
                [ArrayRecordSource(records)], schema: nil, options: ImportOptions(), hooks: ImportHooks())
        }
        return store
    }

    func names(_ store: Store, _ query: RecordQuery = RecordQuery()) throws -> [String] {
        try store.read { session in
            var names: [String] = []
            try session.forEach(query) { names.append($0.recordName) }
            return names
        }
    }

    // MARK: - Checks

    func schema() throws {
        let store = try create("schema")
        let schema = try SchemaParser.parse(Self.schemaText)
        let dry = try store.importSchema(schema, dryRun: true)
        try require(dry.changesSchema && store.schema.recordTypes.isEmpty, "a dry-run schema import changed the schema")
        try store.importSchema(schema, dryRun: false)
        try require(store.schema.isEquivalent(to: schema), "the schema read back differs from the one imported")
        try require(try store.read { $0.schema.isEquivalent(to: schema) }, "a session sees another schema")
        _ = try store.importRecords(
            [ArrayRecordSource([Self.note("n-1", "Milk")])], schema: nil, options: ImportOptions(), hooks: ImportHooks()
        )
        // Dropping a type that holds records would lose them: refused, and nothing changes.
        let withoutNotes = try SchemaParser.parse(
            Self.schemaText.components(separatedBy: "RECORD TYPE Note")[0].trimmingCharacters(
                in: .whitespacesAndNewlines))
        try requireThrows(StoreError.self, "a schema change that loses records") {
            try store.importSchema(withoutNotes, dryRun: false)
        }
        try require(
            store.schema.isEquivalent(to: schema) && (try names(store)) == ["n-1"],
            "a refused schema change changed the store")
    }

    /// Zone names that differ only in their Unicode form ("ü" against "u" + U+0308) are two
    /// zones to CloudKit: the same record name in each is two records, in one import as in two.
    /// (Record names themselves are ASCII.)
    func namesByteForByte() throws {
        let kitchen = ZoneID(scope: .private, zoneName: "K\u{FC}che")
        let kitchenToo = ZoneID(scope: .private, zoneName: "Ku\u{308}che")
        let records = [
            Self.note("n", "first kitchen", zone: kitchen), Self.note("n", "second kitchen", zone: kitchenToo),
            Self.note("m", "first kitchen's other", zone: kitchen),
        ]
        let store = try create("bytes")
        try store.importSchema(try SchemaParser.parse(Self.schemaText), dryRun: false)
        let summary = try store.importRecords(
            [ArrayRecordSource(records)], schema: nil, options: ImportOptions(mode: .replace), hooks: ImportHooks())
        try require(
            summary.totals.inserted == 3 && summary.totals.updated == 0,
            "one import of three records: \(summary.totals)")
        for record in records {
            let stored = try store.read { try $0.record(record.id) }
            try require(
                stored?["title"] == record["title"]
                    && stored.map { $0.zone.zoneName.utf8.elementsEqual(record.zone.zoneName.utf8) } == true,
                "\(record.id) reads back as \(String(describing: stored))")
        }
        // An update in one zone leaves the other as it was.
        _ = try store.importRecords(
            [ArrayRecordSource([Self.note("n", "second kitchen, again", zone: kitchenToo)])], schema: nil,
            options: ImportOptions(mode: .upsert), hooks: ImportHooks())
        try require(
            try store.read { try $0.record(RecordID(recordName: "n", zone: kitchen)) }?["title"]
                == .string("first kitchen")
                && (try store.read { try $0.record(RecordID(recordName: "n", zone: kitchenToo)) })?["title"]
                    == .string("second kitchen, again"),
            "an update in \(kitchenToo.zoneName.debugDescription) reached \(kitchen.zoneName.debugDescription)")
        var zones: [String] = []
        try store.read { session in
            try session.forEach(RecordQuery(recordTypes: ["Note"])) { zones.append($0.zone.zoneName) }
        }
        try require(
            zones.count == 3 && Set(zones.map { Array($0.utf8) }).count == 2,
            "three notes in two zones, read: \(zones.map(\.debugDescription))")
        // A query or a delete of one zone, by name, reads or deletes that zone only.
        var picked: [String] = []
        try store.read { session in
            try session.forEach(RecordQuery(recordTypes: ["Note"], zoneName: kitchenToo.zoneName)) {
                picked.append($0["title"].map { "\($0)" } ?? "")
            }
        }
        try require(picked.count == 1, "a query of \(kitchenToo.zoneName.debugDescription) read \(picked)")
        let deleted = try store.write(dryRun: false) { session in
            try session.delete(matching: RecordQuery(recordTypes: ["Note"], zoneName: kitchen.zoneName))
        }
        try require(
            deleted.count == 2, "a delete of \(kitchen.zoneName.debugDescription) deleted \(deleted.count) records")
        try require(
            (try store.read { try $0.record(RecordID(recordName: "n", zone: kitchenToo)) }) != nil,
            "a delete of one zone took the other's record")
    }

    func saveModes() throws {
        let store = try newStore("modes", with: [Self.note("n-1", "Milk", pinned: 1)])
        try store.write(dryRun: false) { session in
            let outcome = try session.save(Self.note("n-2", "Bread"), mode: .insert)
            guard case .inserted = outcome else { throw Failure(description: "insert of a new record: \(outcome)") }
        }
        try requireThrows(SaveRefusal.self, "insert over an existing record") {
            try store.write(dryRun: false) { session in _ = try session.save(Self.note("n-1", "Eggs"), mode: .insert) }
        }
        // upsert sets the fields given and keeps the others.
        var partial = Record(
            id: RecordID(recordName: "n-1", zone: Self.zone), recordType: "Note",
            modified: RecordStamp(timestamp: 1_700_000_100_000))
        partial["title"] = .string("Oat milk")
        try store.write(dryRun: false) { session in _ = try session.save(partial, mode: .upsert) }
        var stored = try store.read { try $0.record(partial.id) }
        try require(
            stored?["title"] == .string("Oat milk") && stored?["pinned"] == .int64(1),
            "upsert: \(String(describing: stored))")
        // replace clears what is not given.
        try store.write(dryRun: false) { session in _ = try session.save(partial, mode: .replace) }
        stored = try store.read { try $0.record(partial.id) }
        try require(
            stored?["title"] == .string("Oat milk") && stored?["pinned"] == nil,
            "replace: \(String(describing: stored))")
        // newer keeps whichever side was modified later.
        let older = Self.note("n-1", "Old title", modified: 1_600_000_000_000)
        try store.write(dryRun: false) { session in
            let outcome = try session.save(older, mode: .newer)
            guard case .unchanged = outcome else {
                throw Failure(description: "newer with an older record: \(outcome)")
            }
        }
        let newer = Self.note("n-1", "New title", modified: 1_800_000_000_000)
        try store.write(dryRun: false) { session in _ = try session.save(newer, mode: .newer) }
        stored = try store.read { try $0.record(partial.id) }
        try require(
            stored?["title"] == .string("New title"), "newer with a newer record: \(String(describing: stored))")
        // System fields come back as they were saved.
        try require(
            stored?.modified?.timestamp == 1_800_000_000_000 && stored?.created?.timestamp == 1_700_000_000_000,
            "system fields: \(String(describing: stored))")
    }

    func queries() throws {
        let other = ZoneID(scope: .shared, zoneName: "A", ownerRecordName: "_someone")
        let store = try newStore(
            "queries",
            with: [
                Self.note("n-3", "Cheese", pinned: 1, due: 1_800_000_000_000),
                Self.note("n-1", "Milk", pinned: 0, due: 1_750_000_000_000),
                Self.note("n-2", "Bread", pinned: 1),
                Self.folder("f-1"), Self.note("n-0", "Jam", zone: other),
            ])
        // Scope, zone, type, name.
        try require(try names(store) == ["f-1", "n-1", "n-2", "n-3", "n-0"], "order: \(try names(store))")
        var pinned = RecordQuery(recordTypes: ["Note"])
        pinned.predicate = try RecordPredicate.parse("pinned == 1")
        try require(try names(store, pinned) == ["n-2", "n-3"], "predicate: \(try names(store, pinned))")
        var sorted = RecordQuery(recordTypes: ["Note"], zoneName: "Notes")
        sorted.sortField = "title"
        try require(try names(store, sorted) == ["n-2", "n-3", "n-1"], "sort: \(try names(store, sorted))")
        sorted.descending = true
        sorted.limit = 2
        try require(try names(store, sorted) == ["n-1", "n-3"], "descending, limit: \(try names(store, sorted))")
        try require(try store.read { try $0.count(pinned) } == 2, "count")
        try require(try store.read { try $0.count(RecordQuery(scope: .shared)) } == 1, "count by scope")
        try require(
            try store.read { try $0.record(RecordID(recordName: "n-0", zone: other)) }?["title"] == .string("Jam"),
            "lookup in another zone")
        try require(
            try store.read { try $0.record(RecordID(recordName: "n-0", zone: Self.zone)) } == nil, "a name is per zone")
        let stats = try store.read { try $0.stats() }
        try require(stats.totalRecords == 5, "stats: \(stats.totalRecords)")
        try require(try store.read { $0.zones }.contains(other), "zones")
        // Lookups a calendar export makes: by name and type, by reference, the range of a field.
        try require(
            try store.read { try $0.record(named: "n-0", ofType: "Note") }?.zone == other, "a record by name and type")
        try require(try store.read { try $0.record(named: "f-1", ofType: "Note") } == nil, "a name of another type")
        let bounds = try store.read { try $0.bounds(RecordQuery(recordTypes: ["Note"]), fields: ["due"]) }
        try require(
            bounds.map { [$0.0, $0.1] } == [1_750_000_000_000, 1_800_000_000_000],
            "bounds: \(String(describing: bounds))")
        try require(
            try store.read { try $0.bounds(RecordQuery(recordTypes: ["Note"], zoneName: "none"), fields: ["due"]) }
                == nil, "bounds of nothing")
    }

    func transactions() throws {
        let store = try newStore("transactions", with: [Self.note("n-1", "Milk")])
        let before = try store.read { $0.currentToken }
        do {
            try store.write(dryRun: false) { session in
                _ = try session.save(Self.note("n-2", "Bread"), mode: .upsert)
                throw Failure(description: "on purpose")
            }
        } catch is Failure {}
        try require(try names(store) == ["n-1"], "a write that threw left records behind")
        try store.write(dryRun: true) { session in _ = try session.save(Self.note("n-3", "Jam"), mode: .upsert) }
        try require(try names(store) == ["n-1"], "a dry run wrote")
        try require(try store.read { $0.currentToken } == before, "a rolled-back write moved the change token")
        let seenInside = try store.write(dryRun: false) { session -> Bool in
            _ = try session.save(Self.note("n-4", "Tea"), mode: .upsert)
            return try session.record(RecordID(recordName: "n-4", zone: Self.zone)) != nil
        }
        try require(
            seenInside && (try names(store)) == ["n-1", "n-4"], "a write sees its own records and commits them")
    }

    func changeTokens() throws {
        let store = try newStore("tokens", with: [Self.note("n-1", "Milk"), Self.note("n-2", "Bread")])
        let start = try store.read { $0.currentToken }
        try require(start.storeID == store.storeID, "a token names its store")
        try store.write(dryRun: false) { session in
            _ = try session.save(Self.note("n-3", "Jam"), mode: .upsert)
            _ = try session.save(Self.note("n-1", "Oat milk"), mode: .upsert)
            _ = try session.delete([RecordID(recordName: "n-2", zone: Self.zone)])
        }
        let end = try store.read { $0.currentToken }
        try require(end.sequence > start.sequence, "changes advance the token")
        var changes: [(String, Bool)] = []
        try store.read { session in
            try session.forEachChange(since: start, recordTypes: [], scope: nil, zoneName: nil) {
                changes.append(($0.recordName, $0.isDeleted))
            }
        }
        try require(
            changes.map(\.0) == ["n-3", "n-1", "n-2"] && changes.map(\.1) == [false, false, true],
            "changes in order, deletions as tombstones: \(changes)")
        var none = 0
        try store.read { session in
            try session.forEachChange(since: end, recordTypes: [], scope: nil, zoneName: nil) { _ in none += 1 }
        }
        try require(none == 0, "nothing after the current token")
        try require(
            try store.read { try $0.stats() }.entries.reduce(0) { $0 + $1.tombstones } == 1, "a tombstone is counted")
        let foreign = ChangeToken(storeID: "000000000000", sequence: 1)
        try requireThrows(StoreError.self, "a token of another store") {
            try store.read { session in
                try session.forEachChange(since: foreign, recordTypes: [], scope: nil, zoneName: nil) { _ in }
            }
        }
    }

    func deletes() throws {
        let store = try newStore(
            "deletes",
            with: [
                Self.folder("f-1"), Self.folder("f-2"),
                Self.note("n-1", "Milk", folder: Reference(recordName: "f-1", action: .deleteSelf)),
                Self.note("n-2", "Bread", folder: Reference(recordName: "f-2", action: .validate)),
            ])
        let pointing = try store.read {
            try $0.records(ofType: "Note", whose: "folder", pointsAt: RecordID(recordName: "f-1", zone: Self.zone))
        }
        try require(
            pointing.map(\.recordName) == ["n-1"], "records that point at a record: \(pointing.map(\.recordName))")
        let deleted = try store.write(dryRun: false) { try $0.delete([RecordID(recordName: "f-1", zone: Self.zone)]) }
        try require(
            Set(deleted.map(\.id.recordName)) == ["f-1", "n-1"], "DELETE_SELF takes the note along: \(deleted)")
        try requireThrows(StoreError.self, "deleting a record a VALIDATE reference points at") {
            _ = try store.write(dryRun: false) { try $0.delete([RecordID(recordName: "f-2", zone: Self.zone)]) }
        }
        try require(try names(store) == ["f-2", "n-2"], "a refused delete deleted: \(try names(store))")
        var bread = RecordQuery(recordTypes: ["Note"])
        bread.predicate = try RecordPredicate.parse("title == 'Bread'")
        let byQuery = try store.write(dryRun: false) { try $0.delete(matching: bread) }
        try require(byQuery.map(\.id.recordName) == ["n-2"], "delete by query")
        _ = try store.write(dryRun: false) { try $0.delete([RecordID(recordName: "f-2", zone: Self.zone)]) }
        try require(try names(store).isEmpty, "every record deleted")
    }

    func assets() throws {
        let store = try newStore("assets")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ckport-conformance-\(UUID().uuidString)"
        ).path
        let bytes = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try bytes.write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let put = try store.write(dryRun: false) { try $0.putAsset(file: file, expectedSHA256: nil, expectedSize: nil) }
        try require(put.size == 100_000 && put.added && put.sha256.count == 64, "put: \(put)")
        let again = try store.write(dryRun: false) {
            try $0.putAsset(file: file, expectedSHA256: put.sha256, expectedSize: 100_000)
        }
        try require(!again.added, "the same bytes twice are stored once")
        var read = Data()
        let found = try store.read { try $0.readAsset(put.sha256) { read.append(contentsOf: $0) } }
        try require(found && read == bytes, "read back \(read.count) bytes")
        try require(try store.read { try $0.assetSize(put.sha256) } == 100_000, "size")
        try require(
            !(try store.read { try $0.readAsset(String(repeating: "0", count: 64)) { _ in } }),
            "an asset the store lacks")
        try requireThrows(Error.self, "bytes that are not what the record says") {
            _ = try store.write(dryRun: false) {
                try $0.putAsset(file: file, expectedSHA256: String(repeating: "a", count: 64), expectedSize: nil)
            }
        }
    }

    func history() throws {
        let store = try newStore("history")
        let first = MigrationHistoryEntry(
            set: "notes", version: 1, description: "first", file: "0001_a.yaml",
            checksum: String(repeating: "a", count: 64),
            appliedAt: 1_700_000_000_000, durationMilliseconds: 12, recordsChanged: 3)
        var second = first
        second.version = 2
        second.file = "0002_b.yaml"
        var other = first
        other.set = "other"
        try store.write(dryRun: false) { session in
            try session.recordMigration(first)
            try session.recordMigration(other)
            try session.recordMigration(second)
        }
        let notes = try store.read { try $0.migrationHistory(set: "notes") }
        try require(
            notes.map(\.version) == [1, 2] && notes.map(\.file) == ["0001_a.yaml", "0002_b.yaml"],
            "history of one set: \(notes)")
        try require(try store.read { try $0.migrationHistory(set: nil) }.count == 3, "history of all sets")
    }

    func rewrites() throws {
        let store = try newStore(
            "rewrites", with: [Self.note("n-1", "Milk", pinned: 1), Self.note("n-2", "Bread"), Self.folder("f-1")])
        let rated = try SchemaParser.parse(
            Self.schemaText.replacingOccurrences(
                of: "pinned        INT64 QUERYABLE SORTABLE,",
                with: "pinned        INT64 QUERYABLE SORTABLE,\n        rating INT64 QUERYABLE,"))
        // A transform that throws leaves schema and records as they were.
        do {
            _ = try store.write(dryRun: false) { session in
                try session.rewrite(types: ["Note"], into: rated) { _ in throw Failure(description: "on purpose") }
            }
        } catch is Failure {}
        try require(
            store.schema.recordType(named: "Note")?.fields.contains { $0.name == "rating" } == false,
            "a failed rewrite changed the schema")
        let counts = try store.write(dryRun: false) { session in
            try session.rewrite(types: ["Note"], into: rated) { record in
                var changed = record
                changed["rating"] = .int64(record["pinned"] == .int64(1) ? 5 : 1)
                return [changed]
            }
        }
        try require(counts["Note"]?.scanned == 2 && counts["Note"]?.changed == 2, "counts: \(counts)")
        try require(store.schema.isEquivalent(to: rated), "the rewrite's schema")
        let ratings = try store.read { session in
            try ["n-1", "n-2"].map { try session.record(RecordID(recordName: $0, zone: Self.zone))?["rating"] }
        }
        try require(ratings == [.int64(5), .int64(1)], "rewritten records: \(ratings)")
        try require(try names(store) == ["f-1", "n-1", "n-2"], "other types untouched")
        // In place, where the store can: a field set from the others.
        try store.write(dryRun: false) { session in
            guard session.canUpdateInPlace(type: "Note", into: rated, renames: [:]) else { return }
            _ = try session.updateInPlace(type: "Note", into: rated, renames: [:], writes: ["rating"]) { record in
                var changed = record
                changed["rating"] = .int64(9)
                return [changed]
            }
            let after = try session.record(RecordID(recordName: "n-2", zone: Self.zone))
            if after?["rating"] != .int64(9) || after?["title"] != .string("Bread") {
                throw Failure(description: "in place: \(String(describing: after))")
            }
        }
    }

    func syncTokens() throws {
        let store = try newStore("sync")
        let source = "iCloud.com.example.Family/production/private"
        let other = ZoneID(scope: .shared, zoneName: "family-1", ownerRecordName: "_abc")
        try require(try store.read { try $0.syncStates(source: source) }.isEmpty, "a new store has no sync state")
        // A page of records and its token commit together, or neither does.
        do {
            try store.write(dryRun: false) { session in
                _ = try session.save(Self.note("n-1", "Milk"), mode: .upsert)
                try session.saveSyncToken("AAAA", source: source, zone: Self.zone)
                throw Failure(description: "cut off")
            }
        } catch is Failure {}
        try require(
            try store.read { try $0.syncStates(source: source) }.isEmpty && (try names(store)).isEmpty,
            "a rolled-back page left its token or records")
        try store.write(dryRun: false) { session in
            _ = try session.save(Self.note("n-1", "Milk"), mode: .upsert)
            try session.saveSyncToken("AAAA", source: source, zone: Self.zone)
            try session.saveSyncToken("BBBB", source: source, zone: other)
            try session.saveSyncToken("ZZZZ", source: "iCloud.com.example.Family/development/private", zone: Self.zone)
        }
        try store.write(dryRun: false) { try $0.saveSyncToken("AAAB", source: source, zone: Self.zone) }
        let states = try store.read { try $0.syncStates(source: source) }
        try require(
            Set(states.map { "\($0.zone.zoneName)=\($0.token)" }) == ["Notes=AAAB", "family-1=BBBB"],
            "states: \(states)")
        try require(states.first { $0.zone == other }?.zone.ownerRecordName == "_abc", "the zone's owner is kept")
        try require(
            try store.read { try $0.syncSources() }
                == ["iCloud.com.example.Family/development/private", source].sorted(), "the sources pulled from")
        try store.write(dryRun: false) { try $0.saveSyncToken(nil, source: source, zone: other) }
        try require(try store.read { try $0.syncStates(source: source) }.map(\.token) == ["AAAB"], "a forgotten token")
    }

    func connectorState() throws {
        let store = try newStore("state")
        try require(
            try store.read { try $0.connectorState(kind: "feed", name: "family", key: "") } == nil,
            "a new store has no connector state")
        // State and the records it speaks of commit together, or neither does.
        do {
            try store.write(dryRun: false) { session in
                _ = try session.save(Self.note("n-1", "Milk"), mode: .upsert)
                try session.saveConnectorState("{}", kind: "feed", name: "family", key: "")
                throw Failure(description: "cut off")
            }
        } catch is Failure {}
        try require(
            try store.read { try $0.connectorStateNames(kind: "feed") }.isEmpty && (try names(store)).isEmpty,
            "a rolled-back write left its state or records")
        try store.write(dryRun: false) { session in
            try session.saveConnectorState(#"{"where":"x"}"#, kind: "feed", name: "family", key: "")
            try session.saveConnectorState("b", kind: "feed", name: "family", key: "token:b")
            try session.saveConnectorState("a", kind: "feed", name: "family", key: "token:a")
            try session.saveConnectorState("z", kind: "feed", name: "Zed", key: "")
            try session.saveConnectorState(
                "é", kind: "caldav-publish", name: "https://dav.example/cal/", key: "event:é")
        }
        try store.write(dryRun: false) { try $0.saveConnectorState("a2", kind: "feed", name: "family", key: "token:a") }
        try require(
            try store.read { try $0.connectorState(kind: "feed", name: "family", key: "token:a") } == "a2",
            "a saved value replaces the one before")
        try require(
            try store.read { try $0.connectorStateNames(kind: "feed") } == ["Zed", "family"],
            "names sorted byte by byte")
        var keys: [String] = []
        try store.read { try $0.forEachConnectorState(kind: "feed", name: "family") { keys.append($0.key) } }
        try require(keys == ["", "token:a", "token:b"], "one name's entries in key order: \(keys)")
        var all: [String] = []
        try store.read {
            try $0.forEachConnectorState(kind: nil, name: nil) {
                all.append("\($0.kind)/\($0.name)/\($0.key)=\($0.value)")
            }
        }
        try require(
            all == [
                "caldav-publish/https://dav.example/cal//event:é=é", "feed/Zed/=z", #"feed/family/={"where":"x"}"#,
                "feed/family/token:a=a2", "feed/family/token:b=b",
            ], "every entry in order: \(all)")
        let second = try open(store.location)
        try require(
            try second.read { try $0.connectorState(kind: "feed", name: "Zed", key: "") } == "z",
            "another handle reads the committed state")
        try store.write(dryRun: false) { try $0.saveConnectorState(nil, kind: "feed", name: "family", key: "token:b") }
        try store.write(dryRun: false) { try $0.removeConnectorState(kind: "feed", name: "Zed") }
        keys = []
        try store.read { try $0.forEachConnectorState(kind: "feed", name: nil) { keys.append("\($0.name)/\($0.key)") } }
        try require(keys == ["family/", "family/token:a"], "what is left after removals: \(keys)")
    }

    func bulkLoad() throws {
        let store = try newStore("bulk")
        var bad = Self.note("n-2", "Bread")
        bad["pinned"] = .string("yes")
        let records = [Self.note("n-1", "Milk"), bad, Self.note("n-3", "Jam")]
        do {
            _ = try store.importRecords(
                [ArrayRecordSource(records)], schema: nil, options: ImportOptions(), hooks: ImportHooks())
            throw Failure(description: "an invalid record did not fail the load")
        } catch is Failure {
            throw Failure(description: "an invalid record did not fail the load")
        } catch {}
        try require(try names(store).isEmpty, "a failed load left records")
        let summary = try store.importRecords(
            [ArrayRecordSource(records)], schema: nil, options: ImportOptions(skipInvalid: true), hooks: ImportHooks())
        try require(
            summary.totals.inserted == 2 && summary.totals.rejected == 1, "skipping invalid records: \(summary.totals)")
        try require(try names(store) == ["n-1", "n-3"], "the valid records went in")
        var heard = 0
        let hooks = ImportHooks(finishing: { session in
            heard = try session.count(RecordQuery(recordTypes: ["Note"]))
            throw Failure(description: "refused at the end")
        })
        do {
            _ = try store.importRecords(
                [ArrayRecordSource([Self.note("n-4", "Tea")])], schema: nil, options: ImportOptions(), hooks: hooks)
        } catch is Failure {}
        try require(heard == 3, "the finishing hook sees the load's records: \(heard)")
        try require(try names(store) == ["n-1", "n-3"], "a load its hook refused left records")
        // A name held by another type: refused, unless the load replaces other types (a chain
        // of bundles restored), where the record takes the other one's place, whether that one
        // is in the store or earlier in the load.
        try store.write(dryRun: false) { _ = try $0.save(Self.folder("f-9"), mode: .insert) }
        let retyped = [Self.note("f-9", "Was a folder"), Self.note("n-8", "Soon a folder"), Self.folder("n-8")]
        let refused = try store.importRecords(
            [ArrayRecordSource(retyped)], schema: nil, options: ImportOptions(mode: .replace, skipInvalid: true),
            hooks: ImportHooks())
        try require(
            refused.totals.rejected == 2
                && refused.issues.allSatisfy { $0.message.description.contains("already used") },
            "a name another type holds is refused: \(refused.totals)")
        try store.write(dryRun: false) { _ = try $0.delete([RecordID(recordName: "n-8", zone: Self.zone)]) }
        var replacing = ImportOptions(mode: .replace)
        replacing.replacesOtherTypes = true
        let replaced = try store.importRecords(
            [ArrayRecordSource(retyped)], schema: nil, options: replacing, hooks: ImportHooks())
        try require(replaced.totals.rejected == 0, "replacing other types: \(replaced.totals)")
        let types = try store.read { session in
            var found: [String: String] = [:]
            try session.forEach(RecordQuery()) { found[$0.recordName] = $0.recordType }
            return found
        }
        try require(
            types["f-9"] == "Note" && types["n-8"] == "Folder" && types.count == 4,
            "a record of another type takes the name's place, and only one record holds it: \(types)")
        let folders = try store.read { try $0.count(RecordQuery(recordTypes: ["Folder"])) }
        let notes = try store.read { try $0.count(RecordQuery(recordTypes: ["Note"])) }
        try require(folders == 1 && notes == 3, "each type's rows: \(folders) folders, \(notes) notes")
    }

    /// Parent and share links and a share's details are kept as given, by saves and bulk
    /// loads alike, queried by `parent`, kept by an upsert that does not name them; deleting a
    /// share's root deletes the share, deleting a share leaves its root (which no longer names
    /// it), and a parent link never deletes anything.
    func sharing() throws {
        let details =
            #"{"publicPermission":"NONE","participants":[{"userIdentity":{"userRecordName":"_owner"},"type":"OWNER","acceptanceStatus":"ACCEPTED","permission":"READ_WRITE"}],"shortGUID":"0abc","extra":null}"#
        var root = Self.folder("f-1")
        root.share = "share-1"
        root.shareDetails = #"{"shortGUID":"0abc"}"#
        var child = Self.note("n-1", "Milk")
        child.parent = "f-1"
        var grandchild = Self.note("n-2", "Bread")
        grandchild.parent = "n-1"
        var share = Record(
            id: RecordID(recordName: "share-1", zone: Self.zone), recordType: Record.shareType,
            fields: ["cloudkit.title": .string("Groceries")], share: "share-1", shareDetails: details)
        share.changeTag = "tag-s"
        let store = try create("sharing")
        var schema = try SchemaParser.parse(Self.schemaText)
        schema.recordTypes.append(.share)
        try store.importSchema(schema, dryRun: false)
        // Half by bulk load, half by single saves.
        _ = try store.importRecords(
            [ArrayRecordSource([root, share])], schema: nil, options: ImportOptions(), hooks: ImportHooks())
        try store.write(dryRun: false) { session in
            _ = try session.save(child, mode: .insert)
            _ = try session.save(grandchild, mode: .insert)
        }
        let all = try store.read { session in
            var found: [String: Record] = [:]
            try session.forEach(RecordQuery()) { found[$0.recordName] = $0 }
            return found
        }
        try require(
            all["f-1"] == root && all["n-1"] == child && all["n-2"] == grandchild && all["share-1"] == share,
            "links and details as given: \(all.values.map { "\($0.recordName) parent \($0.parent ?? "-") share \($0.share ?? "-") details \($0.shareDetails ?? "-")" })"
        )
        var underMilk = RecordQuery(recordTypes: ["Note"])
        underMilk.predicate = try RecordPredicate.parse("parent == 'n-1'")
        try require(try names(store, underMilk) == ["n-2"], "query by parent: \(try names(store, underMilk))")
        // An upsert that names no links keeps them; a replace takes exactly what it is given.
        var retitled = Self.folder("f-1")
        retitled["title"] = .string("Groceries")
        try store.write(dryRun: false) { session in _ = try session.save(retitled, mode: .upsert) }
        let kept = try store.read { try $0.record(RecordID(recordName: "f-1", zone: Self.zone)) }
        try require(
            kept?.share == "share-1" && kept?.shareDetails == root.shareDetails
                && kept?["title"] == .string("Groceries"), "upsert kept the links: \(String(describing: kept))")
        // Deleting the share leaves its records; the root no longer names it.
        let first = try store.write(dryRun: false) { try $0.delete([RecordID(recordName: "share-1", zone: Self.zone)]) }
        try require(first.map(\.id.recordName) == ["share-1"], "deleting a share deletes it alone: \(first)")
        let unlinked = try store.read { try $0.record(RecordID(recordName: "f-1", zone: Self.zone)) }
        try require(
            unlinked?.share == nil && unlinked?.shareDetails == root.shareDetails,
            "the root no longer names the share: \(String(describing: unlinked))")
        try require(try names(store) == ["f-1", "n-1", "n-2"], "records stay: \(try names(store))")
        // Deleting a root deletes its share; the records under it stay.
        try store.write(dryRun: false) { session in
            _ = try session.save(share, mode: .insert)
            var again = try session.record(RecordID(recordName: "f-1", zone: Self.zone))!
            again.share = "share-1"
            _ = try session.save(again, mode: .replace)
        }
        let second = try store.write(dryRun: false) { try $0.delete([RecordID(recordName: "f-1", zone: Self.zone)]) }
        try require(
            Set(second.map(\.id.recordName)) == ["f-1", "share-1"], "deleting a root deletes its share: \(second)")
        try require(
            second.first { $0.id.recordName == "share-1" }?.cause?.recordName == "f-1"
                && second.first { $0.id.recordName == "share-1" }?.field == "share",
            "the share is deleted because of its root: \(second)")
        try require(try names(store) == ["n-1", "n-2"], "a parent link deletes nothing: \(try names(store))")
    }

    /// Each share's root and the records under it, counted by the store: three levels, a loop
    /// back to the root, a root of another type, links that lead nowhere or into another zone.
    func shareHierarchies() throws {
        func linked(_ record: Record, parent: String? = nil, share: String? = nil) -> Record {
            var record = record
            record.parent = parent
            record.share = share
            return record
        }
        let other = ZoneID(scope: .private, zoneName: "Elsewhere")
        let records = [
            linked(Self.folder("f-1"), share: "share-1"),
            linked(Self.note("n-1", "Milk"), parent: "f-1"),
            linked(Self.note("n-2", "Bread"), parent: "n-1"),
            linked(Self.note("n-3", "Jam"), parent: "n-2"),
            linked(Self.note("n-4", "Tea"), parent: "f-1"),
            // The root's own parent lies under it: the loop is walked once.
            linked(Self.folder("f-2"), parent: "n-5", share: "share-2"),
            linked(Self.note("n-5", "Oats"), parent: "f-2"),
            // A note shared on its own.
            linked(Self.note("n-9", "Alone"), share: "share-3"),
            // A parent the zone does not hold, and a record of another zone naming f-1.
            linked(Self.note("n-6", "Lost"), parent: "f-404"),
            linked(Self.note("n-1", "Milk elsewhere", zone: other), parent: "f-1"),
            linked(Self.folder("f-1", zone: other), share: "share-1"),
        ]
        let shares = ["share-1", "share-2", "share-3", "share-9"].map {
            Record(
                id: RecordID(recordName: $0, zone: Self.zone), recordType: Record.shareType,
                fields: ["cloudkit.title": .string($0)], share: $0)
        }
        let store = try create("hierarchies")
        var schema = try SchemaParser.parse(Self.schemaText)
        schema.recordTypes.append(.share)
        try store.importSchema(schema, dryRun: false)
        _ = try store.importRecords(
            [ArrayRecordSource(records + shares)], schema: nil, options: ImportOptions(), hooks: ImportHooks())
        let found = try store.read { try $0.shareHierarchies(in: Self.zone) }
        let expected = [
            ShareHierarchy(share: "share-1", rootName: "f-1", rootType: "Folder", recordCount: 5),
            ShareHierarchy(share: "share-2", rootName: "f-2", rootType: "Folder", recordCount: 2),
            ShareHierarchy(share: "share-3", rootName: "n-9", rootType: "Note", recordCount: 1),
        ]
        try require(found == expected, "share hierarchies of \(Self.zone.zoneName): \(found)")
        let elsewhere = try store.read { try $0.shareHierarchies(in: other) }
        try require(
            elsewhere == [ShareHierarchy(share: "share-1", rootName: "f-1", rootType: "Folder", recordCount: 2)],
            "share hierarchies of Elsewhere: \(elsewhere)")
        let none = try store.read { try $0.shareHierarchies(in: ZoneID(scope: .private, zoneName: "Nowhere")) }
        try require(none.isEmpty, "a zone the store never held has no shares: \(none)")
    }

    func twoHandles() throws {
        let store = try newStore("handles", with: [Self.note("n-1", "Milk")])
        let second = try open(store.location)
        try require(
            second.storeID == store.storeID && second.schema.isEquivalent(to: store.schema),
            "a second handle sees the same store")
        // A reader keeps its state while another handle commits.
        try second.read { session in
            try store.write(dryRun: false) { _ = try $0.save(Self.note("n-2", "Bread"), mode: .upsert) }
            var inside = 0
            try session.forEach(RecordQuery()) { _ in inside += 1 }
            if inside != 1 {
                throw Failure(description: "a read transaction saw a commit made after it began (\(inside) records)")
            }
        }
        try require(try names(second) == ["n-1", "n-2"], "a new read sees the commit")
        try second.write(dryRun: false) { _ = try $0.save(Self.note("n-3", "Jam"), mode: .upsert) }
        try require(try names(store) == ["n-1", "n-2", "n-3"], "writes from both handles")
    }

    /// A store handle is `Sendable`: threads share one, each transaction its own.
    func manyThreads() throws {
        let store = try newStore("threads", with: [Self.note("n-0", "Milk")])
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            do {
                for round in 0..<5 {
                    try store.write(dryRun: false) { session in
                        _ = try session.save(Self.note("t\(thread)-\(round)", "Thread \(thread)"), mode: .insert)
                    }
                    let seen = try store.read { session in try session.count(RecordQuery()) }
                    if seen < 2 + round { failures.withLock { $0.append("thread \(thread) saw \(seen) records") } }
                }
            } catch {
                failures.withLock { $0.append("thread \(thread): \(error)") }
            }
        }
        let failed = failures.withLock { $0 }
        try require(failed.isEmpty, "threads sharing one handle: \(failed.joined(separator: "; "))")
        try require(try names(store).count == 21, "every thread's writes are kept (\(try names(store).count) of 21)")
    }

    /// An operation asked to stop (``Cancellation``) stops at its next record, read or saved,
    /// with ``InterruptedError``, and its transaction rolls back; an operation beside it, on the
    /// same handle, goes on.
    func cancellation() throws {
        let store = try newStore("cancel", with: [Self.note("n-0", "Milk"), Self.note("n-1", "Bread")])
        let operation = Cancellation(inside: nil)
        var saved = 0
        do {
            try Cancellation.$current.withValue(operation) {
                try store.write(dryRun: false) { session in
                    for number in 2..<40 {
                        if number == 12 { operation.cancel() }
                        _ = try session.save(Self.note("n-\(number)", "Item \(number)"), mode: .insert)
                        saved += 1
                    }
                }
            }
            throw Failure(description: "a write whose operation was cancelled committed all \(saved) records")
        } catch let error as InterruptedError {
            try require(
                error.signal == Cancellation.cancelledTask, "a cancelled operation says it was cancelled (\(error))")
        }
        try require(saved == 10, "a cancelled write stops at its next record (it saved \(saved) of 10)")
        try require(try names(store) == ["n-0", "n-1"], "a cancelled write rolls back")

        // A read stops at its next record too.
        let reading = Cancellation(inside: nil)
        var read = 0
        try requireThrows(InterruptedError.self, "a cancelled read") {
            try Cancellation.$current.withValue(reading) {
                try store.read { session in
                    try session.forEach(RecordQuery()) { _ in
                        read += 1
                        reading.cancel()
                    }
                }
            }
        }
        try require(read == 1, "a cancelled read stops at its next record (it read \(read))")

        // The operation beside it, and one inside it, see only their own.
        let beside = Cancellation(inside: nil)
        try require(!beside.isCancelled && Cancellation(inside: beside).isCancelled == false, "an operation beside")
        try require(Cancellation(inside: reading).isCancelled, "an operation inside a cancelled one is cancelled")
        try Cancellation.$current.withValue(beside) {
            try require(try names(store) == ["n-0", "n-1"], "an operation beside a cancelled one reads on")
            try store.write(dryRun: false) { _ = try $0.save(Self.note("n-2", "Jam"), mode: .insert) }
        }
        try require(try names(store) == ["n-0", "n-1", "n-2"], "an operation beside a cancelled one writes on")
    }
}
