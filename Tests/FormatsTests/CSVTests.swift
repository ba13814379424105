import Foundation
import Records
import Testing

@testable import Formats

func rows(_ text: String, delimiter: UInt8 = UInt8(ascii: ",")) throws -> [[CSVCell]] {
    try rows(Array(text.utf8), delimiter: delimiter)
}

func rows(_ bytes: [UInt8], delimiter: UInt8 = UInt8(ascii: ",")) throws -> [[CSVCell]] {
    let reader = CSVRowReader(input: ByteInput(name: "t.csv", bytes: bytes), delimiter: delimiter)
    var out: [[CSVCell]] = []
    while let row = try reader.nextRow() { out.append(row) }
    return out
}

func texts(_ rows: [[CSVCell]]) -> [[String?]] {
    rows.map { $0.map { $0.isNull ? nil : $0.text } }
}

func csvRecords(_ text: String, schema: Schema, options: CSVReadOptions) throws -> [SourceItem] {
    let reader = CSVRecordReader(
        input: ByteInput(name: "t.csv", bytes: Array(text.utf8)), schema: schema, options: options)
    var items: [SourceItem] = []
    while let item = try reader.next() { items.append(item) }
    return items
}

func writeCSV(_ records: [Record], type: String, schema: Schema, options: CSVWriteOptions) throws -> String {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-csv-\(UUID().uuidString).csv")
        .path
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    let writer = try CSVRecordWriter(
        output: try OutputFile(path: scratch), type: schema.recordType(named: type)!, options: options)
    for record in records { try writer.write(record) }
    try writer.finish()
    return try String(contentsOfFile: scratch, encoding: .utf8)
}

@Suite("CSV rows (RFC 4180)")
struct CSVRowTests {
    @Test("quotes, embedded line breaks, NULL and empty, non-ASCII, delimiters inside cells")
    func edgeCases() throws {
        let text = "a,b,c\r\n\"he said \"\"hi\"\"\",\"line1\r\nline2\",\"x,y\"\r\n,\"\",Größe 😀\r\n\"\",,\" padded \""
        #expect(
            try texts(rows(text)) == [
                ["a", "b", "c"],
                ["he said \"hi\"", "line1\r\nline2", "x,y"],
                [nil, "", "Größe 😀"],
                ["", nil, " padded "],
            ])
    }

    @Test("CRLF, LF and CR row ends, a BOM, blank lines and no final newline")
    func rowEnds() throws {
        let text = [0xEF, 0xBB, 0xBF] + Array("h1,h2\r\n1,2\n\n3,4\r5,\"6\n7\"\r\n\r\n8,9".utf8)
        #expect(try texts(rows(text)) == [["h1", "h2"], ["1", "2"], ["3", "4"], ["5", "6\n7"], ["8", "9"]])
        let cells = try rows(text)
        #expect(cells[2][0].line == 4)
        #expect(cells[3][1].line == 5)
        #expect(cells[4][0].line == 8)
    }

    @Test("positions are line and character column of each cell")
    func positions() throws {
        let cells = try rows("id,name\n7,Zoë,\"x\"\n")
        #expect(cells[1].map(\.column) == [1, 3, 7])
        #expect(cells[1].map(\.line) == [2, 2, 2])
    }

    @Test(
        "malformed CSV is an error at its line and column",
        arguments: [
            ("a,b\n\"open,2\n", 2, 1, "a quoted cell is not closed"),
            ("a,b\n\"x\"y,2\n", 2, 4, "unexpected 'y' after a closing quote"),
        ])
    func malformed(text: String, line: Int, column: Int, message: String) {
        do {
            _ = try rows(text)
            Issue.record("accepted")
        } catch let issue as InputIssue {
            #expect(issue.position.line == line, "\(issue)")
            #expect(issue.position.column == column, "\(issue)")
            #expect(issue.message.description.contains(message), "\(issue)")
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test("text that is not UTF-8 is refused")
    func notUTF8() {
        #expect(throws: InputIssue.self) { try rows([0x61, 0x2C, 0xFF, 0x0A]) }
    }

    @Test("the delimiter is sniffed from the header")
    func sniff() throws {
        for (text, expected) in [
            ("a;b;c\n1;2;3", UInt8(ascii: ";")), ("a\tb\n", 0x09), ("a,b;c,d\n", UInt8(ascii: ",")),
            ("only\n", UInt8(ascii: ",")), ("\"a;b\",c\n", UInt8(ascii: ",")),
        ] {
            let reader = CSVRowReader(input: ByteInput(name: "t.csv", bytes: Array(text.utf8)), delimiter: 0)
            #expect(try reader.sniffDelimiter() == expected, "\(text)")
        }
    }

    @Test("the writer quotes what needs it and keeps NULL and empty apart")
    func writer() {
        let writer = CSVRowWriter(dialect: .csv)
        var out: [UInt8] = []
        for (index, cell) in ["plain", "a,b", "say \"hi\"", "two\nlines", " lead", "trail ", "", nil, "cr\r"]
            .enumerated()
        {
            writer.appendCell(cell, text: true, first: index == 0, to: &out)
        }
        writer.endRow(&out)
        #expect(
            String(decoding: out, as: UTF8.self)
                == "plain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\" lead\",\"trail \",\"\",,\"cr\r\"\r\n")
        var tsv: [UInt8] = []
        let tab = CSVRowWriter(dialect: CSVDialect(delimiter: 0x09, crlf: false))
        tab.appendCell("a,b", text: true, first: true, to: &tsv)
        tab.appendCell("c\td", text: true, first: false, to: &tsv)
        tab.endRow(&tsv)
        #expect(String(decoding: tsv, as: UTF8.self) == "a,b\t\"c\td\"\n")
    }

    @Test("--spreadsheet-safe defuses formulas in text, not in numbers")
    func spreadsheetSafe() {
        let writer = CSVRowWriter(dialect: CSVDialect(spreadsheetSafe: true))
        var out: [UInt8] = []
        writer.appendCell("=HYPERLINK(\"http://x\")", text: true, first: true, to: &out)
        writer.appendCell("+1", text: true, first: false, to: &out)
        writer.appendCell("-5", text: false, first: false, to: &out)
        writer.appendCell("@SUM(A1)", text: true, first: false, to: &out)
        writer.appendCell("fine", text: true, first: false, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == "\"'=HYPERLINK(\"\"http://x\"\")\",'+1,-5,'@SUM(A1),fine")
    }
}

@Suite("CSV records")
struct CSVRecordTests {
    @Test("an empty STRING and an empty BYTES value are \"\" and come back; a missing value stays missing")
    func emptyValues() throws {
        let schema = try SchemaParser.parse("DEFINE SCHEMA RECORD TYPE T (s STRING, b BYTES, n INT64);")
        let scratch = Scratch()
        let path = scratch.path("t.csv")
        let writer = try CSVRecordWriter(
            output: try OutputFile(path: path), type: schema.recordTypes[0], options: CSVWriteOptions())
        try writer.write(
            Record(id: RecordID(recordName: "r1"), recordType: "T", fields: ["s": .string(""), "b": .bytes([])]))
        try writer.write(Record(id: RecordID(recordName: "r2"), recordType: "T", fields: ["n": .int64(1)]))
        try writer.finish()
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text == "recordName,s,b,n\r\nr1,\"\",\"\",\r\nr2,,,1\r\n", "\(text.debugDescription)")
        let reader = CSVRecordReader(
            input: try ByteInput(path: path), schema: schema, options: CSVReadOptions(defaultRecordType: "T"))
        var items: [SourceItem] = []
        while let item = try reader.next() { items.append(item) }
        let read = records(items)
        #expect(
            read.map { $0.fields } == [
                RecordFields(["b": .bytes([]), "s": .string("")]), RecordFields(["n": .int64(1)]),
            ])
    }

    @Test("every value of every type survives CSV and back", arguments: [false, true])
    func roundTrip(system: Bool) throws {
        let original = EveryType.records.filter { system || $0.zone == .defaultZone || true }
        var expected = original
        if !system {
            // Without the system columns, records come back in the default zone, without stamps.
            expected = original.map { record in
                var copy = Record(id: RecordID(recordName: record.recordName), recordType: record.recordType)
                copy.fields = record.fields
                return copy
            }
        }
        for locationJSON in [false, true] {
            let values = CSVValues(locationAsJSON: locationJSON)
            let text = try writeCSV(
                original, type: "Thing", schema: EveryType.schema,
                options: CSVWriteOptions(values: values, includeSystem: system))
            let items = try csvRecords(
                text, schema: EveryType.schema, options: CSVReadOptions(defaultRecordType: "Thing"))
            #expect(issues(items).isEmpty, "\(issues(items))")
            expectSameRecords(records(items), expected)
            #expect(
                try writeCSV(
                    records(items), type: "Thing", schema: EveryType.schema,
                    options: CSVWriteOptions(values: values, includeSystem: system)) == text || !system)
        }
    }

    @Test("the cells say what the values are")
    func cells() throws {
        let text = try writeCSV(
            [EveryType.records[0]], type: "Thing", schema: EveryType.schema,
            options: CSVWriteOptions(fields: [
                "text", "count", "ratio", "when", "ref", "file", "place", "secretPlace", "texts", "blob",
            ]))
        let lines = text.components(separatedBy: "\r\n")
        #expect(
            lines[0] == "recordName,text,count,ratio,when,ref,ref:action,file,file:size,place,secretPlace,texts,blob")
        #expect(
            lines[1].hasPrefix(
                "thing-full,\"Größe \"\"quoted\"\" \\ back\nslash\t😀 \u{01}\",-9223372036854775808,0.1,1969-12-31T23:59:59.999Z,other,DELETE_SELF,"
            ))
        #expect(lines[1].contains(",\"0.0,-0.0\","))
        #expect(lines[1].hasSuffix(",\"[\"\"\"\",\"\"ünï\"\",\"\"🏳️‍🌈\"\"]\",AAEC/v8="))
        let berlin = try writeCSV(
            [EveryType.records[0]], type: "Thing", schema: EveryType.schema,
            options: CSVWriteOptions(
                values: CSVValues(timeZone: TimeZone(identifier: "Europe/Berlin")), fields: ["when"]))
        #expect(berlin == "recordName,when\r\nthing-full,1970-01-01T00:59:59.999+01:00\r\n")
    }

    @Test("cells that do not parse name the line, column, field, type and value")
    func parseErrors() throws {
        let schema = try SchemaParser.parse(
            "DEFINE SCHEMA RECORD TYPE T (n INT64, d DOUBLE, t TIMESTAMP, b BYTES, r REFERENCE, l LOCATION, tags LIST<STRING>, a ASSET, r2 REFERENCE);"
        )
        let text = """
            recordName,n,d,t,b,r,l,tags,a,r2:action
            x1,seven,,,,,,,,
            x2,,1.5.2,,,,,,,
            x3,,,next tuesday,,,,,,
            x4,,,,!!!,,,,,
            x5,,,,,_ok,,,,
            x6,,,,,,"91,0",,,
            x7,,,,,,,[x,,
            x8,,,,,,,,abc,
            x9,,,,,,,,,SOMETIMES
            """
        let found = issues(try csvRecords(text, schema: schema, options: CSVReadOptions(defaultRecordType: "T")))
        #expect(
            found.map(\.description) == [
                "t.csv:2:4: record 'x1' (T), field 'n': expected INT64 (a whole number, or true/false), found \"seven\"",
                "t.csv:3:5: record 'x2' (T), field 'd': expected DOUBLE (a number), found \"1.5.2\"",
                "t.csv:4:6: record 'x3' (T), field 't': expected TIMESTAMP (a date such as 2026-01-12, 2026-01-12 09:00 or 2026-01-12T09:00:00.000Z), found \"next tuesday\"",
                "t.csv:5:7: record 'x4' (T), field 'b': expected BYTES (Base64), found \"!!!\"",
                "t.csv:7:9: record 'x6' (T), field 'l': expected LOCATION, found \"91,0\": latitude is -90…90 and longitude -180…180",
                "t.csv:8:10: record 'x7' (T), field 'tags': expected LIST<STRING> as JSON (an array such as [\"a\", \"b\"]), found \"[x\", which is not JSON: unexpected 'x', expected a value",
                "t.csv:9:11: record 'x8' (T), field 'a': an ASSET cell holds its checksum and needs its size in column a:size",
                "t.csv:10:12: record 'x9' (T), field 'r2': expected a reference action (NONE, DELETE_SELF or VALIDATE), found \"SOMETIMES\"",
            ])
    }

    @Test("the header maps to fields; unknown columns are refused unless mapped or ignored")
    func header() throws {
        let schema = try SchemaParser.parse(
            "DEFINE SCHEMA RECORD TYPE Task (title STRING, dueDate TIMESTAMP, done INT64);")
        let text = "recordName,Title,Due date,done,Colour\nt1,Trash,2026-01-12 09:00,true,red\n"
        do {
            _ = try csvRecords(text, schema: schema, options: CSVReadOptions(defaultRecordType: "Task"))
            Issue.record("accepted")
        } catch let issue as InputIssue {
            #expect(issue.position.line == 1)
            #expect(issue.position.column == 12)
            #expect(
                issue.message.description.hasPrefix(
                    "column 'Title' is not a field of Task (its fields: title, dueDate, done)"))
        }
        let options = CSVReadOptions(
            defaultRecordType: "Task", columnMap: ["Title": "title", "Due date": "dueDate"], ignoreUnknownColumns: true)
        let read = records(try csvRecords(text, schema: schema, options: options))
        #expect(
            read.first?.fields == [
                "title": .string("Trash"), "dueDate": .timestamp(1_768_208_400_000), "done": .int64(1),
            ])
        #expect(throws: InputIssue.self) {
            try csvRecords(
                "recordName,title,title\n", schema: schema, options: CSVReadOptions(defaultRecordType: "Task"))
        }
        #expect(throws: InputIssue.self) {
            try csvRecords("recordName,title\n", schema: schema, options: CSVReadOptions())
        }
        // Ignoring unknown columns does not ignore a column mapped to a field that is not there,
        // nor a map that names a column the header lacks: either would drop data unsaid.
        for (map, message) in [
            (["Title": "titel", "Due date": "dueDate"], "column 'Title' (mapped to 'titel') is not a field of Task"),
            (
                ["Titel": "title", "Due date": "dueDate"],
                "the column map renames column 'Titel', which the header does not have (its columns: recordName, Title, Due date, done, Colour)"
            ),
        ] {
            do {
                _ = try csvRecords(
                    text, schema: schema,
                    options: CSVReadOptions(defaultRecordType: "Task", columnMap: map, ignoreUnknownColumns: true))
                Issue.record("accepted \(map)")
            } catch let issue as InputIssue {
                #expect(issue.message.description.hasPrefix(message), "\(issue.message)")
                #expect(issue.position.line == 1)
            }
        }
    }

    @Test("a ragged row is an error naming its line")
    func ragged() throws {
        let schema = try SchemaParser.parse("DEFINE SCHEMA RECORD TYPE Task (title STRING, notes STRING);")
        let found = issues(
            try csvRecords(
                "recordName,title,notes\nt1,a,b\nt2,a\nt3,a,b,c\n", schema: schema,
                options: CSVReadOptions(defaultRecordType: "Task")))
        #expect(
            found.map(\.description) == [
                "t.csv:3:1: line 3 has 2 cells, the header has 3", "t.csv:4:1: line 4 has 4 cells, the header has 3",
            ])
    }

    @Test("a recordType column chooses the type of each row")
    func typeColumn() throws {
        let schema = try SchemaParser.parse("DEFINE SCHEMA RECORD TYPE A (x STRING); RECORD TYPE B (x INT64);")
        let read = records(
            try csvRecords("recordType,recordName,x\nA,a1,hello\nB,b1,42\n", schema: schema, options: CSVReadOptions()))
        #expect(read.map(\.recordType) == ["A", "B"])
        #expect(read[1].fields["x"] == .int64(42))
    }

    @Test("--name-template names rows from their fields, the same way every time")
    func nameTemplate() throws {
        let schema = try SchemaParser.parse(
            "DEFINE SCHEMA RECORD TYPE DailyEntry (date TIMESTAMP, authorUserRecordID REFERENCE, eveningMood INT64);")
        let template = try NameTemplate("DailyEntry_{date:yyyy-MM-dd}_{authorUserRecordID}")
        let text =
            "date,authorUserRecordID,eveningMood\n2025-10-10,_ABC123DEF456,1\n2025-10-10T23:30:00-02:00,_ABC123DEF456,2\n"
        let options = CSVReadOptions(defaultRecordType: "DailyEntry", nameTemplate: template)
        #expect(
            records(try csvRecords(text, schema: schema, options: options)).map(\.recordName) == [
                "DailyEntry_2025-10-10__ABC123DEF456", "DailyEntry_2025-10-11__ABC123DEF456",
            ])
        var berlin = options
        berlin.values = CSVValues(timeZone: TimeZone(identifier: "America/Sao_Paulo"))
        #expect(
            records(try csvRecords(text, schema: schema, options: berlin)).last?.recordName
                == "DailyEntry_2025-10-10__ABC123DEF456")
        let missing = issues(
            try csvRecords("date,authorUserRecordID,eveningMood\n2025-10-10,,1\n", schema: schema, options: options))
        #expect(
            missing.first?.message.description
                == "the name template needs field 'authorUserRecordID', which this row leaves empty")
        #expect(throws: ValueError.self) { try NameTemplate("no fields") }
        #expect(throws: ValueError.self) { try NameTemplate("open {brace") }
        #expect(
            NameTemplate.format(1_768_208_400_123, pattern: "yyyyMMdd-HHmmss.SSS", timeZone: nil)
                == "20260112-090000.123")
        // Without a template, rows get random names.
        let unnamed = records(
            try csvRecords(
                "eveningMood\n1\n1\n", schema: schema, options: CSVReadOptions(defaultRecordType: "DailyEntry")))
        #expect(Set(unnamed.map(\.recordName)).count == 2)
    }

    @Test("--spreadsheet-safe output reads back to the original text")
    func spreadsheetRoundTrip() throws {
        let schema = try SchemaParser.parse("DEFINE SCHEMA RECORD TYPE Task (title STRING, n INT64);")
        var record = Record(id: RecordID(recordName: "t1"), recordType: "Task")
        record.fields = ["title": .string("=HYPERLINK(\"http://evil\",\"click\")"), "n": .int64(-3)]
        let text = try writeCSV(
            [record], type: "Task", schema: schema, options: CSVWriteOptions(dialect: CSVDialect(spreadsheetSafe: true))
        )
        #expect(text == "recordName,title,n\r\nt1,\"'=HYPERLINK(\"\"http://evil\"\",\"\"click\"\")\",-3\r\n")
        let back = records(
            try csvRecords(
                text, schema: schema, options: CSVReadOptions(spreadsheetSafe: true, defaultRecordType: "Task")))
        #expect(back == [record])
        let raw = records(try csvRecords(text, schema: schema, options: CSVReadOptions(defaultRecordType: "Task")))
        #expect(raw.first?.fields["title"] == .string("'=HYPERLINK(\"http://evil\",\"click\")"))
    }

    @Test("Python's csv module reads our cells back unchanged")
    func pythonReadsOurCSV() throws {
        // python3 is a prerequisite of the suite (.ci/run installs it): without it this fails.
        let python = try ExternalTool.path("python3")
        let text = try writeCSV(
            EveryType.records, type: "Thing", schema: EveryType.schema, options: CSVWriteOptions(includeSystem: true))
        let ours = try texts(rows(text)).map { $0.map { $0 ?? "" } }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-py-\(UUID().uuidString).csv")
        try Data(text.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [
            "-c",
            "import csv, json, sys\nwith open(sys.argv[1], newline='', encoding='utf-8') as f:\n    print(json.dumps(list(csv.reader(f))))",
            file.path,
        ]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let theirs = try JSONDecoder().decode([[String]].self, from: output)
        #expect(theirs == ours)
    }
}
