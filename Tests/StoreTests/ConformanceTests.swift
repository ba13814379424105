import Foundation
import Records
import SQLiteStore
import StoreConformance
import StoreCore
import TestSupport
import Testing

/// The SQLite store against the checks every record store must pass, one test per part of the
/// store contract.
@Suite("store conformance: SQLite")
struct SQLiteConformanceTests {
    @Test(arguments: StoreConformance<RecordStore>.Part.allCases)
    func part(_ part: StoreConformance<RecordStore>.Part) throws {
        let scratch = Scratch()
        let conformance = StoreConformance<RecordStore>(
            create: { try RecordStore(path: scratch.path("\($0).sqlite")) },
            open: { try RecordStore(path: $0, create: false) })
        try conformance.run(part)
    }

    /// Every check belongs to exactly one part.
    @Test func everyCheckHasOnePart() {
        let checks = StoreConformance<RecordStore>.checks
        #expect(checks.count == 18 && Set(checks).count == checks.count)
    }
}
