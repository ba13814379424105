import Foundation
import Testing

/// Every command on a `postgresql://` store, as a user runs them: the same answers as on SQLite.
@Suite("ckport on PostgreSQL", .enabled(if: PostgresTestServer.enabled))
struct PostgresCommandTests {
    func server(_ tag: String) throws -> String {
        try #require(
            PostgresTestServer.store(tag),
            "CI runs the PostgreSQL tests: set CKPORT_TEST_POSTGRES (see scripts/postgres-cluster.sh)")
    }

    @Test("a server that refuses the password says where ckport looks for one, and never shows it")
    func passwordRefused() throws {
        let store = try server("password")
        let folder = Scratch()
        _ = FileManager.default.createFile(
            atPath: folder.path("empty.pgpass"), contents: Data(), attributes: [.posixPermissions: 0o600])
        for password in [nil, "not-the-password"] {
            var environment = [
                "PGPASSWORD": password ?? "", "PGPASSFILE": folder.path("empty.pgpass"), "HOME": folder.path("."),
            ]
            if password == nil { environment["PGPASSWORD"] = nil }
            let process = ckportProcess(["stats", "--store", store], in: folder.url, environment: environment)
            if password == nil { process.environment?["PGPASSWORD"] = nil }
            let errors = Pipe()
            process.standardError = errors
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 3, "\(said)")
            #expect(said.contains("PGPASSWORD") && said.contains("~/.pgpass"), "\(said)")
            #expect(!said.contains("not-the-password"))
        }
    }

    @Test(
        "schema import, import, export, --where, delete, stats, backup, verify and restore on PostgreSQL answer as on SQLite, byte for byte"
    )
    func commands() throws {
        let folder = Scratch()
        let pg = try server("cli")
        let schema = sample("family-calendar", "schema.ckdb")
        let records = sample("family-calendar", "records.jsonl")
        for store in ["local.sqlite", pg] {
            #expect(try ckport(["schema", "import", schema, "--store", store, "-q"], in: folder.url).status == 0)
            let imported = try ckport(["import", records, "--store", store], in: folder.url)
            #expect(imported.status == 0, "\(imported.stderr)")
        }
        let queries: [[String]] = [
            [],
            [
                "--type", "Event", "--where",
                "familyID == 'family-1' AND startDate >= 2026-03-01 AND isDeleted == false", "--sort", "startDate",
            ],
            ["--type", "Event", "--sort", "title", "--desc", "--limit", "7"],
            ["--type", "Event", "--where", "title BEGINSWITH 'S'"],
            ["--type", "Event", "--format", "csv"],
        ]
        for query in queries {
            let local = try ckport(["export", "--store", "local.sqlite", "-q"] + query, in: folder.url)
            let remote = try ckport(["export", "--store", pg, "-q"] + query, in: folder.url)
            #expect(
                remote.status == 0 && !local.stdout.isEmpty && remote.stdout == local.stdout,
                "export \(query): \(remote.stderr)")
        }
        // The same store through $CKPORT_STORE; its backend named by stats.
        let stats = try ckport(["stats"], in: folder.url, environment: ["CKPORT_STORE": pg])
        #expect(
            stats.status == 0 && stats.stdout.contains("(PostgreSQL, ") && stats.stdout.contains("schema=t_cli_"),
            "\(stats.stdout)\(stats.stderr)")
        let json = try ckport(["stats", "--json", "--store", pg], in: folder.url)
        #expect(json.stdout.contains("\"backend\":\"postgresql\""), "\(json.stdout)")
        // A delete with its reference actions, then the same on SQLite: the same stores again.
        for store in ["local.sqlite", pg] {
            let deleted = try ckport(
                ["delete", "--store", store, "--type", "Family", "--where", "recordName == 'family-1'", "-q"],
                in: folder.url)
            #expect(deleted.status == 0, "\(deleted.stderr)")
        }
        #expect(
            try ckport(["export", "--store", pg, "-q"], in: folder.url).stdout
                == ckport(["export", "--store", "local.sqlite", "-q"], in: folder.url).stdout)
        // A bundle of each, verified; the PostgreSQL one restored into SQLite exports the same.
        #expect(try ckport(["backup", "--store", pg, "-o", "pg.ckbundle", "-q"], in: folder.url).status == 0)
        #expect(try ckport(["verify", "pg.ckbundle", "-q"], in: folder.url).status == 0)
        #expect(try ckport(["restore", "pg.ckbundle", "--store", "back.sqlite", "-q"], in: folder.url).status == 0)
        #expect(
            try ckport(["export", "--store", "back.sqlite", "-q"], in: folder.url).stdout
                == ckport(["export", "--store", "local.sqlite", "-q"], in: folder.url).stdout)
        // A store that is not there: said, nothing made.
        let missing = try ckport(["export", "--store", try server("missing")], in: folder.url)
        #expect(
            missing.status == 2 && missing.stderr.contains("no ckport store in schema t_missing_"), "\(missing.stderr)")
        // A password in the URL is refused, and not repeated.
        let secret = try ckport(
            [
                "stats", "--store",
                pg.replacingOccurrences(of: "://", with: "://x:hunter2@").replacingOccurrences(
                    of: "://x:hunter2@ckport@", with: "://ckport:hunter2@"),
            ],
            in: folder.url)
        #expect(secret.status != 0 && !secret.stderr.contains("hunter2"), "\(secret.stderr)")
    }

    @Test(
        "records that bring their own fields (--allow-new-fields) and invalid records skipped (--skip-invalid) give the SQLite store's schema, records and rejects"
    )
    func growingAndRejecting() throws {
        let folder = Scratch()
        let pg = try server("grow")
        let records = sample("family-todo", "records.jsonl")
        for store in ["grown.sqlite", pg] {
            let run = try ckport(["import", records, "--allow-new-fields", "--store", store, "-q"], in: folder.url)
            #expect(run.status == 0, "\(run.stderr)")
        }
        #expect(
            try ckport(["export", "--store", pg, "-q"], in: folder.url).stdout
                == ckport(["export", "--store", "grown.sqlite", "-q"], in: folder.url).stdout)
        #expect(
            try ckport(["schema", "export", "--store", pg, "-o", "-"], in: folder.url).stdout
                == ckport(["schema", "export", "--store", "grown.sqlite", "-o", "-"], in: folder.url).stdout)
        // One good record, one with a field of the wrong type, one good: the bad one rejected.
        let lines = try String(contentsOfFile: records, encoding: .utf8).split(separator: "\n").prefix(3).map(
            String.init)
        let bad = lines[1].replacingOccurrences(of: "\"type\":\"STRING\"", with: "\"type\":\"INT64\"")
        #expect(bad != lines[1])
        try ([lines[0], bad, lines[2]].joined(separator: "\n") + "\n").write(
            toFile: folder.path("mixed.jsonl"), atomically: true, encoding: .utf8)
        var rejected: [String] = []
        for (index, store) in ["mixed.sqlite", try server("mixed")].enumerated() {
            #expect(
                try ckport(
                    ["schema", "import", sample("family-todo", "schema.ckdb"), "--store", store, "-q"], in: folder.url
                ).status == 0)
            let run = try ckport(
                ["import", "mixed.jsonl", "--skip-invalid", "--rejects", "rejects-\(index).jsonl", "--store", store],
                in: folder.url)
            #expect(run.status == 0, "\(run.stderr)")
            rejected.append(try String(contentsOfFile: folder.path("rejects-\(index).jsonl"), encoding: .utf8))
            #expect(
                try ckport(["export", "--store", store, "-q"], in: folder.url).stdout.split(separator: "\n").count == 2)
        }
        #expect(rejected[0] == rejected[1] && !rejected[0].isEmpty)
    }

    @Test(
        "moving between backends is lossless: SQLite → bundle → PostgreSQL → bundle → SQLite, and ckport copy both ways, export byte-identical, shares and parent links with it"
    )
    func lossless() throws {
        let folder = Scratch()
        for app in ["notes", "screen-time-rewards", "family-todo", "family-calendar"] {
            let first = "\(app).sqlite"
            #expect(
                try ckport(
                    ["import", sample(app, "schema.ckdb"), sample(app, "records.jsonl"), "--store", first, "-q"],
                    in: folder.url
                ).status == 0)
            let original = try ckport(["export", "--store", first, "-q"], in: folder.url).stdout
            #expect(!original.isEmpty)
            let shares = try ckport(["shares", "--json", "--store", first], in: folder.url).stdout
            if app.hasPrefix("family-") {
                #expect(
                    original.contains(#""parent":{"recordName":"#)
                        && original.contains(#""recordType":"cloudkit.share""#)
                        && original.contains(#""participants":[{"#))
                #expect(shares.contains(#""participants":[{"#) && shares.contains(#""name":""#), "\(shares)")
            }
            let viaBundle = try server("bundle")
            #expect(
                try ckport(["backup", "--store", first, "-o", "\(app)-1.ckbundle", "-q"], in: folder.url).status == 0)
            #expect(
                try ckport(["restore", "\(app)-1.ckbundle", "--store", viaBundle, "-q"], in: folder.url).status == 0)
            #expect(
                try ckport(["export", "--store", viaBundle, "-q"], in: folder.url).stdout == original,
                "\(app): SQLite → bundle → PostgreSQL")
            #expect(
                try ckport(["shares", "--json", "--store", viaBundle], in: folder.url).stdout == shares,
                "\(app): the shares on PostgreSQL")
            #expect(
                try ckport(["backup", "--store", viaBundle, "-o", "\(app)-2.ckbundle", "-q"], in: folder.url).status
                    == 0)
            #expect(
                try ckport(["restore", "\(app)-2.ckbundle", "--store", "\(app)-back.sqlite", "-q"], in: folder.url)
                    .status == 0)
            #expect(
                try ckport(["export", "--store", "\(app)-back.sqlite", "-q"], in: folder.url).stdout == original,
                "\(app): … → bundle → SQLite")

            let viaCopy = try server("copy")
            let copied = try ckport(["copy", "--from", first, "--to", viaCopy], in: folder.url)
            #expect(
                copied.status == 0 && copied.stderr.contains("(SQLite) into") && copied.stderr.contains("(PostgreSQL)"),
                "\(copied.stderr)")
            #expect(
                try ckport(["copy", "--from", viaCopy, "--to", "\(app)-copied.sqlite", "-q"], in: folder.url).status
                    == 0)
            #expect(
                try ckport(["export", "--store", viaCopy, "-q"], in: folder.url).stdout == original,
                "\(app): copy into PostgreSQL")
            #expect(
                try ckport(["export", "--store", "\(app)-copied.sqlite", "-q"], in: folder.url).stdout == original,
                "\(app): copy back into SQLite")
            // The bundles made on either side hold the same records, byte for byte.
            #expect(
                try ckport(
                    ["backup", "--store", "\(app)-back.sqlite", "-o", "\(app)-3.ckbundle", "-q"], in: folder.url
                ).status == 0)
            for bundle in ["\(app)-1.ckbundle", "\(app)-2.ckbundle", "\(app)-3.ckbundle"] {
                #expect(
                    try ckport(["restore", bundle, "--store", "\(bundle).sqlite", "-q"], in: folder.url).status == 0)
                #expect(
                    try ckport(["export", "--store", "\(bundle).sqlite", "-q"], in: folder.url).stdout == original,
                    "\(bundle)")
            }
            #expect(
                try ckport(["schema", "export", "--store", "\(app)-copied.sqlite", "-o", "-"], in: folder.url).stdout
                    == ckport(["schema", "export", "--store", first, "-o", "-"], in: folder.url).stdout,
                "\(app): the schema")
        }
    }

    @Test(
        "migrate apply on PostgreSQL leaves the records the migrations' expected folder holds, and the history says so")
    func migrations() throws {
        let folder = Scratch()
        for app in ["notes", "family-todo"] {
            let pg = try server("migrate")
            #expect(
                try ckport(
                    ["import", sample(app, "schema.ckdb"), sample(app, "records.jsonl"), "--store", pg, "-q"],
                    in: folder.url
                ).status == 0)
            let directory = packageRoot.appendingPathComponent("migrations/\(app)").path
            let applied = try ckport(
                ["migrate", "apply", "--dir", directory, "--store", pg, "--no-backup", "-q"], in: folder.url)
            #expect(applied.status == 0, "\(app): \(applied.stderr)")
            let expected = try String(
                contentsOfFile: packageRoot.appendingPathComponent("migrations/\(app)/expected/records.jsonl").path,
                encoding: .utf8)
            #expect(try ckport(["export", "--store", pg, "-q"], in: folder.url).stdout == expected, "\(app)")
            let status = try ckport(["migrate", "status", "--dir", directory, "--store", pg], in: folder.url)
            #expect(status.status == 0 && !status.stdout.contains("pending"), "\(app): \(status.stdout)")
        }
    }

    @Test(
        "importers into different zones at once all finish, none waiting for a store-wide lock; every record is there once"
    )
    func concurrentImporters() throws {
        let folder = Scratch()
        let pg = try server("writers")
        #expect(
            try ckport(["generate", "--app", "family-todo", "--schema", "-o", "schema.ckdb"], in: folder.url).status
                == 0)
        #expect(try ckport(["schema", "import", "schema.ckdb", "--store", pg, "-q"], in: folder.url).status == 0)
        #expect(
            try ckport(
                ["generate", "--app", "family-todo", "--records", "40000", "-o", "all.jsonl", "-q"], in: folder.url
            ).status == 0)
        // One file per zone.
        var byZone: [String: [Substring]] = [:]
        let text = try String(contentsOfFile: folder.path("all.jsonl"), encoding: .utf8)
        for line in text.split(separator: "\n") {
            guard let range = line.range(of: "\"zoneName\":\"") else { continue }
            let zone = line[range.upperBound...].prefix { $0 != "\"" }
            byZone[String(zone), default: []].append(line)
        }
        let zones = byZone.keys.sorted().prefix(4)
        #expect(zones.count == 4)
        for zone in zones {
            try (byZone[zone]!.joined(separator: "\n") + "\n").write(
                toFile: folder.path("\(zone).jsonl"), atomically: true, encoding: .utf8)
        }
        // --wait 0: a writer that had to wait for another would fail.
        let running = try zones.map {
            try RunningCKPort(["import", "\($0).jsonl", "--store", pg, "--wait", "0", "-q"], in: folder.url)
        }
        for (zone, process) in zip(zones, running) {
            let run = process.finish()
            #expect(run.status == 0, "\(zone): \(run.stderr)")
        }
        let expected = zones.reduce(0) { $0 + byZone[$1]!.count }
        let exported = try ckport(["export", "--store", pg, "-q"], in: folder.url).stdout.split(separator: "\n").count
        #expect(exported == expected)
    }

    @Test(
        "kill -9 of ckport in the middle of an import into PostgreSQL: the server rolls it back, nothing half-written")
    func killed() throws {
        let folder = Scratch()
        let pg = try server("kill")
        #expect(
            try ckport(["generate", "--app", "family-todo", "--schema", "-o", "schema.ckdb"], in: folder.url).status
                == 0)
        #expect(
            try ckport(
                ["generate", "--app", "family-todo", "--records", "60000", "-o", "many.jsonl", "-q"], in: folder.url
            ).status == 0)
        #expect(
            try ckport(
                ["import", "schema.ckdb", sample("family-todo", "records.jsonl"), "--store", pg, "-q"], in: folder.url
            ).status == 0)
        let before = try ckport(["export", "--store", pg, "-q"], in: folder.url).stdout
        var killedMidway = 0
        for delay: useconds_t in [400_000, 800_000, 1_500_000, 250_000] {
            let running = try RunningCKPort(["import", "many.jsonl", "--store", pg], in: folder.url)
            usleep(delay)
            kill(running.process.processIdentifier, SIGKILL)
            let run = running.finish()
            if run.status == 0 { continue }
            killedMidway += 1
            // The server notices the closed connection and rolls the transaction back; a reader
            // never sees part of it.
            #expect(
                try ckport(["export", "--store", pg, "-q"], in: folder.url).stdout == before,
                "after a kill at \(delay) µs")
        }
        #expect(killedMidway > 0, "every import finished before the kill")
        // The store still takes the whole import afterwards.
        let after = try ckport(["import", "many.jsonl", "--store", pg, "-q"], in: folder.url)
        #expect(after.status == 0, "\(after.stderr)")
    }
}
