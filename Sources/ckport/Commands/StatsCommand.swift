import ArgumentParser
import Foundation
import Records
import SQLiteStore
import StoreCore

struct StatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Show what the store holds: its backend, counts per scope, zone and type, size and change token.",
        discussion: """
              ckport stats
              ckport stats --json | jq '.token'
              ckport stats --store 'postgresql://ckport@db.example/mirror?schema=family'

            The first line names the store and its backend (SQLite or PostgreSQL) with its size: \
            the file's, or the tables' on the server.
            """
    )

    @Flag(help: "Print JSON for scripts.")
    var json = false

    @OptionGroup var storeOptions: StoreOptions

    func run() async throws {
        let store = try storeOptions.open(create: false)
        let stats = try await store.readSession { try $0.stats() }
        if json {
            var out = JSONWriter()
            out.raw("{\"store\":")
            out.string(stats.path)
            out.raw(",\"backend\":")
            out.string(StoreOptions.backend(storeOptions.path).lowercased())
            out.raw(",\"bytes\":")
            out.int(stats.fileSize)
            out.raw(",\"token\":")
            out.string(stats.token.description)
            out.raw(",\"recordTypes\":")
            out.int(Int64(stats.recordTypeCount))
            out.raw(",\"records\":")
            out.int(Int64(stats.totalRecords))
            out.raw(",\"tombstones\":")
            out.int(Int64(stats.totalTombstones))
            out.raw(",\"assetFiles\":")
            out.int(Int64(stats.assetFiles))
            out.raw(",\"assetBytes\":")
            out.int(stats.assetBytes)
            out.raw(",\"zones\":")
            try out.encoded(stats.entries)
            out.raw("}")
            print(out.text)
            return
        }
        print("store   \(stats.path) (\(StoreOptions.backend(storeOptions.path)), \(Console.bytes(stats.fileSize)))")
        print("schema  \(stats.recordTypeCount) record types")
        print("token   \(stats.token)")
        if stats.assetFiles > 0 {
            print("assets  \(Console.count(stats.assetFiles)) files (\(Console.bytes(stats.assetBytes)))")
        }
        print("")
        // Zones of other owners share names ("RelationshipZone"); the owner tells them apart.
        let rows =
            stats.entries.map { entry in
                let owner =
                    entry.zone.ownerRecordName == ZoneID.defaultOwnerName
                    ? "" : String(entry.zone.ownerRecordName.prefix(9)) + "…"
                return [
                    entry.zone.scope.rawValue, entry.zone.zoneName, owner, entry.recordType,
                    Console.count(entry.records), Console.count(entry.tombstones),
                ]
            } + [["total", "", "", "", Console.count(stats.totalRecords), Console.count(stats.totalTombstones)]]
        print(Console.table(["scope", "zone", "owner", "type", "records", "tombstones"], rows, numeric: [4, 5]))
    }
}
