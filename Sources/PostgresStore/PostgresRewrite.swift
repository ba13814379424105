import Foundation
import PostgresNIO
import Records
import StoreCore

extension PostgresSession {
    /// Moves the store to `newSchema`, passing every record of the affected types through
    /// `transform`: the engine under migrations, with the SQLite store's rules (see
    /// `StoreSession.rewrite`). Each affected type's table is set aside, a table in the new
    /// layout takes its place, every old record is read once through a cursor and what
    /// `transform` answers is written in batches through COPY; indexes are built at the end.
    /// PostgreSQL's DDL is transactional: when `transform` throws, schema and records are as
    /// they were.
    @discardableResult
    public func rewrite(
        types requested: Set<String>, into newSchema: Schema,
        _ transform: (Record) throws -> [Record]?
    ) throws -> [String: RewriteCounts] {
        precondition(writable, "rewrite needs a write transaction")
        let text =
            try link.rows("SELECT value FROM \(name: namespace)._ck_meta WHERE key = 'schema' FOR UPDATE").first?[0]
            ?? "DEFINE SCHEMA\n"
        let oldSchema = try SchemaParser.parse(text, file: "stored schema")
        // The old tables are set aside and new ones take their names: no reader may be between.
        try holdTablesForChange()
        let types = SchemaChange(from: oldSchema, to: newSchema).rebuiltTypes(requested)
        _ = try SchemaParser.parse(SchemaPrinter.print(newSchema), file: "the new schema")
        let oldTypes = oldSchema.recordTypes.filter { types.contains($0.name) }
        let newTypes = newSchema.recordTypes.filter { types.contains($0.name) }
        let oldNames = Set(oldTypes.map(\.name))

        // Set the old tables aside, without their indexes (whose names the new ones take).
        for type in oldTypes {
            let table = PostgresLayout(type: type, schema: namespace).table
            for row in try link.rows(
                """
                SELECT i.relname::text, c.conname::text FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                LEFT JOIN pg_constraint c ON c.conindid = x.indexrelid WHERE x.indrelid = \(unescaped: "'\(table.replacingOccurrences(of: "'", with: "''"))'")::regclass
                """)
            {
                if let constraint = row[1] {
                    try link.execute("ALTER TABLE \(table) DROP CONSTRAINT \(PostgresLayout.identifier(constraint))")
                } else if let index = row[0] {
                    try link.execute("DROP INDEX \(namespace).\(PostgresLayout.identifier(index))")
                }
            }
            try link.execute("ALTER TABLE \(table) RENAME TO \(PostgresLayout.identifier("_ck_old_" + type.name))")
        }
        for type in newTypes { try link.execute(PostgresLayout(type: type, schema: namespace).createStatements()[0]) }
        try writeSchema(newSchema)

        var counts: [String: RewriteCounts] = [:]
        var batch = RewriteBatch()
        for type in oldTypes {
            let old = PostgresReader(
                type, table: "\(namespace).\(PostgresLayout.identifier("_ck_old_" + type.name))", session: self)
            var typeCounts = RewriteCounts()
            try forEachRow(PostgresQuery(unsafeSQL: old.sql + " ORDER BY t.\"___zone\", t.\"___recordID\"")) { row in
                let record = try old.decode(row)
                let zone = try zoneNumber(record.zone)!
                typeCounts.scanned += 1
                guard let results = try transform(record) else {
                    batch.rows[record.recordType, default: []].append(record)
                    try flushIfFull(&batch, oldNames: oldNames, types: types)
                    return
                }
                typeCounts.changed += 1
                let kept = try RewriteCounts.keepsName(record, in: results)
                for result in results {
                    if result.recordName != record.recordName { batch.claims.append((zone, result.recordName, record)) }
                    batch.rows[result.recordType, default: []].append(result)
                    batch.log.append((zone, result.recordName, result.recordType, false))
                }
                if !kept {
                    batch.log.append((zone, record.recordName, record.recordType, true))
                    typeCounts.deleted += 1
                }
                try flushIfFull(&batch, oldNames: oldNames, types: types)
            }
            counts[type.name] = typeCounts
        }
        try flush(&batch, oldNames: oldNames, types: types)
        for type in oldTypes {
            try link.execute("DROP TABLE \(namespace).\(PostgresLayout.identifier("_ck_old_" + type.name))")
        }
        for type in newTypes {
            for sql in PostgresLayout(type: type, schema: namespace).createStatements().dropFirst() {
                try link.execute(sql)
            }
        }
        return counts
    }

    /// What a rewrite has to write: rows by type, names that are new (to check first) and the
    /// change log's entries, in order.
    struct RewriteBatch {
        var rows: [String: [Record]] = [:]
        var claims: [(zone: Int64, name: String, from: Record)] = []
        var log: [(zone: Int64, name: String, type: String, deleted: Bool)] = []
        var count: Int { rows.values.reduce(0) { $0 + $1.count } + log.count }
    }

    private func flushIfFull(_ batch: inout RewriteBatch, oldNames: Set<String>, types: Set<String>) throws {
        if batch.count >= PostgresLoader.batchSize { try flush(&batch, oldNames: oldNames, types: types) }
    }

    private func flush(_ batch: inout RewriteBatch, oldNames: Set<String>, types: Set<String>) throws {
        defer { batch = RewriteBatch() }
        // A new name may take a tombstone's place or a name of a type being rebuilt, nothing else.
        if !batch.claims.isEmpty {
            var bindings = PostgresBindings()
            bindings.append(batch.claims.map(\.zone))
            bindings.append(batch.claims.map(\.name))
            for row in try link.rows(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT r."recordName", r."recordType" FROM \(namespace)._ck_record r
                        JOIN unnest($1::bigint[], $2::text[]) AS k(zone, name) ON r.zone = k.zone AND r."recordName" = k.name
                        WHERE NOT r.deleted
                        """, binds: bindings))
            {
                guard let name = row[0], let type = row[1], !oldNames.contains(type) else { continue }
                let from = batch.claims.first { $0.name == name }!.from
                throw SaveRefusal(
                    message:
                        "record '\(from.recordName)' would become '\(name)', a name already used in zone \(from.zone.zoneName)"
                )
            }
        }
        for (type, records) in batch.rows.sorted(by: { $0.key < $1.key }) {
            guard types.contains(type), let definition = schema.recordType(named: type) else {
                throw StoreError.corrupt(
                    "a rewrite turned record '\(records[0].recordName)' into type \(type), which it does not rebuild")
            }
            try writeRows(
                records, of: definition, into: PostgresLayout(type: definition, schema: namespace).table,
                replacing: false)
        }
        // Each name once in the change log: where it changed last.
        var last: [String: Int] = [:]
        for (index, entry) in batch.log.enumerated() { last["\(entry.zone)\u{0}\(entry.name)"] = index }
        let entries = batch.log.enumerated().filter { last["\($0.element.zone)\u{0}\($0.element.name)"] == $0.offset }
            .map(\.element)
        guard !entries.isEmpty else { return }
        try writeLog(
            zones: entries.map(\.zone), names: entries.map(\.name), types: entries.map(\.type),
            deleted: entries.map(\.deleted))
    }
}
