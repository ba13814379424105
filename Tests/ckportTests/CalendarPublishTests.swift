import Foundation
import TestSupport
import Testing

/// `ckport calendar publish` into Radicale and Xandikos, read back and changed on the server by
/// the python `caldav` client (Tests/Fixtures/caldav-client.py).
@Suite("ckport calendar publish, against real CalDAV servers", .enabled(if: CalDAVTestServers.enabled))
struct CalendarPublishTests {
    typealias Server = CalDAVTestServers.Server

    /// What the python client says, as JSON: each event by UID.
    func client(_ arguments: [String], server: Server, in folder: Scratch) throws -> [String: [String: Any]] {
        var environment: [String: String] = [:]
        if let user = try server.user() { environment["CALDAV_USER"] = user }
        if let file = server.passwordFile { environment["CALDAV_PASSWORD_FILE"] = file }
        let result = try run(
            CalDAVTestServers.python,
            [packageRoot.appendingPathComponent("Tests/Fixtures/caldav-client.py").path] + arguments,
            environment: environment, in: folder)
        #expect(result.status == 0, "caldav-client.py \(arguments.joined(separator: " ")): \(result.output)")
        guard arguments.first == "list" || arguments.first == "file" else { return [:] }
        return try #require(
            try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: [String: Any]])
    }

    /// Runs a program with more environment; its status and standard output (standard error after it).
    func run(_ program: String, _ arguments: [String], environment: [String: String], in folder: Scratch) throws -> (
        status: Int32, output: String
    ) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        process.currentDirectoryURL = folder.url
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data + errors, as: UTF8.self))
    }

    /// `ckport calendar publish` into `calendar`, signed in as the server wants.
    func publish(_ calendar: URL, _ more: [String] = [], server: Server, in folder: Scratch) throws -> Run {
        var arguments = ["calendar", "publish", "--caldav", calendar.absoluteString, "--store", "cal.sqlite"] + more
        if let user = try server.user(), let file = server.passwordFile {
            arguments += ["--user", user, "--password-file", file]
        }
        return try ckport(arguments, in: folder.url)
    }

    /// The events without the server's own keys (ETag, address), to compare with a file's.
    func content(_ events: [String: [String: Any]]) -> [String: NSDictionary] {
        events.mapValues { event in
            var event = event
            event["etag"] = nil
            event["href"] = nil
            return event as NSDictionary
        }
    }

    func etags(_ events: [String: [String: Any]]) -> [String: String] {
        events.compactMapValues { $0["etag"] as? String }
    }

    @Test(
        "a published family calendar holds exactly export's events (by UID, SUMMARY, DTSTART, DTEND, RRULE, attendees) and passes the RFC 5545 checker; one change is one PUT, one deletion one DELETE; an event edited on the server is reported and kept",
        arguments: Server.allCases)
    func publish(_ server: Server) throws {
        let folder = Scratch()
        try importSample("family-calendar", into: "cal.sqlite", in: folder)
        let calendar = try server.newCalendar("publish")
        let selection = ["--where", "familyID == 'family-1'", "--tz", "Europe/Berlin"]
        let first = try publish(calendar, selection, server: server, in: folder)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains(": 9 new, 0 changed, 0 deleted, 0 unchanged"), "\(first.stdout)")
        #expect(first.stderr.contains("made the calendar"), "\(first.stderr)")
        // The same events as export writes for the selection, read back by another client.
        #expect(
            try ckport(["export", "--store", "cal.sqlite", "-o", "family.ics", "-q"] + selection, in: folder.url).status
                == 0)
        let exported = try client(["file", "family.ics"], server: server, in: folder)
        var published = try client(["list", calendar.absoluteString], server: server, in: folder)
        #expect(exported.count == 9 && content(published) == content(exported), "\(published.keys.sorted())")
        // Each resource, as the server hands it out, is a calendar RFC 5545 readers take.
        _ = try client(["dump", calendar.absoluteString, "resources"], server: server, in: folder)
        let dumped = try FileManager.default.contentsOfDirectory(
            atPath: folder.url.appendingPathComponent("resources").path)
        #expect(dumped.count == 9)
        for file in dumped {
            if let (status, output) = try Conformance.check(folder.url.appendingPathComponent("resources/" + file).path)
            {
                #expect(status == 0, "\(file): \(output)")
            }
        }
        // Nothing changed: nothing sent.
        let again = try publish(calendar, server: server, in: folder)
        #expect(
            again.status == 0
                && again.stdout.contains(
                    "nothing changed in the store or the calendar since the last publish (9 events)"),
            "\(again)")

        // One event changed in the store: one PUT (its ETag alone moves on the server).
        try changeEvent("event-1-00002", title: "School play (moved)", in: folder)
        let changed = try publish(calendar, server: server, in: folder)
        #expect(changed.stdout.contains(": 0 new, 1 changed, 0 deleted, 8 unchanged"), "\(changed)")
        let afterChange = try client(["list", calendar.absoluteString], server: server, in: folder)
        #expect(afterChange["event-1-00002"]?["summary"] as? String == "School play (moved)")
        let moved = etags(published).filter { etags(afterChange)[$0.key] != $0.value }.keys.sorted()
        #expect(moved == ["event-1-00002"], "\(moved)")
        published = afterChange

        // One deleted in the store: one DELETE.
        try deleteEvent("event-1-00003", in: folder)
        let deleted = try publish(calendar, server: server, in: folder)
        #expect(deleted.stdout.contains(": 0 new, 0 changed, 1 deleted, 8 unchanged"), "\(deleted)")
        let afterDelete = try client(["list", calendar.absoluteString], server: server, in: folder)
        #expect(Set(afterDelete.keys) == Set(published.keys).subtracting(["event-1-00003"]))
        #expect(etags(afterDelete) == etags(published).filter { $0.key != "event-1-00003" })

        // Edited on the server and in the store: reported, the server's kept; then the store's
        // on request.
        _ = try client(
            ["edit", calendar.absoluteString, "event-1-00004", "Vet (the clinic moved it)"], server: server, in: folder)
        try changeEvent("event-1-00004", title: "Vet appointment, bring the card", in: folder)
        let conflict = try publish(calendar, server: server, in: folder)
        #expect(conflict.status == 3, "\(conflict)")
        #expect(
            conflict.stderr.contains("kept the server's: event-1-00004")
                && conflict.stderr.contains("changed on the server since the last publish"), "\(conflict.stderr)")
        #expect(
            try client(["list", calendar.absoluteString], server: server, in: folder)["event-1-00004"]?["summary"]
                as? String == "Vet (the clinic moved it)")
        // Reported again, never overwritten, until the store is preferred.
        #expect(try publish(calendar, server: server, in: folder).status == 3)
        let preferred = try publish(calendar, ["--prefer", "store"], server: server, in: folder)
        #expect(preferred.status == 0 && preferred.stdout.contains("1 changed"), "\(preferred)")
        #expect(
            try client(["list", calendar.absoluteString], server: server, in: folder)["event-1-00004"]?["summary"]
                as? String == "Vet appointment, bring the card")
        let status = try ckport(["calendar", "status", "--json", "--store", "cal.sqlite"], in: folder.url)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
        let publications = try #require(json["publications"] as? [[String: Any]])
        #expect(
            publications.count == 1 && publications[0]["collection"] as? String == calendar.absoluteString
                && publications[0]["events"] as? Int == 8 && publications[0]["conflicts"] as? Int == 0,
            "\(publications)")
        // Edited on the server alone, and deleted there alone: found through the calendar's
        // sync token, reported and kept on every publish, until the store is preferred.
        let swimming = try #require(published["event-1-00005"]?["summary"] as? String)
        _ = try client(
            ["edit", calendar.absoluteString, "event-1-00005", "Swimming (pool closed)"], server: server, in: folder)
        _ = try client(["delete", calendar.absoluteString, "event-1-00006"], server: server, in: folder)
        for _ in 0..<2 {
            let serverOnly = try publish(calendar, server: server, in: folder)
            #expect(serverOnly.status == 3, "\(serverOnly)")
            #expect(
                serverOnly.stderr.contains("kept the server's: event-1-00005")
                    && serverOnly.stderr.contains("changed on the server since the last publish")
                    && serverOnly.stderr.contains("event-1-00006")
                    && serverOnly.stderr.contains("deleted on the server since the last publish"),
                "\(serverOnly.stderr)")
            let onServer = try client(["list", calendar.absoluteString], server: server, in: folder)
            #expect(onServer["event-1-00005"]?["summary"] as? String == "Swimming (pool closed)")
            #expect(onServer["event-1-00006"] == nil && onServer.count == 7)
        }
        let storeWins = try publish(calendar, ["--prefer", "store"], server: server, in: folder)
        #expect(storeWins.status == 0 && storeWins.stdout.contains("2 changed"), "\(storeWins)")
        let restoredOnServer = try client(["list", calendar.absoluteString], server: server, in: folder)
        #expect(restoredOnServer["event-1-00005"]?["summary"] as? String == swimming && restoredOnServer.count == 8)
        let settled = try publish(calendar, server: server, in: folder)
        #expect(settled.status == 0 && settled.stdout.contains("nothing changed"), "\(settled)")
        // Deleted on the server and then in the store: both sides agree, nothing is reported.
        _ = try client(["delete", calendar.absoluteString, "event-1-00007"], server: server, in: folder)
        try deleteEvent("event-1-00007", in: folder)
        let bothGone = try publish(calendar, server: server, in: folder)
        #expect(
            bothGone.status == 0 && bothGone.stdout.contains(": 0 new, 0 changed, 1 deleted, 7 unchanged"),
            "\(bothGone)")

        // What was published where moves with a backup: the store restored from a repository
        // publishes on from where the original left off, sending nothing.
        #expect(try ckport(["repo", "init", "backups", "-q"], in: folder.url).status == 0)
        #expect(try ckport(["backup", "--repo", "backups", "--store", "cal.sqlite", "-q"], in: folder.url).status == 0)
        #expect(
            try ckport(["restore", "--repo", "backups", "--store", "restored.sqlite", "-q"], in: folder.url).status == 0
        )
        let fromRestored = try ckport(
            ["calendar", "publish", "--caldav", calendar.absoluteString, "--store", "restored.sqlite"]
                + (try server.user().map { ["--user", $0, "--password-file", server.passwordFile ?? ""] } ?? []),
            in: folder.url)
        #expect(fromRestored.stdout.contains(": 0 new, 0 changed, 0 deleted, 7 unchanged"), "\(fromRestored)")
    }

    @Test(
        "vdirsyncer copies a published calendar into a folder, and khal lists every event export writes, by title and day"
    )
    func khalReadsIt() throws {
        let server = Server.xandikos
        let folder = Scratch()
        try importSample("family-calendar", into: "cal.sqlite", in: folder)
        let calendar = try server.newCalendar("khal")
        let published = try publish(
            calendar, ["--where", "familyID == 'family-1'", "--tz", "Europe/Berlin"], server: server, in: folder)
        #expect(published.status == 0, "\(published)")
        let root = folder.url.path
        try """
        [general]
        status_path = "\(root)/status/"
        [pair family]
        a = "local"
        b = "dav"
        collections = null
        [storage local]
        type = "filesystem"
        path = "\(root)/copy/"
        fileext = ".ics"
        [storage dav]
        type = "caldav"
        url = "\(calendar.absoluteString)"
        read_only = true
        """.write(to: folder.url.appendingPathComponent("vdirsyncer.conf"), atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(
            at: folder.url.appendingPathComponent("copy"), withIntermediateDirectories: true)
        let vdirsyncer = (CalDAVTestServers.python as NSString).deletingLastPathComponent + "/vdirsyncer"
        for step in ["discover", "sync"] {
            let run = try run(vdirsyncer, ["-c", root + "/vdirsyncer.conf", step], environment: [:], in: folder)
            #expect(run.status == 0, "vdirsyncer \(step): \(run.output)")
        }
        let copied = try FileManager.default.contentsOfDirectory(atPath: root + "/copy")
        #expect(copied.count == 9, "\(copied)")
        try """
        [calendars]
        [[family]]
        path = \(root)/copy/
        [locale]
        timeformat = %H:%M
        dateformat = %Y-%m-%d
        longdateformat = %Y-%m-%d
        datetimeformat = %Y-%m-%d %H:%M
        longdatetimeformat = %Y-%m-%d %H:%M
        local_timezone = Europe/Berlin
        default_timezone = Europe/Berlin
        """.write(to: folder.url.appendingPathComponent("khal.conf"), atomically: true, encoding: .utf8)
        let khal = try run(
            try ExternalTool.path("khal"),
            [
                "-c", root + "/khal.conf", "list", "2026-01-01", "400d", "--format", "{start-date} {title}",
                "--day-format", "",
            ],
            environment: ["HOME": root], in: folder)
        #expect(khal.status == 0, "\(khal.output)")
        // Every event export writes, on its first day, as khal shows it.
        #expect(
            try ckport(
                [
                    "export", "--store", "cal.sqlite", "--where", "familyID == 'family-1'", "--tz", "Europe/Berlin",
                    "-o", "family.ics", "-q",
                ],
                in: folder.url
            ).status == 0)
        let exported = try client(["file", "family.ics"], server: server, in: folder)
        #expect(exported.count == 9)
        let listed = Set(khal.output.split(separator: "\n").map(String.init))
        for (uid, event) in exported {
            let day = String((event["dtstart"] as? String ?? "").prefix(10))
            let summary = event["summary"] as? String ?? ""
            #expect(listed.contains("\(day) \(summary)"), "\(uid): \(day) \(summary) not in \(listed.sorted())")
        }
    }

    @Test("a wrong password is refused with a clear message and exit 4, and nothing is written anywhere")
    func wrongPassword() throws {
        let server = Server.radicale
        let folder = Scratch()
        try importSample("family-calendar", into: "cal.sqlite", in: folder)
        let calendar = try server.newCalendar("refused")
        try Data("not-the-password\n".utf8).write(to: folder.url.appendingPathComponent("wrong"))
        let before = folder.data("cal.sqlite")
        let refused = try ckport(
            [
                "calendar", "publish", "--caldav", calendar.absoluteString, "--store", "cal.sqlite", "--user",
                try server.user() ?? "", "--password-file", "wrong",
            ], in: folder.url)
        #expect(refused.status == 4, "\(refused)")
        #expect(refused.stderr.contains("refused") && refused.stderr.contains("401"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("not-the-password"))
        #expect(!refused.stderr.contains("warning"), "loopback is not the network: \(refused.stderr)")
        #expect(folder.data("cal.sqlite") == before)
        // A password for plain http to another machine is warned of (the run then stops at the
        // missing mapping, before any request).
        let plain = try ckport(
            [
                "calendar", "pull", "--caldav", "http://calendar.invalid/family/", "--store", "cal.sqlite", "--user",
                "family", "--password-file", "wrong", "--mapping", "missing.yaml",
            ], in: folder.url)
        #expect(plain.status != 0)
        #expect(
            plain.stderr.contains(
                "warning: --caldav is http://, so the password goes to calendar.invalid unencrypted"),
            "\(plain.stderr)")
        #expect(!plain.stderr.contains("not-the-password"))
        // A password on the command line is not taken at all.
        let inline = try ckport(
            ["calendar", "publish", "--caldav", "http://family:secret@127.0.0.1:1/cal/", "--store", "cal.sqlite"],
            in: folder.url)
        #expect(inline.status == 1 && !inline.stderr.contains("secret"), "\(inline.stderr)")
    }

    @Test(
        "the right password reaches no output and no file: publish, pull and status, from the file and from the environment; the store holds no trace of it"
    )
    func passwordStaysOut() throws {
        let server = Server.radicale
        let folder = Scratch()
        try importSample("family-calendar", into: "cal.sqlite", in: folder)
        let calendar = try server.newCalendar("secret")
        let file = try #require(server.passwordFile)
        let password = try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(password.count >= 8)
        let user = try #require(try server.user())
        let signIn = ["--user", user, "--password-file", file]
        var runs: [(String, Run)] = []
        runs.append(
            (
                "publish",
                try ckport(
                    ["calendar", "publish", "--caldav", calendar.absoluteString, "--store", "cal.sqlite"]
                        + signIn + ["--where", "familyID == 'family-1'"], in: folder.url)
            ))
        runs.append(
            (
                "pull",
                try ckport(
                    [
                        "calendar", "pull", "--caldav", calendar.absoluteString, "--store", "cal.sqlite",
                        "--set", "familyID=family-1",
                    ] + CalendarPullTests.zone + signIn, in: folder.url)
            ))
        runs.append(
            (
                "publish, password from the environment",
                try ckport(
                    [
                        "calendar", "publish", "--caldav", calendar.absoluteString, "--store", "cal.sqlite",
                        "--user", user,
                    ],
                    in: folder.url, environment: ["CKPORT_CALDAV_PASSWORD": password])
            ))
        runs.append(("status", try ckport(["calendar", "status", "--json", "--store", "cal.sqlite"], in: folder.url)))
        runs.append(("backup", try ckport(["backup", "--store", "cal.sqlite", "-o", "cal.ckbundle"], in: folder.url)))
        for (name, run) in runs {
            #expect(run.status == 0, "\(name): \(run)")
            #expect(!run.stdout.isEmpty || !run.stderr.isEmpty, "\(name) said nothing")
            #expect(!run.stdout.contains(password) && !run.stderr.contains(password), "\(name) showed the password")
        }
        #expect(runs[3].1.stdout.contains(calendar.absoluteString), "\(runs[3].1.stdout)")
        // The state lives in the store as text (in its log, too, until a checkpoint): the
        // calendar's address is there, the password is not.
        let store = ["cal.sqlite", "cal.sqlite-wal"].filter { FileManager.default.fileExists(atPath: folder.path($0)) }
            .reduce(Data()) { $0 + folder.data($1) }
        #expect(store.range(of: Data(calendar.path.utf8)) != nil, "the publication is in the store")
        #expect(store.range(of: Data(password.utf8)) == nil, "the store holds the password")
    }

    @Test(
        "two publishes of one PostgreSQL store into one calendar at once: both finish, each event is on the server once and noted once, and a third publish sends nothing",
        .enabled(if: PostgresTestServer.enabled))
    func twoWritersOnPostgres() throws {
        let server = Server.xandikos
        let folder = Scratch()
        let store = try #require(
            PostgresTestServer.store("twopublish"),
            "CI runs the PostgreSQL tests: set CKPORT_TEST_POSTGRES (see scripts/postgres-cluster.sh)")
        for arguments in [
            ["generate", "--app", "family-calendar", "--schema", "-o", "schema.ckdb", "-q"],
            ["generate", "--app", "family-calendar", "--records", "1200", "-o", "records.jsonl", "-q"],
            ["import", "schema.ckdb", "records.jsonl", "--store", store, "-q"],
        ] {
            let run = try ckport(arguments, in: folder.url)
            #expect(run.status == 0, "\(arguments): \(run.stderr)")
        }
        let calendar = try server.newCalendar("two")
        #expect(try client(["mkcalendar", calendar.absoluteString], server: server, in: folder).isEmpty)
        let processes = (0..<2).map { _ in
            let process = ckportProcess(
                [
                    "calendar", "publish", "--caldav", calendar.absoluteString, "--store", store, "--tz",
                    "Europe/Berlin",
                ],
                in: folder.url)
            let output = Pipe()
            let errors = Pipe()
            process.standardOutput = output
            process.standardError = errors
            return (process, output, errors)
        }
        for (process, _, _) in processes { try process.run() }
        var said: [String] = []
        for (process, output, errors) in processes {
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let problems = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "\(text) \(problems)")
            said.append(text)
        }
        let exported = try ckport(
            ["export", "--store", store, "--type", "Event", "--tz", "Europe/Berlin", "-o", "all.ics", "-q"],
            in: folder.url)
        #expect(exported.status == 0, "\(exported.stderr)")
        let events = try client(["file", "all.ics"], server: server, in: folder)
        let published = try client(["list", calendar.absoluteString], server: server, in: folder)
        #expect(events.count > 100 && Set(published.keys) == Set(events.keys), "\(events.count) \(published.count)")
        #expect(content(published) == content(events))
        // Each event went in once: new in one run, found there (as itself) by the other.
        let counts = said.map { line -> (new: Int, unchanged: Int) in
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\n" })
            let number = { (word: String) in
                words.firstIndex { $0 == word || $0 == word + "," }.flatMap { Int(words[words.index(before: $0)]) }
                    ?? -1
            }
            return (number("new"), number("unchanged"))
        }
        #expect(counts.allSatisfy { $0.new >= 0 && $0.new + $0.unchanged == events.count }, "\(said)")
        #expect(counts.reduce(0) { $0 + $1.new } == events.count, "\(said)")
        let third = try ckport(
            ["calendar", "publish", "--caldav", calendar.absoluteString, "--store", store], in: folder.url)
        #expect(
            third.status == 0 && third.stdout.contains("nothing changed in the store or the calendar"), "\(third)")
        let status = try ckport(["calendar", "status", "--json", "--store", store], in: folder.url)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
        let publications = try #require(json["publications"] as? [[String: Any]])
        #expect(publications.first?["events"] as? Int == events.count, "\(publications)")
    }

    /// Deletes the event `name` from the store, as `ckport delete` does.
    func deleteEvent(_ name: String, in folder: Scratch) throws {
        let deleted = try ckport(
            ["delete", "--store", "cal.sqlite", "--type", "Event", "--where", "recordName == '\(name)'", "-q"],
            in: folder.url)
        #expect(deleted.status == 0, "\(deleted.stderr)")
    }

    /// The record `name` with a new title and a later modification time, imported as the app
    /// would bring it.
    func changeEvent(_ name: String, title: String, in folder: Scratch) throws {
        let line = try #require(
            try String(
                contentsOf: packageRoot.appendingPathComponent("samples/family-calendar/records.jsonl"), encoding: .utf8
            ).split(separator: "\n").first { $0.contains("\"recordName\":\"\(name)\"") })
        var changed = String(line).replacingOccurrences(
            of: #""modified":{"timestamp":"#, with: #""modified":{"timestamp":1790000000000,"old":"#)
        let titleRange = try #require(changed.range(of: #""title":{"value":""#))
        let end = try #require(changed[titleRange.upperBound...].firstIndex(of: "\""))
        changed.replaceSubrange(titleRange.upperBound..<end, with: title)
        try Data(changed.utf8).write(to: folder.url.appendingPathComponent("changed.jsonl"))
        let imported = try ckport(["import", "changed.jsonl", "--store", "cal.sqlite", "-q"], in: folder.url)
        #expect(imported.status == 0, "\(imported.stderr)")
    }
}

/// `ckport calendar pull` from Radicale and Xandikos, the calendar changed by the python
/// `caldav` client between pulls.
@Suite("ckport calendar pull, against real CalDAV servers", .enabled(if: CalDAVTestServers.enabled))
struct CalendarPullTests {
    typealias Server = CalDAVTestServers.Server
    let publishing = CalendarPublishTests()

    static let zone = [
        "--scope", "shared", "--zone", "family-1-zone", "--owner", "_4f00e3e229b648635c6f63dca8da05ef",
    ]

    func pull(_ calendar: URL, _ more: [String] = [], server: Server, in folder: Scratch) throws -> Run {
        var arguments =
            [
                "calendar", "pull", "--caldav", calendar.absoluteString, "--store", "cal.sqlite", "--set",
                "familyID=family-1",
            ]
            + Self.zone + more
        if let user = try server.user(), let file = server.passwordFile {
            arguments += ["--user", user, "--password-file", file]
        }
        return try ckport(arguments, in: folder.url)
    }

    /// The store's record `name` (an Event, unless `type` says) in family 1's zone, as plain JSON
    /// (nil: none).
    func record(_ name: String, type: String = "Event", zone: String = "family-1-zone", in folder: Scratch) throws
        -> [String: Any]?
    {
        let run = try ckport(
            [
                "export", "--store", "cal.sqlite", "--type", type, "--scope", "shared", "--zone", zone,
                "--where",
                "recordName == '\(name)'", "--style", "plain", "-q",
            ], in: folder.url)
        guard run.status == 0, let line = run.stdout.split(separator: "\n").first else { return nil }
        return try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    }

    @Test(
        "events created, changed and deleted on the server arrive, change and go; a second pull with nothing new asks only for the sync token's changes; another family's event or another kind of record is never rewritten; most of it gone stops the pull",
        arguments: Server.allCases)
    func pull(_ server: Server) throws {
        let folder = Scratch()
        try importSample("family-calendar", into: "cal.sqlite", in: folder)
        let calendar = try server.newCalendar("pull")
        let url = calendar.absoluteString
        _ = try publishing.client(["mkcalendar", url], server: server, in: folder)
        for (uid, summary, start, end) in [
            ("swim@school.example", "Swimming gala", "20260312T140000Z", "20260312T160000Z"),
            ("evening@school.example", "Parents' evening", "20260320T170000Z", "20260320T190000Z"),
            ("fair@school.example", "Spring fair", "20260411T090000Z", "20260411T130000Z"),
        ] {
            _ = try publishing.client(["create", url, uid, summary, start, end], server: server, in: folder)
        }
        let first = try pull(calendar, server: server, in: folder)
        #expect(
            first.status == 0 && first.stdout.contains("(every event): 3 events fetched, 3 records new"), "\(first)")
        let swim = try #require(try record("swim@school.example", in: folder))
        #expect(
            swim["title"] as? String == "Swimming gala" && swim["startDate"] as? String == "2026-03-12T14:00:00.000Z")
        #expect((swim["familyID"] as? [String: Any])?["recordName"] as? String == "family-1")
        // Nothing new: one PROPFIND (is it a calendar?) and the sync report, nothing fetched.
        let quiet = try pull(calendar, server: server, in: folder)
        #expect(
            quiet.stdout.contains("(the changes since the last pull's sync token): 0 events fetched")
                && quiet.stdout.contains("2 requests (PROPFIND, REPORT)"), "\(quiet)")

        // Changed, deleted and created on the server.
        _ = try publishing.client(
            ["edit", url, "evening@school.example", "Parents' evening (hall B)"], server: server, in: folder)
        _ = try publishing.client(["delete", url, "fair@school.example"], server: server, in: folder)
        _ = try publishing.client(
            ["create", url, "concert@school.example", "Winter concert", "20261215T170000Z", "20261215T190000Z"],
            server: server, in: folder)
        let second = try pull(calendar, server: server, in: folder)
        #expect(
            second.stdout.contains("sync token): 2 events fetched, 1 records new, 1 changed, 1 deleted"), "\(second)")
        #expect(try record("evening@school.example", in: folder)?["title"] as? String == "Parents' evening (hall B)")
        #expect(try record("fair@school.example", in: folder) == nil)
        #expect(try record("concert@school.example", in: folder)?["title"] as? String == "Winter concert")

        // A UID that names family 1's own event (not from this calendar) and one that names the
        // Family record: both left as they are.
        let family = try #require(try record("family-1", type: "Family", in: folder))
        let event = try #require(try record("event-1-00005", in: folder))
        _ = try publishing.client(
            ["create", url, "event-1-00005", "Hijacked", "20260101T100000Z", "20260101T110000Z"], server: server,
            in: folder)
        _ = try publishing.client(
            ["create", url, "family-1", "Not a family", "20260101T100000Z", "20260101T110000Z"], server: server,
            in: folder)
        // Nor one that says, in ckport's own words (in lower case), that it lives in family 2's zone.
        let other = try #require(try record("event-2-00001", zone: "family-2-zone", in: folder))
        _ = try publishing.client(
            [
                "create", url, "event-2-00001", "Moved in", "20260101T100000Z", "20260101T110000Z",
                "x-ckport-zone;scope=shared;owner=_c57c6e11de48d19000b662a7ebcff25a:family-2-zone",
            ], server: server, in: folder)
        let guarded = try pull(calendar, server: server, in: folder)
        #expect(
            NSDictionary(dictionary: try #require(try record("event-2-00001", zone: "family-2-zone", in: folder)))
                == NSDictionary(dictionary: other))
        #expect(
            guarded.stderr.contains("left as it is: event-1-00005")
                && guarded.stderr.contains("left as it is: family-1"),
            "\(guarded.stderr)")
        #expect(
            NSDictionary(dictionary: try #require(try record("family-1", type: "Family", in: folder)))
                == NSDictionary(dictionary: family))
        #expect(
            NSDictionary(dictionary: try #require(try record("event-1-00005", in: folder)))
                == NSDictionary(dictionary: event))

        // Most of what it brought gone: the pull stops and changes nothing, until told.
        for uid in ["swim@school.example", "evening@school.example", "concert@school.example"] {
            _ = try publishing.client(["delete", url, uid], server: server, in: folder)
        }
        let before = folder.data("cal.sqlite")
        let stopped = try pull(calendar, server: server, in: folder)
        #expect(stopped.status == 1 && stopped.stderr.contains("no longer holds 3 of the 4 events"), "\(stopped)")
        #expect(folder.data("cal.sqlite") == before)
        let emptied = try pull(calendar, ["--delete-most"], server: server, in: folder)
        #expect(emptied.status == 0 && emptied.stdout.contains("3 deleted"), "\(emptied)")
        #expect(try record("swim@school.example", in: folder) == nil)
        let status = try ckport(["calendar", "status", "--store", "cal.sqlite"], in: folder.url)
        #expect(status.stdout.contains("pull         \(url)  1 event, last"), "\(status.stdout)")
    }

    @Test(
        "publishing and pulling one calendar does not echo: published events come back as themselves; one changed on the server is taken and then published as it is; one made on a phone is not published again; one the publish withdrew is not deleted from the store by the pull",
        arguments: Server.allCases)
    func noEcho(_ server: Server) throws {
        let folder = Scratch()
        try importSample("family-calendar", into: "cal.sqlite", in: folder)
        let calendar = try server.newCalendar("echo")
        let url = calendar.absoluteString
        #expect(
            try publishing.publish(calendar, ["--where", "familyID == 'family-1'"], server: server, in: folder).status
                == 0)
        let echo = try pull(calendar, server: server, in: folder)
        #expect(
            echo.status == 0 && echo.stdout.contains("0 events fetched")
                && echo.stdout.contains("9 published by this store seen unchanged"), "\(echo)")
        _ = try publishing.client(
            ["edit", url, "event-1-00006", "Swimming lesson (pool closed: gym)"], server: server, in: folder)
        let taken = try pull(calendar, server: server, in: folder)
        #expect(taken.stdout.contains("1 event fetched, 0 records new, 1 changed"), "\(taken)")
        #expect(try record("event-1-00006", in: folder)?["title"] as? String == "Swimming lesson (pool closed: gym)")
        // The next publish takes the server's version as published: nothing is sent.
        let back = try publishing.publish(calendar, server: server, in: folder)
        #expect(back.status == 0 && back.stdout.contains("0 new, 0 changed, 0 deleted, 9 unchanged"), "\(back)")
        let settled = try pull(calendar, server: server, in: folder)
        #expect(settled.stdout.contains("0 events fetched"), "\(settled)")
        #expect(try publishing.publish(calendar, server: server, in: folder).stdout.contains("nothing changed"))
        // An event made on a phone comes in with the pull, and falls in the publish's selection
        // (the pull gave it the family): the publish knows it is there, and sends nothing.
        _ = try publishing.client(
            ["create", url, "phone@example.org", "Dentist", "20260610T080000Z", "20260610T090000Z"], server: server,
            in: folder)
        let fromPhone = try pull(calendar, server: server, in: folder)
        #expect(fromPhone.stdout.contains("1 event fetched, 1 records new"), "\(fromPhone)")
        let quiet = try publishing.publish(calendar, server: server, in: folder)
        #expect(quiet.status == 0 && quiet.stdout.contains("0 new, 0 changed, 0 deleted, 10 unchanged"), "\(quiet)")
        // The event the pull took is cancelled in the app: the publish deletes it on the
        // server, and the next pull does not take that for a deletion of the server's (the
        // record stays, cancelled).
        let line = try #require(
            try String(
                contentsOf: packageRoot.appendingPathComponent("samples/family-calendar/records.jsonl"), encoding: .utf8
            ).split(separator: "\n").first { $0.contains("\"recordName\":\"event-1-00006\"") })
        let cancelled = String(line).replacingOccurrences(
            of: #""modified":{"timestamp":"#, with: #""modified":{"timestamp":1790000000000,"old":"#
        ).replacingOccurrences(of: #""isDeleted":{"value":0"#, with: #""isDeleted":{"value":1"#)
        #expect(cancelled.contains(#""isDeleted":{"value":1"#))
        try Data(cancelled.utf8).write(to: folder.url.appendingPathComponent("cancelled.jsonl"))
        #expect(try ckport(["import", "cancelled.jsonl", "--store", "cal.sqlite", "-q"], in: folder.url).status == 0)
        let withdrawn = try publishing.publish(calendar, server: server, in: folder)
        #expect(withdrawn.stdout.contains("0 new, 0 changed, 1 deleted"), "\(withdrawn)")
        let afterDelete = try pull(calendar, server: server, in: folder)
        #expect(afterDelete.status == 0 && afterDelete.stdout.contains("0 deleted"), "\(afterDelete)")
        #expect(try record("event-1-00006", in: folder)?["isDeleted"] as? Int == 1)
    }
}
