import CKPort
import Formats
import Foundation
import Records
import SampleApps
import TestSupport
import Testing

/// The `cloudkit-page` fuzz target's seeds read as a pull reads them: so that the fuzzer starts
/// from answers that reach the record decoder, not from ones refused at the first byte.
@Suite("CloudKit answer pages")
struct CloudAnswerPageTests {
    static let zone = ZoneID(scope: .shared, zoneName: "household-1", ownerRecordName: "_owner")

    func read(_ seed: String) throws -> (items: [SourceItem], deleted: [String], syncToken: String?, moreComing: Bool) {
        let data = try Data(contentsOf: packageRoot.appendingPathComponent("Fuzz/corpus/cloudkit-page/\(seed)"))
        return try CloudAnswerPage.read(
            data, operation: "changes/zone", schema: SampleApp.familyTodo.schema, zone: Self.zone)
    }

    func records(_ items: [SourceItem]) -> [Record] {
        items.compactMap { if case .record(let sourced) = $0 { return sourced.record } else { return nil } }
    }

    @Test(
        "the seeds decode: records with their share and parent links in the zone asked about, deletions and paging keys"
    )
    func seeds() throws {
        let first = try read("a.json")
        let decoded = records(first.items)
        #expect(decoded.map(\.recordType) == ["Household", "Task", "cloudkit.share"], "\(first.items)")
        #expect(decoded.allSatisfy { $0.zone == Self.zone })
        #expect(decoded[0].share != nil && decoded[1].parent == decoded[0].recordName)
        #expect(first.syncToken == "AQAAAAAAAAF_" && first.moreComing)
        let second = try read("b.json")
        #expect(
            records(second.items).map(\.recordType) == ["Member"] && second.deleted == ["task-1-000009"]
                && !second.moreComing, "\(second)")
        #expect(records(try read("c.json").items).count == 2)
        #expect(throws: (any Error).self) {
            _ = try CloudAnswerPage.read(
                Data("{\"records\": [".utf8), operation: "changes/zone", schema: SampleApp.familyTodo.schema,
                zone: Self.zone)
        }
    }
}
