import Foundation
import PostgresNIO
import Records
import StoreCore

/// Saves the records of a load a few thousand at a time: what each save does is decided here,
/// record by record and in order, exactly as the SQLite store decides it
/// (``WriteMode/combine(_:with:)``), against the batch's stored rows read in one query; the rows
/// that change then go to the server through `COPY … FROM STDIN` — straight into their tables
/// for names the store never held, through a staging table and one upsert for the rest — and
/// the change log takes one number per changed record.
final class PostgresLoader: RecordLoader {
    private let session: PostgresSession
    /// Records held before they are saved together, and how each is saved (two arrays rather
    /// than one of pairs: a batch's records then go on as one array, not copied out one by one).
    private var heldRecords: [Record] = []
    private var heldModes: [WriteMode] = []
    var replacesOtherTypes = false
    /// How many records are held before they are saved together.
    static let batchSize = 4000
    /// How many records' rows under new names wait before they go to the server, as one COPY
    /// per table: each COPY is a round trip and a start of its own on the server, and at 4,000
    /// records a batch they were a tenth of an import's time (BENCHMARKS.md, PostgreSQL).
    /// Only whole batches that needed no look-up wait (a bulk load into zones it creates); the
    /// rest go at once, with whatever waits.
    static let queuedRecords = 16000
    /// How many bytes of rows wait at most, whatever their number of records.
    static let queuedBytes = 32 << 20

    init(_ session: PostgresSession) {
        self.session = session
    }

    func prepare(for recordType: String) throws {}

    func save(_ record: consuming Record, mode: WriteMode) throws -> SaveOutcome? {
        try Interruption.check()
        heldRecords.append(record)
        heldModes.append(mode)
        return nil
    }

    var wantsFlush: Bool { heldRecords.count >= PostgresLoader.batchSize }

    /// A record name in a zone, by the zone's registry number.
    /// Compared by the name's bytes, as the registry compares names.
    struct Key: Hashable {
        var zone: Int64
        var name: String

        static func == (lhs: Key, rhs: Key) -> Bool { lhs.zone == rhs.zone && lhs.name.hasSameBytes(as: rhs.name) }

        func hash(into hasher: inout Hasher) {
            hasher.combine(zone)
            name.hashBytes(into: &hasher)
        }
    }

    func flush() throws -> [Result<SaveOutcome, SaveRefusal>] {
        let records = heldRecords
        let modes = heldModes
        heldRecords = []
        heldModes = []
        heldRecords.reserveCapacity(PostgresLoader.batchSize)
        heldModes.reserveCapacity(PostgresLoader.batchSize)
        guard !records.isEmpty else { return [] }
        // What PostgreSQL cannot hold is refused before anything is written, each record on
        // its own (so that --skip-invalid can leave it out), as the SQLite store refuses
        // what it cannot take.
        var refused: [Int: SaveRefusal] = [:]
        let schema = session.schema
        for index in records.indices where !records[index].isDeleted {
            if let problem = PostgresLoad.valueProblem(records[index], schema: schema) {
                refused[index] = SaveRefusal(
                    message:
                        "record '\(records[index].recordName)' (\(records[index].recordType)): \(problem.message); the PostgreSQL store cannot keep it as it is"
                )
            }
        }
        guard !refused.isEmpty else { return try flush(records, modes) }
        let kept = records.indices.filter { refused[$0] == nil }
        var outcomes = try flush(kept.map { records[$0] }, kept.map { modes[$0] }).makeIterator()
        return records.indices.map { index in refused[index].map { .failure($0) } ?? outcomes.next()! }
    }

    private func flush(_ records: [Record], _ modes: [WriteMode]) throws -> [Result<SaveOutcome, SaveRefusal>] {
        guard !records.isEmpty else { return [] }
        // Records of one zone usually come together: each run of them is looked up once.
        var zones: [ZoneID] = []
        for index in records.indices where zones.last != records[index].zone { zones.append(records[index].zone) }
        try session.numberZones(zones)
        var keys: [Key] = []
        keys.reserveCapacity(records.count)
        var zone = (id: records[0].zone, number: try session.zoneNumber(records[0].zone, create: true)!)
        for index in records.indices {
            if records[index].zone != zone.id {
                zone = (records[index].zone, try session.zoneNumber(records[index].zone, create: true)!)
            }
            keys.append(Key(zone: zone.number, name: records[index].recordName))
        }
        let distinct = Set(keys)
        // The common case of a bulk load, names the store has never held, each once: its COPY
        // is prepared now, while the server still takes in the previous batch's.
        var prepared: [Copy]?
        if distinct.count == keys.count,
            records.indices.allSatisfy({ index in
                !records[index].isDeleted && session.schema.recordType(named: records[index].recordType) != nil
                    && PostgresLoad.timestampsHaveText(records[index])
            })
        {
            prepared = try freshCopies(records, keys: keys)
        }
        // Each key's places in the filter, worked out once for the look-up and the insert.
        var places: [NameFilter.Places]?
        defer {
            for index in keys.indices where session.zonesNewHere.contains(keys[index].zone) {
                session.writtenNames.insert(places?[index] ?? NameFilter.places(keys[index]))
            }
        }
        // In zones this transaction registered, only names it wrote itself can be in the
        // registry: those are looked up (and any the filter cannot rule out), no other.
        if let prepared, keys.allSatisfy({ session.zonesNewHere.contains($0.zone) }) {
            let keyPlaces = keys.map(NameFilter.places)
            places = keyPlaces
            let maybeWritten = keys.indices.filter { session.writtenNames.mayContain(keyPlaces[$0]) }.map { keys[$0] }
            let registry: (live: [Key: String], tombstones: Set<Key>) =
                maybeWritten.isEmpty ? ([:], []) : try lookUp(maybeWritten)
            if registry.live.isEmpty, registry.tombstones.isEmpty {
                // A batch that looked names up waited for the rows before it: it goes at once,
                // so that the server takes it in while the next is read.
                try queue(
                    prepared, records: records.count,
                    wait: maybeWritten.isEmpty && records.count >= PostgresLoader.batchSize)
                return Array(repeating: .success(.inserted), count: records.count)
            }
        }
        let registry = try lookUp(Array(distinct))
        if let prepared, registry.live.isEmpty, registry.tombstones.isEmpty {
            try queue(prepared, records: records.count, wait: false)
            return Array(repeating: .success(.inserted), count: records.count)
        }
        var state = Decisions(current: try storedRecords(registry.live), replacesOtherTypes: replacesOtherTypes)
        let results = state.decide(records, modes, keys: keys)
        try write(state, registry: registry)
        return results
    }

    /// What the registry says of these names: the type of each live one, and which are
    /// tombstones. Each name is looked up through the index, however large the store.
    ///
    /// The names' registry rows are locked (FOR UPDATE) until the transaction ends, in one
    /// order for every writer: another write of the same records waits here, and then decides
    /// on what this one committed, so every outcome is one that saving the loads one after the
    /// other gives — no update is lost. (Two writers that lock the same names in two orders
    /// across batches meet in a deadlock, which the server breaks by failing one, whole.)
    private func lookUp(_ unsorted: [Key]) throws -> (live: [Key: String], tombstones: Set<Key>) {
        let keys = unsorted.sorted { a, b in
            a.zone != b.zone ? a.zone < b.zone : a.name.utf8.lexicographicallyPrecedes(b.name.utf8)
        }
        var live: [Key: String] = [:]
        var tombstones: Set<Key> = []
        for row in try session.link.rows(
            """
            SELECT r.zone::text, r."recordName", r."recordType", r.deleted::text
            FROM unnest(\(keys.map(\.zone))::bigint[], \(keys.map(\.name))::text[]) WITH ORDINALITY AS k(zone, name, n)
            JOIN LATERAL (SELECT * FROM \(unescaped: session.namespace)._ck_record r WHERE r.zone = k.zone AND r."recordName" = k.name FOR UPDATE) r ON true
            ORDER BY k.n
            """)
        {
            guard let zone = row[0].flatMap(Int64.init), let name = row[1], let type = row[2] else { continue }
            if row[3] == "true" {
                tombstones.insert(Key(zone: zone, name: name))
            } else {
                live[Key(zone: zone, name: name)] = type
            }
        }
        return (live, tombstones)
    }

    /// The stored records under these live names, read type by type through the index.
    private func storedRecords(_ live: [Key: String]) throws -> [Key: Record] {
        var records: [Key: Record] = [:]
        for (type, group) in Dictionary(grouping: live.keys, by: { live[$0]! }) {
            guard let definition = session.schema.recordType(named: type) else {
                throw StoreError.corrupt(
                    "record \(group[0].name) is registered as \(type), which the schema does not define")
            }
            let table = PostgresLayout(type: definition, schema: session.namespace).table
            let reader = PostgresReader(definition, table: table, session: session)
            var bindings = PostgresBindings()
            bindings.append(group.map(\.zone))
            bindings.append(group.map(\.name))
            for row in try session.link.rows(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT \(reader.columns) FROM unnest($1::bigint[], $2::text[]) AS k(zone, name)
                        JOIN LATERAL (SELECT * FROM \(table) x WHERE x."___zone" = k.zone AND x."___recordID" = k.name) t ON true
                        """, binds: bindings))
            {
                let record = try reader.decode(row)
                records[Key(zone: try session.zoneNumber(record.zone)!, name: record.recordName)] = record
            }
        }
        return records
    }

    /// What a batch does, decided record by record in order, each against what the ones
    /// before it left: the records under each name afterwards, and where each name changed last.
    private struct Decisions {
        var current: [Key: Record]
        var lastChange: [Key: Int] = [:]
        var lastType: [Key: String] = [:]
        var replacesOtherTypes = false

        mutating func decide(_ records: [Record], _ modes: [WriteMode], keys: [Key]) -> [Result<
            SaveOutcome, SaveRefusal
        >] {
            var results: [Result<SaveOutcome, SaveRefusal>] = []
            results.reserveCapacity(records.count)
            for index in records.indices {
                results.append(decide(records[index], mode: modes[index], key: keys[index], index: index))
            }
            return results
        }

        private mutating func decide(_ record: Record, mode: WriteMode, key: Key, index: Int) -> Result<
            SaveOutcome, SaveRefusal
        > {
            if record.isDeleted {
                guard let existing = current[key] else { return .success(.unchanged) }
                lastType[key] = existing.recordType
                current[key] = nil
                lastChange[key] = index
                return .success(.deleted)
            }
            guard let existing = current[key] else {
                current[key] = record
                lastType[key] = record.recordType
                lastChange[key] = index
                return .success(.inserted)
            }
            if existing.recordType != record.recordType, replacesOtherTypes {
                // The other type's row goes when the batch is written (its type differs from
                // what the registry says), and this record goes in as new.
                current[key] = record
                lastType[key] = record.recordType
                lastChange[key] = index
                return .success(.updated)
            }
            guard existing.recordType == record.recordType else {
                return .failure(
                    SaveRefusal(
                        message:
                            "record name '\(record.recordName)' is already used in zone \(record.zone.zoneName) by a record of type \(existing.recordType)"
                    ))
            }
            do {
                guard let combined = try mode.combine(existing, with: record), combined != existing else {
                    return .success(.unchanged)
                }
                current[key] = combined
                lastChange[key] = index
                return .success(.updated)
            } catch let refusal as SaveRefusal {
                return .failure(refusal)
            } catch {
                return .failure(SaveRefusal(message: "\(error)"))
            }
        }
    }

    /// Writes what a batch changed: old rows of another type removed, the new ones written,
    /// the change log told. Names the store has never held go in through COPY straight into
    /// their tables and the change log, which numbers them in order as they arrive; the rest
    /// (updates, deletions, names that were tombstones) through a staging table and one upsert,
    /// numbered after them in the order of their last change.
    private func write(_ state: Decisions, registry: (live: [Key: String], tombstones: Set<Key>)) throws {
        let changed = state.lastChange.sorted { $0.value < $1.value }.map(\.key)
        guard !changed.isEmpty else { return }
        let namespace = session.namespace
        var removals: [String: [Key]] = [:]
        var fresh: [(key: Key, record: Record)] = []
        var writes: [String: [Record]] = [:]
        var log: (zones: [Int64], names: [String], types: [String], deleted: [Bool]) = ([], [], [], [])
        for key in changed {
            let now = state.current[key]
            if let before = registry.live[key], now?.recordType != before { removals[before, default: []].append(key) }
            if let now, registry.live[key] == nil, !registry.tombstones.contains(key),
                PostgresLoad.timestampsHaveText(now)
            {
                fresh.append((key, now))
                continue
            }
            if let now { writes[now.recordType, default: []].append(now) }
            log.zones.append(key.zone)
            log.names.append(key.name)
            log.types.append(now?.recordType ?? state.lastType[key]!)
            log.deleted.append(now == nil)
        }
        for (type, removed) in removals.sorted(by: { $0.key < $1.key }) {
            var bindings = PostgresBindings()
            bindings.append(removed.map(\.zone))
            bindings.append(removed.map(\.name))
            try session.link.execute(
                query: PostgresQuery(
                    unsafeSQL: """
                        DELETE FROM \(namespace).\(PostgresLayout.identifier(type)) WHERE ("___zone", "___recordID") IN (SELECT * FROM unnest($1::bigint[], $2::text[]))
                        """, binds: bindings))
        }
        if !fresh.isEmpty {
            try start(
                try freshCopies(fresh.map(\.record), keys: fresh.map(\.key)).map {
                    ($0.table, $0.columns, $0.binary, [$0.rows])
                })
        }
        for (type, records) in writes.sorted(by: { $0.key < $1.key }) {
            let definition = try definition(type, records[0])
            try session.writeRows(
                records, of: definition, into: PostgresLayout(type: definition, schema: namespace).table,
                replacing: true)
        }
        if !log.zones.isEmpty {
            try session.writeLog(zones: log.zones, names: log.names, types: log.types, deleted: log.deleted)
        }
    }

    /// One COPY: the table and column names as COPY takes them, the rows, and whether they
    /// are in COPY's binary format (else its text format).
    typealias Copy = (table: String, columns: [String], rows: [UInt8], binary: Bool)

    /// One COPY statement: the rows of one or more ``Copy`` values into the same table, with
    /// the same columns and format, each part as its copy made it.
    typealias Statement = (table: String, columns: [String], binary: Bool, parts: [[UInt8]])

    /// The COPYs that store records under names the store has never held: the change log's
    /// rows (numbered in this order, see ``PostgresSession/takeChangeNumbers(_:)``) and each
    /// type's rows.
    private func freshCopies(_ records: [Record], keys: [Key]) throws -> [Copy] {
        var log = COPYBinary(capacity: records.count * 72)
        var byType: [String: [Int]] = [:]
        var number = session.takeChangeNumbers(records.count)
        for index in records.indices {
            log.integer(keys[index].zone)
            log.text(keys[index].name)
            log.text(records[index].recordType)
            log.integer(number)
            log.end()
            number += 1
            byType[records[index].recordType, default: []].append(index)
        }
        var copies: [Copy] = [("_ck_record", ["zone", "recordName", "recordType", "seq"], log.bytes(), true)]
        for (type, group) in byType.sorted(by: { $0.key < $1.key }) {
            copies.append(
                try session.copyPayload(records, group, zones: keys, of: try definition(type, records[group[0]])))
        }
        return copies
    }

    /// COPYs of records under new names that have not gone to the server yet (see
    /// ``queuedRecords``), and how many records and bytes they hold.
    private var queued: [Copy] = []
    private var queuedCount = 0
    private var queuedSize = 0

    /// Keeps `copies` (of `records` records) to go with the next ones (`wait`), and sends what
    /// waits once ``queuedRecords`` records or ``queuedBytes`` bytes do, or at once without
    /// `wait`. What waits goes before anything else uses the connection (the link holds it
    /// back, see ``PostgresLink/holdBack(for:_:)``): a read of the registry, a write of another
    /// kind, another loader's rows, the commit.
    private func queue(_ copies: [Copy], records: Int, wait: Bool) throws {
        session.changedRecords = true
        queued += copies
        queuedCount += records
        queuedSize += copies.reduce(0) { $0 + $1.rows.count }
        if !wait || queuedCount >= PostgresLoader.queuedRecords || queuedSize >= PostgresLoader.queuedBytes {
            try sendQueued()
        } else {
            // Held strongly: rows the loader still keeps go even if the loader itself is gone.
            session.link.holdBack(for: self) { try self.sendQueued() }
        }
    }

    /// Sends the COPYs waiting: those into one table with the same columns and format as one
    /// COPY, in the order they came.
    private func sendQueued() throws {
        session.link.letGo(of: self)
        guard !queued.isEmpty else { return }
        var statements: [Statement] = []
        for copy in queued {
            if let index = statements.firstIndex(where: {
                $0.table == copy.table && $0.columns == copy.columns && $0.binary == copy.binary
            }) {
                statements[index].parts.append(copy.rows)
            } else {
                statements.append((copy.table, copy.columns, copy.binary, [copy.rows]))
            }
        }
        queued = []
        queuedCount = 0
        queuedSize = 0
        try start(statements)
    }

    /// Sends `statements` while this thread goes on to the next batch: whatever uses the
    /// connection next waits for them (and fails with their error).
    private func start(_ statements: [Statement]) throws {
        try session.useNamespace()
        session.changedRecords = true
        let location = session.location
        try session.link.start { connection, logger in
            for statement in statements {
                do {
                    try await PostgresLink.send(
                        statement.parts, into: statement.table, columns: statement.columns, binary: statement.binary,
                        on: connection, logger: logger)
                } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
                    throw PostgresStoreError.server(
                        "\(location): another writer stored some of the same record names while this write ran, so this one was rolled back and nothing was written; run it again"
                    )
                }
            }
        }
    }

    private func definition(_ type: String, _ record: Record) throws -> RecordTypeDefinition {
        guard let definition = session.schema.recordType(named: type) else {
            throw StoreError.schemaChangeRefused([
                "record \(record.recordName) is of type \(type), which the store's schema does not define (import a schema that does first)"
            ])
        }
        return definition
    }

    /// At the end, the rows still waiting go, and the load waits for them, so that their errors
    /// are the load's and not whatever comes next's; nothing more: PostgreSQL's autovacuum
    /// refreshes the statistics of tables a load filled, in the background (an ANALYZE here
    /// cost a third of a second per large table on every import).
    func finish(inserted: Int) throws {
        // The link holds back what still waits (see `queue`), and settling sends it first.
        try session.link.settle()
    }
}

extension PostgresSession {
    /// Writes whole rows into `table` (a type's table, or one a rewrite is filling) through COPY
    /// into a staging table of text columns and one INSERT from there; with `replacing`, a row
    /// already there under the same zone and name takes the new values, else it is an error.
    func writeRows(_ records: [Record], of definition: RecordTypeDefinition, into table: String, replacing: Bool) throws
    {
        let fields = definition.userFields.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        var columns = PostgresLayout.systemColumns.map {
            ($0.name, $0.name == "___zone" ? "bigint" : ($0.name.hasSuffix("Time") ? "timestamp" : "text"))
        }
        for field in fields {
            columns.append((field.name, PostgresLayout.sqlType(field.type)))
            if field.type == .reference { columns.append((field.name + ":action", "smallint")) }
        }
        var line = COPYLine(capacity: records.count * 256)
        for (position, record) in records.enumerated() {
            PostgresLoad.appendRow(
                record, zone: try zoneNumber(record.zone, create: true)!, fields: fields, position: position, to: &line)
        }
        let rows = line.bytes()
        let stage = "_ck_stage"
        try link.execute(
            "CREATE TEMP TABLE \(stage) (\(columns.indices.map { "c\($0) text" }.joined(separator: ", ")), pos bigint) ON COMMIT DROP"
        )
        try link.copy(into: stage, rows)
        let casts = columns.enumerated().map { index, column in PostgresLoad.cast("c\(index)", to: column.1) }
        let names = columns.map { PostgresLayout.identifier($0.0) }
        var sql =
            "INSERT INTO \(table) AS t (\(names.joined(separator: ", "))) SELECT \(casts.joined(separator: ", ")) FROM \(stage) ORDER BY pos"
        if replacing {
            sql +=
                " ON CONFLICT (\"___zone\", \"___recordID\") DO UPDATE SET "
                + names.dropFirst(2).map { "\($0) = EXCLUDED.\($0)" }.joined(separator: ", ")
        }
        do {
            try link.execute(sql, "DROP TABLE \(stage)")
        } catch let error as PostgresStoreError where "\(error)".contains("SQLSTATE 23505") {
            throw SaveRefusal(message: "a record of type \(definition.name) would be written twice under one name")
        }
    }

    /// The COPY that writes the rows of records whose names the store has never held straight
    /// into their type's table, in COPY's binary format when the type has no `NUMBER` field,
    /// else as text (then every timestamp must have a text form: see
    /// ``PostgresLoad/timestampsHaveText(_:)``, which the callers check for both): the table and
    /// column names as COPY takes them (PostgresLayout.identifier's spelling without its
    /// quotes), and the rows.
    /// `indices` pick the records of `records` to write, and their zones' numbers from `zones`.
    func copyPayload(
        _ records: [Record], _ indices: [Int], zones: [PostgresLoader.Key], of definition: RecordTypeDefinition
    ) throws -> PostgresLoader.Copy {
        let fields = definition.userFields.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        let columns = PostgresLayout.rowColumns(fields)
        func bare(_ name: String) -> String {
            String(PostgresLayout.identifier(name).dropFirst().dropLast()).replacingOccurrences(of: "\"\"", with: "\"")
        }
        // Room for as many bytes a row as the type's last rows took, so that the rows are
        // seldom moved to a larger buffer on the way.
        let capacity = indices.count * (rowBytes[definition.name] ?? 384)
        if COPYBinary.takes(fields) {
            var rows = COPYBinary(capacity: capacity)
            var written = true
            for index in indices where written {
                written = PostgresLoad.appendRow(
                    records[index], zone: zones[index].zone, fields: fields, position: nil, timestampsAsText: true,
                    to: &rows)
            }
            // A value of another type than its field's (which validation does not let
            // through) goes as text, which the server converts or refuses.
            if written {
                if !indices.isEmpty { rowBytes[definition.name] = rows.count / indices.count + 64 }
                return (bare(definition.name), columns.map(bare), rows.bytes(), true)
            }
        }
        var line = COPYLine(capacity: capacity)
        for index in indices {
            PostgresLoad.appendRow(
                records[index], zone: zones[index].zone, fields: fields, position: nil, timestampsAsText: true,
                to: &line)
        }
        if !indices.isEmpty { rowBytes[definition.name] = line.count / indices.count + 64 }
        return (bare(definition.name), columns.map(bare), line.bytes(), false)
    }

    /// Puts the store's namespace first on this transaction's search path (for COPY, which
    /// takes a table's name unqualified).
    func useNamespace() throws {
        guard !namespaceFirst else { return }
        try link.execute("SET LOCAL search_path TO \(namespace), pg_catalog")
        namespaceFirst = true
    }

    /// Tells the change log of changed records, one change number each in the order given
    /// (each name at most once).
    func writeLog(zones: [Int64], names: [String], types: [String], deleted: [Bool]) throws {
        changedRecords = true
        var bindings = PostgresBindings()
        bindings.append(zones)
        bindings.append(names)
        bindings.append(types)
        bindings.append(deleted)
        bindings.append(takeChangeNumbers(zones.count) - 1)
        try link.execute(
            query: PostgresQuery(
                unsafeSQL: """
                    INSERT INTO \(namespace)._ck_record (zone, "recordName", "recordType", seq, deleted)
                    SELECT zone, name, type, $5::bigint + n, gone
                    FROM (SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::boolean[]) WITH ORDINALITY AS k(zone, name, type, gone, n) ORDER BY n) ordered
                    ON CONFLICT (zone, "recordName") DO UPDATE SET "recordType" = EXCLUDED."recordType", seq = EXCLUDED.seq,
                        xid = pg_current_xact_id(), deleted = EXCLUDED.deleted
                    """, binds: bindings))
    }
}

/// A set of record names that answers "certainly not here" or "perhaps here" (a Bloom filter)
/// in a fixed 8 MB however many names go in: at 10 million names, about one name in 25 that is
/// not in it is still "perhaps", and is then looked up in the registry.
struct NameFilter {
    private static let bits = 1 << 26
    /// Taken at the first insert: a load that writes no new zone holds none of it.
    private var words: [UInt64] = []

    /// A key's place in the filter: two hashes, from which its four positions follow
    /// (Kirsch–Mitzenmacher: position i is a + i·b, modulo the filter's size, a power of two).
    /// Both halves of one 64-bit hash: each position takes 26 bits.
    struct Places {
        let a: UInt64
        let b: UInt64
    }

    static func places(_ key: PostgresLoader.Key) -> Places {
        var hasher = Hasher()
        hasher.combine(key)
        let hash = UInt64(bitPattern: Int64(hasher.finalize()))
        return Places(a: hash & 0xFFFF_FFFF, b: (hash >> 32) | 1)
    }

    private static let mask = UInt64(bits - 1)

    mutating func insert(_ places: Places) {
        if words.isEmpty { words = [UInt64](repeating: 0, count: NameFilter.bits / 64) }
        for i in 0..<UInt64(4) {
            let position = Int((places.a &+ i &* places.b) & NameFilter.mask)
            words[position >> 6] |= 1 << UInt64(position & 63)
        }
    }

    func mayContain(_ places: Places) -> Bool {
        guard !words.isEmpty else { return false }
        for i in 0..<UInt64(4) {
            let position = Int((places.a &+ i &* places.b) & NameFilter.mask)
            if words[position >> 6] & (1 << UInt64(position & 63)) == 0 { return false }
        }
        return true
    }
}
