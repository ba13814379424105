import Formats
import Foundation
@_exported import TestSupport
import Testing

/// The ckport binary built beside this test bundle.
let ckportBinary: URL = {
    let testBinary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    var directory = testBinary.deletingLastPathComponent()
    // Inside a .xctest bundle on some platforms; the products sit beside the bundle.
    while directory.pathExtension == "xctest" || directory.lastPathComponent == "MacOS"
        || directory.lastPathComponent == "Contents"
    {
        directory = directory.deletingLastPathComponent()
    }
    return directory.appendingPathComponent("ckport")
}()

struct Run {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// A ckport process to run in `directory` with a clean environment (no $CKPORT_STORE).
func ckportProcess(_ arguments: [String], in directory: URL, environment: [String: String] = [:]) -> Process {
    let process = Process()
    process.executableURL = ckportBinary
    process.arguments = arguments
    process.currentDirectoryURL = directory
    var env = ProcessInfo.processInfo.environment
    env["CKPORT_STORE"] = nil
    for (key, value) in environment { env[key] = value }
    process.environment = env
    return process
}

/// Runs ckport (ARGUMENTS as shell words) with files limited to `kilobytes`, as on a full disk:
/// SIGXFSZ is ignored, so a write past the limit fails with EFBIG. Its status and standard error.
func ckportWithFileSizeLimit(kilobytes: Int, _ arguments: String, in directory: URL) throws -> (Int32, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", "trap '' XFSZ; ulimit -f \(kilobytes); exec \"$0\" \(arguments)", ckportBinary.path]
    process.currentDirectoryURL = directory
    let errors = Pipe()
    process.standardError = errors
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, message)
}

/// Runs ckport in `directory` with a clean environment (no $CKPORT_STORE).
@discardableResult
func ckport(_ arguments: [String], in directory: URL, environment: [String: String] = [:], stdin: String? = nil) throws
    -> Run
{
    let process = ckportProcess(arguments, in: directory, environment: environment)
    // Output goes to files: a pipe nobody reads while the process runs could fill and stall it.
    let outURL = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-out-\(UUID().uuidString)")
    let errURL = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-err-\(UUID().uuidString)")
    _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
    _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
    defer {
        try? FileManager.default.removeItem(at: outURL)
        try? FileManager.default.removeItem(at: errURL)
    }
    let outHandle = try FileHandle(forWritingTo: outURL)
    let errHandle = try FileHandle(forWritingTo: errURL)
    process.standardOutput = outHandle
    process.standardError = errHandle
    let input = Pipe()
    process.standardInput = input
    try process.run()
    if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
    try input.fileHandleForWriting.close()
    process.waitUntilExit()
    try outHandle.close()
    try errHandle.close()
    let outData = try Data(contentsOf: outURL)
    let errData = try Data(contentsOf: errURL)
    return Run(
        status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
        stderr: String(decoding: errData, as: UTF8.self))
}

@Suite("ckport command line")
struct CLITests {
    @Test("the README's quick start: import a sample, query it, export it, round trip it")
    func quickStart() throws {
        let folder = Scratch()
        let imported = try ckport(
            ["import", sample("family-calendar", "schema.ckdb"), sample("family-calendar", "records.jsonl")],
            in: folder.url)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stderr.contains("imported 120 records from 1 file"))
        #expect(imported.stderr.contains("change token: ck1-"))
        #expect(FileManager.default.fileExists(atPath: folder.path("ckport.sqlite")))
        let events = try ckport(
            [
                "export", "--type", "Event", "--where",
                "familyID == 'family-1' AND startDate >= 2026-03-01 AND isDeleted == false", "--sort", "startDate",
                "--style", "plain",
            ], in: folder.url)
        #expect(events.status == 0, "\(events.stderr)")
        let lines = events.stdout.split(separator: "\n")
        #expect(!lines.isEmpty)
        for line in lines {
            #expect(line.contains(#""familyID":{"recordName":"family-1","action":"DELETE_SELF"}"#))
            #expect(line.contains(#""isDeleted":0"#))
        }
        let exported = try ckport(["export", "-o", "all.jsonl"], in: folder.url)
        #expect(exported.status == 0)
        let again = try ckport(["export", "-o", "again.jsonl"], in: folder.url)
        #expect(again.status == 0)
        #expect(folder.data("all.jsonl") == folder.data("again.jsonl"))
        // A second store built from the export exports the same bytes.
        #expect(
            try ckport(
                ["import", sample("family-calendar", "schema.ckdb"), "all.jsonl", "--store", "copy.sqlite"],
                in: folder.url
            ).status == 0)
        #expect(try ckport(["export", "--store", "copy.sqlite", "-o", "copy.jsonl"], in: folder.url).status == 0)
        #expect(folder.data("copy.jsonl") == folder.data("all.jsonl"))
        // The document form too, and plain style.
        #expect(try ckport(["export", "-o", "all.json"], in: folder.url).status == 0)
        #expect(folder.text("all.json").hasPrefix("{\"records\":[\n{\"recordName\":"))
        #expect(try ckport(["export", "--style", "plain", "-o", "plain.jsonl"], in: folder.url).status == 0)
        #expect(
            try ckport(
                ["import", sample("family-calendar", "schema.ckdb"), "plain.jsonl", "--store", "plain.sqlite"],
                in: folder.url
            ).status == 0)
        #expect(
            try ckport(["export", "--store", "plain.sqlite", "-o", "from-plain.jsonl"], in: folder.url).status == 0)
        #expect(folder.data("from-plain.jsonl") == folder.data("all.jsonl"))
        #expect(
            try ckport(
                ["import", sample("family-calendar", "schema.ckdb"), "all.json", "--store", "doc.sqlite"],
                in: folder.url
            ).status == 0)
        #expect(try ckport(["export", "--store", "doc.sqlite", "-o", "from-doc.jsonl"], in: folder.url).status == 0)
        #expect(folder.data("from-doc.jsonl") == folder.data("all.jsonl"))
    }

    @Test("exit status 1 for usage errors, 2 for invalid input, 3 for other failures")
    func exitStatus() throws {
        let folder = Scratch()
        #expect(try ckport(["export", "--no-such-flag"], in: folder.url).status == 1)
        #expect(try ckport(["frobnicate"], in: folder.url).status == 1)
        #expect(try ckport(["import", "x.jsonl", "--rejects", "r.jsonl"], in: folder.url).status == 1)
        let missing = try ckport(["export"], in: folder.url)
        #expect(missing.status == 3)
        #expect(missing.stderr.contains("no store at ckport.sqlite"))
        #expect(
            try ckport(["import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl")], in: folder.url)
                .status == 0)
        let before = folder.data("ckport.sqlite")
        folder.write("bad.jsonl", #"{"recordName":"n1","recordType":"Note","fields":{"title":{"value":7}}}"# + "\n")
        let bad = try ckport(["import", "bad.jsonl"], in: folder.url)
        #expect(bad.status == 2)
        #expect(
            bad.stderr.contains(
                "bad.jsonl:1:67 (fields.title.value): record 'n1' (Note), field 'title': expected STRING (a JSON string), found the number 7"
            ))
        #expect(bad.stderr.contains("nothing was imported: the store is unchanged"))
        #expect(folder.data("ckport.sqlite") == before)
        let query = try ckport(["export", "--type", "Note", "--where", "title ==", "-o", "x.jsonl"], in: folder.url)
        #expect(query.status == 2)
        #expect(query.stderr.contains("at column 9: expected a value"))
        #expect(!FileManager.default.fileExists(atPath: folder.path("x.jsonl")))
        let schema = try ckport(["schema", "check", sample("notes", "records.jsonl")], in: folder.url)
        #expect(schema.status == 2)
        #expect(schema.stderr.contains("records.jsonl:1:1: a schema starts with 'DEFINE SCHEMA'"))
        #expect(try ckport(["delete", "no-such-record"], in: folder.url).status == 2)
    }

    @Test(
        "every command's help teaches with an example",
        arguments: [
            [], ["schema"], ["schema", "import"], ["schema", "export"], ["schema", "check"], ["import"], ["export"],
            ["delete"], ["stats"], ["generate"],
            ["backup"], ["verify"], ["inspect"], ["restore"], ["schema", "diff"],
            ["migrate"], ["migrate", "status"], ["migrate", "plan"], ["migrate", "apply"], ["migrate", "lint"],
        ])
    func help(command: [String]) throws {
        let run = try ckport(command + ["--help"], in: packageRoot)
        #expect(run.status == 0)
        #expect(run.stdout.contains("USAGE: ckport"))
        #expect(run.stdout.contains("  ckport "), "an example line for \(command)")
    }

    @Test("skip-invalid writes the rejects file; dry run writes nothing")
    func rejectsAndDryRun() throws {
        let folder = Scratch()
        #expect(try ckport(["schema", "import", sample("family-todo", "schema.ckdb")], in: folder.url).status == 0)
        let good = try String(contentsOfFile: sample("family-todo", "records.jsonl"), encoding: .utf8).split(
            separator: "\n"
        ).prefix(5).joined(separator: "\n")
        folder.write(
            "mixed.jsonl",
            good + "\n{broken\n" + #"{"recordName":"x","recordType":"Chore"}"# + "\n"
                + #"{"recordName":"y","recordType":"Area","fields":{"mood":{"value":"calm"}}}"# + "\n")
        let before = folder.data("ckport.sqlite")
        let dry = try ckport(
            ["import", "mixed.jsonl", "--dry-run", "--skip-invalid", "--rejects", "dry-rejects.jsonl"], in: folder.url)
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stderr.contains("dry run: nothing was written"))
        #expect(folder.data("ckport.sqlite") == before)
        let run = try ckport(["import", "mixed.jsonl", "--skip-invalid", "--rejects", "rejects.jsonl"], in: folder.url)
        #expect(run.status == 0)
        #expect(run.stderr.contains("rejected records are in rejects.jsonl"))
        let rejects = folder.text("rejects.jsonl").split(separator: "\n")
        #expect(rejects.count == 3)
        #expect(rejects[0].hasPrefix(#"{"error":"not valid JSON: "#))
        #expect(rejects[0].contains(#""position":"mixed.jsonl:6:2""#))
        #expect(rejects[1].contains("unknown record type 'Chore'"))
        #expect(rejects[1].contains(#""record":{"recordName":"x","recordType":"Chore"}"#))
        // The remedy a rejects file names is the command line's flag, as the terminal says it.
        #expect(
            rejects[2].contains(
                "record type 'Area' has no field 'mood' (use --allow-new-fields to add it to the schema)"))
        let stats = try ckport(["stats", "--json"], in: folder.url)
        #expect(stats.stdout.contains(#""records":5"#))
    }

    @Test("export --since reports changes and deletions, and prints the next token")
    func since() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                ["import", sample("family-calendar", "schema.ckdb"), sample("family-calendar", "records.jsonl")],
                in: folder.url
            ).status == 0)
        let first = try ckport(["export", "--type", "Family", "--token-file", "token.txt"], in: folder.url)
        let token = folder.text("token.txt").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(first.stderr.contains("change token: \(token)"))
        let deleted = try ckport(["delete", "event-1-00002"], in: folder.url)
        #expect(deleted.status == 0, "\(deleted.stderr)")
        #expect(deleted.stderr.contains("deleted 5 records: 1 Event, 4 EventParticipant"))
        let changes = try ckport(["export", "--since", token, "--style", "plain"], in: folder.url)
        #expect(changes.status == 0)
        let lines = changes.stdout.split(separator: "\n")
        #expect(lines.count == 5)
        #expect(lines.allSatisfy { $0.hasSuffix(#""deleted":true}"#) })
        #expect(lines[0].hasPrefix(#"{"recordName":"event-1-00002","recordType":"Event""#))
        let bad = try ckport(["export", "--since", "ck1-000000000000-3"], in: folder.url)
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("comes from another store"))
    }

    @Test("stats shows counts per scope, zone and type")
    func stats() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                [
                    "import", sample("relationship-checkin", "schema.ckdb"),
                    sample("relationship-checkin", "records.jsonl"),
                ], in: folder.url
            ).status == 0)
        let run = try ckport(["stats"], in: folder.url)
        #expect(run.status == 0)
        #expect(run.stdout.contains("owner"))
        #expect(run.stdout.contains("Couple            1           0"))
        #expect(run.stdout.split(separator: "\n").last?.hasSuffix("61           0") == true)
    }

    @Test("generate writes a schema and records that import cleanly")
    func generate() throws {
        let folder = Scratch()
        #expect(
            try ckport(["generate", "--app", "screen-time-rewards", "--schema", "-o", "s.ckdb"], in: folder.url).status
                == 0)
        #expect(
            try ckport(
                ["generate", "--app", "screen-time-rewards", "--records", "3000", "--seed", "5", "-o", "r.jsonl"],
                in: folder.url
            ).status == 0)
        #expect(folder.text("r.jsonl").split(separator: "\n").count == 3000)
        let run = try ckport(
            ["import", "s.ckdb", "r.jsonl", "--store", "g.sqlite", "--mode", "insert"], in: folder.url)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("imported 3,000 records"))
        let explain = try ckport(
            [
                "export", "--store", "g.sqlite", "--type", "PointsLedgerEntry", "--where", "type == 'redemption'",
                "--explain",
            ], in: folder.url)
        #expect(explain.stdout.contains("USING INDEX PointsLedgerEntry.type"))
    }

    @Test("standard input and $CKPORT_STORE work as documented")
    func stdinAndEnvironment() throws {
        let folder = Scratch()
        let env = ["CKPORT_STORE": folder.path("env.sqlite")]
        #expect(
            try ckport(["schema", "import", sample("notes", "schema.ckdb")], in: folder.url, environment: env).status
                == 0)
        let record = #"{"recordName":"n1","title":"From a pipe","tags":["a"]}"#
        let run = try ckport(
            ["import", "-", "--type", "Note", "--zone", "Notes"], in: folder.url, environment: env, stdin: record + "\n"
        )
        #expect(run.status == 0, "\(run.stderr)")
        let out = try ckport(["export", "--type", "Note", "--style", "plain"], in: folder.url, environment: env)
        #expect(
            out.stdout
                == #"{"recordName":"n1","recordType":"Note","scope":"private","zoneName":"Notes","tags":["a"],"title":"From a pipe"}"#
                + "\n")
        #expect(!FileManager.default.fileExists(atPath: folder.path("ckport.sqlite")))
    }

    @Test("CSV export and import from the command line")
    func csv() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                ["import", sample("family-todo", "schema.ckdb"), sample("family-todo", "records.jsonl")], in: folder.url
            ).status == 0)
        let one = try ckport(
            [
                "export", "--type", "Task", "--where", "status == 'next'", "--sort", "dueDate", "--fields",
                "title,status,dueDate,assigneeId", "-o", "next.csv",
            ], in: folder.url)
        #expect(one.status == 0, "\(one.stderr)")
        let lines = folder.text("next.csv").components(separatedBy: "\r\n")
        #expect(lines[0] == "recordName,title,status,dueDate,assigneeId,assigneeId:action")
        #expect(lines.dropFirst().filter { !$0.isEmpty }.allSatisfy { $0.contains(",next,") })
        let all = try ckport(["export", "-o", "sheets/", "--system"], in: folder.url)
        #expect(all.status == 0, "\(all.stderr)")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path("sheets")).sorted()
        #expect(
            files == [
                "Area.csv", "Household.csv", "Member.csv", "RecurringChore.csv", "Task.csv", "cloudkit.share.csv",
            ])
        #expect(
            try ckport(
                ["schema", "import", sample("family-todo", "schema.ckdb"), "--store", "copy.sqlite"], in: folder.url
            ).status == 0)
        for file in files {
            let run = try ckport(
                [
                    "import", "sheets/\(file)", "--type", String(file.dropLast(4)), "--store", "copy.sqlite", "--mode",
                    "insert",
                ], in: folder.url)
            #expect(run.status == 0, "\(run.stderr)")
        }
        #expect(try ckport(["export", "-o", "a.jsonl"], in: folder.url).status == 0)
        #expect(try ckport(["export", "--store", "copy.sqlite", "-o", "b.jsonl"], in: folder.url).status == 0)
        #expect(folder.data("a.jsonl") == folder.data("b.jsonl"))
        // Dialect options.
        #expect(
            try ckport(
                ["export", "--type", "Area", "--format", "tsv", "--lf", "--bom", "-o", "areas.tsv"], in: folder.url
            ).status == 0)
        let tsv = folder.data("areas.tsv")
        #expect(Array(tsv.prefix(3)) == [0xEF, 0xBB, 0xBF])
        #expect(
            String(decoding: tsv.dropFirst(3), as: UTF8.self).hasPrefix(
                "recordName\tcreatedAt\thouseholdId\thouseholdId:action\ticon\tid\t"))
        #expect(!String(decoding: tsv, as: UTF8.self).contains("\r"))
        #expect(
            try ckport(["export", "--type", "Area", "--delimiter", ";", "-o", "areas.csv"], in: folder.url).status == 0)
        #expect(folder.text("areas.csv").hasPrefix("recordName;createdAt;householdId;householdId:action;icon;id;"))
        // A spreadsheet's own file: other headers, a sniffed delimiter, names from a template.
        folder.write(
            "chores.csv", "Chore;Household;Status;Notes;Colour\r\nWater the plants;household-1;next;\"=1+1\";green\r\n")
        let refused = try ckport(["import", "chores.csv", "--type", "Task"], in: folder.url)
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("chores.csv:1:1: a Task record: column 'Chore' is not a field of Task"))
        let imported = try ckport(
            [
                "import", "chores.csv", "--type", "Task", "--zone", "household-1", "--map", "Chore=title", "--map",
                "Household=householdId",
                "--map", "Status=status", "--map", "Notes=notes", "--ignore-columns", "--name-template",
                "task-{householdId}-{title}",
            ], in: folder.url)
        #expect(imported.status == 0, "\(imported.stderr)")
        let back = try ckport(
            ["export", "--type", "Task", "--where", "recordName BEGINSWITH 'task-household-1-'", "--style", "plain"],
            in: folder.url)
        #expect(back.stdout.contains(#""recordName":"task-household-1-Water the plants""#))
        #expect(back.stdout.contains(#""notes":"=1+1""#))
        // CSV refuses what it cannot hold.
        #expect(try ckport(["export", "--format", "csv"], in: folder.url).status == 1)
        #expect(
            try ckport(["export", "--type", "Task", "--since", "ck1-x-1", "-o", "x.csv"], in: folder.url).status == 1)
    }

    @Test("property lists and xCal: out and back in through the command line, with their refusals")
    func xmlFormats() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                ["import", sample("family-calendar", "schema.ckdb"), sample("family-calendar", "records.jsonl")],
                in: folder.url
            ).status == 0)
        let jsonl = try ckport(["export", "-q"], in: folder.url).stdout
        // A plist of every record, read back into a fresh store: the same export, byte for byte.
        let plist = try ckport(["export", "-o", "family.plist"], in: folder.url)
        #expect(plist.status == 0 && plist.stderr.contains("exported 120 records to family.plist"), "\(plist.stderr)")
        #expect(
            folder.text("family.plist").hasPrefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE plist PUBLIC"))
        let back = try ckport(
            ["import", sample("family-calendar", "schema.ckdb"), "family.plist", "--store", "back.sqlite"],
            in: folder.url)
        #expect(
            back.status == 0 && back.stderr.contains("total                  120        0          0"), "\(back.stderr)"
        )
        #expect(try ckport(["export", "--store", "back.sqlite", "-q"], in: folder.url).stdout == jsonl)
        // A plist from standard input, told by --format.
        let piped = try ckport(
            ["import", "-", "--format", "plist", "--store", "back.sqlite", "--mode", "insert", "--dry-run"],
            in: folder.url, stdin: folder.text("family.plist"))
        #expect(piped.status == 2 && piped.stderr.contains("already exists"), "\(piped.stderr)")
        // The same calendar as iCalendar and as xCal, each imported into its own store.
        for ext in ["ics", "xcal"] {
            let out = try ckport(
                ["export", "-o", "family.\(ext)", "--tz", "Europe/Berlin", "--dtstamp", "2026-01-01T00:00:00Z"],
                in: folder.url)
            #expect(out.status == 0 && out.stderr.contains("exported 17 Event to family.\(ext)"), "\(out.stderr)")
            let store = "\(ext).sqlite"
            #expect(
                try ckport(
                    ["schema", "import", sample("family-calendar", "schema.ckdb"), "--store", store, "-q"],
                    in: folder.url
                ).status == 0)
            let imported = try ckport(
                ["import", "family.\(ext)", "--set", "familyID=family-1", "--store", store], in: folder.url)
            #expect(
                imported.status == 0 && imported.stderr.contains("Event                   17"), "\(imported.stderr)")
        }
        #expect(folder.text("family.xcal").contains("<icalendar xmlns=\"urn:ietf:params:xml:ns:icalendar-2.0\">"))
        #expect(
            try ckport(["export", "--store", "xcal.sqlite", "-q"], in: folder.url).stdout
                == (try ckport(["export", "--store", "ics.sqlite", "-q"], in: folder.url)).stdout)
        // Refusals: a calendar has no place for deletions; a broken plist stops at its line and
        // changes nothing.
        let since = try ckport(["export", "-o", "changes.xcal", "--since", "ck1-x-1"], in: folder.url)
        #expect(
            since.status == 1 && since.stderr.contains("a calendar has no place for deleted records"), "\(since.stderr)"
        )
        folder.write(
            "broken.plist",
            "<?xml version=\"1.0\"?>\n<plist><array>\n<dict><key>recordName</key><string>a</string>\n<key>recordName</key><string>b</string></dict></array></plist>\n"
        )
        let before = folder.data("ckport.sqlite")
        let refused = try ckport(["import", "broken.plist"], in: folder.url)
        #expect(refused.status == 2 && refused.stderr.contains("broken.plist:4:"), "\(refused.stderr)")
        #expect(refused.stderr.contains("the key \"recordName\" appears twice"), "\(refused.stderr)")
        #expect(folder.data("ckport.sqlite") == before)
    }

    @Test("iCalendar: a family's month out, a calendar file in, and the flags that go with them")
    func iCalendar() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                ["import", sample("family-calendar", "schema.ckdb"), sample("family-calendar", "records.jsonl")],
                in: folder.url
            ).status == 0)
        let month = "familyID == 'family-1' AND startDate >= 2026-03-01 AND startDate < 2026-04-01"
        let export = try ckport(
            ["export", "--where", month, "-o", "march.ics", "--dtstamp", "2026-03-01T00:00:00Z"], in: folder.url)
        #expect(export.status == 0, "\(export.stderr)")
        let ics = folder.text("march.ics")
        #expect(ics.hasPrefix("BEGIN:VCALENDAR\r\nVERSION:2.0\r\n"))
        let live = try ckport(
            ["export", "--type", "Event", "--where", month + " AND isDeleted == false", "-q"], in: folder.url)
        let liveCount = live.stdout.split(separator: "\n").count
        #expect(liveCount > 0)
        #expect(ics.components(separatedBy: "BEGIN:VEVENT\r\n").count - 1 == liveCount)
        #expect(ics.contains("DTSTAMP:20260301T000000Z\r\n"))
        // The same store gives the same bytes.
        #expect(
            try ckport(
                ["export", "--where", month, "-o", "again.ics", "--dtstamp", "2026-03-01T00:00:00Z", "-q"],
                in: folder.url
            ).status == 0)
        #expect(folder.data("again.ics") == folder.data("march.ics"))
        // Standard output with --format ics, local times with --tz.
        let berlin = try ckport(
            ["export", "--format", "ics", "--where", month, "--tz", "Europe/Berlin", "-q"], in: folder.url)
        #expect(berlin.stdout.contains("BEGIN:VTIMEZONE\r\nTZID:Europe/Berlin\r\n"))

        // A calendar in the shape of a Google Calendar export (written here: Fixtures/SOURCES.md), expanded into the family's zone.
        let google = packageRoot.appendingPathComponent("Tests/FormatsTests/Fixtures/google.ics").path
        let arguments = [
            "import", google, "--expand", "2026-01-01..2026-12-31", "--set", "familyID=family-1",
            "--scope", "shared", "--zone", "family-1-zone", "--owner", "_4f00e3e229b648635c6f63dca8da05ef",
        ]
        let first = try ckport(arguments, in: folder.url)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("Event                   10        0          0"), "\(first.stderr)")
        #expect(
            first.stderr.contains(
                "note: not kept (the mapping has no place for them): 1 VFREEBUSY, 1 X-WR-CALNAME of the calendar (\"Family\"), which the records' calendar calls \"The Müllers\", 2 SEQUENCE other than 0 in 2 events, 1 STATUS:CONFIRMED in 1 event, 1 X-GOOGLE-CONFERENCE in 1 event"
            ), "\(first.stderr)")
        // --strict turns what a mapping cannot keep into an error, and nothing is written.
        let beforeStrict = try ckport(["export"], in: folder.url).stdout
        let strict = try ckport(arguments + ["--strict"], in: folder.url)
        #expect(
            strict.status == 2 && strict.stderr.contains("--strict: the mapping would not keep 1 VFREEBUSY"),
            "\(strict.stderr)")
        #expect(try ckport(["export"], in: folder.url).stdout == beforeStrict)
        let second = try ckport(arguments, in: folder.url)
        #expect(second.stderr.contains("total                    0        0         24"), "\(second.stderr)")
        let imported = try ckport(
            [
                "export", "--type", "Event", "--where", "recordName BEGINSWITH 'swim-training'", "--style", "plain",
                "-q",
            ], in: folder.url)
        #expect(imported.stdout.split(separator: "\n").count == 8)
        #expect(imported.stdout.contains(#""scope":"shared""#))
        // From standard input too (spooled, since --expand reads the file twice).
        let piped = try ckport(
            [
                "import", sample("family-calendar", "schema.ckdb"), "-", "--format", "ics", "--expand",
                "2026-03-01..2026-03-31", "--store", "piped.sqlite",
            ],
            in: folder.url, stdin: try String(contentsOfFile: google, encoding: .utf8))
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(piped.stderr.contains("Event                   10"), "\(piped.stderr)")

        // Mistakes.
        let broken =
            "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:x\r\nDTSTART:20260230T100000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
        folder.write("broken.ics", broken)
        let before = folder.data("ckport.sqlite")
        let refused = try ckport(["import", "broken.ics"], in: folder.url)
        #expect(refused.status == 2)
        #expect(
            refused.stderr.contains(
                "broken.ics:4: record 'x' (Event): DTSTART is not a date or date-time: \"20260230T100000Z\""),
            "\(refused.stderr)")
        #expect(folder.data("ckport.sqlite") == before)
        let usage: [([String], String)] = [
            (
                ["import", sample("family-calendar", "records.jsonl"), "--expand", "2026-01-01..2026-02-01"],
                "--expand applies to iCalendar and xCal files"
            ),
            (["import", "broken.ics", "--expand", "2026-02-01..2026-01-01"], "--expand: TO comes before FROM"),
            (["import", "broken.ics", "--expand", "soon"], "--expand takes FROM..TO"),
            (["export", "-o", "out.jsonl", "--include-deleted"], "--include-deleted applies to calendar output"),
            (["export", "-o", "out.ics", "--dtstamp", "yesterday"], "--dtstamp is an ISO-8601 time"),
        ]
        for (arguments, message) in usage {
            let run = try ckport(arguments, in: folder.url)
            #expect(run.status == 1, "\(arguments)")
            #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
        }
        // A store whose schema has no sample mapping needs --mapping.
        #expect(
            try ckport(
                [
                    "import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl"), "--store",
                    "notes.sqlite",
                ], in: folder.url
            ).status == 0)
        let unmapped = try ckport(["export", "--store", "notes.sqlite", "-o", "notes.ics"], in: folder.url)
        #expect(unmapped.status == 1)
        #expect(unmapped.stderr.contains("pass --mapping FILE"))
        #expect(!FileManager.default.fileExists(atPath: folder.path("notes.ics")))
    }

    @Test("backup, inspect, verify and restore from the command line; a damaged bundle restores nothing")
    func bundles() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                ["import", sample("family-calendar", "schema.ckdb"), sample("family-calendar", "records.jsonl")],
                in: folder.url
            ).status == 0)
        let backup = try ckport(["backup", "-o", "family.ckbundle"], in: folder.url)
        #expect(backup.status == 0, "\(backup.stderr)")
        #expect(backup.stderr.contains("backed up 120 records"), "\(backup.stderr)")
        let inspect = try ckport(["inspect", "family.ckbundle"], in: folder.url)
        #expect(inspect.stdout.contains("total") && inspect.stdout.contains("120"), "\(inspect.stdout)")
        let verify = try ckport(["verify", "family.ckbundle"], in: folder.url)
        #expect(verify.status == 0, "\(verify.stderr)")
        #expect(verify.stdout.contains("sound — 120 records"), "\(verify.stdout)")
        let restore = try ckport(["restore", "family.ckbundle", "--store", "copy.sqlite"], in: folder.url)
        #expect(restore.status == 0, "\(restore.stderr)")
        #expect(try ckport(["export", "-o", "a.jsonl"], in: folder.url).status == 0)
        #expect(try ckport(["export", "--store", "copy.sqlite", "-o", "b.jsonl"], in: folder.url).status == 0)
        #expect(folder.data("a.jsonl") == folder.data("b.jsonl"))
        // A store that holds records needs --mode.
        let again = try ckport(["restore", "family.ckbundle", "--store", "copy.sqlite"], in: folder.url)
        #expect(again.status == 1)
        #expect(again.stderr.contains("pass --mode upsert, replace or newer"))
        let newer = try ckport(
            ["restore", "family.ckbundle", "--store", "copy.sqlite", "--mode", "newer"], in: folder.url)
        #expect(newer.status == 0, "\(newer.stderr)")
        // A damaged bundle: verify names the problem, restore writes nothing.
        let bytes = folder.data("family.ckbundle")
        try bytes.prefix(bytes.count / 2).write(to: folder.url.appendingPathComponent("half.ckbundle"))
        let bad = try ckport(["verify", "half.ckbundle"], in: folder.url)
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("half.ckbundle"), "\(bad.stderr)")
        let refused = try ckport(["restore", "half.ckbundle", "--store", "empty.sqlite"], in: folder.url)
        #expect(refused.status == 2)
        #expect(!FileManager.default.fileExists(atPath: folder.path("empty.sqlite")))
        let before = folder.data("copy.sqlite")
        let intoExisting = try ckport(
            ["restore", "half.ckbundle", "--store", "copy.sqlite", "--mode", "replace"], in: folder.url)
        #expect(intoExisting.status == 2)
        #expect(folder.data("copy.sqlite") == before)
        // A records member whose bytes are not the manifest's (the gzip sound): found by the
        // restore's second reading, after every record went in and before the commit.
        let edited = try editedBundle(
            folder.path("family.ckbundle"), folder.path("edited.ckbundle"), edit: flipFirstLetter)
        let damaged = try ckport(["restore", "edited.ckbundle", "--store", "edited.sqlite"], in: folder.url)
        #expect(damaged.status == 2)
        #expect(
            damaged.stderr.contains("edited.ckbundle (\(edited)): its SHA-256 does not match the manifest"),
            "\(damaged.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path("edited.sqlite")))
        let damagedIntoExisting = try ckport(
            ["restore", "edited.ckbundle", "--store", "copy.sqlite", "--mode", "replace"], in: folder.url)
        #expect(
            damagedIntoExisting.status == 2 && damagedIntoExisting.stderr.contains(edited),
            "\(damagedIntoExisting.stderr)")
        #expect(folder.data("copy.sqlite") == before)
        // A member damaged so that a record in it is no longer valid: the damage is what the
        // restore reports, not the record it spoiled.
        let spoiled = try editedBundle(folder.path("family.ckbundle"), folder.path("spoiled.ckbundle")) { bytes in
            // The first field's name changes case: a field the schema does not have.
            let fields = Array(#""fields":{""#.utf8)
            guard let at = bytes.indices.first(where: { bytes[$0...].starts(with: fields) }) else { return false }
            bytes[at + fields.count] ^= 0x20
            return true
        }
        let spoiledRestore = try ckport(["restore", "spoiled.ckbundle", "--store", "spoiled.sqlite"], in: folder.url)
        #expect(spoiledRestore.status == 2)
        #expect(!spoiledRestore.stderr.contains("has no field"), "\(spoiledRestore.stderr)")
        #expect(
            spoiledRestore.stderr.contains("spoiled.ckbundle (\(spoiled)): its SHA-256 does not match the manifest"),
            "\(spoiledRestore.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path("spoiled.sqlite")))
        #expect(try ckport(["backup", "-o", "-"], in: folder.url).status == 1)
        // A part of a bundle, and a zone restored under another name beside the original.
        let part = try ckport(
            ["restore", "family.ckbundle", "--type", "Event", "--zone", "family-1-zone", "--store", "part.sqlite"],
            in: folder.url)
        #expect(part.status == 0, "\(part.stderr)")
        let events = try ckport(["export", "--store", "part.sqlite", "-q"], in: folder.url).stdout.split(
            separator: "\n")
        #expect(events.count == 9)
        #expect(
            events.allSatisfy { $0.contains(#""recordType":"Event""#) && $0.contains(#""zoneName":"family-1-zone""#) })
        let renamed = try ckport(
            [
                "restore", "family.ckbundle", "--zone", "family-1-zone", "--rename-zone",
                "family-1-zone=family-1-before", "--mode", "upsert",
            ], in: folder.url)
        #expect(renamed.status == 0, "\(renamed.stderr)")
        let stats = try ckport(["stats"], in: folder.url).stdout
        #expect(stats.contains("family-1-before") && stats.contains("family-1-zone"), "\(stats)")
        #expect(
            stats.split(separator: "\n").contains { $0.hasPrefix("total") && $0.hasSuffix(" 174           0") },
            "\(stats)")
    }

    @Test("asset files: import --assets, backup, inspect, verify, restore, export --assets")
    func assets() throws {
        let folder = Scratch()
        folder.write(
            "schema.ckdb",
            "DEFINE SCHEMA\n    RECORD TYPE Photo (\n        title STRING,\n        image ASSET\n    );\n")
        try FileManager.default.createDirectory(atPath: folder.path("in"), withIntermediateDirectories: true)
        let picture = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) }
        try Data(picture).write(to: URL(fileURLWithPath: folder.path("in/kitchen.jpg")))
        folder.write(
            "photos.jsonl",
            """
            {"recordName":"ph-1","recordType":"Photo","fields":{"title":{"value":"Kitchen"},"image":{"value":{"fileChecksum":"AbC","size":300000,"localPath":"kitchen.jpg"}}}}
            {"recordName":"ph-2","recordType":"Photo","fields":{"title":{"value":"Same picture"},"image":{"value":{"fileChecksum":"AbC","size":300000,"localPath":"kitchen.jpg"}}}}

            """)
        let imported = try ckport(["import", "schema.ckdb", "photos.jsonl", "--assets", "in"], in: folder.url)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stderr.contains("stored 1 asset file"), "\(imported.stderr)")
        let backup = try ckport(["backup", "-o", "photos.ckbundle"], in: folder.url)
        #expect(backup.status == 0 && !backup.stderr.contains("warning"), "\(backup.stderr)")
        #expect(try ckport(["inspect", "photos.ckbundle"], in: folder.url).stdout.contains("(assets)"))
        let verify = try ckport(["verify", "photos.ckbundle"], in: folder.url)
        #expect(verify.stdout.contains("2 records and 1 asset files"), "\(verify.stdout)")
        let restore = try ckport(["restore", "photos.ckbundle", "--store", "copy.sqlite"], in: folder.url)
        #expect(restore.stderr.contains("restored 2 records and 1 asset files"), "\(restore.stderr)")
        let exported = try ckport(
            ["export", "--store", "copy.sqlite", "-o", "out.jsonl", "--assets", "out"], in: folder.url)
        #expect(exported.status == 0, "\(exported.stderr)")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path("out"))
        #expect(files.count == 1 && files[0].count == 64)
        #expect(folder.data("out/" + files[0]) == Data(picture))
        #expect(folder.text("out.jsonl").contains(#""sha256":"\#(files[0])""#))
        // Back in through the exported files alone: the values name their bytes by SHA-256.
        let again = try ckport(
            ["import", "schema.ckdb", "out.jsonl", "--assets", "out", "--store", "again.sqlite"], in: folder.url)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try ckport(["export", "--store", "again.sqlite", "-o", "again.jsonl"], in: folder.url).status == 0)
        #expect(folder.data("again.jsonl") == folder.data("out.jsonl"))
        // Without the files, an import that names them is refused and changes nothing.
        try FileManager.default.createDirectory(atPath: folder.path("empty"), withIntermediateDirectories: true)
        let missing = try ckport(
            ["import", "schema.ckdb", "out.jsonl", "--assets", "empty", "--store", "none.sqlite"], in: folder.url)
        #expect(
            missing.status == 2
                && missing.stderr.contains("the asset path 'kitchen.jpg' names no file inside the assets folder empty")
                && missing.stderr.contains("ph-1"), "\(missing.stderr)")
    }

    @Test("migrate: status, plan (nothing written), apply with a backup, re-apply, an edited file, lint, schema diff")
    func migrate() throws {
        let folder = Scratch()
        let notes = packageRoot.appendingPathComponent("migrations/notes").path
        #expect(
            try ckport(["import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl")], in: folder.url)
                .status == 0)
        let status = try ckport(["migrate", "status", "--dir", notes], in: folder.url)
        #expect(
            status.status == 0 && status.stdout.contains("the store is at version 0 of 3")
                && status.stdout.contains("0003_note_v2.yaml"), "\(status.stdout)")
        let before = folder.data("ckport.sqlite")
        let plan = try ckport(["migrate", "plan", "--dir", notes, "--limit", "1"], in: folder.url)
        #expect(plan.status == 0, "\(plan.stderr)")
        #expect(
            plan.stdout.contains(
                "- body: \"Wants more ownership of the release process.\\nFollow up on conference budget.\""),
            "\(plan.stdout)")
        #expect(plan.stdout.contains("+ priorityLevel: \"medium\""))
        #expect(plan.stdout.contains("→ NoteV2 legacy-000003"))
        #expect(folder.data("ckport.sqlite") == before)
        let json = try ckport(["migrate", "plan", "--dir", notes, "--format", "json", "-q"], in: folder.url)
        let parsed = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
        #expect(parsed?.count == 3)
        #expect(((parsed?[1]["counts"] as? [String: Any])?["NoteV1"] as? [String: Any])?["change"] as? Int == 18)
        // apply --dry-run is plan: the same report, every migration in it.
        let dryRun = try ckport(["migrate", "apply", "--dir", notes, "--dry-run"], in: folder.url)
        let fullPlan = try ckport(["migrate", "plan", "--dir", notes], in: folder.url)
        #expect(dryRun.status == 0 && fullPlan.status == 0 && dryRun.stdout == fullPlan.stdout, "\(dryRun.stdout)")
        #expect(
            fullPlan.stdout.contains("migration 1:")
                && fullPlan.stdout.contains("migration 3: NoteV1 records become NoteV2"))
        #expect(folder.data("ckport.sqlite") == before)

        let apply = try ckport(["migrate", "apply", "--dir", notes], in: folder.url)
        #expect(apply.status == 0, "\(apply.stderr)")
        #expect(apply.stderr.contains("backed up 60 records to ckport.before-notes-0001.ckbundle"), "\(apply.stderr)")
        #expect(apply.stderr.contains("applied 3 NoteV1 records become NoteV2: 18 of 18 records changed"))
        #expect(try ckport(["verify", "ckport.before-notes-0001.ckbundle", "-q"], in: folder.url).status == 0)
        let after = try ckport(["migrate", "status", "--dir", notes], in: folder.url)
        #expect(
            after.stdout.contains("the store is at version 3 of 3") && !after.stdout.contains("pending"),
            "\(after.stdout)")
        let again = try ckport(["migrate", "apply", "--dir", notes], in: folder.url)
        #expect(again.status == 0 && again.stderr.contains("nothing to apply"))
        // A bundle of the migrated store carries its history; the restored store knows its version.
        #expect(try ckport(["backup", "-o", "migrated.ckbundle"], in: folder.url).status == 0)
        #expect(
            try ckport(["inspect", "migrated.ckbundle"], in: folder.url).stdout.contains(
                "history  3 migrations applied: notes at version 3"))
        #expect(try ckport(["restore", "migrated.ckbundle", "--store", "restored.sqlite"], in: folder.url).status == 0)
        let restored = try ckport(["migrate", "status", "--dir", notes, "--store", "restored.sqlite"], in: folder.url)
        #expect(restored.stdout.contains("the store is at version 3 of 3"), "\(restored.stdout)")

        // An applied file edited afterwards: status and apply refuse, --repair accepts.
        try FileManager.default.createDirectory(atPath: folder.path("edited"), withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: notes) where name.hasSuffix(".yaml") {
            try FileManager.default.copyItem(atPath: notes + "/" + name, toPath: folder.path("edited/" + name))
        }
        try
            (String(contentsOfFile: folder.path("edited/0002_content_and_priority_level.yaml"), encoding: .utf8)
            + "# a comment\n")
            .write(
                toFile: folder.path("edited/0002_content_and_priority_level.yaml"), atomically: true, encoding: .utf8)
        try FileManager.default.moveItem(atPath: folder.path("edited"), toPath: folder.path("notes"))
        let edited = try ckport(["migrate", "status", "--dir", "notes"], in: folder.url)
        #expect(
            edited.status == 2
                && edited.stderr.contains("0002_content_and_priority_level.yaml was edited after it was applied"),
            "\(edited.stderr)")
        #expect(try ckport(["migrate", "apply", "--dir", "notes", "--no-backup"], in: folder.url).status == 2)
        #expect(
            try ckport(["migrate", "apply", "--dir", "notes", "--repair", "--no-backup"], in: folder.url).status == 0)
        #expect(try ckport(["migrate", "status", "--dir", "notes"], in: folder.url).status == 0)

        let lint = try ckport(["migrate", "lint", "--dir", notes], in: folder.url)
        #expect(
            lint.status == 2 && lint.stdout.contains("0002_content_and_priority_level.yaml:4: renameField"),
            "\(lint.stdout)")
        #expect(
            try ckport(
                ["migrate", "lint", "--dir", packageRoot.appendingPathComponent("migrations/family-todo").path],
                in: folder.url
            ).status == 0)

        #expect(try ckport(["schema", "export", "-o", "after.ckdb"], in: folder.url).status == 0)
        let diff = try ckport(["schema", "diff", sample("notes", "schema.ckdb"), "after.ckdb"], in: folder.url)
        #expect(
            diff.status == 0 && diff.stdout.contains("+ record type NoteV2") && diff.stdout.contains("deployable"),
            "\(diff.stdout)")
        let check = try ckport(
            ["schema", "diff", "after.ckdb", sample("notes", "schema.ckdb"), "--check"], in: folder.url)
        #expect(
            check.status == 2 && check.stdout.contains("- record type NoteV2")
                && check.stdout.contains("NOT deployable"), "\(check.stdout)")
    }

    @Test(
        "the default calendar mapping: a store its migrations took further still gets it; a store from an older sample is told how to add the field"
    )
    func defaultCalendarMapping() throws {
        let folder = Scratch()
        // family-todo after its shipped migration (Task gains a priority) still exports without --mapping.
        #expect(
            try ckport(
                ["import", sample("family-todo", "schema.ckdb"), sample("family-todo", "records.jsonl"), "-q"],
                in: folder.url
            ).status == 0)
        let migrate = try ckport(
            [
                "migrate", "apply", "--dir", packageRoot.appendingPathComponent("migrations/family-todo").path,
                "--no-backup", "-q",
            ], in: folder.url)
        #expect(migrate.status == 0, "\(migrate.stderr)")
        let todo = try ckport(["export", "--format", "ics", "--dtstamp", "2026-01-01T00:00:00Z", "-q"], in: folder.url)
        #expect(todo.status == 0, "\(todo.stderr)")
        // The chores are kept as dates: their rules fall on days, not on midnights in UTC.
        #expect(
            todo.stdout.contains("BEGIN:VTODO\r\n") && todo.stdout.contains("DTSTART;VALUE=DATE:"),
            "\(todo.stdout.prefix(2000))")

        // A family-calendar store made before Event had its timeZone field.
        let original = try String(contentsOfFile: sample("family-calendar", "schema.ckdb"), encoding: .utf8)
        let older = original.replacingOccurrences(of: "        timeZone        STRING,\n", with: "")
        #expect(older != original)
        let records = try String(contentsOfFile: sample("family-calendar", "records.jsonl"), encoding: .utf8)
            .replacingOccurrences(of: #""timeZone":\{[^}]*\},"#, with: "", options: .regularExpression)
        #expect(!records.contains("timeZone"))
        try older.write(toFile: folder.path("older.ckdb"), atomically: true, encoding: .utf8)
        try records.write(toFile: folder.path("older.jsonl"), atomically: true, encoding: .utf8)
        #expect(
            try ckport(["import", "older.ckdb", "older.jsonl", "--store", "older.sqlite", "-q"], in: folder.url).status
                == 0)
        let refused = try ckport(["export", "--store", "older.sqlite", "-o", "older.ics"], in: folder.url)
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(
            refused.stderr.contains("record type Event has no field 'timeZone'")
                && refused.stderr.contains("ckport schema import new.ckdb"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path("older.ics")))
        #expect(
            try ckport(["generate", "--app", "family-calendar", "--schema", "-o", "new.ckdb"], in: folder.url).status
                == 0)
        #expect(
            try ckport(["schema", "import", "new.ckdb", "--store", "older.sqlite", "-q"], in: folder.url).status == 0)
        let exported = try ckport(["export", "--store", "older.sqlite", "-o", "older.ics"], in: folder.url)
        #expect(exported.status == 0, "\(exported.stderr)")
        // The mapping chosen for the user is named.
        #expect(
            exported.stderr.contains(
                "mapping: the family-calendar sample's (samples/family-calendar/calendar.yaml); --mapping FILE uses another"
            ), "\(exported.stderr)")
    }

    @Test("a full disk (a file size limit) gives a clear error and leaves the store byte for byte as it was")
    func diskFull() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                ["generate", "--app", "family-todo", "--records", "20000", "--seed", "3", "-o", "many.jsonl", "-q"],
                in: folder.url
            ).status == 0)
        #expect(try ckport(["import", sample("family-todo", "schema.ckdb")], in: folder.url).status == 0)
        let before = folder.data("ckport.sqlite")
        let (status, message) = try ckportWithFileSizeLimit(kilobytes: 1024, "import many.jsonl", in: folder.url)
        #expect(status == 3, "\(message)")
        #expect(
            message.contains("cannot write to the store ckport.sqlite")
                && message.contains("the store is as it was before it"), "\(message)")
        #expect(folder.data("ckport.sqlite") == before)
    }

    @Test("an incremental chain: changes and deletions since the last bundle, gaps and wrong orders refused")
    func incrementalBundles() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                ["import", sample("family-todo", "schema.ckdb"), sample("family-todo", "records.jsonl")], in: folder.url
            ).status == 0)
        #expect(try ckport(["backup", "-o", "full.ckbundle", "-q"], in: folder.url).status == 0)
        #expect(
            try ckport(["delete", "--type", "Task", "--where", "status == 'done'", "-q"], in: folder.url).status == 0)
        let first = try ckport(["backup", "-o", "inc1.ckbundle", "--since", "full.ckbundle"], in: folder.url)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("changes in 1 member "), "\(first.stderr)")
        folder.write(
            "new.jsonl",
            #"{"recordName":"task-new","recordType":"Task","scope":"shared","zoneID":{"zoneName":"household-1","ownerRecordName":"_2c354ab8c7e011972305c42725648965"},"fields":{"title":{"value":"Descale the kettle","type":"STRING"},"householdId":{"value":{"recordName":"household-1","action":"DELETE_SELF"},"type":"REFERENCE"}}}"#
                + "\n")
        #expect(try ckport(["import", "new.jsonl", "-q"], in: folder.url).status == 0)
        #expect(
            try ckport(["backup", "-o", "inc2.ckbundle", "--since", "inc1.ckbundle", "-q"], in: folder.url).status == 0)
        #expect(try ckport(["inspect", "inc2.ckbundle"], in: folder.url).stdout.contains("incremental"))
        let gap = try ckport(["restore", "full.ckbundle", "inc2.ckbundle", "--store", "gap.sqlite"], in: folder.url)
        #expect(gap.status == 2)
        #expect(gap.stderr.contains("a bundle is missing between them"), "\(gap.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path("gap.sqlite")))
        let order = try ckport(
            ["restore", "full.ckbundle", "inc2.ckbundle", "inc1.ckbundle", "--store", "order.sqlite"], in: folder.url)
        #expect(order.status == 2)
        let alone = try ckport(["restore", "inc1.ckbundle", "--store", "alone.sqlite"], in: folder.url)
        #expect(alone.stderr.contains("is incremental"), "\(alone.stderr)")
        let chain = try ckport(
            ["restore", "full.ckbundle", "inc1.ckbundle", "inc2.ckbundle", "--store", "chain.sqlite"], in: folder.url)
        #expect(chain.status == 0, "\(chain.stderr)")
        #expect(try ckport(["export", "-o", "a.jsonl"], in: folder.url).status == 0)
        #expect(try ckport(["export", "--store", "chain.sqlite", "-o", "b.jsonl"], in: folder.url).status == 0)
        #expect(folder.data("a.jsonl") == folder.data("b.jsonl"))
        #expect(folder.text("b.jsonl").contains("Descale the kettle"))
        #expect(!folder.text("b.jsonl").contains(#""status":{"value":"done""#))
        #expect(
            try ckport(
                ["backup", "-o", "x.ckbundle", "--since", "full.ckbundle", "--where", "status == 'next'"],
                in: folder.url
            ).status == 1)
    }

    @Test("an encrypted bundle needs its passphrase, from a file or the environment, never a flag")
    func encryptedBundles() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                [
                    "import", sample("relationship-checkin", "schema.ckdb"),
                    sample("relationship-checkin", "records.jsonl"),
                ], in: folder.url
            ).status == 0)
        folder.write("pass.txt", "correct horse battery staple\n")
        folder.write("wrong.txt", "incorrect horse\n")
        #expect(try ckport(["backup", "-o", "s.ckbundle", "--encrypt"], in: folder.url).status == 1)
        let sealed = try ckport(
            ["backup", "-o", "s.ckbundle", "--encrypt", "--passphrase-file", "pass.txt"], in: folder.url)
        #expect(sealed.status == 0, "\(sealed.stderr)")
        #expect(try ckport(["verify", "s.ckbundle"], in: folder.url).stderr.contains("the bundle is encrypted"))
        let wrong = try ckport(["verify", "s.ckbundle", "--passphrase-file", "wrong.txt"], in: folder.url)
        #expect(wrong.status == 2)
        #expect(wrong.stderr.contains("passphrase is wrong"))
        let restored = try ckport(
            ["restore", "s.ckbundle", "--store", "r.sqlite"], in: folder.url,
            environment: ["CKPORT_PASSPHRASE": "correct horse battery staple"])
        #expect(restored.status == 0, "\(restored.stderr)")
        #expect(try ckport(["export", "-o", "a.jsonl"], in: folder.url).status == 0)
        #expect(try ckport(["export", "--store", "r.sqlite", "-o", "b.jsonl"], in: folder.url).status == 0)
        #expect(folder.data("a.jsonl") == folder.data("b.jsonl"))
        #expect(try ckport(["backup", "-o", "x.ckbundle", "--passphrase", "secret"], in: folder.url).status == 1)
    }

    @Test("an iCalendar export of an empty selection is an error, never an empty VCALENDAR")
    func emptyCalendar() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                ["import", sample("family-calendar", "schema.ckdb"), sample("family-calendar", "records.jsonl"), "-q"],
                in: folder.url
            ).status == 0)
        let empty = try ckport(["export", "--where", "familyID == 'nobody'", "-o", "empty.ics"], in: folder.url)
        #expect(empty.status == 2, "\(empty.stderr)")
        #expect(
            empty.stderr.contains("nothing to export: the selection holds no records for the calendar's components"),
            "\(empty.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path("empty.ics")))
    }

    @Test("help examples fit 80 columns: each on one line, or broken with a backslash where a shell takes it")
    func helpExamplesFit() throws {
        let folder = Scratch()
        let commands = [
            [], ["schema"], ["schema", "import"], ["schema", "export"], ["schema", "check"], ["schema", "diff"],
            ["import"], ["export"],
            ["backup"], ["verify"], ["inspect"], ["restore"], ["migrate"], ["migrate", "status"], ["migrate", "plan"],
            ["migrate", "apply"], ["migrate", "lint"], ["delete"], ["stats"], ["generate"], ["copy"],
            ["schema", "from-coredata"], ["schema", "lint-coredata"],
        ]
        for command in commands {
            let help = try ckport(command + ["--help"], in: folder.url, environment: ["COLUMNS": "80"])
            #expect(help.status == 0)
            let lines = help.stdout.components(separatedBy: "\n")
            var examples = 0
            for (previous, line) in zip(lines, lines.dropFirst())
            where previous.hasPrefix("  ") && !previous.hasPrefix("   ") {
                if previous.hasPrefix("  ckport") { examples += 1 }
                // A wrapped example continues at the left margin; a shell continuation ends in '\'.
                #expect(
                    line.isEmpty || line.hasPrefix(" ") || previous.hasSuffix("\\"),
                    "ckport \(command.joined(separator: " ")) --help wraps: \(previous) / \(line)")
            }
            if !command.isEmpty && command != ["schema"] && command != ["migrate"] {
                #expect(examples > 0, "ckport \(command.joined(separator: " ")) --help has no example")
            }
        }
    }

    @Test("a mistyped command or option is answered with the nearest real one")
    func suggestions() throws {
        let folder = Scratch()
        let cases: [([String], String)] = [
            (["imprt", "x.jsonl"], "error: 'imprt' is not a command of ckport. Did you mean 'import'?"),
            (["exprot"], "Did you mean 'export'?"),
            (
                ["schema", "imprt", "x.ckdb"],
                "error: 'imprt' is not a command of ckport schema. Did you mean 'import'?"
            ),
            (
                ["import", "x.jsonl", "--stroe", "s.sqlite"],
                "error: unknown option '--stroe' for ckport import. Did you mean '--store'?"
            ),
            (["export", "--typ", "Note"], "Did you mean '--type'?"),
            (["migrate", "aply", "--dir", "m"], "Did you mean 'apply'?"),
            (["restore", "b.ckbundle", "--rename-zoen", "a=b"], "Did you mean '--rename-zone'?"),
        ]
        for (arguments, expected) in cases {
            let run = try ckport(arguments, in: folder.url)
            #expect(run.status == 1, "\(arguments)")
            #expect(run.stderr.contains(expected), "\(arguments): \(run.stderr)")
        }
        // Far from every name: ArgumentParser's own message, no guess.
        let far = try ckport(["frobnicate"], in: folder.url)
        #expect(far.status == 1 && !far.stderr.contains("Did you mean"))
    }

    @Test(
        "one voice for a file that cannot be what a command expects: missing, a folder, binary data — same words, exit 2, every command"
    )
    func inputFileMistakes() throws {
        let folder = Scratch()
        #expect(try ckport(["import", sample("family-calendar", "schema.ckdb"), "-q"], in: folder.url).status == 0)
        try FileManager.default.createDirectory(atPath: folder.path("afolder"), withIntermediateDirectories: true)
        try Data([0x7F, 0x45, 0x4C, 0x46, 0x02, 0x01, 0x01, 0x00, 0x00, 0x00, 0xFF, 0xFE]).write(
            to: URL(fileURLWithPath: folder.path("binary.bin")))
        // Each command with a placeholder for the file, and what it expected the file to be.
        let commands: [([String], String, Bool)] = [
            (["import", "FILE"], "JSON", false),
            (["import", "FILE", "--format", "csv", "--type", "Event"], "CSV", false),
            (["import", "FILE", "--format", "ics"], "an iCalendar file", false),
            (["schema", "check", "FILE"], "a schema", false), (["schema", "import", "FILE"], "a schema", false),
            (["schema", "diff", "FILE", "FILE"], "a schema", false),
            (["verify", "FILE"], "a bundle", true), (["inspect", "FILE"], "a bundle", true),
            (["restore", "FILE", "--store", "r.sqlite"], "a bundle", true),
            (["backup", "-o", "b.ckbundle", "--since", "FILE"], "a bundle", true),
            (["export", "--format", "ics", "--mapping", "FILE", "-o", "x.ics"], "a mapping", false),
        ]
        // A file this process may not read: one made unreadable, or, for root (as CI runs the
        // tests), whom file modes do not stop, a write-only sysctl (root reads those by their
        // owner bits too) or another process's memory. One of them always is.
        try Data("{}".utf8).write(to: URL(fileURLWithPath: folder.path("unreadable.json")))
        chmod(folder.path("unreadable.json"), 0)
        let unreadable = try #require(
            [folder.path("unreadable.json"), "/proc/sys/vm/drop_caches", "/proc/sys/vm/compact_memory", "/proc/1/mem"]
                .first { path in
                    let probe = open(path, O_RDONLY)
                    if probe >= 0 { close(probe) }
                    return probe < 0 && (errno == EACCES || errno == EPERM)
                }, "no file here that this process may not read")
        for (command, kind, isBundle) in commands {
            let mistakes = [
                ("missing.file", "error: missing.file: no such file"),
                ("afolder", "error: afolder: is a folder, not \(kind)"),
                (unreadable, "error: \(unreadable): cannot be read ("),
            ]
            for (file, expected) in mistakes + [
                (
                    "binary.bin",
                    isBundle
                        ? "error: binary.bin: not \(kind) (a bundle is the gzip-compressed tar"
                        : "error: binary.bin: not \(kind): it holds binary data"
                )
            ] {
                let arguments = command.map { $0 == "FILE" ? file : $0 }
                let run = try ckport(arguments, in: folder.url)
                #expect(run.status == 2, "\(arguments): \(run.status) \(run.stderr)")
                #expect(run.stderr.hasPrefix(expected), "\(arguments): \(run.stderr)")
                #expect(
                    !run.stderr.contains("NSCocoaErrorDomain") && !run.stderr.contains("could not be completed"),
                    "\(arguments): \(run.stderr)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: folder.path("r.sqlite")))
        #expect(
            !FileManager.default.fileExists(atPath: folder.path("x.ics"))
                && !FileManager.default.fileExists(atPath: folder.path("b.ckbundle")))
    }

    @Test("a store that cannot be opened or made says which path and why, in words, never SQLite's or SQL")
    func unusableStore() throws {
        let folder = Scratch()
        for (store, expected) in [
            (
                "/proc/ckport-test.sqlite",
                "error: cannot use the store /proc/ckport-test.sqlite: the file cannot be created ("
            ),
            (
                "no/such/folder/s.sqlite",
                "error: cannot use the store no/such/folder/s.sqlite: its folder no/such/folder does not exist"
            ),
        ] {
            let run = try ckport(
                ["schema", "import", sample("notes", "schema.ckdb"), "--store", store], in: folder.url)
            #expect(run.status == 3, "\(run.stderr)")
            #expect(run.stderr.hasPrefix(expected), "\(run.stderr)")
            #expect(
                !run.stderr.contains("SQLite") && !run.stderr.contains("unable to open database file"), "\(run.stderr)")
        }
    }

    @Test("restoring another app's bundle into a store says so and where it can go, and changes nothing")
    func wrongAppBundle() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                [
                    "import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl"), "--store",
                    "notes.sqlite", "-q",
                ], in: folder.url
            ).status == 0)
        #expect(
            try ckport(["backup", "--store", "notes.sqlite", "-o", "notes.ckbundle", "-q"], in: folder.url).status == 0)
        #expect(
            try ckport(
                ["import", sample("family-todo", "schema.ckdb"), sample("family-todo", "records.jsonl"), "-q"],
                in: folder.url
            ).status == 0)
        let before = try ckport(["export"], in: folder.url).stdout
        let run = try ckport(["restore", "notes.ckbundle", "--mode", "upsert"], in: folder.url)
        #expect(run.status == 2)
        #expect(
            run.stderr.contains(
                "it is the backup of another app or of another schema. Nothing was changed; restore it into a store of its own (--store NEW.sqlite)"
            ), "\(run.stderr)")
        #expect(!run.stderr.contains("delete them first"))
        #expect(try ckport(["export"], in: folder.url).stdout == before)
        #expect(try ckport(["restore", "notes.ckbundle", "--mode", "insert"], in: folder.url).status == 1)
    }

    @Test(
        "messages that tell the truth: generate's formats, the import headline, a store without a schema, empty files, empty migration folders, another app's migrations"
    )
    func truthfulMessages() throws {
        let folder = Scratch()
        for arguments in [
            ["generate", "--app", "notes", "--format", "csv"], ["generate", "--app", "notes", "-o", "g.ics"],
            ["generate", "--app", "notes", "--format", "tsv"],
        ] {
            let run = try ckport(arguments, in: folder.url)
            #expect(
                run.status == 1 && run.stderr.contains("generate writes JSON or JSON Lines"),
                "\(arguments): \(run.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: folder.path("g.ics")))
        // No schema: one message, no store file.
        let noSchema = try ckport(["import", sample("notes", "records.jsonl")], in: folder.url)
        #expect(noSchema.status == 2)
        #expect(noSchema.stderr.components(separatedBy: "\n").filter { !$0.isEmpty }.count == 1, "\(noSchema.stderr)")
        #expect(
            noSchema.stderr.contains(
                "there is no store at ckport.sqlite yet, so the records cannot be checked against one"))
        #expect(!FileManager.default.fileExists(atPath: folder.path("ckport.sqlite")))
        // The headline counts what went in, the rejects apart.
        #expect(try ckport(["import", sample("notes", "schema.ckdb"), "-q"], in: folder.url).status == 0)
        folder.write(
            "mixed.jsonl",
            #"{"recordName":"f1","recordType":"Folder","zoneID":{"zoneName":"Notes"},"fields":{"name":{"value":"A"}}}"#
                + "\n"
                + #"{"recordName":"f2","recordType":"Folder","zoneID":{"zoneName":"Notes"},"fields":{"name":{"value":7}}}"#
                + "\n")
        let mixed = try ckport(["import", "mixed.jsonl", "--skip-invalid"], in: folder.url)
        #expect(
            mixed.stderr.contains("imported 1 record from 1 file in") && mixed.stderr.contains("; 1 rejected"),
            "\(mixed.stderr)")
        folder.write("empty.jsonl", "")
        #expect(
            try ckport(["import", "empty.jsonl"], in: folder.url).stderr.contains(
                "note: empty.jsonl is empty: it holds no records"))
        // Migrations: a folder without any, and another app's set, which is refused before any backup.
        try FileManager.default.createDirectory(atPath: folder.path("none"), withIntermediateDirectories: true)
        let none = try ckport(["migrate", "plan", "--dir", "none"], in: folder.url)
        #expect(none.status == 2 && none.stderr.contains("none: no migration files found"), "\(none.stderr)")
        let other = try ckport(
            ["migrate", "apply", "--dir", packageRoot.appendingPathComponent("migrations/family-todo").path],
            in: folder.url)
        #expect(other.status == 2, "\(other.stderr)")
        #expect(
            !(try FileManager.default.contentsOfDirectory(atPath: folder.url.path)).contains {
                $0.hasSuffix(".ckbundle")
            })
    }
}

/// Changes the case of the first letter of the first string value: the record stays valid.
private func flipFirstLetter(_ bytes: inout [UInt8]) -> Bool {
    let opening = Array(#""value":""#.utf8)
    guard let start = bytes.indices.first(where: { bytes[$0...].starts(with: opening) }),
        start + opening.count < bytes.count
    else { return false }
    let at = start + opening.count
    guard
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(bytes[at])
            || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(bytes[at])
    else { return false }
    bytes[at] ^= 0x20
    return true
}

/// Writes a copy of a bundle whose first records member `edit` changes (returning true), its
/// manifest kept (the gzip and tar sound, the member's SHA-256 not the manifest's); returns the
/// member.
private func editedBundle(_ bundle: String, _ output: String, edit: (inout [UInt8]) -> Bool) throws -> String {
    let tar = TarReader(gzip: try GzipReader(path: bundle))
    var archive: [UInt8] = []
    var edited: String?
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while let entry = try tar.next() {
        var bytes: [UInt8] = []
        while true {
            let n = try buffer.withUnsafeMutableBytes { try tar.readContent(into: $0) }
            if n == 0 { break }
            bytes += buffer[0..<n]
        }
        if edited == nil, entry.path.hasPrefix("records/"), edit(&bytes) { edited = entry.path }
        archive += Tar.header(path: entry.path, size: Int64(bytes.count)) + bytes + Tar.padding(Int64(bytes.count))
    }
    archive += Tar.end
    try Data(GzipCompressor.member(archive)).write(to: URL(fileURLWithPath: output))
    return try #require(edited)
}
