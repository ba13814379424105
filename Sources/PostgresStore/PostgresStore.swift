import Foundation
import PostgresNIO
import Records
import StoreCore
import Synchronization

/// A ckport store in a PostgreSQL schema (namespace): the store for data sets and teams that
/// outgrow one machine.
///
/// The namespace holds `_ck_meta` (the store's format, identity, schema text and change
/// sequence) beside the store's tables; anything else in it makes it not a ckport store, and
/// ckport leaves it alone. Creating a store takes a transaction-scoped advisory lock on the
/// namespace's name, so two processes creating the same store at once make one store.
public final class PostgresStore: Sendable {
    /// The layout of the namespace this ckport writes and reads. Format 2 added the `parent`,
    /// `share` and share-details system columns, format 3 the connector state (feeds, CalDAV
    /// publications and pulls); an older store is upgraded in place, in one transaction, when it
    /// is opened (``upgradedFrom``).
    public static let format = 3
    /// The format the store had before opening it upgraded it, nil when it needed no upgrade.
    public let upgradedFrom: Int?

    /// Where the store is: the server, database and namespace.
    public let server: PostgresLocation
    /// The store's URL, without a password (it never holds one), for messages.
    public var location: String { server.description }
    /// The store's identity, the first part of its change tokens.
    public let storeID: String
    /// Connections, one lent to each transaction.
    let pool: PostgresPool
    /// How long a transaction waits for a lock another holds (a schema change under way, a
    /// session left open on the server) before it fails, in seconds: `--wait`.
    public let waitSeconds: Double

    /// Opens the store at `location`; with `create`, makes it first when the namespace holds
    /// no store yet. A store of an older format is upgraded in place, unless `upgrade` is
    /// false: then it is refused, for a caller that promises to change nothing.
    public init(
        _ location: PostgresLocation, create: Bool, upgrade: Bool = true, waitSeconds: Double = 300,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        server = location
        self.waitSeconds = waitSeconds
        pool = PostgresPool(location, waitSeconds: waitSeconds, environment: environment)
        let schema = location.schema
        let quoted = location.quotedSchema
        var upgraded: Int?
        storeID = try pool.withLink { link in
            try link.transaction {
                // One creator at a time per namespace (the key: the name's hash, in ckport's own
                // space). Openers hold it a moment (the checks below), so its wait is not --wait's:
                // with --wait 0, processes opening the store together would fail each other. The
                // store's tables are waited for at most --wait.
                try link.execute(
                    "SET LOCAL lock_timeout = \(PostgresLink.lockTimeout(max(waitSeconds, 60)))",
                    "SELECT pg_advisory_xact_lock(\(PostgresStore.lockKey(schema)))",
                    "SET LOCAL lock_timeout = \(PostgresLink.lockTimeout(waitSeconds))")
                let namespace = try link.rows("SELECT 1 FROM pg_namespace WHERE nspname = \(schema)").isEmpty == false
                let hasMeta = try !link.rows(
                    "SELECT 1 FROM pg_tables WHERE schemaname = \(schema) AND tablename = '_ck_meta'"
                ).isEmpty
                if hasMeta {
                    let (id, format) = try PostgresStore.readIdentity(link, location)
                    if format < PostgresStore.format {
                        guard upgrade else {
                            throw StoreError.readOnlyNeedsUpgrade(path: location.url, version: format)
                        }
                        try PostgresStore.upgrade(link, location, from: format)
                        upgraded = format
                    }
                    return id
                }
                if namespace {
                    let tables = try link.rows(
                        "SELECT tablename FROM pg_tables WHERE schemaname = \(schema) ORDER BY tablename LIMIT 3"
                    ).compactMap { $0[0] }
                    if !tables.isEmpty {
                        throw PostgresStoreError.noStore(
                            "\(location): schema \(schema) holds tables (\(tables.joined(separator: ", "))) but no ckport store; name another with ?schema=NAME"
                        )
                    }
                }
                guard create else {
                    throw PostgresStoreError.noStore(
                        "\(location): no ckport store in schema \(schema); import a schema or records to create one")
                }
                // The same form as the SQLite store's: twelve hex digits, the first part of change tokens.
                var generator = SystemRandomNumberGenerator()
                let id = String((0..<12).map { _ in "0123456789abcdef".randomElement(using: &generator)! })
                try link.execute(
                    "CREATE SCHEMA IF NOT EXISTS \(quoted)",
                    "CREATE TABLE \(quoted)._ck_meta (key text PRIMARY KEY, value text NOT NULL)",
                    // The zones that hold or held records, by a number the tables use.
                    """
                    CREATE TABLE \(quoted)._ck_zone (
                      id bigserial PRIMARY KEY, scope text NOT NULL, "zoneName" text COLLATE "C" NOT NULL, "ownerRecordName" text COLLATE "C" NOT NULL,
                      UNIQUE (scope, "zoneName", "ownerRecordName"))
                    """,
                    // Change numbers: handed out to concurrent writers without a lock (a rolled-back
                    // write leaves a gap).
                    "CREATE SEQUENCE \(quoted)._ck_seq",
                    // One row per record name ever stored, live or tombstone: xid is the transaction
                    // that last changed it (its commit's number, in _ck_commit, is what change tokens
                    // count), seq the place of that change among the transaction's changes (written
                    // by ckport; the default is what stores written before that counted with).
                    """
                    CREATE TABLE \(quoted)._ck_record (
                      zone bigint NOT NULL, "recordName" text COLLATE "C" NOT NULL, "recordType" text NOT NULL,
                      seq bigint NOT NULL DEFAULT nextval('\(quoted)._ck_seq'), xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
                      deleted boolean NOT NULL DEFAULT false,
                      PRIMARY KEY (zone, "recordName"))
                    """,
                    "CREATE INDEX _ck_record_seq ON \(quoted)._ck_record (seq)",
                    // Asset files: the bytes under their SHA-256, in rows of a megabyte.
                    "CREATE TABLE \(quoted)._ck_asset (sha256 text PRIMARY KEY, size bigint NOT NULL)",
                    """
                    CREATE TABLE \(quoted)._ck_asset_chunk (
                      sha256 text NOT NULL REFERENCES \(quoted)._ck_asset (sha256) ON DELETE CASCADE, chunk integer NOT NULL, data bytea NOT NULL,
                      PRIMARY KEY (sha256, chunk))
                    """,
                    // The migrations applied, per set and version.
                    """
                    CREATE TABLE \(quoted)._ck_migration (
                      "set" text NOT NULL, version integer NOT NULL, description text NOT NULL, file text NOT NULL, checksum text NOT NULL,
                      "appliedAt" bigint NOT NULL, "durationMs" bigint NOT NULL, "recordsChanged" bigint NOT NULL,
                      PRIMARY KEY ("set", version))
                    """,
                    // Where pulls from CloudKit got to, per source and zone.
                    """
                    CREATE TABLE \(quoted)._ck_sync (
                      source text NOT NULL, scope text NOT NULL, "zoneName" text NOT NULL, "ownerRecordName" text NOT NULL,
                      token text NOT NULL, "savedAt" bigint NOT NULL,
                      PRIMARY KEY (source, scope, "zoneName", "ownerRecordName"))
                    """,
                    PostgresStore.stateTable(quoted),
                    "CREATE INDEX _ck_record_xid ON \(quoted)._ck_record (xid)",
                    // The store's commits in the order they happened: a write transaction that changed
                    // records takes the next number just before it commits, holding a lock that makes
                    // commits of this store take turns (its work does not), so a reader that sees
                    // number n sees every number below it. Change tokens are these numbers.
                    "CREATE SEQUENCE \(quoted)._ck_commit_seq",
                    "CREATE TABLE \(quoted)._ck_commit (xid xid8 PRIMARY KEY, commit bigint NOT NULL UNIQUE)",
                    "INSERT INTO \(quoted)._ck_meta (key, value) VALUES ('format', '\(PostgresStore.format)'), ('storeID', '\(id)'), ('schema', 'DEFINE SCHEMA\n')"
                )
                return id
            }
        }
        upgradedFrom = upgraded
    }

    /// The table of connector state: feeds, CalDAV publications and pulls, by kind, name and key.
    static func stateTable(_ quoted: String) -> String {
        """
        CREATE TABLE IF NOT EXISTS \(quoted)._ck_state (
          kind text COLLATE "C" NOT NULL, name text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL, value text NOT NULL,
          PRIMARY KEY (kind, name, key))
        """
    }

    /// Brings a store of an older format up to ``format``, inside the caller's transaction
    /// (which holds the namespace's advisory lock: one upgrader at a time).
    private static func upgrade(_ link: PostgresLink, _ location: PostgresLocation, from version: Int) throws {
        let schema = location.schema
        if version < 2 {
            // Format 2: every record type's table gains the parent, share and share-details
            // columns. Only a table's owner may add columns: a role that is not is told who is.
            let tables = try link.rows(
                """
                SELECT c.relname::text, pg_get_userbyid(c.relowner)::text, pg_has_role(c.relowner, 'USAGE')::text
                FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid
                WHERE n.nspname = \(schema) AND c.relkind = 'r' AND a.attname = '___recordID' AND NOT a.attisdropped ORDER BY 1
                """)
            if let foreign = tables.first(where: { $0[2] != "true" }) {
                throw StoreError.needsUpgrade(
                    path: location.url, version: version,
                    reason: "its tables belong to the role \(foreign[1] ?? "?"), which this role is not")
            }
            for case let table? in tables.map({ $0[0] }) {
                let additions = PostgresLayout.linkColumns.map {
                    "ADD COLUMN IF NOT EXISTS \(PostgresLayout.identifier($0.name)) \($0.sqlType)"
                }
                let qualified = "\(location.quotedSchema).\(PostgresLayout.identifier(table))"
                try link.execute("ALTER TABLE \(qualified) \(additions.joined(separator: ", "))")
                // Primary keys move to names no type can take (format 1 left PostgreSQL's "<table>_pkey").
                let qualifiedText = qualified.replacingOccurrences(of: "'", with: "''")
                if let key = try link.rows(
                    PostgresQuery(
                        unsafeSQL:
                            "SELECT conname::text FROM pg_constraint WHERE conrelid = '\(qualifiedText)'::regclass AND contype = 'p'"
                    )
                ).first?[0],
                    PostgresLayout.identifier(key) != PostgresLayout.primaryKeyName(table)
                {
                    try link.execute(
                        "ALTER TABLE \(qualified) RENAME CONSTRAINT \(PostgresLayout.identifier(key)) TO \(PostgresLayout.primaryKeyName(table))"
                    )
                }
            }
        }
        if version < 3 {
            // Format 3: the connector state's table.
            try link.execute(PostgresStore.stateTable(location.quotedSchema))
        }
        try link.execute(
            "UPDATE \(location.quotedSchema)._ck_meta SET value = '\(PostgresStore.format)' WHERE key = 'format'")
    }

    /// The identity of the store the namespace holds and its format, checked to be one this
    /// ckport reads.
    private static func readIdentity(_ link: PostgresLink, _ location: PostgresLocation) throws -> (String, Int) {
        let schema = location.schema
        var meta: [String: String] = [:]
        for row in try link.rows("SELECT key, value FROM \(name: location.quotedSchema)._ck_meta") {
            if let key = row[0], let value = row[1] { meta[key] = value }
        }
        guard let format = meta["format"].flatMap(Int.init) else {
            throw PostgresStoreError.notAStore(
                "\(location): schema \(schema) has a _ck_meta table without a format; it is not a ckport store")
        }
        guard (1...PostgresStore.format).contains(format) else {
            throw PostgresStoreError.notAStore(
                "\(location): the store is of format \(format), written by a newer ckport; this ckport reads formats 1 to \(PostgresStore.format)"
            )
        }
        guard let id = meta["storeID"], !id.isEmpty else {
            throw PostgresStoreError.notAStore("\(location): the store has no identity (storeID) in _ck_meta")
        }
        return (id, format)
    }

    /// The schema as the store holds it now, read afresh (or, when it cannot be read, the one
    /// last read: ``loadSchema()`` says why).
    public var schema: Schema {
        if let schema = try? loadSchema() { return schema }
        return known.withLock { $0 }
    }

    /// The schema as the store holds it now, read afresh.
    public func loadSchema() throws -> Schema {
        let schema = try pool.withLink { link in
            let text =
                try link.rows("SELECT value FROM \(name: server.quotedSchema)._ck_meta WHERE key = 'schema'").first?[0]
                ?? "DEFINE SCHEMA\n"
            return try SchemaParser.parse(text, file: "stored schema")
        }
        known.withLock { $0 = schema }
        return schema
    }

    /// The schema last read, for ``schema`` when it cannot be read again.
    private let known = Mutex(Schema())

    /// Runs `body` in a read transaction: one committed state of the store (PostgreSQL's
    /// repeatable read, taken at its first statement), on a connection of its own, never
    /// waiting for writers.
    public func read<T>(_ body: (PostgresSession) throws -> T) throws -> T {
        try pool.withLink { link in
            try link.transaction(rollback: true, begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") {
                try body(try PostgresSession(store: self, link: link, writable: false))
            }
        }
    }

    /// Runs `body` in one write transaction and commits it, or rolls everything back when
    /// `body` throws or `dryRun` is set. Writers run side by side: each holds the schema
    /// steady (a share lock on it) for as long as it runs, and a schema change waits for them.
    public func write<T>(dryRun: Bool = false, _ body: (PostgresSession) throws -> T) throws -> T {
        try write(dryRun: dryRun, schema: .keeps, body)
    }

    /// ``write(dryRun:_:)`` for a transaction that may change the schema as `schema` says, with
    /// the locks that change needs taken first: one that may change it holds the store's tables
    /// from readers and writers before it touches anything, so that it never waits for a lock
    /// another transaction holds while that one waits for it (a reader between two tables, a
    /// writer waiting for the schema row).
    public func write<T>(dryRun: Bool, schema: SchemaUse, _ body: (PostgresSession) throws -> T) throws -> T {
        try pool.withLink { link in
            try link.transaction(rollback: dryRun) {
                let session = try PostgresSession(
                    store: self, link: link, writable: true, schemaUse: schema, dryRun: dryRun)
                let result = try body(session)
                if session.changedRecords && !dryRun { try session.numberCommit() }
                return result
            }
        }
    }

    /// Changes the schema to `newSchema` in one transaction, tables and indexes with it
    /// (PostgreSQL's DDL is transactional: a refused or failed change leaves nothing behind).
    /// Refused, as in the SQLite store, when a type or field that goes away or changes type
    /// still holds data. Another process's schema change waits for this one (the schema row is
    /// locked), and each builds on what the other committed.
    @discardableResult
    public func importSchema(_ newSchema: Schema, dryRun: Bool = false) throws -> SchemaChange {
        // A schema it already has changes nothing, and holds nothing from anyone.
        let use: SchemaUse = SchemaChange(from: try loadSchema(), to: newSchema).changesSchema ? .changes : .keeps
        return try write(dryRun: dryRun, schema: use) { try $0.apply(schema: newSchema) }
    }

    /// The tables and columns the store's namespace holds, with their PostgreSQL types, for
    /// checks: table → column → type.
    func catalog() throws -> [String: [String: String]] {
        var tables: [String: [String: String]] = [:]
        try pool.withLink { link in
            for row in try link.rows(
                "SELECT table_name::text, column_name::text, data_type::text FROM information_schema.columns WHERE table_schema = \(server.schema)"
            ) {
                guard let table = row[0], let column = row[1], let type = row[2] else { continue }
                tables[table, default: [:]][column] = type
            }
        }
        return tables
    }

    /// The indexes of the store's namespace, by name.
    func indexes() throws -> Set<String> {
        try pool.withLink { link in
            Set(
                try link.rows("SELECT indexname::text FROM pg_indexes WHERE schemaname = \(server.schema)").compactMap {
                    $0[0]
                })
        }
    }

    /// The changes of the commits after commit number `after` up to `through`, in the order
    /// they happened: zone, name, type and whether the change was a deletion.
    public func changes(after: Int64, through: Int64) throws -> [(
        zone: ZoneID, recordName: String, recordType: String, deleted: Bool
    )] {
        try read { try $0.changes(after: after, through: through) }
    }

    /// The change token of what is committed now.
    public func changeToken() throws -> ChangeToken {
        try read { try $0.changeToken() }
    }

    /// A 64-bit advisory lock key for a namespace's name (FNV-1a, so every process agrees).
    static func lockKey(_ schema: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "ckport:\(schema)".utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }
}

extension PostgresQuery.StringInterpolation {
    /// A name checked to be plain (``PostgresLocation/isPlainName(_:)``), written into the SQL
    /// as it is: PostgreSQL cannot take a schema or table name as a parameter.
    mutating func appendInterpolation(name: String) {
        let bare =
            name.hasPrefix("\"") && name.hasSuffix("\"") && name.count > 2 ? String(name.dropFirst().dropLast()) : name
        precondition(PostgresLocation.isPlainName(bare), "not a plain name: \(name)")
        appendInterpolation(unescaped: name)
    }
}
