import GRDBSQLite
import Records
import StoreCore

/// The row of a record type's table that ``StoreSession/forEachRow(_:_:)`` stands on (see
/// ``StoredRow``): one object per statement, moved on row by row.
public final class RecordRow: StoredRow {
    let statement: PreparedStatement
    let layout: TableLayout
    /// Per field position, the statement column that holds the field.
    let columns: [Int32]
    /// The zone of the records the statement reads, when it reads one zone.
    let fixedZone: ZoneID?
    /// The zone of the current row.
    public internal(set) var zone: ZoneID
    /// A number that changes whenever the zone or the record type of the rows may have: a
    /// reader that makes something of them makes it again only when this moves (no string
    /// comparisons per row).
    public internal(set) var zoneSerial = 0

    init(statement: PreparedStatement, layout: TableLayout, columns: [Int32], fixedZone: ZoneID?, zoneSerial: Int) {
        self.statement = statement
        self.layout = layout
        self.columns = columns
        self.fixedZone = fixedZone
        self.zone = fixedZone ?? .defaultZone
        self.zoneSerial = zoneSerial
    }

    public var recordType: String { layout.typeName }
    /// The record type's field names, sorted by their UTF-8 bytes; field positions index them.
    public var fieldNames: [String] { layout.fieldNames }

    /// Where the field `name` stands in ``fieldNames``, or nil when the type has no such field.
    public func position(ofField name: String) -> Int? { layout.fieldsByName[name] }

    @inline(__always) private func text(_ column: Int32) -> UnsafeBufferPointer<UInt8> {
        let count = Int(sqlite3_column_bytes(statement.raw, column))
        return UnsafeBufferPointer(start: sqlite3_column_text(statement.raw, column), count: count)
    }

    @inline(__always) private func optionalText(_ column: Int32) -> UnsafeBufferPointer<UInt8>? {
        statement.isNull(column) ? nil : text(column)
    }

    public var recordName: UnsafeBufferPointer<UInt8> { text(1) }
    public var changeTag: UnsafeBufferPointer<UInt8>? { optionalText(2) }
    /// The record name of the record's parent, and of the share it is the root of.
    public var parent: UnsafeBufferPointer<UInt8>? { optionalText(9) }
    public var share: UnsafeBufferPointer<UInt8>? { optionalText(10) }
    /// A share's details (compact JSON), when the record has them.
    public var shareDetails: UnsafeBufferPointer<UInt8>? { optionalText(11) }

    /// The creation (or, with `modified`, the modification) stamp: its time in milliseconds,
    /// the user and the device; nil when the record has none.
    public func stamp(modified: Bool) -> (
        timestamp: Int64, user: UnsafeBufferPointer<UInt8>?, device: UnsafeBufferPointer<UInt8>?
    )? {
        let column: Int32 = modified ? 6 : 3
        guard !statement.isNull(column) else { return nil }
        return (statement.int64(column), optionalText(column + 1), optionalText(column + 2))
    }

    /// The value of the field at `position`, nil when the record has none. A list, an asset
    /// or a location is not read here (``StoreSession/canReadRows(_:)`` says no to its type).
    @inline(__always) public func value(at position: Int) -> RowValue? {
        let column = columns[position]
        if statement.isNull(column) { return nil }
        switch layout.kinds[position] {
        case .string: return .text(text(column))
        case .int64: return .int64(statement.int64(column))
        case .timestamp: return .timestamp(statement.int64(column))
        case .double: return .double(statement.double(column))
        case .number:
            return statement.columnType(column) == SQLITE_INTEGER
                ? .int64(statement.int64(column)) : .double(statement.double(column))
        case .bytes:
            let count = Int(sqlite3_column_bytes(statement.raw, column))
            return .bytes(UnsafeRawBufferPointer(start: sqlite3_column_blob(statement.raw, column), count: count))
        case .reference:
            let action = statement.optionalInt64(column + 1).flatMap(ReferenceAction.init(code:)) ?? .none
            return .reference(text(column), action)
        case .json:
            preconditionFailure("a list, asset or location on the row path (canReadRows said no)")
        }
    }
}

extension StoreSession {
    /// Whether ``forEachRow(_:_:)`` can read what `query` selects: no sort (rows come in the
    /// store's order), and every record type it reads has fields of scalar types only.
    public func canReadRows(_ query: RecordQuery) -> Bool {
        guard query.sortField == nil, let layouts = try? queryTypes(query) else { return false }
        return layouts.allSatisfy { !$0.kinds.contains(.json) }
    }

    /// The record types `query` reads, in the order ``forEach(_:_:)`` visits them.
    public func recordTypeNames(_ query: RecordQuery) throws -> [String] {
        try queryTypes(query).map(\.typeName)
    }

    /// Calls `body` with each row `query` selects, in the order ``forEach(_:_:)`` gives the
    /// records. The row is only valid inside `body`.
    public func forEachRow(_ query: RecordQuery, _ body: (any StoredRow) throws -> Void) throws {
        try forEachTableRow(query, body)
    }

    /// ``forEachRow(_:_:)`` for this module's own writers, with the row's concrete type.
    @inline(__always) func forEachTableRow(_ query: RecordQuery, _ body: (RecordRow) throws -> Void) throws {
        var remaining = query.limit ?? Int.max
        var statements = QueryStatements()
        var serial = 0
        for compiled in try compile(query) {
            guard remaining > 0 else { return }
            let statement = try statements.statement(db, compiled.sql, compiled.arguments)
            var columns: [Int32] = []
            var column = TableLayout.firstFieldColumn
            for kind in compiled.layout.kinds {
                columns.append(column)
                column += kind == .reference ? 2 : 1
            }
            serial += 1
            let row = RecordRow(
                statement: statement, layout: compiled.layout, columns: columns, fixedZone: compiled.zone,
                zoneSerial: serial)
            var zoneRow: Int64?
            while remaining > 0, try statement.step(db) {
                if row.fixedZone == nil {
                    let number = statement.int64(0)
                    if zoneRow != number {
                        row.zone = try zone(row: number)
                        serial += 1
                        row.zoneSerial = serial
                        zoneRow = number
                    }
                }
                try body(row)
                remaining -= 1
            }
        }
    }
}
