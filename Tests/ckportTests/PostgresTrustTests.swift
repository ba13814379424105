import Foundation
import TestSupport
import Testing

/// The PostgreSQL store under what a database engineer would try: writers in each other's way,
/// a connection lost mid-COPY, locks held from elsewhere, names and values at PostgreSQL's edges.
/// Real ckport processes against a real server.
@Suite("PostgreSQL you can trust", .enabled(if: PostgresTestServer.enabled))
struct PostgresTrustTests {
    func server(_ tag: String) throws -> String {
        try #require(
            PostgresTestServer.store(tag),
            "CI runs the PostgreSQL tests: set CKPORT_TEST_POSTGRES (see scripts/postgres-cluster.sh)")
    }

    static let schema = """
        DEFINE SCHEMA
            RECORD TYPE Chore (
                "___recordID" REFERENCE QUERYABLE,
                title   STRING QUERYABLE,
                points  INT64,
                ratio   DOUBLE,
                due     TIMESTAMP,
                GRANT READ TO "_world"
            );
        """

    /// `count` chores in the plain style, each with the one field given.
    func chores(_ count: Int, _ field: (Int) -> String) -> String {
        (0..<count).map { n in
            "{\"recordName\":\"c-\(String(format: "%05d", n))\",\"recordType\":\"Chore\",\"zoneName\":\"Home\",\(field(n))}"
        }
        .joined(separator: "\n") + "\n"
    }

    @Test(
        "two imports upserting different fields of the same records at once lose no update: each record ends with both, or a writer says it stopped"
    )
    func concurrentUpserts() throws {
        let folder = Scratch()
        let pg = try server("upserts")
        folder.write("schema.ckdb", Self.schema)
        #expect(try ckport(["schema", "import", "schema.ckdb", "--store", pg, "-q"], in: folder.url).status == 0)
        let count = 3000
        folder.write("base.jsonl", chores(count) { "\"title\":\"chore \($0)\"" })
        #expect(try ckport(["import", "base.jsonl", "--store", pg, "-q"], in: folder.url).status == 0)
        folder.write("points.jsonl", chores(count) { "\"points\":\($0)" })
        // The other file in the other order: the two writers meet wherever they are.
        folder.write(
            "ratios.jsonl",
            chores(count) { "\"ratio\":\(Double($0) / 8)" }.split(separator: "\n").reversed().joined(separator: "\n")
                + "\n")
        let running = try ["points.jsonl", "ratios.jsonl"].map { file in
            try RunningCKPort(["import", file, "--store", pg, "--mode", "upsert", "-q"], in: folder.url)
        }
        var succeeded: [Bool] = []
        for writer in running {
            let run = writer.finish()
            succeeded.append(run.status == 0)
            if run.status != 0 {
                // The only way to lose: said, whole, nothing written.
                #expect(
                    run.stderr.contains("nothing of this one was written")
                        || run.stderr.contains("nothing was written"), "\(run.stderr)")
            }
        }
        #expect(succeeded.contains(true))
        let exported = try ckport(["export", "--store", pg, "--style", "plain", "-q"], in: folder.url).stdout
        let lines = exported.split(separator: "\n")
        #expect(lines.count == count)
        let withPoints = lines.filter { $0.contains("\"points\":") }.count
        let withRatios = lines.filter { $0.contains("\"ratio\":") }.count
        #expect(
            withPoints == (succeeded[0] ? count : 0) && withRatios == (succeeded[1] ? count : 0),
            "points \(withPoints), ratios \(withRatios), runs \(succeeded)")
    }

    @Test(
        "a connection lost in the middle of a COPY ends the import with an error (exit 3), never a hang, and the store keeps nothing of it"
    )
    func connectionLostMidCopy() throws {
        let folder = Scratch()
        let pg = try server("lost")
        folder.write("schema.ckdb", Self.schema)
        #expect(try ckport(["schema", "import", "schema.ckdb", "--store", pg, "-q"], in: folder.url).status == 0)
        folder.write(
            "many.jsonl",
            chores(400_000) { "\"title\":\"chore \($0) \(String(repeating: "x", count: 64))\",\"points\":\($0)" })
        let running = try RunningCKPort(["import", "many.jsonl", "--store", pg, "-q"], in: folder.url)
        let process = running.process
        // Cut the import's connection on the server once its COPY is under way.
        let killed = try waitAndTerminate(pg, matching: "COPY", timeout: 60)
        #expect(killed, "the import's COPY was never seen on the server")
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.2) }
        let hung = process.isRunning
        if hung {
            process.terminate()
            process.waitUntilExit()
        }
        #expect(!hung, "ckport still ran a minute after its connection was cut")
        #expect(process.terminationStatus == 3, "\(running.stderrSoFar)")
        #expect(try ckport(["export", "--store", pg, "-q"], in: folder.url).stdout.isEmpty)
    }

    @Test(
        "a server restarted while an import's COPY runs: the import ends with exit 3 and says the connection was lost, never a hang, and the store is as it was",
        .timeLimit(.minutes(10)))
    func serverRestartMidCopy() throws {
        // A cluster of this test's own: restarting the one the other tests share would end
        // their sessions too.
        let cluster = try ThrowawayCluster()
        defer { cluster.stop() }
        let folder = Scratch()
        let pg = cluster.url + "?schema=restarted"
        let environment = ["PGPASSWORD": cluster.password]
        folder.write("schema.ckdb", Self.schema)
        folder.write("before.jsonl", chores(300) { "\"title\":\"kept \($0)\"" })
        #expect(
            try ckport(
                ["import", "schema.ckdb", "before.jsonl", "--store", pg, "-q"], in: folder.url, environment: environment
            ).status == 0)
        let before = try ckport(["export", "--store", pg, "-q"], in: folder.url, environment: environment).stdout
        #expect(before.split(separator: "\n").count == 300)
        // The same names and more: updates of the 300 and new records, in one transaction.
        folder.write(
            "many.jsonl",
            chores(300_000) { "\"title\":\"chore \($0) \(String(repeating: "x", count: 64))\",\"points\":\($0)" })
        for attempt in 1...3 {
            let running = try RunningCKPort(
                ["import", "many.jsonl", "--store", pg, "-q"], in: folder.url, environment: environment)
            let process = running.process
            let copying = eventually(60) {
                ((try? cluster.psql(
                    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'COPY%' AND pid <> pg_backend_pid()")) ?? "")
                    .trimmingCharacters(in: .whitespacesAndNewlines) != "0" || !process.isRunning
            }
            #expect(
                copying && process.isRunning,
                "attempt \(attempt): the import's COPY was never seen on the server: \(running.stderrSoFar)")
            try cluster.restart()
            let deadline = Date().addingTimeInterval(90)
            while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.2) }
            let hung = process.isRunning
            if hung {
                process.terminate()
                process.waitUntilExit()
            }
            #expect(!hung, "attempt \(attempt): ckport still ran 90 s after the server restarted")
            let run = running.finish()
            #expect(run.status == 3, "attempt \(attempt): \(run.stderr)")
            #expect(
                run.stderr.contains("the connection to the server was lost") || run.stderr.contains("terminat"),
                "attempt \(attempt): \(run.stderr)")
            #expect(
                try ckport(["export", "--store", pg, "-q"], in: folder.url, environment: environment).stdout == before,
                "attempt \(attempt)")
        }
    }

    /// Terminates the server session whose query contains `text` (another than the caller's),
    /// once one shows up; false if none did within `timeout` seconds.
    func waitAndTerminate(_ store: String, matching text: String, timeout: Double) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            // Only a session of this store (one holding a lock in its namespace): other tests
            // run at the same time on the same server.
            let namespace = String(store.split(separator: "=").last!)
            let result = try psql(
                store,
                """
                SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a
                WHERE a.pid <> pg_backend_pid() AND a.state = 'active' AND a.query LIKE '%\(text)%' AND a.query NOT LIKE '%pg_stat_activity%'
                  AND EXISTS (SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
                              WHERE l.pid = a.pid AND n.nspname = '\(namespace)')
                """)
            if result.contains("t") { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return false
    }

    @Test(
        "a lock held elsewhere (a session left open in psql) makes ckport wait at most --wait, then say so; nothing is written"
    )
    func boundedWait() throws {
        let folder = Scratch()
        let pg = try server("wait")
        folder.write("schema.ckdb", Self.schema)
        #expect(try ckport(["schema", "import", "schema.ckdb", "--store", pg, "-q"], in: folder.url).status == 0)
        folder.write("one.jsonl", chores(1) { "\"title\":\"chore \($0)\"" })
        let namespace = String(pg.split(separator: "=").last!)
        // A psql session that takes the store's tables for itself and sits there.
        let (holder, _) = try psqlProcess(
            pg, "BEGIN; LOCK TABLE \"\(namespace)\"._ck_meta IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(30);")
        Thread.sleep(forTimeInterval: 1)
        defer { holder.terminate() }
        // The lock is held 30 s: a wait without its bound would outlast it and succeed, which
        // the status and message below refuse.
        let reader = try ckport(["export", "--store", pg, "--wait", "2"], in: folder.url)
        let writer = try ckport(["import", "one.jsonl", "--store", pg, "--wait", "2"], in: folder.url)
        for run in [reader, writer] {
            #expect(
                run.status == 3
                    && run.stderr.contains("waited longer than --wait for a lock another transaction holds"),
                "\(run.stderr)")
        }
        holder.terminate()
        holder.waitUntilExit()
        Thread.sleep(forTimeInterval: 1)
        #expect(try ckport(["export", "--store", pg, "-q"], in: folder.url).stdout.isEmpty)
    }

    @Test(
        "exports taken while a migration replaces a type's table each hold every record of the sample, before or after the migration, never a type missing"
    )
    func readersDuringMigration() throws {
        let folder = Scratch()
        let pg = try server("migrating")
        let samples = packageRoot.appendingPathComponent("samples/notes")
        #expect(
            try ckport(
                [
                    "import", samples.appendingPathComponent("schema.ckdb").path,
                    samples.appendingPathComponent("records.jsonl").path,
                    "--store", pg, "-q",
                ], in: folder.url
            ).status == 0)
        // Enough NoteV1 records that the migration takes a while, and Note records (a type an
        // export reads before NoteV1) so that exports are often between types when a step of
        // the migration commits.
        let many =
            (0..<30_000).map { n in
                "{\"recordName\":\"bulk-\(n)\",\"recordType\":\"NoteV1\",\"zoneName\":\"Notes\",\"title\":\"bulk \(n)\",\"body\":\"text \(n)\",\"priority\":\(n % 3)}"
            }.joined(separator: "\n") + "\n"
            + (0..<30_000).map { n in
                "{\"recordName\":\"pad-\(n)\",\"recordType\":\"Note\",\"zoneName\":\"Notes\",\"title\":\"pad \(n)\"}"
            }.joined(separator: "\n") + "\n"
        folder.write("many.jsonl", many)
        #expect(try ckport(["import", "many.jsonl", "--store", pg, "-q"], in: folder.url).status == 0)
        let sample = try String(contentsOf: samples.appendingPathComponent("records.jsonl"), encoding: .utf8)
            .split(separator: "\n").compactMap { line -> String? in
                guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                    return nil
                }
                return object["recordName"] as? String
            }
        #expect(sample.count == 60)
        let migration = ckportProcess(
            [
                "migrate", "apply", "--dir", packageRoot.appendingPathComponent("migrations/notes").path,
                "--store", pg, "--no-backup", "-q",
            ], in: folder.url)
        try migration.run()
        var exports = 0
        var types: Set<String> = []
        while migration.isRunning || exports < 2 {
            let run = try ckport(["export", "--store", pg, "--style", "plain", "-q"], in: folder.url)
            #expect(run.status == 0, "\(run.stderr)")
            exports += 1
            var names: [String: Int] = [:]
            var noteTypes: Set<String> = []
            for line in run.stdout.split(separator: "\n") {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                let name = try #require(object["recordName"] as? String)
                names[name, default: 0] += 1
                if name.hasPrefix("bulk-"), let type = object["recordType"] as? String { noteTypes.insert(type) }
            }
            let missing = sample.filter { names[$0] == nil }
            #expect(
                missing.isEmpty,
                "export \(exports) lacks \(missing.count) records of the sample, such as \(missing.prefix(3))")
            #expect(names.values.allSatisfy { $0 == 1 })
            #expect(names.keys.filter { $0.hasPrefix("bulk-") }.count == 30_000, "export \(exports)")
            // One state or the other, never a mixture.
            #expect(noteTypes.count == 1, "\(noteTypes)")
            types.formUnion(noteTypes)
        }
        migration.waitUntilExit()
        #expect(migration.terminationStatus == 0)
        #expect(types.contains("NoteV2"))
    }

    @Test(
        "a load into zones it creates takes a name it wrote before, a later batch apart, as the update or deletion it is, and a name deleted then brought back as new"
    )
    func newZoneNamesAgain() throws {
        let folder = Scratch()
        let pg = try server("again")
        folder.write("schema.ckdb", Self.schema)
        #expect(try ckport(["schema", "import", "schema.ckdb", "--store", pg, "-q"], in: folder.url).status == 0)
        // Batches of the loader hold 4,000 records: these come back batches later.
        let first = chores(9_000) { "\"title\":\"first \($0)\"" }
        // A batch of new names but one: c-00001, written two batches before.
        let changed =
            "{\"recordName\":\"c-00001\",\"recordType\":\"Chore\",\"zoneName\":\"Home\",\"title\":\"changed\"}\n"
        let more =
            (0..<3_000).map {
                "{\"recordName\":\"d-\($0)\",\"recordType\":\"Chore\",\"zoneName\":\"Home\",\"title\":\"more\"}"
            }.joined(separator: "\n") + "\n"
        let again = """
            {"recordName":"c-00002","recordType":"Chore","zoneName":"Home","deleted":true}
            {"recordName":"c-00003","recordType":"Chore","zoneName":"Home","deleted":true}

            """
        let back =
            chores(9_000) { "\"title\":\"again \($0)\"" }.split(separator: "\n").filter { $0.contains("\"c-00003\"") }
            .joined() + "\n"
        folder.write("load.jsonl", first + changed + more + again + back)
        #expect(try ckport(["export", "--store", pg, "--token-file", "token.txt", "-q"], in: folder.url).status == 0)
        let token = folder.text("token.txt").trimmingCharacters(in: .whitespacesAndNewlines)
        let run = try ckport(["import", "load.jsonl", "--store", pg], in: folder.url)
        #expect(run.status == 0, "\(run.stderr)")
        let exported = try ckport(["export", "--store", pg, "--style", "plain", "-q"], in: folder.url).stdout.split(
            separator: "\n")
        #expect(exported.count == 11_999, "\(exported.count)")
        #expect(exported.contains { $0.contains("\"c-00001\"") && $0.contains("\"title\":\"changed\"") })
        #expect(!exported.contains { $0.contains("\"c-00002\"") })
        #expect(exported.contains { $0.contains("\"c-00003\"") && $0.contains("\"title\":\"again 3\"") })
        #expect(exported.contains { $0.contains("\"c-08999\"") && $0.contains("\"title\":\"first 8999\"") })
        // The change feed has every name once, in the order of its last change.
        let feed = try ckport(["export", "--store", pg, "--since", token, "--style", "plain", "-q"], in: folder.url)
        let names = feed.stdout.split(separator: "\n").compactMap { line -> Substring? in
            guard let r = line.range(of: "\"recordName\":\"") else { return nil }
            return line[r.upperBound...].prefix { $0 != "\"" }
        }
        #expect(
            names.count == 12_000 && Set(names).count == 12_000 && names.suffix(2) == ["c-00002", "c-00003"]
                && names.contains("c-00001"), "\(names.suffix(4)) \(feed.stderr)")
    }

    @Test("writers that each bring records of the same new zone at once all succeed, and the zone is made once")
    func newZoneRace() throws {
        let folder = Scratch()
        let pg = try server("zones")
        folder.write("schema.ckdb", Self.schema)
        #expect(try ckport(["schema", "import", "schema.ckdb", "--store", pg, "-q"], in: folder.url).status == 0)
        for round in 0..<3 {
            let files = (0..<4).map { writer in
                let file = "r\(round)-w\(writer).jsonl"
                folder.write(
                    file,
                    (0..<50).map { n in
                        "{\"recordName\":\"r\(round)-w\(writer)-\(n)\",\"recordType\":\"Chore\",\"zoneName\":\"Fresh\(round)\",\"title\":\"x\"}"
                    }.joined(separator: "\n") + "\n")
                return file
            }
            let running = try files.map { try RunningCKPort(["import", $0, "--store", pg, "-q"], in: folder.url) }
            for writer in running {
                let run = writer.finish()
                #expect(run.status == 0, "\(run.stderr)")
            }
        }
        let exported = try ckport(["export", "--store", pg, "--style", "plain", "-q"], in: folder.url).stdout
        #expect(exported.split(separator: "\n").count == 3 * 4 * 50)
        let namespace = String(pg.split(separator: "=").last!)
        #expect(
            try psql(pg, "SELECT count(*) FROM \"\(namespace)\"._ck_zone WHERE \"zoneName\" LIKE 'Fresh%'")
                .trimmingCharacters(in: .whitespacesAndNewlines) == "3")
    }

    @Test(
        "TLS as libpq has it: a server that takes a role over TLS only says to add sslmode=require; prefer and require connect without checking; verify-full checks against sslrootcert, and says so when it cannot"
    )
    func tls() throws {
        let folder = Scratch()
        let plain = try server("tls")
        let authority = try #require(
            PostgresTestServer.authority, "CI gives the test server's authority in CKPORT_TEST_POSTGRES_CA")
        // The cluster's role that may connect over TLS only.
        let store = plain.replacingOccurrences(of: "://ckport@", with: "://ckport_tls@")
        #expect(store != plain)
        folder.write("schema.ckdb", Self.schema)
        func importSchema(_ parameters: String) throws -> Run {
            try ckport(["schema", "import", "schema.ckdb", "--store", store + "&" + parameters, "-q"], in: folder.url)
        }
        let refused = try importSchema("sslmode=disable")
        #expect(refused.status == 3 && refused.stderr.contains("add sslmode=require"), "\(refused.stderr)")
        for mode in [
            "sslmode=prefer", "sslmode=require", "sslmode=verify-full&sslrootcert=\(authority)",
            "sslmode=verify-ca&sslrootcert=\(authority)",
        ] {
            let run = try importSchema(mode)
            #expect(run.status == 0, "\(mode): \(run.stderr)")
        }
        // The system's authorities did not sign the test server's certificate.
        let unchecked = try importSchema("sslmode=verify-full")
        #expect(
            unchecked.status == 3 && unchecked.stderr.contains("the server's certificate could not be checked")
                && unchecked.stderr.contains("sslrootcert=FILE") && !unchecked.stderr.contains("OPENSSL"),
            "\(unchecked.stderr)")
        // Over TLS the store is the same store: what went in comes out.
        folder.write("one.jsonl", chores(3) { "\"title\":\"chore \($0)\"" })
        #expect(
            try ckport(["import", "one.jsonl", "--store", store + "&sslmode=require", "-q"], in: folder.url).status == 0
        )
        let exported = try ckport(
            ["export", "--store", store + "&sslmode=verify-full&sslrootcert=\(authority)", "--style", "plain", "-q"],
            in: folder.url)
        #expect(exported.stdout.split(separator: "\n").count == 3, "\(exported.stderr)")
    }

    @Test(
        "names at PostgreSQL's edges: a reserved word as the namespace, types whose names PostgreSQL's own constraint names would take"
    )
    func names() throws {
        let folder = Scratch()
        let base = try #require(PostgresTestServer.url)
        let namespace = "user"
        let pg = base + (base.contains("?") ? "&" : "?") + "schema=\(namespace)"
        _ = try psql(pg, "DROP SCHEMA IF EXISTS \"user\" CASCADE")
        defer { _ = try? psql(pg, "DROP SCHEMA IF EXISTS \"user\" CASCADE") }
        folder.write(
            "schema.ckdb", "DEFINE SCHEMA\n RECORD TYPE Foo (title STRING);\n RECORD TYPE Foo_pkey (title STRING);\n")
        folder.write(
            "records.jsonl",
            "{\"recordName\":\"a\",\"recordType\":\"Foo\",\"title\":\"one\"}\n{\"recordName\":\"b\",\"recordType\":\"Foo_pkey\",\"title\":\"two\"}\n"
        )
        let imported = try ckport(["import", "schema.ckdb", "records.jsonl", "--store", pg, "-q"], in: folder.url)
        #expect(imported.status == 0, "\(imported.stderr)")
        let exported = try ckport(["export", "--store", pg, "-q", "--style", "plain"], in: folder.url)
        #expect(exported.stdout.split(separator: "\n").count == 2, "\(exported.stdout)\(exported.stderr)")
    }

    @Test(
        "values PostgreSQL cannot hold are refused with the record and the field, before anything is written, and --skip-invalid leaves them out"
    )
    func unholdableValues() throws {
        let folder = Scratch()
        let pg = try server("values")
        folder.write(
            "schema.ckdb",
            Self.schema.replacingOccurrences(of: "due     TIMESTAMP,", with: "due     TIMESTAMP,\n weight NUMBER,"))
        #expect(try ckport(["schema", "import", "schema.ckdb", "--store", pg, "-q"], in: folder.url).status == 0)
        folder.write(
            "odd.jsonl",
            """
            {"recordName":"fine","recordType":"Chore","zoneName":"Home","title":"fine"}
            {"recordName":"nul","recordType":"Chore","zoneName":"Home","title":"a\\u0000b"}
            {"recordName":"far","recordType":"Chore","zoneName":"Home","due":9223372036854775000}
            {"recordName":"zero","recordType":"Chore","zoneName":"Home","weight":0.0}
            {"recordName":"negative-zero","recordType":"Chore","zoneName":"Home","weight":-0.0}

            """)
        let refused = try ckport(["import", "odd.jsonl", "--store", pg], in: folder.url)
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(
            refused.stderr.contains(
                "record 'nul' (Chore): field 'title' holds the character U+0000, which PostgreSQL's text cannot hold"),
            "\(refused.stderr)")
        #expect(try ckport(["export", "--store", pg, "-q"], in: folder.url).stdout.isEmpty)
        let skipped = try ckport(
            ["import", "odd.jsonl", "--store", pg, "--skip-invalid", "--rejects", "rejects.jsonl"], in: folder.url)
        #expect(skipped.status == 0, "\(skipped.stderr)")
        let rejects = folder.text("rejects.jsonl")
        #expect(
            rejects.contains("field 'title' holds the character U+0000")
                && rejects.contains(
                    "field 'due' is the time 9223372036854775000 ms from 1970, outside what PostgreSQL's timestamptz holds"
                ), "\(rejects)")
        #expect(
            rejects.contains(
                "record 'negative-zero' (Chore): field 'weight' is -0.0, which PostgreSQL's numeric (the column of a NUMBER field) holds only as 0"
            ), "\(rejects)")
        let kept = try ckport(["export", "--store", pg, "-q"], in: folder.url).stdout.split(separator: "\n")
        #expect(kept.count == 2 && kept.contains { $0.contains("\"recordName\":\"zero\"") }, "\(kept)")
        // The same file goes into SQLite whole: its limits are not PostgreSQL's.
        #expect(
            try ckport(["import", "schema.ckdb", "odd.jsonl", "--store", "local.sqlite", "-q"], in: folder.url).status
                == 0)
        let copy = try ckport(["copy", "--from", "local.sqlite", "--to", try server("copyvalues")], in: folder.url)
        #expect(copy.status == 2 && copy.stderr.contains("record 'nul' (Chore)"), "\(copy.stderr)")
    }

    @Test(
        "a database whose settings differ (extra_float_digits = 0, another time zone and date style) stores and gives back every digit and instant"
    )
    func sessionSettings() throws {
        let folder = Scratch()
        let base = try #require(PostgresTestServer.url)
        let database = "ckport_settings_\(UUID().uuidString.prefix(6).lowercased())"
        // The server's URL up to its database: postgresql://USER@HOST:PORT/
        let server = String(base[...base.lastIndex(of: "/")!])
        let admin = server + "postgres"
        _ = try psql(admin, "CREATE DATABASE \(database)")
        defer { _ = try? psql(admin, "DROP DATABASE IF EXISTS \(database) WITH (FORCE)") }
        _ = try psql(
            admin,
            "ALTER DATABASE \(database) SET extra_float_digits = 0; ALTER DATABASE \(database) SET TimeZone = 'Pacific/Kiritimati'; ALTER DATABASE \(database) SET DateStyle = 'SQL, DMY'"
        )
        let pg = server + database + "?schema=s"
        folder.write("schema.ckdb", Self.schema)
        folder.write(
            "exact.jsonl",
            """
            {"recordName":"a","recordType":"Chore","zoneName":"Home","ratio":0.1,"due":"2026-03-01T09:30:00.123Z","title":"a"}
            {"recordName":"b","recordType":"Chore","zoneName":"Home","ratio":0.30000000000000004,"due":"0900-02-28T23:59:59.999Z","title":"b"}
            {"recordName":"c","recordType":"Chore","zoneName":"Home","ratio":1.7976931348623157e308,"due":"1969-12-31T23:59:59.999Z","title":"c"}

            """)
        for store in [pg, "local.sqlite"] {
            #expect(
                try ckport(["import", "schema.ckdb", "exact.jsonl", "--store", store, "-q"], in: folder.url).status == 0
            )
        }
        let local = try ckport(["export", "--store", "local.sqlite", "-q"], in: folder.url).stdout
        #expect(!local.isEmpty && local.contains("0.30000000000000004"))
        #expect(try ckport(["export", "--store", pg, "-q"], in: folder.url).stdout == local)
        // An upsert of another field leaves the double as it was.
        folder.write(
            "title.jsonl", "{\"recordName\":\"b\",\"recordType\":\"Chore\",\"zoneName\":\"Home\",\"title\":\"b2\"}\n")
        for store in [pg, "local.sqlite"] {
            #expect(
                try ckport(["import", "title.jsonl", "--store", store, "--mode", "upsert", "-q"], in: folder.url).status
                    == 0)
        }
        #expect(
            try ckport(["export", "--store", pg, "-q"], in: folder.url).stdout
                == ckport(["export", "--store", "local.sqlite", "-q"], in: folder.url).stdout)
    }
}

/// Runs SQL through psql against a store URL's database (its password from PGPASSWORD), and
/// gives what it printed.
func psql(_ store: String, _ sql: String) throws -> String {
    let (process, output) = try psqlProcess(store, sql)
    let printed = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: printed, as: UTF8.self)
}

/// A psql process running `sql` against a store URL's database, started, with its output.
func psqlProcess(_ store: String, _ sql: String) throws -> (Process, Pipe) {
    var url = store
    if let query = url.firstIndex(of: "?") { url = String(url[..<query]) }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
    process.arguments = [url, "-Atqc", sql]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    return (process, output)
}

/// A PostgreSQL cluster of one test's own (`scripts/postgres-cluster.sh`), for faults that
/// reach every session of a server: a restart.
final class ThrowawayCluster {
    let directory = "/tmp/ckport-cluster-\(UUID().uuidString.prefix(8).lowercased())"
    private(set) var url = ""
    private(set) var password = ""

    init() throws {
        url = try script("start").split(separator: "\n").last.map(String.init) ?? ""
        password = try String(contentsOfFile: directory + "/password", encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        guard url.hasPrefix("postgresql://") else {
            throw ClusterFailure(message: "the cluster script printed no URL: \(url)")
        }
    }

    func restart() throws { _ = try script("restart") }

    func stop() {
        _ = try? script("stop")
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs SQL through psql in the cluster's `ckport` database, and gives what it printed.
    func psql(_ sql: String) throws -> String {
        try run(URL(fileURLWithPath: "/usr/bin/psql"), [url, "-Atqc", sql], environment: ["PGPASSWORD": password])
    }

    private func script(_ command: String) throws -> String {
        try run(
            URL(fileURLWithPath: "/bin/bash"),
            [packageRoot.appendingPathComponent("scripts/postgres-cluster.sh").path, command, directory])
    }

    /// Runs a program with its output in files, never pipes: the server the script starts
    /// keeps whatever it inherits open, and a pipe it holds would never reach its end.
    private func run(_ program: URL, _ arguments: [String], environment: [String: String] = [:]) throws -> String {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("cluster-out-\(UUID().uuidString)")
        let err = FileManager.default.temporaryDirectory.appendingPathComponent("cluster-err-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        defer {
            try? FileManager.default.removeItem(at: out)
            try? FileManager.default.removeItem(at: err)
        }
        let process = Process()
        process.executableURL = program
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        try process.run()
        process.waitUntilExit()
        let printed = String(decoding: (try? Data(contentsOf: out)) ?? Data(), as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw ClusterFailure(
                message:
                    "\(program.lastPathComponent) \(arguments.joined(separator: " ")): exit \(process.terminationStatus): \(String(decoding: (try? Data(contentsOf: err)) ?? Data(), as: UTF8.self))"
            )
        }
        return printed
    }

    struct ClusterFailure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}
