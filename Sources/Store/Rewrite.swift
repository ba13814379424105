import GRDB
import Records

/// What a rewrite did.
public struct RewriteCounts: Sendable, Hashable {
    public var scanned = 0
    public var changed = 0
    public var deleted = 0
    public init() {}
}

extension StoreSession {
    /// Moves the store to `newSchema`, passing every record of the affected types through
    /// `transform` on the way: the engine under migrations.
    ///
    /// The affected types are `types` plus every type whose definition differs between the
    /// two schemas. Each is rebuilt: its old table is set aside, a table in the new layout is
    /// created, every old record is read once and `transform`'s answer written in its place:
    /// nil keeps the record as it is; otherwise the records it returns — the same record, a changed one (perhaps of another affected
    /// type), others under new names — and a tombstone when none of them keeps the old
    /// record's name. Records that
    /// change get a new change sequence number, so `export --since` and incremental bundles
    /// see them. Indexes are built once at the end. Everything happens inside the session's
    /// transaction: when `transform` throws, nothing has changed.
    @discardableResult
    public func rewrite(types requested: Set<String>, into newSchema: Schema,
                        _ transform: (Records.Record) throws -> [Records.Record]?) throws -> [String: RewriteCounts] {
        precondition(writable, "rewrite needs a write transaction")
        let oldSchema = schema
        var types = requested
        let change = SchemaChange(from: oldSchema, to: newSchema)
        types.formUnion(change.addedTypes.map(\.name))
        types.formUnion(change.removedTypes)
        types.formUnion(change.addedFields.map(\.type))
        types.formUnion(change.removedFields.map(\.type))
        types.formUnion(change.retypedFields.map(\.type))
        types.formUnion(change.reindexedFields.map(\.type))
        types.formUnion(change.regrantedTypes)
        let oldTypes = oldSchema.recordTypes.filter { types.contains($0.name) }
        let newTypes = newSchema.recordTypes.filter { types.contains($0.name) }

        // Set the old tables aside, without their indexes (whose names the new ones take).
        for type in oldTypes {
            let indexes = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", arguments: [type.name])
            for index in indexes { try db.execute(sql: "DROP INDEX \(quoted(index))") }
            try db.execute(sql: "ALTER TABLE \(quoted(type.name)) RENAME TO \(quoted("_ck_old_" + type.name))")
        }
        for type in newTypes {
            try db.execute(sql: TableLayout(type).createStatements(for: type)[0])
        }
        schema = newSchema
        schemaChanged = true
        layouts = [:]
        dropCachedStatements()
        for type in schema.recordTypes { layouts[type.name] = TableLayout(type) }

        var counts: [String: RewriteCounts] = [:]
        var inserts: [String: PreparedStatement] = [:]
        let claim = try statement("INSERT INTO _ck_record (zone, recordName, recordType, seq, deleted) VALUES (?1, ?2, ?3, ?4, 0) ON CONFLICT DO NOTHING")
        let oldNames = Set(oldTypes.map(\.name))
        func insert(_ result: Records.Record, zoneRow: Int64) throws {
            guard let layout = layouts[result.recordType], types.contains(result.recordType) else {
                throw StoreError.corrupt("a rewrite turned record '\(result.recordName)' into type \(result.recordType), which it does not rebuild")
            }
            let statement: PreparedStatement
            if let cached = inserts[result.recordType] { statement = cached } else {
                statement = try PreparedStatement(db, layout.insertSQL)
                inserts[result.recordType] = statement
            }
            layout.bind(result, zone: zoneRow, to: statement)
            do {
                try statement.execute(db)
            } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                throw SaveRefusal(message: "record '\(result.recordName)' (\(result.recordType)) would be written twice")
            }
        }
        for type in oldTypes {
            let old = TableLayout(type)
            let select = try PreparedStatement(db, "SELECT \(old.columnList) FROM \(quoted("_ck_old_" + type.name)) ORDER BY ___zone, ___recordID")
            var typeCounts = RewriteCounts()
            while try select.step(db) {
                let zoneRow = select.int64(0)
                let record = try old.decode(select, zone: try zone(row: zoneRow))
                typeCounts.scanned += 1
                guard let results = try transform(record) else {
                    try insert(record, zoneRow: zoneRow)
                    continue
                }
                typeCounts.changed += 1
                var kept = false
                for result in results {
                    guard result.zone == record.zone else {
                        throw StoreError.corrupt("a rewrite moved record '\(record.recordName)' to another zone, which records cannot do")
                    }
                    if result.recordName == record.recordName {
                        guard !kept else { throw SaveRefusal(message: "record '\(record.recordName)' would be written twice") }
                        kept = true
                        try setRegistry(zone: zoneRow, name: result.recordName, type: result.recordType, deleted: false)
                    } else {
                        claim.reset()
                        claim.bind(1, zoneRow)
                        claim.bind(2, result.recordName)
                        claim.bind(3, result.recordType)
                        claim.bind(4, nextSequence())
                        try claim.execute(db)
                        if db.lastChanges == 0 {
                            guard let entry = try registryEntry(result.id), entry.deleted || oldNames.contains(entry.recordType) else {
                                throw SaveRefusal(message: "record '\(record.recordName)' would become '\(result.recordName)', a name already used in zone \(record.zone.zoneName)")
                            }
                            try setRegistry(zone: zoneRow, name: result.recordName, type: result.recordType, deleted: false)
                        }
                    }
                    try insert(result, zoneRow: zoneRow)
                }
                if !kept {
                    try setRegistry(zone: zoneRow, name: record.recordName, type: record.recordType, deleted: true)
                    typeCounts.deleted += 1
                }
            }
            counts[type.name] = typeCounts
        }
        for type in oldTypes { try db.execute(sql: "DROP TABLE \(quoted("_ck_old_" + type.name))") }
        for type in newTypes {
            for sql in TableLayout(type).createStatements(for: type).dropFirst() { try db.execute(sql: sql) }
        }
        dropCachedStatements()
        return counts
    }
}
