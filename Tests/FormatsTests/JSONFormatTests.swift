import Foundation
import Records
import SampleApps
import Testing

@testable import Formats

@Suite("JSON records")
struct JSONFormatTests {
    @Test("every value of every type survives JSON and back", arguments: ValueStyle.allCases)
    func roundTrip(style: ValueStyle) throws {
        let original = EveryType.records
        let bytes = encode(original, style: style)
        let codec = JSONRecordCodec(schema: EveryType.schema)
        let items = try readAll(bytes, codec: codec)
        #expect(issues(items).isEmpty, "\(issues(items))")
        let decoded = records(items)
        #expect(decoded == original)
        #expect(encode(decoded, style: style) == bytes)
    }

    @Test("canonical output is CloudKit Web Services' record shape")
    func canonicalShape() throws {
        let text = String(decoding: encode([EveryType.records[0]], style: .canonical), as: UTF8.self)
        #expect(
            text.hasPrefix(
                #"{"recordName":"thing-full","recordType":"Thing","scope":"shared","zoneID":{"zoneName":"Kitchen-Zone","ownerRecordName":"_0123abcd"},"recordChangeTag":"k9","created":{"timestamp":-236131200000,"userRecordName":"_0123abcd","deviceID":"iPhone-1"},"modified":{"timestamp":1768208400123},"fields":{"blob":{"value":"AAEC/v8=","type":"BYTES"},"#
            ))
        #expect(text.contains(#""count":{"value":-9223372036854775808,"type":"INT64"}"#))
        #expect(text.contains(#""ref":{"value":{"recordName":"other","action":"DELETE_SELF"},"type":"REFERENCE"}"#))
        // Encrypted values as CloudKit sends and takes them: the plain type, marked.
        #expect(text.contains(#""secret":{"value":"","type":"STRING","isEncrypted":true}"#))
        #expect(text.contains(#""secrets":{"value":["s"],"type":"STRING_LIST","isEncrypted":true}"#))
        #expect(!text.contains("ENCRYPTED_STRING"))
        // What ckport wrote before (ENCRYPTED_STRING as a value's type) still reads, to the same record.
        let legacy = text.replacingOccurrences(
            of: #""type":"STRING","isEncrypted":true"#, with: #""type":"ENCRYPTED_STRING""#
        )
        .replacingOccurrences(of: #""type":"STRING_LIST","isEncrypted":true"#, with: #""type":"ENCRYPTED_STRING_LIST""#)
        #expect(legacy.contains(#""type":"ENCRYPTED_STRING""#) && legacy != text)
        let read = records(try readAll(Array(legacy.utf8), codec: JSONRecordCodec(schema: EveryType.schema)))
        #expect(read == [EveryType.records[0]])
        #expect(text.contains(#""file":{"value":{"fileChecksum":"AXyz+/==","size":1234567,"#))
        #expect(text.contains(#""legacy":{"value":3.0,"type":"DOUBLE"}"#))
        #expect(
            text.contains(
                #""ratios":{"value":[5e-324,1.7976931348623157e+308,-0.0,1e-05,123456789.125],"type":"DOUBLE_LIST"}"#))
        #expect(text.contains(#""files":{"value":[],"type":"ASSETID_LIST"}"#))
    }

    @Test("plain output is flat, with ISO-8601 times")
    func plainShape() {
        let text = String(decoding: encode([EveryType.records[0]], style: .plain), as: UTF8.self)
        #expect(
            text.hasPrefix(
                #"{"recordName":"thing-full","recordType":"Thing","scope":"shared","zoneName":"Kitchen-Zone","ownerRecordName":"_0123abcd","recordChangeTag":"k9","created":"1962-07-09T00:00:00.000Z","createdBy":"_0123abcd","createdDevice":"iPhone-1","modified":"2026-01-12T09:00:00.123Z","blob":"AAEC/v8=","#
            ))
        #expect(text.contains(#""when":"1969-12-31T23:59:59.999Z""#))
        #expect(text.contains(#""ref":{"recordName":"other","action":"DELETE_SELF"}"#))
        #expect(text.contains(#""refs":["a",{"recordName":"_userRecord","action":"VALIDATE"}]"#))
        let lists = String(decoding: encode([EveryType.records[2]], style: .plain), as: UTF8.self)
        #expect(lists.contains(#""zoneName":"_defaultZone","count""#))
    }

    @Test("a {\"records\": […]} document and a bare array read like lines")
    func documents() throws {
        let codec = JSONRecordCodec(schema: EveryType.schema)
        let lines = encode(EveryType.records, style: .canonical)
        let body = String(decoding: lines, as: UTF8.self).split(separator: "\n").joined(separator: ",\n")
        let document = Array("{\"records\": [\n\(body)\n], \"continuationMarker\": \"abc\"}".utf8)
        #expect(records(try readAll(document, name: "x.json", layout: .document, codec: codec)) == EveryType.records)
        #expect(records(try readAll(document, name: "x.json", layout: nil, codec: codec)) == EveryType.records)
        let array = Array("  [\(body)]  \n".utf8)
        #expect(records(try readAll(array, name: "x.json", codec: codec)) == EveryType.records)
        #expect(records(try readAll(Array("{\"records\": []}".utf8), name: "x.json", codec: codec)).isEmpty)
        let crlf = Array(String(decoding: lines, as: UTF8.self).replacingOccurrences(of: "\n", with: "\r\n\r\n").utf8)
        #expect(records(try readAll(crlf, codec: codec)) == EveryType.records)
    }

    @Test(
        "records in the shapes other tools write are read leniently (written here: extra keys, values as strings, fields outside `fields`)"
    )
    func lenient() throws {
        let schema = try SchemaParser.parse(
            "DEFINE SCHEMA RECORD TYPE Task (title STRING, n INT64, due TIMESTAMP, done INT64);")
        let codec = JSONRecordCodec(schema: schema)
        let text = """
            {"recordName":"t1","recordType":"Task","shortGUID":"x","pluginFields":{},"fields":{"title":{"value":"A"},"n":{"value":"9007199254740993","type":"INT64"},"due":{"value":"2026-01-12T09:00:00Z","type":"TIMESTAMP"}}}
            {"recordName":"t2","recordType":"Task","title":"B","due":"2026-01-12","done":true,"n":12}
            """
        let read = records(try readAll(Array(text.utf8), codec: codec))
        #expect(read.count == 2)
        #expect(
            read[0].fields == [
                "title": .string("A"), "n": .int64(9_007_199_254_740_993), "due": .timestamp(1_768_208_400_000),
            ])
        #expect(
            read[1].fields == [
                "title": .string("B"), "due": .timestamp(1_768_176_000_000), "done": .int64(1), "n": .int64(12),
            ])
    }

    @Test("errors name the file, line, column, path, record and field")
    func errorPositions() throws {
        let schema = try SchemaParser.parse("DEFINE SCHEMA RECORD TYPE Task (title STRING, due TIMESTAMP);")
        let codec = JSONRecordCodec(schema: schema)
        let text = """
            {"recordName":"t1","recordType":"Task","fields":{"title":{"value":"ok","type":"STRING"}}}
            {"recordName":"t2","recordType":"Task","fields":{"due":{"value":"next tuesday","type":"TIMESTAMP"}}}
            {"recordName":"t3","recordType":"Task","title":"x","due":42.5}
            {"recordName":"t4", "recordType":"Task" "title":"x"}
            {"recordName":"t5","recordType":"Task","fields":{"due":{"value":1,"type":"STRING"}}}
            """
        let found = issues(try readAll(Array(text.utf8), name: "tasks.jsonl", codec: codec))
        #expect(found.count == 4)
        #expect(
            found[0].description
                == "tasks.jsonl:2:65 (fields.due.value): record 't2' (Task), field 'due': expected TIMESTAMP (milliseconds since 1970, or ISO-8601 text such as 2026-01-12T09:00:00.000Z), found the string \"next tuesday\""
        )
        #expect(
            found[1].description
                == "tasks.jsonl:3:58 (due): record 't3' (Task), field 'due': expected TIMESTAMP, found the number 42.5: milliseconds since 1970 are whole numbers"
        )
        #expect(
            found[2].description == "tasks.jsonl:4:41: not valid JSON: expected ',' or '}' in an object, found '\"'")
        #expect(found[3].position.column == 74)
        #expect(found[3].message == "the schema says Task.due is TIMESTAMP, but the record says STRING")
    }

    @Test("a record in a .json document is placed by its line and array index")
    func documentPositions() throws {
        let schema = try SchemaParser.parse("DEFINE SCHEMA RECORD TYPE Task (title STRING);")
        let text =
            "{\"records\": [\n  {\"recordName\": \"a\", \"recordType\": \"Task\", \"title\": \"x\"},\n  {\"recordName\": \"b\", \"recordType\": \"Task\", \"title\": 5}\n]}"
        let found = issues(try readAll(Array(text.utf8), name: "export.json", codec: JSONRecordCodec(schema: schema)))
        #expect(
            found.map(\.description) == [
                "export.json:3:54 (records[1].title): record 'b' (Task), field 'title': expected STRING (a JSON string), found the number 5"
            ])
    }

    @Test("a broken document is an error that says where")
    func brokenDocument() throws {
        let codec = JSONRecordCodec(schema: EveryType.schema)
        #expect(throws: InputIssue.self) {
            try readAll(Array("{\"records\": [{\"recordName\": \"a\"}".utf8), name: "x.json", codec: codec)
        }
        let issue = #expect(throws: InputIssue.self) {
            try readAll(Array("{\"records\": 5}".utf8), name: "x.json", codec: codec)
        }
        #expect(issue?.description == "x.json:1:13: \"records\" must be an array")
    }

    @Test("the direct reader gives the same records as the general one, on every sample", arguments: SampleApp.allCases)
    func scannerMatchesGeneralReader(app: SampleApp) throws {
        let codec = JSONRecordCodec(schema: app.schema)
        let text = try String(
            contentsOf: packageRoot.appendingPathComponent("samples/\(app.rawValue)/records.jsonl"), encoding: .utf8)
        var fast = 0
        for line in text.split(separator: "\n") {
            let bytes = Array(line.utf8)
            let general = try codec.decode(try JSONParser.parse(bytes))
            let (decoded, _) = try bytes.withUnsafeBytes { try codec.decode(bytes: $0) }
            #expect(decoded == general)
            if let (scanned, checked) = bytes.withUnsafeBytes({
                CanonicalRecordScanner(
                    fieldTypes: fieldTypes(app.schema), defaultRecordType: nil, defaultZone: .defaultZone
                ).scanChecked($0)
            }) {
                fast += 1
                // What the scan found of the fields is what the validator finds.
                if !scanned.isDeleted, !scanned.fields.isEmpty {
                    let checked = try #require(checked, "\(line)")
                    #expect(checked.size == scanned.encodedSize)
                    #expect(
                        checked.names
                            == fieldTypes(app.schema)[scanned.recordType]?.keys.sorted {
                                $0.utf8.lexicographicallyPrecedes($1.utf8)
                            })
                    let validator = RecordValidator(schema: app.schema)
                    #expect(validator.issues(in: scanned, checked: checked) == validator.issues(in: scanned))
                }
            }
            // Spaced out and in another order of keys, the same bytes read alike both ways.
            for options: JSONSerialization.WritingOptions in [
                [.prettyPrinted], [.sortedKeys], [.prettyPrinted, .sortedKeys],
            ] {
                let respaced = try [UInt8](
                    JSONSerialization.data(
                        withJSONObject: try JSONSerialization.jsonObject(with: Data(bytes)), options: options))
                let (again, _) = try respaced.withUnsafeBytes { try codec.decode(bytes: $0) }
                #expect(
                    again == (try codec.decode(try JSONParser.parse(respaced))),
                    "\(String(decoding: respaced, as: UTF8.self))")
            }
        }
        // Every record but the shares and their roots, which carry what only the general reader
        // keeps (participants, short GUIDs), takes the direct way.
        let lines = text.split(separator: "\n")
        let sharing = lines.filter { $0.contains("\"recordType\":\"cloudkit.share\"") || $0.contains("\"shortGUID\"") }
            .count
        if app == .familyTodo || app == .familyCalendar {
            #expect(sharing > 0 && fast == lines.count - sharing, "\(fast) of \(lines.count), \(sharing) with shares")
        }
    }

    @Test("the direct reader steps aside for every shape it does not cover")
    func scannerFallsBack() throws {
        let schema = try SchemaParser.parse(
            "DEFINE SCHEMA RECORD TYPE Task (title STRING, n INT64, ref REFERENCE, tags LIST<STRING>);")
        let scanner = CanonicalRecordScanner(
            fieldTypes: fieldTypes(schema), defaultRecordType: nil, defaultZone: .defaultZone)
        let codec = JSONRecordCodec(schema: schema)
        let cases = [
            #"{"recordName":"a","recordType":"Task","fields":{"n":{"value":"12","type":"INT64"}}}"#,
            #"{"recordName":"a","recordType":"Task","fields":{"tags":{"value":["x"],"type":"STRING_LIST"}}}"#,
            #"{"recordName":"a","recordType":"Task","fields":{"extra":{"value":1,"type":"INT64"}}}"#,
            #"{"recordName":"a","recordType":"Task","shortGUID":"g","fields":{}}"#,
            #"{"recordName":"a","recordType":"Task","fields":{"n":{"value":1.0,"type":"INT64"}}}"#,
            #"{"recordName":"a","recordType":"Task","fields":{"ref":{"value":{"recordName":"b","zoneID":{"zoneName":"_defaultZone"}},"type":"REFERENCE"}}}"#,
            #"{"recordName":"a","recordType":"Task","created":{"timestamp":1}}"#,
        ]
        for text in cases {
            let bytes = Array(text.utf8)
            #expect(bytes.withUnsafeBytes { scanner.scan($0) } == nil, "\(text)")
            let general = Result { try codec.decode(try JSONParser.parse(bytes)) }.map { $0 }
            let combined = Result { try bytes.withUnsafeBytes { try codec.decode(bytes: $0) }.0 }
            switch (general, combined) {
            case (.success(let a), .success(let b)): #expect(a == b)
            case (.failure(let a), .failure(let b)): #expect("\(a)" == "\(b)")
            default: Issue.record("the readers disagree on \(text): \(general) / \(combined)")
            }
        }
        let fieldsFirst = Array(
            #"{"fields":{"title":{"type":"STRING","value":"x \"y\"\n"}},"recordName":"a","recordType":"Task"}"#.utf8)
        #expect(fieldsFirst.withUnsafeBytes { scanner.scan($0) }?.fields == ["title": .string("x \"y\"\n")])
    }

    @Test(
        "the direct reader's shortcuts give what the general reader gives: owner names shared, keys, scope, action and type compared as bytes"
    )
    func scannerShortcuts() throws {
        let schema = try SchemaParser.parse("DEFINE SCHEMA RECORD TYPE Task (title STRING, n INT64, ref REFERENCE);")
        let scanner = CanonicalRecordScanner(
            fieldTypes: fieldTypes(schema), defaultRecordType: nil, defaultZone: .defaultZone)
        let codec = JSONRecordCodec(schema: schema)
        let owner = "_0123456789abcdef0123456789abcdef"
        let zone = #""zoneID":{"zoneName":"home","ownerRecordName":"\#(owner)"}"#
        // (text, whether the direct reader takes it)
        let cases: [(String, Bool)] = [
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"created":{"timestamp":1,"userRecordName":"\#(owner)"},"modified":{"timestamp":2,"userRecordName":"\#(owner)"},"fields":{}}"#,
                true
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"created":{"timestamp":1,"userRecordName":"\#(owner)"},"modified":{"timestamp":2,"userRecordName":"_someone_else_entirely_0000000000"},"fields":{}}"#,
                true
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"created":{"timestamp":1,"userRecordName":"\#(owner.dropLast())"},"fields":{}}"#,
                true
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"created":{"timestamp":1,"userRecordName":"\#(owner)x"},"fields":{}}"#,
                true
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"created":{"timestamp":1,"userRecordName":"_0123456789abcdef0123456789abcde\u0066"},"fields":{}}"#,
                true
            ),
            (
                #"{"recordName":"a","recordType":"Task","scope":"shared",\#(zone),"fields":{"ref":{"value":{"recordName":"b","action":"VALIDATE"},"type":"REFERENCE"}}}"#,
                true
            ),
            (
                #"{"recordName":"a","recordType":"Task","scope":"public",\#(zone),"fields":{"ref":{"value":{"recordName":"b","action":"DELETE_SELF"}}}}"#,
                true
            ),
            (#"{"recordName":"a","recordType":"Task","scope":"Shared",\#(zone),"fields":{}}"#, false),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"ref":{"value":{"recordName":"b","action":"validate"},"type":"REFERENCE"}}}"#,
                false
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"ti\u0074le":{"value":"x","type":"STRING"}}}"#,
                false
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{"value":"x","type":"ENCRYPTED_STRING"}}}"#,
                true
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{"value":"x","type":"INT64"}}}"#,
                false
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{"value":"x","type":"STRING"},"title":{"value":"y","type":"STRING"}}}"#,
                false
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"n":{"value":1,"type":"INT64"},"title":{"value":"é \u00e9","type":"STRING"}}}"#,
                true
            ),
            // The compact shapes matched byte for byte, and what only looks like them.
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{"value":"x","type":"STRING","isEncrypted":true}}}"#,
                true
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{"value":"x","type":"STRING" }}}"#,
                true
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{"value":"x","type":"STRINGS"}}}"#,
                false
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{"value":"x","type":"STRING"},"n":{"value":null,"type":"INT64"}}}"#,
                true
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{"value" :"x","type":"STRING"}}}"#,
                true
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{"value":"x","type":"STRING","value":"y"}}}"#,
                false
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{"value":"x","type":"STRING","isEncrypted":tru}}}"#,
                false
            ),
            (#"{"recordName":"a","recordType":"Task",\#(zone),"deleted":fals}"#, false),
            (#"{"recordName":"a","recordType":"Task",\#(zone),"deleted":true}"#, true),
            (#"{"recordName":"a","recordType":"Task",\#(zone),"created":{"timestamp":1,"timestamp":2}}"#, false),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"created":{"userRecordName":"u","timestamp":1,"deviceID":"d"}}"#,
                true
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"created":{"timestamp":1,"userRecordName":"u","userRecordName":"v"}}"#,
                false
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"ref":{"value":{"recordName":"b","recordName":"c"},"type":"REFERENCE"}}}"#,
                false
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{"value":"x","type":"STRING"},"n":{"value":1,"type":"INT64"}}}"#,
                true
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"n" :{"value":1,"type":"INT64"},"nn":{"value":2,"type":"INT64"}}}"#,
                false
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"n":{"value":1,"type":"INT64"},"n":{"value":2,"type":"INT64"}}}"#,
                false
            ),
            // A key met twice is refused by the general reader, whether or not the first had a value.
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{"value":null},"title":{"value":"x","type":"STRING"}}}"#,
                false
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{},"title":{"value":"x","type":"STRING"}}}"#,
                false
            ),
            (
                #"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{"value":"x","type":"STRING"},"title":{"value":null}}}"#,
                false
            ),
            (#"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{"value":null},"title":{}}}"#, false),
            (#"{"recordName":"a","recordType":"Task",\#(zone),"fields":{"title":{"value":null},"n":{}}}"#, true),
            // Spaced as many JSON writers space it (", " and ": ").
            (
                #"{"recordName": "a", "recordType": "Task", "fields": {"title": {"value": "x", "type": "STRING"}, "n": {"value": 1, "type": "INT64"}}}"#,
                true
            ),
        ]
        for (text, direct) in cases {
            let bytes = Array(text.utf8)
            let scanned = bytes.withUnsafeBytes { scanner.scan($0) }
            #expect((scanned != nil) == direct, "\(text)")
            let general = Result { try codec.decode(try JSONParser.parse(bytes)) }
            switch general {
            case .success(let record):
                if let scanned { #expect(scanned == record, "\(text)") }
                #expect(try bytes.withUnsafeBytes { try codec.decode(bytes: $0) }.0 == record)
            case .failure:
                #expect(scanned == nil, "\(text)")
            }
        }
        // Shared owner names are still the right names.
        let shared = try Array(cases[1].0.utf8).withUnsafeBytes { try #require(scanner.scan($0)) }
        #expect(shared.zone.ownerRecordName == owner)
        #expect(shared.created?.userRecordName == owner)
        #expect(shared.modified?.userRecordName == "_someone_else_entirely_0000000000")
    }

    func fieldTypes(_ schema: Schema) -> [String: [String: FieldType]] {
        Dictionary(
            uniqueKeysWithValues: schema.recordTypes.map { type in
                (type.name, Dictionary(uniqueKeysWithValues: type.userFields.map { ($0.name, $0.type) }))
            })
    }

    @Test(
        "the committed samples are the generator's output",
        arguments: [
            (SampleApp.familyTodo, 80), (.familyCalendar, 120), (.relationshipCheckin, 61), (.screenTimeRewards, 90),
            (.notes, 60),
        ])
    func samplesMatchGenerator(app: SampleApp, count: Int) throws {
        let directory = packageRoot.appendingPathComponent("samples/\(app.rawValue)")
        #expect(
            try String(contentsOf: directory.appendingPathComponent("schema.ckdb"), encoding: .utf8) == app.schemaText)
        let mapping = try? String(contentsOf: directory.appendingPathComponent("calendar.yaml"), encoding: .utf8)
        #expect(mapping == app.calendarMappingText)
        var generated: [Record] = []
        try app.generate(records: count, seed: 1) { generated.append($0) }
        #expect(generated.count == count)
        let committed = try Data(contentsOf: directory.appendingPathComponent("records.jsonl"))
        #expect(encode(generated, style: .canonical, schema: app.schema) == [UInt8](committed))
    }

    @Test("generation is deterministic and exact at any size")
    func generatorCounts() throws {
        for app in SampleApp.allCases {
            for count in [0, 1, 7, 500] {
                var first: [Record] = []
                var second: [Record] = []
                try app.generate(records: count, seed: 9) { first.append($0) }
                try app.generate(records: count, seed: 9) { second.append($0) }
                #expect(first.count == count)
                #expect(first == second)
                let validator = RecordValidator(schema: app.schema)
                for record in first { #expect(validator.issues(in: record).isEmpty, "\(app) \(record.recordName)") }
            }
        }
    }
}
