import Foundation
import Testing

/// What a new user met running the guides' examples and the next thing after them: each case
/// failed before its fix (the calendars' round trip and `--set` are in
/// RoundTripCommandProperties, the checks of the data after each block in GuideRunTests).
@Suite("the guides, as a new user runs them")
struct GuideDefectTests {
    static func store(_ app: String, in folder: Scratch, _ name: String = "ckport.sqlite") throws {
        let run = try ckport(
            ["import", sample(app, "schema.ckdb"), sample(app, "records.jsonl"), "--store", name, "-q"], in: folder.url)
        try #require(run.status == 0, "\(run.stderr)")
    }

    static func export(_ folder: Scratch, _ store: String = "ckport.sqlite") throws -> String {
        let run = try ckport(["export", "-q", "--store", store], in: folder.url)
        try #require(run.status == 0, "\(run.stderr)")
        return run.stdout
    }

    /// The family-todo sample's shared database on the emulator, and a store whose schema lacks
    /// Task's `status` field (so a pull leaves every Task out): the emulator and the pull's flags.
    static func cloudWithoutStatus(in folder: Scratch) throws -> (EmulatorProcess, [String]) {
        try "api-1\n".write(toFile: folder.path("api.txt"), atomically: true, encoding: .utf8)
        try "web-1\n".write(toFile: folder.path("web.txt"), atomically: true, encoding: .utf8)
        let emulator = try EmulatorProcess(
            [
                "--container", "iCloud.com.example.App", "--api-token-file", "api.txt", "--web-auth-token-file",
                "web.txt",
                "--schema", sample("family-todo", "schema.ckdb"), "--load", sample("family-todo", "records.jsonl"),
                "--database", "shared",
            ], in: folder.url)
        let full = try String(contentsOfFile: sample("family-todo", "schema.ckdb"), encoding: .utf8)
        let reduced = full.split(separator: "\n", omittingEmptySubsequences: false).filter {
            !$0.hasPrefix("        status ")
        }.joined(separator: "\n")
        try #require(reduced != full)
        try reduced.write(toFile: folder.path("reduced.ckdb"), atomically: true, encoding: .utf8)
        try #require(try ckport(["schema", "import", "reduced.ckdb", "-q"], in: folder.url).status == 0)
        return (
            emulator,
            [
                "--base-url", emulator.url, "--container", "iCloud.com.example.App", "--database", "shared",
                "--api-token-file", "api.txt", "--web-auth-token-file", "web.txt",
            ]
        )
    }

    @Test(
        "a spreadsheet without zone columns is refused beside the records it names in other zones, and the store is unchanged; with --system it comes back"
    )
    func spreadsheetZones() throws {
        let folder = Scratch()
        try Self.store("family-todo", in: folder)
        let before = try Self.export(folder)
        #expect(try ckport(["export", "--type", "Task", "-o", "tasks.csv", "-q"], in: folder.url).status == 0)
        let plain = try ckport(["import", "tasks.csv", "--type", "Task"], in: folder.url)
        #expect(plain.status == 2, "\(plain.stderr)")
        #expect(
            plain.stderr.contains(
                "tasks.csv:2:1: record 'task-1-000001' (Task) is in the store's shared zone household-1 (owner _2c354ab8c7e011972305c42725648965)"
            ), "\(plain.stderr)")
        #expect(
            plain.stderr.contains("--zone household-1 --scope shared --owner _2c354ab8c7e011972305c42725648965")
                && plain.stderr.contains("--system"), "\(plain.stderr)")
        #expect(try Self.export(folder) == before)
        // Told where one household's rows go, they go there: its tasks are matched, not copied.
        #expect(
            try ckport(
                ["export", "--type", "Task", "--zone", "household-1", "-o", "household-1.csv", "-q"], in: folder.url
            ).status == 0)
        let placed = try ckport(
            [
                "import", "household-1.csv", "--type", "Task", "--dry-run", "--zone", "household-1", "--scope",
                "shared",
                "--owner", "_2c354ab8c7e011972305c42725648965",
            ], in: folder.url)
        #expect(
            placed.status == 0 && placed.stderr.contains("Task              0             0         23"),
            "\(placed.stderr)")
        #expect(
            try ckport(["export", "--type", "Task", "--system", "-o", "all.csv", "-q"], in: folder.url).status == 0)
        let system = try ckport(["import", "all.csv", "--type", "Task"], in: folder.url)
        #expect(system.status == 0 && system.stderr.contains("Task          0        0         46"), "\(system.stderr)")
        #expect(try Self.export(folder) == before)
        // A type named in the wrong case is said to be missing, with the one meant.
        let lower = try ckport(["import", "tasks.csv", "--type", "task"], in: folder.url)
        #expect(
            lower.status == 2 && lower.stderr.contains("the schema has no record type 'task' (did you mean 'Task'?)"),
            "\(lower.stderr)")
    }

    @Test(
        "a date field is the same day under any --tz: a check-in of 5 January is written on the 5th in Los Angeles and read back unchanged"
    )
    func datesKeepTheirDay() throws {
        let folder = Scratch()
        try Self.store("relationship-checkin", in: folder)
        let before = try Self.export(folder)
        #expect(
            try ckport(["export", "-o", "la.ics", "--tz", "America/Los_Angeles", "-q"], in: folder.url).status == 0)
        let text = folder.text("la.ics").replacingOccurrences(of: "\r\n ", with: "")
        var checked = 0
        var uid = ""
        for line in text.split(separator: "\r\n") {
            if line.hasPrefix("UID:") { uid = String(line.dropFirst(4)) }
            if line.hasPrefix("DTSTART;VALUE=DATE:"), uid.hasPrefix("DailyEntry_") {
                let day = String(uid.dropFirst("DailyEntry_".count).prefix(10)).replacingOccurrences(of: "-", with: "")
                #expect(line.hasSuffix(day), "\(uid): \(line)")
                checked += 1
            }
        }
        #expect(checked > 20)
        #expect(try ckport(["import", "la.ics", "-q"], in: folder.url).status == 0)
        #expect(try ckport(["import", "la.ics", "--tz", "Asia/Tokyo", "-q"], in: folder.url).status == 0)
        #expect(try Self.export(folder) == before)
    }

    @Test(
        "a sheet's rows are never copies beside their records in other zones: not when --zone names one of the zones, not when the sheet names a zone without its scope and owner"
    )
    func spreadsheetZonesGiven() throws {
        let folder = Scratch()
        try Self.store("family-todo", in: folder)
        let before = try Self.export(folder)
        #expect(try ckport(["export", "--type", "Task", "-o", "tasks.csv", "-q"], in: folder.url).status == 0)
        // The advice names household-1; household-2's rows are refused, not copied into it.
        let named = try ckport(
            [
                "import", "tasks.csv", "--type", "Task", "--zone", "household-1", "--scope", "shared",
                "--owner", "_2c354ab8c7e011972305c42725648965",
            ], in: folder.url)
        #expect(
            named.status == 2 && named.stderr.contains("is in the store's shared zone household-2"), "\(named.stderr)")
        #expect(try Self.export(folder) == before)
        // A zoneName column without scope and owner says only part of the zone.
        let rows = ["recordName,title,zoneName", "task-1-000001,Rake the leaves,household-1"]
        try (rows.joined(separator: "\r\n") + "\r\n").write(
            toFile: folder.path("partial.csv"), atomically: true, encoding: .utf8)
        let partial = try ckport(["import", "partial.csv", "--type", "Task"], in: folder.url)
        #expect(
            partial.status == 2
                && partial.stderr.contains("record 'task-1-000001' (Task) is in the store's shared zone household-1"),
            "\(partial.stderr)")
        #expect(try Self.export(folder) == before)
    }

    @Test(
        "--set fills only what the file does not say: the file's own changes come in, a field no record type has is refused"
    )
    func setFillsOnlyTheRest() throws {
        let folder = Scratch()
        try Self.store("family-calendar", in: folder)
        #expect(
            try ckport(["export", "--type", "Event", "-o", "family.ics", "--include-deleted", "-q"], in: folder.url)
                .status == 0)
        let edited = folder.text("family.ics").replacingOccurrences(of: "CATEGORIES:school", with: "CATEGORIES:sports")
        #expect(edited != folder.text("family.ics"))
        try edited.write(toFile: folder.path("edited.ics"), atomically: true, encoding: .utf8)
        let schoolBefore = try ckport(
            ["export", "--type", "Event", "--where", "category == 'school'", "-q"], in: folder.url
        ).stdout.split(separator: "\n").count
        #expect(schoolBefore > 0)
        let run = try ckport(["import", "edited.ics", "--set", "category=family"], in: folder.url)
        #expect(run.status == 0 && !run.stderr.contains("fills new records only"), "\(run.stderr)")
        let schoolAfter = try ckport(
            ["export", "--type", "Event", "--where", "category == 'school'", "-q"], in: folder.url
        ).stdout.split(separator: "\n").count
        #expect(schoolAfter == 0, "the file's CATEGORIES did not come in")
        let unknown = try ckport(["import", "family.ics", "--set", "status=pending"], in: folder.url)
        #expect(
            unknown.status == 1
                && unknown.stderr.contains(
                    "--set status=pending: none of the record types the calendar's components become (Event) has a field 'status'"
                ), "\(unknown.stderr)")
    }

    @Test(
        "a to-do without DTSTART, and a timeZone field that holds the word none, come back as they were, under --tz and in replace mode"
    )
    func formsWithoutStart() throws {
        let folder = Scratch()
        // Only these Tasks: a replace with a calendar keeps no field the calendar does not carry.
        #expect(
            try ckport(["schema", "import", sample("family-todo", "schema.ckdb"), "-q"], in: folder.url).status == 0)
        // Tasks keep their due date in all four forms (an all-day one at its day's UTC midnight);
        // one Task says none, one holds the word "none".
        let day = 1_767_657_600_000
        let tasks = [
            ("t-date", "date", 0), ("t-floating", "floating", 36_000_000), ("t-zurich", "Europe/Zurich", 36_000_000),
            ("t-none", "none", 36_000_000), ("t-empty", nil, 36_000_000),
        ].map { name, form, time in
            #"{"recordName":"\#(name)","recordType":"Task","fields":{"title":{"value":"\#(name)","type":"STRING"},"status":{"value":"next","type":"STRING"},"dueDate":{"value":\#(day + time),"type":"TIMESTAMP"}\#(form.map { #","timeZone":{"value":"\#($0)","type":"STRING"}"# } ?? "")}}"#
        }
        try (tasks.joined(separator: "\n") + "\n").write(
            toFile: folder.path("tasks.jsonl"), atomically: true, encoding: .utf8)
        #expect(try ckport(["import", "tasks.jsonl", "-q"], in: folder.url).status == 0)
        let before = try Self.export(folder)
        for tz in [[], ["--tz", "America/Los_Angeles"]] {
            #expect(try ckport(["export", "--type", "Task", "-o", "t.ics", "-q"] + tz, in: folder.url).status == 0)
            #expect(try ckport(["import", "t.ics", "--mode", "replace", "-q"], in: folder.url).status == 0)
            #expect(try Self.export(folder) == before, "\(tz)")
        }
    }

    @Test(
        "a zone read again for records an earlier pull left out keeps the edits made here to records CloudKit did not change"
    )
    func leftOutRefetchKeepsLocalEdits() throws {
        let folder = Scratch()
        let (emulator, cloud) = try Self.cloudWithoutStatus(in: folder)
        defer { withExtendedLifetime(emulator) {} }
        #expect(try ckport(["pull", "-q"] + cloud, in: folder.url).status == 3)
        // An edit made here to a record CloudKit has not changed.
        let edit =
            #"{"recordName":"area-1-garden","recordType":"Area","scope":"shared","zoneID":{"zoneName":"household-1","ownerRecordName":"_2c354ab8c7e011972305c42725648965"},"fields":{"name":{"value":"The garden, edited here","type":"STRING"}}}"#
        #expect(try ckport(["import", "-", "-q"], in: folder.url, stdin: edit + "\n").status == 0)
        let again = try ckport(["pull"] + cloud + ["--allow-new-types"], in: folder.url)
        #expect(again.status == 0 && again.stderr.contains("23 records saved"), "\(again.stderr)")
        let area = try ckport(
            ["export", "--type", "Area", "--where", "name == 'The garden, edited here'", "-q"], in: folder.url
        ).stdout
        #expect(area.contains("area-1-garden"), "the edit was overwritten: \(again.stderr)")
        #expect(
            try ckport(["export", "--type", "Task", "-q"], in: folder.url).stdout.split(separator: "\n").count == 46)
    }

    @Test(
        "a host name nothing listens on is refused at once too, and a passphrase variable set but empty writes no bundle"
    )
    func refusedByNameAndEmptyPassphrase() throws {
        let folder = Scratch()
        try "api-1\n".write(toFile: folder.path("api.txt"), atomically: true, encoding: .utf8)
        try "web-1\n".write(toFile: folder.path("web.txt"), atomically: true, encoding: .utf8)
        try Self.store("notes", in: folder)
        let port = freePort()
        let pull = try ckport(
            [
                "pull", "--base-url", "http://localhost:\(port)", "--container", "iCloud.com.example.App",
                "--api-token-file", "api.txt", "--web-auth-token-file", "web.txt",
            ], in: folder.url)
        #expect(pull.status == 3 && pull.stderr.contains("localhost:\(port) refused the connection"), "\(pull.stderr)")
        #expect(!pull.stderr.contains("waiting") && !pull.stderr.contains("errno"), "\(pull.stderr)")
        let empty = try ckport(["backup", "-o", "x.ckbundle"], in: folder.url, environment: ["CKPORT_PASSPHRASE": ""])
        #expect(empty.status == 1 && empty.stderr.contains("$CKPORT_PASSPHRASE is set but empty"), "\(empty.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path("x.ckbundle")))
    }

    @Test("a passphrase given to backup encrypts; --no-encrypt writes a plain bundle only when asked, and says so")
    func passphraseEncrypts() throws {
        let folder = Scratch()
        try Self.store("family-todo", in: folder)
        try "correct horse battery staple\n".write(toFile: folder.path("pass.txt"), atomically: true, encoding: .utf8)
        chmod(folder.path("pass.txt"), 0o600)
        let byFile = try ckport(["backup", "-o", "a.ckbundle", "--passphrase-file", "pass.txt"], in: folder.url)
        #expect(byFile.status == 0 && byFile.stderr.contains(", encrypted)"), "\(byFile.stderr)")
        let byEnvironment = try ckport(
            ["backup", "-o", "b.ckbundle"], in: folder.url, environment: ["CKPORT_PASSPHRASE": "from the environment"])
        #expect(byEnvironment.status == 0, "\(byEnvironment.stderr)")
        for (bundle, phrase) in [
            ("a.ckbundle", "correct horse battery staple"), ("b.ckbundle", "from the environment"),
        ] {
            let verify = try ckport(["verify", bundle], in: folder.url, environment: ["CKPORT_PASSPHRASE": phrase])
            #expect(
                verify.status == 0 && verify.stdout.contains("encrypted: yes"),
                "\(bundle): \(verify.stdout) \(verify.stderr)")
            // Without the passphrase it cannot be read at all.
            #expect(try ckport(["verify", bundle], in: folder.url, environment: ["CKPORT_PASSPHRASE": ""]).status != 0)
        }
        let plain = try ckport(
            ["backup", "-o", "c.ckbundle", "--no-encrypt"], in: folder.url,
            environment: ["CKPORT_PASSPHRASE": "set for another job"])
        #expect(
            plain.status == 0
                && plain.stderr.contains(
                    "note: the bundle is not encrypted (--no-encrypt), although $CKPORT_PASSPHRASE is set"),
            "\(plain.stderr)")
        #expect(
            try ckport(["verify", "c.ckbundle"], in: folder.url, environment: ["CKPORT_PASSPHRASE": ""]).stdout
                .contains("encrypted: no"))
        let contradiction = try ckport(
            ["backup", "-o", "d.ckbundle", "--no-encrypt", "--passphrase-file", "pass.txt"], in: folder.url)
        #expect(
            contradiction.status == 1 && !FileManager.default.fileExists(atPath: folder.path("d.ckbundle")),
            "\(contradiction.stderr)")
    }

    @Test(
        "records a pull leaves out come in with the next pull once the schema takes them, in their zone and under their owner; the rejects file keeps the zone"
    )
    func pullLeavesNothingBehind() throws {
        let folder = Scratch()
        let (emulator, cloud) = try Self.cloudWithoutStatus(in: folder)
        defer { withExtendedLifetime(emulator) {} }
        let first = try ckport(["pull"] + cloud + ["--rejects", "left.jsonl"], in: folder.url)
        #expect(first.status == 3, "\(first.stderr)")
        #expect(
            first.stderr.contains("46 records were left out")
                && first.stderr.contains("The next pull asks for them again"), "\(first.stderr)")
        #expect(
            first.stderr.contains("use --allow-new-types to add it") && !first.stderr.contains("--allow-new-fields"),
            "\(first.stderr)")
        // Each reject names the zone as the store keeps it.
        let lines = folder.text("left.jsonl").split(separator: "\n")
        #expect(lines.count == 46)
        for line in lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let record = try #require(object["record"] as? [String: Any])
            let zone = try #require(record["zoneID"] as? [String: Any])
            #expect(
                record["scope"] as? String == "shared" && (zone["ownerRecordName"] as? String)?.hasPrefix("_") == true,
                "\(line.prefix(300))")
        }
        let status = try ckport(["cloud", "status"], in: folder.url)
        #expect(
            status.stdout.contains(
                "): records were left out (the next pull reads the zone again from the start and asks for them)"),
            "\(status.stdout)")
        // The schema takes them now: the next pull reads the zones again and brings them in.
        let second = try ckport(["pull"] + cloud + ["--allow-new-types"], in: folder.url)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stderr.contains("an earlier pull left some of its records out"), "\(second.stderr)")
        let tasks = try ckport(["export", "--type", "Task", "-q"], in: folder.url).stdout.split(separator: "\n")
        #expect(tasks.count == 46)
        let zones = Set(
            try tasks.map { line -> String in
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                let zone = try #require(object["zoneID"] as? [String: Any])
                return "\(object["scope"] ?? "")/\(zone["zoneName"] ?? "")/\(zone["ownerRecordName"] ?? "")"
            })
        #expect(
            zones == [
                "shared/household-1/_2c354ab8c7e011972305c42725648965",
                "shared/household-2/_bffaf971cb908ab30a22a6a7bb7dbdf7",
            ], "\(zones)")
        // And the token moves on: the pull after that asks only for what changed.
        let third = try ckport(["pull"] + cloud, in: folder.url)
        #expect(
            third.status == 0 && third.stderr.contains("pulled 0 records") && !third.stderr.contains("fetched again"),
            "\(third.stderr)")
    }

    @Test(
        "a push that selects nothing in the target database's scope says where the records are and which --scope sends them"
    )
    func pushSaysWhichScope() throws {
        let folder = Scratch()
        try Self.store("family-todo", in: folder)
        try "api-1\n".write(toFile: folder.path("api.txt"), atomically: true, encoding: .utf8)
        try "web-1\n".write(toFile: folder.path("web.txt"), atomically: true, encoding: .utf8)
        let emulator = try EmulatorProcess(
            [
                "--container", "iCloud.com.example.App", "--api-token-file", "api.txt", "--web-auth-token-file",
                "web.txt",
                "--schema", sample("family-todo", "schema.ckdb"),
            ], in: folder.url)
        let cloud = [
            "--base-url", emulator.url, "--container", "iCloud.com.example.App", "--api-token-file", "api.txt",
            "--web-auth-token-file", "web.txt",
        ]
        for dry in [true, false] {
            let push = try ckport(["push"] + cloud + (dry ? ["--dry-run"] : []), in: folder.url)
            #expect(push.status == 0, "\(push.stderr)")
            #expect(
                push.stderr.contains(
                    "(80 records in the shared scope); --scope shared sends them to the private database"),
                "\(push.stderr)")
        }
        let shared = try ckport(["push"] + cloud + ["--scope", "shared"], in: folder.url)
        #expect(
            shared.status == 0 && shared.stderr.contains("pushed 80 records")
                && !shared.stderr.contains("nothing to send"), "\(shared.stderr)")
    }

    @Test("a connection nothing listens on is said to be refused, at once, without retries")
    func refusedConnection() throws {
        let folder = Scratch()
        try "api-1\n".write(toFile: folder.path("api.txt"), atomically: true, encoding: .utf8)
        try "web-1\n".write(toFile: folder.path("web.txt"), atomically: true, encoding: .utf8)
        try Self.store("notes", in: folder)
        let port = freePort()
        let pull = try ckport(
            [
                "pull", "--base-url", "http://127.0.0.1:\(port)", "--container", "iCloud.com.example.App",
                "--api-token-file", "api.txt", "--web-auth-token-file", "web.txt",
            ], in: folder.url)
        #expect(pull.status == 3, "\(pull.stderr)")
        #expect(
            pull.stderr.contains("127.0.0.1:\(port) refused the connection (nothing is listening there)"),
            "\(pull.stderr)")
        #expect(
            !pull.stderr.contains("waiting") && !pull.stderr.contains("reset") && !pull.stderr.contains("errno"),
            "\(pull.stderr)")
    }

    @Test("scripts/install.sh installs ckport-emulator beside ckport")
    func installsEmulator() throws {
        let folder = Scratch()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [packageRoot.appendingPathComponent("scripts/install.sh").path, folder.path("prefix")]
        var environment = ProcessInfo.processInfo.environment
        environment["CKPORT_INSTALL_FROM"] = ckportBinary.deletingLastPathComponent().path
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        for program in ["ckport", "ckport-emulator"] {
            #expect(
                FileManager.default.isExecutableFile(atPath: folder.path("prefix/bin/\(program)")),
                "\(program) was not installed")
        }
    }

    @Test(
        "the smaller things: a port in use, a missing token file, an option a command does not take, an output format ckport does not write, and counts that say what the store holds"
    )
    func smallerThings() throws {
        let folder = Scratch()
        try Self.store("family-calendar", in: folder)
        // Something listens on the port serve is asked for.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        listen(listener, 1)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let serve = try ckport(["serve", "--port", String(port)], in: folder.url)
        #expect(
            serve.status == 3
                && serve.stderr.contains(
                    "Address already in use (another program listens there, another ckport serve or cloud login perhaps: --port chooses another port)"
                ), "\(serve.stderr)")
        // serve and cloud login no longer share a default port.
        let help = try ckport(["serve", "--help"], in: folder.url).stdout
        #expect(help.contains("default: 8640") && help.contains("8642"), "\(help)")

        let token = try ckport(
            [
                "pull", "--container", "iCloud.com.example.App", "--api-token-file", "nope.txt",
                "--web-auth-token-file", "web.txt",
            ], in: folder.url)
        #expect(token.status == 2 && token.stderr.contains("nope.txt: no such file"), "\(token.stderr)")

        for (arguments, said) in [
            (
                ["verify", "x.ckbundle", "--store", "s.sqlite"],
                "error: unknown option '--store' for ckport verify: it opens no store"
            ),
            (
                ["generate", "--app", "notes", "--wait", "3"],
                "error: unknown option '--wait' for ckport generate: it opens no store"
            ),
            (
                ["import", "--bogus-flag", "x.jsonl"],
                "error: unknown option '--bogus-flag' for ckport import (ckport import --help lists its options)"
            ),
        ] {
            let run = try ckport(arguments, in: folder.url)
            #expect(run.status == 1 && run.stderr.hasPrefix(said), "\(arguments): \(run.stderr)")
        }
        let missing = try ckport(["import"], in: folder.url)
        #expect(missing.status == 1 && missing.stderr.hasPrefix("error: "), "\(missing.stderr)")

        let xlsx = try ckport(["export", "-o", "out.xlsx"], in: folder.url)
        #expect(xlsx.status == 1 && xlsx.stderr.contains("ckport does not write .xlsx files"), "\(xlsx.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path("out.xlsx")))
        #expect(
            try ckport(["export", "-o", "out.xlsx", "--format", "csv", "--type", "Event", "-q"], in: folder.url).status
                == 0)

        // Counts: the files records came from, and what a chain of bundles leaves.
        let two = Scratch()
        let imported = try ckport(
            ["import", sample("family-calendar", "schema.ckdb"), sample("family-calendar", "records.jsonl")],
            in: two.url)
        #expect(
            imported.stderr.contains("imported 120 records from 1 file, and the schema from "), "\(imported.stderr)")
        #expect(try ckport(["backup", "-o", "monday.ckbundle", "-q"], in: folder.url).status == 0)
        #expect(
            try ckport(["delete", "--type", "Event", "--where", "isDeleted == 1", "-q"], in: folder.url).status == 0)
        #expect(
            try ckport(["backup", "-o", "tuesday.ckbundle", "--since", "monday.ckbundle", "-q"], in: folder.url).status
                == 0)
        let holds = try ckport(["export", "-q"], in: folder.url).stdout.split(separator: "\n").count
        let restored = try ckport(
            ["restore", "monday.ckbundle", "tuesday.ckbundle", "--store", "r.sqlite"], in: folder.url)
        #expect(restored.stderr.contains("; the store now holds \(holds) records"), "\(restored.stderr)")
        let backup = try ckport(["backup", "-o", "one.ckbundle", "--type", "Family"], in: folder.url)
        #expect(backup.stderr.contains(" members ") || backup.stderr.contains(" member "), "\(backup.stderr)")
        #expect(!backup.stderr.contains("1 members"), "\(backup.stderr)")
    }
}
