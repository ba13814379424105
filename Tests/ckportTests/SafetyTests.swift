import Foundation
import Testing

/// Every file under `folder` whose bytes contain `text`.
func filesContaining(_ text: String, under folder: String) -> [String] {
    let needle = Data(text.utf8)
    guard let walker = FileManager.default.enumerator(atPath: folder) else { return [] }
    var found: [String] = []
    for case let name as String in walker {
        let path = (folder as NSString).appendingPathComponent(name)
        if let data = FileManager.default.contents(atPath: path), data.range(of: needle) != nil { found.append(name) }
    }
    return found
}

@Suite("safety of backups and temporary files")
struct SafetyTests {
    @Test("an encrypted backup killed at any moment leaves no file holding a record's text")
    func encryptedBackupLeavesNoPlaintext() throws {
        let folder = Scratch()
        try FileManager.default.createDirectory(atPath: folder.path("store"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: folder.path("out"), withIntermediateDirectories: true)
        #expect(
            try ckport(["generate", "--app", "notes", "--schema", "-o", "schema.ckdb"], in: folder.url).status == 0)
        #expect(
            try ckport(["generate", "--app", "notes", "--records", "20000", "-o", "notes.jsonl"], in: folder.url).status
                == 0)
        #expect(
            try ckport(["import", "schema.ckdb", "notes.jsonl", "--store", "store/notes.sqlite", "-q"], in: folder.url)
                .status == 0)
        // A record name from the middle of the data: if it is anywhere in out/, plaintext leaked.
        let lines = folder.text("notes.jsonl").split(separator: "\n")
        let marker = try #require(lines[lines.count / 2].split(separator: "\"").dropFirst(3).first.map(String.init))
        #expect(marker.count >= 6)
        folder.write("passphrase", "correct horse battery staple\n")
        let environment = ["TMPDIR": folder.path("out")]
        let arguments = [
            "backup", "--store", "store/notes.sqlite", "-o", "out/notes.ckbundle", "--encrypt", "--passphrase-file",
            "passphrase", "-q",
        ]
        for delay in [60_000, 150_000, 250_000, 400_000, 700_000] as [useconds_t] {
            let running = try RunningCKPort(arguments, in: folder.url, environment: environment)
            usleep(delay / 2)
            #expect(filesContaining(marker, under: folder.path("out")) == [], "while running, after \(delay / 2) µs")
            usleep(delay / 2)
            kill(running.process.processIdentifier, SIGKILL)
            _ = running.finish()
            #expect(filesContaining(marker, under: folder.path("out")) == [], "killed after \(delay) µs")
        }
        let finished = try ckport(arguments, in: folder.url, environment: environment)
        #expect(finished.status == 0, "\(finished.stderr)")
        #expect(filesContaining(marker, under: folder.path("out")) == [])
        // What is left is the bundle alone: the killed runs' temporary files are gone.
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path("out")) == ["notes.ckbundle"])
        var info = stat()
        #expect(stat(folder.path("out/notes.ckbundle"), &info) == 0)
        let verified = try ckport(["verify", "out/notes.ckbundle", "--passphrase-file", "passphrase"], in: folder.url)
        #expect(verified.status == 0, "\(verified.stderr)")
    }

    @Test(
        "a restore into an existing store that fills the disk rolls back before it exits: no journal left, the store as it was"
    )
    func restoreDiskFull() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                ["generate", "--app", "family-todo", "--records", "20000", "--seed", "3", "-o", "many.jsonl", "-q"],
                in: folder.url
            ).status == 0)
        #expect(
            try ckport(
                ["import", sample("family-todo", "schema.ckdb"), "many.jsonl", "--store", "source.sqlite", "-q"],
                in: folder.url
            ).status == 0)
        #expect(
            try ckport(["backup", "--store", "source.sqlite", "-o", "all.ckbundle", "-q"], in: folder.url).status == 0)
        #expect(
            try ckport(
                ["import", sample("family-todo", "schema.ckdb"), sample("family-todo", "records.jsonl"), "-q"],
                in: folder.url
            ).status == 0)
        let before = folder.data("ckport.sqlite")
        let exported = try ckport(["export"], in: folder.url).stdout
        let (status, message) = try ckportWithFileSizeLimit(
            kilobytes: 2048, "restore all.ckbundle --mode upsert", in: folder.url)
        #expect(status == 3, "\(message)")
        #expect(
            message.contains("cannot write to the store ckport.sqlite")
                && message.contains("the store is as it was before it"), "\(message)")
        // Rolled back and closed: no journal or log beside the store, the file as it was.
        for suffix in ["-journal", "-wal", "-shm"] {
            #expect(!FileManager.default.fileExists(atPath: folder.path("ckport.sqlite" + suffix)), "\(suffix)")
        }
        #expect(folder.data("ckport.sqlite") == before)
        #expect(try ckport(["export"], in: folder.url).stdout == exported)
    }

    @Test("a first write that fails leaves no store file, and a failed export to a new folder leaves no folder")
    func nothingLeftBehind() throws {
        let folder = Scratch()
        // Records but no schema: nothing can be imported, so no store is created.
        let noSchema = try ckport(
            ["import", sample("notes", "records.jsonl"), "--store", "new.sqlite"], in: folder.url)
        #expect(noSchema.status == 2)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.url.path) == [], "\(noSchema.stderr)")
        // A schema SQLite cannot hold is refused before any file exists.
        folder.write(
            "wide.ckdb",
            "DEFINE SCHEMA RECORD TYPE Wide (" + (0..<2100).map { "f\($0) STRING" }.joined(separator: ", ") + ");")
        let checked = try ckport(["schema", "check", "wide.ckdb"], in: folder.url)
        #expect(checked.status == 2)
        #expect(
            checked.stderr.contains(
                "record type Wide has 2100 fields, which need 2112 columns in the store; a table holds at most 2000"),
            "\(checked.stderr)")
        let imported = try ckport(["schema", "import", "wide.ckdb", "--store", "wide.sqlite"], in: folder.url)
        #expect(imported.status == 2 && imported.stderr.contains("a table holds at most 2000"), "\(imported.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path("wide.sqlite")))
        // An export to a folder that fails part-way takes the folder away again.
        #expect(
            try ckport(
                ["import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl"), "-q"], in: folder.url
            ).status == 0)
        let csv = try ckport(
            ["export", "--format", "csv", "-o", "tables/", "--type", "Note", "--type", "NoSuchType"], in: folder.url)
        #expect(csv.status == 2, "\(csv.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path("tables")))
    }

    @Test("hostile input: deep nesting, an endless line and a store edited by hand get clear errors, never a crash")
    func hostileInput() throws {
        let folder = Scratch()
        #expect(try ckport(["import", sample("family-calendar", "schema.ckdb"), "-q"], in: folder.url).status == 0)
        let depth = 5000
        folder.write(
            "deep.ics",
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//x//y//EN\r\n"
                + String(repeating: "BEGIN:VEVENT\r\n", count: depth)
                + String(repeating: "END:VEVENT\r\n", count: depth) + "END:VCALENDAR\r\n")
        let ics = try ckport(["import", "deep.ics"], in: folder.url)
        #expect(
            ics.status == 2
                && ics.stderr.contains("deep.ics:36: BEGIN:VEVENT nests components more than 32 levels deep"),
            "\(ics.status) \(ics.stderr)")
        folder.write(
            "deep.json",
            "{\"records\":[" + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "]}")
        let json = try ckport(["import", "deep.json"], in: folder.url)
        #expect(json.status == 2 && json.stderr.contains("JSON nests deeper than 512 levels"), "\(json.stderr)")
        folder.write(
            "deep.yaml",
            "components: " + String(repeating: "{a: ", count: depth) + "1" + String(repeating: "}", count: depth) + "\n"
        )
        let yaml = try ckport(["import", "deep.ics", "--mapping", "deep.yaml"], in: folder.url)
        #expect(
            yaml.status == 2 && yaml.stderr.contains("deep.yaml") && yaml.stderr.contains("nesting"), "\(yaml.stderr)")
        // A 20 MB line is refused without holding it: the next line still imports.
        let long =
            #"{"recordName":"long","recordType":"Family","fields":{"name":{"value":""#
            + String(repeating: "x", count: 20 << 20) + "\"}}}\n"
        folder.write(
            "long.jsonl",
            long + #"{"recordName":"short","recordType":"Family","fields":{"name":{"value":"Short"}}}"# + "\n")
        let lines = try ckport(["import", "long.jsonl", "--skip-invalid"], in: folder.url)
        #expect(lines.status == 0, "\(lines.stderr)")
        #expect(lines.stderr.contains("long.jsonl:1:1: the line is 20971594 bytes long"), "\(lines.stderr)")
        #expect(try ckport(["export", "--type", "Family"], in: folder.url).stdout.contains("Short"))
        // Metadata edited by hand: every command refuses the store as damaged.
        try _ = sqlite(
            folder.path("ckport.sqlite"),
            "UPDATE _ck_record SET zone = 99 WHERE recordName = 'short'; UPDATE Family SET ___zone = 99 WHERE ___recordID = 'short'"
        )
        for command in [
            ["export"], ["backup", "-o", "b.ckbundle"], ["stats"],
            ["import", sample("family-calendar", "records.jsonl")], ["export", "--type", "Event"],
        ] {
            let run = try ckport(command, in: folder.url)
            #expect(
                run.status == 3
                    && run.stderr.contains("the store is damaged: the change log names zone 99, which does not exist"),
                "\(command): \(run.stderr)")
        }
        try _ = sqlite(
            folder.path("ckport.sqlite"),
            "UPDATE _ck_record SET zone = 1 WHERE recordName = 'short'; UPDATE Family SET ___zone = 1 WHERE ___recordID = 'short'; UPDATE _ck_meta SET value = 'seven' WHERE key = 'changeSeq'"
        )
        for command in [["export"], ["stats"], ["delete", "short"]] {
            let run = try ckport(command, in: folder.url)
            #expect(
                run.status == 3 && run.stderr.contains("its change sequence is the text 'seven'"),
                "\(command): \(run.stderr)")
        }
    }

    @Test(
        "a rule that started long ago expands over a short window: every occurrence of the window, from its first (the periods visited are bounded in RecurrenceTests)"
    )
    func earlyRecurrence() throws {
        let folder = Scratch()
        #expect(try ckport(["import", sample("family-calendar", "schema.ckdb"), "-q"], in: folder.url).status == 0)
        folder.write(
            "tick.ics",
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//x//y//EN\r\nBEGIN:VEVENT\r\nUID:tick@example.com\r\nDTSTAMP:20260101T000000Z\r\n"
                + "DTSTART:19700101T000000Z\r\nDTEND:19700101T000001Z\r\nSUMMARY:tick\r\nRRULE:FREQ=SECONDLY;INTERVAL=2\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
        )
        let run = try ckport(
            [
                "import", "tick.ics", "--expand", "2026-03-01T10:00:00Z..2026-03-01T11:00:00Z", "--set",
                "familyID=family-1",
            ], in: folder.url)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("imported 1,800 records"), "\(run.stderr)")
        let first = try ckport(
            ["export", "--type", "Event", "--sort", "startDate", "--limit", "1", "--style", "plain"], in: folder.url)
        #expect(first.stdout.contains(#""startDate":"2026-03-01T10:00:00.000Z""#), "\(first.stdout)")
    }

    @Test(
        "schema check: a schema in the layout cktool exports for Core Data (written here) passes with warnings; --strict makes them errors; it imports"
    )
    func coreDataSchemaCheck() throws {
        let folder = Scratch()
        let corpus = packageRoot.appendingPathComponent("Tests/StoreTests/SchemaCorpus/coredata-recipes.ckdb").path
        let checked = try ckport(["schema", "check", corpus], in: folder.url)
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(
            checked.stderr.contains(
                "coredata-recipes.ckdb:48:9: warning: field 'CD_parametersJSON' is BYTES with QUERYABLE SORTABLE"),
            "\(checked.stderr)")
        #expect(checked.stderr.contains("ok — 4 record types, 19 fields, 1 roles, 2 warnings"), "\(checked.stderr)")
        let strict = try ckport(["schema", "check", "--strict", corpus], in: folder.url)
        #expect(strict.status == 2)
        #expect(strict.stderr.contains("2 warnings, errors under --strict"))
        #expect(try ckport(["schema", "import", corpus, "-q"], in: folder.url).status == 0)
        let exported = try ckport(["schema", "export"], in: folder.url)
        #expect(exported.stdout.contains("CD_parametersJSON BYTES QUERYABLE SORTABLE"), "\(exported.stdout)")
    }
}
