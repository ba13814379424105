import Foundation
import Records
import TestSupport
import Testing

// GRDB by name, so that its `Record` class stays out of the way of ckport's `Record`.
import class GRDB.Database
import class GRDB.DatabaseQueue

@testable import SQLiteStore
@testable import StoreCore

/// Every session checks that the zones the change log and the tables name exist, by probing
/// the ranges of zone numbers no zone has — not by visiting every zone.
@Suite("the zone check at the start of a session")
struct ZoneCheckTests {
    @Test("the ranges between zone numbers, and beyond them, down to the ends of Int64")
    func gaps() {
        #expect(StoreSession.gaps(in: []) == [Int64.min...Int64.max])
        #expect(StoreSession.gaps(in: [1, 2, 3]) == [Int64.min...0, 4...Int64.max])
        #expect(StoreSession.gaps(in: [1, 4, 5, 9]) == [Int64.min...0, 2...3, 6...8, 10...Int64.max])
        #expect(StoreSession.gaps(in: [Int64.min, 0, Int64.max]) == [(Int64.min + 1)...(-1), 1...(Int64.max - 1)])
    }

    @Test("a record or change-log row naming a zone that does not exist is found between, below and above the zones")
    func damage() throws {
        let scratch = Scratch()
        let records = (1...3).flatMap { zone in
            (0..<40).map { n in
                Record(
                    id: RecordID(recordName: "r\(n)", zone: ZoneID(scope: .private, zoneName: "Z\(zone)")),
                    recordType: "Item",
                    fields: ["n": .int64(Int64(n))])
            }
        }
        let store = try scratch.store(schema: "DEFINE SCHEMA\n    RECORD TYPE Item (n INT64);\n", records: records)
        let zones = try store.read { try Int64.fetchAll($0.db, sql: "SELECT id FROM _ck_zone ORDER BY id") }
        #expect(zones.count == 3)
        let middle = zones[1]
        // Edits by hand go through a connection of their own: the store's sessions refuse a damaged store.
        let raw = try DatabaseQueue(path: store.path)
        // Take the middle zone's number away: its rows now name a zone in a gap.
        try raw.write { try $0.execute(sql: "UPDATE _ck_zone SET id = 1000 WHERE id = ?", arguments: [middle]) }
        #expect { try store.read { _ in } } throws: {
            "\($0)".contains("the change log names zone \(middle), which does not exist")
        }
        try raw.write { try $0.execute(sql: "UPDATE _ck_record SET zone = 1000 WHERE zone = ?", arguments: [middle]) }
        #expect { try store.read { _ in } } throws: {
            "\($0)".contains("a Item record names zone \(middle), which does not exist")
        }
        try raw.write { try $0.execute(sql: "UPDATE Item SET ___zone = 1000 WHERE ___zone = ?", arguments: [middle]) }
        #expect(try store.read { try $0.count(RecordQuery()) } == 120)
        // Below the lowest zone and above the highest.
        for wrong: Int64 in [-5, 5000] {
            try raw.write {
                try $0.execute(
                    sql: "UPDATE Item SET ___zone = ? WHERE ___recordID = 'r7' AND ___zone = 1000", arguments: [wrong])
            }
            #expect { try store.read { _ in } } throws: {
                "\($0)".contains("a Item record names zone \(wrong), which does not exist")
            }
            try raw.write {
                try $0.execute(sql: "UPDATE Item SET ___zone = 1000 WHERE ___zone = ?", arguments: [wrong])
            }
        }
        #expect(try store.integrityCheck() == ["ok"])
    }
}
