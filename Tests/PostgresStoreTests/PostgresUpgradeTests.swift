import Foundation
import Records
import SQLiteStore
import SampleApps
import StoreCore
import TestSupport
import Testing

@testable import PostgresStore

@Suite("PostgreSQL store: older formats", .enabled(if: TestServer.enabled))
struct PostgresUpgradeTests {
    @Test(
        "a store of format 1 (no link columns, no connector state) is upgraded in place, once, in one transaction, its records as they were; a newer format is refused"
    )
    func upgrade() throws {
        let location = try TestServer.location("upgrade")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        try store.importSchema(SampleApp.notes.schema)
        var records: [Record] = []
        try SampleApp.notes.generate(records: 40, seed: 7) { records.append($0) }
        _ = try store.importRecords(
            [ArrayRecordSource(records)], schema: nil, options: ImportOptions(), hooks: ImportHooks())
        let before = try store.read { session in
            var all: [Record] = []
            try session.forEach(RecordQuery()) { all.append($0) }
            return all
        }
        // The namespace as ckport wrote it before records had links.
        let link = try PostgresLink(location)
        for table in try store.catalog().filter({ $0.value["___recordID"] != nil }).keys.sorted() {
            try link.execute(
                "ALTER TABLE \(location.schema).\"\(table)\" DROP COLUMN \"___parent\", DROP COLUMN \"___share\", DROP COLUMN \"___shareDetails\""
            )
        }
        try link.execute(
            "DROP TABLE \(location.schema)._ck_state",
            "UPDATE \(location.schema)._ck_meta SET value = '1' WHERE key = 'format'")
        #expect(try store.catalog()["Note"]?["___parent"] == nil)
        // Opened to be read only, it is refused and left as it was.
        #expect {
            _ = try PostgresStore(location, create: false, upgrade: false)
        } throws: { error in
            "\(error)".contains("store format 1") && "\(error)".contains("this command only reads")
        }
        #expect(try store.catalog()["Note"]?["___parent"] == nil)
        let opened = try PostgresStore(location, create: false)
        #expect(opened.upgradedFrom == 1)
        for (table, columns) in try opened.catalog() where columns["___recordID"] != nil {
            #expect(
                columns["___parent"] == "text" && columns["___share"] == "text" && columns["___shareDetails"] == "text",
                "\(table)")
        }
        let after = try opened.read { session in
            var all: [Record] = []
            try session.forEach(RecordQuery()) { all.append($0) }
            return all
        }
        #expect(after == before && !after.isEmpty)
        // Format 3's connector state is there to be written.
        try opened.write(dryRun: false) { try $0.saveConnectorState("{}", kind: "feed", name: "family", key: "") }
        #expect(try opened.read { try $0.connectorStateNames(kind: "feed") } == ["family"])
        #expect(try PostgresStore(location, create: false).upgradedFrom == nil)
        try link.execute("UPDATE \(location.schema)._ck_meta SET value = '4' WHERE key = 'format'")
        #expect {
            _ = try PostgresStore(location, create: false)
        } throws: { error in
            "\(error)".contains("the store is of format 4, written by a newer ckport; this ckport reads formats 1 to 3")
        }
    }
}
