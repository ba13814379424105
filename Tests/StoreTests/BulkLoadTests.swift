import Foundation
import GRDB
import Records
import TestSupport
import Testing

@testable import SQLiteStore
@testable import StoreCore

@Suite("bulk loads into empty tables")
struct BulkLoadTests {
    @Test("an import into empty tables rebuilds every index it dropped and gives the connection its page cache back")
    func rebuildsAndRestores() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema, name: "bulk.sqlite")
        func indexes() throws -> [String] {
            try store.read {
                try String.fetchAll(
                    $0.db, sql: "SELECT sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name")
            }
        }
        let before = try indexes()
        #expect(before.contains { $0.contains("_ck_record_seq") })
        #expect(before.count > 1)
        let lines = (0..<500).map {
            task("t\($0)", #""title":{"value":"task \#($0)"},"priority":{"value":\#($0 % 5)}"#)
        }
        let summary = try importText(lines.joined(separator: "\n") + "\n", into: store)
        #expect(summary.totals.inserted == 500)
        #expect(try indexes() == before)
        // The index rebuild ran with a smaller cache (its sorter takes as much again); the
        // connection has its own back for what follows.
        #expect(try store.read { try Int.fetchOne($0.db, sql: "PRAGMA cache_size") } == RecordStore.cacheSize)
        #expect(try store.read { try String.fetchOne($0.db, sql: "PRAGMA integrity_check") } == "ok")
    }

    @Test(
        "while a first import loads, the tables it fills carry no index; a table that holds records keeps its indexes")
    func dropsWhileLoading() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema + "\n RECORD TYPE Note (text STRING QUERYABLE);", name: "bulk.sqlite")
        _ = try importText(task("kept", #""title":{"value":"already here"}"#) + "\n", into: store)
        let noteIndexes = try store.read {
            try String.fetchAll(
                $0.db,
                sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'Note' AND sql IS NOT NULL")
        }
        #expect(!noteIndexes.isEmpty)
        // The store holds a record now, so the change log keeps its index; Note is empty, Task not.
        func live(_ db: GRDB.Database, _ table: String) throws -> [String] {
            try String.fetchAll(
                db,
                sql:
                    "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL ORDER BY name",
                arguments: [table])
        }
        let during = try store.write { session -> (note: [String], task: [String], log: [String]) in
            let loader = try session.makeLoader()
            try loader.prepare(for: "Note")
            try loader.prepare(for: "Task")
            let seen = (try live(session.db, "Note"), try live(session.db, "Task"), try live(session.db, "_ck_record"))
            try loader.finish(inserted: 0)
            return seen
        }
        #expect(during.note.isEmpty, "Note was empty: its indexes are built after the load, not kept during it")
        #expect(!during.task.isEmpty, "Task holds a record: its indexes stay")
        #expect(during.log.contains("_ck_record_seq"))
        #expect(try store.read { try live($0.db, "Note") } == noteIndexes.sorted())

        // A store with no record at all: the change log's index goes too, and comes back.
        let fresh = try scratch.store(taskSchema, name: "fresh.sqlite")
        let freshLog = try store.read { try live($0.db, "_ck_record") }
        let dropped = try fresh.write { session -> [String] in
            let loader = try session.makeLoader()
            let seen = try live(session.db, "_ck_record")
            try loader.finish(inserted: 0)
            return seen
        }
        #expect(!dropped.contains("_ck_record_seq"))
        #expect(try fresh.read { try live($0.db, "_ck_record") } == freshLog)
    }
}
