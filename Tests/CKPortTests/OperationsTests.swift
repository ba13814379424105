import CKPort
import Formats
import Foundation
import Records
import SampleApps
import StoreCore
import TestSupport
import Testing

/// The operations as a Swift program calls them: typed requests in, typed results out,
/// progress through a callback.
@Suite("operations")
struct OperationsTests {
    /// A store of `count` generated family-todo records, imported through the operation.
    func generatedStore(_ scratch: Scratch, count: Int, name: String = "store.sqlite") throws -> (
        RecordStore, ImportSummary, [OperationProgress]
    ) {
        let file = scratch.path("generated.jsonl")
        if !FileManager.default.fileExists(atPath: file) {
            var settings = FormatSettings()
            settings[JSONWriteSettings.self] = JSONWriteSettings(style: .canonical)
            let writer = try RecordFormat.jsonLines.makeWriter!(
                try OutputFile(path: file), RecordWriteContext(schema: SampleApp.familyTodo.schema, settings: settings))
            try Exports.stream(into: writer, progress: nil) { emit in
                try SampleApp.familyTodo.generate(records: count, seed: 7, emit: emit)
            }
        }
        let store = try scratch.store(SampleApp.familyTodo.schemaText, name: name)
        var steps: [OperationProgress] = []
        let summary = try Imports.run(ImportRequest(inputs: [.file(file)]), into: store) { steps.append($0) }
        return (store, summary, steps)
    }

    func exportText(_ store: RecordStore, _ scratch: Scratch, _ name: String) throws -> String {
        let path = scratch.path(name)
        _ = try Exports.records(from: store, to: .file(path), request: ExportRequest(format: .jsonLines))
        return scratch.text(name)
    }

    @Test("import reports what it did and its progress; export writes the records back byte for byte")
    func importAndExport() throws {
        let scratch = Scratch()
        let store = try scratch.store(try String(contentsOfFile: sample("family-todo", "schema.ckdb"), encoding: .utf8))
        let summary = try Imports.run(
            ImportRequest(inputs: [.file(sample("family-todo", "records.jsonl"))]), into: store)
        #expect(summary.totals.inserted == 80 && summary.totals.rejected == 0)
        #expect(summary.token != nil)
        let result = try Exports.records(
            from: store, to: .file(scratch.path("out.jsonl")), request: ExportRequest(format: .jsonLines))
        #expect(result.records == 80 && result.files.map(\.path) == [scratch.path("out.jsonl")])
        // The same records, line for line, in the store's order (the sample is in the order it was made).
        let given = try String(contentsOfFile: sample("family-todo", "records.jsonl"), encoding: .utf8)
        #expect(scratch.text("out.jsonl").split(separator: "\n").sorted() == given.split(separator: "\n").sorted())
        #expect(scratch.text("out.jsonl") != given)
        #expect(result.token == summary.token)

        // A file per record type into a folder the export makes.
        let folder = scratch.path("sheets")
        let sheets = try Exports.records(
            from: store, to: .directory(folder),
            request: ExportRequest(query: RecordQuery(recordTypes: ["Task", "Household"]), format: .csv))
        #expect(sheets.files.map { ($0.path as NSString).lastPathComponent } == ["Task.csv", "Household.csv"])
        let held = try store.read { try $0.stats() }.entries
        for file in sheets.files {
            #expect(file.records == held.filter { $0.recordType == file.recordType }.reduce(0) { $0 + $1.records })
            #expect(file.records > 0)
        }
        // An unknown type fails before anything is left behind.
        #expect(throws: OperationError.unknownRecordType("Nope", known: store.schema.recordTypes.map(\.name).sorted()))
        {
            _ = try Exports.records(
                from: store, to: .directory(scratch.path("none")),
                request: ExportRequest(query: RecordQuery(recordTypes: ["Nope"]), format: .csv))
        }
        #expect(!FileManager.default.fileExists(atPath: scratch.path("none")))
    }

    @Test("progress comes in order and ends at the whole: import by bytes, verify by bytes, backup by records")
    func progress() throws {
        let scratch = Scratch()
        let (store, summary, importSteps) = try generatedStore(scratch, count: 40_000)
        #expect(summary.totals.inserted == 40_000)
        #expect(!importSteps.isEmpty)
        #expect(importSteps.map(\.records) == importSteps.map(\.records).sorted())
        #expect(
            importSteps.allSatisfy { ($0.fraction ?? 0) <= 1 }
                && importSteps.last!.total
                    == Int64(FileManager.default.contents(atPath: scratch.path("generated.jsonl"))!.count)
        )

        var backupSteps: [OperationProgress] = []
        let bundle = scratch.path("all.ckbundle")
        let backup = try Backups.write(store, to: bundle) { backupSteps.append($0) }
        #expect(backup.manifest.recordCount == 40_000 && !backup.isIncremental)
        #expect(backupSteps.count >= 4 && backupSteps.allSatisfy { $0.total == 40_000 })
        #expect(backupSteps.map(\.records) == backupSteps.map(\.records).sorted())

        var verifySteps: [OperationProgress] = []
        let check = try Backups.verify(bundle) { verifySteps.append($0) }
        #expect(check.records == 40_000)
        #expect(verifySteps.count >= 4 && verifySteps.allSatisfy { ($0.fraction ?? 2) <= 1 })
    }

    @Test("backup, verify and restore of a chain; the chain is checked before anything is written")
    func backupChain() throws {
        let scratch = Scratch()
        let (store, _, _) = try generatedStore(scratch, count: 2_000)
        let monday = scratch.path("monday.ckbundle")
        let tuesday = scratch.path("tuesday.ckbundle")
        _ = try Backups.write(store, to: monday)
        let tasks = try store.read { session in
            var names: [String] = []
            try session.forEach(RecordQuery(recordTypes: ["Task"], limit: 3)) { names.append($0.recordName) }
            return names
        }
        let deleted = try Deletes.records(named: tasks, in: store)
        #expect(Set(deleted.map(\.id.recordName)).isSuperset(of: tasks))
        // A deleted task's name made again, as a household: the increment holds only the
        // household, and the restore of the chain must still leave no task under that name.
        var household = try store.read { session in
            var found: [Record] = []
            try session.forEach(RecordQuery(recordTypes: ["Household"], limit: 1)) { found.append($0) }
            return found[0]
        }
        household.id = try #require(deleted.first { $0.id.recordName == tasks[0] }).id
        _ = try RecordImporter(store: store, options: ImportOptions(mode: .insert)).run([
            ArrayRecordSource([household])
        ])
        #expect(try store.read { try $0.record(household.id)?.recordType } == "Household")
        let incremental = try Backups.write(store, to: tuesday, options: BackupOptions(since: monday))
        #expect(incremental.isIncremental && incremental.manifest.baseToken != nil)

        let check = try Backups.verify(monday)
        #expect(check.records == 2_000)
        #expect(check.recordsByType.values.reduce(0, +) == 2_000)

        let restored = try RecordStore(path: scratch.path("restored.sqlite"))
        let summary = try Backups.restore([monday, tuesday], into: restored)
        #expect(summary.totals.inserted == 2_000)
        #expect(try restored.read { try $0.record(household.id)?.recordType } == "Household")
        #expect(
            try exportText(restored, scratch, "restored.jsonl") == (try exportText(store, scratch, "original.jsonl")))

        // Out of order, a full bundle inside, a store that already holds records.
        let other = try RecordStore(path: scratch.path("other.sqlite"))
        #expect(throws: OperationError.chainStartsIncremental(bundle: tuesday, base: incremental.manifest.baseToken!)) {
            _ = try Backups.restore([tuesday, monday], into: other)
        }
        #expect(throws: OperationError.chainFullBundleInside(bundle: monday, previous: monday)) {
            _ = try Backups.restore([monday, monday], into: other)
        }
        #expect(
            throws: OperationError.storeNotEmpty(
                store: restored.path, records: try restored.read { try $0.stats().totalRecords })
        ) {
            _ = try Backups.restore([monday], into: restored)
        }
        #expect(try other.read { try $0.stats().totalRecords } == 0)
    }

    @Test("a migration set applied with a backup beside it, heard of before the records change")
    func migrations() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore("notes")
        let set = try SchemaMigrations.load(packageRoot.appendingPathComponent("migrations/notes").path)
        let plan = try SchemaMigrations.plan(set, in: store)
        #expect(plan.map(\.version) == [1, 2, 3])
        var heard: [String] = []
        let backup = scratch.path("before.ckbundle")
        let result = try SchemaMigrations.apply(
            set, to: store, backup: .at(backup),
            backedUp: { path, summary in
                heard.append(path)
                #expect(summary.manifest.recordCount == 60)
            })
        #expect(heard == [backup] && result.backup == backup)
        #expect(
            result.reports.map(\.version) == [1, 2, 3] && result.before.currentVersion == 0
                && result.after.currentVersion == 3)
        #expect(try Backups.verify(backup).records == 60)
        let again = try SchemaMigrations.apply(set, to: store, backup: .at(scratch.path("again.ckbundle")))
        #expect(again.reports.isEmpty && !FileManager.default.fileExists(atPath: scratch.path("again.ckbundle")))
        #expect(throws: OperationError.noMigrations(directory: scratch.path("empty"))) {
            try FileManager.default.createDirectory(atPath: scratch.path("empty"), withIntermediateDirectories: true)
            _ = try SchemaMigrations.load(scratch.path("empty"))
        }
    }
}

/// Many small inputs read one reader at a time (how a calendar pull imports the events it
/// fetched): the same records as read all at once, and a bad one named by its own input.
@Suite("An import of many inputs, one reader at a time")
struct OneReaderAtATimeTests {
    func request(_ events: [String], oneAtATime: Bool, schema: Schema) throws -> ImportRequest {
        var settings = FormatSettings()
        settings[CalendarReadSettings.self] = CalendarReadSettings(
            mapping: try CalendarMapping.parse(
                try #require(SampleApp.familyCalendar.calendarMappingText), file: "mapping", schema: schema),
            fixedFields: [("familyID", "family-1")])
        var request = ImportRequest(
            inputs: events.enumerated().map { number, event in
                ImportInput(.bytes(Array(event.utf8), name: "event-\(number).ics"), format: .iCalendar)
            }, defaultZone: ZoneID(scope: .private, zoneName: "pulled"), settings: settings)
        request.oneReaderAtATime = oneAtATime
        return request
    }

    func event(_ number: Int, start: String = "20261207T180000Z") -> String {
        [
            "BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//test//EN", "BEGIN:VEVENT", "UID:pulled-\(number)",
            "DTSTAMP:20261201T000000Z", "DTSTART:\(start)", "DTEND:20261207T190000Z", "SUMMARY:Practice \(number)",
            "END:VEVENT", "END:VCALENDAR", "",
        ].joined(separator: "\r\n")
    }

    @Test(
        "the same records as every reader made at once; an invalid event names its own input and line, and nothing is written"
    )
    func chained() throws {
        let events = (0..<40).map { event($0) }
        let together = try Scratch().sampleStore(.familyCalendar)
        let chained = try Scratch().sampleStore(.familyCalendar)
        let all = try Imports.run(try request(events, oneAtATime: false, schema: together.schema), into: together)
        let one = try Imports.run(try request(events, oneAtATime: true, schema: chained.schema), into: chained)
        #expect(one.counts["Event"]?.inserted == 40 && all.counts["Event"]?.inserted == 40)
        let query = RecordQuery(recordTypes: ["Event"], scope: .private, zoneName: "pulled")
        let read = { (store: RecordStore) in
            try store.read { session in
                var found: [String] = []
                try session.forEach(query) { found.append("\($0.recordName) \($0.fields)") }
                return found
            }
        }
        #expect(try read(chained) == read(together))
        #expect(try read(chained).count == 40)

        // The 31st event's start is not a time: the error names event-30.ics, line 7.
        var bad = events
        bad[30] = event(30, start: "tomorrow")
        let before = try chained.read { try $0.count(RecordQuery(recordTypes: ["Event"])) }
        #expect {
            _ = try Imports.run(try request(bad, oneAtATime: true, schema: chained.schema), into: chained)
        } throws: { error in
            "\(error)".contains(#"event-30.ics:7: record 'pulled-30' (Event): DTSTART is not a date or date-time"#)
        }
        #expect(try chained.read { try $0.count(RecordQuery(recordTypes: ["Event"])) } == before)
    }
}
