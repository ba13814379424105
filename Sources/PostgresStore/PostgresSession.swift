import Foundation
import PostgresNIO
import Records
import StoreCore

/// One transaction on a PostgreSQL store, on a connection of its own: what a write does
/// commits together, or not at all (a pulled page of records and its zone's sync token, say);
/// a read sees one committed state.
public final class PostgresSession {
    let store: PostgresStore
    let link: PostgresLink
    let writable: Bool
    /// The schema as this transaction sees it.
    public private(set) var schema: Schema
    private var zoneNumbers: [ZoneID: Int64] = [:]
    /// Whether the store's namespace leads this transaction's search path.
    var namespaceFirst = false
    /// Whether this transaction changed records (and so numbers its commit).
    var changedRecords = false
    /// How many bytes of COPY text a row of each type took last time, with room to spare.
    var rowBytes: [String: Int] = [:]
    private var zonesByNumber: [Int64: ZoneID] = [:]

    var location: PostgresLocation { store.server }
    /// The PostgreSQL schema (namespace) that holds the store.
    /// As SQL names it (quoted: a reserved word is a name too).
    var namespace: String { store.server.quotedSchema }
    public var storeID: String { store.storeID }

    init(store: PostgresStore, link: PostgresLink, writable: Bool, schemaUse: SchemaUse = .keeps, dryRun: Bool = false)
        throws
    {
        self.store = store
        self.link = link
        self.writable = writable
        self.dryRun = dryRun
        // A writer holds the schema steady while it runs (a share lock: writers do not wait for
        // each other, a schema change waits for them); a reader's first statement takes its
        // snapshot.
        let lock = !writable ? "" : schemaUse == .keeps ? " FOR SHARE" : " FOR UPDATE"
        // The store's tables and schema row are what another process holds for a whole
        // transaction (a schema change, a migration): waited for exactly the store's wait. What
        // follows waits as the connection says (PostgresLink.workWait).
        try link.execute("SET LOCAL lock_timeout = \(PostgresLink.lockTimeout(store.waitSeconds))")
        if writable && schemaUse == .changes {
            // First, before any other lock: the tables, from everyone (see holdTablesForChange).
            try link.execute("LOCK TABLE \(store.server.quotedSchema)._ck_meta IN ACCESS EXCLUSIVE MODE")
        }
        // No wait without end: a lock held longer than the store's wait (another process's
        // schema change, a session left open on the server) fails this transaction instead
        // (lock_timeout, set on every connection of the store).
        if !writable {
            // Before the snapshot (which the first query takes): a reader holds the store's
            // tables as they are, so a schema change that replaces or drops tables (a migration)
            // waits for it, or it for the change — it never reads a table its snapshot cannot see.
            try link.execute("LOCK TABLE \(store.server.quotedSchema)._ck_meta IN ACCESS SHARE MODE")
        }
        let text = try link.rows(
            PostgresQuery(
                unsafeSQL: "SELECT value FROM \(store.server.quotedSchema)._ck_meta WHERE key = 'schema'\(lock)")
        ).first?[0]
        guard let text else {
            throw PostgresStoreError.notAStore("\(store.server): the store has no schema row in _ck_meta")
        }
        try link.execute(
            "SET LOCAL lock_timeout = \(PostgresLink.lockTimeout(PostgresLink.workWait(store.waitSeconds)))")
        schema = try SchemaParser.parse(text, file: "stored schema")
        try loadZones()
    }

    private func loadZones() throws {
        for row in try link.rows(
            PostgresQuery(
                unsafeSQL: "SELECT id::text, scope, \"zoneName\", \"ownerRecordName\" FROM \(namespace)._ck_zone"))
        {
            guard let id = row[0].flatMap(Int64.init), let scope = row[1].flatMap(DatabaseScope.init(rawValue:)),
                let zoneName = row[2], let owner = row[3]
            else {
                throw PostgresStoreError.notAStore("\(location): a zone row of _ck_zone is incomplete")
            }
            let zone = ZoneID(scope: scope, zoneName: zoneName, ownerRecordName: owner)
            // A zone this transaction already numbered keeps its number: a dry run's provisional
            // number stays, even once another writer has registered the same zone.
            guard zoneNumbers[zone] == nil else { continue }
            zoneNumbers[zone] = id
            zonesByNumber[id] = zone
        }
    }

    // MARK: Zones

    /// Every zone that holds or held records, in export order.
    public var zones: [ZoneID] { zoneNumbers.keys.sorted() }

    /// Zones this transaction registered: empty when it began, so that a name in one of them
    /// that this transaction has not written is one the store has never held (or another
    /// writer is storing at the same moment, which the registry's key then refuses).
    private(set) var zonesNewHere: Set<Int64> = []

    /// The names this transaction's loads wrote into ``zonesNewHere``: kept by the session, not
    /// a load, since a transaction may save through more than one (``save(_:mode:)`` twice).
    var writtenNames = NameFilter()

    /// Whether this transaction is rolled back at its end whatever happens (a dry run).
    private let dryRun: Bool

    /// The registry number of a zone, registering it when `create` is set and the store has
    /// not seen it (another writer may register it at the same moment: both get one number).
    /// Registering goes through ``numberZones(_:)``.
    ///
    /// A dry run registers nothing: a zone new to the store gets a number of the registry's
    /// sequence, which no other writer will take, for this transaction alone. (A zone row
    /// inserted inside the dry run's transaction would make every writer of that zone wait for
    /// the whole dry run, and could close a cycle of waits the server cannot see: a writer's
    /// side connection waiting for the dry run, the dry run for the writer's records.)
    func zoneNumber(_ zone: ZoneID, create: Bool = false) throws -> Int64? {
        if let number = zoneNumbers[zone] { return number }
        if create && !dryRun {
            try numberZones(CollectionOfOne(zone))
            return zoneNumbers[zone]
        }
        if let found = try link.rows(
            """
            SELECT id::text FROM \(name: namespace)._ck_zone
            WHERE scope = \(zone.scope.rawValue) AND "zoneName" = \(zone.zoneName) AND "ownerRecordName" = \(zone.ownerRecordName)
            """
        ).first?[0].flatMap({ Int64($0) }) {
            remember(zone, as: found)
            return found
        }
        guard create else { return nil }
        guard
            let provisional = try link.rows(
                PostgresQuery(unsafeSQL: "SELECT nextval(pg_get_serial_sequence('\(namespace)._ck_zone', 'id'))::text")
            )
            .first?[0].flatMap({ Int64($0) })
        else {
            throw PostgresStoreError.server("\(location): zone \(zone) has no number")
        }
        zonesNewHere.insert(provisional)
        remember(zone, as: provisional)
        return provisional
    }

    private func remember(_ zone: ZoneID, as number: Int64) {
        zoneNumbers[zone] = number
        zonesByNumber[number] = zone
    }

    /// Numbers every zone of `zones` the transaction has not numbered yet, registering those the
    /// store has not seen, all at once and on another connection: the write's own connection
    /// may still be taking in a COPY, and a lookup on it would wait for that COPY to end
    /// (leaving the server idle while the next batch is prepared).
    ///
    /// New zones are registered in one statement committed at once, names sorted, so that two
    /// writers registering the same zones take them in one order and neither waits for more
    /// than the other's statement (no transaction holds a zone row for longer: a dry run takes
    /// no row, see ``zoneNumber(_:create:)``). A write that then rolls back leaves its zones
    /// registered and empty, which no export, query or feed shows.
    func numberZones<S: Sequence>(_ zones: S) throws where S.Element == ZoneID {
        let unknown = Set(zones.filter { zoneNumbers[$0] == nil }).sorted()
        guard !unknown.isEmpty else { return }
        if dryRun {
            for zone in unknown { _ = try zoneNumber(zone, create: true) }
            return
        }
        var bindings = PostgresBindings()
        bindings.append(unknown.map(\.scope.rawValue))
        bindings.append(unknown.map(\.zoneName))
        bindings.append(unknown.map(\.ownerRecordName))
        let namespace = self.namespace
        let (added, all) = try store.pool.withLink { aside -> ([[String?]], [[String?]]) in
            let added = try aside.rows(
                PostgresQuery(
                    unsafeSQL: """
                        INSERT INTO \(namespace)._ck_zone (scope, "zoneName", "ownerRecordName")
                        SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) ON CONFLICT DO NOTHING RETURNING id::text
                        """, binds: bindings))
            // A new statement: zones another writer registered meanwhile (the insert waited for
            // it and did nothing) are seen too.
            let all = try aside.rows(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT z.id::text, z.scope, z."zoneName", z."ownerRecordName" FROM \(namespace)._ck_zone z
                        JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(scope, "zoneName", "ownerRecordName")
                          ON z.scope = k.scope AND z."zoneName" = k."zoneName" AND z."ownerRecordName" = k."ownerRecordName"
                        """, binds: bindings))
            return (added, all)
        }
        let addedHere = Set(added.compactMap { $0[0].flatMap { Int64($0) } })
        for row in all {
            guard let number = row[0].flatMap({ Int64($0) }), let scopeName = row[1],
                let scope = DatabaseScope(rawValue: scopeName),
                let zoneName = row[2], let owner = row[3]
            else { continue }
            if addedHere.contains(number) { zonesNewHere.insert(number) }
            remember(ZoneID(scope: scope, zoneName: zoneName, ownerRecordName: owner), as: number)
        }
        if let missing = unknown.first(where: { zoneNumbers[$0] == nil }) {
            throw PostgresStoreError.server("\(location): zone \(missing) has no number")
        }
    }

    /// Takes the store's tables from readers until this transaction ends, before a change that
    /// drops or replaces them: a reader that began before waits, or this change waits for the
    /// readers that hold them (each at most its wait).
    func holdTablesForChange() throws {
        try link.execute(
            "SET LOCAL lock_timeout = \(PostgresLink.lockTimeout(store.waitSeconds))",
            "LOCK TABLE \(namespace)._ck_meta IN ACCESS EXCLUSIVE MODE",
            "SET LOCAL lock_timeout = \(PostgresLink.lockTimeout(PostgresLink.workWait(store.waitSeconds)))")
    }

    /// The zone a registry number stands for.
    func zone(number: Int64) throws -> ZoneID {
        if let zone = zonesByNumber[number] { return zone }
        // Registered by another writer since this transaction began.
        try loadZones()
        guard let zone = zonesByNumber[number] else {
            throw PostgresStoreError.notAStore("\(location): a record names zone \(number), which does not exist")
        }
        return zone
    }

    // MARK: Change tokens

    /// The next number of this transaction's changes: the order of its changes in a feed.
    private var nextChangeNumber: Int64 = 1

    /// `count` numbers for this transaction's changes, in the order they happen; the first is
    /// returned. A feed orders changes by their commit's number (``numberCommit()``), then by
    /// these: they count within one transaction, taken here rather than from the server's
    /// sequence (a call of nextval per record cost a third of a bulk load's registry work).
    /// Rows written before this counted store-wide (nextval of `_ck_seq`); within any one
    /// commit, either way, the order is the order of the changes.
    func takeChangeNumbers(_ count: Int) -> Int64 {
        defer { nextChangeNumber += Int64(count) }
        return nextChangeNumber
    }

    /// The change token of what this transaction sees: the number of the last commit that
    /// changed records (``numberCommit()``). Commits of a store are numbered in the order they
    /// happen, so a token never steps past a change that is yet to commit, and a write that
    /// rolls back leaves it where it was. Inside a write, the write's own changes are not
    /// counted yet: a feed from that token repeats them.
    public func changeToken() throws -> ChangeToken {
        let last =
            try link.rows(
                PostgresQuery(unsafeSQL: "SELECT coalesce(max(commit), 0)::text FROM \(namespace)._ck_commit")
            ).first?[0].flatMap { Int64($0) } ?? 0
        return ChangeToken(storeID: storeID, sequence: last)
    }

    /// ``changeToken()``, for callers that cannot throw: on a connection that failed, the
    /// oldest token (a feed from it repeats, never skips).
    public var currentToken: ChangeToken {
        (try? changeToken()) ?? ChangeToken(storeID: storeID, sequence: 0)
    }

    /// Numbers this transaction's commit, just before it commits: the next number of the
    /// store's commit sequence, taken under a lock that the commit releases, so numbers become
    /// visible in order.
    ///
    /// Other writers hold that lock only from this point of their own transaction to its
    /// commit: a moment, never a wait `--wait` is about (with `--wait 0`, writers side by side
    /// would otherwise fail each other), so the wait for it has a bound of its own.
    func numberCommit() throws {
        try link.execute(
            "SET LOCAL lock_timeout = \(PostgresLink.lockTimeout(max(store.waitSeconds, 60)))",
            "SELECT pg_advisory_xact_lock(\(PostgresStore.lockKey(store.server.schema + "\u{0}commit")))",
            "INSERT INTO \(namespace)._ck_commit (xid, commit) VALUES (pg_current_xact_id(), nextval('\(namespace)._ck_commit_seq'))"
        )
    }

    /// The changes of the commits after number `after` up to `through`, in the order they
    /// happened: zone, name, type and whether the change was a deletion.
    public func changes(after: Int64, through: Int64) throws -> [(
        zone: ZoneID, recordName: String, recordType: String, deleted: Bool
    )] {
        var found: [(zone: ZoneID, recordName: String, recordType: String, deleted: Bool)] = []
        try forEachRow(
            PostgresQuery(
                unsafeSQL: """
                    SELECT r.zone::text, r."recordName", r."recordType", r.deleted::text FROM \(namespace)._ck_record r
                    JOIN \(namespace)._ck_commit c ON c.xid = r.xid WHERE c.commit > \(after) AND c.commit <= \(through) ORDER BY c.commit, r.seq
                    """)
        ) { row in
            guard let number = row[0].flatMap(Int64.init), let name = row[1], let type = row[2] else { return }
            found.append((try zone(number: number), name, type, row[3] == "true"))
        }
        return found
    }

    /// Every change after `token`, in the order it happened: live records as they are now,
    /// deleted ones as tombstones. A record changed twice is reported once.
    public func forEachChange(
        since token: ChangeToken, recordTypes: [String] = [], scope: DatabaseScope? = nil, zoneName: String? = nil,
        _ body: (Record) throws -> Void
    ) throws {
        guard token.storeID == storeID else {
            throw StoreError.badToken(
                "change token \(token) comes from another store (this store is \(storeID)); \(Wording.startNewChangeChain)"
            )
        }
        let current = try changeToken()
        guard token.sequence <= current.sequence else {
            throw StoreError.badToken(
                "change token \(token) is ahead of this store, which is at \(current); was the store restored from an older copy?"
            )
        }
        let types = Set(recordTypes)
        // The changes a page at a time; each page's live records fetched as a set, one query
        // per type (a query per record would cost a round trip each).
        var page: [(id: RecordID, zone: Int64, type: String, deleted: Bool)] = []
        func flush() throws {
            defer { page.removeAll(keepingCapacity: true) }
            var fetched: [RecordID: Record] = [:]
            for (type, group) in Dictionary(grouping: page.filter { !$0.deleted }, by: \.type) {
                guard let definition = schema.recordType(named: type) else { continue }
                let reading = PostgresReader(
                    definition, table: PostgresLayout(type: definition, schema: namespace).table, session: self)
                var bindings = PostgresBindings()
                bindings.append(group.map(\.zone))
                bindings.append(group.map(\.id.recordName))
                for row in try link.rows(
                    PostgresQuery(
                        unsafeSQL: """
                            SELECT \(reading.columns) FROM unnest($1::bigint[], $2::text[]) AS k(zone, name)
                            JOIN LATERAL (SELECT * FROM \(reading.table) x WHERE x."___zone" = k.zone AND x."___recordID" = k.name) t ON true
                            """, binds: bindings))
                {
                    let record = try reading.decode(row)
                    fetched[record.id] = record
                }
            }
            for change in page {
                if change.deleted {
                    try body(Record(id: change.id, recordType: change.type, isDeleted: true))
                } else if let record = fetched[change.id] {
                    try body(record)
                } else {
                    throw StoreError.corrupt("change log names \(change.type) \(change.id), which has no row")
                }
            }
        }
        try forEachRow(
            PostgresQuery(
                unsafeSQL: """
                    SELECT r.zone::text, r."recordName", r."recordType", r.deleted::text FROM \(namespace)._ck_record r
                    JOIN \(namespace)._ck_commit c ON c.xid = r.xid WHERE c.commit > \(token.sequence) ORDER BY c.commit, r.seq
                    """)
        ) { row in
            guard let number = row[0].flatMap(Int64.init), let name = row[1], let type = row[2] else { return }
            let zone = try self.zone(number: number)
            if let scope, zone.scope != scope { return }
            if let zoneName, !zone.zoneName.hasSameBytes(as: zoneName) { return }
            if !types.isEmpty && !types.contains(type) { return }
            page.append((RecordID(recordName: name, zone: zone), number, type, row[3] == "true"))
            if page.count >= 2000 { try flush() }
        }
        try flush()
    }

    // MARK: Reading records

    /// What the registry says of a record name: its type and whether it is a tombstone.
    func registryEntry(_ id: RecordID) throws -> (recordType: String, deleted: Bool)? {
        guard let zone = try zoneNumber(id.zone) else { return nil }
        guard
            let row = try link.rows(
                """
                SELECT "recordType", deleted::text FROM \(name: namespace)._ck_record WHERE zone = \(zone) AND "recordName" = \(id.recordName)
                """
            ).first, let type = row[0]
        else { return nil }
        return (type, row[1] == "true")
    }

    /// The live record with this ID, if any.
    public func record(_ id: RecordID) throws -> Record? {
        guard let entry = try registryEntry(id), !entry.deleted else { return nil }
        return try fetch(id, type: entry.recordType)
    }

    /// The row of a record of `type`, if there is one.
    func fetch(_ id: RecordID, type: String) throws -> Record? {
        guard let definition = schema.recordType(named: type), let zone = try zoneNumber(id.zone) else { return nil }
        let reading = PostgresReader(
            definition, table: PostgresLayout(type: definition, schema: namespace).table, session: self)
        var bindings = PostgresBindings()
        bindings.append(id.recordName)
        guard
            let row = try link.rows(
                PostgresQuery(
                    unsafeSQL: reading.sql + " WHERE t.\"___zone\" = \(zone) AND t.\"___recordID\" = $1",
                    binds: bindings)
            ).first
        else {
            return nil
        }
        return try reading.decode(row)
    }

    /// Passes each row of `query` (every column as text) to `body`, two thousand rows at a time
    /// through a cursor of this transaction: memory holds two batches, whatever the table's size.
    func forEachRow(_ query: PostgresQuery, batch: Int = 2000, _ body: ([String?]) throws -> Void) throws {
        let cursor = link.nextCursorName()
        var declare = query
        declare.sql = "DECLARE \(cursor) NO SCROLL CURSOR FOR " + query.sql
        try link.execute(query: declare)
        let fetch = PostgresQuery(unsafeSQL: "FETCH FORWARD \(batch) FROM \(cursor)")
        // The next batch is asked for before this one is handed out: the server reads it while
        // `body` works (what `body` itself asks of the connection comes after it).
        var next = try link.send(fetch)
        while true {
            let rows = try link.rows(of: next)
            if rows.count == batch { next = try link.send(fetch) }
            do {
                for row in rows {
                    try Interruption.check()
                    try body(row)
                }
            } catch {
                if rows.count == batch { _ = try? link.rows(of: next) }
                throw error
            }
            if rows.count < batch { break }
        }
        try link.execute("CLOSE \(cursor)")
    }

    // MARK: Statistics

    /// What a store holds: records and tombstones per zone and type, its size on the server
    /// and its change token.
    public func stats() throws -> StoreStats {
        var entries: [StoreStats.Entry] = []
        for row in try link.rows(
            """
            SELECT r.zone::text, r."recordType", count(*) FILTER (WHERE NOT r.deleted)::text, count(*) FILTER (WHERE r.deleted)::text
            FROM \(name: namespace)._ck_record r GROUP BY r.zone, r."recordType"
            """)
        {
            guard let number = row[0].flatMap(Int64.init), let type = row[1],
                let records = row[2].flatMap(Int.init), let tombstones = row[3].flatMap(Int.init)
            else { continue }
            entries.append(
                StoreStats.Entry(
                    zone: try zone(number: number), recordType: type, records: records, tombstones: tombstones))
        }
        entries.sort { ($0.zone, $0.recordType) < ($1.zone, $1.recordType) }
        let size =
            try link.rows(
                """
                SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = \(store.server.schema) AND c.relkind = 'r'
                """
            ).first?[0].flatMap(Int64.init) ?? 0
        return StoreStats(
            path: location.description, fileSize: size, token: try changeToken(), entries: entries,
            recordTypeCount: schema.recordTypes.count)
    }

    // MARK: Sync tokens and migration history

    /// Saves where a pull of `zone` from `source` got to (nil forgets it), in this transaction.
    public func saveSyncToken(_ token: String?, source: String, zone: ZoneID) throws {
        if let token {
            let savedAt = Int64(Date().timeIntervalSince1970 * 1000)
            try link.execute(
                query: """
                    INSERT INTO \(unescaped: namespace)._ck_sync (source, scope, "zoneName", "ownerRecordName", token, "savedAt")
                    VALUES (\(source), \(zone.scope.rawValue), \(zone.zoneName), \(zone.ownerRecordName), \(token), \(savedAt))
                    ON CONFLICT (source, scope, "zoneName", "ownerRecordName") DO UPDATE SET token = EXCLUDED.token, "savedAt" = EXCLUDED."savedAt"
                    """)
        } else {
            try link.execute(
                query: """
                    DELETE FROM \(unescaped: namespace)._ck_sync
                    WHERE source = \(source) AND scope = \(zone.scope.rawValue) AND "zoneName" = \(zone.zoneName) AND "ownerRecordName" = \(zone.ownerRecordName)
                    """)
        }
    }

    /// The sync states saved for `source`, by zone.
    public func syncStates(source: String) throws -> [SyncState] {
        try link.rows(
            """
            SELECT source, scope, "zoneName", "ownerRecordName", token, "savedAt"::text FROM \(name: namespace)._ck_sync
            WHERE source = \(source) ORDER BY scope, "zoneName", "ownerRecordName"
            """
        ).compactMap { row in
            guard let source = row[0], let scope = row[1].flatMap(DatabaseScope.init(rawValue:)), let zoneName = row[2],
                let owner = row[3],
                let token = row[4], let savedAt = row[5].flatMap(Int64.init)
            else { return nil }
            return SyncState(
                source: source, zone: ZoneID(scope: scope, zoneName: zoneName, ownerRecordName: owner), token: token,
                savedAt: savedAt)
        }
    }

    /// Every source a pull saved a sync state for, sorted.
    public func syncSources() throws -> [String] {
        try link.rows(PostgresQuery(unsafeSQL: "SELECT DISTINCT source FROM \(namespace)._ck_sync")).compactMap {
            $0[0]
        }
        .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    // MARK: Connector state

    /// The value kept under `key` of `kind`/`name`, or nil.
    public func connectorState(kind: String, name: String, key: String) throws -> String? {
        try link.rows(
            """
            SELECT value FROM \(name: namespace)._ck_state WHERE kind = \(kind) AND name = \(name) AND key = \(key)
            """
        ).first?[0] ?? nil
    }

    /// Every entry of `kind` (and `name`), in order of kind, name and key.
    public func forEachConnectorState(
        kind: String?, name: String?, _ body: (ConnectorStateEntry) throws -> Void
    ) throws {
        let rows: [[String?]]
        switch (kind, name) {
        case (let kind?, let name?):
            rows = try link.rows(
                """
                SELECT kind, name, key, value FROM \(name: namespace)._ck_state WHERE kind = \(kind) AND name = \(name)
                ORDER BY kind, name, key
                """)
        case (let kind?, nil):
            rows = try link.rows(
                """
                SELECT kind, name, key, value FROM \(name: namespace)._ck_state WHERE kind = \(kind) ORDER BY kind, name, key
                """)
        default:
            rows = try link.rows(
                PostgresQuery(
                    unsafeSQL: "SELECT kind, name, key, value FROM \(namespace)._ck_state ORDER BY kind, name, key"))
        }
        for row in rows {
            guard let kind = row[0], let name = row[1], let key = row[2], let value = row[3] else { continue }
            try body(ConnectorStateEntry(kind: kind, name: name, key: key, value: value))
        }
    }

    /// The names kept under `kind`, sorted byte by byte.
    public func connectorStateNames(kind: String) throws -> [String] {
        try link.rows(
            "SELECT DISTINCT name FROM \(name: namespace)._ck_state WHERE kind = \(kind) ORDER BY name"
        ).compactMap { $0[0] }
    }

    /// Saves (nil removes) one entry, in this transaction.
    public func saveConnectorState(_ value: String?, kind: String, name: String, key: String) throws {
        if let value {
            try link.execute(
                query: """
                    INSERT INTO \(unescaped: namespace)._ck_state (kind, name, key, value) VALUES (\(kind), \(name), \(key), \(value))
                    ON CONFLICT (kind, name, key) DO UPDATE SET value = EXCLUDED.value
                    """)
        } else {
            try link.execute(
                query: """
                    DELETE FROM \(unescaped: namespace)._ck_state WHERE kind = \(kind) AND name = \(name) AND key = \(key)
                    """)
        }
    }

    /// Removes every entry of `kind`/`name`, in this transaction.
    public func removeConnectorState(kind: String, name: String) throws {
        try link.execute(
            query: "DELETE FROM \(unescaped: namespace)._ck_state WHERE kind = \(kind) AND name = \(name)")
    }

    /// Adds (or, for the same set and version, replaces) an entry of the migration history, in
    /// this transaction: with the records the migration rewrote.
    public func recordMigration(_ entry: MigrationHistoryEntry) throws {
        try link.execute(
            query: """
                INSERT INTO \(unescaped: namespace)._ck_migration ("set", version, description, file, checksum, "appliedAt", "durationMs", "recordsChanged")
                VALUES (\(entry.set), \(entry.version), \(entry.description), \(entry.file), \(entry.checksum), \(entry.appliedAt),
                        \(entry.durationMilliseconds), \(entry.recordsChanged))
                ON CONFLICT ("set", version) DO UPDATE SET description = EXCLUDED.description, file = EXCLUDED.file, checksum = EXCLUDED.checksum,
                    "appliedAt" = EXCLUDED."appliedAt", "durationMs" = EXCLUDED."durationMs", "recordsChanged" = EXCLUDED."recordsChanged"
                """)
    }

    /// The migrations applied to this store, oldest first; only `set`'s when given.
    public func migrationHistory(set: String?) throws -> [MigrationHistoryEntry] {
        let sql = """
            SELECT "set", version::text, description, file, checksum, "appliedAt"::text, "durationMs"::text, "recordsChanged"::text
            FROM \(namespace)._ck_migration
            """
        let rows =
            try set.map { try link.rows("\(unescaped: sql) WHERE \"set\" = \($0) ORDER BY \"set\", version") }
            ?? link.rows(PostgresQuery(unsafeSQL: sql + " ORDER BY \"set\", version"))
        return try rows.map { row in
            guard let set = row[0], let version = row[1].flatMap(Int.init), let description = row[2], let file = row[3],
                let checksum = row[4],
                let appliedAt = row[5].flatMap(Int64.init), let duration = row[6].flatMap(Int64.init),
                let changed = row[7].flatMap(Int.init)
            else {
                throw PostgresStoreError.notAStore("\(location): a migration history row is incomplete")
            }
            return MigrationHistoryEntry(
                set: set, version: version, description: description, file: file, checksum: checksum,
                appliedAt: appliedAt,
                durationMilliseconds: duration, recordsChanged: changed)
        }
    }
}

extension PostgresSession: LoadingSession {
    public func makeLoader() throws -> any RecordLoader { PostgresLoader(self) }

    /// Saves one record in `mode`, as the SQLite store does (see ``RecordLoader``): new names
    /// inserted, existing ones combined by the mode, a tombstone deleting the stored record.
    ///
    /// - Throws: ``SaveRefusal`` when the record cannot be saved as it stands; the transaction
    ///   is unharmed and may go on.
    @discardableResult
    public func save(_ record: Record, mode: WriteMode) throws -> SaveOutcome {
        precondition(writable, "save(_:mode:) needs a write transaction")
        try Interruption.check()
        let loader = PostgresLoader(self)
        _ = try loader.save(record, mode: mode)
        guard let result = try loader.flush().first else {
            throw StoreError.corrupt("the store did not answer for record \(record.id)")
        }
        return try result.get()
    }

    /// Adds a field to the schema and its column to the table, inside this transaction.
    public func addField(_ field: FieldDefinition, toType typeName: String) throws {
        var newSchema = schema
        newSchema.addField(field, toType: typeName)
        try apply(schema: newSchema)
    }

    /// Changes the schema to `newSchema` in this transaction, tables and indexes with it
    /// (PostgreSQL's DDL is transactional: a refused or failed change leaves nothing behind).
    /// Refused, as in the SQLite store, when a type or field that goes away or changes type
    /// still holds data. The schema row is locked first, so another process's schema change
    /// waits for this one and builds on what it committed.
    @discardableResult
    public func apply(schema newSchema: Schema) throws -> SchemaChange {
        precondition(writable, "a schema change needs a write transaction")
        // The session holds the schema row (shared) since it began, so its schema is what is
        // committed: a load that changes nothing takes no further lock.
        guard SchemaChange(from: schema, to: newSchema).changesSchema else {
            return SchemaChange(from: schema, to: newSchema)
        }
        let text =
            try link.rows("SELECT value FROM \(name: namespace)._ck_meta WHERE key = 'schema' FOR UPDATE").first?[0]
            ?? "DEFINE SCHEMA\n"
        schema = try SchemaParser.parse(text, file: "stored schema")
        let change = SchemaChange(from: schema, to: newSchema)
        guard change.changesSchema else { return change }
        if !change.removedTypes.isEmpty || !change.removedFields.isEmpty || !change.retypedFields.isEmpty {
            try holdTablesForChange()
        }
        // Only schemas the schema language reads back are kept (a backup must restore).
        _ = try SchemaParser.parse(SchemaPrinter.print(newSchema), file: "the new schema")
        var refusals: [String] = []
        for type in newSchema.recordTypes where PostgresLayout(type: type, schema: namespace).columnCount > 1600 {
            refusals.append(
                "record type \(type.name) would need \(PostgresLayout(type: type, schema: namespace).columnCount) columns; PostgreSQL allows 1,600 to a table"
            )
        }
        let namespace = self.namespace
        func count(_ sql: String) throws -> Int {
            Int(try link.rows(PostgresQuery(unsafeSQL: sql)).first?[0] ?? "0") ?? 0
        }
        refusals += try change.dataLossRefusals(
            records: { try count("SELECT count(*)::text FROM \(namespace).\(PostgresLayout.identifier($0))") },
            values: {
                try count(
                    "SELECT count(*)::text FROM \(namespace).\(PostgresLayout.identifier($0)) WHERE \(PostgresLayout.identifier($1)) IS NOT NULL"
                )
            })
        guard refusals.isEmpty else { throw StoreError.schemaChangeRefused(refusals) }
        var statements: [String] = []
        for typeName in change.removedTypes {
            statements.append("DROP TABLE \(namespace).\(PostgresLayout.identifier(typeName))")
        }
        for (typeName, field) in change.removedFields + change.retypedFields.map({ ($0.type, $0.old) }) {
            // Dropping a column drops its index; a reference's action column goes with it.
            var columns = [field.name]
            if field.type == .reference { columns.append(field.name + ":action") }
            for column in columns {
                statements.append(
                    "ALTER TABLE \(namespace).\(PostgresLayout.identifier(typeName)) DROP COLUMN \(PostgresLayout.identifier(column))"
                )
            }
        }
        for type in change.addedTypes { statements += PostgresLayout(type: type, schema: namespace).createStatements() }
        for (typeName, field) in change.addedFields + change.retypedFields.map({ ($0.type, $0.new) }) {
            for definition in PostgresLayout.columnDefinitions(field) {
                statements.append(
                    "ALTER TABLE \(namespace).\(PostgresLayout.identifier(typeName)) ADD COLUMN \(definition)")
            }
            if PostgresLayout.needsIndex(field) {
                statements.append(PostgresLayout.indexStatement(schema: namespace, type: typeName, field: field))
            }
        }
        for (typeName, old, new) in change.reindexedFields
        where PostgresLayout.needsIndex(old) != PostgresLayout.needsIndex(new) {
            statements.append(
                PostgresLayout.needsIndex(new)
                    ? PostgresLayout.indexStatement(schema: namespace, type: typeName, field: new)
                    : "DROP INDEX \(namespace).\(PostgresLayout.indexName(type: typeName, field: new.name))")
        }
        for sql in statements { try link.execute(sql) }
        try writeSchema(newSchema)
        return change
    }

    /// Keeps `newSchema` as the store's schema, in this transaction.
    func writeSchema(_ newSchema: Schema) throws {
        _ = try link.rows(
            "UPDATE \(name: namespace)._ck_meta SET value = \(SchemaPrinter.print(newSchema)) WHERE key = 'schema'")
        schema = newSchema
    }

    /// A store may always answer false; this one does, and migrations rewrite the types they
    /// change (``rewrite(types:into:_:)``).
    public func canUpdateInPlace(type: String, into newSchema: Schema, renames: [String: String]) -> Bool { false }

    public func updateInPlace(
        type: String, into newSchema: Schema, renames: [String: String], writes: Set<String>, reads: Set<String>?,
        byValues: InPlaceValues?, _ transform: @escaping (Record) throws -> [Record]?
    ) throws -> RewriteCounts {
        throw StoreError.corrupt(
            "the PostgreSQL store migrates records by rewriting their types; updateInPlace is not available (canUpdateInPlace says so)"
        )
    }
}
