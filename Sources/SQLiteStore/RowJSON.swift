import GRDBSQLite
import Records
import StoreCore

/// Records written as canonical JSON (CloudKit Web Services' shape) straight from the rows of
/// their tables, without a ``Record`` in between: what a JSON export of a store writes, byte for
/// byte the same as decoding each row into a record and encoding that, at a fraction of the
/// cost (no String per column, no field array, nothing freed on another thread).
extension StoreSession {
    /// Whether ``forEachCanonicalJSON(_:into:_:)`` can write what `query` selects: any query
    /// without a sort (rows come in the store's order). Lists, assets and locations, which the
    /// store keeps as JSON text, are read and written again as the general path does; every
    /// other column goes from its bytes to the output.
    public func canWriteJSONFromRows(_ query: RecordQuery) -> Bool {
        guard query.sortField == nil else { return false }
        return (try? queryTypes(query)) != nil
    }

    /// Appends each record `query` selects to `out` as one canonical JSON object, in the order
    /// ``forEach(_:_:)`` gives, and calls `written` after each. `starting` hears the zone and
    /// record type before the first record of each run of records that share them (a backup's
    /// members).
    public func forEachCanonicalJSON(
        _ query: RecordQuery, into out: inout JSONWriter,
        starting: ((ZoneID, String, inout JSONWriter) throws -> Void)? = nil,
        _ written: (inout JSONWriter) throws -> Void
    ) throws {
        var layout: TableLayout?
        var names: RowJSONNames?
        var zonePart: [UInt8] = []
        var zoneSerial = -1
        var last: (zone: ZoneID, type: String)?
        try forEachTableRow(query) { row in
            if layout !== row.layout {
                layout = row.layout
                names = row.layout.jsonNames
            }
            if zoneSerial != row.zoneSerial {
                zoneSerial = row.zoneSerial
                zonePart = RowJSON.zonePart(row.zone)
                if let starting, last?.zone != row.zone || last?.type != row.recordType {
                    last = (row.zone, row.recordType)
                    try starting(row.zone, row.recordType, &out)
                }
            }
            try RowJSON.append(row.statement, layout: row.layout, names: names!, zonePart: zonePart, to: &out)
            try written(&out)
        }
    }
}

/// The pieces of a record's JSON that a table's layout fixes, made once per export. They lie
/// in one buffer, each field's found by ranges, so that writing a record takes no reference
/// to an array per field (each one a retain and a release, a tenth of the writing thread's
/// time when they were arrays of their own).
struct RowJSONNames {
    /// Per field: its column kind, and where its pieces lie in ``bytes``: the opening
    /// `"title":{"value":` (the comma before all but the first field written is written apart),
    /// the closing `,"type":"STRING"}` (for NUMBER fields, the INT64 form), and the closing for a
    /// NUMBER field holding a double, `,"type":"DOUBLE"}`.
    struct Field {
        var kind: TableLayout.ColumnKind
        var opening: Range<Int>
        var closing: Range<Int>
        var doubleClosing: Range<Int>
    }

    let bytes: [UInt8]
    /// `,"recordType":"Task"`
    let recordType: Range<Int>
    let fields: [Field]
}

extension TableLayout {
    var jsonNames: RowJSONNames {
        var out = JSONWriter(capacity: 64 * (fields.count + 1))
        func piece(_ build: (inout JSONWriter) -> Void) -> Range<Int> {
            let start = out.bytes.count
            build(&out)
            return start..<out.bytes.count
        }
        let recordType = piece {
            $0.raw(",\"recordType\":")
            $0.string(typeName)
        }
        var pieces: [RowJSONNames.Field] = []
        for (field, kind) in zip(fields, kinds) {
            let opening = piece {
                $0.string(field.name)
                $0.raw(":{\"value\":")
            }
            var type = FieldType(field.type.primitive == .number ? .int64 : field.type.primitive)
            type.isEncrypted = field.type.isEncrypted
            let closing = piece { type.appendTypeClosing(to: &$0.bytes) }
            var double = FieldType(.double)
            double.isEncrypted = field.type.isEncrypted
            let doubleClosing = piece { double.appendTypeClosing(to: &$0.bytes) }
            pieces.append(
                RowJSONNames.Field(kind: kind, opening: opening, closing: closing, doubleClosing: doubleClosing))
        }
        return RowJSONNames(bytes: out.bytes, recordType: recordType, fields: pieces)
    }
}

enum RowJSON {
    /// `,"scope":"shared","zoneID":{"zoneName":"…","ownerRecordName":"…"}`
    static func zonePart(_ zone: ZoneID) -> [UInt8] {
        var out = JSONWriter(capacity: 128)
        out.raw(",\"scope\":")
        out.string(zone.scope.rawValue)
        out.raw(",\"zoneID\":{\"zoneName\":")
        out.string(zone.zoneName)
        out.raw(",\"ownerRecordName\":")
        out.string(zone.ownerRecordName)
        out.byte(UInt8(ascii: "}"))
        return out.bytes
    }

    /// Text of a column, as the general path writes it: valid UTF-8 as it is (what ckport
    /// stores), anything else through a String, which repairs it the same way.
    @inline(__always) static func text<Row: RowColumns>(_ statement: Row, _ index: Int32, to out: inout JSONWriter) {
        let utf8 = statement.textBytes(index)
        guard utf8.count > 0 else {
            out.raw("\"\"")
            return
        }
        if utf8.allSatisfy({ $0 < 0x80 }) {
            out.string(utf8: utf8)
        } else {
            out.string(String(decoding: utf8, as: UTF8.self))
        }
    }

    /// `{"timestamp":…,"userRecordName":…,"deviceID":…}` from three columns, when there is a time.
    @inline(__always) static func stamp<Row: RowColumns>(
        _ statement: Row, at index: Int32, key: StaticString, to out: inout JSONWriter
    ) {
        guard !statement.isNull(index) else { return }
        out.raw(key)
        out.raw("{\"timestamp\":")
        out.int(statement.int64(index))
        if !statement.isNull(index + 1) {
            out.raw(",\"userRecordName\":")
            text(statement, index + 1, to: &out)
        }
        if !statement.isNull(index + 2) {
            out.raw(",\"deviceID\":")
            text(statement, index + 2, to: &out)
        }
        out.byte(UInt8(ascii: "}"))
    }

    /// The record in the statement's current row (selecting the layout's `columnList`), as
    /// ``JSONRecordCodec``'s canonical encoding writes it.
    static func append<Row: RowColumns>(
        _ statement: Row, layout: TableLayout, names: RowJSONNames, zonePart: [UInt8], to out: inout JSONWriter
    ) throws {
        try names.bytes.withUnsafeBufferPointer { pieces in
            try names.fields.withUnsafeBufferPointer { fields in
                try append(
                    statement, layout: layout, pieces: pieces, recordType: names.recordType, fields: fields,
                    zonePart: zonePart, to: &out)
            }
        }
    }

    @inline(__always)
    private static func append<Row: RowColumns>(
        _ statement: Row, layout: TableLayout, pieces: UnsafeBufferPointer<UInt8>, recordType: Range<Int>,
        fields: UnsafeBufferPointer<RowJSONNames.Field>, zonePart: [UInt8], to out: inout JSONWriter
    ) throws {
        out.raw("{\"recordName\":")
        text(statement, 1, to: &out)
        out.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: pieces[recordType]))
        out.bytes.append(contentsOf: zonePart)
        if !statement.isNull(2) {
            out.raw(",\"recordChangeTag\":")
            text(statement, 2, to: &out)
        }
        stamp(statement, at: 3, key: ",\"created\":", to: &out)
        stamp(statement, at: 6, key: ",\"modified\":", to: &out)
        if !statement.isNull(9) {
            out.raw(",\"parent\":{\"recordName\":")
            text(statement, 9, to: &out)
            out.byte(UInt8(ascii: "}"))
        }
        if !statement.isNull(10) {
            out.raw(",\"share\":{\"recordName\":")
            text(statement, 10, to: &out)
            out.byte(UInt8(ascii: "}"))
        }
        out.raw(",\"fields\":{")
        var first = true
        var index = TableLayout.firstFieldColumn
        for position in 0..<fields.count {
            let field = fields[position]
            defer { index += field.kind == .reference ? 2 : 1 }
            if statement.isNull(index) { continue }
            if !first { out.byte(UInt8(ascii: ",")) }
            first = false
            out.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: pieces[field.opening]))
            var closing = field.closing
            switch field.kind {
            case .string:
                text(statement, index, to: &out)
            case .int64, .timestamp:
                out.int(statement.int64(index))
            case .double:
                out.double(statement.double(index))
            case .number:
                if statement.columnType(index) == SQLITE_INTEGER {
                    out.int(statement.int64(index))
                } else {
                    out.double(statement.double(index))
                    closing = field.doubleClosing
                }
            case .bytes:
                out.byte(UInt8(ascii: "\""))
                Base64.append(statement.blob(index), to: &out.bytes)
                out.byte(UInt8(ascii: "\""))
            case .reference:
                out.raw("{\"recordName\":")
                text(statement, index, to: &out)
                out.raw(",\"action\":\"")
                let action = statement.optionalInt64(index + 1).flatMap(ReferenceAction.init(code:)) ?? .none
                out.bytes.append(contentsOf: action.rawValue.utf8)
                out.raw("\"}")
            case .json:
                try appendJSONColumn(statement, index, layout: layout, position: position, to: &out)
                continue
            }
            out.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: pieces[closing]))
        }
        out.byte(UInt8(ascii: "}"))
        if !statement.isNull(11) { appendShareDetails(statement, 11, to: &out) }
        out.byte(UInt8(ascii: "}"))
    }

    /// A share's details, as members of the record object (as ``JSONRecordCodec`` splices them).
    @inline(never)
    static func appendShareDetails<Row: RowColumns>(_ statement: Row, _ index: Int32, to out: inout JSONWriter) {
        let text = statement.textBytes(index)
        let count = text.count
        guard count > 2, text.first == UInt8(ascii: "{"), text.last == UInt8(ascii: "}") else { return }
        out.byte(UInt8(ascii: ","))
        out.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[1..<(count - 1)]))
    }

    /// A list, asset or location as the general path writes it: the value read back from the
    /// JSON text the store keeps, then its type (a list's with its element type), encrypted
    /// when the field is. Apart from ``append(_:layout:names:zonePart:to:)``, whose loop over
    /// scalar columns stays lean.
    @inline(never)
    static func appendJSONColumn<Row: RowColumns>(
        _ statement: Row, _ index: Int32, layout: TableLayout, position: Int, to out: inout JSONWriter
    ) throws {
        let value = try layout.decodeJSON(UnsafeRawBufferPointer(statement.textBytes(index)), position: position)
        FieldValueJSON.write(value, style: .canonical, to: &out)
        var type = value.type
        if layout.fields[position].type.isEncrypted { type.isEncrypted = true }
        type.appendTypeClosing(to: &out.bytes)
    }
}
