import Crypto
import Foundation
import PostgresNIO
import Records
import SQLiteStore
import SampleApps
import StoreConformance
import StoreCore
import TestSupport
import Testing

@testable import PostgresStore

/// The server the tests use: `CKPORT_TEST_POSTGRES`, a store URL (its password in
/// `PGPASSWORD`), as `.ci/run` sets after starting a throwaway cluster
/// (`scripts/postgres-cluster.sh`). Outside CI the server tests are skipped without it; in CI
/// they run, and fail when it is missing.
enum TestServer {
    static let environment = ProcessInfo.processInfo.environment
    static var url: String? { environment["CKPORT_TEST_POSTGRES"] }
    static var enabled: Bool { url != nil || environment["CI"] != nil }

    /// A location in a namespace of its own, for one test.
    static func location(_ tag: String) throws -> PostgresLocation {
        let url = try #require(
            TestServer.url, "CI runs the PostgreSQL tests: set CKPORT_TEST_POSTGRES (see scripts/postgres-cluster.sh)")
        let schema = "t_\(tag)_\(UUID().uuidString.prefix(8).lowercased())"
        return try PostgresLocation(url + (url.contains("?") ? "&" : "?") + "schema=\(schema)")
    }

    /// Removes a test's namespace.
    static func drop(_ location: PostgresLocation) throws {
        try PostgresLink(location).execute("DROP SCHEMA IF EXISTS \(location.schema) CASCADE")
    }
}

@Suite("PostgreSQL store locations")
struct PostgresLocationTests {
    @Test("a store URL gives user, host, port, database, schema and TLS; what is left out has its default")
    func parse() throws {
        let full = try PostgresLocation(
            "postgresql://backup@db.example.net:6543/mirror?schema=family_todo&sslmode=require", environment: [:])
        #expect(
            full.user == "backup" && full.host == "db.example.net" && full.port == 6543 && full.database == "mirror")
        #expect(full.schema == "family_todo" && full.tls == .require && full.socketDirectory == nil)
        let short = try PostgresLocation("postgres://ana@localhost", environment: [:])
        #expect(short.port == 5432 && short.database == "ana" && short.schema == "ckport" && short.tls == .disable)
        let remote = try PostgresLocation("postgresql://ana@10.0.0.7/db", environment: [:])
        #expect(remote.tls == .prefer)
        let socket = try PostgresLocation("postgresql://ana@/db?host=/var/run/postgresql", environment: [:])
        #expect(socket.socketDirectory == "/var/run/postgresql" && socket.tls == .disable)
        #expect(short.description == "postgresql://ana@localhost:5432/ana?schema=ckport")
        let scratch = Scratch()
        scratch.write("root.crt", "-----BEGIN CERTIFICATE-----\n")
        let root = scratch.url.appendingPathComponent("root.crt").path
        let verifying = try PostgresLocation(
            "postgresql://ana@db.example.net/db?sslmode=verify-full&sslrootcert=\(root)", environment: [:])
        #expect(verifying.tls == .verifyFull && verifying.rootCertificates == root)
        #expect(verifying.description.contains("sslmode=verify-full"))
        let allow = try PostgresLocation("postgresql://ana@db.example.net/db?sslmode=allow", environment: [:])
        #expect(allow.tls == .allow && allow.rootCertificates == nil)
    }

    @Test(
        "refused, each with why: a password in the URL (not repeated in the message), unknown or repeated parameters, a schema name that needs quoting, a bad sslmode"
    )
    func refused() {
        let cases: [(String, String)] = [
            ("postgresql://ana:s3cret@localhost/db", "a password does not go in the URL"),
            ("postgresql://ana@localhost/db?schema=a&schema=b", "'schema' is given twice"),
            ("postgresql://ana@localhost/db?sslkey=x", "unknown parameter 'sslkey'"),
            (
                "postgresql://ana@localhost/db?sslrootcert=/nonexistent/root.crt",
                "sslrootcert=/nonexistent/root.crt cannot be read"
            ),
            ("postgresql://ana@localhost/db?schema=Family", "not a plain name"),
            ("postgresql://ana@localhost/db?schema=a;drop", "not a plain name"),
            (
                "postgresql://ana@localhost/db?sslmode=verify",
                "sslmode=verify is not one of disable, allow, prefer, require, verify-ca, verify-full"
            ),
            ("postgresql://ana@localhost/db?host=relative/dir", "not a directory path"),
            ("mysql://ana@localhost/db", "not a URL of the form"),
        ]
        for (url, expected) in cases {
            #expect {
                _ = try PostgresLocation(url, environment: [:])
            } throws: { error in
                let text = "\(error)"
                return text.contains(expected) && !text.contains("s3cret")
                    && (error as? PostgresStoreError)?.category == .usage
            }
        }
    }

    @Test(
        "the password: PGPASSWORD first, then the password file's first matching line (wildcards, escaped colons); a file others can read is refused"
    )
    func password() throws {
        let scratch = Scratch()
        let location = try PostgresLocation("postgresql://ana@db.example.net:5433/mirror?schema=x", environment: [:])
        #expect(try location.password(environment: ["PGPASSWORD": "from-env", "HOME": scratch.url.path]) == "from-env")
        scratch.write(
            ".pgpass",
            """
            # host:port:database:user:password
            db.example.net:5432:mirror:ana:wrong-port
            db.example.net:5433:other:ana:wrong-database
            *:5433:mirror:ana:pass\\:with\\\\colon
            *:*:*:*:fallback
            """)
        let file = scratch.path(".pgpass")
        chmod(file, 0o600)
        #expect(try location.password(environment: ["HOME": scratch.url.path]) == "pass:with\\colon")
        let other = try PostgresLocation("postgresql://bo@elsewhere/db", environment: [:])
        #expect(try other.password(environment: ["PGPASSFILE": file]) == "fallback")
        chmod(file, 0o644)
        #expect {
            _ = try location.password(environment: ["HOME": scratch.url.path])
        } throws: { error in
            "\(error)".contains("can be read by others")
        }
        // No file at all: no password (the server may not ask for one); a file named but missing is an error.
        #expect(try location.password(environment: ["HOME": scratch.path("nowhere")]) == nil)
        let named = try PostgresLocation(
            "postgresql://ana@localhost/db?passfile=\(scratch.path("missing"))", environment: [:])
        #expect(throws: PostgresStoreError.self) { _ = try named.password(environment: [:]) }
    }
}

@Suite("COPY's text format, as the loader writes it")
struct COPYLineTests {
    /// COPY's text format, written here the slow way: each byte looked at.
    static func escaped(_ text: String) -> [UInt8] {
        text.utf8.flatMap { byte -> [UInt8] in
            switch byte {
            case 9: return Array("\\t".utf8)
            case 10: return Array("\\n".utf8)
            case 13: return Array("\\r".utf8)
            case UInt8(ascii: "\\"): return Array("\\\\".utf8)
            default: return [byte]
            }
        }
    }

    @Test(
        "a tab, newline, carriage return or backslash at any place of a text, before, inside or after a run of eight bytes, is escaped; other bytes below 14 and text without them pass as they are"
    )
    func escapes() {
        var checked = 0
        for special in ["\t", "\n", "\r", "\\", "\u{0B}", "\u{01}", "é", "]"] {
            for length in 0...19 {
                for position in 0...length {
                    var characters = Array(repeating: "a", count: length)
                    characters.insert(special, at: position)
                    let text = characters.joined()
                    var line = COPYLine(capacity: 1)
                    line.text(text)
                    let bytes = line.bytes()
                    #expect(bytes == Self.escaped(text), "\(text.debugDescription)")
                    checked += 1
                }
            }
        }
        #expect(checked == 8 * 210)
    }

    @Test(
        "integers at their edges and timestamps as timestamptz reads them (days met twice in a row, and again after another), a field each, tab between, newline at the end"
    )
    func numbersAndTimes() {
        var line = COPYLine(capacity: 1)
        for number in [0, 7, -7, 9, 10, 99, 100, 1_000_000, Int64.max, Int64.min, Int64.min + 1] {
            line.integer(number)
        }
        line.timestamp(0)
        line.timestamp(1_772_357_400_250)  // 2026-03-01 09:30:00.250
        line.timestamp(1_772_357_400_250 + 3_600_000 + 61_001)
        line.timestamp(-1)  // the last millisecond of 1969
        line.timestamp(1_772_357_400_250 - 86_400_000)
        line.timestamp(1_772_357_400_250)
        line.timestamp(PostgresLoad.textTimestamps.lowerBound)
        line.timestamp(PostgresLoad.textTimestamps.upperBound)
        line.null()
        line.end()
        let bytes = line.bytes()
        #expect(
            String(decoding: bytes, as: UTF8.self) == [
                "0", "7", "-7", "9", "10", "99", "100", "1000000", "9223372036854775807", "-9223372036854775808",
                "-9223372036854775807",
                "1970-01-01 00:00:00.000+00", "2026-03-01 09:30:00.250+00", "2026-03-01 10:31:01.251+00",
                "1969-12-31 23:59:59.999+00",
                "2026-02-28 09:30:00.250+00", "2026-03-01 09:30:00.250+00",
                "0001-01-01 00:00:00.000+00", "9999-12-31 23:59:59.999+00", "\\N",
            ].joined(separator: "\t") + "\n")
    }

    @Test("lines written one after another on one writer each begin afresh, with no tab before their first field")
    func lines() {
        var line = COPYLine(capacity: 1)
        line.integer(4)
        line.text("task-1")
        line.end()
        line.null()
        line.text("task-2")
        line.text("")
        line.text(String(repeating: "long text, ", count: 500))
        line.end()
        let bytes = line.bytes()
        #expect(
            String(decoding: bytes, as: UTF8.self) == "4\ttask-1\n\\N\ttask-2\t\t"
                + String(repeating: "long text, ", count: 500) + "\n")
    }
}

@Suite("COPY's binary format, as the loader writes it")
struct COPYBinaryTests {
    /// `value` in `bytes` big-endian bytes, written here the slow way.
    static func bigEndian(_ value: Int64, _ bytes: Int) -> [UInt8] {
        (0..<bytes).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    @Test(
        "the signature and an empty header, each row its column count, each column its length and bytes big-endian (-1 for NULL), times as microseconds from 2000, -1 after the last row"
    )
    func layout() {
        var rows = COPYBinary(capacity: 1)
        rows.integer(-2)
        rows.text("né")
        rows.null()
        rows.stamp(0, asText: true)
        rows.action(1)
        rows.end()
        rows.text("")
        rows.stamp(946_684_800_001, asText: true)
        rows.end()
        let bytes = rows.bytes()
        var expected: [UInt8] = Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00] + [0, 0, 0, 0] + [0, 0, 0, 0]
        expected += [0, 5]
        expected += Self.bigEndian(8, 4) + Self.bigEndian(-2, 8)
        expected += Self.bigEndian(3, 4) + Array("né".utf8)
        expected += Self.bigEndian(-1, 4)
        expected += Self.bigEndian(8, 4) + Self.bigEndian(-946_684_800_000_000, 8)
        expected += Self.bigEndian(2, 4) + Self.bigEndian(1, 2)
        expected += [0, 2]
        expected += Self.bigEndian(0, 4)
        expected += Self.bigEndian(8, 4) + Self.bigEndian(1000, 8)
        expected += [0xFF, 0xFF]
        #expect(bytes == expected)
    }

    @Test(
        "a value of another type than its field's (validation lets none through): the binary writer declines the row, so the loader sends the type's rows as text, which writes the value for the server to convert or refuse; a name alone in a reference field goes either way"
    )
    func mismatchGoesAsText() throws {
        let schema = try SchemaParser.parse(PostgresSchemaTests.notes)
        let fields = try #require(schema.recordType(named: "Note")).userFields
            .filter { $0.name != "amount" }
            .sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        #expect(COPYBinary.takes(fields))
        let columns = PostgresLayout.rowColumns(fields)
        let zone = ZoneID(scope: .private, zoneName: "Notes")
        // A name alone in a reference field (no action) has a binary form: the name, and NULL.
        let mismatches: [(field: String, value: FieldValue, text: String, binary: Bool)] = [
            ("title", .int64(5), "5", false),
            ("pinned", .string("7"), "7", false),
            ("rating", .int64(2), "2", false),
            ("due", .string("soon"), "soon", false),
            ("folder", .string("folder-9"), "folder-9", true),
        ]
        for mismatch in mismatches {
            let record = Record(
                id: RecordID(recordName: "n-1", zone: zone), recordType: "Note",
                fields: [
                    "body": .string("kept"), mismatch.field: mismatch.value,
                ])
            var binary = COPYBinary(capacity: 1)
            #expect(
                PostgresLoad.appendRow(
                    record, zone: 3, fields: fields, position: nil, timestampsAsText: true, to: &binary)
                    == mismatch.binary, "\(mismatch.field)")
            var line = COPYLine(capacity: 1)
            #expect(
                PostgresLoad.appendRow(
                    record, zone: 3, fields: fields, position: nil, timestampsAsText: true, to: &line))
            let row = String(decoding: line.bytes(), as: UTF8.self).dropLast().split(
                separator: "\t", omittingEmptySubsequences: false
            ).map(String.init)
            #expect(row.count == columns.count)
            let column = try #require(columns.firstIndex(of: mismatch.field))
            #expect(row[column] == mismatch.text, "\(mismatch.field): \(row)")
            #expect(row[try #require(columns.firstIndex(of: "body"))] == "kept")
            #expect(row[0] == "3" && row[1] == "n-1")
            if mismatch.field == "folder" { #expect(row[column + 1] == "\\N") }
        }
    }

    @Test("a type with a NUMBER field goes as text; every other field type has a binary form")
    func takes() throws {
        let schema = try SchemaParser.parse(PostgresSchemaTests.notes)
        let fields = try #require(schema.recordType(named: "Note")).userFields
        #expect(!COPYBinary.takes(fields))
        #expect(COPYBinary.takes(fields.filter { $0.name != "amount" }))
        #expect(COPYBinary.takes([FieldDefinition(name: "amounts", type: .list(.number))]))
    }
}

@Suite("PostgreSQL store: opening and creating", .enabled(if: TestServer.enabled))
struct PostgresStoreOpeningTests {
    @Test(
        "created once, then opened: the same identity, an empty schema, no changes; opening without create where there is no store says so"
    )
    func createThenOpen() throws {
        let location = try TestServer.location("open")
        defer { try? TestServer.drop(location) }
        #expect {
            _ = try PostgresStore(location, create: false)
        } throws: { error in
            "\(error)".contains("no ckport store in schema \(location.schema)")
        }
        let created = try PostgresStore(location, create: true)
        let opened = try PostgresStore(location, create: false)
        #expect(created.storeID == opened.storeID && created.storeID.count == 12)
        #expect(try opened.loadSchema() == Schema() && opened.changeToken().sequence == 0)
    }

    @Test("four processes' worth of connections creating the same store at once make one store")
    func concurrentCreation() throws {
        let location = try TestServer.location("race")
        defer { try? TestServer.drop(location) }
        let ids = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            if let store = try? PostgresStore(location, create: true) { ids.withLock { $0.append(store.storeID) } }
        }
        let seen = ids.withLock { $0 }
        #expect(seen.count == 4 && Set(seen).count == 1, "\(seen)")
    }

    @Test("a namespace that holds other tables is not taken over")
    func foreignNamespace() throws {
        let location = try TestServer.location("foreign")
        defer { try? TestServer.drop(location) }
        try PostgresLink(location).execute(
            "CREATE SCHEMA \(location.schema)", "CREATE TABLE \(location.schema).invoices (id int)")
        #expect {
            _ = try PostgresStore(location, create: true)
        } throws: { error in
            "\(error)".contains("holds tables (invoices) but no ckport store")
        }
        #expect(
            try PostgresLink(location).rows(
                "SELECT count(*)::text FROM pg_tables WHERE schemaname = \(location.schema)"
            ).first?[0] == "1")
    }

    @Test("a wrong password: an error naming the server and what it said, never the password")
    func wrongPassword() throws {
        let location = try TestServer.location("auth")
        var environment = TestServer.environment
        environment["PGPASSWORD"] = "not-the-password-42"
        #expect {
            _ = try PostgresStore(location, create: true, environment: environment)
        } throws: { error in
            let text = "\(error)"
            return text.contains("cannot connect to \(location)") && text.contains("password authentication failed")
                && !text.contains("not-the-password-42") && (error as? PostgresStoreError)?.category == .environment
        }
    }

    @Test(
        "a TCP connection asks for keepalives (probes after 60 s of silence, every 10 s, six unanswered end it), so a server host that vanishes is noticed"
    )
    func keepalive() throws {
        let location = try TestServer.location("keepalive")
        try #require(location.socketDirectory == nil, "the test server is reached over TCP")
        let link = try PostgresLink(location)
        _ = try link.rows("SELECT 1")
        // Every socket of this process whose peer is the server's port is a store connection
        // (this one, and those of tests running beside it): each must have the settings.
        var sockets: [[Int]] = []
        for fd in Int32(3)..<4096 {
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let got = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
            }
            guard got == 0 else { continue }
            let port: UInt16
            switch Int32(address.ss_family) {
            case AF_INET:
                port = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
                }
            case AF_INET6:
                port = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
                }
            default: continue
            }
            guard Int(port) == location.port else { continue }
            func option(_ level: Int32, _ name: Int32) -> Int {
                var value: Int32 = -1
                var size = socklen_t(MemoryLayout<Int32>.size)
                return getsockopt(fd, level, name, &value, &size) == 0 ? Int(value) : -1
            }
            sockets.append([
                option(SOL_SOCKET, SO_KEEPALIVE), option(Int32(IPPROTO_TCP), TCP_KEEPIDLE),
                option(Int32(IPPROTO_TCP), TCP_KEEPINTVL),
                option(Int32(IPPROTO_TCP), TCP_KEEPCNT),
            ])
        }
        #expect(!sockets.isEmpty, "no socket of this process reaches port \(location.port)")
        #expect(
            sockets.allSatisfy { $0 == [1, 60, 10, 6] }, "keepalive, idle, interval, probes per socket: \(sockets)")
        withExtendedLifetime(link) {}
    }
}

/// A value behind a lock, for tests that gather results from several threads.
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

@Suite("PostgreSQL store: schemas as tables", .enabled(if: TestServer.enabled))
struct PostgresSchemaTests {
    static let notes = """
        DEFINE SCHEMA
            RECORD TYPE Note (
                "___recordID" REFERENCE QUERYABLE,
                title         STRING QUERYABLE SORTABLE,
                body          STRING,
                pinned        INT64,
                rating        DOUBLE,
                due           TIMESTAMP SORTABLE,
                amount        NUMBER,
                photo         ASSET,
                place         LOCATION,
                tags          LIST<STRING> QUERYABLE,
                folder        REFERENCE,
                thumbnail     BYTES,
                GRANT READ TO "_world"
            );
        """

    @Test(
        "each record type a table with a typed column per field, a reference's action beside it, indexes where the SQLite store has them; the same schema again changes nothing"
    )
    func tables() throws {
        let location = try TestServer.location("schema")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        let change = try store.importSchema(try SchemaParser.parse(Self.notes))
        #expect(change.addedTypes.map(\.name) == ["Note"])
        let columns = try #require(try store.catalog()["Note"])
        #expect(columns["title"] == "text" && columns["pinned"] == "bigint" && columns["rating"] == "double precision")
        #expect(
            columns["due"] == "timestamp with time zone" && columns["amount"] == "numeric"
                && columns["thumbnail"] == "bytea")
        #expect(columns["photo"] == "jsonb" && columns["place"] == "jsonb" && columns["tags"] == "jsonb")
        #expect(columns["folder"] == "text" && columns["folder:action"] == "smallint")
        #expect(
            columns["___zone"] == "bigint" && columns["___recordID"] == "text"
                && columns["___modTime"] == "timestamp with time zone")
        #expect(columns["___parent"] == "text" && columns["___share"] == "text" && columns["___shareDetails"] == "text")
        #expect(columns.count == 12 + 11 + 1)
        let indexes = try store.indexes()
        #expect(
            indexes.isSuperset(of: [
                "Note.title", "Note.due", "Note.tags", "Note.folder", "_ck_pkey Note", "_ck_record_seq",
            ]))
        #expect(!indexes.contains("Note.body") && !indexes.contains("Note.pinned"))
        #expect(try SchemaPrinter.print(store.loadSchema()) == SchemaPrinter.print(SchemaParser.parse(Self.notes)))
        #expect(try store.importSchema(try SchemaParser.parse(Self.notes)).changesSchema == false)
    }

    @Test(
        "fields and types added, index options changed, a field without data removed; a dry run leaves the tables as they were"
    )
    func changes() throws {
        let location = try TestServer.location("change")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        try store.importSchema(try SchemaParser.parse(Self.notes))
        let next =
            Self.notes
            .replacingOccurrences(of: "        body          STRING,\n", with: "")
            .replacingOccurrences(of: "pinned        INT64,", with: "pinned        INT64 QUERYABLE,")
            .replacingOccurrences(
                of: "title         STRING QUERYABLE SORTABLE,",
                with: "title         STRING,\n            mood          STRING,")
            + "\n    RECORD TYPE Folder (\n        name STRING\n    );\n"
        let before = try store.catalog()
        let dry = try store.importSchema(try SchemaParser.parse(next), dryRun: true)
        #expect(dry.addedTypes.map(\.name) == ["Folder"] && dry.removedFields.map(\.field.name) == ["body"])
        #expect(
            try store.catalog() == before
                && SchemaPrinter.print(store.loadSchema()) == SchemaPrinter.print(SchemaParser.parse(Self.notes)))
        try store.importSchema(try SchemaParser.parse(next))
        let columns = try #require(try store.catalog()["Note"])
        let folder = try store.catalog()["Folder"]
        #expect(columns["body"] == nil && columns["mood"] == "text" && folder?["name"] == "text")
        let indexes = try store.indexes()
        #expect(indexes.contains("Note.pinned") && !indexes.contains("Note.title"))
    }

    @Test("a type or field that still holds data is not removed, and the refusal changes nothing")
    func refusedWithData() throws {
        let location = try TestServer.location("refuse")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        try store.importSchema(try SchemaParser.parse(Self.notes))
        let link = try PostgresLink(location)
        try link.execute(
            "INSERT INTO \(location.schema)._ck_zone (scope, \"zoneName\", \"ownerRecordName\") VALUES ('private', 'Notes', '__defaultOwner__')",
            "INSERT INTO \(location.schema).\"Note\" (\"___zone\", \"___recordID\", body) SELECT id, 'n-1', 'kept' FROM \(location.schema)._ck_zone"
        )
        let before = try store.catalog()
        let withoutBody = Self.notes.replacingOccurrences(of: "        body          STRING,\n", with: "")
        #expect {
            try store.importSchema(try SchemaParser.parse(withoutBody))
        } throws: { error in
            "\(error)".contains("field Note.body would go away, but 1 stored record holds a value for it")
        }
        #expect {
            try store.importSchema(try SchemaParser.parse("DEFINE SCHEMA\n"))
        } throws: { error in
            "\(error)".contains("record type Note would go away, but 1 record of it are stored")
        }
        #expect(
            try store.catalog() == before
                && SchemaPrinter.print(store.loadSchema()) == SchemaPrinter.print(SchemaParser.parse(Self.notes)))
    }

    @Test(
        "names longer than PostgreSQL's 63 bytes are shortened the same way every time, without collisions between two that share a beginning"
    )
    func longNames() throws {
        let location = try TestServer.location("long")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        let stem = String(repeating: "VeryLongRecordTypeName", count: 4)
        let text = """
            DEFINE SCHEMA
                RECORD TYPE \(stem)A (\(stem.lowercased())_one STRING QUERYABLE, \(stem.lowercased())_two STRING QUERYABLE);
                RECORD TYPE \(stem)B (name STRING);
            """
        try store.importSchema(try SchemaParser.parse(text))
        let catalog = try store.catalog()
        #expect(
            catalog.keys.filter { !$0.hasPrefix("_ck_") }.count == 2 && catalog.keys.allSatisfy { $0.utf8.count <= 63 })
        #expect(try store.indexes().filter { $0.contains("~") }.count >= 2)
        // The same name in every process and version: a store made earlier must find its tables.
        #expect(
            PostgresLayout.identifier(stem + "A")
                == "\"VeryLongRecordTypeNameVeryLongRecordTypeNameVeryLo~d8e83a882eac\"")
        #expect(catalog.keys.contains("VeryLongRecordTypeNameVeryLongRecordTypeNameVeryLo~d8e83a882eac"))
        #expect(PostgresLayout.identifier(stem + "A") != PostgresLayout.identifier(stem + "B"))
        // Records of the shortened table and columns go in through the loader's COPY and come back.
        let zone = ZoneID(scope: .private, zoneName: "Long")
        let records = (1...3).map { index in
            Record(
                id: RecordID(recordName: "long-\(index)", zone: zone), recordType: stem + "A",
                fields: [
                    stem.lowercased() + "_one": .string("one \(index)"),
                    stem.lowercased() + "_two": .string("two\t\(index)"),
                ])
        }
        #expect(try store.save(records) == 3)
        var read: [Record] = []
        try store.forEach(recordType: stem + "A") { read.append($0) }
        #expect(read == records)
    }
}

@Suite("PostgreSQL store: records through COPY", .enabled(if: TestServer.enabled))
struct PostgresRecordTests {
    @Test(
        "every sample app's records, every field type among them, saved through COPY and read back equal; saved again, not doubled and not renumbered; changed ones renumbered",
        arguments: SampleApp.allCases)
    func roundTrip(app: SampleApp) throws {
        let location = try TestServer.location("rt")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        try store.importSchema(app.schema)
        var generated: [Record] = []
        try app.generate(records: 400, seed: 11) { generated.append($0) }
        #expect(try store.save(generated) == generated.count)
        func readBack() throws -> [Record] {
            var read: [Record] = []
            for type in app.schema.recordTypes.map(\.name) { try store.forEach(recordType: type) { read.append($0) } }
            return read
        }
        let key = { (record: Record) in "\(record.recordType)/\(record.zone)/\(record.recordName)" }
        let read = try readBack()
        #expect(read.count == generated.count)
        let expected = Dictionary(generated.map { (key($0), $0) }, uniquingKeysWith: { $1 })
        for record in read where expected[key(record)] != record {
            Issue.record("\(key(record)) came back as \(record), was \(String(describing: expected[key(record)]))")
            break
        }
        let saved = try store.changeToken().sequence
        #expect(try saved > 0 && store.changes(after: 0, through: saved).count == generated.count)
        try store.save(generated)
        let again = try readBack().count
        #expect(again == generated.count)
        // The same records again change nothing, as in the SQLite store: no commit, no change.
        #expect(try store.changeToken().sequence == saved)
        // Every tenth changed: exactly those take new numbers.
        let changed = generated.enumerated().filter { $0.offset % 10 == 0 }.map { entry -> Record in
            var record = entry.element
            record.changeTag = "changed-\(entry.offset)"
            return record
        }
        try store.save(changed)
        let now = try store.changeToken().sequence
        #expect(try store.changes(after: saved, through: now).map(\.recordName) == changed.map(\.recordName))
    }

    @Test(
        "values at their edges: text with tabs, newlines and backslashes, -0.0, NaN and infinities, huge and tiny integers, empty bytes, timestamps before 1970"
    )
    func edges() throws {
        let location = try TestServer.location("edge")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        try store.importSchema(try SchemaParser.parse(PostgresSchemaTests.notes))
        let zone = ZoneID(scope: .private, zoneName: "Notes")
        var records: [Record] = []
        let doubles: [Double] = [-0.0, .nan, .infinity, -.infinity, 1e-300, 0.1 + 0.2]
        for (index, double) in doubles.enumerated() {
            records.append(
                Record(
                    id: RecordID(recordName: "edge-\(index)", zone: zone), recordType: "Note",
                    fields: [
                        "title": .string("tab\there\nnew line \\N back\\slash \u{1F951}"),
                        "pinned": .int64(index.isMultiple(of: 2) ? Int64.max : Int64.min),
                        "rating": .double(double),
                        "amount": index.isMultiple(of: 2) ? .int64(3) : .double(3.0),
                        "due": .timestamp(-86_400_123 * Int64(index + 1)),
                        "thumbnail": .bytes(index == 0 ? [] : [0, 9, 10, 92, 255]),
                        "folder": .reference(Reference(recordName: "folder-1", action: .deleteSelf)),
                        "tags": .list(.string, [.string("a\tb"), .string("")]),
                    ], created: RecordStamp(timestamp: 1, userRecordName: "_owner", deviceID: nil)))
        }
        try store.save(records)
        var read: [Record] = []
        try store.forEach(recordType: "Note") { read.append($0) }
        #expect(read == records)
        #expect(
            read.map {
                $0.fields["rating"].map { value -> UInt64 in
                    if case .double(let d) = value { return d.bitPattern }
                    return 0
                }
            } == doubles.map { $0.bitPattern })
    }

    /// Records whose values sit at the edges of what each field type's column takes.
    static func edgeRecords(zone: ZoneID) -> [Record] {
        let doubles: [Double] = [
            -0.0, 0.0, .nan, .infinity, -.infinity, 1e-300, 0.1 + 0.2, .greatestFiniteMagnitude,
            -.leastNonzeroMagnitude,
            -Double.nan, Double(nan: 0x1234, signaling: false),
        ]
        let times: [Int64] = [
            0, -1, 1, PostgresLoad.textTimestamps.lowerBound, PostgresLoad.textTimestamps.upperBound, 946_684_800_000,
            946_684_799_999, 1_772_357_400_250,
        ]
        let texts = [
            "tab\there\nnew line \\N back\\slash \u{1F951}", "", "\r", String(repeating: "é", count: 3000),
            "\u{7F}\u{01}",
        ]
        let actions: [ReferenceAction?] = [ReferenceAction.none, .deleteSelf, .validate, nil]
        return (0..<36).map { index in
            var fields: [String: FieldValue] = [
                "title": .string(texts[index % texts.count]),
                "pinned": .int64([Int64.max, Int64.min, 0, -1, 1][index % 5]),
                "rating": .double(doubles[index % doubles.count]),
                "due": .timestamp(times[index % times.count]),
                "thumbnail": .bytes(index == 0 ? [] : (0...255).map { UInt8(($0 + index) % 256) }),
                "tags": .list(.string, [.string("a\tb"), .string(""), .string("\"quoted\"")]),
                "readings": .list(.double, doubles.map { .double($0.isFinite ? $0 : 1) }),
                "times": .list(.timestamp, times.map { .timestamp($0) }),
                "place": .location(
                    Location(
                        latitude: -0.0, longitude: Double(index), horizontalAccuracy: -0.0, verticalAccuracy: nil,
                        altitude: 1e-7)),
                "photo": .asset(
                    Asset(
                        fileChecksum: "ck\(index)", size: Int64(index),
                        downloadURL: "https://example.com/\(index)?a=b\\c")),
            ]
            if let action = actions[index % actions.count] {
                fields["folder"] = .reference(Reference(recordName: "folder-\t\(index)", action: action))
            } else {
                fields["folder"] = .string("folder-by-name-\(index)")
            }
            if index % 7 == 3 {
                fields["body"] = nil
                fields["rating"] = nil
                fields["place"] = nil
            } else {
                fields["body"] = .string("body \(index)")
            }
            return Record(
                id: RecordID(recordName: "edge-\(index)", zone: zone), recordType: "Edge", fields: RecordFields(fields),
                created: RecordStamp(
                    timestamp: times[(index + 1) % times.count], userRecordName: "_owner",
                    deviceID: index % 2 == 0 ? nil : "device\n\(index)"),
                modified: index % 3 == 0
                    ? nil
                    : RecordStamp(
                        timestamp: times[(index + 2) % times.count], userRecordName: "_u\\\(index)", deviceID: nil))
        }
    }

    static let edgeSchema = """
        DEFINE SCHEMA
            RECORD TYPE Edge (
                "___recordID" REFERENCE QUERYABLE,
                title         STRING QUERYABLE SORTABLE,
                body          STRING,
                pinned        INT64,
                rating        DOUBLE,
                due           TIMESTAMP SORTABLE,
                photo         ASSET,
                place         LOCATION,
                tags          LIST<STRING> QUERYABLE,
                readings      LIST<DOUBLE>,
                times         LIST<TIMESTAMP>,
                folder        REFERENCE,
                thumbnail     BYTES
            );
        """

    @Test(
        "the same rows through COPY's binary format and its text format are stored alike, column for column: every sample app's types without a NUMBER field, and values at their edges",
        arguments: [nil] + SampleApp.allCases)
    func binaryAsText(app: SampleApp?) throws {
        let location = try TestServer.location("bin")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        let schema = try app?.schema ?? SchemaParser.parse(Self.edgeSchema)
        try store.importSchema(schema)
        var records: [Record] = []
        if let app {
            try app.generate(records: 300, seed: 5) { records.append($0) }
        } else {
            records = Self.edgeRecords(zone: ZoneID(scope: .private, zoneName: "Edges"))
        }
        let link = try PostgresLink(location)
        try link.execute("SET search_path TO \(location.schema), pg_catalog")
        var compared = 0
        for definition in schema.recordTypes {
            let fields = definition.userFields.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
            guard COPYBinary.takes(fields) else { continue }
            let group = records.enumerated().filter { $0.element.recordType == definition.name }
            guard !group.isEmpty else { continue }
            let columns = PostgresLayout.rowColumns(fields)
            let table = PostgresLayout(type: definition, schema: location.schema).table
            try link.execute("CREATE TABLE as_text (LIKE \(table))", "CREATE TABLE as_binary (LIKE \(table))")
            var text = COPYLine(capacity: 1)
            var binary = COPYBinary(capacity: 1)
            for (index, record) in group {
                #expect(PostgresLoad.timestampsHaveText(record))
                PostgresLoad.appendRow(
                    record, zone: Int64(index % 3 + 1), fields: fields, position: nil, timestampsAsText: true, to: &text
                )
                #expect(
                    PostgresLoad.appendRow(
                        record, zone: Int64(index % 3 + 1), fields: fields, position: nil, timestampsAsText: true,
                        to: &binary))
            }
            try link.copy(into: "as_text", columns: columns, text.bytes())
            try link.copy(into: "as_binary", columns: columns, binary: true, binary.bytes())
            let read = { (name: String) in
                try link.rows(
                    PostgresQuery(unsafeSQL: "SELECT t::text FROM \(name) t ORDER BY \"___zone\", \"___recordID\"")
                ).map { $0[0] ?? "" }
            }
            let (asText, asBinary) = (try read("as_text"), try read("as_binary"))
            #expect(asText.count == group.count)
            #expect(
                asBinary == asText,
                "\(definition.name): \(zip(asBinary, asText).first { $0 != $1 }.map { "\($0) against \($1)" } ?? "counts differ")"
            )
            // A double's text hides its bits (every NaN prints as NaN): compared as float8send gives them.
            for field in fields where field.type == .double {
                let bits = { (name: String) in
                    try link.rows(
                        PostgresQuery(
                            unsafeSQL:
                                "SELECT encode(float8send(\(PostgresLayout.identifier(field.name))), 'hex') FROM \(name) ORDER BY \"___zone\", \"___recordID\""
                        )
                    ).map { $0[0] ?? "" }
                }
                let (textBits, binaryBits) = (try bits("as_text"), try bits("as_binary"))
                #expect(
                    textBits.count == group.count && binaryBits == textBits,
                    "\(definition.name).\(field.name): \(zip(binaryBits, textBits).first { $0 != $1 }.map { "\($0) against \($1)" } ?? "counts differ")"
                )
            }
            compared += group.count
            try link.execute("DROP TABLE as_text", "DROP TABLE as_binary")
        }
        #expect(compared >= (app == nil ? 36 : 100))
    }

    @Test(
        "-0.0 inside a list of doubles and a location comes back as -0.0, bit for bit, beside 0.0, -0.05 and a plain number"
    )
    func negativeZeroInJSON() throws {
        let location = try TestServer.location("zeros")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        try store.importSchema(
            try SchemaParser.parse(
                """
                DEFINE SCHEMA
                    RECORD TYPE Trip (
                        "___recordID" REFERENCE QUERYABLE,
                        readings      LIST<DOUBLE> QUERYABLE,
                        place         LOCATION,
                        stops         LIST<LOCATION>,
                        GRANT READ TO "_world"
                    );
                """))
        let zone = ZoneID(scope: .private, zoneName: "Trips")
        let readings: [Double] = [-0.0, 0.0, -0.05, 1.5, -0.0]
        let place = Location(
            latitude: -0.0, longitude: 0.0, horizontalAccuracy: -0.0, verticalAccuracy: nil, altitude: -0.0)
        let records = [
            Record(
                id: RecordID(recordName: "trip-1", zone: zone), recordType: "Trip",
                fields: [
                    "readings": .list(.double, readings.map { .double($0) }),
                    "place": .location(place),
                    "stops": .list(.location, [.location(Location(latitude: 2, longitude: -0.0)), .location(place)]),
                ]),
            Record(
                id: RecordID(recordName: "trip-2", zone: zone), recordType: "Trip",
                fields: [
                    "readings": .list(.double, [.double(2.5)]),
                    "place": .location(Location(latitude: 1, longitude: -0.5)),
                ]),
        ]
        try store.save(records)
        var read: [Record] = []
        try store.forEach(recordType: "Trip") { read.append($0) }
        #expect(read.count == 2)
        guard read.count == 2, case .list(_, let elements)? = read[0].fields["readings"],
            case .location(let back)? = read[0].fields["place"]
        else {
            Issue.record("trip-1 came back without its readings or place: \(read)")
            return
        }
        #expect(
            elements.map { value -> UInt64 in
                if case .double(let d) = value { return d.bitPattern }
                return 0
            } == readings.map(\.bitPattern))
        #expect(back.latitude.bitPattern == (-0.0).bitPattern && back.longitude.bitPattern == (0.0).bitPattern)
        #expect(
            back.horizontalAccuracy?.bitPattern == (-0.0).bitPattern && back.altitude?.bitPattern == (-0.0).bitPattern
                && back.verticalAccuracy == nil)
        if case .list(_, let stops)? = read[0].fields["stops"], case .location(let first)? = stops.first {
            #expect(first.longitude.bitPattern == (-0.0).bitPattern)
        } else {
            Issue.record("trip-1's stops came back as \(String(describing: read[0].fields["stops"]))")
        }
        #expect(read == records)
        // CONTAINS 0 finds a list that holds -0.0 (0 == -0.0), as on SQLite; CONTAINS 2.5 the other.
        for (predicate, expected) in [
            ("readings CONTAINS 0", ["trip-1"]), ("readings CONTAINS -0.0", ["trip-1"]),
            ("readings CONTAINS 2.5", ["trip-2"]), ("readings CONTAINS 7", []),
        ] {
            var query = RecordQuery(recordTypes: ["Trip"])
            query.predicate = try RecordPredicate.parse(predicate)
            let names = try store.read { session in
                var names: [String] = []
                try session.forEach(query) { names.append($0.recordName) }
                return names
            }
            #expect(names == expected, "\(predicate)")
        }
    }

    @Test("a record of a type the schema does not define: nothing of the batch is saved")
    func unknownType() throws {
        let location = try TestServer.location("unknown")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        try store.importSchema(try SchemaParser.parse(PostgresSchemaTests.notes))
        let zone = ZoneID(scope: .private, zoneName: "Notes")
        let good = Record(
            id: RecordID(recordName: "ok", zone: zone), recordType: "Note", fields: ["title": .string("fine")])
        let stray = Record(id: RecordID(recordName: "stray", zone: zone), recordType: "Folder")
        #expect {
            try store.save([good, stray])
        } throws: { error in
            "\(error)".contains("record stray is of type Folder")
        }
        var read: [Record] = []
        try store.forEach(recordType: "Note") { read.append($0) }
        #expect(read.isEmpty)
        #expect(try store.changeToken().sequence == 0)
    }
}

@Suite("PostgreSQL store: reading in batches", .enabled(if: TestServer.enabled))
struct PostgresCursorTests {
    @Test("rows come a batch at a time through a cursor, all of them, in order, the last batch short or empty")
    func batches() throws {
        let location = try TestServer.location("cursor")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        for (count, batch) in [(25, 7), (21, 7), (0, 7), (3, 1000)] {
            var seen: [String?] = []
            try store.read { session in
                try session.forEachRow(
                    PostgresQuery(
                        unsafeSQL: "SELECT g.n::text AS t FROM generate_series(1, \(count)) AS g(n) ORDER BY g.n"),
                    batch: batch
                ) { seen.append($0[0]) }
            }
            #expect(seen == (0..<count).map { String($0 + 1) }, "\(count) rows in batches of \(batch)")
        }
        // A failing body ends the read and leaves the store usable.
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try store.read { session in
                try session.forEachRow(
                    PostgresQuery(unsafeSQL: "SELECT n::text FROM generate_series(1, 10) AS n"), batch: 3
                ) { _ in throw Stop() }
            }
        }
        #expect(try store.read { try $0.link.rows("SELECT 'still here'::text").first?[0] } == "still here")
    }
}

@Suite("PostgreSQL store: the predicate language on random input", .enabled(if: TestServer.enabled))
struct PostgresPredicateTests {
    @Test(
        "the PostgreSQL store selects exactly what the in-memory evaluation keeps, for random predicates over random records (as the SQLite store does)"
    )
    func storeAgreesWithEvaluation() throws {
        let location = try TestServer.location("predicates")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        try store.importSchema(try SchemaParser.parse(PredicateData.schemaText))
        var selecting = 0
        for seed in UInt64(1)...12 {
            var dice = SeededRandom(state: seed &* 0x9E37_79B9_7F4A_7C15)
            let records = dice.predicateRecords()
            // Each round replaces the last round's records.
            try store.write(dryRun: false) { session in
                _ = try session.delete(matching: RecordQuery(recordTypes: ["P"]))
            }
            _ = try store.importRecords(
                [ArrayRecordSource(records)], schema: nil, options: ImportOptions(), hooks: ImportHooks())
            let result = try PredicateData.check(store, records: records, dice: &dice, count: 25)
            #expect(result.problems.isEmpty, "seed \(seed): \(result.problems.prefix(3).joined(separator: "; "))")
            selecting += result.selecting
        }
        #expect(selecting > 100, "\(selecting) of 300 predicates selected a record")
    }
}

@Suite("PostgreSQL store: writers side by side", .enabled(if: TestServer.enabled))
struct PostgresConcurrencyTests {
    func notes(_ zone: String, _ count: Int) -> [Record] {
        (0..<count).map { n in
            Record(
                id: RecordID(recordName: "\(zone)-\(n)", zone: ZoneID(scope: .private, zoneName: zone)),
                recordType: "Note", fields: ["title": .string("\(zone) \(n)")])
        }
    }

    @Test(
        "rows a load keeps back to send with the next batch's are never lost: two loads of whole batches into new zones in one transaction, then a third that reads the registry, all stored and numbered in order"
    )
    func heldBackRows() throws {
        let location = try TestServer.location("heldback")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        try store.importSchema(try SchemaParser.parse(PostgresSchemaTests.notes))
        let start = try store.changeToken().sequence
        let batch = PostgresLoader.batchSize
        let (a, b, c) = (notes("A", batch), notes("B", 2 * batch), notes("C", batch))
        let saved: [Int] = try store.write { session in
            // Whole batches, no look-up: each load's rows wait for more.
            let first = try session.save(a)
            let second = try session.save(b)
            // A name of zone A, written above: this load reads the registry first.
            let third = try session.save(
                c + [Record(id: a[0].id, recordType: "Note", fields: ["title": .string("A again")])])
            return [first, second, third]
        }
        #expect(saved == [batch, 2 * batch, batch + 1])
        let feed = try store.changes(after: start, through: try store.changeToken().sequence)
        let names = feed.map(\.recordName)
        #expect(names.count == 4 * batch && Set(names).count == 4 * batch, "\(names.count)")
        // In the order saved, the record saved twice where it changed last.
        #expect(
            Array(names.prefix(3)) == ["A-1", "A-2", "A-3"] && names.last == "A-0",
            "\(names.prefix(3)) \(names.suffix(1))")
        #expect(names[batch - 1] == "B-0" && names[3 * batch - 1] == "C-0")
        #expect(try store.record(a[0].id)?.fields["title"] == .string("A again"))
        // Note has a NUMBER field, so its rows go in COPY's text format and the change log's in
        // its binary one: both kinds of COPY were sent in parts. The last rows of each part:
        for record in [a[batch - 1], b[batch - 1], b[2 * batch - 1], c[batch - 1]] {
            #expect(try store.record(record.id)?.fields["title"] == record.fields["title"], "\(record.recordName)")
        }
    }

    @Test(
        "a writer into another zone finishes while the first is still open (no store-wide lock); a feed read meanwhile gets what committed, the next one the rest, each record once, in commit order"
    )
    func sideBySide() throws {
        let location = try TestServer.location("writers")
        defer { try? TestServer.drop(location) }
        let first = try PostgresStore(location, create: true)
        try first.importSchema(try SchemaParser.parse(PostgresSchemaTests.notes))
        let second = try PostgresStore(location, create: false)
        let reader = try PostgresStore(location, create: false)
        let start = try reader.changeToken().sequence
        let firstOpen = DispatchSemaphore(value: 0)
        let secondDone = DispatchSemaphore(value: 0)
        let firstDone = DispatchSemaphore(value: 0)
        let failure = Locked<String?>(nil)
        let recordsA = notes("A", 60)
        let recordsB = notes("B", 40)
        DispatchQueue.global().async {
            do {
                _ = try first.save(
                    recordsA,
                    whileOpen: {
                        firstOpen.signal()
                        _ = secondDone.wait(timeout: .now() + 30)
                    })
            } catch {
                failure.withLock { $0 = "\(error)" }
                firstOpen.signal()
            }
            firstDone.signal()
        }
        firstOpen.wait()
        try second.save(recordsB)
        let meanwhile = try reader.changeToken().sequence
        let early = try reader.changes(after: start, through: meanwhile)
        secondDone.signal()
        firstDone.wait()
        #expect(failure.withLock { $0 } == nil)
        // Had the second writer waited for the first, the first (held open until the second
        // is done, or 30 s) would have committed before it, and its records would show below.
        // The second writer committed first: its records, and only those, whatever else runs on
        // the server.
        #expect(
            meanwhile == start + 1 && Set(early.map(\.recordName)) == Set(recordsB.map(\.recordName))
                && early.count == 40,
            "a feed read while the first writer was open got \(early.count) changes")
        let end = try reader.changeToken().sequence
        let late = try reader.changes(after: meanwhile, through: end)
        #expect(
            end == meanwhile + 1 && late.count == 60 && Set(late.map(\.recordName)) == Set(recordsA.map(\.recordName)))
        #expect(try reader.changes(after: end, through: end + 10).isEmpty)
        var stored = 0
        try reader.forEach(recordType: "Note") { _ in stored += 1 }
        let numbered = try reader.changes(after: 0, through: end).count
        #expect(stored == 100 && numbered == 100)
    }

    @Test(
        "a dry run registers no zone: a writer registering the same new zones while the dry run is open neither waits for it nor meets its numbers, and the dry run leaves the registry as it was"
    )
    func zonesBesideDryRun() throws {
        let location = try TestServer.location("zonewait")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        let writer = try PostgresStore(location, create: false)
        let owner = ZoneID.defaultZone.ownerRecordName
        let zoneA = ZoneID(scope: .private, zoneName: "a-chores", ownerRecordName: owner)
        let zoneB = ZoneID(scope: .private, zoneName: "b-calendar", ownerRecordName: owner)
        let zoneC = ZoneID(scope: .private, zoneName: "c-notes", ownerRecordName: owner)
        let dryHoldsB = DispatchSemaphore(value: 0)
        let writerDone = DispatchSemaphore(value: 0)
        let writerFailure = Locked<String?>(nil)
        let writerNumbers = Locked<[Int64?]>([])
        DispatchQueue.global().async {
            _ = dryHoldsB.wait(timeout: .now() + 30)
            do {
                let numbers = try writer.write { session -> [Int64?] in
                    try session.numberZones([zoneA, zoneB])
                    return [try session.zoneNumber(zoneA), try session.zoneNumber(zoneB)]
                }
                writerNumbers.withLock { $0 = numbers }
            } catch {
                writerFailure.withLock { $0 = "\(error)" }
            }
            writerDone.signal()
        }
        var writerFinishedMeanwhile = false
        let dry = try store.write(dryRun: true) { session -> (b: Int64?, a: Int64?, c: Int64?, new: Set<Int64>) in
            // Zone B, new to the store, numbered inside the dry run; the writer then registers
            // A and B while the dry run stays open.
            let b = try session.zoneNumber(zoneB, create: true)
            dryHoldsB.signal()
            writerFinishedMeanwhile = writerDone.wait(timeout: .now() + 10) == .success
            // A, which the writer registered meanwhile, is the writer's; C is new to both.
            return (
                b, try session.zoneNumber(zoneA, create: true), try session.zoneNumber(zoneC, create: true),
                session.zonesNewHere
            )
        }
        if !writerFinishedMeanwhile { _ = writerDone.wait(timeout: .now() + 60) }
        #expect(writerFinishedMeanwhile, "the writer waited for the dry run")
        #expect(writerFailure.withLock { $0 } == nil)
        let written = writerNumbers.withLock { $0 }
        #expect(written.count == 2 && written.allSatisfy { $0 != nil }, "\(written)")
        #expect(
            dry.a != nil && dry.a == written.first ?? nil,
            "the dry run's A \(String(describing: dry.a)) against the writer's \(written)")
        // The dry run's own numbers are its alone: none is a registered zone's.
        let b = try #require(dry.b)
        let c = try #require(dry.c)
        #expect(Set([b, c]).isDisjoint(with: written.compactMap { $0 }) && b != c)
        #expect(dry.new.contains(b) && dry.new.contains(c) && !dry.new.contains(dry.a ?? -1))
        // The registry holds the writer's two zones and nothing of the dry run.
        let rows = try PostgresLink(location).rows(
            PostgresQuery(unsafeSQL: "SELECT \"zoneName\" FROM \(location.schema)._ck_zone ORDER BY 1"))
        #expect(rows.map { $0[0] } == ["a-chores", "b-calendar"])
    }
}

@Suite("PostgreSQL store: deletes", .enabled(if: TestServer.enabled))
struct PostgresDeleteTests {
    @Test(
        "a household deleted: DELETE_SELF takes its members, areas, tasks and chores along, exactly as the SQLite store does, and each leaves a tombstone in the change feed"
    )
    func cascadeLikeSQLite() throws {
        let app = SampleApp.familyTodo
        var records: [Record] = []
        try app.generate(records: 600, seed: 5) { records.append($0) }
        let household = try #require(records.first { $0.recordType == "Household" })
        let scratch = Scratch()
        let sqlite = try scratch.store(schema: app.schemaText, records: records)
        let expected = try sqlite.write { try $0.delete([household.id]) }
        #expect(expected.count > 10)

        let location = try TestServer.location("delete")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        try store.importSchema(app.schema)
        try store.save(records)
        let before = try store.changeToken().sequence
        let deleted = try store.delete([household.id])
        func key(_ gone: DeletedRecord) -> String {
            "\(gone.recordType) \(gone.id.recordName) ← \(gone.cause?.recordName ?? "-") \(gone.field ?? "-")"
        }
        #expect(Set(deleted.map(key)) == Set(expected.map(key)))
        var left = 0
        for type in app.schema.recordTypes.map(\.name) { try store.forEach(recordType: type) { _ in left += 1 } }
        #expect(left == records.count - deleted.count)
        let feed = try store.changes(after: before, through: try store.changeToken().sequence)
        #expect(feed.count == deleted.count && feed.allSatisfy(\.deleted))
        #expect(Set(feed.map(\.recordName)) == Set(deleted.map(\.id.recordName)))
        // Counts per zone and type, records and tombstones, as the SQLite store counts them.
        let sqliteStats = try sqlite.read { try $0.stats() }
        let postgresStats = try store.stats()
        #expect(
            postgresStats.entries == sqliteStats.entries && postgresStats.recordTypeCount == sqliteStats.recordTypeCount
        )
        #expect(postgresStats.token.storeID == store.storeID && postgresStats.fileSize > 0)
        // One record by its ID: there while live, gone once deleted.
        let task = try #require(records.first { $0.recordType == "Task" && !Set(deleted.map(\.id)).contains($0.id) })
        #expect(try store.record(task.id) == task)
        #expect(try store.record(household.id) == nil)
        #expect(try store.record(RecordID(recordName: "nobody", zone: household.zone)) == nil)
        // Saved again, a deleted record lives again.
        try store.save([household])
        var households = 0
        try store.forEach(recordType: "Household") { if $0.id == household.id { households += 1 } }
        #expect(households == 1)
    }

    @Test(
        "refused with nothing deleted, in the SQLite store's words: a record that is not there, a VALIDATE reference from a record that stays"
    )
    func refusals() throws {
        let schema = """
            DEFINE SCHEMA
                RECORD TYPE Folder (name STRING);
                RECORD TYPE Note (title STRING, folder REFERENCE, links LIST<REFERENCE>);
            """
        let zone = ZoneID(scope: .private, zoneName: "Notes")
        let records = [
            Record(id: RecordID(recordName: "f", zone: zone), recordType: "Folder", fields: ["name": .string("Inbox")]),
            Record(
                id: RecordID(recordName: "n", zone: zone), recordType: "Note",
                fields: [
                    "folder": .reference(Reference(recordName: "f", action: .none)),
                    "links": .list(.reference, [.reference(Reference(recordName: "f", action: .validate))]),
                ]),
        ]
        let scratch = Scratch()
        let sqlite = try scratch.store(schema: schema, records: records)
        let location = try TestServer.location("validate")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        try store.importSchema(try SchemaParser.parse(schema))
        try store.save(records)
        for ids in [[RecordID(recordName: "f", zone: zone)], [RecordID(recordName: "nope", zone: zone)]] {
            var sqliteWords = ""
            do { _ = try sqlite.write { try $0.delete(ids) } } catch { sqliteWords = "\(error)" }
            #expect(!sqliteWords.isEmpty)
            #expect {
                try store.delete(ids)
            } throws: { error in
                "\(error)" == sqliteWords
            }
        }
        var notes = 0
        try store.forEach(recordType: "Note") { _ in notes += 1 }
        var folders = 0
        try store.forEach(recordType: "Folder") { _ in folders += 1 }
        #expect(notes == 1 && folders == 1)
        // Deleting the note and the folder together is allowed: the VALIDATE reference goes too.
        #expect(
            try store.delete([RecordID(recordName: "f", zone: zone), RecordID(recordName: "n", zone: zone)]).count == 2)
    }
}

@Suite("PostgreSQL store: a pulled page and its token", .enabled(if: TestServer.enabled))
struct PostgresSyncTests {
    @Test(
        "records and the zone's sync token commit together; a failure after both leaves neither; nil forgets the token; a dry run keeps nothing"
    )
    func together() throws {
        let location = try TestServer.location("sync")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        try store.importSchema(try SchemaParser.parse(PostgresSchemaTests.notes))
        let zone = ZoneID(scope: .private, zoneName: "Notes")
        let source = "iCloud.com.example.Notes/production/private"
        func page(_ from: Int) -> [Record] {
            (from..<from + 5).map {
                Record(
                    id: RecordID(recordName: "n-\($0)", zone: zone), recordType: "Note",
                    fields: ["title": .string("Note \($0)")])
            }
        }
        func held() throws -> Int {
            var count = 0
            try store.forEach(recordType: "Note") { _ in count += 1 }
            return count
        }
        try store.write { session in
            try session.save(page(0))
            try session.saveSyncToken("tok-1", source: source, zone: zone)
        }
        #expect(try store.syncStates(source: source).map(\.token) == ["tok-1"] && held() == 5)
        struct Cut: Error {}
        #expect(throws: Cut.self) {
            try store.write { session in
                try session.save(page(5))
                try session.saveSyncToken("tok-2", source: source, zone: zone)
                throw Cut()
            }
        }
        #expect(try store.syncStates(source: source).map(\.token) == ["tok-1"] && held() == 5)
        try store.write(dryRun: true) { session in
            try session.save(page(5))
            try session.saveSyncToken("tok-2", source: source, zone: zone)
        }
        #expect(try store.syncStates(source: source).map(\.token) == ["tok-1"] && held() == 5)
        try store.write { try $0.saveSyncToken(nil, source: source, zone: zone) }
        #expect(try store.syncStates(source: source).isEmpty && store.syncStates(source: "elsewhere").isEmpty)
    }
}

@Suite("PostgreSQL store: asset files", .enabled(if: TestServer.enabled))
struct PostgresAssetTests {
    @Test(
        "an asset of several megabytes stored once under its SHA-256 and read back whole, a megabyte at a time; a wrong checksum or size refused; an empty file kept"
    )
    func assets() throws {
        let location = try TestServer.location("assets")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        let scratch = Scratch()
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<(2 * (1 << 20) + 12_345)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let file = scratch.path("photo.heic")
        #expect(FileManager.default.createFile(atPath: file, contents: Data(bytes)))
        let sha = SHA256.hash(data: Data(bytes)).map { String(format: "%02x", $0) }.joined()
        let first = try store.write {
            try $0.putAsset(file: file, expectedSHA256: sha, expectedSize: Int64(bytes.count))
        }
        #expect(first.sha256 == sha && first.size == Int64(bytes.count) && first.added)
        #expect(try store.write { try $0.putAsset(file: file) }.added == false)
        #expect(try store.assetSize(sha) == Int64(bytes.count))
        var read: [UInt8] = []
        var pieces = 0
        #expect(
            try store.readAsset(sha) {
                read.append(contentsOf: $0)
                pieces += 1
            })
        #expect(read == bytes && pieces == 3)
        #expect(try store.readAsset(String(repeating: "0", count: 64)) { _ in } == false)
        #expect(throws: AssetError.self) {
            try store.write { try $0.putAsset(file: file, expectedSHA256: String(repeating: "a", count: 64)) }
        }
        #expect(throws: AssetError.self) { try store.write { try $0.putAsset(file: file, expectedSize: 5) } }
        let empty = scratch.path("empty.bin")
        #expect(FileManager.default.createFile(atPath: empty, contents: Data()))
        let kept = try store.write { try $0.putAsset(file: empty) }
        #expect(kept.size == 0 && kept.added)
        var emptyRead = 0
        #expect(try store.readAsset(kept.sha256) { emptyRead += $0.count } && emptyRead == 0)
    }
}

@Suite("PostgreSQL store: migration history", .enabled(if: TestServer.enabled))
struct PostgresHistoryTests {
    @Test(
        "entries kept per set and version, oldest first, the same version replaced, filtered by set; one that rolls back is not kept"
    )
    func history() throws {
        let location = try TestServer.location("history")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        func entry(_ set: String, _ version: Int, changed: Int) -> MigrationHistoryEntry {
            MigrationHistoryEntry(
                set: set, version: version, description: "step \(version)", file: "\(version)-step.yaml",
                checksum: String(repeating: "c", count: 64),
                appliedAt: 1_764_000_000_000 + Int64(version), durationMilliseconds: 12, recordsChanged: changed)
        }
        try store.write { session in
            try session.recordMigration(entry("notes", 2, changed: 5))
            try session.recordMigration(entry("notes", 1, changed: 3))
            try session.recordMigration(entry("todo", 1, changed: 0))
        }
        try store.write { try $0.recordMigration(entry("notes", 2, changed: 7)) }
        struct Cut: Error {}
        #expect(throws: Cut.self) {
            try store.write { session in
                try session.recordMigration(entry("notes", 3, changed: 1))
                throw Cut()
            }
        }
        #expect(
            try store.migrationHistory() == [
                entry("notes", 1, changed: 3), entry("notes", 2, changed: 7), entry("todo", 1, changed: 0),
            ])
        #expect(try store.migrationHistory(set: "todo") == [entry("todo", 1, changed: 0)])
        #expect(try store.migrationHistory(set: "none").isEmpty)
    }
}

@Suite("PostgreSQL store: saving as the SQLite store saves", .enabled(if: TestServer.enabled))
struct PostgresSaveRulesTests {
    static let schema = """
        DEFINE SCHEMA
            RECORD TYPE Folder (name STRING);
            RECORD TYPE Note (title STRING, body STRING);
        """
    let zone = ZoneID(scope: .private, zoneName: "Notes")

    func note(
        _ name: String, _ fields: RecordFields, tag: String? = nil, created: RecordStamp? = nil,
        modified: RecordStamp? = nil
    ) -> Record {
        Record(
            id: RecordID(recordName: name, zone: zone), recordType: "Note", fields: fields, changeTag: tag,
            created: created, modified: modified)
    }

    @Test(
        "a saved record replaces the stored one as the SQLite store's replace does: fields as given, the change tag and the stamps' parts it does not say kept"
    )
    func replaceLikeSQLite() throws {
        let first = note(
            "n", ["title": .string("One"), "body": .string("text")], tag: "t1",
            created: RecordStamp(timestamp: 10, userRecordName: "_ana", deviceID: "iPhone"),
            modified: RecordStamp(timestamp: 20, userRecordName: "_ana", deviceID: "iPhone"))
        let second = note(
            "n", ["title": .string("Two")], modified: RecordStamp(timestamp: 30, userRecordName: nil, deviceID: nil))
        let scratch = Scratch()
        let sqlite = try scratch.store(Self.schema)
        try sqlite.write { session in
            try session.save(first, mode: .replace)
            try session.save(second, mode: .replace)
        }
        let location = try TestServer.location("replace")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        try store.importSchema(try SchemaParser.parse(Self.schema))
        try store.save([first])
        try store.save([second])
        let expected = try sqlite.read { try $0.record(first.id) }
        #expect(try store.record(first.id) == expected)
        #expect(
            expected?.changeTag == "t1" && expected?.modified?.userRecordName == "_ana"
                && expected?.fields["body"] == nil)
        // The same name twice in one batch: the last one is what stays.
        try store.save([note("d", ["title": .string("first")]), note("d", ["title": .string("last")])])
        #expect(try store.record(RecordID(recordName: "d", zone: zone))?.fields["title"] == .string("last"))
    }

    @Test(
        "a record name another type holds, in the store or earlier in the batch, is refused in the SQLite store's words, and nothing of the batch is saved"
    )
    func nameHeldByAnotherType() throws {
        let scratch = Scratch()
        let sqlite = try scratch.store(Self.schema)
        let folder = Record(
            id: RecordID(recordName: "x", zone: zone), recordType: "Folder", fields: ["name": .string("Inbox")])
        _ = try sqlite.write { try $0.save(folder, mode: .replace) }
        var words = ""
        do { _ = try sqlite.write { try $0.save(note("x", ["title": .string("clash")]), mode: .replace) } } catch {
            words = "\(error)"
        }
        #expect(words.contains("already used"))
        let location = try TestServer.location("clash")
        defer { try? TestServer.drop(location) }
        let store = try PostgresStore(location, create: true)
        try store.importSchema(try SchemaParser.parse(Self.schema))
        try store.save([folder])
        #expect {
            try store.save([note("fine", ["title": .string("ok")]), note("x", ["title": .string("clash")])])
        } throws: { error in
            "\(error)" == words
        }
        #expect {
            try store.save([
                note("y", ["title": .string("a note")]),
                Record(id: RecordID(recordName: "y", zone: zone), recordType: "Folder"),
            ])
        } throws: { error in
            "\(error)".contains("record name 'y' is already used in zone Notes by a record of type Note")
        }
        var notes = 0
        try store.forEach(recordType: "Note") { _ in notes += 1 }
        let kept = try store.record(folder.id)
        #expect(notes == 0 && kept == folder)
    }
}

/// The PostgreSQL store against the same checks as the SQLite store.
@Suite("store conformance: PostgreSQL", .enabled(if: TestServer.enabled))
struct PostgresConformanceTests {
    @Test(arguments: StoreConformance<PostgresStore>.Part.allCases)
    func part(_ part: StoreConformance<PostgresStore>.Part) throws {
        var created: [PostgresLocation] = []
        defer { for location in created { try? TestServer.drop(location) } }
        let conformance = StoreConformance<PostgresStore>(
            create: { tag in
                let location = try TestServer.location("c_" + tag.filter(\.isLetter).lowercased())
                created.append(location)
                return try PostgresStore(location, create: true)
            },
            open: { try PostgresStore(try PostgresLocation($0), create: false) })
        try conformance.run(part)
    }
}
