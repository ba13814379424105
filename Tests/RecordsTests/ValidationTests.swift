import Testing

@testable import Records

@Suite("Record validation")
struct ValidationTests {
    let schema = try! SchemaParser.parse(
        """
        DEFINE SCHEMA
            RECORD TYPE Task (title STRING, due TIMESTAMP, tags LIST<STRING>, n NUMBER, blob BYTES);
        """)

    func record(_ fields: RecordFields = [:], name: String = "task-1", type: String = "Task") -> Record {
        Record(id: RecordID(recordName: name), recordType: type, fields: fields)
    }

    @Test("a good record has no issues")
    func good() {
        let validator = RecordValidator(schema: schema)
        #expect(
            validator.issues(
                in: record(["title": .string("x"), "due": .timestamp(0), "tags": .list(.string, []), "n": .double(1.5)])
            ).isEmpty)
        #expect(validator.issues(in: record(["n": .int64(3)])).isEmpty)
    }

    @Test("names, types, unknown fields and the size limit")
    func problems() {
        let validator = RecordValidator(schema: schema)
        #expect(
            validator.issues(in: record(name: "_hidden")).first?.message.description.contains("cannot start with '_'")
                == true)
        #expect(validator.issues(in: record(name: "")).first?.message.description.contains("cannot be empty") == true)
        #expect(validator.issues(in: record(name: "naïve")).first?.message.description.contains("ASCII") == true)
        #expect(
            validator.issues(in: record(name: String(repeating: "a", count: 256))).first?.message.description.contains(
                "at most 255") == true)
        #expect(
            validator.issues(in: record(type: "Note")).first?.message.description.contains("unknown record type 'Note'")
                == true)
        let mismatch = validator.issues(in: record(["due": .string("tomorrow")]))
        #expect(mismatch == [ValidationIssue(field: "due", message: "expected TIMESTAMP, found a STRING value")])
        // A list typed NUMBER is refused without naming the field's own type as what was found.
        let numbers = try! SchemaParser.parse("DEFINE SCHEMA RECORD TYPE Task (scores LIST<NUMBER>);")
        let listed = RecordValidator(schema: numbers).issues(in: record(["scores": .list(.number, [.int64(1)])]))
        #expect(
            listed == [
                ValidationIssue(
                    field: "scores",
                    message:
                        "expected LIST<NUMBER>, found a list whose elements are typed NUMBER (a value's numbers are INT64 or DOUBLE)"
                )
            ])
        #expect(RecordValidator(schema: numbers).issues(in: record(["scores": .list(.double, [.double(1.5)])])).isEmpty)
        let unknown = validator.issues(in: record(["colour": .string("red")]))
        #expect(unknown.first?.field == "colour")
        #expect(unknown.first?.message.description.contains("(allow new fields to add it to the schema)") == true)
        #expect(validator.issues(in: record(["colour": .string("red")]), allowNewFields: true).isEmpty)
        let big = validator.issues(in: record(["blob": .bytes([UInt8](repeating: 7, count: 1_048_577))]))
        #expect(big.first?.field == "blob")
        #expect(big.first?.message.description.contains("over CloudKit's limit of 1048576 bytes") == true)
        #expect(validator.issues(in: record(["blob": .bytes([UInt8](repeating: 7, count: 1_000_000))])).isEmpty)
    }

    @Test("what a reader checked is taken only when it checked against the same fields")
    func checkedByTheReader() {
        let validator = RecordValidator(schema: schema)
        let fine = record(["title": .string("x"), "due": .timestamp(0)])
        // The validator's own fields for Task, sorted by name: what a reader of this schema checks against.
        let names = ["blob", "due", "n", "tags", "title"]
        let types = [
            FieldType(.bytes), FieldType(.timestamp), FieldType(.number), FieldType(.string, list: true),
            FieldType(.string),
        ]
        #expect(
            validator.issues(in: fine, checked: CheckedFields(names: names, types: types, size: fine.encodedSize))
                .isEmpty)
        // Taken: the size the reader counted is the one compared with the limit.
        let counted = validator.issues(
            in: fine, checked: CheckedFields(names: names, types: types, size: RecordValidator.maxRecordSize + 1))
        #expect(counted.count == 1 && counted[0].message.description.contains("over CloudKit's limit"), "\(counted)")
        // Not taken: checked against other fields (a type differs, a name is missing), the record
        // is looked at again, and its wrong value found.
        let wrong = record(["title": .string("x"), "due": .string("tomorrow")])
        let expected = [ValidationIssue(field: "due", message: "expected TIMESTAMP, found a STRING value")]
        var otherTypes = types
        otherTypes[1] = FieldType(.string)
        #expect(
            validator.issues(
                in: wrong, checked: CheckedFields(names: names, types: otherTypes, size: wrong.encodedSize)) == expected
        )
        #expect(
            validator.issues(
                in: wrong,
                checked: CheckedFields(
                    names: Array(names.dropFirst()), types: Array(otherTypes.dropFirst()), size: wrong.encodedSize))
                == expected)
        // The record's name and type are still checked.
        let badName = record(["title": .string("x")], name: "_hidden")
        #expect(
            validator.issues(in: badName, checked: CheckedFields(names: names, types: types, size: badName.encodedSize))
                .first?.message.description.contains("cannot start with '_'") == true)
    }

    @Test("a record changed after reading loses what the reader found of it")
    func checkedDroppedOnChange() {
        let read = record(["title": .string("x")])
        var sourced = SourcedRecord(record: read, position: SourcePosition(file: "in.jsonl", line: 1))
        sourced.checked = CheckedFields(names: ["title"], types: [FieldType(.string)], size: read.encodedSize)
        sourced.position.line = 2
        #expect(sourced.checked != nil)
        sourced.record.fields["title"] = .int64(1)
        #expect(sourced.checked == nil)
        sourced.checked = CheckedFields(names: ["title"], types: [FieldType(.string)], size: read.encodedSize)
        sourced.record.id.zone.zoneName = "elsewhere"
        #expect(sourced.checked == nil)
    }

    @Test("record fields stay sorted and unique")
    func fields() {
        var fields = RecordFields()
        fields["b"] = .int64(2)
        fields["a"] = .int64(1)
        fields["c"] = .int64(3)
        fields["b"] = .int64(20)
        #expect(fields.names == ["a", "b", "c"])
        #expect(fields["b"] == .int64(20))
        fields["a"] = nil
        #expect(fields.names == ["b", "c"])
        let duplicate = fields.insertNew("c", .int64(0))
        #expect(!duplicate)
        let added = fields.insertNew("d", .int64(4))
        #expect(added)
        #expect(RecordFields(["z": .int64(1), "y": .int64(2)]).names == ["y", "z"])
    }

    @Test("doubles compare by bits, so -0.0 is a change")
    func doubleEquality() {
        #expect(FieldValue.double(0.0) != FieldValue.double(-0.0))
        #expect(FieldValue.double(.nan) == FieldValue.double(.nan))
    }
}
