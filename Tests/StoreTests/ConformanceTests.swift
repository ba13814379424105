import Foundation
import Records
import Store
import TestSupport
import Testing

/// The SQLite store against the checks every record store must pass.
@Suite("store conformance: SQLite")
struct SQLiteConformanceTests {
    @Test(arguments: StoreConformance<RecordStore>.checks)
    func check(_ name: String) throws {
        let scratch = Scratch()
        let conformance = StoreConformance<RecordStore>(
            create: { try RecordStore(path: scratch.path("\($0).sqlite")) },
            open: { try RecordStore(path: $0, create: false) })
        try conformance.run(name)
    }
}
