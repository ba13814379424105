import Foundation
import TestSupport
import Testing

/// `ckport serve`'s pages as a real browser renders them: Debian's chromium, headless. The
/// browser is a prerequisite of the tests (`.ci/run` installs it); without it this suite fails.
@Suite("ckport serve in a browser")
struct BrowserTests {
    static let chromium: String? = {
        let candidates = [
            ProcessInfo.processInfo.environment["CKPORT_CHROMIUM"], "/usr/bin/chromium", "/usr/bin/chromium-browser",
        ].compactMap { $0 }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// Where the screenshots go: `CKPORT_TEST_ARTIFACTS`, else `.build/test-artifacts` in the package.
    static let artifacts: URL = {
        let base =
            ProcessInfo.processInfo.environment["CKPORT_TEST_ARTIFACTS"].map { URL(fileURLWithPath: $0) }
            ?? packageRoot.appendingPathComponent(".build/test-artifacts")
        let folder = base.appendingPathComponent("serve")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }()

    /// Runs the browser on `url`: the DOM it rendered (`--dump-dom`), or a screenshot at `shot`;
    /// and what it logged from the page (console messages, script errors).
    func browse(_ url: String, screenshot shot: String? = nil) throws -> (dom: String, console: [String]) {
        let browser = try #require(
            Self.chromium, "chromium is not installed (Debian: apt-get install chromium); .ci/run installs it")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: browser)
        var arguments = [
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            "--enable-logging=stderr", "--v=0",
            "--user-data-dir=" + NSTemporaryDirectory() + "ckport-chromium-\(UUID().uuidString)",
        ]
        if let shot {
            arguments += [
                "--window-size=1280,1000", "--screenshot=" + Self.artifacts.appendingPathComponent(shot).path,
            ]
        } else {
            arguments.append("--dump-dom")
        }
        process.arguments = arguments + [url]
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let dom = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let log = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        if let profile = arguments.first(where: { $0.hasPrefix("--user-data-dir=") }) {
            try? FileManager.default.removeItem(atPath: String(profile.dropFirst("--user-data-dir=".count)))
        }
        #expect(process.terminationStatus == 0, "chromium on \(url): \(log.suffix(500))")
        let console = log.split(separator: "\n").map(String.init).filter {
            $0.contains(":CONSOLE") || $0.contains("Uncaught") || $0.contains("Content Security Policy")
        }
        return (dom, console)
    }

    /// What a text looks like in the DOM the browser serializes: `&`, `<`, `>` and no-break spaces escaped.
    func asText(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
            .replacingOccurrences(of: "\u{A0}", with: "&nbsp;")
    }

    /// No element of `dom` can run a script: no script element, no event handler attribute, no
    /// `javascript:` address in an attribute.
    func noScriptIn(_ dom: String, _ page: String) {
        let lower = dom.lowercased()
        #expect(!lower.contains("<script"), "\(page): a script element")
        let tags = lower.split(separator: "<").map { $0.prefix { $0 != ">" } }
        for tag in tags where !tag.hasPrefix("/") && !tag.hasPrefix("!") {
            let attributes = tag.split(separator: " ").dropFirst()
            #expect(
                !attributes.contains { $0.hasPrefix("on") && $0.contains("=") }, "\(page): an event handler in <\(tag)>"
            )
            #expect(!tag.contains("javascript:") && !tag.contains("vbscript:"), "\(page): a script address in <\(tag)>")
        }
    }

    @Test(
        "the family-calendar sample with an XSS filter-evasion list as its events' titles: every vector shows as text, no page runs or even holds a script, reference links and --where work as rendered, screenshots kept"
    )
    func pages() throws {
        let folder = Scratch()
        try importSample("family-calendar", into: "family.sqlite", in: folder)
        // RSnake's list (Tests/Fixtures/corpora/xss, with its source), one event per vector.
        let vectors = try String(
            contentsOf: packageRoot.appendingPathComponent("Tests/Fixtures/corpora/xss/XSS-RSNAKE.txt"), encoding: .utf8
        )
        .split(separator: "\n").map(String.init)
        #expect(vectors.count == 73)
        var lines: [String] = []
        for (index, vector) in vectors.enumerated() {
            var fields: [String: Any] = [
                "title": ["value": vector, "type": "STRING"], "category": ["value": "xss", "type": "STRING"],
                "familyID": ["value": ["recordName": "family-1", "action": "DELETE_SELF"], "type": "REFERENCE"],
            ]
            // The first one is on the calendar too: 10 March 2026, 11:00 to 12:00 in Berlin.
            if index == 0 {
                fields["startDate"] = ["value": 1_773_136_800_000, "type": "TIMESTAMP"]
                fields["endDate"] = ["value": 1_773_140_400_000, "type": "TIMESTAMP"]
            }
            let record: [String: Any] = [
                "recordName": "xss-\(String(format: "%02d", index + 1))", "recordType": "Event", "scope": "shared",
                "zoneID": ["zoneName": "family-1-zone", "ownerRecordName": "_4f00e3e229b648635c6f63dca8da05ef"],
                "fields": fields,
            ]
            lines.append(
                String(
                    decoding: try JSONSerialization.data(withJSONObject: record, options: [.sortedKeys]), as: UTF8.self)
            )
        }
        folder.write("xss.jsonl", lines.joined(separator: "\n") + "\n")
        #expect(try ckport(["import", "xss.jsonl", "--store", "family.sqlite", "-q"], in: folder.url).status == 0)
        let before = folder.data("family.sqlite")

        let (server, address) = try startServe(["--store", "family.sqlite", "-q"], in: folder)
        defer {
            kill(server.process.processIdentifier, SIGINT)
            _ = server.finish()
        }
        let base = address.absoluteString.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        let zone = "shared:_4f00e3e229b648635c6f63dca8da05ef:family-1-zone"

        // The overview.
        let overview = try browse(base + "/")
        #expect(overview.console.isEmpty, "\(overview.console)")
        #expect(overview.dom.contains("RECORD TYPE EventParticipant (") && overview.dom.contains(">Event</a>"))
        noScriptIn(overview.dom, "/")
        _ = try browse(base + "/", screenshot: "overview.png")
        let shares = try browse(base + "/shares")
        #expect(
            shares.console.isEmpty && shares.dom.contains("Amara Müller") && shares.dom.contains("ACCEPTED"),
            "\(shares.console)")
        noScriptIn(shares.dom, "/shares")
        _ = try browse(base + "/shares", screenshot: "shares.png")

        // A --where query in the page's own box: the XSS events, 50 a page, their titles as text.
        var shown = 0
        var page: String? = "/records/Event?zone=\(zone)&where=category+%3D%3D+%27xss%27"
        var pages = 0
        while let path = page, pages < 5 {
            let rendered = try browse(base + path)
            #expect(rendered.console.isEmpty, "\(path): \(rendered.console)")
            noScriptIn(rendered.dom, path)
            for vector in vectors where vector.count <= 200 && rendered.dom.contains(asText(vector)) { shown += 1 }
            if pages == 0 { _ = try browse(base + path, screenshot: "records.png") }
            page = rendered.dom.range(of: "rel=\"next\" href=\"").map { start in
                String(rendered.dom[start.upperBound...].prefix { $0 != "\"" }).replacingOccurrences(
                    of: "&amp;", with: "&")
            }
            pages += 1
        }
        #expect(
            pages == 2 && shown == vectors.filter { $0.count <= 200 }.count,
            "\(shown) vectors shown as text in \(pages) pages")

        // A record's own page, for the first and for each vector too long for a table's cell,
        // and a reference link followed.
        for (index, vector) in vectors.enumerated() where index == 0 || vector.count > 200 {
            let path =
                "/record/shared/_4f00e3e229b648635c6f63dca8da05ef/family-1-zone/xss-\(String(format: "%02d", index + 1))"
            let rendered = try browse(base + path)
            #expect(rendered.console.isEmpty, "\(path): \(rendered.console)")
            noScriptIn(rendered.dom, path)
            #expect(
                rendered.dom.contains(asText(String(vector.prefix(200)))), "\(path): the title is not shown as text")
            if index == 0 {
                _ = try browse(base + path, screenshot: "record.png")
                let link = try #require(
                    rendered.dom.range(
                        of: "href=\"/record/shared/_4f00e3e229b648635c6f63dca8da05ef/family-1-zone/family-1\""),
                    "no link to the family")
                let family = try browse(base + String(rendered.dom[link].dropFirst(6).dropLast(1)))
                #expect(
                    family.dom.contains("<h1>family-1</h1>") && family.dom.contains("The Müllers")
                        && family.dom.contains(">xss-01</a>"), "\(family.dom.prefix(2000))")
            }
        }

        // The month view: March 2026 in Berlin, each event on its day at its local time, a
        // hostile title as text; an event's link followed to its record; the agenda.
        let month = try browse(base + "/calendar?month=2026-03&tz=Europe/Berlin")
        #expect(month.console.isEmpty, "\(month.console)")
        noScriptIn(month.dom, "/calendar")
        #expect(month.dom.contains("<h1>Calendar 2026-03</h1>") && month.dom.contains("<th>Mon</th>"))
        #expect(
            month.dom.contains(
                "<span class=\"time\">18:45</span> <a href=\"/record/shared/_4f00e3e229b648635c6f63dca8da05ef/family-1-zone/event-1-00002\">School play: The Little Prince</a>"
            ),
            "\(month.dom.prefix(3000))")
        #expect(
            month.dom.contains(
                "<span class=\"time\">11:00</span> <a href=\"/record/shared/_4f00e3e229b648635c6f63dca8da05ef/family-1-zone/xss-01\">\(asText(vectors[0]))</a>"
            ))
        _ = try browse(base + "/calendar?month=2026-03&tz=Europe/Berlin", screenshot: "calendar.png")
        let event = try #require(
            month.dom.range(of: "href=\"/record/shared/_4f00e3e229b648635c6f63dca8da05ef/family-1-zone/event-1-00002\"")
        )
        let play = try browse(base + String(month.dom[event].dropFirst(6).dropLast(1)))
        #expect(play.dom.contains("<h1>event-1-00002</h1>") && play.dom.contains("School play: The Little Prince"))
        let agenda = try browse(base + "/calendar/agenda?from=2026-03-01&days=31&tz=Europe/Berlin")
        #expect(
            agenda.console.isEmpty && agenda.dom.contains("<h2>Tue 2026-03-03</h2>")
                && agenda.dom.contains("School play: The Little Prince"), "\(agenda.console)")
        noScriptIn(agenda.dom, "/calendar/agenda")
        #expect(folder.data("family.sqlite") == before)
    }

    @Test(
        "a migration's rehearsal as the browser renders it: each record's diff, lines added and removed, nothing logged, nothing written"
    )
    func rehearsal() throws {
        let folder = Scratch()
        try importSample("notes", into: "notes.sqlite", in: folder)
        let before = folder.data("notes.sqlite")
        let (server, address) = try startServe(
            [
                "--store", "notes.sqlite", "-q", "--migrations",
                packageRoot.appendingPathComponent("migrations/notes").path,
            ], in: folder)
        defer {
            kill(server.process.processIdentifier, SIGINT)
            _ = server.finish()
        }
        let base = address.absoluteString.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        let rendered = try browse(base + "/migrations")
        #expect(rendered.console.isEmpty, "\(rendered.console)")
        noScriptIn(rendered.dom, "/migrations")
        #expect(
            rendered.dom.contains("body becomes content") && rendered.dom.contains("<span class=\"add\">+ content: ")
                && rendered.dom.contains("<span class=\"remove\">- body: "),
            "\(rendered.dom.prefix(3000))")
        _ = try browse(base + "/migrations", screenshot: "migrations.png")
        #expect(folder.data("notes.sqlite") == before)
    }
}
