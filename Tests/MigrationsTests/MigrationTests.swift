import Formats
import Foundation
import Records
import SQLiteStore
import StoreCore
import Testing

@testable import Migrations

@Suite("shipped migration sets")
struct ShippedSetTests {
    let notesZone = ZoneID(scope: .private, zoneName: "Notes")

    @Test(
        "each set applied to its sample gives the records and schema committed beside it; re-applying changes nothing",
        arguments: ["notes", "family-todo", "screen-time-rewards"])
    func shipped(app: String) throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(app)
        let set = try MigrationSet.load(directory: packageRoot.appendingPathComponent("migrations/\(app)").path)
        let runner = MigrationRunner(store: store, set: set)
        let plan = try runner.plan(diffLimit: 5)
        let reports = try runner.apply()
        #expect(reports.map(\.version) == set.migrations.map(\.version))
        // The plan counted exactly what apply then did.
        #expect(plan.map { $0.counts } == reports.map { $0.counts })
        let expected = try String(
            contentsOf: packageRoot.appendingPathComponent("migrations/\(app)/expected/records.jsonl"), encoding: .utf8)
        #expect(try exportText(store) == expected)
        let expectedSchema = try String(
            contentsOf: packageRoot.appendingPathComponent("migrations/\(app)/expected/schema.ckdb"), encoding: .utf8)
        #expect(SchemaPrinter.print(store.schema) == expectedSchema)
        let status = try runner.status()
        #expect(status.pending.isEmpty && status.problems.isEmpty && status.currentVersion == set.latestVersion)
        #expect(status.applied.map(\.checksum) == set.migrations.map(\.checksum))
        let before = fileBytes(store.path)
        #expect(try runner.apply().isEmpty)
        #expect(fileBytes(store.path) == before)
        #expect(try store.integrityCheck() == ["ok"])
    }

    @Test(
        "migrating in place and rebuilding the tables leave the same store",
        arguments: ["notes", "family-todo", "screen-time-rewards"])
    func inPlaceMatchesRebuild(app: String) throws {
        let scratch = Scratch()
        let set = try MigrationSet.load(directory: packageRoot.appendingPathComponent("migrations/\(app)").path)
        let fast = try scratch.sampleStore(app)
        try MigrationRunner(store: fast, set: set).apply()
        let slowPath = scratch.path("rebuilt.sqlite")
        let slow = try RecordStore(path: slowPath)
        try slow.importSchema(
            SchemaParser.parse(
                String(contentsOf: packageRoot.appendingPathComponent("samples/\(app)/schema.ckdb"), encoding: .utf8)))
        let reader = JSONRecordReader(
            input: try ByteInput(path: packageRoot.appendingPathComponent("samples/\(app)/records.jsonl").path),
            layout: .lines, codec: JSONRecordCodec(schema: slow.schema))
        _ = try RecordImporter(store: slow, options: ImportOptions()).run([reader])
        let runner = MigrationRunner(store: slow, set: set)
        runner.inPlace = false
        try runner.apply()
        #expect(try exportText(fast) == exportText(slow))
        #expect(SchemaPrinter.print(fast.schema) == SchemaPrinter.print(slow.schema))
        #expect(try fast.integrityCheck() == ["ok"] && slow.integrityCheck() == ["ok"])
    }

    @Test("notes: NoteV1 records become NoteV2 with content, a priority level, tags and _migratedFrom")
    func notesValues() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore("notes")
        let legacy = try #require(try stored(store, "legacy-000009", zone: notesZone))
        #expect(legacy.recordType == "NoteV1" && legacy["priority"] == .int64(2))
        let set = try MigrationSet.load(directory: packageRoot.appendingPathComponent("migrations/notes").path)
        try MigrationRunner(store: store, set: set).apply()
        let note = try #require(try stored(store, "legacy-000009", zone: notesZone))
        #expect(note.recordType == "NoteV2")
        #expect(note["content"] == legacy["body"] && note["body"] == nil)
        #expect(note["priorityLevel"] == .string("high") && note["priority"] == nil)
        #expect(note["tags"] == .list(.string, []))
        #expect(note["_migratedFrom"] == .string("legacy-000009"))
        #expect(note["_schemaVersion"] == .int64(3))
        #expect(
            note["folder"] == legacy["folder"] && note["title"] == legacy["title"] && note.created == legacy.created)
        #expect(try store.read { try $0.count(RecordQuery(recordTypes: ["NoteV1"])) } == 0)
        // Notes written by app 2 (already version 2) are not touched.
        let modern = try everything(store).filter { $0.recordType == "Note" }
        #expect(modern.count == 38 && modern.allSatisfy { $0["_schemaVersion"] == .int64(2) })
    }
}

@Suite("migration steps")
struct StepTests {
    static let schema = """
        DEFINE SCHEMA
            RECORD TYPE Person (name STRING, age INT64, score DOUBLE, born STRING, nickname STRING, level INT64, "_schemaVersion" INT64);
            RECORD TYPE Pet (name STRING, owner REFERENCE, friends LIST<REFERENCE>);
            RECORD TYPE Old (title STRING, body STRING, rank INT64);
        """

    static func records() -> [Record] {
        [
            record(
                "p1", "Person",
                [
                    "name": .string("Ann"), "age": .int64(41), "score": .double(3.0),
                    "born": .string("1984-05-06T07:08:09Z"), "level": .int64(0),
                ]),
            record(
                "p2", "Person",
                [
                    "name": .string("Bo"), "age": .int64(9), "score": .double(2.5), "born": .string("not a date"),
                    "nickname": .string("B"), "level": .int64(2),
                ]),
            record("p3", "Person", ["name": .string("Cy"), "_schemaVersion": .int64(99), "level": .int64(1)]),
            record("o1", "Old", ["title": .string("first"), "body": .string("text one"), "rank": .int64(1)]),
            record("o2", "Old", ["title": .string("second"), "rank": .int64(2)]),
            record(
                "pet1", "Pet",
                [
                    "name": .string("Rex"), "owner": .reference(Reference(recordName: "o1")),
                    "friends": .list(
                        .reference, [.reference(Reference(recordName: "o2")), .reference(Reference(recordName: "p1"))]),
                ]),
        ]
    }

    @Test("every declarative step kind, from YAML files, with the values they leave")
    func everyStep() throws {
        let scratch = Scratch()
        let store = try scratch.store(schema: StepTests.schema, records: StepTests.records())
        let directory = scratch.migrations(
            "people",
            [
                "0001_fields.yaml": """
                version: 1
                description: fields
                steps:
                  - addField: {type: Person, field: city, fieldType: STRING, default: Lisbon}
                  - renameField: {type: Person, from: nickname, to: alias}
                  - changeType: {type: Person, field: age, to: STRING}
                  - changeType: {type: Person, field: score, to: INT64, onError: null}
                  - changeType: {type: Person, field: born, to: TIMESTAMP, into: bornAt, onError: null}
                  - changeType: {type: Person, field: level, to: STRING, into: levelName, map: {0: low, 1: mid, 2: high}}
                  - removeField: {type: Old, field: body, purge: true}
                """,
                "0002_values.yaml": """
                version: 2
                description: values
                steps:
                  - setField: {type: Person, field: greeting, fieldType: STRING, expression: "'Hi ' + name + coalesce(alias, '')"}
                  - setField: {type: Person, field: _appVersion, value: "3.0"}
                  - setField: {type: Person, field: city, value: Porto, where: "name == 'Bo'"}
                  - deleteRecords: {type: Old, where: "rank == 2"}
                  - migrateRecordType: {from: Old, to: New, fields: {title: heading}, name: "new-{recordName}"}
                """,
            ])
        let set = try MigrationSet.load(directory: directory)
        let runner = MigrationRunner(store: store, set: set)
        let plan = try runner.plan(diffLimit: 50)
        let reports = try runner.apply()
        #expect(plan.map(\.counts) == reports.map(\.counts))

        let ann = try #require(try stored(store, "p1"))
        #expect(ann["city"] == .string("Lisbon"))
        #expect(ann["age"] == .string("41"))
        #expect(ann["score"] == .int64(3))
        #expect(ann["bornAt"] == .timestamp(452_675_289_000) && ann["born"] == .string("1984-05-06T07:08:09Z"))
        #expect(ann["levelName"] == .string("low") && ann["level"] == .int64(0))
        #expect(ann["greeting"] == .string("Hi Ann"))
        #expect(ann["_appVersion"] == .string("3.0") && ann["_schemaVersion"] == .int64(2))
        let bo = try #require(try stored(store, "p2"))
        #expect(bo["alias"] == .string("B") && bo["nickname"] == nil)
        #expect(bo["score"] == nil, "2.5 is not whole: onError null clears it")
        #expect(bo["bornAt"] == nil)
        #expect(bo["greeting"] == .string("Hi BoB"))
        #expect(bo["city"] == .string("Porto"))
        // A record from the future is left exactly as it was, and reported.
        let cy = try #require(try stored(store, "p3"))
        #expect(cy == StepTests.records()[2])
        #expect(reports[0].counts["Person"]?.future == 1 && reports[0].futureExamples == ["p3"])
        // o2 was deleted; o1 moved to New under a new name, and the pet's references followed it.
        #expect(try stored(store, "o1") == nil && stored(store, "o2") == nil)
        let moved = try #require(try stored(store, "new-o1"))
        #expect(
            moved.recordType == "New" && moved["heading"] == .string("first") && moved["body"] == nil
                && moved["_migratedFrom"] == .string("o1"))
        let pet = try #require(try stored(store, "pet1"))
        #expect(pet["owner"] == .reference(Reference(recordName: "new-o1")))
        #expect(
            pet["friends"]
                == .list(
                    .reference, [.reference(Reference(recordName: "o2")), .reference(Reference(recordName: "p1"))]))
        // The schema moved with the steps.
        let person = try #require(store.schema.recordType(named: "Person"))
        #expect(
            person.field(named: "age")?.type == .string && person.field(named: "alias") != nil
                && person.field(named: "nickname") == nil)
        #expect(store.schema.recordType(named: "Old")?.field(named: "body") == nil)
        #expect(store.schema.recordType(named: "New")?.field(named: "heading")?.type == .string)
        // Tombstones and change sequence numbers: an export since the start sees the changes.
        let changes = try store.read { session in
            var names: [String] = []
            try session.forEachChange(since: ChangeToken(storeID: session.storeID, sequence: 0)) {
                names.append($0.recordName + ($0.isDeleted ? " (deleted)" : ""))
            }
            return names
        }
        #expect(Set(changes).isSuperset(of: ["o1 (deleted)", "o2 (deleted)", "new-o1", "pet1", "p1", "p2"]))
        #expect(try store.integrityCheck() == ["ok"])
    }

    @Test("a migration that only adds, renames, sets and deletes gives the same store in place as rebuilt")
    func inPlace() throws {
        let yaml = """
            version: 1
            description: in place
            steps:
              - renameField: {type: Person, from: nickname, to: alias}
              - renameField: {type: Pet, from: owner, to: keeper}
              - addField: {type: Person, field: city, fieldType: STRING QUERYABLE, default: Lisbon}
              - changeType: {type: Person, field: level, to: STRING, into: levelName, map: {0: low, 1: mid, 2: high}}
              - setField: {type: Person, field: score, expression: "coalesce(score, 0) + 1"}
              - setField: {type: Pet, field: name, expression: "name + '!'"}
              - deleteRecords: {type: Person, where: "name == 'Bo'"}
            """
        var exports: [String] = []
        for inPlace in [true, false] {
            let scratch = Scratch()
            let store = try scratch.store(schema: StepTests.schema, records: StepTests.records())
            let runner = MigrationRunner(
                store: store,
                set: try MigrationSet.load(directory: scratch.migrations("i", ["0001_in_place.yaml": yaml])))
            runner.inPlace = inPlace
            let report = try #require(try runner.apply().first)
            #expect(report.counts["Person"]?.changed == 2 && report.counts["Person"]?.future == 1)
            #expect(try stored(store, "pet1")?["keeper"] == .reference(Reference(recordName: "o1")))
            #expect(try stored(store, "p2") == nil && stored(store, "p1")?["city"] == .string("Lisbon"))
            // The store keeps working: a query on the renamed reference and the new indexed field.
            let found = try store.read {
                try $0.count(
                    RecordQuery(recordTypes: ["Person"], predicate: try RecordPredicate.parse("city == 'Lisbon'")))
            }
            #expect(found == 1)
            #expect(try store.integrityCheck() == ["ok"])
            let reopened = try RecordStore(path: store.path)
            exports.append(try exportText(reopened) + SchemaPrinter.print(reopened.schema))
        }
        #expect(exports[0] == exports[1])
    }

    /// Renames next to other steps on the same field: each migration, in place where the store
    /// can and rebuilt, leaves the values listed (record, field, value; nil: no value).
    static let renameCases: [(steps: String, expected: [(String, String, FieldValue?)])] = [
        // A value set before its field is renamed is written under the new name.
        (
            """
            - setField: {type: Person, field: nickname, value: N}
            - renameField: {type: Person, from: nickname, to: alias}
            """, [("p1", "alias", .string("N")), ("p2", "alias", .string("N")), ("p1", "nickname", nil)]
        ),
        // A field made by this migration, then renamed.
        (
            """
            - changeType: {type: Person, field: level, to: STRING, into: levelName, map: {0: low, 1: mid, 2: high}}
            - renameField: {type: Person, from: levelName, to: rank}
            """, [("p1", "rank", .string("low")), ("p2", "rank", .string("high")), ("p1", "levelName", nil)]
        ),
        // A name a rename frees, taken by a new field.
        (
            """
            - renameField: {type: Person, from: nickname, to: alias}
            - addField: {type: Person, field: nickname, fieldType: STRING, default: fresh}
            """,
            [
                ("p2", "alias", .string("B")), ("p2", "nickname", .string("fresh")),
                ("p1", "nickname", .string("fresh")), ("p1", "alias", nil),
            ]
        ),
        // Two fields that swap names.
        (
            """
            - renameField: {type: Person, from: name, to: spare}
            - renameField: {type: Person, from: nickname, to: name}
            - renameField: {type: Person, from: spare, to: nickname}
            """,
            [
                ("p2", "name", .string("B")), ("p2", "nickname", .string("Bo")), ("p1", "nickname", .string("Ann")),
                ("p1", "name", nil),
            ]
        ),
    ]

    @Test(
        "renames beside other steps on the same field leave every value, in place and rebuilt alike",
        arguments: renameCases.indices)
    func renamesBesideSteps(_ index: Int) throws {
        let (steps, expected) = StepTests.renameCases[index]
        let yaml =
            "version: 1\ndescription: renames\nsteps:\n"
            + steps.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n") + "\n"
        var exports: [String] = []
        for inPlace in [true, false] {
            let scratch = Scratch()
            let store = try scratch.store(schema: StepTests.schema, records: StepTests.records())
            let runner = MigrationRunner(
                store: store,
                set: try MigrationSet.load(directory: scratch.migrations("r", ["0001_renames.yaml": yaml])))
            runner.inPlace = inPlace
            try runner.apply()
            for (name, field, value) in expected {
                #expect(try stored(store, name)?.fields[field] == value, "in place: \(inPlace), \(name).\(field)")
            }
            #expect(try store.integrityCheck() == ["ok"])
            let reopened = try RecordStore(path: store.path)
            exports.append(try exportText(reopened) + SchemaPrinter.print(reopened.schema))
        }
        #expect(exports[0] == exports[1])
    }

    @Test(
        "a migration says which fields its steps read, under every name a rename gives them; one that moves whole records says none"
    )
    func readSets() throws {
        let scratch = Scratch()
        let directory = scratch.migrations(
            "reads",
            [
                "0001_reads.yaml": """
                version: 1
                description: reads
                steps:
                  - renameField: {type: Person, from: nickname, to: alias}
                  - renameField: {type: Person, from: alias, to: handle}
                  - setField: {type: Person, field: label, fieldType: STRING, expression: "coalesce(handle, name)", where: "age > 3"}
                  - changeType: {type: Person, field: level, to: STRING, into: levelName, map: {0: low}, default: other}
                  - deleteRecords: {type: Old, where: "rank == 2"}
                """,
                "0002_move.yaml":
                    "version: 2\ndescription: move\nsteps:\n  - migrateRecordType: {from: Old, to: New}\n",
            ])
        let set = try MigrationSet.load(directory: directory)
        let first = try CompiledMigration(
            set.migrations[0], schema: SchemaParser.parse(StepTests.schema), latestVersion: 2)
        #expect(
            first.reads == [
                "Person": [
                    "nickname", "alias", "handle", "label", "name", "age", "level", "levelName", "_schemaVersion",
                ],
                "Old": ["rank", "_schemaVersion"],
            ])
        let second = try CompiledMigration(set.migrations[1], schema: first.schemaAfter, latestVersion: 2)
        #expect(second.reads == nil)
    }

    @Test("steps that undo each other leave the record unchanged: not counted, not written, no new version")
    func undone() throws {
        let scratch = Scratch()
        let store = try scratch.store(schema: StepTests.schema, records: StepTests.records())
        let directory = scratch.migrations(
            "u",
            [
                "0001_undo.yaml": """
                version: 1
                description: undo
                steps:
                  - renameField: {type: Old, from: body, to: content}
                  - renameField: {type: Old, from: content, to: body}
                  - setField: {type: Person, field: name, value: Someone}
                  - setField: {type: Person, field: name, value: Ann, where: "level == 0"}
                """
            ])
        let runner = MigrationRunner(store: store, set: try MigrationSet.load(directory: directory))
        let plan = try #require(try runner.plan(diffLimit: 10).first)
        // o1's body went and came back; p1's name was set and set back: both as they were.
        // p2 keeps "Someone"; p3 (version 99) is left alone.
        #expect(plan.counts["Old"]?.changed == 0 && plan.counts["Old"]?.unchanged == 2)
        #expect(
            plan.counts["Person"]?.changed == 1 && plan.counts["Person"]?.unchanged == 1
                && plan.counts["Person"]?.future == 1)
        #expect(plan.diffs.map(\.recordName) == ["p2"])
        let before = try everything(store)
        let applied = try #require(try runner.apply().first)
        #expect(applied.counts == plan.counts)
        let after = try everything(store)
        for record in before where record.recordName != "p2" {
            #expect(after.first { $0.recordName == record.recordName }?.fields == record.fields, "\(record.recordName)")
        }
        #expect(after.first { $0.recordName == "p2" }?["name"] == .string("Someone"))
        #expect(after.first { $0.recordName == "p2" }?["_schemaVersion"] == .int64(1))
    }

    @Test("a where that reads a record's parent or share asks for whole records")
    func linkReads() throws {
        let scratch = Scratch()
        let directory = scratch.migrations(
            "links",
            [
                "0001_links.yaml": """
                version: 1
                description: links
                steps:
                  - deleteRecords: {type: Old, where: "___parent == 'o9'"}
                """
            ])
        let set = try MigrationSet.load(directory: directory)
        let compiled = try CompiledMigration(
            set.migrations[0], schema: SchemaParser.parse(StepTests.schema), latestVersion: 1)
        #expect(compiled.reads == nil)
        #expect(compiled.canRunInPlace)
    }

    @Test("a diff shows each field before and after")
    func diffs() throws {
        let scratch = Scratch()
        let store = try scratch.store(schema: StepTests.schema, records: StepTests.records())
        let directory = scratch.migrations(
            "d",
            [
                "0001_rename.yaml":
                    "version: 1\ndescription: r\nsteps:\n  - renameField: {type: Old, from: body, to: content}\n"
            ])
        let report = try #require(
            try MigrationRunner(store: store, set: MigrationSet.load(directory: directory)).plan().first)
        #expect(
            report.counts["Old"]
                == {
                    var c = MigrationCounts()
                    c.scanned = 2
                    c.changed = 1
                    c.unchanged = 1
                    return c
                }(), "o2 has no body to rename")
        let first = try #require(report.diffs.first)
        #expect(first.recordName == "o1")
        #expect(first.lines == ["+ _schemaVersion: 1", "- body: \"text one\"", "+ content: \"text one\""])
    }

    @Test("changeType onError fail stops the migration with the record, field and step named")
    func conversionFailure() throws {
        let scratch = Scratch()
        let store = try scratch.store(schema: StepTests.schema, records: StepTests.records())
        let directory = scratch.migrations(
            "f",
            [
                "0001_born.yaml":
                    "version: 1\ndescription: b\nsteps:\n  - changeType: {type: Person, field: born, to: TIMESTAMP}\n"
            ])
        let runner = MigrationRunner(store: store, set: try MigrationSet.load(directory: directory))
        let plan = try #require(try runner.plan().first)
        #expect(plan.counts["Person"]?.failed == 1)
        #expect(
            plan.failures.first?.description
                == "record 'p2' (Person), field 'born': \"not a date\" is not an ISO 8601 time [0001_born.yaml:4 (changeType)]"
        )
        let before = fileBytes(store.path)
        #expect(throws: RecordFailure.self) { try runner.apply() }
        #expect(fileBytes(store.path) == before)
    }

    @Test("removeField without purge refuses to drop values")
    func removeWithoutPurge() throws {
        let scratch = Scratch()
        let store = try scratch.store(schema: StepTests.schema, records: StepTests.records())
        let directory = scratch.migrations(
            "r", ["0001_drop.yaml": "version: 1\ndescription: d\nsteps:\n  - removeField: {type: Old, field: body}\n"])
        let error = try #require(throws: RecordFailure.self) {
            try MigrationRunner(store: store, set: MigrationSet.load(directory: directory)).apply()
        }
        #expect(error.message.description.contains("purge: true"))
        #expect(try stored(store, "o1")?["body"] == .string("text one"))
    }

    @Test("a custom step registered through the library")
    func customStep() throws {
        let scratch = Scratch()
        let store = try scratch.store(schema: StepTests.schema, records: StepTests.records())
        let shout = CustomStep(name: "shout", recordTypes: ["Person"]) { record in
            var record = record
            if case .string(let name)? = record["name"] { record["name"] = .string(name.uppercased()) }
            return record.recordName == "p2" ? nil : record
        }
        let directory = scratch.migrations(
            "c", ["0001_custom.yaml": "version: 1\ndescription: c\nsteps:\n  - custom: {name: shout}\n"])
        #expect(throws: MigrationError.self) { try MigrationSet.load(directory: directory) }
        try MigrationRunner(store: store, set: MigrationSet.load(directory: directory, customSteps: [shout])).apply()
        #expect(try stored(store, "p1")?["name"] == .string("ANN"))
        #expect(try stored(store, "p2") == nil)
    }

    @Test("keepSource keeps the old record beside the new one")
    func keepSource() throws {
        let scratch = Scratch()
        let store = try scratch.store(schema: StepTests.schema, records: StepTests.records())
        let directory = scratch.migrations(
            "k",
            [
                "0001_copy.yaml":
                    "version: 1\ndescription: k\nsteps:\n  - migrateRecordType: {from: Old, to: New, name: 'v2-{recordName}', keepSource: true}\n"
            ])
        try MigrationRunner(store: store, set: MigrationSet.load(directory: directory)).apply()
        #expect(try stored(store, "o1")?.recordType == "Old")
        #expect(try stored(store, "v2-o1")?["body"] == .string("text one"))
        #expect(try stored(store, "pet1")?["owner"] == .reference(Reference(recordName: "v2-o1")))
    }

    @Test(
        "records that move to new names take their children along: parent links follow them, in types without a reference too; other links stay"
    )
    func parentsFollow() throws {
        let scratch = Scratch()
        var records = StepTests.records()
        records[0].parent = "o1"  // a Person under an Old record
        records[1].parent = "p1"  // a Person under a Person that stays
        records[3].share = "share-1"  // o1 roots a share
        let store = try scratch.store(schema: StepTests.schema, records: records)
        let directory = scratch.migrations(
            "m",
            [
                "0001_move.yaml":
                    "version: 1\ndescription: m\nsteps:\n  - migrateRecordType: {from: Old, to: New, name: 'v2-{recordName}'}\n"
            ])
        let set = try MigrationSet.load(directory: directory)
        let plan = try MigrationRunner(store: store, set: set).plan()
        #expect(plan[0].counts["Person"]?.changed == 1, "\(plan[0].counts)")
        try MigrationRunner(store: store, set: set).apply()
        #expect(try stored(store, "p1")?.parent == "v2-o1")
        #expect(try stored(store, "p2")?.parent == "p1")
        let moved = try #require(try stored(store, "v2-o1"))
        #expect(moved.recordType == "New" && moved.share == "share-1")
        #expect(try stored(store, "o1") == nil)
    }
}

@Suite("migration history and safety")
struct HistoryTests {
    static let v1 =
        "version: 1\ndescription: one\nsteps:\n  - addField: {type: Person, field: city, fieldType: STRING, default: Lisbon}\n"
    static let v2 = "version: 2\ndescription: two\nsteps:\n  - setField: {type: Person, field: city, value: Porto}\n"

    @Test("plan writes nothing: the store file is byte for byte the same")
    func planWritesNothing() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore("notes")
        let before = fileBytes(store.path)
        let reports = try MigrationRunner(
            store: store, set: MigrationSet.load(directory: packageRoot.appendingPathComponent("migrations/notes").path)
        ).plan()
        #expect(reports.count == 3 && reports[1].totals.changed == 18)
        #expect(fileBytes(store.path) == before)
        #expect(!FileManager.default.fileExists(atPath: store.path + "-journal"))
    }

    @Test("an applied file edited afterwards is refused; --repair accepts it")
    func editedFile() throws {
        let scratch = Scratch()
        let store = try scratch.store(schema: StepTests.schema, records: StepTests.records())
        var directory = scratch.migrations("h", ["0001_city.yaml": HistoryTests.v1])
        try MigrationRunner(store: store, set: MigrationSet.load(directory: directory)).apply()
        directory = scratch.migrations(
            "h", ["0001_city.yaml": HistoryTests.v1 + "# edited\n", "0002_porto.yaml": HistoryTests.v2])
        let runner = MigrationRunner(store: store, set: try MigrationSet.load(directory: directory))
        let status = try runner.status()
        #expect(
            status.problems.count == 1
                && status.problems[0].description.contains("0001_city.yaml was edited after it was applied"))
        #expect(status.problems[0].description.contains("or repair the history to accept the edit on purpose"))
        #expect(throws: MigrationError.self) { try runner.apply() }
        #expect(try stored(store, "p1")?["city"] == .string("Lisbon"))
        runner.repair = true
        try runner.apply()
        #expect(try stored(store, "p1")?["city"] == .string("Porto"))
        runner.repair = false
        #expect(try runner.status().problems.isEmpty)
        #expect(try runner.status().applied.map(\.version) == [1, 2])
    }

    @Test("a gap in the versions, a file numbered unlike its version, and an applied file gone are refused")
    func gaps() throws {
        let scratch = Scratch()
        let gap = scratch.migrations(
            "g",
            [
                "0001_city.yaml": HistoryTests.v1,
                "0003_later.yaml": HistoryTests.v2.replacingOccurrences(of: "version: 2", with: "version: 3"),
            ])
        let error = try #require(throws: MigrationError.self) { try MigrationSet.load(directory: gap) }
        #expect(error.description.contains("follows version 1: 0002 is missing"))
        let misnamed = scratch.migrations(
            "m",
            [
                "0001_city.yaml": HistoryTests.v1,
                "0002_porto.yaml": HistoryTests.v2.replacingOccurrences(of: "version: 2", with: "version: 7"),
            ])
        #expect(throws: MigrationError.self) { try MigrationSet.load(directory: misnamed) }

        let store = try scratch.store(schema: StepTests.schema, records: StepTests.records())
        try MigrationRunner(
            store: store,
            set: MigrationSet.load(
                directory: scratch.migrations(
                    "a", ["0001_city.yaml": HistoryTests.v1, "0002_porto.yaml": HistoryTests.v2]))
        ).apply()
        let shorter = MigrationRunner(
            store: store,
            set: try MigrationSet.load(directory: scratch.migrations("a", ["0001_city.yaml": HistoryTests.v1])))
        let status = try shorter.status()
        #expect(status.problems.first?.description.contains("migration 2 (0002_porto.yaml) was applied") == true)
        #expect(throws: MigrationError.self) { try shorter.plan() }
    }

    @Test("--to stops at a version; a version below the store's is refused")
    func target() throws {
        let scratch = Scratch()
        let store = try scratch.store(schema: StepTests.schema, records: StepTests.records())
        let runner = MigrationRunner(
            store: store,
            set: try MigrationSet.load(
                directory: scratch.migrations(
                    "t", ["0001_city.yaml": HistoryTests.v1, "0002_porto.yaml": HistoryTests.v2])))
        #expect(try runner.apply(to: 1).map(\.version) == [1])
        #expect(try stored(store, "p1")?["city"] == .string("Lisbon"))
        #expect(throws: MigrationError.self) { try runner.apply(to: 0) }
        #expect(try runner.apply().map(\.version) == [2])
    }

    @Test("append-only types: a step that changes their records is refused unless forced")
    func appendOnly() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore("screen-time-rewards")
        let directory = scratch.migrations(
            "s",
            [
                "set.yaml": "appendOnly: [PointsLedgerEntry, AuditEntry]\n",
                "0001_points.yaml":
                    "version: 1\ndescription: double the points\nsteps:\n  - setField: {type: PointsLedgerEntry, field: amount, expression: amount * 2}\n",
            ])
        let runner = MigrationRunner(store: store, set: try MigrationSet.load(directory: directory))
        let plan = try #require(try runner.plan().first)
        let entries = try store.read { try $0.count(RecordQuery(recordTypes: ["PointsLedgerEntry"])) }
        #expect(entries > 0 && plan.counts["PointsLedgerEntry"]?.failed == entries)
        #expect(plan.failures.first?.message.description.contains("append-only") == true)
        let before = fileBytes(store.path)
        #expect(throws: RecordFailure.self) { try runner.apply() }
        #expect(fileBytes(store.path) == before)
        runner.force = true
        #expect(try runner.apply().first?.totals.changed == entries)
    }

    @Test("a step that fails on the 25,000th of 50,000 records leaves the store exactly as it was")
    func atomicFailure() throws {
        let scratch = Scratch()
        let records = (0..<50_000).map { i in
            record(
                String(format: "p%06d", i), "Person",
                ["name": .string("n\(i)"), "born": .string(i == 25_000 ? "garbage" : "2001-01-01T00:00:00Z")])
        }
        let store = try scratch.store(schema: StepTests.schema, records: records)
        let directory = scratch.migrations(
            "x",
            [
                "0001_many.yaml": """
                version: 1
                description: several steps, the last of which meets a bad value halfway
                steps:
                  - renameField: {type: Person, from: name, to: alias}
                  - setField: {type: Person, field: greeting, fieldType: STRING, expression: "'hi ' + alias"}
                  - changeType: {type: Person, field: born, to: TIMESTAMP}
                """
            ])
        let before = fileBytes(store.path)
        let error = try #require(throws: RecordFailure.self) {
            try MigrationRunner(store: store, set: MigrationSet.load(directory: directory)).apply()
        }
        #expect(error.recordName == "p025000" && error.field == "born")
        #expect(fileBytes(store.path) == before)
        #expect(try store.read { try $0.migrationHistory() }.isEmpty)
        let reopened = try RecordStore(path: store.path)
        #expect(
            reopened.schema.isEquivalent(to: store.schema)
                && reopened.schema.recordType(named: "Person")?.field(named: "name") != nil)
        #expect(try stored(reopened, "p000001")?["name"] == .string("n1"))
    }
}

@Suite("lint and schema diff")
struct LintTests {
    @Test("lint names each step production would refuse, with the safe alternative")
    func lint() throws {
        let scratch = Scratch()
        let directory = scratch.migrations(
            "l",
            [
                "0001_unsafe.yaml": """
                version: 1
                description: unsafe
                steps:
                  - renameField: {type: Person, from: nickname, to: alias}
                  - changeType: {type: Person, field: age, to: STRING}
                  - removeField: {type: Old, field: body, purge: true}
                  - changeType: {type: Person, field: level, to: STRING, into: levelName}
                  - addField: {type: Person, field: city, fieldType: STRING}
                """
            ])
        let findings = MigrationLint.lint(try MigrationSet.load(directory: directory))
        #expect(findings.map(\.step) == ["renameField", "changeType", "removeField"])
        #expect(findings.map(\.line) == [4, 5, 6])
        #expect(findings[0].alternative.contains("addField alias"))
        #expect(findings[1].alternative.contains("into:"))
        #expect(findings[2].problem.contains("never removes a field"))
        let notes = MigrationLint.lint(
            try MigrationSet.load(directory: packageRoot.appendingPathComponent("migrations/notes").path))
        #expect(notes.map(\.step) == ["renameField", "migrateRecordType"])
        let todo = MigrationLint.lint(
            try MigrationSet.load(directory: packageRoot.appendingPathComponent("migrations/family-todo").path))
        #expect(todo.isEmpty)
    }

    @Test("schema diff marks what production accepts")
    func schemaDiff() throws {
        let old = try SchemaParser.parse(
            "DEFINE SCHEMA RECORD TYPE A (x STRING, y INT64, z STRING QUERYABLE, GRANT READ TO \"_world\"); RECORD TYPE Gone (q STRING);"
        )
        let new = try SchemaParser.parse(
            "DEFINE SCHEMA RECORD TYPE A (x STRING SORTABLE, y STRING, w DOUBLE, GRANT READ, WRITE TO \"_world\"); RECORD TYPE B (b INT64);"
        )
        let differences = SchemaDiff.differences(from: old, to: new)
        func mark(_ prefix: String) -> Bool? { differences.first { $0.change.hasPrefix(prefix) }?.deployable }
        #expect(mark("+ record type B") == true)
        #expect(mark("- record type Gone") == false)
        #expect(mark("+ A.w DOUBLE") == true)
        #expect(mark("- A.z STRING QUERYABLE") == false)
        #expect(mark("~ A.y INT64 → STRING") == false)
        #expect(mark("+ A.x index SORTABLE") == true)
        #expect(mark("+ A GRANT READ, WRITE TO \"_world\"") == true)
        #expect(differences.count == 8)
        #expect(SchemaDiff.differences(from: old, to: old).isEmpty)
    }
}

@Suite("expressions")
struct ExpressionTests {
    let note = record(
        "n", "T",
        [
            "start": .timestamp(1_000), "seconds": .double(1.5), "count": .int64(7), "name": .string("Ann"),
            "other": .location(Location(latitude: 1, longitude: 2)),
        ])

    @Test("arithmetic on numbers and times, text joining, coalesce, null")
    func evaluate() throws {
        func value(_ text: String) throws -> ExpressionValue { try Expression.parse(text).evaluate(note) }
        #expect(try value("start + seconds * 1000") == .timestamp(2_500))
        #expect(try value("count * 2 + 1") == .int(15))
        #expect(try value("count / 2") == .int(3))
        #expect(try value("count % 4") == .int(3))
        #expect(try value("-(count - 10)") == .int(3))
        #expect(try value("count / 2.0") == .double(3.5))
        #expect(try value("start - start") == .int(0))
        #expect(try value("'Dear ' + name + ', ' + count") == .string("Dear Ann, 7"))
        #expect(try value("'it''s'") == .string("it's"))
        #expect(try value("missing + 1") == .null)
        #expect(try value("coalesce(missing, name)") == .string("Ann"))
        #expect(try value("coalesce(missing, null)") == .null)
        #expect(try value("start + seconds * 1000").fieldValue(as: .timestamp) == .timestamp(2_500))
        #expect(try value("count").fieldValue(as: .double) == .double(7))
    }

    @Test("errors name the column or the problem")
    func errors() throws {
        #expect(throws: ExpressionError.self) { try Expression.parse("count +") }
        #expect((try? Expression.parse("count + )")) == nil)
        do {
            _ = try Expression.parse("count 2")
            Issue.record("parsed")
        } catch { #expect(error.column == 7) }
        do {
            _ = try Expression.parse("upper(name)")
            Issue.record("parsed")
        } catch { #expect(error.message.description.contains("unknown function 'upper'")) }
        #expect(throws: ExpressionError.self) { try Expression.parse("name * 2").evaluate(note) }
        #expect(throws: ExpressionError.self) { try Expression.parse("other + 1").evaluate(note) }
        #expect(throws: ExpressionError.self) { try Expression.parse("count / 0").evaluate(note) }
        #expect(throws: ExpressionError.self) { try Expression.parse("9223372036854775807 + count").evaluate(note) }
        #expect(throws: ExpressionError.self) { try ExpressionValue.double(2.5).fieldValue(as: .int64) }
        // Bounded: deep nesting and endless chains are refused (reading, evaluating and printing
        // the tree recurse), at the limit they are read and evaluated.
        let deep = String(repeating: "(", count: 100_000) + "1" + String(repeating: ")", count: 100_000)
        do {
            _ = try Expression.parse(deep)
            Issue.record("parsed")
        } catch {
            #expect(error.message.description.contains("nests deeper than 64 levels") && error.column == 65, "\(error)")
        }
        do {
            _ = try Expression.parse(String(repeating: "-", count: 100_000) + "1")
            Issue.record("parsed")
        } catch { #expect(error.message.description.contains("nests deeper than 64")) }
        do {
            _ = try Expression.parse("coalesce(" + String(repeating: "coalesce(", count: 100_000) + "1")
            Issue.record("parsed")
        } catch { #expect(error.message.description.contains("nests deeper than 64")) }
        let chain = (0..<100_000).map { _ in "1" }.joined(separator: " + ")
        do {
            _ = try Expression.parse(chain)
            Issue.record("parsed")
        } catch { #expect(error.message.description.contains("more than 1000 operators")) }
        let nested = String(repeating: "(", count: 64) + "1" + String(repeating: ")", count: 64)
        #expect(try Expression.parse(nested).evaluate(note) == .int(1))
        let longest = (0...1000).map { _ in "1" }.joined(separator: " + ")
        #expect(try Expression.parse(longest).evaluate(note) == .int(1001))
    }

    @Test("migration files with mistakes are refused with the file and line")
    func badFiles() throws {
        let scratch = Scratch()
        func load(_ text: String) -> String {
            do {
                _ = try MigrationSet.load(directory: scratch.migrations("b", ["0001_x.yaml": text]))
                return "loaded"
            } catch { return "\(error)" }
        }
        #expect(
            load("version: 1\nsteps:\n  - renameFeld: {type: A, from: b, to: c}\n").hasSuffix(
                "0001_x.yaml:3: unknown step 'renameFeld' (steps: addField, renameField, changeType, removeField, migrateRecordType, setField, deleteRecords, custom)"
            ))
        #expect(
            load("version: 1\nsteps:\n  - addField: {type: A, field: b, fieldType: STRNG}\n").contains(
                "0001_x.yaml:3: 'STRNG' is not a field type"))
        #expect(
            load("version: 1\nsteps:\n  - setField: {type: A, field: b, expression: 'a +'}\n").contains(
                "0001_x.yaml:3: expression:"))
        #expect(load("version: one\n").contains("needs version"))
        #expect(
            load("version: 1\nsteps:\n  - renameField: {type: A, from: b, into: c}\n").contains(
                "renameField has no setting 'into'"))
        #expect(
            load("version: 1\nsteps:\n  - changeType: {type: A, field: b, to: STRING, onError: default}\n").contains(
                "onError: default needs a default"))
    }
}
