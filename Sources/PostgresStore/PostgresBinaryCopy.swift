import Foundation
import Records

/// A writer of COPY rows, in the text format (``COPYLine``) or the binary one (``COPYBinary``):
/// what ``PostgresLoad/appendRow(_:zone:fields:position:timestampsAsText:to:)`` writes through.
protocol COPYRow: ~Copyable {
    /// A NULL in the next column.
    mutating func null()
    /// A text column (NULL for nil).
    mutating func text(_ value: String?)
    /// A `bigint` column.
    mutating func integer(_ value: Int64)
    /// A time, in milliseconds since 1970: for a `timestamptz` column, or (`asText` false, the
    /// text format only) as milliseconds for a staging table's text column.
    mutating func stamp(_ milliseconds: Int64, asText: Bool)
    /// A reference's action (its code), in the column after the reference's.
    mutating func action(_ code: Int64)
    /// A field's value in its column (a reference's action in the next); false when the value
    /// cannot go into the field's column in this format. ``PostgresLoad/appendRow(_:zone:fields:position:timestampsAsText:to:)``
    /// writes a string, integer, time or reference in a field of its own type itself, from
    /// where the value lies, and hands every other value here.
    mutating func value(_ value: FieldValue, of field: FieldDefinition, timestampsAsText: Bool) -> Bool
    /// Ends the row; what comes next begins another.
    mutating func end()
}

/// Writes rows of COPY's binary format: a header, then each row as its number of columns
/// (16 bits) and each column as its length (32 bits, -1 for NULL) and its bytes in the form
/// the column type's binary input reads, big-endian; -1 (16 bits) after the last row.
///
/// The server then parses no text: a time is a count of microseconds, a number its eight
/// bytes, a text its bytes (still checked as UTF-8). psql's `\copy` of the same rows took
/// about four fifths of the time as binary that it took as CSV (BENCHMARKS.md, PostgreSQL).
///
/// Every field type has a binary form written here but `NUMBER`, whose `numeric` is a list of
/// base-10,000 digits with a display scale that only the server's own reading of the text
/// gets right in every case: a type with a `NUMBER` field goes as text (``takes(_:)``).
struct COPYBinary: COPYRow, ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    /// How many bytes are written.
    private(set) var count = 0
    /// Where the row being written keeps its number of columns, and that number so far.
    private var rowStart = 0
    private var columns: Int16 = 0

    /// Whether a type whose fields are `fields` can be written in the binary format.
    static func takes(_ fields: [FieldDefinition]) -> Bool {
        fields.allSatisfy { $0.type.isList || $0.type.primitive != .number }
    }

    /// The bytes before the first row: the signature, the flags and the header extension's
    /// length. Rows of one table written by two writers go in one COPY without the second's.
    static let headerBytes = 19
    /// The bytes after the last row (-1 as 16 bits).
    static let trailerBytes = 2

    /// Microseconds from 1970 to 2000-01-01, from which `timestamptz` counts.
    static let epoch2000: Int64 = 946_684_800_000_000

    init(capacity: Int = 4096) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
        // PGCOPY\n\377\r\n\0, no flags, no header extension.
        for byte: UInt8 in [0x50, 0x47, 0x43, 0x4F, 0x50, 0x59, 0x0A, 0xFF, 0x0D, 0x0A, 0x00] {
            base[count] = byte
            count += 1
        }
        put32(0)
        put32(0)
        startRow()
    }

    deinit { base.deallocate() }

    /// The rows written, with the format's trailer.
    consuming func bytes() -> [UInt8] {
        // The place kept for the next row's number of columns takes the trailer, -1.
        base[rowStart] = 0xFF
        base[rowStart + 1] = 0xFF
        return Array(UnsafeBufferPointer(start: base, count: count))
    }

    @inline(__always) private mutating func reserve(_ more: Int) {
        if count + more > capacity { COPYLine.grow(&base, capacity: &capacity, keeping: count, toHold: count + more) }
    }

    /// Keeps two bytes for the row's number of columns, filled in by ``end()``.
    private mutating func startRow() {
        reserve(2)
        rowStart = count
        count += 2
        columns = 0
    }

    @inline(__always) private mutating func put32(_ value: Int32) {
        UnsafeMutableRawPointer(base + count).storeBytes(of: value.bigEndian, as: Int32.self)
        count += 4
    }

    /// A column's length, before its bytes (room for both must be reserved).
    @inline(__always) private mutating func column(_ length: Int) {
        columns += 1
        put32(Int32(length))
    }

    mutating func null() {
        reserve(4)
        column(-1)
    }

    mutating func text(_ value: String?) {
        guard let value else { return null() }
        put(value)
    }

    /// A column of `text`'s UTF-8 bytes, after a `jsonb` version byte (1) with `asJSONB`.
    private mutating func put(_ text: String, asJSONB: Bool = false) {
        if text.utf8.withContiguousStorageIfAvailable({ bytes in put(bytes, asJSONB: asJSONB) }) == nil {
            // Text not held as UTF-8 in one piece (never on Linux): copied out first.
            let bytes = Array(text.utf8)
            bytes.withUnsafeBufferPointer { put($0, asJSONB: asJSONB) }
        }
    }

    /// A column of `bytes` as they are (after a `jsonb` version byte, 1, with `asJSONB`).
    private mutating func put(_ bytes: UnsafeBufferPointer<UInt8>, asJSONB: Bool = false) {
        let version = asJSONB ? 1 : 0
        reserve(4 + version + bytes.count)
        column(version + bytes.count)
        if asJSONB {
            base[count] = 1
            count += 1
        }
        guard let from = bytes.baseAddress else { return }
        (base + count).update(from: from, count: bytes.count)
        count += bytes.count
    }

    mutating func integer(_ value: Int64) {
        reserve(12)
        column(8)
        UnsafeMutableRawPointer(base + count).storeBytes(of: value.bigEndian, as: Int64.self)
        count += 8
    }

    /// A reference's action: a `smallint` column.
    mutating func action(_ code: Int64) {
        reserve(6)
        column(2)
        UnsafeMutableRawPointer(base + count).storeBytes(of: Int16(truncatingIfNeeded: code).bigEndian, as: Int16.self)
        count += 2
    }

    /// A `timestamptz` column: microseconds from 2000-01-01 UTC. Times the store holds
    /// (``PostgresLoad/storableTimestamps``) fit its 64 bits. Binary rows go into a type's own
    /// table only, never a staging table's text columns (where a time is milliseconds).
    mutating func stamp(_ milliseconds: Int64, asText: Bool) {
        precondition(asText, "binary COPY rows are for a type's table, whose times are timestamptz")
        integer(milliseconds &* 1000 &- COPYBinary.epoch2000)
    }

    mutating func value(_ value: FieldValue, of field: FieldDefinition, timestampsAsText: Bool) -> Bool {
        if field.type.isList || field.type.primitive == .asset || field.type.primitive == .location {
            switch value {
            case .list, .asset, .location: break
            default: return false
            }
            // jsonb: a version byte, then the JSON text.
            put(PostgresLoad.text(value), asJSONB: true)
            return true
        }
        // A string, integer, time or reference in a field of its own type never comes here
        // (`appendRow` writes it); what does is matched on its own, not in a tuple with the
        // field's type, which would hold a copy of it.
        let primitive = field.type.primitive
        switch value {
        case .double(let number) where primitive == .double:
            // float8: its IEEE 754 bits (-0.0 and the infinities as they are). Every NaN is the
            // one NaN the text "NaN" reads as, whatever sign or payload it came with.
            integer(Int64(bitPattern: (number.isNaN ? Double.nan : number).bitPattern))
        case .bytes(let bytes) where primitive == .bytes:
            bytes.withUnsafeBufferPointer { put($0) }
        case .string(let name) where primitive == .reference:
            text(name)
            null()
        default:
            return false
        }
        return true
    }

    mutating func end() {
        UnsafeMutableRawPointer(base + rowStart).storeBytes(of: columns.bigEndian, as: Int16.self)
        startRow()
    }
}
