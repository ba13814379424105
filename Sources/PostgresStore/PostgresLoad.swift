import Foundation
import Logging
import NIOCore
import PostgresNIO
import Records
import StoreCore

/// How a type's rows are read back: the SELECT (every column as text, without WHERE or ORDER
/// BY; the table is `t`) and how a row of it becomes a record.
struct PostgresReader {
    let definition: RecordTypeDefinition
    let fields: [FieldDefinition]
    /// The select list, over the table as `t`.
    let columns: String
    let sql: String
    /// The table read, as SQL names it.
    let table: String
    private let session: PostgresSession

    init(_ definition: RecordTypeDefinition, table: String, session: PostgresSession) {
        self.definition = definition
        self.session = session
        fields = definition.userFields.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        var selected = [
            "t.\"___zone\"::text", "t.\"___recordID\"", "t.\"___etag\"",
            PostgresLoad.milliseconds("t.\"___createTime\""), "t.\"___createdBy\"", "t.\"___createdDevice\"",
            PostgresLoad.milliseconds("t.\"___modTime\""), "t.\"___modifiedBy\"", "t.\"___modifiedDevice\"",
            "t.\"___parent\"", "t.\"___share\"", "t.\"___shareDetails\"",
        ]
        for field in fields {
            selected.append(PostgresLoad.asText("t.\(PostgresLayout.identifier(field.name))", field.type))
            if field.type == .reference {
                selected.append("t.\(PostgresLayout.identifier(field.name + ":action"))::text")
            }
        }
        columns = selected.joined(separator: ", ")
        self.table = table
        sql = "SELECT \(columns) FROM \(table) t"
    }

    /// The record a row of ``sql`` holds.
    func decode(_ row: [String?]) throws -> Record {
        let type = definition.name
        guard let zoneNumber = row[0].flatMap(Int64.init), let name = row[1] else {
            throw PostgresStoreError.notAStore("\(session.location): a \(type) row lacks its zone or name")
        }
        var record = Record(
            id: RecordID(recordName: name, zone: try session.zone(number: zoneNumber)), recordType: type)
        record.changeTag = row[2]
        if let created = row[3].flatMap(Int64.init) {
            record.created = RecordStamp(timestamp: created, userRecordName: row[4], deviceID: row[5])
        }
        if let modified = row[6].flatMap(Int64.init) {
            record.modified = RecordStamp(timestamp: modified, userRecordName: row[7], deviceID: row[8])
        }
        record.parent = row[9]
        record.share = row[10]
        record.shareDetails = row[11]
        var entries: [RecordFields.Entry] = []
        var column = PostgresLayout.systemColumns.count
        for field in fields {
            defer { column += field.type == .reference ? 2 : 1 }
            guard let text = row[column] else { continue }
            let value = try PostgresLoad.value(
                text, field.type, action: field.type == .reference ? row[column + 1] : nil, record: name,
                field: field.name)
            entries.append(RecordFields.Entry(name: field.name, value: value))
        }
        record.fields = RecordFields(sortedEntries: entries)
        return record
    }
}

extension PostgresLink {
    /// Sends `rows` (COPY's text format, or with `binary` its binary format) into `table` with
    /// `COPY … FROM STDIN`: a table of the connection's search path (a temporary table, or one
    /// of the store's namespace once the session has put it first), by its name unquoted,
    /// filling `columns` (all when empty).
    func copy(into table: String, columns: [String] = [], binary: Bool = false, _ rows: [UInt8]) throws {
        try run { connection, logger in
            try await PostgresLink.send(
                [rows], into: table, columns: columns, binary: binary, on: connection, logger: logger)
        }
    }

    /// Sends `parts` into `table` through one `COPY … FROM STDIN`, a megabyte at a time: the
    /// server starts on the first while the rest travel. `binary`: each part is rows in COPY's
    /// binary format as a ``COPYBinary`` writes them, header and trailer included (they are
    /// sent once, around all the rows), else rows in its text format.
    static func send(
        _ parts: [[UInt8]], into table: String, columns: [String], binary: Bool = false,
        on connection: PostgresConnection, logger: Logger
    ) async throws {
        try await PostgresCopy(connection).send(parts, into: table, columns: columns, binary: binary, logger: logger)
    }
}

/// One `COPY … FROM STDIN`, run on the connection's own event loop.
///
/// PostgresNIO's COPY writer stops the process (a precondition, not an error) when it is
/// called in the moment between the connection closing and the connection's handler being
/// taken down: a server that ends the session mid-COPY (a restart, `pg_terminate_backend`)
/// would otherwise crash an import instead of failing it. Running here, the check that the
/// connection is open and each call into the writer (a write, and the `CopyDone` or
/// `CopyFail` that `copyFrom` sends after the closure) happen in one turn of the loop, which
/// is also the only place the connection closes; once it has closed, the COPY waits until
/// the handler is gone, after which the writer fails calls with an error of its own.
actor PostgresCopy {
    private let connection: PostgresConnection
    nonisolated let unownedExecutor: UnownedSerialExecutor

    init(_ connection: PostgresConnection) {
        self.connection = connection
        unownedExecutor = connection.eventLoop.executor.asUnownedSerialExecutor()
    }

    func send(_ parts: [[UInt8]], into table: String, columns: [String], binary: Bool, logger: Logger) async throws {
        let connection = connection
        var table = table
        var columns = columns
        if binary {
            // PostgresNIO's copyFrom offers COPY's text format only. It writes the statement
            // as `COPY "<table>"(<columns>) FROM STDIN WITH (FORMAT text)`, the names as
            // given (its documentation says so): the binary COPY is the same statement with
            // the table's name closed here, its columns and its format named here, and what
            // the library adds after them made a comment. The names are quoted here, as
            // SQL quotes them.
            func quoted(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
            let list = columns.isEmpty ? "" : " (" + columns.map(quoted).joined(separator: ", ") + ")"
            table = String(quoted(table).dropFirst()) + list + " FROM STDIN WITH (FORMAT binary) --"
            columns = []
        }
        try await connection.copyFrom(table: table, columns: columns, logger: logger) { writer in
            for (index, rows) in parts.enumerated() {
                // Binary parts after the first go without their header, parts before the last
                // without their trailer.
                var start = binary && index > 0 ? COPYBinary.headerBytes : 0
                let stop = binary && index < parts.count - 1 ? rows.count - COPYBinary.trailerBytes : rows.count
                while start < stop {
                    try await self.stopIfClosed()
                    let end = min(stop, start + (1 << 20))
                    // The write's own checks run now, in this turn of the loop.
                    assert(connection.eventLoop.inEventLoop)
                    do {
                        try await writer.write(ByteBuffer(bytes: rows[start..<end]))
                    } catch {
                        try await self.stopIfClosed()
                        throw error
                    }
                    start = end
                }
            }
            try await self.stopIfClosed()
        }
    }

    /// Throws once the connection has closed, after the handler is gone (the connection's
    /// close future completes only then).
    private func stopIfClosed() async throws {
        guard connection.isClosed else { return }
        try? await connection.closeFuture.get()
        throw PostgresStoreError.unreachable(
            "the connection to the server was lost while records were on their way; nothing of this write was committed"
        )
    }
}

/// Values to and from the text the store's bulk path and reads use.
enum PostgresLoad {
    /// One record as a row of COPY's text format (a ``COPYLine``) or binary format (a
    /// ``COPYBinary``): the system columns and `fields` in order (a reference with its action),
    /// then `position` when given. Timestamps go as milliseconds for a staging table's text
    /// columns (converted by ``cast(_:to:)``), or, with `timestampsAsText`, as the text a
    /// `timestamptz` column reads, for a COPY straight into a type's table
    /// (``timestampsHaveText(_:)`` must have accepted the record); a binary row is always
    /// written for a type's table. `fields` are sorted by name, as a record's fields are, and
    /// met in one walk. False when a value cannot go into its column in the writer's format (a
    /// binary row then stands half written, and the writer is to be dropped).
    @discardableResult
    static func appendRow<Row: COPYRow & ~Copyable>(
        _ record: Record, zone: Int64, fields: [FieldDefinition], position: Int?, timestampsAsText: Bool = false,
        to line: inout Row
    ) -> Bool {
        func stamp(_ milliseconds: Int64?) {
            guard let milliseconds else { return line.null() }
            line.stamp(milliseconds, asText: timestampsAsText)
        }
        line.integer(zone)
        line.text(record.recordName)
        line.text(record.changeTag)
        stamp(record.created?.timestamp)
        line.text(record.created?.userRecordName)
        line.text(record.created?.deviceID)
        stamp(record.modified?.timestamp)
        line.text(record.modified?.userRecordName)
        line.text(record.modified?.deviceID)
        line.text(record.parent)
        line.text(record.share)
        line.text(record.shareDetails)
        // The entries are read in place (each value handed on where it lies, not copied out).
        let written: Bool = record.fields.entries.withUnsafeBufferPointer { entries in
            var index = 0
            for field in fields {
                // Both lists are in byte order: a field the record holds is usually the next entry.
                var found = false
                while index < entries.count {
                    if entries[index].name == field.name {
                        found = true
                        break
                    }
                    guard RecordFields.precedes(entries[index].name, field.name) else { break }
                    index += 1
                }
                if found {
                    // The values most columns take are written from where they lie; handing
                    // the value to `value(_:of:timestampsAsText:)` would copy it first (its
                    // strings retained and released, on every field of every row).
                    let type = field.type
                    switch entries[index].value {
                    case .string(let text) where !type.isList && type.primitive == .string:
                        line.text(text)
                    case .int64(let number) where !type.isList && type.primitive == .int64:
                        line.integer(number)
                    case .timestamp(let milliseconds) where !type.isList && type.primitive == .timestamp:
                        line.stamp(milliseconds, asText: timestampsAsText)
                    case .reference(let reference) where type == .reference:
                        line.text(reference.recordName)
                        line.action(reference.action.code)
                    default:
                        guard line.value(entries[index].value, of: field, timestampsAsText: timestampsAsText) else {
                            return false
                        }
                    }
                    index += 1
                } else {
                    line.null()
                    if field.type == .reference { line.null() }
                }
            }
            return true
        }
        guard written else { return false }
        if let position { line.integer(Int64(position)) }
        line.end()
        return true
    }

    /// The earliest and latest milliseconds ``appendRow(_:zone:fields:position:timestampsAsText:to:)``
    /// can write as `timestamptz` text: 0001-01-01 and 9999-12-31T23:59:59.999, UTC.
    static let textTimestamps: ClosedRange<Int64> = -62_135_596_800_000...253_402_300_799_999

    /// The times a `timestamptz` column takes (from 4714-11-24 BC, PostgreSQL's first day, to
    /// where a millisecond count stops fitting its intervals, in the year 294247), in ms.
    static let storableTimestamps: ClosedRange<Int64> = -210_866_803_200_000...9_223_372_036_854_774

    /// Why the PostgreSQL store cannot hold `record` as it is, naming the field (nil for a
    /// system field) — a value CloudKit allows that PostgreSQL's types do not: text with the
    /// character U+0000, a time outside ``storableTimestamps``, -0.0 in a `NUMBER` field (whose
    /// `numeric` column has one zero; a list or a `DOUBLE` keeps it). Nil when it can.
    static func valueProblem(_ record: Record, schema: Schema) -> (field: String?, message: String)? {
        func textProblem(_ text: String?) -> String? {
            guard let text else { return nil }
            let found =
                text.utf8.withContiguousStorageIfAvailable { bytes in
                    bytes.isEmpty ? false : memchr(bytes.baseAddress!, 0, bytes.count) != nil
                } ?? text.utf8.contains(0)
            return found ? "holds the character U+0000, which PostgreSQL's text cannot hold" : nil
        }
        func timeProblem(_ milliseconds: Int64) -> String? {
            storableTimestamps.contains(milliseconds)
                ? nil
                : "is the time \(milliseconds) ms from 1970, outside what PostgreSQL's timestamptz holds (4714 BC to 294247 AD)"
        }
        /// "" for -0.0: wrong only in a NUMBER field's own column.
        func zeroProblem(_ number: Double) -> String? {
            number == 0 && number.sign == .minus ? "" : nil
        }
        /// What is wrong with a value, or "" for -0.0 (see `zeroProblem`).
        func problem(_ value: FieldValue) -> String? {
            switch value {
            case .string(let s): return textProblem(s)
            case .timestamp(let t): return timeProblem(t)
            case .reference(let r): return textProblem(r.recordName)
            case .double(let d): return zeroProblem(d)
            case .list(_, let items):
                // A list of doubles keeps -0.0.
                for item in items { if let found = problem(item), !found.isEmpty { return found } }
                return nil
            case .asset(let asset):
                return textProblem(asset.fileChecksum) ?? textProblem(asset.referenceChecksum) ?? textProblem(
                    asset.wrappingKey)
                    ?? textProblem(asset.receipt) ?? textProblem(asset.downloadURL) ?? textProblem(asset.localPath)
                    ?? textProblem(asset.sha256)
            default: return nil
            }
        }
        let fieldProblem: (field: String?, message: String)? = record.fields.entries.withUnsafeBufferPointer {
            entries in
            for index in entries.indices {
                // The values most fields hold are looked at where they lie; only the others
                // are handed on (as a copy) to `problem`.
                let found: String?
                switch entries[index].value {
                case .string(let text): found = textProblem(text)
                case .timestamp(let milliseconds): found = timeProblem(milliseconds)
                case .int64: continue
                case .double(let number): found = zeroProblem(number)
                case .reference(let reference): found = textProblem(reference.recordName)
                default: found = problem(entries[index].value)
                }
                guard let found else { continue }
                let name = entries[index].name
                if !found.isEmpty { return (name, "field '\(name)' " + found) }
                if let declared = schema.recordType(named: record.recordType)?.field(named: name)?.type,
                    declared.primitive == .number, !declared.isList
                {
                    return (
                        name,
                        "field '\(name)' is -0.0, which PostgreSQL's numeric (the column of a NUMBER field) holds only as 0"
                    )
                }
            }
            return nil
        }
        if let fieldProblem { return fieldProblem }
        if let found = textProblem(record.changeTag) { return (nil, "recordChangeTag " + found) }
        if let found = textProblem(record.created?.userRecordName) { return (nil, "created.userRecordName " + found) }
        if let found = textProblem(record.created?.deviceID) { return (nil, "created.deviceID " + found) }
        if let found = textProblem(record.modified?.userRecordName) { return (nil, "modified.userRecordName " + found) }
        if let found = textProblem(record.modified?.deviceID) { return (nil, "modified.deviceID " + found) }
        if let found = textProblem(record.parent) { return (nil, "parent " + found) }
        if let found = textProblem(record.share) { return (nil, "share " + found) }
        if let found = textProblem(record.shareDetails) { return (nil, "share details " + found) }
        if let stamp = record.created, let found = timeProblem(stamp.timestamp) { return (nil, "created " + found) }
        if let stamp = record.modified, let found = timeProblem(stamp.timestamp) { return (nil, "modified " + found) }
        return nil
    }

    /// Whether every timestamp of `record` outside lists has a `timestamptz` text form: years
    /// 1 to 9999.
    static func timestampsHaveText(_ record: Record) -> Bool {
        if let created = record.created, !textTimestamps.contains(created.timestamp) { return false }
        if let modified = record.modified, !textTimestamps.contains(modified.timestamp) { return false }
        for entry in record.fields.entries {
            if case .timestamp(let milliseconds) = entry.value, !textTimestamps.contains(milliseconds) { return false }
        }
        return true
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
            // bytea's hex input form, \x and two digits a byte.
            let digits = Array("0123456789abcdef".utf8)
            var hex: [UInt8] = [UInt8(ascii: "\\"), UInt8(ascii: "x")]
            hex.reserveCapacity(2 + 2 * b.count)
            for byte in b {
                hex.append(digits[Int(byte >> 4)])
                hex.append(digits[Int(byte & 0x0f)])
            }
            return String(decoding: hex, as: UTF8.self)
        case .reference(let r): return r.recordName
        default:
            let text = FieldValueJSON.canonicalText(value)
            return holdsNegativeZero(value) ? keepingNegativeZero(text) : text
        }
    }

    /// Whether a list of doubles, a location or a list of them holds -0.0, which a jsonb number (a numeric)
    /// cannot: it would come back as 0.0.
    static func holdsNegativeZero(_ value: FieldValue) -> Bool {
        func negativeZero(_ d: Double?) -> Bool { d.map { $0 == 0 && $0.sign == .minus } ?? false }
        switch value {
        case .list(.double, let elements):
            return elements.contains {
                if case .double(let d) = $0 { return negativeZero(d) }
                return false
            }
        case .location(let l):
            return [l.latitude, l.longitude, l.horizontalAccuracy, l.verticalAccuracy, l.altitude, l.speed, l.course]
                .contains(where: negativeZero)
        case .list(.location, let elements):
            return elements.contains(where: holdsNegativeZero)
        default:
            return false
        }
    }

    /// The JSON text of a list of doubles or a location with each -0.0 as the string "-0.0",
    /// which jsonb keeps as it is and the reader takes as the double it spells. (Neither holds
    /// any other string, so no text inside a string is touched.)
    static func keepingNegativeZero(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        var rest = Substring(text)
        while let range = rest.range(of: "-0.0") {
            let before = rest[..<range.lowerBound].last
            let after = rest[range.upperBound...].first
            out += rest[..<range.lowerBound]
            // A whole number, not the start of -0.05 or the end of 1e-0.0 (never written).
            if (before == "[" || before == "," || before == ":") && (after == "," || after == "]" || after == "}") {
                out += "\"-0.0\""
            } else {
                out += "-0.0"
            }
            rest = rest[range.upperBound...]
        }
        out += rest
        return out
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
    static func value(_ text: String, _ type: FieldType, action: String?, record: String, field: String) throws
        -> FieldValue
    {
        func bad() -> PostgresStoreError {
            PostgresStoreError.notAStore(
                "record \(record) field \(field): the store holds '\(text.prefix(40))', not a \(type)")
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
        case .int64:
            guard let value = Int64(text) else { throw bad() }
            return .int64(value)
        case .timestamp:
            guard let value = Int64(text) else { throw bad() }
            return .timestamp(value)
        case .double:
            switch text {
            case "NaN": return .double(.nan)
            case "Infinity": return .double(.infinity)
            case "-Infinity": return .double(-.infinity)
            default:
                guard let value = Double(text) else { throw bad() }
                return .double(value)
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
                if let h = high {
                    bytes.append(h << 4 | nibble)
                    high = nil
                } else {
                    high = nibble
                }
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

extension UInt8 {
    fileprivate var hexNibble: UInt8? {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return self - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return self - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return self - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// Writes lines of COPY's text format: fields separated by tabs, `\N` for NULL, the
/// backslash, newline, carriage return and tab escaped, a newline at the end of each line.
///
/// The bytes go into memory this owns, through a pointer: each field is one capacity check
/// and a copy, where an array's appends would check its capacity and uniqueness byte by byte
/// (a row of the bulk path is two dozen fields, a million rows a load).
struct COPYLine: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    /// How many bytes are written.
    private(set) var count = 0
    private var first = true

    init(capacity: Int = 4096) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// The bytes written, as an array.
    consuming func bytes() -> [UInt8] {
        Array(UnsafeBufferPointer(start: base, count: count))
    }

    /// Room for `more` bytes after those written.
    @inline(__always) private mutating func reserve(_ more: Int) {
        if count + more > capacity { COPYLine.grow(&base, capacity: &capacity, keeping: count, toHold: count + more) }
    }

    /// Moves the first `count` bytes at `base` to memory of at least twice `capacity` that holds
    /// `needed` bytes (this writer's and ``COPYBinary``'s).
    static func grow(
        _ base: inout UnsafeMutablePointer<UInt8>, capacity: inout Int, keeping count: Int, toHold needed: Int
    ) {
        var size = capacity * 2
        while size < needed { size *= 2 }
        let larger = UnsafeMutablePointer<UInt8>.allocate(capacity: size)
        larger.update(from: base, count: count)
        base.deallocate()
        base = larger
        capacity = size
    }

    /// A tab before every field but a line's first. Room for it must be reserved.
    @inline(__always) private mutating func separate() {
        if first {
            first = false
        } else {
            base[count] = UInt8(ascii: "\t")
            count += 1
        }
    }

    mutating func null() {
        reserve(3)
        separate()
        base[count] = UInt8(ascii: "\\")
        base[count + 1] = UInt8(ascii: "N")
        count += 2
    }

    mutating func text(_ value: String?) {
        guard let value else { return null() }
        if value.utf8.withContiguousStorageIfAvailable({ bytes in put(text: bytes) }) == nil {
            // Text not held as UTF-8 in one piece (never on Linux): copied out first.
            let bytes = Array(value.utf8)
            bytes.withUnsafeBufferPointer { put(text: $0) }
        }
    }

    /// The bytes of a text, escaped where they must be.
    private mutating func put(text bytes: UnsafeBufferPointer<UInt8>) {
        // Every byte escaped takes two.
        reserve(1 + 2 * bytes.count)
        separate()
        guard let from = bytes.baseAddress else { return }
        // Most text needs no escape: copied whole.
        if !COPYLine.needsEscape(bytes) {
            (base + count).update(from: from, count: bytes.count)
            count += bytes.count
            return
        }
        for byte in bytes {
            let escaped: UInt8
            switch byte {
            case UInt8(ascii: "\\"): escaped = UInt8(ascii: "\\")
            case 10: escaped = UInt8(ascii: "n")
            case 13: escaped = UInt8(ascii: "r")
            case 9: escaped = UInt8(ascii: "t")
            default:
                base[count] = byte
                count += 1
                continue
            }
            base[count] = UInt8(ascii: "\\")
            base[count + 1] = escaped
            count += 2
        }
    }

    /// Whether `bytes` hold a tab, newline, carriage return or backslash: eight bytes at a time
    /// while none of them is below 14 or a backslash, then byte by byte.
    static func needsEscape(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return false }
        let raw = UnsafeRawPointer(base)
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var index = 0
        while index + 8 <= bytes.count {
            let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            // Non-zero exactly when some byte is below 14, or equals a backslash (0x5C).
            let low = (word &- ones &* 14) & ~word & highs
            let backslashes = word ^ (ones &* 0x5C)
            if low | ((backslashes &- ones) & ~backslashes & highs) != 0 { break }
            index += 8
        }
        while index < bytes.count {
            switch base[index] {
            case 9, 10, 13, UInt8(ascii: "\\"): return true
            default: index += 1
            }
        }
        return false
    }

    mutating func integer(_ value: Int64) {
        // A tab, a sign and at most 19 digits.
        reserve(21)
        separate()
        if value < 0 {
            base[count] = UInt8(ascii: "-")
            count += 1
        }
        var rest = value.magnitude
        var digits = 1
        var left = rest / 10
        while left > 0 {
            digits += 1
            left /= 10
        }
        var position = count + digits
        count = position
        repeat {
            position -= 1
            base[position] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
            rest /= 10
        } while rest > 0
    }

    /// The day the last timestamp fell on, and its `yyyy-mm-dd ` (the records of a load were
    /// mostly made on few days, and a record's times are often on one).
    private var lastDay: Int64 = .min
    private var lastDate: (UInt64, UInt16, UInt8) = (0, 0, 0)

    /// Milliseconds since 1970 as `timestamptz` reads them in UTC, `2026-03-01 09:30:00.250+00`
    /// (years 1 to 9999: see ``PostgresLoad/textTimestamps``).
    mutating func timestamp(_ milliseconds: Int64) {
        // yyyy-mm-dd hh:mm:ss.fff+00: 26 bytes, after a tab.
        reserve(27)
        separate()
        let day = ISO8601.floorDiv(milliseconds, 86_400_000)
        let inDay = Int(milliseconds - day * 86_400_000)
        let out = base + count
        if day != lastDay {
            let (year, month, dayOfMonth) = ISO8601.civil(fromDays: day)
            COPYLine.put(Int(year), 4, at: out)
            out[4] = UInt8(ascii: "-")
            COPYLine.put(Int(month), 2, at: out + 5)
            out[7] = UInt8(ascii: "-")
            COPYLine.put(Int(dayOfMonth), 2, at: out + 8)
            out[10] = UInt8(ascii: " ")
            lastDay = day
            let raw = UnsafeRawPointer(out)
            lastDate = (
                raw.loadUnaligned(as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt16.self), out[10]
            )
        } else {
            let raw = UnsafeMutableRawPointer(out)
            raw.storeBytes(of: lastDate.0, as: UInt64.self)
            raw.storeBytes(of: lastDate.1, toByteOffset: 8, as: UInt16.self)
            out[10] = lastDate.2
        }
        COPYLine.put(inDay / 3_600_000, 2, at: out + 11)
        out[13] = UInt8(ascii: ":")
        COPYLine.put(inDay / 60_000 % 60, 2, at: out + 14)
        out[16] = UInt8(ascii: ":")
        COPYLine.put(inDay / 1000 % 60, 2, at: out + 17)
        out[19] = UInt8(ascii: ".")
        COPYLine.put(inDay % 1000, 3, at: out + 20)
        out[23] = UInt8(ascii: "+")
        out[24] = UInt8(ascii: "0")
        out[25] = UInt8(ascii: "0")
        count += 26
    }

    /// `value` in `width` decimal digits, zeros first.
    @inline(__always) private static func put(_ value: Int, _ width: Int, at out: UnsafeMutablePointer<UInt8>) {
        var rest = value
        var position = width
        while position > 0 {
            position -= 1
            out[position] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
            rest /= 10
        }
    }

    /// Ends the line; what comes next begins another.
    mutating func end() {
        reserve(1)
        base[count] = UInt8(ascii: "\n")
        count += 1
        first = true
    }
}

extension COPYLine: COPYRow {
    mutating func action(_ code: Int64) { integer(code) }

    mutating func stamp(_ milliseconds: Int64, asText: Bool) {
        if asText { timestamp(milliseconds) } else { integer(milliseconds) }
    }

    mutating func value(_ value: FieldValue, of field: FieldDefinition, timestampsAsText: Bool) -> Bool {
        switch value {
        case .reference(let reference):
            text(reference.recordName)
            action(reference.action.code)
        case .timestamp(let milliseconds):
            stamp(milliseconds, asText: timestampsAsText)
        case .int64(let number):
            integer(number)
        case .string(let string):
            text(string)
            if field.type == .reference { null() }
        default:
            text(PostgresLoad.text(value))
            if field.type == .reference { null() }
        }
        return true
    }
}
