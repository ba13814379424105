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
        // Nothing changed: nothing asked of the server.
        let again = try publish(calendar, server: server, in: folder)
        #expect(
            again.status == 0
                && again.stdout.contains("nothing changed in the store since the last publish (9 events)"), "\(again)")

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
        #expect(
            try ckport(
                [
                    "delete", "--store", "cal.sqlite", "--type", "Event", "--where", "recordName == 'event-1-00003'",
                    "-q",
                ],
                in: folder.url
            ).status == 0)
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
        #expect(folder.data("cal.sqlite") == before)
        // A password on the command line is not taken at all.
        let inline = try ckport(
            ["calendar", "publish", "--caldav", "http://family:secret@127.0.0.1:1/cal/", "--store", "cal.sqlite"],
            in: folder.url)
        #expect(inline.status == 1 && !inline.stderr.contains("secret"), "\(inline.stderr)")
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
