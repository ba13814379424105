import Foundation
import GRDB
import Records
import Testing
import TestSupport
@testable import Store

@Suite("bulk loads into empty tables")
struct BulkLoadTests {
    @Test("an import into empty tables rebuilds every index it dropped and gives the connection its page cache back")
    func rebuildsAndRestores() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema, name: "bulk.sqlite")
        func indexes() throws -> [String] {
            try store.read { try String.fetchAll($0.db, sql: "SELECT sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name") }
        }
        let before = try indexes()
        #expect(before.contains { $0.contains("_ck_record_seq") })
        #expect(before.count > 1)
        let lines = (0..<500).map { task("t\($0)", #""title":{"value":"task \#($0)"},"priority":{"value":\#($0 % 5)}"#) }
        let summary = try importText(lines.joined(separator: "\n") + "\n", into: store)
        #expect(summary.totals.inserted == 500)
        #expect(try indexes() == before)
        // The index rebuild ran with a smaller cache (its sorter takes as much again); the
        // connection has its own back for what follows.
        #expect(try store.read { try Int.fetchOne($0.db, sql: "PRAGMA cache_size") } == RecordStore.cacheSize)
        #expect(try store.read { try String.fetchOne($0.db, sql: "PRAGMA integrity_check") } == "ok")
    }
}
