import Foundation
import NIOCore
import PostgresNIO
import Records
import Store

/// How a type's rows are read back: the SELECT (every column as text, without WHERE or ORDER
/// BY; the table is `t`) and how a row of it becomes a record.
struct PostgresReader {
    let definition: RecordTypeDefinition
    let fields: [FieldDefinition]
    let sql: String
    private let session: PostgresSession

    init(_ definition: RecordTypeDefinition, table: String, session: PostgresSession) {
        self.definition = definition
        self.session = session
        fields = definition.userFields.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        var selected = [
            "t.\"___zone\"::text", "t.\"___recordID\"", "t.\"___etag\"",
            PostgresLoad.milliseconds("t.\"___createTime\""), "t.\"___createdBy\"", "t.\"___createdDevice\"",
            PostgresLoad.milliseconds("t.\"___modTime\""), "t.\"___modifiedBy\"", "t.\"___modifiedDevice\"",
        ]
        for field in fields {
            selected.append(PostgresLoad.asText("t.\(PostgresLayout.identifier(field.name))", field.type))
            if field.type == .reference { selected.append("t.\(PostgresLayout.identifier(field.name + ":action"))::text") }
        }
        sql = "SELECT \(selected.joined(separator: ", ")) FROM \(table) t"
    }

    /// The record a row of ``sql`` holds.
    func decode(_ row: [String?]) throws -> Record {
        let type = definition.name
        guard let zoneNumber = row[0].flatMap(Int64.init), let name = row[1] else {
            throw PostgresStoreError.notAStore("\(session.location): a \(type) row lacks its zone or name")
        }
        var record = Record(id: RecordID(recordName: name, zone: try session.zone(number: zoneNumber)), recordType: type)
        record.changeTag = row[2]
        if let created = row[3].flatMap(Int64.init) { record.created = RecordStamp(timestamp: created, userRecordName: row[4], deviceID: row[5]) }
        if let modified = row[6].flatMap(Int64.init) { record.modified = RecordStamp(timestamp: modified, userRecordName: row[7], deviceID: row[8]) }
        var entries: [RecordFields.Entry] = []
        var column = 9
        for field in fields {
            defer { column += field.type == .reference ? 2 : 1 }
            guard let text = row[column] else { continue }
            let value = try PostgresLoad.value(text, field.type, action: field.type == .reference ? row[column + 1] : nil, record: name, field: field.name)
            entries.append(RecordFields.Entry(name: field.name, value: value))
        }
        record.fields = RecordFields(sortedEntries: entries)
        return record
    }
}

extension PostgresLink {
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
