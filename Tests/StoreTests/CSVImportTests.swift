import Formats
import Foundation
import Records
import Testing

@testable import SQLiteStore
@testable import StoreCore

@Suite("CSV import")
struct CSVImportTests {
    func importCSV(
        _ text: String, into store: RecordStore, options: CSVReadOptions,
        importOptions: ImportOptions = ImportOptions(), name: String = "tasks.csv"
    ) throws -> ImportSummary {
        let reader = CSVRecordReader(
            input: ByteInput(name: name, bytes: Array(text.utf8)), schema: store.schema, options: options)
        return try RecordImporter(store: store, options: importOptions).run([reader])
    }

    @Test("a bad row deep in a large file leaves the store byte for byte as it was")
    func atomicity() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema)
        _ = try importText(task("keep", #""title":{"value":"already here"}"#), into: store)
        let before = fileBytes(store.path)
        var text = "recordName,title,priority,due,tags\r\n"
        for i in 0..<30_000 {
            let due = i == 28_123 ? "the day after tomorrow" : "2026-01-\(10 + i % 9)T09:00:00.000Z"
            text += "t\(i),\"Task \(i), with a comma\",\(i),\(due),\"[\"\"a\"\"]\"\r\n"
        }
        do {
            _ = try importCSV(text, into: store, options: CSVReadOptions(defaultRecordType: "Task"), name: "big.csv")
            Issue.record("the import should fail")
        } catch let failure as ImportFailure {
            #expect(
                failure.summary.issues.map(\.description) == [
                    "big.csv:28125:41: record 't28123' (Task), field 'due': expected TIMESTAMP (a date such as 2026-01-12, 2026-01-12 09:00 or 2026-01-12T09:00:00.000Z), found \"the day after tomorrow\""
                ])
        }
        #expect(fileBytes(store.path) == before)
        #expect(try allRecords(RecordStore(path: store.path, create: false)).map(\.recordName) == ["keep"])
    }

    @Test("re-importing rows named by a template is an idempotent upsert")
    func idempotent() throws {
        let scratch = Scratch()
        let store = try scratch.store(
            "DEFINE SCHEMA RECORD TYPE DailyEntry (date TIMESTAMP QUERYABLE, authorUserRecordID REFERENCE, eveningMood INT64, gratitude STRING);"
        )
        let text =
            "date,authorUserRecordID,eveningMood,gratitude\n2025-10-10,_A1,0,Dinner\n2025-10-10,_B2,1,\n2025-10-11,_A1,2,\"Walk, talk\"\n"
        let options = CSVReadOptions(
            defaultRecordType: "DailyEntry",
            nameTemplate: try NameTemplate("DailyEntry_{date:yyyy-MM-dd}_{authorUserRecordID}"))
        #expect(try importCSV(text, into: store, options: options).totals.inserted == 3)
        let again = try importCSV(text, into: store, options: options)
        #expect(again.totals.unchanged == 3)
        #expect(again.totals.inserted == 0)
        let names = try allRecords(store).map(\.recordName)
        #expect(names == ["DailyEntry_2025-10-10__A1", "DailyEntry_2025-10-10__B2", "DailyEntry_2025-10-11__A1"])
    }

    @Test("every sample app goes store → CSV → new store unchanged, system fields included")
    func samplesRoundTrip() throws {
        let scratch = Scratch()
        for app in ["family-todo", "family-calendar", "relationship-checkin", "screen-time-rewards", "notes"] {
            let store = try scratch.sampleStore(app)
            let copy = try RecordStore(path: scratch.path("\(app)-copy.sqlite"))
            try copy.importSchema(store.schema)
            for type in store.schema.recordTypes {
                let path = scratch.path("\(app)-\(type.name).csv")
                let writer = try CSVRecordWriter(
                    output: try OutputFile(path: path), type: type, options: CSVWriteOptions(includeSystem: true))
                try store.read { session in
                    try session.forEach(RecordQuery(recordTypes: [type.name])) { try writer.write($0) }
                }
                try writer.finish()
                let reader = CSVRecordReader(
                    input: try ByteInput(path: path), schema: copy.schema,
                    options: CSVReadOptions(defaultRecordType: type.name))
                _ = try RecordImporter(store: copy, options: ImportOptions(mode: .insert)).run([reader])
            }
            #expect(try allRecords(copy) == allRecords(store), "\(app)")
        }
    }
}
