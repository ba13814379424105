import Foundation
import Records
import SampleApps
import Testing

@testable import Formats
@testable import SQLiteStore
@testable import StoreCore

/// The records of ``EveryType`` that XML can hold: the full one's text loses its U+0001.
private var plistRecords: [Record] {
    var records = EveryType.records
    records[0].fields["text"] = .string("Größe \"quoted\" <&> \\ back\nslash\r\n\t😀 ]]>")
    return records
}

private func writePlist(_ records: [Record], to path: String) throws {
    let writer = PlistRecordWriter(output: try OutputFile(path: path))
    for record in records { try writer.write(record) }
    try writer.finish()
}

private func readPlist(
    _ text: String, name: String = "records.plist", schema: Schema = EveryType.schema,
    defaultZone: ZoneID = .defaultZone
) throws -> [SourceItem] {
    let codec = JSONRecordCodec(schema: schema, readStyle: .plain, defaultZone: defaultZone)
    let reader = try PlistRecordReader(input: ByteInput(name: name, bytes: Array(text.utf8)), codec: codec)
    var items: [SourceItem] = []
    while let item = try reader.next() { items.append(item) }
    return items
}

private func plist(_ body: String) -> String {
    """
    <?xml version="1.0" encoding="UTF-8"?>
    <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
    <plist version="1.0">
    \(body)
    </plist>
    """
}

@Suite("property lists")
struct PlistTests {
    @Test("every field type is written as its plist type, in Apple's layout")
    func layout() throws {
        let scratch = Scratch()
        let path = scratch.path("things.plist")
        try writePlist(plistRecords, to: path)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(
            text.hasPrefix(
                String(describing: PlistRecordWriter.header)
                    + "<array>\n\t<dict>\n\t\t<key>recordName</key>\n\t\t<string>thing-full</string>\n"))
        #expect(text.hasSuffix("\t</dict>\n</array>\n</plist>\n"))
        // A whole second is a <date>; a timestamp with milliseconds stays exact as ISO-8601 text.
        #expect(
            text.contains(
                "\t\t<key>created</key>\n\t\t<date>1962-07-09T00:00:00Z</date>\n\t\t<key>createdBy</key>\n\t\t<string>_0123abcd</string>\n"
            ))
        #expect(text.contains("\t\t<key>modified</key>\n\t\t<string>2026-01-12T09:00:00.123Z</string>\n"))
        #expect(text.contains("\t\t<key>when</key>\n\t\t<string>1969-12-31T23:59:59.999Z</string>\n"))
        #expect(text.contains("<key>count</key>\n\t\t<integer>-9223372036854775808</integer>\n"))
        #expect(text.contains("<key>ratio</key>\n\t\t<real>0.1</real>\n"))
        #expect(text.contains("<key>blob</key>\n\t\t<data>AAEC/v8=</data>\n"))
        #expect(
            text.contains(
                "<key>ref</key>\n\t\t<dict>\n\t\t\t<key>recordName</key>\n\t\t\t<string>other</string>\n\t\t\t<key>action</key>\n\t\t\t<string>DELETE_SELF</string>\n\t\t</dict>\n"
            ))
        #expect(
            text.contains(
                "<key>refs</key>\n\t\t<array>\n\t\t\t<dict>\n\t\t\t\t<key>recordName</key>\n\t\t\t\t<string>a</string>\n\t\t\t</dict>\n"
            ))
        #expect(text.contains("<key>timestamp</key>\n\t\t\t<date>2026-01-12T09:00:00Z</date>\n"))
        #expect(text.contains("<key>files</key>\n\t\t<array/>\n"))
        // Escaped so that a reader gets the text back: a raw CR would become a LF.
        #expect(text.contains("<string>Größe \"quoted\" &lt;&amp;&gt; \\ back\nslash&#13;\n\t😀 ]]&gt;</string>"))
        let empty = scratch.path("none.plist")
        try writePlist([], to: empty)
        #expect(
            try String(contentsOfFile: empty, encoding: .utf8) == String(describing: PlistRecordWriter.header)
                + "<array/>\n</plist>\n")
        let (status, output) = try ExternalTool.run("xmllint", ["--noout", path])
        #expect(status == 0, "\(output)")
    }

    @Test("records come back exactly, every type, every system field")
    func roundTrip() throws {
        let scratch = Scratch()
        let path = scratch.path("things.plist")
        try writePlist(plistRecords, to: path)
        let items = try readPlist(try String(contentsOfFile: path, encoding: .utf8))
        #expect(issues(items).isEmpty, "\(issues(items))")
        expectSameRecords(records(items), plistRecords)
    }

    @Test(
        "every sample app's records survive a plist export and import through the registry",
        arguments: SampleApp.allCases)
    func sampleApps(_ app: SampleApp) throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(app)
        // A type with a field named like a system key (screen-time-rewards' createdBy) is
        // refused, as by the plain JSON style.
        let colliding = Set(JSONRecordCodec.plainCollisions(in: store.schema).map { String($0.prefix { $0 != "." }) })
        var expected: [Record] = []
        try store.read { session in try session.forEach(RecordQuery()) { expected.append($0) } }
        if let refused = expected.first(where: { colliding.contains($0.recordType) }) {
            let writer = PlistRecordWriter(output: try OutputFile(path: scratch.path("refused.plist")))
            #expect(throws: PlistWriteError.self) { try writer.write(refused) }
            writer.discard()
        }
        expected.removeAll { colliding.contains($0.recordType) }
        let path = scratch.path("\(app.rawValue).plist")
        let writer = try RecordFormat.propertyList.makeWriter!(
            try OutputFile(path: path), RecordWriteContext(schema: store.schema))
        for record in expected { try writer.write(record) }
        try writer.finish()
        let head = Array((FileManager.default.contents(atPath: path) ?? Data()).prefix(4096))
        #expect(RecordFormats.sniff(head) == .propertyList && RecordFormats.forPath(path) == .propertyList)
        let reader = try RecordFormat.propertyList.makeReader!(.file(path), RecordReadContext(schema: store.schema))
        var read: [Record] = []
        while let item = try reader.next() {
            guard case .record(let sourced) = item else {
                Issue.record("\(item)")
                continue
            }
            read.append(sourced.record)
        }
        expectSameRecords(read, expected)
    }

    @Test("Python's plistlib reads each value as the type it is")
    func plistlibReadsOurs() throws {
        let scratch = Scratch()
        let path = scratch.path("things.plist")
        try writePlist(plistRecords, to: path)
        let script = """
            import base64, datetime, json, plistlib, sys
            def tagged(v):
                if isinstance(v, bool): return ["bool", v]
                if isinstance(v, int): return ["int", str(v)]
                if isinstance(v, float): return ["real", repr(v)]
                if isinstance(v, datetime.datetime): return ["date", v.isoformat()]
                if isinstance(v, bytes): return ["data", base64.b64encode(v).decode()]
                if isinstance(v, str): return ["string", v]
                if isinstance(v, list): return ["array", [tagged(x) for x in v]]
                if isinstance(v, dict): return ["dict", {k: tagged(x) for k, x in v.items()}]
                raise SystemExit("unexpected " + type(v).__name__)
            with open(sys.argv[1], "rb") as f:
                records = plistlib.load(f)
            print(json.dumps([tagged(r) for r in records], ensure_ascii=False, sort_keys=True))
            """
        let (status, output) = try ExternalTool.run("python3", ["-c", script, path])
        #expect(status == 0, "\(output)")
        let decoded = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [Any]
        let records = try #require(decoded)
        #expect(records.count == 3)
        let full = try #require((records[0] as? [Any])?[1] as? [String: [Any]])
        func value(_ key: String) -> String { "\(full[key].map { "\($0[0]):\($0[1])" } ?? "missing")" }
        #expect(value("recordName") == "string:thing-full")
        #expect(value("created") == "date:1962-07-09T00:00:00")
        #expect(value("modified") == "string:2026-01-12T09:00:00.123Z")
        #expect(value("count") == "int:-9223372036854775808")
        #expect(value("ratio") == "real:0.1")
        #expect(value("blob") == "data:AAEC/v8=")
        #expect(value("text") == "string:Größe \"quoted\" <&> \\ back\nslash\r\n\t😀 ]]>")
        let reference = try #require(full["ref"]?[1] as? [String: [Any]])
        #expect(
            reference["recordName"]?[1] as? String == "other" && reference["action"]?[1] as? String == "DELETE_SELF")
        let place = try #require(full["place"]?[1] as? [String: [Any]])
        #expect(
            place["latitude"]?[1] as? String == "-33.8688" && place["timestamp"]?[1] as? String == "2026-01-12T09:00:00"
        )
        let counts = try #require(full["counts"]?[1] as? [[Any]])
        #expect(counts.map { "\($0[1])" } == ["9223372036854775807", "0", "-1"])
    }

    @Test("a plist Python's plistlib wrote is read through the schema")
    func readsPlistlib() throws {
        let scratch = Scratch()
        let path = scratch.path("from-python.plist")
        let script = """
            import datetime, plistlib, sys
            records = [
                {"recordName": "thing-py", "recordType": "Thing", "zoneName": "Kitchen-Zone", "scope": "shared",
                 "ownerRecordName": "_0123abcd", "text": "Tea & <biscuits>", "count": 7, "ratio": 2.5,
                 "when": datetime.datetime(2026, 3, 1, 8, 30, 15), "blob": b"\\x00\\xffhi",
                 "ref": {"recordName": "other", "action": "DELETE_SELF"}, "legacy": True,
                 "texts": ["a", "b"], "whens": [datetime.datetime(2000, 1, 1)], "place": {"latitude": 1.5, "longitude": -2.25}},
            ]
            with open(sys.argv[1], "wb") as f:
                plistlib.dump(records, f)
            """
        let (status, output) = try ExternalTool.run("python3", ["-c", script, path])
        #expect(status == 0, "\(output)")
        let items = try readPlist(try String(contentsOfFile: path, encoding: .utf8))
        #expect(issues(items).isEmpty, "\(issues(items))")
        let record = try #require(records(items).first)
        #expect(record.id == RecordID(recordName: "thing-py", zone: EveryType.zone))
        #expect(record["text"] == .string("Tea & <biscuits>"))
        #expect(record["count"] == .int64(7) && record["ratio"] == .double(2.5))
        #expect(record["when"] == .timestamp(ISO8601.parse("2026-03-01T08:30:15Z")!))
        #expect(record["blob"] == .bytes([0, 255, 104, 105]))
        #expect(record["ref"] == .reference(Reference(recordName: "other", action: .deleteSelf)))
        #expect(record["legacy"] == .int64(1))
        #expect(record["texts"] == .list(.string, [.string("a"), .string("b")]))
        #expect(record["whens"] == .list(.timestamp, [.timestamp(946_684_800_000)]))
        #expect(record["place"] == .location(Location(latitude: 1.5, longitude: -2.25)))
    }

    @Test("fields the schema lacks take their types from the elements")
    func inferredTypes() throws {
        let items = try readPlist(
            plist(
                """
                <array><dict>
                  <key>recordName</key><string>n-1</string><key>recordType</key><string>Note</string>
                  <key>at</key><date>2026-01-02T03:04:05Z</date><key>raw</key><data>AAE=</data>
                  <key>pinned</key><true/><key>days</key><array><date>2026-01-01T00:00:00Z</date></array>
                  <key>blank</key><string>  </string>
                </dict></array>
                """), schema: Schema())
        let record = try #require(records(items).first)
        #expect(record["at"] == .timestamp(ISO8601.parse("2026-01-02T03:04:05Z")!))
        #expect(record["raw"] == .bytes([0, 1]))
        #expect(record["pinned"] == .int64(1))
        #expect(record["days"] == .list(.timestamp, [.timestamp(ISO8601.parse("2026-01-01T00:00:00Z")!)]))
        // A string of white space is a value, not layout.
        #expect(record["blank"] == .string("  "))
    }

    @Test("a record the schema refuses is named with its line and field; the rest read on")
    func recordErrors() throws {
        let items = try readPlist(
            plist(
                """
                <array>
                  <dict>
                    <key>recordName</key><string>thing-1</string>
                    <key>recordType</key><string>Thing</string>
                    <key>count</key>
                    <string>seven</string>
                  </dict>
                  <dict><key>recordName</key><string>thing-2</string><key>recordType</key><string>Thing</string></dict>
                </array>
                """))
        let issue = try #require(issues(items).first)
        #expect(issue.description.hasPrefix("records.plist:8: record 'thing-1' (Thing), field 'count': "), "\(issue)")
        #expect(records(items).map(\.recordName) == ["thing-2"])
        if case .invalid(_, let raw?) = items[0] {
            #expect(
                String(decoding: raw, as: UTF8.self)
                    == #"{"recordName":"thing-1","recordType":"Thing","count":"seven"}"#)
        } else {
            Issue.record("the rejected record was not kept for --rejects")
        }
    }

    @Test(
        "what is not a property list of records is refused at its line",
        arguments: [
            (
                "<array><dict><key>recordName</key><string>a</string><key>recordName</key><string>b</string></dict></array>",
                "the key \"recordName\" appears twice"
            ),
            ("<dict><key>recordName</key><string>a</string></dict>", "the property list is one dictionary"),
            ("<array><string>a</string></array>", "expected a <dict> for each record, found <string>"),
            (
                "<array><dict><key>a</key><integer>12x</integer></dict></array>",
                "<integer>12x</integer> of \"a\" is not a whole number"
            ),
            ("<array><dict><key>a</key><real>nan</real></dict></array>", "CloudKit's DOUBLE holds finite numbers only"),
            ("<array><dict><key>a</key><date>yesterday</date></dict></array>", "is not a date"),
            ("<array><dict><key>a</key><data>!!!</data></dict></array>", "is not base64"),
            ("<array><dict><key>a</key><uid>1</uid></dict></array>", "<uid> is not a property list value"),
            ("<array><dict><key>a</key><string>x<b/></string></dict></array>", "<b> inside <string>"),
            ("<array><dict>stray<key>a</key><string>x</string></dict></array>", "text \"stray\" inside a <dict>"),
            ("<array><dict><key>a</key></dict></array>", "<key>a</key> has no value after it"),
            ("<array></array><array/>", "<array> after the array of records"),
        ])
    func structureErrors(_ body: String, _ message: String) throws {
        do {
            let items = try readPlist(plist(body))
            Issue.record("read \(items.count) items from \(body)")
        } catch let error as XMLInputError {
            #expect(error.description.hasPrefix("records.plist:4:"), "\(error)")
            #expect(error.description.contains(message), "\(error)")
        }
    }

    @Test("hostile plists: entities are refused before anything is read, depth is limited")
    func hostile() throws {
        let scratch = Scratch()
        let secret = scratch.path("secret.txt")
        try "top secret".write(toFile: secret, atomically: true, encoding: .utf8)
        let xxe = """
            <?xml version="1.0"?>
            <!DOCTYPE plist [ <!ENTITY leak SYSTEM "file://\(secret)"> ]>
            <plist><array><dict><key>recordName</key><string>&leak;</string></dict></array></plist>
            """
        #expect(throws: XMLInputError.self) { try readPlist(xxe) }
        let deep = plist(
            "<array><dict><key>recordName</key><string>a</string><key>recordType</key><string>Thing</string><key>texts</key>"
                + String(repeating: "<array>", count: 200) + String(repeating: "</array>", count: 200)
                + "</dict></array>")
        do {
            _ = try readPlist(deep)
            Issue.record("200 nested arrays were read")
        } catch let error as XMLInputError {
            #expect(error.message.description.contains("nested more than 128 deep"), "\(error)")
        }
    }

    @Test("a value XML cannot hold stops the export, naming the record and the field, and leaves no file")
    func unwritable() throws {
        let scratch = Scratch()
        let path = scratch.path("things.plist")
        let writer = PlistRecordWriter(output: try OutputFile(path: path))
        do {
            try writer.write(EveryType.records[0])
            Issue.record("U+0001 was written")
        } catch let error as PlistWriteError {
            #expect(
                error.description
                    == "\(path): record 'thing-full' (Thing), field 'text': holds the character U+0001 at character 31, which XML 1.0 cannot hold (not even as &#…;)"
            )
        }
        writer.discard()
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
