import Formats
import Foundation
import Records
import Testing

@testable import SQLiteStore
@testable import StoreCore

@Suite("Import")
struct ImportTests {
    @Test("upsert sets the given fields and keeps the others; unchanged records are counted")
    func upsert() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema)
        var summary = try importText(
            task("t1", #""title":{"value":"Trash"},"priority":{"value":1}"#) + "\n"
                + task("t2", #""title":{"value":"Dishes"}"#), into: store)
        #expect(summary.counts["Task"] == ImportCounts(inserted: 2))
        summary = try importText(
            task("t1", #""status":{"value":"next"}"#) + "\n" + task("t2", #""title":{"value":"Dishes"}"#), into: store)
        #expect(summary.counts["Task"] == ImportCounts(updated: 1, unchanged: 1))
        let t1 = try #require(try store.read { try $0.record(RecordID(recordName: "t1")) })
        #expect(t1.fields == ["title": .string("Trash"), "priority": .int64(1), "status": .string("next")])
    }

    @Test("insert refuses an existing record name")
    func insert() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema)
        _ = try importText(task("t1", #""title":{"value":"Trash"}"#), into: store)
        let failure = #expect(throws: ImportFailure.self) {
            try importText(
                task("t1", #""title":{"value":"Other"}"#), into: store, options: ImportOptions(mode: .insert))
        }
        #expect(
            failure?.summary.issues.first?.message.description.contains(
                "already exists (the insert mode adds new records only")
                == true)
        #expect(try store.read { try $0.record(RecordID(recordName: "t1")) }?.fields["title"] == .string("Trash"))
    }

    @Test("replace clears the fields not given")
    func replace() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema)
        _ = try importText(task("t1", #""title":{"value":"Trash"},"priority":{"value":1}"#), into: store)
        let summary = try importText(
            task("t1", #""status":{"value":"done"}"#), into: store, options: ImportOptions(mode: .replace))
        #expect(summary.counts["Task"]?.updated == 1)
        #expect(try store.read { try $0.record(RecordID(recordName: "t1")) }?.fields == ["status": .string("done")])
    }

    @Test("newer keeps the later modified time; a tie keeps the stored record")
    func newer() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema)
        _ = try importText(
            task("t1", #""title":{"value":"v100"}"#, modified: 100) + "\n"
                + task("t2", #""title":{"value":"v100"}"#, modified: 100), into: store)
        let input = [
            task("t1", #""title":{"value":"v50"}"#, modified: 50),
            task("t2", #""title":{"value":"v100b"}"#, modified: 100),
            task("t3", #""title":{"value":"new"}"#, modified: 1),
        ].joined(separator: "\n")
        var summary = try importText(input, into: store, options: ImportOptions(mode: .newer))
        #expect(summary.counts["Task"] == ImportCounts(inserted: 1, unchanged: 2))
        summary = try importText(
            task("t1", #""title":{"value":"v200"}"#, modified: 200) + "\n" + task("t2", #""title":{"value":"none"}"#),
            into: store, options: ImportOptions(mode: .newer))
        #expect(summary.counts["Task"] == ImportCounts(updated: 1, unchanged: 1))
        let records = try allRecords(store)
        #expect(records.map { $0.fields["title"] } == [.string("v200"), .string("v100"), .string("new")])
        #expect(records[0].modified?.timestamp == 200)
    }

    @Test("a bad record in the middle of a large file leaves the store byte for byte as it was")
    func atomicity() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema)
        _ = try importText(task("keep", #""title":{"value":"already here"}"#), into: store)
        let before = fileBytes(store.path)
        var lines: [String] = []
        for i in 0..<20_000 {
            lines.append(
                i == 12_345
                    ? task("t\(i)", #""priority":{"value":"high"}"#)
                    : task(
                        "t\(i)",
                        #""title":{"value":"Task \#(i)"},"priority":{"value":\#(i)},"due":{"value":\#(1_768_208_400_000 + Int64(i))}"#
                    ))
        }
        lines.append(task("keep", #""title":{"value":"changed"}"#))
        do {
            _ = try importText(lines.joined(separator: "\n"), name: "big.jsonl", into: store)
            Issue.record("the import should fail")
        } catch let failure as ImportFailure {
            #expect(failure.summary.issues.count == 1)
            #expect(
                failure.summary.issues[0].description
                    == "big.jsonl:12346:74 (fields.priority.value): record 't12345' (Task), field 'priority': expected INT64 (a whole number), found the string \"high\""
            )
            #expect(failure.description.contains("nothing was imported: the store is unchanged"))
        }
        #expect(fileBytes(store.path) == before)
        let reopened = try RecordStore(path: store.path, create: false)
        #expect(try allRecords(reopened).map(\.recordName) == ["keep"])
        #expect(try reopened.integrityCheck() == ["ok"])
        #expect(try reopened.read { $0.currentToken.sequence } == 1)
    }

    @Test("--skip-invalid imports the rest and hands every rejected record over with its reason")
    func skipInvalid() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema)
        let input = [
            task("t1", #""title":{"value":"ok"}"#), "{not json", task("_bad", #""title":{"value":"x"}"#),
            task("t4", #""colour":{"value":"red","type":"STRING"}"#), task("t5", #""title":{"value":"ok too"}"#),
        ].joined(separator: "\n")
        let rejects = CollectingRejects()
        let summary = try importText(input, into: store, options: ImportOptions(skipInvalid: true), rejects: rejects)
        #expect(summary.totals.inserted == 2)
        #expect(summary.totals.rejected == 3)
        #expect(rejects.rejected.map { $0.0.position.line } == [2, 3, 4])
        #expect(rejects.rejected[0].0.message.description.hasPrefix("not valid JSON"))
        #expect(rejects.rejected[1].0.message.description.contains("cannot start with '_'"))
        #expect(rejects.rejected[2].0.field == "colour")
        #expect(rejects.rejected[2].0.position.column == 68)
        #expect(
            rejects.rejected[2].1.map { String(decoding: $0, as: UTF8.self) }
                == task("t4", #""colour":{"value":"red","type":"STRING"}"#))
        #expect(try allRecords(store).map(\.recordName) == ["t1", "t5"])
    }

    @Test("a dry run counts what would happen and writes nothing")
    func dryRun() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema)
        _ = try importText(task("t1", #""title":{"value":"a"}"#), into: store)
        let before = fileBytes(store.path)
        let summary = try importText(
            task("t1", #""title":{"value":"b"}"#) + "\n" + task("t2", #""title":{"value":"c"}"#), into: store,
            options: ImportOptions(dryRun: true))
        #expect(summary.dryRun)
        #expect(summary.counts["Task"] == ImportCounts(inserted: 1, updated: 1))
        #expect(fileBytes(store.path) == before)
    }

    @Test("--allow-new-fields grows the schema as CloudKit's development environment does")
    func newFields() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema)
        let input =
            task("t1", #""colour":{"value":"red","type":"STRING"},"weight":{"value":2.5}"#) + "\n"
            + #"{"recordName":"n1","recordType":"Note","fields":{"text":{"value":"hi"}}}"#
        #expect(throws: ImportFailure.self) { try importText(input, into: store) }
        let summary = try importText(input, into: store, options: ImportOptions(allowNewFields: true))
        #expect(summary.totals.inserted == 2)
        #expect(summary.schemaChanges == ["+ Task.colour STRING", "+ Task.weight DOUBLE", "+ Note.text STRING"])
        #expect(store.schema.recordType(named: "Task")?.field(named: "weight")?.type == .double)
        let reopened = try RecordStore(path: store.path, create: false)
        #expect(reopened.schema.recordType(named: "Note")?.field(named: "text")?.type == .string)
        #expect(try reopened.read { try $0.record(RecordID(recordName: "n1")) }?.fields["text"] == .string("hi"))
    }

    @Test("a record name is unique in its zone, whatever the type")
    func nameCollision() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema + "\n RECORD TYPE Note (text STRING);")
        _ = try importText(task("shared-name", #""title":{"value":"a"}"#), into: store)
        let note = #"{"recordName":"shared-name","recordType":"Note","fields":{"text":{"value":"x"}}}"#
        do {
            _ = try importText(note, into: store)
            Issue.record("accepted")
        } catch let failure as ImportFailure {
            #expect(
                failure.summary.issues[0].message
                    == "record name 'shared-name' is already used in zone _defaultZone by a record of type Task")
        }
        let otherZone =
            #"{"recordName":"shared-name","recordType":"Note","zoneID":{"zoneName":"Other"},"fields":{"text":{"value":"x"}}}"#
        #expect(try importText(otherZone, into: store).totals.inserted == 1)
    }

    @Test("references stay inside their zone")
    func crossZoneReference() throws {
        let scratch = Scratch()
        let store = try scratch.store("DEFINE SCHEMA RECORD TYPE A (parent REFERENCE);")
        let text =
            #"{"recordName":"a","recordType":"A","zoneID":{"zoneName":"Z1"},"fields":{"parent":{"value":{"recordName":"p","zoneID":{"zoneName":"Z2"}},"type":"REFERENCE"}}}"#
        do {
            _ = try importText(text, into: store)
            Issue.record("accepted")
        } catch let failure as ImportFailure {
            #expect(
                failure.summary.issues[0].message.description.contains(
                    "must point into its record's own zone (Z1); this one points into Z2"))
            #expect(failure.summary.issues[0].position.path == "fields.parent.value.zoneID")
        }
    }

    @Test("every sample imports, and exports back to the same records")
    func samples() throws {
        let scratch = Scratch()
        for app in ["family-todo", "family-calendar", "relationship-checkin", "screen-time-rewards", "notes"] {
            let store = try scratch.sampleStore(app)
            let exported = try allRecords(store)
            let text = try String(
                contentsOf: packageRoot.appendingPathComponent("samples/\(app)/records.jsonl"), encoding: .utf8)
            let codec = JSONRecordCodec(schema: store.schema)
            let original = try text.split(separator: "\n").map { try codec.decode(try JSONParser.parse(String($0))) }
            #expect(Set(exported) == Set(original), "\(app)")
            #expect(exported.count == original.count)
        }
    }
}
