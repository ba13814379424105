import Foundation
import GRDBSQLite
import Records
import StoreCore

// GRDB by name, so that its `Record` class stays out of the way of ckport's `Record`.
import class GRDB.Database
import struct GRDB.DatabaseError
import struct GRDB.DatabaseValue
import class GRDB.Row

/// How one record type lives in SQLite: a table named after the type, keyed by zone and record
/// name, with the system fields in CloudKit's own `___` names and one typed column per field.
///
/// | field type                   | column                                                |
/// |------------------------------|-------------------------------------------------------|
/// | STRING                       | TEXT                                                  |
/// | INT64, TIMESTAMP (ms)        | INTEGER                                               |
/// | DOUBLE                       | no affinity (REAL affinity loses the sign of -0.0)   |
/// | NUMBER                       | no affinity, so 3 and 3.0 stay apart                  |
/// | BYTES                        | BLOB                                                  |
/// | REFERENCE                    | TEXT (target record name) + `field:action` INTEGER    |
/// | ASSET, LOCATION, LIST<…>     | TEXT holding the Web Services JSON of the value       |
///
/// A missing field is NULL, so an empty string, an empty list and "no value" stay apart.
///
/// A class, so that handing a layout to every save costs one reference count, not one per
/// string and array inside it.
final class TableLayout: Sendable {
    struct FieldColumn {
        let name: String
        let type: FieldType
        let column: String
        let actionColumn: String?
    }

    /// The system columns, in the order every statement uses.
    static let systemColumns = [
        "___zone", "___recordID", "___etag",
        "___createTime", "___createdBy", "___createdDevice",
        "___modTime", "___modifiedBy", "___modifiedDevice",
        "___parent", "___share", "___shareDetails",
    ]

    /// Whether each system column is read when a transform asks only for some fields (see
    /// ``RecordSession/updateInPlace(type:into:renames:writes:reads:_:)``): the zone, the
    /// record's name and its two times; its change tag, creators, devices and links are not.
    static let systemColumnsForReads: [Bool] = systemColumns.map {
        ["___zone", "___recordID", "___createTime", "___modTime"].contains($0)
    }

    /// The statement position (1-based) of a row's first field column.
    static let firstFieldParameter = Int32(systemColumns.count + 1)
    /// The result column (0-based) of a row's first field column.
    static let firstFieldColumn = Int32(systemColumns.count)

    /// The system columns that store format 1 lacked, with their SQL types; an upgrade adds them.
    static let linkColumns = [("___parent", "TEXT"), ("___share", "TEXT"), ("___shareDetails", "TEXT")]

    /// How a column is read back; a trivial enum, so the decode loop copies nothing.
    enum ColumnKind {
        case string, int64, timestamp, double, bytes, number, reference, json
    }

    let typeName: String
    let table: String
    let fields: [FieldColumn]
    let fieldNames: [String]
    let kinds: [ColumnKind]
    /// Whether each field has a second column (a reference's action).
    let hasActionColumn: [Bool]
    let fieldsByName: [String: Int]
    /// All columns in statement order.
    let columnList: String
    let insertSQL: String
    let updateSQL: String
    let selectSQL: String

    init(_ type: RecordTypeDefinition) {
        typeName = type.name
        table = quoted(type.name)
        // Sorted by name, the order records keep their fields in, so decoding appends.
        let names = type.userFields.map(\.name)
        fields = type.userFields.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }.map { field in
            let column = TableLayout.columnName(field.name, among: names)
            return FieldColumn(
                name: field.name, type: field.type, column: quoted(column),
                actionColumn: field.type == .reference ? quoted(column + ":action") : nil)
        }
        fieldNames = fields.map(\.name)
        kinds = fields.map { field in
            if field.type.isList { return .json }
            switch field.type.primitive {
            case .string: return .string
            case .int64: return .int64
            case .timestamp: return .timestamp
            case .double: return .double
            case .bytes: return .bytes
            case .number: return .number
            case .reference: return .reference
            case .asset, .location: return .json
            }
        }
        hasActionColumn = fields.map { $0.actionColumn != nil }
        var index: [String: Int] = [:]
        for (i, field) in fields.enumerated() { index[field.name] = i }
        fieldsByName = index
        var columns = TableLayout.systemColumns
        for field in fields {
            columns.append(field.column)
            if let action = field.actionColumn { columns.append(action) }
        }
        columnList = columns.joined(separator: ", ")
        insertSQL =
            "INSERT INTO \(table) (\(columnList)) VALUES (\(columns.indices.map { "?\($0 + 1)" }.joined(separator: ", ")))"
        let assignments = columns.enumerated().dropFirst(2).map { "\($0.element) = ?\($0.offset + 1)" }
        updateSQL = "UPDATE \(table) SET \(assignments.joined(separator: ", ")) WHERE ___zone = ?1 AND ___recordID = ?2"
        selectSQL = "SELECT \(columnList) FROM \(table)"
    }

    /// The column that holds a field's values: the field's name, unless another field of the
    /// type has the same name but for case — CloudKit keeps `a` and `A` apart, SQLite's names
    /// do not — and then the name, `~` and where its capitals are (`a~`, `A~0`, `aB~1`,
    /// `AB~0.1`), which no two such fields share. CloudKit's names hold no `~`, so no field's
    /// own name is ever one of these.
    static func columnName(_ field: String, among names: [String]) -> String {
        let folded = field.lowercased()
        guard names.contains(where: { $0 != field && $0.lowercased() == folded }) else { return field }
        let capitals = field.unicodeScalars.enumerated().filter { ("A"..."Z").contains($0.element) }.map {
            String($0.offset)
        }
        return field + "~" + capitals.joined(separator: ".")
    }

    /// Whether two fields of `type` have the same name but for case (and so columns of the
    /// other form).
    static func hasCaseTwins(_ type: RecordTypeDefinition) -> Bool {
        let folded = type.userFields.map { $0.name.lowercased() }
        return Set(folded).count != folded.count
    }

    /// The column of field `name` of `type` (unquoted).
    static func column(of name: String, in type: RecordTypeDefinition?) -> String {
        columnName(name, among: type?.userFields.map(\.name) ?? [name])
    }

    var columnCount: Int {
        TableLayout.systemColumns.count + fields.count + fields.filter { $0.actionColumn != nil }.count
    }

    // MARK: DDL

    func createStatements(for type: RecordTypeDefinition) -> [String] {
        var definitions =
            [
                "___zone INTEGER NOT NULL", "___recordID TEXT NOT NULL", "___etag TEXT",
                "___createTime INTEGER", "___createdBy TEXT", "___createdDevice TEXT",
                "___modTime INTEGER", "___modifiedBy TEXT", "___modifiedDevice TEXT",
            ] + TableLayout.linkColumns.map { "\($0.0) \($0.1)" }
        for field in fields { definitions.append(contentsOf: TableLayout.columnDefinitions(field)) }
        definitions.append("PRIMARY KEY (___zone, ___recordID)")
        var statements = ["CREATE TABLE \(table) (\n  \(definitions.joined(separator: ",\n  "))\n) WITHOUT ROWID"]
        for field in type.userFields where TableLayout.needsIndex(field) {
            statements.append(
                TableLayout.indexStatement(type: type.name, column: TableLayout.column(of: field.name, in: type)))
        }
        return statements
    }

    static func columnDefinitions(_ field: FieldColumn) -> [String] {
        let sqlType: String
        if field.type.isList {
            sqlType = "TEXT"
        } else {
            switch field.type.primitive {
            case .string, .asset, .location, .reference: sqlType = "TEXT"
            case .int64, .timestamp: sqlType = "INTEGER"
            // No affinity for numbers: REAL affinity would store -0.0 as the integer 0 and
            // read it back as 0.0, and would fold NUMBER's 3 and 3.0 together.
            case .double, .number: sqlType = ""
            case .bytes: sqlType = "BLOB"
            }
        }
        var definitions = [sqlType.isEmpty ? field.column : "\(field.column) \(sqlType)"]
        if let action = field.actionColumn { definitions.append("\(action) INTEGER") }
        return definitions
    }

    /// QUERYABLE and SORTABLE fields are indexed, and so is every single REFERENCE, which
    /// CloudKit indexes itself and which cascading deletes look up.
    static func needsIndex(_ field: FieldDefinition) -> Bool {
        field.options.needsIndex || field.type == .reference
    }

    /// The index on a field's column (see ``columnName(_:among:)``: a field's name, most often).
    static func indexName(type: String, column: String) -> String {
        quoted("\(type).\(column)")
    }

    static func indexStatement(type: String, column: String) -> String {
        "CREATE INDEX \(indexName(type: type, column: column)) ON \(quoted(type)) (\(quoted(column)))"
    }

    // MARK: Rows

    /// Binds a record in statement order (for both `insertSQL` and `updateSQL`): every
    /// parameter, a field the record lacks as NULL.
    func bind(_ record: Record, zone: Int64, to statement: PreparedStatement) {
        statement.resetForRebinding()
        statement.bind(1, zone)
        statement.bind(2, record.recordName)
        statement.bind(3, record.changeTag)
        statement.bind(4, record.created?.timestamp)
        statement.bind(5, record.created?.userRecordName)
        statement.bind(6, record.created?.deviceID)
        statement.bind(7, record.modified?.timestamp)
        statement.bind(8, record.modified?.userRecordName)
        statement.bind(9, record.modified?.deviceID)
        statement.bind(10, record.parent)
        statement.bind(11, record.share)
        statement.bind(12, record.shareDetails)
        // Both lists are sorted by name: walk them side by side, borrowing rather than copying
        // (this loop runs for every field of every record saved).
        record.fields.entries.withUnsafeBufferPointer { entries in
            fieldNames.withUnsafeBufferPointer { names in
                hasActionColumn.withUnsafeBufferPointer { actions in
                    var next = 0
                    var index = TableLayout.firstFieldParameter
                    for position in 0..<names.count {
                        var found = -1
                        while next < entries.count {
                            if entries[next].name == names[position] {
                                found = next
                                next += 1
                                break
                            }
                            if RecordFields.precedes(names[position], entries[next].name) { break }
                            next += 1
                        }
                        if found < 0 {
                            statement.bindNull(index)
                            if actions[position] {
                                index += 1
                                statement.bindNull(index)
                            }
                            index += 1
                        } else {
                            TableLayout.bind(
                                entries[found].value, hasActionColumn: actions[position], at: &index, to: statement)
                        }
                    }
                }
            }
        }
    }

    /// Binds one field's value (and a reference's action) at `index`, and moves `index` past it.
    @inline(__always) static func bind<Sink: ColumnSink>(
        _ value: FieldValue?, _ field: FieldColumn, at index: inout Int32, to statement: Sink
    ) {
        bind(value, hasActionColumn: field.actionColumn != nil, at: &index, to: statement)
    }

    /// Binds a value that may be absent (NULL, and NULL for a reference's action).
    @inline(__always) static func bind<Sink: ColumnSink>(
        _ value: FieldValue?, hasActionColumn: Bool, at index: inout Int32, to statement: Sink
    ) {
        guard let value else {
            statement.bindNull(index)
            if hasActionColumn {
                index += 1
                statement.bindNull(index)
            }
            index += 1
            return
        }
        bind(value, hasActionColumn: hasActionColumn, at: &index, to: statement)
    }

    @inline(__always) static func bind<Sink: ColumnSink>(
        _ value: FieldValue, hasActionColumn: Bool, at index: inout Int32, to statement: Sink
    ) {
        switch value {
        case .string(let s): statement.bind(index, s)
        case .int64(let i): statement.bind(index, i)
        case .timestamp(let t): statement.bind(index, t)
        case .double(let d): statement.bind(index, d)
        case .bytes(let b): statement.bind(index, blob: b)
        case .reference(let r):
            statement.bind(index, r.recordName)
            if hasActionColumn {
                index += 1
                statement.bind(index, r.action.code)
            }
        default:
            statement.bind(index, FieldValueJSON.canonicalText(value))
            if hasActionColumn {
                index += 1
                statement.bindNull(index)
            }
        }
        index += 1
    }

    /// The record in a row selecting `columnList` (a statement's current row, or a copy of
    /// one); with `only`, just the fields it marks (by position in `fields`) besides the system
    /// fields.
    func decode<Row: RowColumns>(_ row: Row, zone: ZoneID, only: [Bool]? = nil) throws -> Record {
        @inline(__always) func text(_ index: Int32) -> String { String(decoding: row.textBytes(index), as: UTF8.self) }
        @inline(__always) func optionalText(_ index: Int32) -> String? { row.isNull(index) ? nil : text(index) }
        var record = Record(id: RecordID(recordName: text(1), zone: zone), recordType: typeName)
        record.changeTag = optionalText(2)
        if let created = row.optionalInt64(3) {
            record.created = RecordStamp(timestamp: created, userRecordName: optionalText(4), deviceID: optionalText(5))
        }
        if let modified = row.optionalInt64(6) {
            record.modified = RecordStamp(
                timestamp: modified, userRecordName: optionalText(7), deviceID: optionalText(8))
        }
        record.parent = optionalText(9)
        record.share = optionalText(10)
        record.shareDetails = optionalText(11)
        var entries: [RecordFields.Entry] = []
        entries.reserveCapacity(fields.count)
        var index = TableLayout.firstFieldColumn
        for position in 0..<kinds.count {
            defer { index += kinds[position] == .reference ? 2 : 1 }
            if let only, !only[position] { continue }
            if let value = try value(row, position: position, column: index) {
                entries.append(RecordFields.Entry(name: fieldNames[position], value: value))
            }
        }
        // The layout's fields are sorted by name, so the entries are too.
        record.fields = RecordFields(sortedEntries: entries)
        return record
    }

    /// A row's field values without a record: one per field of the layout in its order, nil
    /// where the column is NULL or `only` leaves the field out. Read as ``decode(_:zone:only:)``
    /// reads them.
    func decodeValues<Row: RowColumns>(_ row: Row, only: [Bool]?, into values: inout [FieldValue?]) throws {
        values.removeAll(keepingCapacity: true)
        var index = TableLayout.firstFieldColumn
        for position in 0..<kinds.count {
            defer { index += kinds[position] == .reference ? 2 : 1 }
            if let only, !only[position] {
                values.append(nil)
            } else {
                values.append(try value(row, position: position, column: index))
            }
        }
    }

    /// The value of the field at `position`, whose (first) column is `index`; nil when NULL.
    @inline(__always)
    private func value<Row: RowColumns>(_ row: Row, position: Int, column index: Int32) throws -> FieldValue? {
        @inline(__always) func text(_ index: Int32) -> String { String(decoding: row.textBytes(index), as: UTF8.self) }
        if row.isNull(index) { return nil }
        switch kinds[position] {
        case .string: return .string(text(index))
        case .int64: return .int64(row.int64(index))
        case .timestamp: return .timestamp(row.int64(index))
        case .double: return .double(row.double(index))
        case .bytes: return .bytes(row.blob(index))
        case .number:
            return row.columnType(index) == 1  // SQLITE_INTEGER
                ? .int64(row.int64(index)) : .double(row.double(index))
        case .reference:
            let action = row.optionalInt64(index + 1).flatMap(ReferenceAction.init(code:)) ?? .none
            return .reference(Reference(recordName: text(index), action: action))
        case .json:
            return try decodeJSON(text(index), fields[position])
        }
    }

    private func decodeJSON(_ text: String, _ field: FieldColumn) throws -> FieldValue {
        do {
            return try FieldValueJSON.read(try JSONParser.parse(text), as: field.type)
        } catch {
            throw StoreError.corrupt(
                "\(typeName).\(field.name) holds a value that is not valid \(field.type): \(error)")
        }
    }

    /// The list, asset or location of the field at `position` from the JSON text of its column
    /// (a statement's current row, or a copy of it): read as ``decode(_:zone:only:)`` reads it.
    func decodeJSON(_ bytes: UnsafeRawBufferPointer, position: Int) throws -> FieldValue {
        let field = fields[position]
        do {
            return try FieldValueJSON.read(try JSONParser.parse(bytes), as: field.type)
        } catch {
            throw StoreError.corrupt(
                "\(typeName).\(field.name) holds a value that is not valid \(field.type): \(error)")
        }
    }
}

extension TableLayout {
    /// The most columns a table may have: SQLite's default limit (SQLITE_MAX_COLUMN).
    static let maximumColumns = 2000

    static func oversizedTypes(in schema: Schema) -> [String] {
        schema.recordTypes.compactMap { type in
            let columns = TableLayout(type).columnCount
            guard columns > maximumColumns else { return nil }
            return
                "record type \(type.name) has \(type.userFields.count) fields, which need \(columns) columns in the store; "
                + "a table holds at most \(maximumColumns) (SQLite's limit), counting \(systemColumns.count) for system fields and one more for each REFERENCE field's action"
        }
    }
}

extension TableLayout {
    /// Record types whose names differ only in case: CloudKit keeps `Note` and `note` apart,
    /// SQLite's table names do not. (Fields are kept apart by their columns' names, see
    /// ``columnName(_:among:)``; a type is rare enough to be refused, in words that say where
    /// it can go.)
    static func caseTwinTypes(in schema: Schema) -> [String] {
        var seen: [String: String] = [:]
        var problems: [String] = []
        for type in schema.recordTypes {
            let folded = type.name.lowercased()
            if let other = seen[folded] {
                problems.append(
                    "record types '\(other)' and '\(type.name)' differ only in case, which CloudKit allows but a SQLite store's tables cannot keep apart; keep this schema in a PostgreSQL store, which holds them"
                )
            } else {
                seen[folded] = type.name
            }
        }
        return problems
    }
}

extension RecordStore {
    /// Why the store cannot hold `schema` although CloudKit's schema language allows it (a
    /// record type with more fields than a table can have columns), one sentence a type;
    /// empty when it can. A store refuses such a schema before it changes anything.
    public static func schemaProblems(_ schema: Schema) -> [String] {
        TableLayout.oversizedTypes(in: schema)
    }
}
