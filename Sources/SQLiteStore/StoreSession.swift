import Foundation
import GRDBSQLite
import Records
import StoreCore

// GRDB by name, so that its `Record` class stays out of the way of ckport's `Record`.
import class GRDB.Database
import struct GRDB.DatabaseError
import struct GRDB.DatabaseValue
import class GRDB.Row

/// Access to the store inside one transaction. Obtain one from ``RecordStore/write(dryRun:_:)``
/// or ``RecordStore/read(_:)``; it is valid only inside that closure.
public final class StoreSession {
    let db: Database
    unowned let store: RecordStore
    let writable: Bool
    public internal(set) var schema: Schema
    var schemaChanged = false
    var layouts: [String: TableLayout] = [:]
    private var zoneRows: [ZoneID: Int64] = [:]
    private var lastZone: (zone: ZoneID, row: Int64)?
    /// Statements every save uses, kept at hand rather than looked up by their SQL.
    private var claimStatement: PreparedStatement?
    private var insertStatements: [String: PreparedStatement] = [:]
    private(set) var zonesByRow: [Int64: ZoneID] = [:]
    private var statements: [String: PreparedStatement] = [:]
    /// The last change sequence number handed out.
    public private(set) var changeSequence: Int64
    private(set) var sequenceAtStart: Int64
    /// SQLite's count of rows the connection has changed, when the session began: equal to
    /// the count now, no row has changed in this transaction yet.
    let changesAtStart: Int64
    /// Whether the last ``updateInPlace(type:into:renames:writes:reads:_:)`` read the rows
    /// from the snapshot the transaction began with (see `SnapshotRows`).
    var inPlaceReadFromSnapshot = false

    init(db: Database, store: RecordStore, writable: Bool) throws {
        self.db = db
        self.store = store
        self.writable = writable
        // Read inside the transaction: another process may have changed the schema since the
        // store was opened, and a write must build on what is committed, not on an old copy.
        schema = try store.loadSchema(db)
        changeSequence = try StoreSession.storedSequence(db)
        sequenceAtStart = changeSequence
        changesAtStart = Int64(sqlite3_total_changes(db.sqliteConnection))
        for type in schema.recordTypes { layouts[type.name] = TableLayout(type) }
        for row in try Row.fetchAll(db, sql: "SELECT id, scope, zoneName, ownerRecordName FROM _ck_zone") {
            guard let scope = DatabaseScope(rawValue: row["scope"]) else {
                throw StoreError.corrupt("zone \(row["id"] as Int64) has scope '\(row["scope"] as String)'")
            }
            let zone = ZoneID(scope: scope, zoneName: row["zoneName"], ownerRecordName: row["ownerRecordName"])
            zoneRows[zone] = row["id"]
            zonesByRow[row["id"]] = zone
        }
        try checkZoneReferences()
    }

    /// Every zone the registry and the tables name exists: a store edited by hand is refused
    /// as damaged by every command, rather than losing records from exports silently. Zones
    /// lead each table's key, so each range of zone numbers that no zone has is one seek per
    /// table — two when the zones are numbered without gaps — however many zones and records
    /// the store holds. (Stepping through the zones instead read a page per zone and table:
    /// 3,000 pages for every session of a store of 1,000 zones.)
    private func checkZoneReferences() throws {
        let tables =
            [("_ck_record", "zone", "the change log")]
            + layouts.values.map { ($0.table, "___zone", "a \($0.typeName) record") }
        for (table, column, what) in tables {
            let probe = try PreparedStatement(
                db, "SELECT \(column) FROM \(table) WHERE \(column) BETWEEN ?1 AND ?2 LIMIT 1")
            for gap in StoreSession.gaps(in: zonesByRow.keys.sorted()) {
                probe.reset()
                probe.bind(1, gap.lowerBound)
                probe.bind(2, gap.upperBound)
                if try probe.step(db) {
                    throw StoreError.corrupt("\(what) names zone \(probe.int64(0)), which does not exist")
                }
            }
        }
    }

    /// The ranges of numbers between `sorted` (ascending, distinct) and beyond its ends.
    static func gaps(in sorted: [Int64]) -> [ClosedRange<Int64>] {
        var gaps: [ClosedRange<Int64>] = []
        var next = Int64.min
        for id in sorted {
            if id > next { gaps.append(next...(id - 1)) }
            guard id < Int64.max else { return gaps }
            next = id + 1
        }
        gaps.append(next...Int64.max)
        return gaps
    }

    /// The change sequence, checked: a store whose metadata was edited by hand is damaged.
    static func storedSequence(_ db: Database) throws -> Int64 {
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT typeof(value) AS kind, value FROM _ck_meta WHERE key = 'changeSeq'")
        else {
            throw StoreError.corrupt("its change sequence is missing")
        }
        guard row["kind"] as String == "integer", let sequence = row["value"] as Int64?, sequence >= 0 else {
            throw StoreError.corrupt(
                "its change sequence is \(row["kind"] as String == "text" ? "the text '\(row["value"] as String? ?? "")'" : "\(row["value"] as DatabaseValue)"), not a count of changes"
            )
        }
        return sequence
    }

    /// Writes what the transaction changed in the store's metadata.
    func finish() throws {
        if changeSequence != sequenceAtStart {
            try db.execute(sql: "UPDATE _ck_meta SET value = ? WHERE key = 'changeSeq'", arguments: [changeSequence])
        }
        if schemaChanged {
            try db.execute(
                sql: "UPDATE _ck_meta SET value = ? WHERE key = 'schema'", arguments: [SchemaPrinter.print(schema)])
        }
    }

    /// The store's identifier (change tokens carry it).
    public var storeID: String { store.storeID }

    /// The current change token: export `--since` it later to get what changed after now.
    public var currentToken: ChangeToken { ChangeToken(storeID: store.storeID, sequence: changeSequence) }

    func statement(_ sql: String) throws -> PreparedStatement {
        if let cached = statements[sql] { return cached }
        let prepared = try PreparedStatement(db, sql)
        statements[sql] = prepared
        return prepared
    }

    /// Forgets prepared statements, which SQLite must prepare again after a schema change.
    func dropCachedStatements() {
        statements = [:]
        claimStatement = nil
        insertStatements = [:]
    }

    func nextSequence() -> Int64 {
        changeSequence += 1
        return changeSequence
    }

    /// Marks the next `count` sequence numbers as handed out (by a statement that numbered
    /// rows itself, see ``SequenceFunction``).
    func advanceSequence(by count: Int) {
        changeSequence += Int64(count)
    }

    func layout(_ typeName: String) throws -> TableLayout {
        guard let layout = layouts[typeName] else {
            throw StoreError.badQuery(
                "unknown record type '\(typeName)' (the schema has \(schema.recordTypes.map(\.name).sorted().joined(separator: ", ")))"
            )
        }
        return layout
    }

    // MARK: Zones

    /// All zones that hold or held records, in export order.
    public var zones: [ZoneID] { zoneRows.keys.sorted() }

    func zoneRow(_ zone: ZoneID, create: Bool) throws -> Int64? {
        // Records come zone by zone: check the last zone before hashing.
        if let last = lastZone, last.zone == zone { return last.row }
        if let row = zoneRows[zone] {
            lastZone = (zone, row)
            return row
        }
        guard create else { return nil }
        try db.execute(
            sql: "INSERT INTO _ck_zone (scope, zoneName, ownerRecordName) VALUES (?, ?, ?)",
            arguments: [zone.scope.rawValue, zone.zoneName, zone.ownerRecordName])
        let row = db.lastInsertedRowID
        zoneRows[zone] = row
        zonesByRow[row] = zone
        return row
    }

    func zone(row: Int64) throws -> ZoneID {
        guard let zone = zonesByRow[row] else {
            throw StoreError.corrupt("a record names zone \(row), which does not exist")
        }
        return zone
    }

    // MARK: Reading records

    /// The live record with this identity, or nil.
    public func record(_ id: RecordID) throws -> Record? {
        guard let entry = try registryEntry(id), !entry.deleted, let layout = layouts[entry.recordType] else {
            return nil
        }
        return try fetch(id, layout: layout)
    }

    func registryEntry(_ id: RecordID) throws -> (recordType: String, deleted: Bool)? {
        guard let zone = try zoneRow(id.zone, create: false) else { return nil }
        let lookup = try statement("SELECT recordType, deleted FROM _ck_record WHERE zone = ?1 AND recordName = ?2")
        lookup.reset()
        lookup.bind(1, zone)
        lookup.bind(2, id.recordName)
        defer { lookup.reset() }
        guard try lookup.step(db) else { return nil }
        return (lookup.text(0), lookup.int64(1) != 0)
    }

    func fetch(_ id: RecordID, layout: TableLayout) throws -> Record? {
        guard let zone = try zoneRow(id.zone, create: false) else { return nil }
        let select = try statement(layout.selectSQL + " WHERE ___zone = ?1 AND ___recordID = ?2")
        select.reset()
        select.bind(1, zone)
        select.bind(2, id.recordName)
        defer { select.reset() }
        guard try select.step(db) else { return nil }
        return try layout.decode(select, zone: id.zone)
    }

    // MARK: Writing records

    /// Saves one record according to `mode`. The record must already be valid for the schema
    /// (see ``RecordValidator``); a tombstone (`isDeleted`) deletes the stored record, without
    /// reference actions, since the source that deleted it already applied them.
    ///
    /// - Throws: ``SaveRefusal`` when the record cannot be saved as it stands; the transaction
    ///   is unharmed and may go on.
    @discardableResult
    public func save(_ incoming: Record, mode: WriteMode) throws -> SaveOutcome {
        try save(incoming, mode: mode, replacingOtherType: false)
    }

    /// The same; with `replacingOtherType`, a record under a name another type holds takes its
    /// place (``ImportOptions/replacesOtherTypes``): the other type's row goes, as a deletion
    /// would take it, and the record goes in as new.
    func save(_ incoming: Record, mode: WriteMode, replacingOtherType: Bool) throws -> SaveOutcome {
        precondition(writable, "save(_:mode:) needs a write transaction")
        let zone = try zoneRow(incoming.zone, create: true)!
        if incoming.isDeleted {
            return try applyTombstone(incoming, zone: zone)
        }
        let layout = try self.layout(incoming.recordType)
        let sequence = changeSequence + 1
        if claimStatement == nil {
            claimStatement = try statement(
                "INSERT INTO _ck_record (zone, recordName, recordType, seq, deleted) VALUES (?1, ?2, ?3, ?4, 0) ON CONFLICT DO NOTHING"
            )
        }
        let claim = claimStatement!
        claim.resetForRebinding()
        claim.bind(1, zone)
        claim.bind(2, incoming.recordName)
        claim.bind(3, incoming.recordType)
        claim.bind(4, sequence)
        try claim.execute(db)
        if db.lastChanges == 1 {
            _ = nextSequence()
            try insertRow(incoming, zone: zone, layout: layout)
            return .inserted
        }
        guard let entry = try registryEntry(incoming.id) else {
            throw StoreError.corrupt("record \(incoming.id) vanished during a write")
        }
        if entry.deleted {
            try setRegistry(zone: zone, name: incoming.recordName, type: incoming.recordType, deleted: false)
            try insertRow(incoming, zone: zone, layout: layout)
            return .inserted
        }
        if entry.recordType != incoming.recordType, replacingOtherType {
            try removeRow(zone: zone, name: incoming.recordName, type: entry.recordType)
            try setRegistry(zone: zone, name: incoming.recordName, type: incoming.recordType, deleted: false)
            try insertRow(incoming, zone: zone, layout: layout)
            return .updated
        }
        guard entry.recordType == incoming.recordType else {
            throw SaveRefusal(
                message:
                    "record name '\(incoming.recordName)' is already used in zone \(incoming.zone.zoneName) by a record of type \(entry.recordType)"
            )
        }
        guard let existing = try fetch(incoming.id, layout: layout) else {
            throw StoreError.corrupt("record \(incoming.id) is registered as \(entry.recordType) but has no row")
        }
        guard let result = try mode.combine(existing, with: incoming) else { return .unchanged }
        if result == existing { return .unchanged }
        let update = try statement(layout.updateSQL)
        layout.bind(result, zone: zone, to: update)
        try update.execute(db)
        try setRegistry(zone: zone, name: incoming.recordName, type: incoming.recordType, deleted: false)
        return .updated
    }

    private func insertRow(_ record: Record, zone: Int64, layout: TableLayout) throws {
        let insert: PreparedStatement
        if let cached = insertStatements[layout.typeName] {
            insert = cached
        } else {
            insert = try statement(layout.insertSQL)
            insertStatements[layout.typeName] = insert
        }
        layout.bind(record, zone: zone, to: insert)
        try insert.execute(db)
    }

    func setRegistry(zone: Int64, name: String, type: String, deleted: Bool) throws {
        let update = try statement(
            "UPDATE _ck_record SET recordType = ?3, seq = ?4, deleted = ?5 WHERE zone = ?1 AND recordName = ?2")
        update.reset()
        update.bind(1, zone)
        update.bind(2, name)
        update.bind(3, type)
        update.bind(4, nextSequence())
        update.bind(5, deleted ? Int64(1) : Int64(0))
        try update.execute(db)
    }

    private func applyTombstone(_ tombstone: Record, zone: Int64) throws -> SaveOutcome {
        guard let entry = try registryEntry(tombstone.id), !entry.deleted else { return .unchanged }
        try removeRow(zone: zone, name: tombstone.recordName, type: entry.recordType)
        return .deleted
    }

    /// Deletes a record's row and leaves its tombstone.
    func removeRow(zone: Int64, name: String, type: String) throws {
        if let layout = layouts[type] {
            let delete = try statement("DELETE FROM \(layout.table) WHERE ___zone = ?1 AND ___recordID = ?2")
            delete.reset()
            delete.bind(1, zone)
            delete.bind(2, name)
            try delete.execute(db)
        }
        try setRegistry(zone: zone, name: name, type: type, deleted: true)
    }

    // MARK: Schema

    /// Adds a field to the schema and its column to the table, inside this transaction.
    public func addField(_ field: FieldDefinition, toType typeName: String) throws {
        precondition(writable)
        var newSchema = schema
        newSchema.addField(field, toType: typeName)
        try apply(schema: newSchema)
    }

    /// Changes tables, columns and indexes from the session's schema to `newSchema`.
    @discardableResult
    public func apply(schema newSchema: Schema) throws -> SchemaChange {
        let change = SchemaChange(from: schema, to: newSchema)
        // The store keeps only schemas its own schema language accepts: one it could not read
        // back (built in code, say, with an index CloudKit does not allow) would make every
        // backup of the store unrestorable.
        if change.changesSchema {
            _ = try SchemaParser.parse(SchemaPrinter.print(newSchema), file: "the new schema")
            let oversized = TableLayout.oversizedTypes(in: newSchema) + TableLayout.caseTwinTypes(in: newSchema)
            guard oversized.isEmpty else { throw StoreError.schemaChangeRefused(oversized) }
        }
        let refusals = try change.dataLossRefusals(
            records: { try Int.fetchOne(db, sql: "SELECT count(*) FROM \(quoted($0))") ?? 0 },
            values: {
                try Int.fetchOne(
                    db,
                    sql:
                        "SELECT count(*) FROM \(quoted($0)) WHERE \(quoted(TableLayout.column(of: $1, in: schema.recordType(named: $0)))) IS NOT NULL"
                ) ?? 0
            })
        guard refusals.isEmpty else { throw StoreError.schemaChangeRefused(refusals) }

        for typeName in change.removedTypes {
            try db.execute(sql: "DROP TABLE \(quoted(typeName))")
            layouts[typeName] = nil
        }
        for (typeName, field) in change.removedFields + change.retypedFields.map({ ($0.type, $0.old) }) {
            try dropColumn(
                type: typeName, field: field,
                column: TableLayout.column(of: field.name, in: schema.recordType(named: typeName)))
        }
        // A field that stays keeps its values; its column changes name when a field of the same
        // name but for case comes or goes (see TableLayout.columnName). After the drops, so a
        // name a dropped column had is free; before the additions, which may take the old one.
        let retyped = Set(change.retypedFields.map { $0.type + "\u{0}" + $0.new.name })
        for newType in newSchema.recordTypes {
            guard let oldType = schema.recordType(named: newType.name) else { continue }
            for field in newType.userFields {
                // A retyped field's column was dropped above and is added below.
                guard let before = oldType.field(named: field.name),
                    !retyped.contains(newType.name + "\u{0}" + field.name)
                else { continue }
                let from = TableLayout.column(of: field.name, in: oldType)
                let to = TableLayout.column(of: field.name, in: newType)
                guard from != to else { continue }
                try db.execute(sql: "DROP INDEX IF EXISTS \(TableLayout.indexName(type: newType.name, column: from))")
                try db.execute(
                    sql: "ALTER TABLE \(quoted(newType.name)) RENAME COLUMN \(quoted(from)) TO \(quoted(to))")
                if field.type == .reference {
                    try db.execute(
                        sql:
                            "ALTER TABLE \(quoted(newType.name)) RENAME COLUMN \(quoted(from + ":action")) TO \(quoted(to + ":action"))"
                    )
                }
                if TableLayout.needsIndex(before) && TableLayout.needsIndex(field) {
                    try db.execute(sql: TableLayout.indexStatement(type: newType.name, column: to))
                }
            }
        }
        for type in change.addedTypes {
            let layout = TableLayout(type)
            for sql in layout.createStatements(for: type) { try db.execute(sql: sql) }
        }
        for (typeName, field) in change.addedFields + change.retypedFields.map({ ($0.type, $0.new) }) {
            let type = newSchema.recordType(named: typeName)
            let layout = TableLayout(type ?? RecordTypeDefinition(name: typeName, fields: [field]))
            guard let index = layout.fieldsByName[field.name] else { continue }
            for definition in TableLayout.columnDefinitions(layout.fields[index]) {
                try db.execute(sql: "ALTER TABLE \(quoted(typeName)) ADD COLUMN \(definition)")
            }
            if TableLayout.needsIndex(field) {
                try db.execute(
                    sql: TableLayout.indexStatement(
                        type: typeName, column: TableLayout.column(of: field.name, in: type)))
            }
        }
        for (typeName, old, new) in change.reindexedFields {
            let column = TableLayout.column(of: new.name, in: newSchema.recordType(named: typeName))
            if TableLayout.needsIndex(old) && !TableLayout.needsIndex(new) {
                try db.execute(sql: "DROP INDEX IF EXISTS \(TableLayout.indexName(type: typeName, column: column))")
            } else if !TableLayout.needsIndex(old) && TableLayout.needsIndex(new) {
                try db.execute(sql: TableLayout.indexStatement(type: typeName, column: column))
            }
        }
        if change.changesSchema {
            schema = newSchema
            schemaChanged = true
            layouts = [:]
            dropCachedStatements()
            for type in schema.recordTypes { layouts[type.name] = TableLayout(type) }
        }
        return change
    }

    private func dropColumn(type: String, field: FieldDefinition, column: String) throws {
        try db.execute(sql: "DROP INDEX IF EXISTS \(TableLayout.indexName(type: type, column: column))")
        try db.execute(sql: "ALTER TABLE \(quoted(type)) DROP COLUMN \(quoted(column))")
        if field.type == .reference {
            try db.execute(sql: "ALTER TABLE \(quoted(type)) DROP COLUMN \(quoted(column + ":action"))")
        }
    }
}
