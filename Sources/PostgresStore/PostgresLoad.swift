import Foundation
import Logging
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
    /// Sends `rows` (COPY's text format) into `table` with `COPY … FROM STDIN`: a table of the
    /// connection's search path (a temporary table, or one of the store's namespace once the
    /// session has put it first), by its name unquoted, filling `columns` (all when empty).
    func copy(into table: String, columns: [String] = [], _ rows: [UInt8]) throws {
        try run { connection, logger in try await PostgresLink.send(rows, into: table, columns: columns, on: connection, logger: logger) }
    }

    /// Sends `rows` into `table` through one `COPY … FROM STDIN`, a megabyte at a time: the
    /// server starts on the first while the rest travel.
    static func send(_ rows: [UInt8], into table: String, columns: [String], on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.copyFrom(table: table, columns: columns, logger: logger) { writer in
            var start = 0
            while start < rows.count {
                let end = min(rows.count, start + (1 << 20))
                try await writer.write(ByteBuffer(bytes: rows[start..<end]))
                start = end
            }
        }
    }
}

/// Values to and from the text the store's bulk path and reads use.
enum PostgresLoad {
    /// One record as a line of COPY's text format: the system columns and `fields` in order (a
    /// reference with its action), then `position` when given. Timestamps go as milliseconds for
    /// a staging table's text columns (converted by ``cast(_:to:)``), or, with
    /// `timestampsAsText`, as the text a `timestamptz` column reads, for a COPY straight into a
    /// type's table (``timestampText(_:)`` must have accepted every one of them).
    static func appendRow(_ record: Record, zone: Int64, fields: [FieldDefinition], position: Int?, timestampsAsText: Bool = false, to out: inout [UInt8]) {
        func stamp(_ milliseconds: Int64?) -> String? {
            guard let milliseconds else { return nil }
            return timestampsAsText ? timestampText(milliseconds) : String(milliseconds)
        }
        var values: [String?] = [
            String(zone), record.recordName, record.changeTag,
            stamp(record.created?.timestamp), record.created?.userRecordName, record.created?.deviceID,
            stamp(record.modified?.timestamp), record.modified?.userRecordName, record.modified?.deviceID,
        ]
        values.reserveCapacity(values.count + fields.count + 1)
        for field in fields {
            let value = record.fields[field.name]
            switch value {
            case nil:
                values.append(nil)
                if field.type == .reference { values.append(nil) }
            case .reference(let reference)?:
                values.append(reference.recordName)
                values.append(String(reference.action.code))
            case .timestamp(let milliseconds)? where timestampsAsText:
                values.append(timestampText(milliseconds))
            case let value?:
                values.append(text(value))
                if field.type == .reference { values.append(nil) }
            }
        }
        if let position { values.append(String(position)) }
        appendFields(values, to: &out)
    }

    /// Whether every timestamp of `record` outside lists has a `timestamptz` text form
    /// (``timestampText(_:)``): years 1 to 9999.
    static func timestampsHaveText(_ record: Record) -> Bool {
        if let created = record.created, timestampText(created.timestamp) == nil { return false }
        if let modified = record.modified, timestampText(modified.timestamp) == nil { return false }
        for (_, value) in record.fields {
            if case .timestamp(let milliseconds) = value, timestampText(milliseconds) == nil { return false }
        }
        return true
    }

    /// Milliseconds since 1970 as PostgreSQL's `timestamptz` reads them in UTC,
    /// `2026-03-01 09:30:00.250+00`; nil outside years 1 to 9999.
    static func timestampText(_ milliseconds: Int64) -> String? {
        let (days, remainder) = milliseconds.quotientAndRemainder(dividingBy: 86_400_000)
        let day = remainder < 0 ? days - 1 : days
        let inDay = remainder < 0 ? remainder + 86_400_000 : remainder
        // Days to a civil date (the proleptic Gregorian calendar; H. Hinnant's algorithm).
        let z = day + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let dayOfMonth = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        guard (1...9999).contains(year) else { return nil }
        var text = [UInt8]()
        text.reserveCapacity(26)
        func digits(_ value: Int64, _ count: Int) {
            var divisor: Int64 = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(year, 4); text.append(UInt8(ascii: "-")); digits(month, 2); text.append(UInt8(ascii: "-")); digits(dayOfMonth, 2)
        text.append(UInt8(ascii: " "))
        digits(inDay / 3_600_000, 2); text.append(UInt8(ascii: ":")); digits(inDay / 60_000 % 60, 2); text.append(UInt8(ascii: ":"))
        digits(inDay / 1000 % 60, 2); text.append(UInt8(ascii: ".")); digits(inDay % 1000, 3)
        text.append(contentsOf: [UInt8(ascii: "+"), UInt8(ascii: "0"), UInt8(ascii: "0")])
        return String(decoding: text, as: UTF8.self)
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
