import Foundation
import Records
import SQLiteStore
import StoreCore
import Testing

/// A ckport process started in the background; `finish()` waits for it.
final class RunningCKPort {
    let process: Process
    private let outURL = FileManager.default.temporaryDirectory.appendingPathComponent(
        "ckport-out-\(UUID().uuidString)")
    private let errURL = FileManager.default.temporaryDirectory.appendingPathComponent(
        "ckport-err-\(UUID().uuidString)")

    init(_ arguments: [String], in directory: URL, environment: [String: String] = [:]) throws {
        process = ckportProcess(arguments, in: directory, environment: environment)
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: outURL)
        process.standardError = try FileHandle(forWritingTo: errURL)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// Standard output so far.
    var stdoutSoFar: String { String(decoding: (try? Data(contentsOf: outURL)) ?? Data(), as: UTF8.self) }

    /// Standard error so far.
    var stderrSoFar: String { String(decoding: (try? Data(contentsOf: errURL)) ?? Data(), as: UTF8.self) }

    func finish() -> Run {
        process.waitUntilExit()
        defer {
            try? FileManager.default.removeItem(at: outURL)
            try? FileManager.default.removeItem(at: errURL)
        }
        return Run(
            status: process.terminationStatus,
            stdout: String(decoding: (try? Data(contentsOf: outURL)) ?? Data(), as: UTF8.self),
            stderr: stderrSoFar)
    }
}

/// Waits until `condition` holds, up to `seconds`.
func eventually(_ seconds: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(20_000)
    }
    return condition()
}

/// Field names in the stored schema against the columns of each type's table: they must agree.
func schemaAndTablesAgree(_ path: String) throws -> [String] {
    let store = try RecordStore(path: path, create: false)
    let schema = store.schema
    var problems: [String] = []
    for type in schema.recordTypes {
        let output = try sqlite(path, "SELECT name FROM pragma_table_info('\(type.name)')")
        let columns = Set(
            output.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("___") && !$0.hasSuffix(":action") })
        let fields = Set(type.fields.map(\.name).filter { !$0.hasPrefix("___") })
        if columns != fields {
            problems.append("\(type.name): schema \(fields.sorted()) but table \(columns.sorted())")
        }
    }
    return problems
}

/// Runs the sqlite3 shell (installed by CI) on a store.
func sqlite(_ path: String, _ sql: String) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["sqlite3", path, sql]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0, "sqlite3 \(sql)")
    return String(decoding: data, as: UTF8.self)
}

func noteLines(_ range: Range<Int>, field: String, prefix: String) -> String {
    range.map { i in
        #"{"recordName":"\#(prefix)-\#(i)","recordType":"Note","zoneID":{"zoneName":"Notes"},"fields":{"title":{"value":"note \#(i)"},"\#(field)":{"value":"\#(field) of \#(i)"}}}"#
    }.joined(separator: "\n") + "\n"
}

@Suite("several ckport processes on one store")
struct ConcurrencyTests {
    @Test(
        "a reader is never locked out by a writer and sees the last committed state; a waiting writer says so and goes on"
    )
    func readersAndWaitingWriters() throws {
        let folder = Scratch()
        #expect(
            try ckport(["import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl")], in: folder.url)
                .status == 0)
        let before = try ckport(["export", "-o", "before.jsonl"], in: folder.url)
        #expect(before.status == 0)
        folder.write("more.jsonl", noteLines(0..<3, field: "content", prefix: "waiting"))

        let store = try RecordStore(path: folder.path("ckport.sqlite"), create: false)
        var waiter: RunningCKPort?
        try store.write { session in
            var record = Record(
                id: RecordID(recordName: "uncommitted", zone: ZoneID(scope: .private, zoneName: "Notes")),
                recordType: "Note")
            record["title"] = .string("not yet")
            _ = try session.save(record, mode: .upsert)
            // A reader during the write: it must not wait, and sees the state before the write.
            let during = try ckport(["export", "-o", "during.jsonl", "--wait", "0"], in: folder.url)
            #expect(during.status == 0, "\(during.stderr)")
            #expect(folder.data("during.jsonl") == folder.data("before.jsonl"))
            // A writer that will not wait long gives up with a message about the store, not SQL.
            let impatient = try ckport(["import", "more.jsonl", "--wait", "0.5"], in: folder.url)
            #expect(impatient.status == 3)
            #expect(
                impatient.stderr.contains("another process is still writing to the store ckport.sqlite"),
                "\(impatient.stderr)")
            #expect(impatient.stderr.contains("--wait"))
            #expect(
                !impatient.stderr.contains("SQL") && !impatient.stderr.contains("PRAGMA")
                    && !impatient.stderr.contains("BEGIN"))
            // A patient one waits, and says so.
            let patient = try RunningCKPort(["import", "more.jsonl", "--wait", "60"], in: folder.url)
            waiter = patient
            #expect(
                eventually(20) { patient.stderrSoFar.contains("waiting for another ckport writing to ckport.sqlite…") },
                "\(patient.stderrSoFar)")
        }
        let patient = try #require(waiter).finish()
        #expect(patient.status == 0, "\(patient.stderr)")
        #expect(patient.stderr.contains("imported 3 records"))
        let after = try ckport(["export", "--type", "Note", "--where", "title == 'not yet'"], in: folder.url)
        #expect(after.stdout.contains("uncommitted"))
    }

    @Test("a schema change waiting for another write builds on what that write committed, in a loop of real processes")
    func schemaRaces() throws {
        let folder = Scratch()
        #expect(try ckport(["import", sample("notes", "schema.ckdb")], in: folder.url).status == 0)
        let baseSchema = try String(contentsOfFile: sample("notes", "schema.ckdb"), encoding: .utf8)
        for round in 0..<3 {
            // A large import adds a field (development-style) while a schema import, started
            // during it, replaces the schema with one that lacks that field.
            let added = "added\(round)"
            folder.write("import-\(round).jsonl", noteLines(0..<4000, field: added, prefix: "r\(round)"))
            let importing = try RunningCKPort(
                ["import", "import-\(round).jsonl", "--allow-new-fields"], in: folder.url)
            usleep(300_000)
            // The schema file keeps the fields earlier rounds added, so the two processes
            // disagree only about this round's field.
            let earlier = (0..<round).map { "        added\($0) STRING,\n" }.joined()
            folder.write(
                "schema-\(round).ckdb",
                baseSchema.replacingOccurrences(
                    of: "    RECORD TYPE Note (\n", with: "    RECORD TYPE Note (\n" + earlier))
            let schemaImport = try ckport(["schema", "import", "schema-\(round).ckdb"], in: folder.url)
            let imported = importing.finish()
            #expect(imported.status == 0, "\(imported.stderr)")
            // Either the schema import came first (then the import added its field again), or
            // it came second and refused to drop a field that holds values. Never both exit 0
            // with the field gone.
            if schemaImport.status != 0 {
                #expect(schemaImport.status == 2, "\(schemaImport.stderr)")
                #expect(schemaImport.stderr.contains("field Note.\(added) would go away"), "\(schemaImport.stderr)")
            }
            #expect(!schemaImport.stderr.contains("duplicate column"))
            #expect(try schemaAndTablesAgree(folder.path("ckport.sqlite")) == [])
            let exported = try ckport(
                ["export", "--type", "Note", "--where", "\(added) == '\(added) of 3999'", "--style", "plain"],
                in: folder.url)
            #expect(exported.status == 0, "\(exported.stderr)")
            #expect(exported.stdout.contains("\"\(added)\":\"\(added) of 3999\""), "round \(round): \(exported.stderr)")
        }
    }

    @Test("a schema import that read the schema before another process changed it does not undo that change")
    func staleSchemaIsNotWrittenBack() throws {
        let folder = Scratch()
        #expect(try ckport(["import", sample("notes", "schema.ckdb")], in: folder.url).status == 0)
        folder.write("same.ckdb", try String(contentsOfFile: sample("notes", "schema.ckdb"), encoding: .utf8))
        let store = try RecordStore(path: folder.path("ckport.sqlite"), create: false)
        var schemaImport: RunningCKPort?
        try store.write { session in
            try session.addField(FieldDefinition(name: "mood", type: .string), toType: "Note")
            var record = Record(
                id: RecordID(recordName: "with-mood", zone: ZoneID(scope: .private, zoneName: "Notes")),
                recordType: "Note")
            record["mood"] = .string("calm")
            _ = try session.save(record, mode: .upsert)
            // Opened now, it reads the schema without 'mood'; it writes after this commits.
            let started = try RunningCKPort(["schema", "import", "same.ckdb"], in: folder.url)
            schemaImport = started
            #expect(eventually(20) { started.stderrSoFar.contains("waiting for another ckport") })
        }
        let result = try #require(schemaImport).finish()
        #expect(result.status == 2, "\(result.stderr)")
        #expect(
            result.stderr.contains("field Note.mood would go away, but 1 stored record holds a value for it"),
            "\(result.stderr)")
        #expect(try schemaAndTablesAgree(folder.path("ckport.sqlite")) == [])
        let exported = try ckport(["export", "--where", "mood == 'calm'", "--type", "Note"], in: folder.url)
        #expect(exported.stdout.contains("with-mood"))
    }

    @Test("migrate apply backs up the very state it migrates: a record written meanwhile is in both or in neither")
    func migrationBackupSnapshot() throws {
        let folder = Scratch()
        #expect(
            try ckport(["import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl")], in: folder.url)
                .status == 0)
        let migrations = packageRoot.appendingPathComponent("migrations/notes").path
        let store = try RecordStore(path: folder.path("ckport.sqlite"), create: false)
        var migrating: RunningCKPort?
        try store.write { session in
            var record = Record(
                id: RecordID(recordName: "written-between", zone: ZoneID(scope: .private, zoneName: "Notes")),
                recordType: "NoteV1")
            record["title"] = .string("written while the migration waited")
            record["body"] = .string("between")
            record["_schemaVersion"] = .int64(1)
            _ = try session.save(record, mode: .upsert)
            let started = try RunningCKPort(
                ["migrate", "apply", "--dir", migrations, "--backup", "before.ckbundle"], in: folder.url)
            migrating = started
            #expect(
                eventually(20) { started.stderrSoFar.contains("waiting for another ckport") }, "\(started.stderrSoFar)")
        }
        let result = try #require(migrating).finish()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("backed up 61 records to before.ckbundle"), "\(result.stderr)")
        // Migrated in the store (NoteV1 became NoteV2) and present, unmigrated, in the backup.
        let migrated = try ckport(
            ["export", "--type", "NoteV2", "--where", "_migratedFrom == 'written-between'"], in: folder.url)
        #expect(migrated.stdout.contains("written while the migration waited"), "\(migrated.stderr)")
        #expect(try ckport(["restore", "before.ckbundle", "--store", "before.sqlite"], in: folder.url).status == 0)
        let backedUp = try ckport(
            ["export", "--store", "before.sqlite", "--type", "NoteV1", "--style", "plain"], in: folder.url)
        #expect(backedUp.stdout.contains(#""body":"between""#), "\(backedUp.stderr)")
    }

    @Test("a new store has 16 KB pages; a store made with another page size keeps it and works as before")
    func pageSize() throws {
        let folder = Scratch()
        #expect(
            try ckport(["import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl")], in: folder.url)
                .status == 0)
        #expect(try sqlite(folder.path("ckport.sqlite"), "PRAGMA page_size") == "16384\n")
        #expect(try sqlite(folder.path("ckport.sqlite"), "PRAGMA journal_mode") == "wal\n")
        let before = try ckport(["export"], in: folder.url)
        // An older store, 4 KB pages: rewritten by the shell, then written to by ckport again.
        _ = try sqlite(
            folder.path("ckport.sqlite"),
            "PRAGMA journal_mode = DELETE; PRAGMA page_size = 4096; VACUUM; PRAGMA journal_mode = WAL")
        #expect(try sqlite(folder.path("ckport.sqlite"), "PRAGMA page_size") == "4096\n")
        folder.write("more.jsonl", noteLines(0..<3, field: "content", prefix: "later"))
        let more = try ckport(["import", "more.jsonl"], in: folder.url)
        #expect(more.status == 0, "\(more.stderr)")
        #expect(try sqlite(folder.path("ckport.sqlite"), "PRAGMA page_size") == "4096\n")
        #expect(try sqlite(folder.path("ckport.sqlite"), "PRAGMA integrity_check") == "ok\n")
        let after = try ckport(["export"], in: folder.url)
        let beforeLines = before.stdout.split(separator: "\n")
        let afterLines = after.stdout.split(separator: "\n")
        #expect(!beforeLines.isEmpty)
        #expect(afterLines.count == beforeLines.count + 3)
        #expect(Set(beforeLines).isSubset(of: Set(afterLines)))
        #expect(after.stdout.contains("later-2"))
    }
}
