import Foundation
import Records
import TestSupport
import Testing

// GRDB by name, so that its `Record` class stays out of the way of ckport's `Record`.
import class GRDB.Database
import class GRDB.DatabaseQueue
import protocol GRDB.DatabaseValueConvertible
import class GRDB.Row

@testable import SQLiteStore
@testable import StoreCore

/// `updateInPlace` writes the records a transform changed a run at a time (one UPDATE over a
/// run's key range, one over its change-log rows): runs end at unchanged and deleted records,
/// at zone boundaries and after 2,048 records (going on from one batch of rows into the next),
/// and the records it hands the transform may carry only the fields asked for.
@Suite("migrating a type in place")
struct UpdateInPlaceTests {
    static let schema = """
        DEFINE SCHEMA
            RECORD TYPE Item (n INT64, label STRING, other STRING, link REFERENCE);
        """
    static let zone = ZoneID(scope: .private, zoneName: "Second")

    /// 2,600 items in the default zone and 1,400 in a second one (batches of 2,048 rows, read
    /// from the snapshot or copied, end inside the first); every 7th is left alone and every
    /// 11th deleted.
    static func store(_ scratch: Scratch) throws -> RecordStore {
        var records: [Record] = []
        for n in 0..<4000 {
            let zone: ZoneID = n < 2600 ? .defaultZone : UpdateInPlaceTests.zone
            var fields: RecordFields = [
                "n": .int64(Int64(n)), "label": .string("old \(n)"), "other": .string("keep \(n)"),
            ]
            if n % 3 == 0 { fields["link"] = .reference(Reference(recordName: "elsewhere-\(n)", action: .deleteSelf)) }
            records.append(
                Record(
                    id: RecordID(recordName: String(format: "i%04d", n), zone: zone), recordType: "Item", fields: fields
                ))
        }
        return try scratch.store(schema: schema, records: records)
    }

    /// What a failed migration must leave as it was: the change log, the items' rows and the
    /// schema SQLite holds.
    static func tables(_ store: RecordStore) throws -> [String] {
        try store.read { session in
            try String.fetchAll(
                session.db,
                sql:
                    "SELECT zone || ' ' || recordName || ' ' || seq || ' ' || deleted FROM _ck_record ORDER BY zone, recordName"
            )
                + String.fetchAll(
                    session.db,
                    sql:
                        "SELECT ___recordID || ' ' || coalesce(label, '') || ' ' || n FROM Item ORDER BY ___zone, ___recordID"
                )
                + String.fetchAll(session.db, sql: "SELECT name || coalesce(sql, '') FROM sqlite_master ORDER BY name")
        }
    }

    static func everything(_ store: RecordStore) throws -> [String: Record] {
        try store.read { session in
            var all: [String: Record] = [:]
            try session.forEach(RecordQuery()) { all[$0.recordName] = $0 }
            return all
        }
    }

    /// `touchedFirst`: a row changed earlier in the same transaction, so that the rows are read
    /// on the writer's connection rather than from the snapshot the transaction began with.
    @Test(
        "changed records between unchanged and deleted ones, in two zones, are written with their change log; unread fields stay",
        arguments: [false, true])
    func runs(touchedFirst: Bool) throws {
        let scratch = Scratch()
        let store = try UpdateInPlaceTests.store(scratch)
        let before = try UpdateInPlaceTests.everything(store)
        let token = try store.read { $0.currentToken }
        var newSchema = store.schema
        newSchema.addField(FieldDefinition(name: "twice", type: .int64), toType: "Item")
        var seen: Set<String> = []
        let counts = try store.write { session in
            if touchedFirst { try session.db.execute(sql: "UPDATE Item SET n = n WHERE ___recordID = 'i0001'") }
            defer { #expect(session.inPlaceReadFromSnapshot == !touchedFirst) }
            return try session.updateInPlace(
                type: "Item", into: newSchema, renames: [:], writes: ["label", "twice", "link"], reads: ["n", "link"]
            ) { record in
                // Only the fields asked for (and the system fields) are read from the row.
                seen.formUnion(record.fields.map { $0.0 })
                guard case .int64(let n)? = record.fields["n"] else { throw StoreError.corrupt("no n") }
                if n % 7 == 0 { return nil }
                if n % 11 == 0 { return [] }
                var result = record
                result.fields["label"] = .string("new \(n)")
                result.fields["twice"] = .int64(2 * n)
                if n % 5 == 0 { result.fields["link"] = nil }
                return [result]
            }
        }
        #expect(seen == ["n", "link"])
        let after = try UpdateInPlaceTests.everything(store)
        var changed: Set<String> = []
        for (name, old) in before {
            guard case .int64(let n)? = old.fields["n"] else {
                Issue.record("\(name) has no n")
                continue
            }
            if n % 7 == 0 {
                #expect(after[name] == old, "\(name) was left alone")
            } else if n % 11 == 0 {
                #expect(after[name] == nil, "\(name) was deleted")
                changed.insert(name + " (deleted)")
            } else {
                let now = try #require(after[name])
                #expect(now.zone == old.zone)
                #expect(now.fields["label"] == .string("new \(n)") && now.fields["twice"] == .int64(2 * n))
                #expect(
                    now.fields["other"] == .string("keep \(n)"),
                    "\(name): a field the transform did not read keeps its value")
                #expect(
                    now.fields["link"] == (n % 5 == 0 ? nil : old.fields["link"]), "\(name): a reference and its action"
                )
                changed.insert(name)
            }
        }
        #expect(
            counts.scanned == 4000 && counts.changed == changed.count
                && counts.deleted == changed.filter { $0.hasSuffix("(deleted)") }.count)
        // Every change is in the log once, with a sequence number of its own.
        var logged: [String] = []
        try store.read { session in
            try session.forEachChange(since: token) {
                logged.append($0.recordName + ($0.isDeleted ? " (deleted)" : ""))
            }
            #expect(session.changeSequence == token.sequence + Int64(changed.count))
            let distinct = try Int.fetchOne(
                session.db, sql: "SELECT count(DISTINCT seq) FROM _ck_record WHERE seq > ?", arguments: [token.sequence]
            )
            #expect(distinct == changed.count)
        }
        #expect(logged.count == changed.count && Set(logged) == changed)
        #expect(try store.integrityCheck() == ["ok"])
    }

    @Test("a change made earlier in the same transaction is what the migration reads")
    func earlierChange() throws {
        let scratch = Scratch()
        let store = try UpdateInPlaceTests.store(scratch)
        var newSchema = store.schema
        newSchema.addField(FieldDefinition(name: "twice", type: .int64), toType: "Item")
        try store.write { session in
            try session.db.execute(
                sql: "UPDATE Item SET label = 'changed first' WHERE ___recordID IN ('i0005', 'i3999')")
            try session.updateInPlace(type: "Item", into: newSchema, renames: [:], writes: ["label"], reads: ["label"])
            { record in
                guard case .string(let label)? = record.fields["label"] else { return nil }
                var result = record
                result.fields["label"] = .string(label + "!")
                return [result]
            }
            #expect(!session.inPlaceReadFromSnapshot)
        }
        let after = try UpdateInPlaceTests.everything(store)
        #expect(after.count == 4000)
        #expect(after["i0005"]?.fields["label"] == .string("changed first!"))
        #expect(after["i3999"]?.fields["label"] == .string("changed first!"))
        #expect(after["i0006"]?.fields["label"] == .string("old 6!"))
    }

    @Test(
        "a schema changed earlier in the same transaction is read where the writer sees it; after a snapshot, nothing holds the log"
    )
    func schemaChangedFirst() throws {
        let scratch = Scratch()
        let store = try UpdateInPlaceTests.store(scratch)
        func doubling(_ record: Record) throws -> [Record]? {
            guard case .int64(let n)? = record.fields["n"] else { throw StoreError.corrupt("no n") }
            var result = record
            result.fields["twice"] = .int64(2 * n)
            return [result]
        }
        var newSchema = store.schema
        newSchema.addField(FieldDefinition(name: "twice", type: .int64), toType: "Item")
        try store.write { session in
            try session.db.execute(sql: "CREATE INDEX scratch_n ON Item (n)")
            try session.updateInPlace(
                type: "Item", into: newSchema, renames: [:], writes: ["twice"], reads: ["n"], doubling)
            #expect(!session.inPlaceReadFromSnapshot)
            try session.db.execute(sql: "DROP INDEX scratch_n")
        }
        newSchema.addField(FieldDefinition(name: "again", type: .int64), toType: "Item")
        try store.write { session in
            try session.updateInPlace(
                type: "Item", into: newSchema, renames: [:], writes: ["twice"], reads: ["n"], doubling)
            #expect(session.inPlaceReadFromSnapshot)
        }
        let after = try UpdateInPlaceTests.everything(store)
        #expect(
            after.count == 4000
                && after.values.allSatisfy { record in
                    guard case .int64(let n)? = record.fields["n"] else { return false }
                    return record.fields["twice"] == .int64(2 * n)
                })
        // The snapshot's connection is gone: a checkpoint takes the whole log back into the file.
        let checkpoint = try DatabaseQueue(path: store.path).inDatabase { db in
            try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)").map { row in
                (0..<row.count).map { row[$0] as Int }
            }
        }
        #expect(checkpoint == [0, 0, 0], "busy, frames in the log, frames checkpointed")
    }

    static let kinds = """
        DEFINE SCHEMA
            RECORD TYPE Kinds (
                text STRING, count INT64, ratio DOUBLE, when TIMESTAMP, blob BYTES, ref REFERENCE, legacy NUMBER,
                strings LIST<STRING>, ratios LIST<DOUBLE>, place LOCATION, file ASSET, n INT64
            );
        """

    /// A record with a field of every kind and every system field set, a sparse one and a bare one.
    static func kindsStore(_ scratch: Scratch) throws -> RecordStore {
        var full = Record(
            id: RecordID(recordName: "full", zone: ZoneID(scope: .shared, zoneName: "Z", ownerRecordName: "_o")),
            recordType: "Kinds",
            changeTag: "t1",
            created: RecordStamp(timestamp: -236_131_200_000, userRecordName: "_0123abcd", deviceID: "iPhone"),
            modified: RecordStamp(timestamp: 1_768_208_400_123, userRecordName: "_4567ef", deviceID: "iPad"))
        full.parent = "family"
        full.share = "Share-1"
        full.shareDetails = #"{"shortGUID":"0ab"}"#
        full.fields = [
            "text": .string("Größe \"q\" \n😀"), "count": .int64(Int64.min), "ratio": .double(-0.0),
            "when": .timestamp(-1),
            "blob": .bytes([0, 1, 254, 255]), "ref": .reference(Reference(recordName: "other", action: .deleteSelf)),
            "legacy": .double(2.5),
            "strings": .list(.string, [.string("a"), .string("")]),
            "ratios": .list(.double, [.double(0.1), .double(-0.0)]),
            "place": .location(Location(latitude: 59.3293, longitude: -0.0, horizontalAccuracy: 5, altitude: -12.5)),
            "file": .asset(Asset(fileChecksum: "AbC+/=", size: 2_500_000)), "n": .int64(1),
        ]
        var sparse = Record(id: RecordID(recordName: "sparse"), recordType: "Kinds")
        sparse.fields = [
            "legacy": .int64(-7), "blob": .bytes([]), "ref": .reference(Reference(recordName: "a")), "n": .int64(2),
        ]
        let bare = Record(id: RecordID(recordName: "bare"), recordType: "Kinds")
        return try scratch.store(schema: UpdateInPlaceTests.kinds, records: [full, sparse, bare])
    }

    /// `touchedFirst` as in `runs`: the copy path, else the snapshot.
    @Test("every kind of field reaches the migration as it is stored, on both read paths", arguments: [false, true])
    func everyKind(touchedFirst: Bool) throws {
        let scratch = Scratch()
        let store = try UpdateInPlaceTests.kindsStore(scratch)
        let stored = try UpdateInPlaceTests.everything(store)
        #expect(stored.count == 3)
        var newSchema = store.schema
        newSchema.addField(FieldDefinition(name: "mark", type: .int64), toType: "Kinds")
        var seen: [String: Record] = [:]
        try store.write { session in
            if touchedFirst { try session.db.execute(sql: "UPDATE Kinds SET n = n WHERE ___recordID = 'bare'") }
            try session.updateInPlace(type: "Kinds", into: newSchema, renames: [:], writes: ["mark"], reads: nil) {
                record in
                seen[record.recordName] = record
                var result = record
                result.fields["mark"] = .int64(1)
                return [result]
            }
            #expect(session.inPlaceReadFromSnapshot == !touchedFirst)
        }
        #expect(seen == stored)
        let after = try UpdateInPlaceTests.everything(store)
        for (name, record) in stored {
            var expected = record.fields
            expected["mark"] = .int64(1)
            #expect(after[name]?.fields == expected, "\(name)")
        }
    }

    /// A transform that asks for some fields gets those, the record's name, zone and times, and
    /// nothing the store would have to read besides; what it did not get stays as stored.
    @Test(
        "asked for some fields, the migration gets them with the name, zone and times; the rest stays",
        arguments: [false, true])
    func someFields(touchedFirst: Bool) throws {
        let scratch = Scratch()
        let store = try UpdateInPlaceTests.kindsStore(scratch)
        let stored = try UpdateInPlaceTests.everything(store)
        #expect(
            stored["full"]?.created?.userRecordName == "_0123abcd" && stored["full"]?.parent == "family"
                && stored["full"]?.changeTag == "t1")
        #expect(
            stored["full"]?.modified?.deviceID == "iPad" && stored["full"]?.share == "Share-1"
                && stored["full"]?.shareDetails != nil)
        var newSchema = store.schema
        newSchema.addField(FieldDefinition(name: "mark", type: .int64), toType: "Kinds")
        var seen: [String: Record] = [:]
        try store.write { session in
            if touchedFirst { try session.db.execute(sql: "UPDATE Kinds SET n = n WHERE ___recordID = 'bare'") }
            try session.updateInPlace(
                type: "Kinds", into: newSchema, renames: [:], writes: ["mark"], reads: ["n", "ratio"]
            ) { record in
                seen[record.recordName] = record
                var result = record
                result.fields["mark"] = .int64(1)
                return [result]
            }
            #expect(session.inPlaceReadFromSnapshot == !touchedFirst)
        }
        #expect(seen.count == 3)
        for (name, record) in stored {
            var expected = Record(id: record.id, recordType: record.recordType)
            expected.created = record.created.map { RecordStamp(timestamp: $0.timestamp) }
            expected.modified = record.modified.map { RecordStamp(timestamp: $0.timestamp) }
            expected.fields = RecordFields(
                Dictionary(
                    uniqueKeysWithValues: record.fields.filter { ["n", "ratio"].contains($0.name) }.map {
                        ($0.name, $0.value)
                    }))
            #expect(seen[name] == expected, "\(name)")
        }
        let after = try UpdateInPlaceTests.everything(store)
        for (name, record) in stored {
            var expected = record.fields
            expected["mark"] = .int64(1)
            #expect(after[name]?.fields == expected, "\(name)")
            // What the transform was not handed is as it was stored.
            #expect(after[name]?.created == record.created && after[name]?.parent == record.parent, "\(name)")
            #expect(after[name]?.share == record.share && after[name]?.shareDetails == record.shareDetails, "\(name)")
            #expect(
                after[name]?.modified?.userRecordName == record.modified?.userRecordName
                    && after[name]?.modified?.deviceID == record.modified?.deviceID, "\(name)")
            #expect(after[name]?.id == record.id && after[name]?.changeTag == record.changeTag, "\(name)")
        }
    }

    @Test("a migration failing halfway leaves the store as it was, on both read paths", arguments: [false, true])
    func failingHalfway(touchedFirst: Bool) throws {
        let scratch = Scratch()
        let store = try UpdateInPlaceTests.store(scratch)
        let before = try UpdateInPlaceTests.tables(store)
        #expect(before.count > 8000)
        var newSchema = store.schema
        newSchema.addField(FieldDefinition(name: "twice", type: .int64), toType: "Item")
        #expect {
            try store.write { session in
                if touchedFirst { try session.db.execute(sql: "UPDATE Item SET n = n WHERE ___recordID = 'i0001'") }
                try session.updateInPlace(
                    type: "Item", into: newSchema, renames: [:], writes: ["label", "twice"], reads: ["n"]
                ) { record in
                    guard record.recordName != "i2500" else {
                        throw StoreError.corrupt("stopped at \(record.recordName)")
                    }
                    var result = record
                    result.fields["label"] = .string("new")
                    result.fields["twice"] = .int64(2)
                    return [result]
                }
            }
        } throws: { error in
            "\(error)".contains("stopped at i2500")
        }
        #expect(try UpdateInPlaceTests.tables(store) == before)
        #expect(store.schema.recordType(named: "Item")?.field(named: "twice") == nil)
    }

    @Test("a change log that disagrees with the table stops the update and leaves the store as it was")
    func damagedRegistry() throws {
        let scratch = Scratch()
        let store = try UpdateInPlaceTests.store(scratch)
        // Damage: one record's change-log row says it was deleted, yet its row is in the table.
        try store.write { session in
            try session.db.execute(sql: "UPDATE _ck_record SET deleted = 1 WHERE recordName = 'i0600'")
        }
        let before = try UpdateInPlaceTests.tables(store)
        var newSchema = store.schema
        newSchema.addField(FieldDefinition(name: "twice", type: .int64), toType: "Item")
        #expect {
            try store.write { session in
                try session.updateInPlace(type: "Item", into: newSchema, renames: [:], writes: ["label"], reads: nil) {
                    record in
                    var result = record
                    result.fields["label"] = .string("new")
                    return [result]
                }
            }
        } throws: { error in
            "\(error)".contains(
                "the change log has 2047 Item records from 'i0000' to 'i2047' where the migration changed 2048")
        }
        #expect(try UpdateInPlaceTests.tables(store) == before)
        #expect(store.schema.recordType(named: "Item")?.field(named: "twice") == nil)
        // Repaired, the same connection migrates: the failure left no function or statement behind.
        try store.write { session in
            try session.db.execute(sql: "UPDATE _ck_record SET deleted = 0 WHERE recordName = 'i0600'")
        }
        let counts = try store.write { session in
            try session.updateInPlace(type: "Item", into: newSchema, renames: [:], writes: ["label"], reads: nil) {
                record in
                var result = record
                result.fields["label"] = .string("new")
                return [result]
            }
        }
        #expect(counts.changed == 4000)
        #expect(try UpdateInPlaceTests.everything(store).values.allSatisfy { $0.fields["label"] == .string("new") })
    }
}
