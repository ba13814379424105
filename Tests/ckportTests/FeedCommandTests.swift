import Foundation
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("ckport calendar feed and serve --feeds-only")
struct FeedCommandTests {
    /// Status, headers and body of a GET with `headers`, through the loopback network.
    func get(_ url: URL, headers: [String: String] = [:], method: String = "GET") throws -> (
        status: Int, headers: [String: String], body: String
    ) {
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.cachePolicy = .reloadIgnoringLocalAndRemoteCacheData
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: (Int, [String: String], String) = (0, [:], "")
        URLSession.shared.dataTask(with: request) { data, response, _ in
            let http = response as? HTTPURLResponse
            var fields: [String: String] = [:]
            for (name, value) in http?.allHeaderFields ?? [:] {
                fields[String(describing: name).lowercased()] = String(describing: value)
            }
            result = (http?.statusCode ?? 0, fields, String(decoding: data ?? Data(), as: UTF8.self))
            done.signal()
        }.resume()
        #expect(done.wait(timeout: .now() + 30) == .success)
        return result
    }

    /// The feed's address on the server at `base`, from the address `feed add` printed.
    func address(_ printed: String, on base: URL) throws -> URL {
        let line = try #require(printed.split(separator: "\n").first.map(String.init))
        let path = try #require(line.range(of: "/feeds/").map { String(line[$0.lowerBound...]) })
        return try #require(URL(string: base.absoluteString + path))
    }

    /// The calendar's lines without the two a feed writes from the record (DTSTAMP, SEQUENCE).
    func withoutRevisions(_ text: String) -> [Substring] {
        text.split(separator: "\r\n").filter { !$0.hasPrefix("DTSTAMP:") && !$0.hasPrefix("SEQUENCE:") }
    }

    /// Each event's SEQUENCE, by UID.
    func sequences(_ text: String) -> [String: Int] {
        var out: [String: Int] = [:]
        var uid = ""
        for line in text.split(separator: "\r\n") {
            if line.hasPrefix("UID:") { uid = String(line.dropFirst(4)) }
            if line.hasPrefix("SEQUENCE:") { out[uid] = Int(line.dropFirst(9)) }
        }
        return out
    }

    @Test(
        "a feed: 200 with ETag and Last-Modified and export's events, 304 to a repeated request, 404 without a token, with a wrong or revoked one and for everything but /feeds/, a new ETag and a risen SEQUENCE after a change; the store keeps only hashes"
    )
    func feedLifecycle() throws {
        let folder = Scratch()
        try importSample("family-calendar", into: "cal.sqlite", in: folder)
        let selection = "familyID == 'family-1'"
        let anna = try ckport(
            [
                "calendar", "feed", "add", "family", "--where", selection, "--tz", "Europe/Berlin", "--label", "Anna",
                "--store", "cal.sqlite", "--url", "https://cal.example.org",
            ], in: folder.url)
        #expect(anna.status == 0, "\(anna.stderr)")
        #expect(anna.stderr.contains("made the feed family"), "\(anna.stderr)")
        // The https address and its webcal form, for the two kinds of calendar apps.
        let printed = anna.stdout.split(separator: "\n")
        #expect(
            printed.count == 2 && printed[0].hasPrefix("https://cal.example.org/feeds/family.ics?token=")
                && printed[1].hasPrefix("webcal://cal.example.org/feeds/family.ics?token="), "\(anna.stdout)")
        let annaToken = String(printed[0].split(separator: "=").last ?? "")
        #expect(annaToken.count == 43, "\(annaToken)")
        // A second subscriber needs no selection; another selection under the same name is refused.
        let ben = try ckport(
            ["calendar", "feed", "add", "family", "--label", "Ben", "--store", "cal.sqlite", "-q"], in: folder.url)
        #expect(ben.status == 0 && ben.stdout.hasPrefix("http://127.0.0.1:8641/feeds/family.ics?token="), "\(ben)")
        let other = try ckport(
            ["calendar", "feed", "add", "family", "--where", "familyID == 'family-2'", "--store", "cal.sqlite"],
            in: folder.url)
        #expect(other.status != 0 && other.stderr.contains("already selects something else"), "\(other.stderr)")
        let badName = try ckport(["calendar", "feed", "add", "../x", "--store", "cal.sqlite"], in: folder.url)
        #expect(badName.status != 0 && badName.stderr.contains("is not a feed name"), "\(badName.stderr)")
        // Listed by id and label, never by token; the store file holds no token.
        let list = try ckport(["calendar", "feed", "list", "--json", "--store", "cal.sqlite"], in: folder.url)
        let feeds = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        let tokens = try #require(feeds.first?["tokens"] as? [[String: Any]])
        #expect(feeds.count == 1 && tokens.count == 2 && tokens.map { $0["label"] as? String } == ["Anna", "Ben"])
        let annaID = try #require(tokens.first?["id"] as? String)
        #expect(!list.stdout.contains(annaToken))
        #expect(folder.data("cal.sqlite").range(of: Data(annaToken.utf8)) == nil)

        // The feed moves with a backup: a restored store has it, with the same subscribers.
        #expect(
            try ckport(["backup", "--store", "cal.sqlite", "-o", "cal.ckbundle", "-q"], in: folder.url).status == 0)
        #expect(
            try ckport(["restore", "cal.ckbundle", "--store", "restored.sqlite", "-q"], in: folder.url).status == 0)
        let restored = try ckport(["calendar", "feed", "list", "--json", "--store", "restored.sqlite"], in: folder.url)
        #expect(restored.status == 0 && restored.stdout == list.stdout, "\(restored)")
        #expect(folder.data("cal.ckbundle").range(of: Data(annaToken.utf8)) == nil)

        let (server, said) = try startServe(["--feeds-only", "--store", "cal.sqlite"], in: folder)
        defer {
            kill(server.process.processIdentifier, SIGINT)
            _ = server.finish()
        }
        // It says where the feeds are: /feeds/ on its port.
        #expect(said.path == "/feeds", "\(said)")
        let port = try #require(said.port)
        let base = try #require(URL(string: "http://127.0.0.1:\(port)"))
        let annaURL = try address(anna.stdout, on: base)
        let benURL = try address(ben.stdout, on: base)
        let first = try get(annaURL)
        #expect(first.status == 200, "\(first.body.prefix(300))")
        let etag = try #require(first.headers["etag"])
        let lastModified = try #require(first.headers["last-modified"])
        #expect(first.headers["content-type"] == "text/calendar; charset=utf-8")
        #expect(first.headers["cache-control"]?.contains("private") == true)
        // The same iCalendar `export` writes for the selection, DTSTAMP and SEQUENCE aside
        // (which the feed takes from each record), and a calendar RFC 5545 readers take.
        #expect(
            try ckport(
                [
                    "export", "--store", "cal.sqlite", "--where", selection, "--tz", "Europe/Berlin", "-o",
                    "family.ics", "-q",
                ],
                in: folder.url
            ).status == 0)
        let exported = try String(contentsOf: folder.url.appendingPathComponent("family.ics"), encoding: .utf8)
        #expect(exported.components(separatedBy: "BEGIN:VEVENT").count == 10)
        #expect(withoutRevisions(first.body) == withoutRevisions(exported))
        try Data(first.body.utf8).write(to: folder.url.appendingPathComponent("feed.ics"))
        if let (status, output) = try Conformance.check(folder.url.appendingPathComponent("feed.ics").path) {
            #expect(status == 0, "\(output)")
        }
        // A repeated request: 304, nothing built or sent.
        let again = try get(annaURL, headers: ["If-None-Match": etag])
        #expect(again.status == 304 && again.body.isEmpty && again.headers["etag"] == etag, "\(again)")
        let since = try get(annaURL, headers: ["If-Modified-Since": lastModified])
        #expect(since.status == 304, "\(since.status)")
        #expect(try get(benURL).body == first.body)
        // Nothing but a feed with a valid token.
        for refused in [
            "/feeds/family.ics", "/feeds/family.ics?token=", "/feeds/family.ics?token=\(annaToken.dropLast())x",
            "/feeds/nobody.ics?token=\(annaToken)", "/", "/index.json", "/records/Event.ics", "/feeds/family?token=x",
        ] {
            let answer = try get(try #require(URL(string: base.absoluteString + refused)))
            #expect(answer.status == 404 && !answer.body.contains("VEVENT"), "\(refused): \(answer.status)")
        }
        #expect(try get(annaURL, method: "POST").status == 405)

        // An event changed in the app: a new ETag, its SEQUENCE risen, the others' as they were.
        let line = try #require(
            try String(
                contentsOf: packageRoot.appendingPathComponent("samples/family-calendar/records.jsonl"), encoding: .utf8
            ).split(separator: "\n").first { $0.contains(#""recordName":"event-1-00002""#) })
        let changed = String(line).replacingOccurrences(
            of: #""modified":{"timestamp":"#, with: #""modified":{"timestamp":1790000000000,"old":"#
        ).replacingOccurrences(of: "School play: The Little Prince", with: "School play (moved)")
        try Data(changed.utf8).write(to: folder.url.appendingPathComponent("changed.jsonl"))
        let imported = try ckport(["import", "changed.jsonl", "--store", "cal.sqlite", "-q"], in: folder.url)
        #expect(imported.status == 0, "\(imported.stderr)")
        let after = try get(annaURL, headers: ["If-None-Match": etag])
        #expect(after.status == 200 && after.headers["etag"] != nil && after.headers["etag"] != etag)
        #expect(after.body.contains("SUMMARY:School play (moved)"))
        let (old, new) = (sequences(first.body), sequences(after.body))
        #expect(old.count == 9 && Set(old.keys) == Set(new.keys))
        #expect((new["event-1-00002"] ?? 0) > (old["event-1-00002"] ?? 0), "\(old) \(new)")
        #expect(old.filter { $0.key != "event-1-00002" } == new.filter { $0.key != "event-1-00002" })

        // Every event gone from the selection: a calendar of no events (and one RFC 5545
        // readers take), so that the phones drop the last ones too, not an error that leaves
        // them showing what they fetched before.
        let emptied = try ckport(
            ["delete", "--type", "Event", "--where", selection, "--store", "cal.sqlite", "-q"], in: folder.url)
        #expect(emptied.status == 0, "\(emptied.stderr)")
        let empty = try get(annaURL, headers: ["If-None-Match": try #require(after.headers["etag"])])
        #expect(empty.status == 200 && empty.headers["etag"] != after.headers["etag"], "\(empty.status)")
        #expect(
            empty.body.hasPrefix("BEGIN:VCALENDAR\r\n") && empty.body.hasSuffix("END:VCALENDAR\r\n")
                && empty.body.contains("BEGIN:VTIMEZONE\r\nTZID:Europe/Berlin") && !empty.body.contains("VEVENT"),
            "\(empty.body)")
        try Data(empty.body.utf8).write(to: folder.url.appendingPathComponent("empty.ics"))
        if let (status, output) = try Conformance.check(folder.url.appendingPathComponent("empty.ics").path) {
            #expect(status == 0, "\(output)")
        }

        // Revoked: refused from the next request, by the server already running; Ben's still opens.
        let revoke = try ckport(
            ["calendar", "feed", "revoke", "family", annaID, "--store", "cal.sqlite"], in: folder.url)
        #expect(revoke.status == 0 && revoke.stdout.contains("revoked token \(annaID) (Anna)"), "\(revoke)")
        #expect(try get(annaURL).status == 404)
        #expect(try get(benURL).status == 200)
        let removed = try ckport(["calendar", "feed", "remove", "family", "--store", "cal.sqlite"], in: folder.url)
        #expect(removed.status == 0)
        #expect(try get(benURL).status == 404)
        let unknown = try ckport(
            ["calendar", "feed", "revoke", "family", annaID, "--store", "cal.sqlite"], in: folder.url)
        #expect(unknown.status != 0 && unknown.stderr.contains("no feed named family"), "\(unknown.stderr)")
    }
}
