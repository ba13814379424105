import Foundation
import PropertyBased
import Records
import SQLiteStore
import SampleApps
import StoreCore
import Testing

@testable import Migrations

/// Random migrations over random records: what `plan` says is what `apply` does.
@Suite("random migrations")
struct MigrationProperties {
    static let schema = """
        DEFINE SCHEMA
            RECORD TYPE Person (name STRING, age INT64, score DOUBLE, born STRING, level INT64, friend REFERENCE, "_schemaVersion" INT64);
            RECORD TYPE Pet (name STRING, owner REFERENCE, weight DOUBLE);
        """

    static func records(_ dice: inout SeededRandom) -> [Record] {
        let count = 1 + dice.below(40)
        return (0..<count).map { i in
            if dice.roll(0.3) {
                var fields: RecordFields = ["name": .string(dice.pick(["Rex", "Tom", "", "Ünï"]))]
                if dice.roll(0.7) { fields["owner"] = .reference(Reference(recordName: "p\(dice.below(count))")) }
                if dice.roll(0.5) { fields["weight"] = .double(Double(dice.below(400)) / 10) }
                return record("p\(i)", "Pet", fields)
            }
            var fields = RecordFields()
            if dice.roll(0.9) { fields["name"] = .string(dice.pick(["Ann", "Bo", "Cy", "Di", "Ed"])) }
            if dice.roll(0.8) { fields["age"] = .int64(Int64(dice.below(100))) }
            if dice.roll(0.7) { fields["score"] = .double(dice.pick([0.0, 1.5, 2.0, -3.0, 7.25])) }
            if dice.roll(0.6) {
                fields["born"] = .string(dice.pick(["2001-02-03T04:05:06Z", "1969-12-31T23:59:59Z", "soon", ""]))
            }
            if dice.roll(0.8) { fields["level"] = .int64(Int64(dice.below(4))) }
            if dice.roll(0.3) { fields["friend"] = .reference(Reference(recordName: "p\(dice.below(count))")) }
            if dice.roll(0.1) { fields["_schemaVersion"] = .int64(Int64(dice.pick([1, 2, 50]))) }
            return record("p\(i)", "Person", fields)
        }
    }

    /// One or two migration files of random steps that make sense together.
    static func migrations(_ dice: inout SeededRandom) -> [String: String] {
        var files: [String: String] = [:]
        var petName = "name"
        for version in 1...(1 + dice.below(2)) {
            var steps: [String] = []
            let menu = [
                "  - addField: {type: Person, field: city\(version), fieldType: STRING, default: Lisbon}",
                "  - renameField: {type: Pet, from: \(petName), to: petName\(version)}",
                "  - changeType: {type: Person, field: age, to: STRING, into: ageText\(version)}",
                "  - changeType: {type: Person, field: score, to: INT64, into: rounded\(version), onError: null}",
                "  - changeType: {type: Person, field: born, to: TIMESTAMP, into: bornAt\(version), onError: null}",
                "  - changeType: {type: Person, field: level, to: STRING, into: levelName\(version), map: {0: low, 1: mid, 2: high}, default: none, onError: default}",
                "  - setField: {type: Person, field: note\(version), fieldType: STRING, expression: \"coalesce(name, '?') + ' ' + coalesce(age, 0)\"}",
                "  - setField: {type: Pet, field: weight, expression: \"coalesce(weight, 0) * 2\"}",
                "  - deleteRecords: {type: Person, where: \"level == 3\"}",
                "  - deleteRecords: {type: Pet, where: \"weight > 30\"}",
            ]
            for entry in menu where dice.roll(0.45) {
                steps.append(entry)
                if entry.contains("renameField") { petName = "petName\(version)" }
            }
            if version == 2 && dice.roll(0.3) {
                steps.append("  - migrateRecordType: {from: Pet, to: Animal, name: 'a-{recordName}'}")
            }
            files[String(format: "%04d_random.yaml", version)] =
                "version: \(version)\ndescription: random \(version)\nsteps:\n"
                + (steps.isEmpty ? "  []\n" : steps.joined(separator: "\n") + "\n")
        }
        return files
    }

    /// Builds records and migrations from `seed`, plans, applies and compares.
    static func check(_ seed: UInt64) throws {
        var dice = SeededRandom(state: seed)
        let records = MigrationProperties.records(&dice)
        var files = MigrationProperties.migrations(&dice)
        for (name, text) in files where text.hasSuffix("steps:\n  []\n") {
            files[name] = text.replacingOccurrences(of: "steps:\n  []\n", with: "steps: []\n")
        }
        let inPlace = dice.roll(0.5)
        let scratch = Scratch()
        let store = try scratch.store(schema: MigrationProperties.schema, records: records)
        let runner = MigrationRunner(
            store: store, set: try MigrationSet.load(directory: scratch.migrations("m", files)))
        runner.inPlace = inPlace
        // Planning writes nothing: the store's file and its log are what they were before it.
        let before = fileBytes(store.path)
        let plan = try runner.plan(diffLimit: 1000)
        #expect(fileBytes(store.path) == before, "seed \(seed): plan wrote to the store")
        #expect(plan.allSatisfy { $0.totals.failed == 0 }, "seed \(seed)")
        let applied = try runner.apply()
        #expect(plan.map(\.counts) == applied.map(\.counts), "seed \(seed): \(files)")
        // The last migration's diffs say what each changed record now holds.
        guard let last = plan.last else { return }
        for diff in last.diffs
        where !diff.lines.contains("deleted") && !diff.lines.contains(where: { $0.hasPrefix("→") }) {
            let now = try #require(try stored(store, diff.recordName), "seed \(seed): \(diff.recordName) is gone")
            for line in diff.lines where line.hasPrefix("+ ") {
                let body = line.dropFirst(2)
                let name = String(body.prefix { $0 != ":" })
                let shown = String(body.dropFirst(name.count + 2))
                #expect(now.fields[name].map(MigrationRunner.text) == shown, "seed \(seed): \(diff.recordName).\(name)")
            }
        }
        #expect(try store.integrityCheck() == ["ok"])
    }

    @Test("plan counts and diffs match what apply then does, in place or rebuilt")
    func planEqualsApply() async {
        await propertyCheck(count: 40, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            do { try MigrationProperties.check(seed) } catch { Issue.record("seed \(seed): \(error)") }
        }
    }

    @Test(
        "seeds that once found a plan repointing references to a record an earlier migration deleted",
        arguments: [9_232_483_184_532_075_947 as UInt64, 8_384_691_743_372_270_529, 6_645_199_384_534_637_772])
    func regressions(seed: UInt64) throws {
        try MigrationProperties.check(seed)
    }
}

@Suite("records given new names, many of them")
struct RenamedNamesTests {
    static let schema = """
        DEFINE SCHEMA
            RECORD TYPE Person (name STRING, friend REFERENCE, pets LIST<REFERENCE>);
            RECORD TYPE Pet (name STRING, owner REFERENCE);
        """

    /// 60 pets (each pointing at the next through `owner`, the last at a person) and 60
    /// people (each a friend of a pet and keeping two in a list), in the default zone and in a
    /// zone of their own; the second zone's pets are the first's names, so a map that mixed
    /// zones would point across them.
    static func records() -> [Record] {
        var records: [Record] = []
        let other = ZoneID(scope: .private, zoneName: "other", ownerRecordName: "_defaultOwner")
        for zone in [ZoneID.defaultZone, other] {
            for i in 0..<60 {
                var pet = record(
                    "pet-\(i)", "Pet",
                    [
                        "name": .string("pet \(i)"),
                        "owner": .reference(Reference(recordName: i == 59 ? "person-0" : "pet-\(i + 1)")),
                    ])
                pet.id = RecordID(recordName: pet.recordName, zone: zone)
                var person = record(
                    "person-\(i)", "Person",
                    [
                        "friend": .reference(Reference(recordName: "pet-\(i)")),
                        "pets": .list(
                            .reference,
                            [
                                .reference(Reference(recordName: "pet-\((i + 7) % 60)")),
                                .reference(Reference(recordName: "person-\(i)")),
                            ]),
                    ])
                person.id = RecordID(recordName: person.recordName, zone: zone)
                if zone != .defaultZone { person.fields["name"] = .string("other \(i)") }
                records += [pet, person]
            }
        }
        return records
    }

    @Test(
        "a migration that renames records gives the same store whether the old → new names are held in memory or on disk, every reference following"
    )
    func sameOnDisk() throws {
        let files = [
            "0001_animals.yaml":
                "version: 1\ndescription: pets become animals\nsteps:\n  - migrateRecordType: {from: Pet, to: Animal, name: 'a-{recordName}'}\n"
        ]
        var results: [[String: Record]] = []
        var plans: [[MigrationReport]] = []
        for held in [100_000, 0, 7] {
            let scratch = Scratch()
            let store = try scratch.store(schema: RenamedNamesTests.schema, records: RenamedNamesTests.records())
            let runner = MigrationRunner(
                store: store, set: try MigrationSet.load(directory: scratch.migrations("m", files)))
            runner.renamesHeldInMemory = held
            plans.append(try runner.plan(diffLimit: 1000))
            _ = try runner.apply()
            var all: [String: Record] = [:]
            try store.read { session in
                try session.forEach(RecordQuery()) { all["\($0.zone.zoneName)/\($0.recordName)"] = $0 }
            }
            results.append(all)
        }
        let first = try #require(results.first)
        #expect(first.count == 240)
        for zone in ["_defaultZone", "other"] {
            for i in 0..<60 {
                let person = try #require(first["\(zone)/person-\(i)"])
                #expect(person["friend"] == .reference(Reference(recordName: "a-pet-\(i)")), "\(zone)/person-\(i)")
                #expect(
                    person["pets"]
                        == .list(
                            .reference,
                            [
                                .reference(Reference(recordName: "a-pet-\((i + 7) % 60)")),
                                .reference(Reference(recordName: "person-\(i)")),
                            ]))
                let animal = try #require(first["\(zone)/a-pet-\(i)"])
                #expect(animal["owner"] == .reference(Reference(recordName: i == 59 ? "person-0" : "a-pet-\(i + 1)")))
                #expect(first["\(zone)/pet-\(i)"] == nil)
            }
        }
        for (index, other) in results.enumerated().dropFirst() {
            #expect(other == first, "run \(index) differs")
            #expect(plans[index].map(\.counts) == plans[0].map(\.counts))
            #expect(plans[index].flatMap(\.diffs).map(\.lines) == plans[0].flatMap(\.diffs).map(\.lines))
        }
    }
}
