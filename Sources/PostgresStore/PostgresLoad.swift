import Foundation
import NIOCore
import PostgresNIO
import Records
import Store

extension PostgresStore {
    /// Saves `records` (new ones inserted, existing ones replaced) in one transaction, through
    /// `COPY … FROM STDIN` into a staging table per record type and one statement from there
    /// into the type's table: the server's bulk path, not a statement per record. Each record
    /// becomes a change of the store's change log, in order. Every record's type must be in the
    /// store's schema; nothing is saved when one is not.
    @discardableResult
    public func save(_ records: [Record]) throws -> Int {
        try save(records, whileOpen: nil)
    }

    /// ``save(_:)``, running `whileOpen` just before the transaction commits (for tests that
    /// hold a write open while others work).
    func save(_ records: [Record], whileOpen: (() throws -> Void)?) throws -> Int {
        try write { session in
            let saved = try session.save(records)
            try whileOpen?()
            return saved
        }
    }

    /// ``PostgresSession/save(_:)``: in the caller's transaction.
    func saveInTransaction(_ records: [Record]) throws -> Int {
        let schema = location.schema
        do {
            // No store-wide lock: writers into different zones or types run side by side; change
            // numbers come from a sequence, and change tokens count transactions (see
            // changeWatermark()).
            let storeSchema = try SchemaParser.parse(try link.rows("SELECT value FROM \(name: schema)._ck_meta WHERE key = 'schema'").first?[0] ?? "DEFINE SCHEMA\n",
                                                     file: "stored schema")
            var types: [String: RecordTypeDefinition] = [:]
            for type in storeSchema.recordTypes { types[type.name] = type }
            if let stray = records.first(where: { types[$0.recordType] == nil }) {
                throw StoreError.schemaChangeRefused(["record \(stray.recordName) is of type \(stray.recordType), which the store's schema does not define (import a schema that does first)"])
            }
            let zones = try zoneNumbers(Set(records.map(\.zone)))
            // The change log first: every record takes a change number in the order given, and a
            // name another type holds (in the store or in this batch) is refused before anything
            // is written, as the SQLite store refuses it.
            var log: [UInt8] = []
            for (position, record) in records.enumerated() {
                PostgresLoad.appendFields([String(position), String(zones[record.zone]!), record.recordName, record.recordType], to: &log)
            }
            try link.execute("CREATE TEMP TABLE _ck_stage_log (position bigint, zone bigint, name text, type text) ON COMMIT DROP")
            try link.copy(into: "_ck_stage_log", log)
            let clashes = try link.rows("""
                SELECT s.name, r."recordType", s.type FROM _ck_stage_log s JOIN \(name: schema)._ck_record r ON r.zone = s.zone AND r."recordName" = s.name
                WHERE NOT r.deleted AND r."recordType" <> s.type
                UNION ALL
                SELECT a.name, a.type, b.type FROM _ck_stage_log a JOIN _ck_stage_log b ON a.zone = b.zone AND a.name = b.name AND a.position < b.position AND a.type <> b.type
                LIMIT 1
                """)
            if let clash = clashes.first, let name = clash[0], let held = clash[1] {
                let zone = records.first { $0.recordName == name }?.zone.zoneName ?? "?"
                throw SaveRefusal(message: "record name '\(name)' is already used in zone \(zone) by a record of type \(held)")
            }
            for (typeName, group) in Dictionary(grouping: records.enumerated(), by: \.element.recordType).sorted(by: { $0.key < $1.key }) {
                let layout = PostgresLayout(type: types[typeName]!, schema: schema)
                let fields = layout.type.userFields.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
                var columns = PostgresLayout.systemColumns.map { ($0.name, $0.name == "___zone" ? "bigint" : ($0.name.hasSuffix("Time") ? "timestamp" : "text")) }
                for field in fields {
                    columns.append((field.name, PostgresLayout.sqlType(field.type)))
                    if field.type == .reference { columns.append((field.name + ":action", "smallint")) }
                }
                let stage = "_ck_stage"
                try link.execute("CREATE TEMP TABLE \(stage) (\(columns.indices.map { "c\($0) text" }.joined(separator: ", ")), pos bigint) ON COMMIT DROP")
                var rows: [UInt8] = []
                rows.reserveCapacity(group.count * 256)
                for (position, record) in group {
                    PostgresLoad.appendRow(record, zone: zones[record.zone]!, fields: fields, position: position, to: &rows)
                }
                try link.copy(into: stage, rows)
                let casts = columns.enumerated().map { index, column in PostgresLoad.cast("c\(index)", to: column.1) }
                let names = columns.map { PostgresLayout.identifier($0.0) }
                // As the SQLite store's replace: the fields become what is given; the change tag and
                // the created and modified stamps keep what the incoming record does not say.
                let systemKept = Set(["___etag", "___createTime", "___createdBy", "___createdDevice", "___modTime", "___modifiedBy", "___modifiedDevice"])
                let updates = columns.dropFirst(2).map { column -> String in
                    let name = PostgresLayout.identifier(column.0)
                    return systemKept.contains(column.0) ? "\(name) = coalesce(EXCLUDED.\(name), t.\(name))" : "\(name) = EXCLUDED.\(name)"
                }.joined(separator: ", ")
                // A name given twice in the batch: its last record wins.
                try link.execute("""
                    INSERT INTO \(layout.table) AS t (\(names.joined(separator: ", ")))
                    SELECT \(casts.joined(separator: ", ")) FROM (SELECT DISTINCT ON (c0, c1) * FROM \(stage) ORDER BY c0, c1, pos DESC) latest
                    ON CONFLICT ("___zone", "___recordID") DO UPDATE SET \(updates)
                    """, "DROP TABLE \(stage)")
            }
            try link.execute("""
                CREATE TEMP TABLE _ck_stage_numbered ON COMMIT DROP AS
                SELECT position, zone, name, type, nextval('\(schema)._ck_seq') AS seq FROM (SELECT * FROM _ck_stage_log ORDER BY position) ordered
                """, """
                INSERT INTO \(schema)._ck_record (zone, "recordName", "recordType", seq, deleted)
                SELECT DISTINCT ON (zone, name) zone, name, type, seq, false FROM _ck_stage_numbered ORDER BY zone, name, position DESC
                ON CONFLICT (zone, "recordName") DO UPDATE SET "recordType" = EXCLUDED."recordType", seq = EXCLUDED.seq,
                    xid = pg_current_xact_id(), deleted = false
                """, "DROP TABLE _ck_stage_log", "DROP TABLE _ck_stage_numbered")
            return records.count
        }
    }

    /// The registry number of each zone, registering the ones the store has not seen.
    private func zoneNumbers(_ zones: Set<ZoneID>) throws -> [ZoneID: Int64] {
        let schema = location.schema
        var numbers: [ZoneID: Int64] = [:]
        for zone in zones.sorted(by: { ($0.scope.rawValue, $0.zoneName, $0.ownerRecordName) < ($1.scope.rawValue, $1.zoneName, $1.ownerRecordName) }) {
            let row = try link.rows("""
                WITH added AS (
                  INSERT INTO \(name: schema)._ck_zone (scope, "zoneName", "ownerRecordName") VALUES (\(zone.scope.rawValue), \(zone.zoneName), \(zone.ownerRecordName))
                  ON CONFLICT DO NOTHING RETURNING id)
                SELECT id::text FROM added
                UNION ALL SELECT id::text FROM \(name: schema)._ck_zone WHERE scope = \(zone.scope.rawValue) AND "zoneName" = \(zone.zoneName) AND "ownerRecordName" = \(zone.ownerRecordName)
                """)
            guard let text = row.first?[0], let number = Int64(text) else { throw PostgresStoreError.server("\(location): zone \(zone) has no number") }
            numbers[zone] = number
        }
        return numbers
    }

    /// Every live record of `type`, in zone and name order.
    public func forEach(recordType type: String, _ body: (Record) throws -> Void) throws {
        let reading = try reader(for: type)
        try link.forEachRow(reading.sql + " ORDER BY z.scope, z.\"zoneName\", z.\"ownerRecordName\", t.\"___recordID\"") { row in
            try body(try reading.decode(row))
        }
    }

    /// The live record with this ID, if any.
    public func record(_ id: RecordID) throws -> Record? {
        guard let zone = try zoneNumber(id.zone),
              let type = try link.rows("""
                  SELECT "recordType" FROM \(name: location.schema)._ck_record WHERE zone = \(zone) AND "recordName" = \(id.recordName) AND NOT deleted
                  """).first?[0] else { return nil }
        let reading = try reader(for: type)
        guard let row = try link.rows("\(unescaped: reading.sql) WHERE t.\"___zone\" = \(zone) AND t.\"___recordID\" = \(id.recordName)").first else { return nil }
        return try reading.decode(row)
    }

    /// What a store holds: records and tombstones per zone and type, its size on the server
    /// and its change token (a transaction watermark: see ``changeWatermark()``).
    public func stats() throws -> StoreStats {
        let schema = location.schema
        var entries: [StoreStats.Entry] = []
        for row in try link.rows("""
            SELECT z.scope, z."zoneName", z."ownerRecordName", r."recordType", count(*) FILTER (WHERE NOT r.deleted)::text, count(*) FILTER (WHERE r.deleted)::text
            FROM \(name: schema)._ck_record r JOIN \(name: schema)._ck_zone z ON z.id = r.zone
            GROUP BY z.scope, z."zoneName", z."ownerRecordName", r."recordType"
            """) {
            guard let scope = row[0].flatMap(DatabaseScope.init(rawValue:)), let zoneName = row[1], let owner = row[2], let type = row[3],
                  let records = row[4].flatMap(Int.init), let tombstones = row[5].flatMap(Int.init) else { continue }
            entries.append(StoreStats.Entry(zone: ZoneID(scope: scope, zoneName: zoneName, ownerRecordName: owner), recordType: type,
                                            records: records, tombstones: tombstones))
        }
        entries.sort { ($0.zone, $0.recordType) < ($1.zone, $1.recordType) }
        let size = try link.rows("""
            SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = \(schema) AND c.relkind = 'r'
            """).first?[0].flatMap(Int64.init) ?? 0
        return StoreStats(path: location.description, fileSize: size,
                          token: ChangeToken(storeID: storeID, sequence: Int64(bitPattern: try changeWatermark())),
                          entries: entries, recordTypeCount: try self.schema().recordTypes.count)
    }

    /// The SELECT (without ORDER BY) that reads a type's records as text, and how to read a row.
    private func reader(for type: String) throws -> (sql: String, decode: ([String?]) throws -> Record) {
        let schema = location.schema
        guard let definition = try self.schema().recordType(named: type) else {
            throw StoreError.schemaChangeRefused(["the store's schema has no record type \(type)"])
        }
        let layout = PostgresLayout(type: definition, schema: schema)
        let fields = definition.userFields.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        var selected = [
            "z.scope", "z.\"zoneName\"", "z.\"ownerRecordName\"", "t.\"___recordID\"", "t.\"___etag\"",
            PostgresLoad.milliseconds("t.\"___createTime\""), "t.\"___createdBy\"", "t.\"___createdDevice\"",
            PostgresLoad.milliseconds("t.\"___modTime\""), "t.\"___modifiedBy\"", "t.\"___modifiedDevice\"",
        ]
        for field in fields {
            selected.append(PostgresLoad.asText("t.\(PostgresLayout.identifier(field.name))", field.type))
            if field.type == .reference { selected.append("t.\(PostgresLayout.identifier(field.name + ":action"))::text") }
        }
        let sql = "SELECT \(selected.joined(separator: ", ")) FROM \(layout.table) t JOIN \(schema)._ck_zone z ON z.id = t.\"___zone\""
        let location = self.location
        return (sql, { row in
            guard let scopeText = row[0], let scope = DatabaseScope(rawValue: scopeText), let zoneName = row[1], let owner = row[2], let name = row[3] else {
                throw PostgresStoreError.notAStore("\(location): a \(type) row lacks its zone or name")
            }
            var record = Record(id: RecordID(recordName: name, zone: ZoneID(scope: scope, zoneName: zoneName, ownerRecordName: owner)), recordType: type)
            record.changeTag = row[4]
            if let created = row[5].flatMap(Int64.init) { record.created = RecordStamp(timestamp: created, userRecordName: row[6], deviceID: row[7]) }
            if let modified = row[8].flatMap(Int64.init) { record.modified = RecordStamp(timestamp: modified, userRecordName: row[9], deviceID: row[10]) }
            var entries: [RecordFields.Entry] = []
            var column = 11
            for field in fields {
                defer { column += field.type == .reference ? 2 : 1 }
                guard let text = row[column] else { continue }
                let value = try PostgresLoad.value(text, field.type, action: field.type == .reference ? row[column + 1] : nil, record: name, field: field.name)
                entries.append(RecordFields.Entry(name: field.name, value: value))
            }
            record.fields = RecordFields(sortedEntries: entries)
            return record
        })
    }
}

extension PostgresLink {
    /// Passes each row of `sql` (every column as text) to `body`, a thousand rows at a time
    /// through a cursor in one read-only transaction: memory holds one batch, whatever the
    /// table's size, and the rows are one consistent state.
    func forEachRow(_ sql: String, batch: Int = 1000, _ body: ([String?]) throws -> Void) throws {
        try execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        do {
            try execute("DECLARE _ck_rows NO SCROLL CURSOR FOR \(sql)")
            while true {
                let rows = try self.rows(PostgresQuery(unsafeSQL: "FETCH FORWARD \(batch) FROM _ck_rows"))
                for row in rows { try body(row) }
                if rows.count < batch { break }
            }
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Sends `rows` (COPY's text format) into `table` with `COPY … FROM STDIN`.
    func copy(into table: String, _ rows: [UInt8]) throws {
        try run { connection, logger in
            try await connection.copyFrom(table: table, logger: logger) { writer in
                var start = 0
                // Pieces of a megabyte: the server starts on the first while the rest travel.
                while start < rows.count {
                    let end = min(rows.count, start + (1 << 20))
                    try await writer.write(ByteBuffer(bytes: rows[start..<end]))
                    start = end
                }
            }
        }
    }
}

/// Values to and from the text the store's bulk path and reads use.
enum PostgresLoad {
    /// One record as a line of COPY's text format: the staging columns, all text.
    static func appendRow(_ record: Record, zone: Int64, fields: [FieldDefinition], position: Int, to out: inout [UInt8]) {
        var values: [String?] = [
            String(zone), record.recordName, record.changeTag,
            record.created.map { String($0.timestamp) }, record.created?.userRecordName, record.created?.deviceID,
            record.modified.map { String($0.timestamp) }, record.modified?.userRecordName, record.modified?.deviceID,
        ]
        for field in fields {
            let value = record.fields[field.name]
            switch value {
            case nil:
                values.append(nil)
                if field.type == .reference { values.append(nil) }
            case .reference(let reference)?:
                values.append(reference.recordName)
                values.append(String(reference.action.code))
            case let value?:
                values.append(text(value))
                if field.type == .reference { values.append(nil) }
            }
        }
        values.append(String(position))
        appendFields(values, to: &out)
    }

    /// A value as the staging column holds it (converted by ``cast(_:to:)``).
    static func text(_ value: FieldValue) -> String {
        switch value {
        case .string(let s): return s
        case .int64(let i): return String(i)
        case .timestamp(let t): return String(t)
        case .double(let d):
            if d.isNaN { return "NaN" }
            if d.isInfinite { return d < 0 ? "-Infinity" : "Infinity" }
            return "\(d)"
        case .bytes(let b):
            var hex = "\\x"
            hex.reserveCapacity(2 + 2 * b.count)
            for byte in b { hex += String(byte, radix: 16).count == 1 ? "0" + String(byte, radix: 16) : String(byte, radix: 16) }
            return hex
        case .reference(let r): return r.recordName
        default: return FieldValueJSON.canonicalText(value)
        }
    }

    /// A COPY text line: fields separated by tabs, `\N` for NULL, backslash escapes.
    static func appendFields(_ values: [String?], to out: inout [UInt8]) {
        for (index, value) in values.enumerated() {
            if index > 0 { out.append(UInt8(ascii: "\t")) }
            guard let value else {
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "N")])
                continue
            }
            for byte in value.utf8 {
                switch byte {
                case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case UInt8(ascii: "\n"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case UInt8(ascii: "\r"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case UInt8(ascii: "\t"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                default: out.append(byte)
                }
            }
        }
        out.append(UInt8(ascii: "\n"))
    }

    /// The SQL that turns a staging column into the table's type. Timestamps travel as
    /// milliseconds and are added to the epoch as an interval: exact, where a float would round.
    static func cast(_ column: String, to type: String) -> String {
        switch type {
        case "text": return column
        case "timestamp", "timestamptz": return "timestamptz 'epoch' + \(column)::bigint * interval '1 millisecond'"
        default: return "\(column)::\(type)"
        }
    }

    /// A timestamptz column read back as milliseconds, exactly.
    static func milliseconds(_ column: String) -> String {
        "(extract(epoch from \(column)) * 1000)::bigint::text"
    }

    /// A field's column read back as text in the form ``value(_:_:action:record:field:)`` reads.
    static func asText(_ column: String, _ type: FieldType) -> String {
        if type.isList { return "\(column)::text" }
        switch type.primitive {
        case .timestamp: return milliseconds(column)
        case .bytes: return "encode(\(column), 'hex')"
        default: return "\(column)::text"
        }
    }

    /// A field's value from the text a read gave for it.
    static func value(_ text: String, _ type: FieldType, action: String?, record: String, field: String) throws -> FieldValue {
        func bad() -> PostgresStoreError {
            PostgresStoreError.notAStore("record \(record) field \(field): the store holds '\(text.prefix(40))', not a \(type)")
        }
        if type.isList || type.primitive == .asset || type.primitive == .location {
            do {
                return try FieldValueJSON.read(try JSONParser.parse(text), as: type)
            } catch {
                throw bad()
            }
        }
        switch type.primitive {
        case .string: return .string(text)
        case .int64: guard let value = Int64(text) else { throw bad() }; return .int64(value)
        case .timestamp: guard let value = Int64(text) else { throw bad() }; return .timestamp(value)
        case .double:
            switch text {
            case "NaN": return .double(.nan)
            case "Infinity": return .double(.infinity)
            case "-Infinity": return .double(-.infinity)
            default: guard let value = Double(text) else { throw bad() }; return .double(value)
            }
        case .number:
            if let value = Int64(text) { return .int64(value) }
            guard let value = Double(text == "NaN" ? "nan" : text) else { throw bad() }
            return .double(value)
        case .bytes:
            var bytes: [UInt8] = []
            bytes.reserveCapacity(text.utf8.count / 2)
            var high: UInt8?
            for character in text.utf8 {
                guard let nibble = character.hexNibble else { throw bad() }
                if let h = high { bytes.append(h << 4 | nibble); high = nil } else { high = nibble }
            }
            guard high == nil else { throw bad() }
            return .bytes(bytes)
        case .reference:
            let code = action.flatMap(Int64.init) ?? 0
            return .reference(Reference(recordName: text, action: ReferenceAction(code: code) ?? .none))
        case .asset, .location:
            throw bad()
        }
    }
}

private extension UInt8 {
    var hexNibble: UInt8? {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return self - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return self - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return self - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
