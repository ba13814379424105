import GRDBSQLite
import Records
import StoreCore

// GRDB by name, so that its `Record` class stays out of the way of ckport's `Record`.
import class GRDB.Database
import struct GRDB.DatabaseError
import struct GRDB.DatabaseValue
import class GRDB.Row

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
    public func rewrite(
        types requested: Set<String>, into newSchema: Schema,
        _ transform: (Record) throws -> [Record]?
    ) throws -> [String: RewriteCounts] {
        precondition(writable, "rewrite needs a write transaction")
        let oldSchema = schema
        let types = SchemaChange(from: oldSchema, to: newSchema).rebuiltTypes(requested)
        let oldTypes = oldSchema.recordTypes.filter { types.contains($0.name) }
        let newTypes = newSchema.recordTypes.filter { types.contains($0.name) }

        // Set the old tables aside, without their indexes (whose names the new ones take).
        for type in oldTypes {
            let indexes = try String.fetchAll(
                db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
                arguments: [type.name])
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
        let claim = try statement(
            "INSERT INTO _ck_record (zone, recordName, recordType, seq, deleted) VALUES (?1, ?2, ?3, ?4, 0) ON CONFLICT DO NOTHING"
        )
        let oldNames = Set(oldTypes.map(\.name))
        func insert(_ result: Record, zoneRow: Int64) throws {
            guard let layout = layouts[result.recordType], types.contains(result.recordType) else {
                throw StoreError.corrupt(
                    "a rewrite turned record '\(result.recordName)' into type \(result.recordType), which it does not rebuild"
                )
            }
            let statement: PreparedStatement
            if let cached = inserts[result.recordType] {
                statement = cached
            } else {
                statement = try PreparedStatement(db, layout.insertSQL)
                inserts[result.recordType] = statement
            }
            layout.bind(result, zone: zoneRow, to: statement)
            do {
                try statement.execute(db)
            } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                throw SaveRefusal(
                    message: "record '\(result.recordName)' (\(result.recordType)) would be written twice")
            }
        }
        for type in oldTypes {
            let old = TableLayout(type)
            let select = try PreparedStatement(
                db, "SELECT \(old.columnList) FROM \(quoted("_ck_old_" + type.name)) ORDER BY ___zone, ___recordID")
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
                let kept = try RewriteCounts.keepsName(record, in: results)
                for result in results {
                    if result.recordName == record.recordName {
                        try setRegistry(zone: zoneRow, name: result.recordName, type: result.recordType, deleted: false)
                    } else {
                        claim.reset()
                        claim.bind(1, zoneRow)
                        claim.bind(2, result.recordName)
                        claim.bind(3, result.recordType)
                        claim.bind(4, nextSequence())
                        try claim.execute(db)
                        if db.lastChanges == 0 {
                            guard let entry = try registryEntry(result.id),
                                entry.deleted || oldNames.contains(entry.recordType)
                            else {
                                throw SaveRefusal(
                                    message:
                                        "record '\(record.recordName)' would become '\(result.recordName)', a name already used in zone \(record.zone.zoneName)"
                                )
                            }
                            try setRegistry(
                                zone: zoneRow, name: result.recordName, type: result.recordType, deleted: false)
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

extension StoreSession {
    /// Whether ``updateInPlace(type:into:renames:writes:reads:_:)`` can take a type from the
    /// session's schema to `newSchema`: fields may be added (and re-indexed) and renamed
    /// (`renames`: old name → new name), but none removed or retyped.
    public func canUpdateInPlace(type name: String, into newSchema: Schema, renames: [String: String]) -> Bool {
        guard let old = schema.recordType(named: name), let new = newSchema.recordType(named: name),
            old.grants == new.grants
        else { return false }
        // Fields whose names differ only in case have columns of another form: a new table
        // sorts those out.
        // (The working shape, old fields and new side by side, counts too.)
        let working = RecordTypeDefinition(
            name: name, fields: old.userFields + new.userFields.filter { old.field(named: $0.name) == nil })
        guard !TableLayout.hasCaseTwins(old) && !TableLayout.hasCaseTwins(new) && !TableLayout.hasCaseTwins(working)
        else { return false }
        let newNames = Set(new.userFields.map(\.name))
        for field in old.userFields {
            let target = renames[field.name] ?? field.name
            guard let after = new.field(named: target), after.type == field.type else { return false }
        }
        let oldNames = Set(old.userFields.map(\.name))
        let renamedTargets = Set(renames.values)
        // Columns are renamed at the end, so only old fields can be renamed, to names no old
        // field has (two fields that swap names need a table of their own), and a name a
        // rename frees is not taken by a new field while the old one still has it.
        guard Set(renames.keys).isSubset(of: oldNames), renamedTargets.isDisjoint(with: oldNames) else { return false }
        for field in new.userFields where !renamedTargets.contains(field.name) {
            if renames.keys.contains(field.name) { return false }
        }
        return renamedTargets.isSubset(of: newNames)
    }

    /// Migrates one type's records where they are: the new fields are added as columns, each
    /// record goes through `transform` (nil keeps it; one record of the same name and type
    /// replaces it; none deletes it, leaving a tombstone), only the columns of `writes` (new
    /// field names) are written, and renamed columns take their new names at the end. Cheaper
    /// than ``rewrite(types:into:_:)`` for a migration that adds, renames and sets fields, since
    /// the table and its other indexes stay as they are.
    @discardableResult
    public func updateInPlace(
        type name: String, into newSchema: Schema, renames: [String: String], writes: Set<String>, reads: Set<String>?,
        byValues: InPlaceValues?, _ transform: @escaping (Record) throws -> [Record]?
    ) throws -> RewriteCounts {
        precondition(writable, "updateInPlace needs a write transaction")
        guard canUpdateInPlace(type: name, into: newSchema, renames: renames),
            let old = schema.recordType(named: name), let new = newSchema.recordType(named: name)
        else {
            throw StoreError.corrupt("\(name) cannot be migrated in place")
        }
        let inverse = Dictionary(uniqueKeysWithValues: renames.map { ($0.value, $0.key) })
        let oldNames = Set(old.userFields.map(\.name))
        let added = new.userFields.filter { inverse[$0.name] == nil && !oldNames.contains($0.name) }
        // The working shape: the old fields under their old names, plus the new ones.
        let working = RecordTypeDefinition(name: name, fields: old.userFields + added, grants: old.grants)
        let layout = TableLayout(working)
        // Whether the table's rows can be read as committed (see SnapshotRows): nothing in this
        // transaction has changed a row or the schema yet, and readers do not wait for writers.
        let journal = try String.fetchOne(db, sql: "PRAGMA journal_mode")
        let untouched =
            Int64(sqlite3_total_changes(db.sqliteConnection)) == changesAtStart && journal?.lowercased() == "wal"
        let schemaVersion = try Int64.fetchOne(db, sql: "PRAGMA schema_version") ?? -1
        for field in added {
            for definition in TableLayout.columnDefinitions(layout.fields[layout.fieldsByName[field.name]!]) {
                try db.execute(sql: "ALTER TABLE \(quoted(name)) ADD COLUMN \(definition)")
            }
        }
        // The columns this migration may write (their places among the type's fields, by their
        // working names), and the names their values have in the migrated records.
        let writtenPositions = layout.fields.indices.filter {
            writes.contains(renames[layout.fields[$0].name] ?? layout.fields[$0].name)
        }
        let written = writtenPositions.map {
            (layout.fields[$0], renames[layout.fields[$0].name] ?? layout.fields[$0].name)
        }
        let writtenTargets = written.map(\.1)
        let writtenActions = written.map { $0.0.actionColumn != nil }
        // Changed records are written a run at a time (see RunUpdate): their new values are
        // staged, then one UPDATE covers the run's key range and another gives the run's
        // registry rows new change sequence numbers.
        let columns = written.flatMap { [$0.0.column] + ($0.0.actionColumn.map { [$0] } ?? []) }
        let assignments = columns.enumerated().map {
            "\($0.element) = \(RunUpdate.valueFunction)(___recordID, \($0.offset))"
        }
        let runs = try RunUpdate(db, width: columns.count)
        let staging = runs.staging
        let update =
            assignments.isEmpty
            ? nil
            : try PreparedStatement(
                db,
                """
                UPDATE \(quoted(name)) SET \(assignments.joined(separator: ", "))
                WHERE ___zone = ?1 AND ___recordID >= ?2 AND ___recordID <= ?3
                """)
        let stamp = try PreparedStatement(
            db,
            """
            UPDATE _ck_record SET seq = \(RunUpdate.sequenceFunction)()
            WHERE zone = ?1 AND recordName >= ?2 AND recordName <= ?3 AND recordType = ?4 AND deleted = 0
            """)
        let delete = try PreparedStatement(db, "DELETE FROM \(quoted(name)) WHERE ___zone = ?1 AND ___recordID = ?2")
        let select = try PreparedStatement(db, layout.selectSQL + " ORDER BY ___zone, ___recordID")
        // SQLite removes a function only while none of the connection's statements runs, so
        // the ones here stop first (a migration stopped halfway leaves them mid-step).
        defer {
            select.resetForRebinding()
            update?.resetForRebinding()
            stamp.resetForRebinding()
            runs.remove()
        }
        // The fields the transform reads (under their old names or the names renames give them).
        let decoded = reads.map { reads in
            layout.fields.map { reads.contains($0.name) || reads.contains(renames[$0.name] ?? $0.name) }
        }
        var runZone: Int64 = 0
        func writeRun() throws {
            guard let first = staging.names.first, let last = staging.names.last else { return }
            defer { staging.clear() }
            func check(_ what: String) throws {
                guard db.lastChanges == staging.count else {
                    throw StoreError.corrupt(
                        "\(what) has \(db.lastChanges) \(name) records from '\(first)' to '\(last)' where the migration changed \(staging.count)"
                    )
                }
            }
            if let update {
                update.reset()
                update.bind(1, runZone)
                update.bind(2, first)
                update.bind(3, last)
                try update.execute(db)
                try check("the table")
            }
            staging.lastSequence = changeSequence
            stamp.reset()
            stamp.bind(1, runZone)
            stamp.bind(2, first)
            stamp.bind(3, last)
            stamp.bind(4, name)
            try stamp.execute(db)
            try check("the change log")
            advanceSequence(by: staging.count)
        }
        var counts = RewriteCounts()
        /// Writes what the worker made of one record (see ``InPlaceResults``).
        func write(_ done: InPlaceResults, _ row: Int, zoneRow: Int64) throws {
            switch done.outcomes[row] {
            case .kept:
                try writeRun()
            case .deleted:
                counts.changed += 1
                try writeRun()
                delete.reset()
                delete.bind(1, zoneRow)
                delete.bind(2, done.names[row])
                try delete.execute(db)
                try setRegistry(zone: zoneRow, name: done.names[row], type: name, deleted: true)
                counts.deleted += 1
            case .updated(let first):
                counts.changed += 1
                if zoneRow != runZone || staging.count >= RunUpdate.longestRun { try writeRun() }
                runZone = zoneRow
                staging.begin(done.names[row])
                var index: Int32 = 0
                for position in writtenTargets.indices {
                    TableLayout.bind(
                        done.values[first + position], hasActionColumn: writtenActions[position], at: &index,
                        to: staging)
                }
            }
        }
        // A worker decodes and migrates the records and picks out the values to write, while
        // this thread writes what it made of the batch before. The worker reads the rows itself
        // from the snapshot the transaction began with when it can (the fields just added are
        // NULL there, as here); otherwise this thread copies each row's columns for it.
        let pipeline = InPlacePipeline(
            layout: layout, only: decoded, type: name, writtenTargets: writtenTargets,
            writtenPositions: writtenPositions,
            zones: zonesByRow, values: byValues?.make(layout.fieldNames), transform: transform)
        let addedNames = Set(added.map(\.name))
        let systemColumns = zip(TableLayout.systemColumns, TableLayout.systemColumnsForReads).map { column, read in
            decoded == nil || read ? column : "NULL"
        }
        let snapshotColumns =
            systemColumns
            + layout.fields.enumerated().flatMap { position, field -> [String] in
                let read = !addedNames.contains(field.name) && (decoded?[position] ?? true)
                return [read ? field.column : "NULL"] + (field.actionColumn.map { [read ? $0 : "NULL"] } ?? [])
            }
        let file = sqlite3_db_filename(db.sqliteConnection, "main").map { String(cString: $0) } ?? ""
        let snapshot =
            untouched && !file.isEmpty
            ? SnapshotRows(
                path: file,
                sql:
                    "SELECT \(snapshotColumns.joined(separator: ", ")) FROM \(quoted(name)) ORDER BY ___zone, ___recordID",
                schemaVersion: schemaVersion, storeID: store.storeID, changeSequence: sequenceAtStart)
            : nil
        defer { snapshot?.close() }
        inPlaceReadFromSnapshot = snapshot != nil
        func write(_ done: InPlaceResults) throws {
            for row in done.outcomes.indices { try write(done, row, zoneRow: done.zoneRows[row]) }
            pipeline.retire(done)
        }
        do {
            if let snapshot {
                pipeline.submit(reading: snapshot, count: InPlacePipeline.snapshotBatch)
                while pipeline.busy {
                    let done = try pipeline.collect()
                    if !done.finished { pipeline.submit(reading: snapshot, count: InPlacePipeline.snapshotBatch) }
                    counts.scanned += done.outcomes.count
                    try write(done)
                }
                // The rows are read: nothing holds the log while the indexes are built.
                snapshot.close()
            } else {
                let plan = RowCapturePlan(layout, only: decoded)
                var filling = RowBatch()
                var more = true
                while more || pipeline.busy {
                    while more && !filling.isFull {
                        guard try select.step(db) else {
                            more = false
                            break
                        }
                        filling.copy(select, plan: plan)
                    }
                    counts.scanned += filling.rowCount
                    // The worker migrates this batch while the last one is written.
                    let done = pipeline.busy ? try pipeline.collect() : nil
                    if filling.rowCount > 0 { pipeline.submit(&filling) }
                    if let done { try write(done) }
                }
            }
            try writeRun()
        } catch {
            // The worker may be migrating a batch: it finishes before this thread goes on.
            pipeline.settle()
            throw error
        }
        // Renamed columns take their new names; their indexes are made again under the new name.
        for (from, to) in renames.sorted(by: { $0.key < $1.key }) {
            guard let field = old.field(named: from) else { continue }
            try db.execute(sql: "DROP INDEX IF EXISTS \(TableLayout.indexName(type: name, column: from))")
            try db.execute(sql: "ALTER TABLE \(quoted(name)) RENAME COLUMN \(quoted(from)) TO \(quoted(to))")
            if field.type == .reference {
                try db.execute(
                    sql:
                        "ALTER TABLE \(quoted(name)) RENAME COLUMN \(quoted(from + ":action")) TO \(quoted(to + ":action"))"
                )
            }
        }
        // Indexes as the new definition wants them.
        let existing = Set(
            try String.fetchAll(
                db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
                arguments: [name]))
        for field in new.userFields {
            let indexName = "\(name).\(field.name)"
            if TableLayout.needsIndex(field) && !existing.contains(indexName) {
                try db.execute(sql: TableLayout.indexStatement(type: name, column: field.name))
            } else if !TableLayout.needsIndex(field) && existing.contains(indexName) {
                try db.execute(sql: "DROP INDEX \(TableLayout.indexName(type: name, column: field.name))")
            }
        }
        var updated = schema
        if let index = updated.recordTypes.firstIndex(where: { $0.name == name }) { updated.recordTypes[index] = new }
        schema = updated
        schemaChanged = true
        layouts[name] = TableLayout(new)
        dropCachedStatements()
        return counts
    }
}
