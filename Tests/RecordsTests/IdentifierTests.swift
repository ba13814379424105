import Foundation
import Testing

@testable import Records

@Suite("zone and record identifiers")
struct IdentifierTests {
    @Test(
        "names that differ only in their Unicode form are two zones and two records, in sets and dictionaries as CloudKit and the stores tell them apart"
    )
    func bytes() {
        let composed = "K\u{FC}che"
        let decomposed = "Ku\u{308}che"
        #expect(composed == decomposed)  // Swift's own equality: canonical equivalence
        let zones: Set = [ZoneID(zoneName: composed), ZoneID(zoneName: decomposed), ZoneID(zoneName: composed)]
        #expect(zones.count == 2)
        let ids: Set = [
            RecordID(recordName: "caf\u{E9}"), RecordID(recordName: "cafe\u{301}"), RecordID(recordName: "caf\u{E9}"),
        ]
        #expect(ids.count == 2)
        #expect(
            RecordID(recordName: "a", zone: ZoneID(zoneName: composed))
                != RecordID(recordName: "a", zone: ZoneID(zoneName: decomposed)))
        // Same bytes, same identifier, whatever the scope and owner say.
        #expect(
            ZoneID(scope: .shared, zoneName: "z", ownerRecordName: "_o")
                == ZoneID(scope: .shared, zoneName: "z", ownerRecordName: "_o"))
        #expect(
            ZoneID(scope: .shared, zoneName: "z", ownerRecordName: "_o")
                != ZoneID(scope: .private, zoneName: "z", ownerRecordName: "_o"))
        // A name and an owner are not run together: "ab" + "c" is not "a" + "bc".
        let split: Set = [ZoneID(zoneName: "ab", ownerRecordName: "c"), ZoneID(zoneName: "a", ownerRecordName: "bc")]
        #expect(split.count == 2)
        // Ordering agrees with equality: the two forms sort apart, by their bytes.
        #expect(ZoneID(zoneName: decomposed) < ZoneID(zoneName: composed))
        let texts: Set = [ExactText("caf\u{E9}"), ExactText("cafe\u{301}")]
        #expect(texts.count == 2)
    }
}
