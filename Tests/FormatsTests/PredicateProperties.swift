import Foundation
import PropertyBased
import Records
import SampleApps
import TestSupport
import Testing

@testable import SQLiteStore
@testable import StoreCore

/// The `--where` language on random predicates over random records (``PredicateData``):
/// printed text parses back to the same conditions, and the SQLite store selects exactly the
/// records the in-memory evaluation (`RecordPredicate.matches`, written apart from the SQL)
/// keeps. The PostgreSQL store runs the same check (PostgresStoreTests).
@Suite("the predicate language on random input")
struct PredicateProperties {
    @Test(
        "a predicate printed parses back to the same conditions; the SQLite store selects exactly what the in-memory evaluation keeps"
    )
    func storeAgreesWithEvaluation() async {
        await propertyCheck(count: 30, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            do {
                var dice = SeededRandom(state: seed)
                let records = dice.predicateRecords()
                let scratch = Scratch()
                let store = try RecordStore(path: scratch.path("p.sqlite"))
                try store.importSchema(try SchemaParser.parse(PredicateData.schemaText))
                _ = try RecordImporter(store: store, options: ImportOptions()).run([ArrayRecordSource(records)])
                let (problems, selecting) = try PredicateData.check(store, records: records, dice: &dice, count: 25)
                #expect(problems.isEmpty, "seed \(seed): \(problems.prefix(3).joined(separator: "; "))")
                // Not a property of empty answers: most runs' predicates keep something.
                #expect(records.isEmpty || selecting > 0, "seed \(seed): no predicate of the run selected a record")
            } catch {
                Issue.record("seed \(seed): \(error)")
            }
        }
    }
}
