import CKPort
import Foundation
import TestSupport
import Testing

@Suite("copying a store")
struct CopyTests {
    static let schema = """
        DEFINE SCHEMA
            RECORD TYPE Note (
                "___recordID" REFERENCE QUERYABLE,
                title         STRING QUERYABLE SORTABLE,
                attachment    ASSET,
                GRANT WRITE TO "_creator",
                GRANT CREATE TO "_icloud",
                GRANT READ TO "_world"
            );
        """

    @Test(
        "schema, records, the asset bytes they name, migration history and sync tokens reach the other store; a selection copies only itself"
    )
    func everything() throws {
        let scratch = Scratch()
        let source = try scratch.store(Self.schema, name: "source.sqlite")
        let bytes = Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try bytes.write(to: URL(fileURLWithPath: scratch.path("photo.jpg")))
        let zone = ZoneID(scope: .private, zoneName: "Notes")
        let entry = MigrationHistoryEntry(
            set: "notes", version: 1, description: "first", file: "0001_a.yaml",
            checksum: String(repeating: "b", count: 64),
            appliedAt: 1_700_000_000_000, durationMilliseconds: 5, recordsChanged: 2)
        try source.write { session in
            let put = try session.putAsset(file: scratch.path("photo.jpg"), expectedSHA256: nil, expectedSize: nil)
            for (name, title) in [("n-1", "Milk"), ("n-2", "Bread")] {
                var note = Record(
                    id: RecordID(recordName: name, zone: zone), recordType: "Note", changeTag: "tag-\(name)",
                    created: RecordStamp(timestamp: 1_700_000_000_000, userRecordName: "_u", deviceID: "d"),
                    modified: RecordStamp(timestamp: 1_700_000_500_000))
                note["title"] = .string(title)
                if name == "n-1" {
                    var asset = Asset(fileChecksum: "abc", size: put.size)
                    asset.sha256 = put.sha256
                    note["attachment"] = .asset(asset)
                }
                try session.save(note, mode: .insert)
            }
            try session.recordMigration(entry)
            try session.saveSyncToken("TOKEN-1", source: "iCloud.com.example.Notes/development/private", zone: zone)
        }
        let target = try RecordStore(path: scratch.path("target.sqlite"))
        let summary = try Copies.run(from: source, to: target)
        #expect(summary.totals.inserted == 2 && summary.assets == 1)
        func records(_ store: RecordStore) throws -> [Record] {
            try store.read { session in
                var all: [Record] = []
                try session.forEach(RecordQuery()) { all.append($0) }
                return all
            }
        }
        #expect(try records(target) == records(source))
        #expect(target.schema.isEquivalent(to: source.schema))
        let sha256 = try #require(
            try records(source).first?["attachment"].flatMap { value -> String? in
                if case .asset(let asset) = value { return asset.sha256 } else { return nil }
            })
        var copied = Data()
        #expect(try target.read { try $0.readAsset(sha256) { copied.append(contentsOf: $0) } })
        #expect(copied == bytes)
        #expect(try target.read { try $0.migrationHistory(set: nil) } == [entry])
        #expect(
            try target.read { try $0.syncStates(source: "iCloud.com.example.Notes/development/private") }.map(\.token)
                == ["TOKEN-1"])

        // A selection: only the records it names.
        var bread = RecordQuery(recordTypes: ["Note"])
        bread.predicate = try RecordPredicate.parse("title == 'Bread'")
        let partial = try RecordStore(path: scratch.path("partial.sqlite"))
        #expect(try Copies.run(from: source, to: partial, options: CopyOptions(query: bread)).totals.inserted == 1)
        #expect(try records(partial).map(\.recordName) == ["n-2"])
        // A dry run writes nothing.
        let dry = try RecordStore(path: scratch.path("dry.sqlite"))
        #expect(try Copies.run(from: source, to: dry, options: CopyOptions(dryRun: true)).totals.inserted == 2)
        #expect(try records(dry).isEmpty)
    }
}
