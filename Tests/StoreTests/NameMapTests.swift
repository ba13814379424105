import Foundation
import Records
import Testing

@testable import SQLiteStore
@testable import StoreCore

@Suite("names and their new names, in memory and on disk")
struct NameMapTests {
    @Test(
        "past its memory limit the map moves to disk and answers the same; zones stay apart, the last name set wins, a name set twice counts once"
    )
    func spills() throws {
        let other = ZoneID(scope: .shared, zoneName: "z", ownerRecordName: "_someone")
        for limit in [0, 3, 1_000_000] {
            let map = NameMap(memoryLimit: limit)
            #expect(map.isEmpty)
            for i in 0..<20_000 { try map.set("r\(i)", to: "n\(i)", in: .defaultZone) }
            try map.set("r5", to: "again", in: .defaultZone)
            try map.set("r5", to: "other zone", in: other)
            #expect(try map.count() == 20_001, "limit \(limit)")
            #expect(map.isOnDisk == (limit < 20_001), "limit \(limit)")
            #expect(try map.newName(of: "r5", in: .defaultZone) == "again")
            #expect(try map.newName(of: "r5", in: other) == "other zone")
            #expect(try map.newName(of: "r6", in: other) == nil)
            #expect(try map.newName(of: "r19999", in: .defaultZone) == "n19999")
            #expect(try map.newName(of: "r20000", in: .defaultZone) == nil)
            // A set after the map has been read is seen by the next read.
            try map.set("late", to: "later", in: .defaultZone)
            #expect(try map.newName(of: "late", in: .defaultZone) == "later")
            #expect(try map.count() == 20_002)
            // Names are told apart by their bytes: "é" and "e" + U+0301 are two records.
            try map.set("caf\u{E9}", to: "composed", in: .defaultZone)
            try map.set("cafe\u{301}", to: "decomposed", in: .defaultZone)
            #expect(try map.newName(of: "caf\u{E9}", in: .defaultZone) == "composed", "limit \(limit)")
            #expect(try map.newName(of: "cafe\u{301}", in: .defaultZone) == "decomposed", "limit \(limit)")
            #expect(try map.count() == 20_004, "limit \(limit)")
        }
    }

    @Test("the disk copy lives in this process's private folder and goes with the map")
    func removed() throws {
        var map: NameMap? = NameMap(memoryLimit: 0)
        try map?.set("a", to: "b", in: .defaultZone)
        let folder = try #require(map?.diskFolder)
        #expect((folder as NSString).deletingLastPathComponent == (try PrivateFiles.folder()))
        #expect(FileManager.default.fileExists(atPath: folder + "/scratch.sqlite"))
        map = nil
        #expect(!FileManager.default.fileExists(atPath: folder))
    }
}
