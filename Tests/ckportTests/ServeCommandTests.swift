import Foundation
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `ckport serve` started with `arguments` (a free port added), and the address it says it
/// serves on; stop it with SIGINT and `finish()`.
func startServe(_ arguments: [String], in folder: Scratch) throws -> (server: RunningCKPort, base: URL) {
    let server = try RunningCKPort(["serve", "--port", "0"] + arguments, in: folder.url)
    var address: URL?
    #expect(
        eventually(30) {
            address = server.stdoutSoFar.split(separator: " ").first { $0.hasPrefix("http://127.0.0.1:") }.flatMap {
                URL(string: String($0))
            }
            return address != nil || !server.process.isRunning
        }, "\(server.stderrSoFar)")
    let base = try #require(address, "no address in: \(server.stdoutSoFar) \(server.stderrSoFar)")
    return (server, base)
}

/// A sample app's schema and records imported into `store` (a file in `folder`, or a URL), as
/// a user would with `ckport import`.
func importSample(_ app: String, into store: String, in folder: Scratch) throws {
    let samples = packageRoot.appendingPathComponent("samples/\(app)").path
    #expect(
        try ckport(
            ["import", samples + "/schema.ckdb", samples + "/records.jsonl", "--store", store, "-q"], in: folder.url
        ).status == 0)
}

@Suite("ckport serve")
struct ServeCommandTests {
    /// The body and status of a GET, through the loopback network as a browser asks.
    func fetch(_ url: URL) throws -> (status: Int, body: String) {
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: (Int, String) = (0, "")
        URLSession.shared.dataTask(with: url) { data, response, _ in
            result = ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data ?? Data(), as: UTF8.self))
            done.signal()
        }.resume()
        #expect(done.wait(timeout: .now() + 30) == .success)
        return result
    }

    @Test(
        "serves the store read-only on 127.0.0.1, says where, answers a browser, and stops cleanly on Ctrl-C with the store unchanged"
    )
    func serve() throws {
        let folder = Scratch()
        try importSample("family-todo", into: "todo.sqlite", in: folder)
        let before = folder.data("todo.sqlite")
        let (server, base) = try startServe(["--store", "todo.sqlite"], in: folder)
        let overview = try fetch(base)
        #expect(overview.status == 200 && overview.body.contains("RECORD TYPE Task ("), "\(overview.body.prefix(400))")
        let json = try fetch(base.appendingPathComponent("index.json"))
        let data = try #require(try JSONSerialization.jsonObject(with: Data(json.body.utf8)) as? [String: Any])
        #expect(data["records"] as? Int == 80 && data["backend"] as? String == "SQLite", "\(json.body.prefix(300))")
        // A table downloaded whole, through the same writer `ckport export` uses: the same bytes.
        let zones = try #require(data["zones"] as? [[String: Any]])
        let tasks = try #require(zones.first { $0["recordType"] as? String == "Task" })
        let (scope, owner, zoneName) = (
            tasks["scope"] as! String, tasks["ownerRecordName"] as! String, tasks["zoneName"] as! String
        )
        var download = URLComponents(
            url: base.appendingPathComponent("records/Task.csv"), resolvingAgainstBaseURL: false)!
        download.queryItems = [URLQueryItem(name: "zone", value: "\(scope):\(owner):\(zoneName)")]
        let csv = try fetch(download.url!)
        #expect(
            try ckport(
                [
                    "export", "--store", "todo.sqlite", "--type", "Task", "--scope", scope, "--zone", zoneName,
                    "--sort", "recordName",
                    "--format", "csv", "-o", "tasks.csv", "-q",
                ], in: folder.url
            ).status == 0)
        #expect(
            csv.status == 200 && csv.body == folder.text("tasks.csv") && csv.body.hasPrefix("recordName,")
                && (tasks["records"] as! Int) > 3, "\(csv.body.prefix(300))")
        kill(server.process.processIdentifier, SIGINT)
        let run = server.finish()
        // Ctrl-C ends every command with 130, this one too (it is how a server is stopped).
        #expect(run.status == 130, "\(run.stderr)")
        #expect(folder.data("todo.sqlite") == before)
    }

    @Test(
        "a table's iCalendar download is `ckport export --tz`'s calendar of the same records, the calendar pages come from the sample's mapping, and a type the mapping does not map has no iCalendar form"
    )
    func calendar() throws {
        let folder = Scratch()
        try importSample("family-calendar", into: "family.sqlite", in: folder)
        let (server, base) = try startServe(["--store", "family.sqlite", "--tz", "Europe/Berlin", "-q"], in: folder)
        defer {
            kill(server.process.processIdentifier, SIGINT)
            _ = server.finish()
        }
        let zone = "shared:_4f00e3e229b648635c6f63dca8da05ef:family-1-zone"
        let ics = try fetch(URL(string: base.absoluteString + "records/Event.ics?zone=\(zone)")!)
        #expect(
            try ckport(
                [
                    "export", "--store", "family.sqlite", "--type", "Event", "--scope", "shared", "--zone",
                    "family-1-zone", "--sort", "recordName",
                    "--tz", "Europe/Berlin", "-o", "events.ics", "-q",
                ], in: folder.url
            ).status == 0)
        let steady = { (text: String) in text.split(separator: "\r\n").filter { !$0.hasPrefix("DTSTAMP:") } }
        #expect(
            ics.status == 200 && steady(ics.body) == steady(folder.text("events.ics"))
                && ics.body.components(separatedBy: "BEGIN:VEVENT").count > 5, "\(ics.body.prefix(400))")
        let page = try fetch(URL(string: base.absoluteString + "records/Event?zone=\(zone)")!)
        #expect(page.body.contains(">iCalendar</a>"))
        let participants = try fetch(URL(string: base.absoluteString + "records/EventParticipant?zone=\(zone)")!)
        #expect(participants.status == 200 && !participants.body.contains(">iCalendar</a>"))
        #expect(
            try fetch(URL(string: base.absoluteString + "records/EventParticipant.ics?zone=\(zone)")!).status == 404)
        // --tz is the calendar's zone unless a page names another.
        let month = try #require(
            try JSONSerialization.jsonObject(
                with: Data(try fetch(URL(string: base.absoluteString + "calendar.json?month=2026-03")!).body.utf8))
                as? [String: Any])
        #expect(
            month["timeZone"] as? String == "Europe/Berlin" && ((month["occurrences"] as? [Any])?.count ?? 0) >= 3,
            "\(month)")
        let badZone = try ckport(["serve", "--store", "family.sqlite", "--tz", "Mars/Olympus"], in: folder.url)
        #expect(
            badZone.status == 1 && badZone.stderr.contains("--tz Mars/Olympus is not a time zone"), "\(badZone.stderr)")
    }

    @Test(
        "a bundle chain shown read-only: the manifests and the chain at /bundle, the records as a restore brings them back, the bundles unchanged; an encrypted one with its passphrase; --store beside --bundle is refused"
    )
    func bundle() throws {
        let folder = Scratch()
        try importSample("family-todo", into: "todo.sqlite", in: folder)
        #expect(
            try ckport(["backup", "-o", "monday.ckbundle", "--store", "todo.sqlite", "-q"], in: folder.url).status == 0)
        // A change between the two backups: one task's title.
        let exported = try ckport(
            ["export", "--store", "todo.sqlite", "--type", "Task", "--limit", "1"], in: folder.url
        ).stdout
        var task = try #require(try JSONSerialization.jsonObject(with: Data(exported.utf8)) as? [String: Any])
        var fields = try #require(task["fields"] as? [String: Any])
        fields["title"] = ["value": "Changed on Tuesday", "type": "STRING"]
        task["fields"] = fields
        let changed = String(decoding: try JSONSerialization.data(withJSONObject: task), as: UTF8.self) + "\n"
        folder.write("change.jsonl", changed)
        let upsert = try ckport(
            ["import", "change.jsonl", "--store", "todo.sqlite", "--mode", "upsert"], in: folder.url)
        #expect(
            upsert.status == 0 && upsert.stderr.range(of: #"Task +0 +1 "#, options: .regularExpression) != nil,
            "\(upsert.stderr)")
        #expect(
            try ckport(
                ["backup", "-o", "tuesday.ckbundle", "--since", "monday.ckbundle", "--store", "todo.sqlite", "-q"],
                in: folder.url
            ).status == 0)
        let before = [folder.data("monday.ckbundle"), folder.data("tuesday.ckbundle")]
        let (server, base) = try startServe(
            ["--bundle", "monday.ckbundle", "--bundle", "tuesday.ckbundle", "-q"], in: folder)
        let chain = try #require(
            try JSONSerialization.jsonObject(
                with: Data(try fetch(base.appendingPathComponent("bundle.json")).body.utf8)) as? [[String: Any]])
        #expect(chain.map { $0["path"] as? String } == ["monday.ckbundle", "tuesday.ckbundle"])
        let manifests = chain.compactMap { $0["manifest"] as? [String: Any] }
        #expect(
            manifests.count == 2 && manifests[0]["baseToken"] == nil
                && manifests[1]["baseToken"] as? String == manifests[0]["token"] as? String)
        let overview = try fetch(base)
        #expect(
            overview.body.contains("A backup bundle, read-only: monday.ckbundle + tuesday.ckbundle"),
            "\(overview.body.prefix(600))")
        let page = try fetch(base.appendingPathComponent("bundle"))
        #expect(
            page.status == 200 && page.body.contains("<h2>The chain</h2>") && page.body.contains("what changed after"))
        let index = try #require(
            try JSONSerialization.jsonObject(with: Data(try fetch(base.appendingPathComponent("index.json")).body.utf8))
                as? [String: Any])
        #expect(index["records"] as? Int == 80 && index["backend"] as? String == "backup bundle")
        // The overview names the bundles and the newest one's token, not the scratch store's.
        #expect(
            index["store"] as? String == "monday.ckbundle + tuesday.ckbundle"
                && index["token"] as? String == manifests[1]["token"] as? String, "\(index)")
        let zones = try #require(index["zones"] as? [[String: Any]])
        var seen = false
        var asked: [String] = []
        for entry in zones where entry["recordType"] as? String == "Task" {
            let zone = "\(entry["scope"]!):\(entry["ownerRecordName"]!):\(entry["zoneName"]!)"
            var components = URLComponents(
                url: base.appendingPathComponent("records/Task.json"), resolvingAgainstBaseURL: false)!
            components.queryItems = [
                URLQueryItem(name: "zone", value: zone),
                URLQueryItem(name: "where", value: "title == 'Changed on Tuesday'"),
            ]
            let answer = try fetch(components.url!)
            asked.append("\(components.url!): \(answer.body.prefix(200))")
            if answer.body.contains("Changed on Tuesday") { seen = true }
        }
        #expect(seen, "the Tuesday bundle's change is not shown: \(asked)")
        kill(server.process.processIdentifier, SIGINT)
        _ = server.finish()
        #expect([folder.data("monday.ckbundle"), folder.data("tuesday.ckbundle")] == before)

        // Encrypted: the passphrase from a file; a wrong one is refused before anything is served.
        folder.write("pass.txt", "correct horse battery staple\n")
        chmod(folder.path("pass.txt"), 0o600)
        #expect(
            try ckport(
                [
                    "backup", "-o", "secret.ckbundle", "--encrypt", "--passphrase-file", "pass.txt", "--store",
                    "todo.sqlite", "-q",
                ], in: folder.url
            ).status == 0)
        let (locked, lockedBase) = try startServe(
            ["--bundle", "secret.ckbundle", "--passphrase-file", "pass.txt", "-q"], in: folder)
        let secret = try #require(
            try JSONSerialization.jsonObject(
                with: Data(try fetch(lockedBase.appendingPathComponent("bundle.json")).body.utf8)) as? [[String: Any]])
        #expect(secret.first?["encrypted"] as? Bool == true)
        kill(locked.process.processIdentifier, SIGINT)
        _ = locked.finish()
        folder.write("wrong.txt", "not the passphrase\n")
        chmod(folder.path("wrong.txt"), 0o600)
        let wrong = try ckport(
            ["serve", "--bundle", "secret.ckbundle", "--passphrase-file", "wrong.txt"], in: folder.url)
        #expect(wrong.status == 2 && wrong.stderr.contains("secret.ckbundle"), "\(wrong.status) \(wrong.stderr)")
        let both = try ckport(["serve", "--bundle", "monday.ckbundle", "--store", "todo.sqlite"], in: folder.url)
        #expect(both.status == 1 && both.stderr.contains("--bundle and --store: give one of them"), "\(both.stderr)")
    }

    @Test(
        "a snapshot of a repository shown read-only: the newest with its chain, or the one --snapshot names; the repository unchanged; --repo beside --store is refused"
    )
    func repositorySnapshot() throws {
        let folder = Scratch()
        try importSample("family-todo", into: "todo.sqlite", in: folder)
        #expect(try ckport(["repo", "init", "repo", "--no-encrypt", "-q"], in: folder.url).status == 0)
        #expect(try ckport(["backup", "--repo", "repo", "--store", "todo.sqlite", "-q"], in: folder.url).status == 0)
        let exported = try ckport(
            ["export", "--store", "todo.sqlite", "--type", "Task", "--limit", "1"], in: folder.url
        ).stdout
        var task = try #require(try JSONSerialization.jsonObject(with: Data(exported.utf8)) as? [String: Any])
        var fields = try #require(task["fields"] as? [String: Any])
        fields["title"] = ["value": "Changed on Tuesday", "type": "STRING"]
        task["fields"] = fields
        folder.write("change.jsonl", String(decoding: try JSONSerialization.data(withJSONObject: task), as: UTF8.self))
        #expect(
            try ckport(["import", "change.jsonl", "--store", "todo.sqlite", "--mode", "upsert", "-q"], in: folder.url)
                .status == 0)
        #expect(try ckport(["backup", "--repo", "repo", "--store", "todo.sqlite", "-q"], in: folder.url).status == 0)
        let listed = try #require(
            try JSONSerialization.jsonObject(
                with: Data(try ckport(["snapshots", "--repo", "repo", "--json"], in: folder.url).stdout.utf8))
                as? [[String: Any]])
        let ids = listed.compactMap { $0["id"] as? String }
        #expect(ids.count == 2)
        func files() throws -> [String: Data] {
            var found: [String: Data] = [:]
            let root = folder.url.appendingPathComponent("repo")
            for case let name as String in FileManager.default.enumerator(atPath: root.path)!
            where !name.hasPrefix("locks") {
                var directory: ObjCBool = false
                if FileManager.default.fileExists(
                    atPath: root.appendingPathComponent(name).path, isDirectory: &directory),
                    !directory.boolValue
                {
                    found[name] = try Data(contentsOf: root.appendingPathComponent(name))
                }
            }
            return found
        }
        let before = try files()
        #expect(before.count >= 5)
        // The tasks titled "Changed on Tuesday" the view shows, zone by zone.
        func changedTasks(_ base: URL) throws -> Int {
            let index = try #require(
                try JSONSerialization.jsonObject(
                    with: Data(try fetch(base.appendingPathComponent("index.json")).body.utf8)) as? [String: Any])
            var found = 0
            for entry in try #require(index["zones"] as? [[String: Any]]) where entry["recordType"] as? String == "Task"
            {
                var components = URLComponents(
                    url: base.appendingPathComponent("records/Task.json"), resolvingAgainstBaseURL: false)!
                components.queryItems = [
                    URLQueryItem(
                        name: "zone", value: "\(entry["scope"]!):\(entry["ownerRecordName"]!):\(entry["zoneName"]!)"),
                    URLQueryItem(name: "where", value: "title == 'Changed on Tuesday'"),
                ]
                // The value as JSON writes it (the predicate, echoed, has it in single quotes).
                found += try fetch(components.url!).body.components(separatedBy: "\"Changed on Tuesday\"").count - 1
            }
            return found
        }

        let (newest, base) = try startServe(["--repo", "repo", "-q"], in: folder)
        let chain = try #require(
            try JSONSerialization.jsonObject(
                with: Data(try fetch(base.appendingPathComponent("bundle.json")).body.utf8)) as? [[String: Any]])
        #expect(chain.count == 2 && (chain[0]["path"] as? String)?.contains(String(ids[0].prefix(8))) == true)
        let manifests = chain.compactMap { $0["manifest"] as? [String: Any] }
        #expect(manifests.count == 2 && manifests[1]["baseToken"] as? String == manifests[0]["token"] as? String)
        let index = try #require(
            try JSONSerialization.jsonObject(with: Data(try fetch(base.appendingPathComponent("index.json")).body.utf8))
                as? [String: Any])
        #expect(index["records"] as? Int == 80 && index["backend"] as? String == "backup snapshot", "\(index)")
        #expect(try changedTasks(base) >= 1)
        kill(newest.process.processIdentifier, SIGINT)
        _ = newest.finish()

        let (first, firstBase) = try startServe(
            ["--repo", "repo", "--snapshot", String(ids[0].prefix(8)), "-q"], in: folder)
        #expect(try changedTasks(firstBase) == 0)
        kill(first.process.processIdentifier, SIGINT)
        _ = first.finish()
        #expect(try files() == before)
        let both = try ckport(["serve", "--repo", "repo", "--store", "todo.sqlite"], in: folder.url)
        #expect(both.status == 1 && both.stderr.contains("--repo, --bundle and --store"), "\(both.stderr)")
        let missing = try ckport(["serve", "--repo", "repo", "--snapshot", "ffffffff"], in: folder.url)
        #expect(missing.status != 0 && missing.stderr.contains("ffffffff"), "\(missing.stderr)")
    }

    @Test(
        "--open hands the view's address to the desktop's opener once it is served; without one, it says so and serves on"
    )
    func openBrowser() throws {
        let folder = Scratch()
        try importSample("notes", into: "notes.sqlite", in: folder)
        let bin = folder.url.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let opener = bin.appendingPathComponent("xdg-open")
        // The file appears whole (written aside, then renamed), so the test never reads it half-written.
        try
            "#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/opened.part\" && mv \"$(dirname \"$0\")/opened.part\" \"$(dirname \"$0\")/opened\"\n"
            .write(to: opener, atomically: true, encoding: .utf8)
        chmod(opener.path, 0o755)
        let path = bin.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let server = try RunningCKPort(
            ["serve", "--store", "notes.sqlite", "--port", "0", "--open"], in: folder.url, environment: ["PATH": path])
        #expect(
            eventually(30) {
                FileManager.default.fileExists(atPath: bin.appendingPathComponent("opened").path)
                    || !server.process.isRunning
            })
        let address = server.stdoutSoFar.split(separator: " ").first { $0.hasPrefix("http://127.0.0.1:") }.map(
            String.init)
        let opened = (try? String(contentsOf: bin.appendingPathComponent("opened"), encoding: .utf8)) ?? ""
        #expect(address != nil && opened == address! + "\n", "\(opened) \(server.stdoutSoFar)")
        kill(server.process.processIdentifier, SIGINT)
        _ = server.finish()
        // No opener on PATH: the view is served all the same.
        let empty = folder.url.appendingPathComponent("empty")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        let alone = try RunningCKPort(
            ["serve", "--store", "notes.sqlite", "--port", "0", "--open"], in: folder.url,
            environment: ["PATH": empty.path])
        #expect(
            eventually(30) { alone.stderrSoFar.contains("could not open a browser") || !alone.process.isRunning },
            "\(alone.stderrSoFar)")
        #expect(alone.process.isRunning && alone.stderrSoFar.contains("yourself"))
        kill(alone.process.processIdentifier, SIGINT)
        _ = alone.finish()
    }

    @Test(
        "listening beyond this machine takes --bind, and says who can then read the store; an address that is none is refused"
    )
    func bind() throws {
        let folder = Scratch()
        try importSample("family-todo", into: "todo.sqlite", in: folder)
        let badPort = try ckport(["serve", "--store", "todo.sqlite", "--port", "70000"], in: folder.url)
        #expect(
            badPort.status == 1 && badPort.stderr.contains("--port takes 0 (any free port) to 65535"),
            "\(badPort.stderr)")
        let refused = try ckport(["serve", "--store", "todo.sqlite", "--bind", "not-an-address"], in: folder.url)
        #expect(
            refused.status != 0 && refused.stderr.contains("not-an-address is not an IPv4 address to listen on"),
            "\(refused.stderr)")
        let server = try RunningCKPort(
            ["serve", "--store", "todo.sqlite", "--port", "0", "--bind", "0.0.0.0"], in: folder.url)
        #expect(
            eventually(30) {
                server.stderrSoFar.contains("warning: listening on 0.0.0.0, beyond this machine")
                    || !server.process.isRunning
            }, "\(server.stderrSoFar)")
        #expect(server.process.isRunning)
        kill(server.process.processIdentifier, SIGINT)
        _ = server.finish()
    }

    @Test(
        "a PostgreSQL store serves the same pages as the SQLite store holding the same records",
        .enabled(if: PostgresTestServer.enabled))
    func postgres() throws {
        let folder = Scratch()
        let pg = try #require(
            PostgresTestServer.store("serve"),
            "CI runs the PostgreSQL tests: set CKPORT_TEST_POSTGRES (see scripts/postgres-cluster.sh)")
        for store in ["local.sqlite", pg] { try importSample("family-calendar", into: store, in: folder) }
        var bodies: [[String]] = []
        for store in ["local.sqlite", pg] {
            let (server, base) = try startServe(["--store", store, "-q"], in: folder)
            let zone = "shared:_4f00e3e229b648635c6f63dca8da05ef:family-1-zone"
            var pages: [String] = []
            for path in [
                "records/Event.json?zone=\(zone)", "records/Event.json?zone=\(zone)&where=category%20%3D%3D%20'school'",
                "record/shared/_4f00e3e229b648635c6f63dca8da05ef/family-1-zone/event-1-00001.json", "shares.json",
                "records/EventParticipant.csv?zone=\(zone)", "calendar.json?month=2026-03&tz=Europe/Berlin",
                "calendar/agenda.json?from=2026-05-01&days=20&tz=Asia/Tokyo",
                "records/Event.ics?zone=\(zone)&tz=Europe/Berlin",
                "records/Event.json?zone=\(zone)&sort=startDate&desc=1&limit=4",
                "records/Event.json?zone=\(zone)&sort=category&limit=3&after=event-1-00002&afterValue=school",
                "records/Event.json?zone=\(zone)&sort=title&desc=1&limit=3&after=event-1-00005&afterValue=Swimming%20lesson",
            ] {
                let answer = try fetch(URL(string: base.absoluteString + path)!)
                #expect(answer.status == 200 && answer.body.count > 100, "\(store) \(path): \(answer.status)")
                // The export's time is its own.
                pages.append(
                    answer.body.split(separator: "\r\n").filter { !$0.hasPrefix("DTSTAMP:") }.joined(separator: "\n"))
            }
            let overview = try #require(
                try JSONSerialization.jsonObject(
                    with: Data(try fetch(base.appendingPathComponent("index.json")).body.utf8)) as? [String: Any])
            pages.append(
                "\(overview["records"] ?? "") \((overview["zones"] as? [Any])?.count ?? 0) \(overview["schema"] ?? "")")
            kill(server.process.processIdentifier, SIGINT)
            _ = server.finish()
            bodies.append(pages)
        }
        #expect(bodies[0] == bodies[1], "the PostgreSQL store's pages differ from the SQLite store's")
    }
}
