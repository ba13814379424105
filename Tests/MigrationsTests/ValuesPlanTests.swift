import Foundation
import PropertyBased
import Records
import SQLiteStore
import SampleApps
import StoreCore
import TestSupport
import Testing

@testable import Migrations

/// A migration done in place takes records' values where they are (ValuesPlan) when its steps
/// allow: for every record, whole or with only the fields the steps read, the outcome, the
/// values and the failure must be what taking the record through the steps
/// (`CompiledMigration.migrate`) gives.
@Suite("migrating values without records")
struct ValuesPlanTests {
    /// Fixed steps that fail for some records: a text that is no time, a division by zero.
    static let failing = """
        version: 1
        description: some records cannot be migrated
        steps:
          - renameField: {type: Person, from: level, to: rank}
          - changeType: {type: Person, field: born, to: TIMESTAMP, into: bornAt}
          - setField: {type: Person, field: perRank, fieldType: INT64, expression: "coalesce(age, 1) / rank"}
        """

    /// Compares the two for every record of every type that has a plan; how many plans there
    /// were and how many records were compared.
    static func compare(
        _ compiled: CompiledMigration, _ records: [Record], _ dice: inout SeededRandom, _ context: String
    ) -> (plans: Int, records: Int) {
        var plans = 0
        var compared = 0
        for type in compiled.schemaBefore.recordTypes {
            guard let after = compiled.schemaAfter.recordType(named: type.name) else { continue }
            let renames = compiled.renames[type.name] ?? [:]
            let targets = Set(renames.values)
            // The working shape: the old fields under their old names, then the added ones, in
            // an order of the store's choosing (shuffled here).
            var fields =
                type.userFields.map(\.name)
                + after.userFields.map(\.name).filter { !targets.contains($0) && type.field(named: $0) == nil }
            for index in fields.indices.reversed() where index > 0 { fields.swapAt(index, dice.below(index + 1)) }
            guard let plan = ValuesPlan(compiled, type: type.name, fields: fields) else { continue }
            plans += 1
            // As the store hands them over: each record once whole, and once with only the
            // fields the steps read (the others are nil among the values, absent from the record).
            let reads = compiled.reads?[type.name]
            let inputs = records.filter { $0.recordType == type.name }.flatMap { whole -> [Record] in
                guard let reads else { return [whole] }
                var some = whole
                some.fields = RecordFields()
                for (name, value) in whole.fields where reads.contains(name) { some.fields[name] = value }
                return [whole, some]
            }
            for record in inputs {
                compared += 1
                var values = fields.map { record.fields[$0] }
                let planned = Result { () throws(RecordFailure) -> ValuesPlan.Outcome in
                    try plan.run(record.recordName, &values)
                }
                let place = "\(context), \(record.recordName)"
                switch (compiled.migrate(record), planned) {
                case (.unchanged, .success(.unchanged)):
                    #expect(values == fields.map { record.fields[$0] }, "\(place): unchanged yet its values moved")
                case (.future(let a), .success(.future(let b))):
                    #expect(a == b, "\(place)")
                case (.failed(let a), .failure(let b)):
                    #expect("\(a)" == "\(b)", "\(place)")
                case (.changed(let results), .success(.changed)):
                    guard results.count == 1, let result = results.first else {
                        Issue.record("\(place): the record became \(results.count) records, which a plan cannot do")
                        continue
                    }
                    for (index, name) in fields.enumerated() {
                        #expect(
                            values[index] == result.fields[renames[name] ?? name], "\(place).\(renames[name] ?? name)")
                    }
                    #expect(result.fields.count == values.compactMap { $0 }.count, "\(place): \(result.fields)")
                case (let whole, let byValues):
                    Issue.record("\(place): the whole record gives \(whole), its values \(byValues)")
                }
            }
        }
        return (plans, compared)
    }

    @Test("random steps over random records: the same outcome, values and failures")
    func randomSteps() async {
        var totals = (plans: 0, records: 0)
        await propertyCheck(count: 60, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            do {
                var dice = SeededRandom(state: seed)
                let records = MigrationProperties.records(&dice)
                var files = MigrationProperties.migrations(&dice)
                for (name, text) in files where text.hasSuffix("steps:\n  []\n") {
                    files[name] = text.replacingOccurrences(of: "steps:\n  []\n", with: "steps: []\n")
                }
                let scratch = Scratch()
                let set = try MigrationSet.load(directory: scratch.migrations("m", files))
                let compiled = try CompiledMigration(
                    set.migrations[0], schema: SchemaParser.parse(MigrationProperties.schema),
                    latestVersion: set.latestVersion)
                let counted = ValuesPlanTests.compare(compiled, records, &dice, "seed \(seed)")
                totals.plans += counted.plans
                totals.records += counted.records
            } catch {
                Issue.record("seed \(seed): \(error)")
            }
        }
        // Not a pass on nothing: plans were made and records went through them.
        #expect(totals.plans > 20 && totals.records > 200, "\(totals)")
    }

    @Test("records that fail fail alike: the same record, field, step and words")
    func failures() throws {
        var dice = SeededRandom(state: 7)
        var records: [Record] = []
        for (index, born) in ["2001-02-03T04:05:06Z", "soon", ""].enumerated() {
            for level in 0..<3 {
                records.append(
                    record(
                        "r\(index)-\(level)", "Person",
                        ["born": .string(born), "level": .int64(Int64(level)), "age": .int64(40)]))
            }
        }
        records.append(record("v50", "Person", ["_schemaVersion": .int64(50), "born": .string("soon")]))
        records.append(record("v1", "Person", ["_schemaVersion": .int64(1), "level": .int64(0)]))
        let scratch = Scratch()
        let set = try MigrationSet.load(
            directory: scratch.migrations("m", ["0001_failing.yaml": ValuesPlanTests.failing]))
        let compiled = try CompiledMigration(
            set.migrations[0], schema: SchemaParser.parse(MigrationProperties.schema), latestVersion: set.latestVersion)
        let counted = ValuesPlanTests.compare(compiled, records, &dice, "fixed steps")
        // Each record twice: whole, and with only the fields the steps read.
        #expect(counted.plans == 2 && counted.records == 2 * records.count, "\(counted)")
        // Some of them do fail, and the message names the record, the field and the step.
        let failure = try #require(
            records.lazy.compactMap { record -> RecordFailure? in
                if case .failed(let failure) = compiled.migrate(record) { return failure } else { return nil }
            }.first)
        #expect(failure.recordName == "r0-0" && failure.step.contains("0001_failing.yaml"), "\(failure)")
    }

    @Test("steps a plan cannot take leave records to be built")
    func noPlan() throws {
        let schema = try SchemaParser.parse(MigrationProperties.schema)
        let fields = schema.recordType(named: "Person")!.userFields.map(\.name)
        let scratch = Scratch()
        for step in [
            "deleteRecords: {type: Person}", "removeField: {type: Person, field: score, purge: true}",
            "setField: {type: Person, field: age, value: 1, where: \"level == 2\"}",
            "migrateRecordType: {from: Person, to: Human}",
        ] {
            let text = "version: 1\ndescription: one step\nsteps:\n  - \(step)\n"
            let set = try MigrationSet.load(directory: scratch.migrations("m\(step.count)", ["0001_one.yaml": text]))
            let compiled = try CompiledMigration(set.migrations[0], schema: schema, latestVersion: 1)
            #expect(ValuesPlan(compiled, type: "Person", fields: fields + ["_migratedFrom"]) == nil, "\(step)")
            // The other type's records are none of those steps' business.
            let pets = try #require(schema.recordType(named: "Pet")).userFields.map(\.name)
            #expect(ValuesPlan(compiled, type: "Pet", fields: pets + ["_schemaVersion"]) != nil, "\(step)")
        }
    }
}
