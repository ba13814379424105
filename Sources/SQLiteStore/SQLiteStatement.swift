import Foundation
import GRDB
import GRDBSQLite
import StoreCore

/// SQLite's "copy this buffer now" destructor for bound text and blobs.
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A prepared statement driven through SQLite's C API.
///
/// GRDB prepares it (so a bad statement reports its SQL) and owns the connection and the
/// transaction; the hot loops of import and export bind and step here directly, which avoids
/// building a `DatabaseValue` for every column of a million rows.
final class PreparedStatement {
    let statement: Statement
    let raw: OpaquePointer
    let sql: String

    init(_ db: Database, _ sql: String) throws {
        statement = try db.makeStatement(sql: sql)
        raw = statement.sqliteStatement
        self.sql = sql
    }

    @inline(__always) func reset() {
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
    }

    /// Resets for a caller that binds every parameter again: clearing them first would only
    /// cost a pass over them.
    @inline(__always) func resetForRebinding() {
        sqlite3_reset(raw)
    }

    @inline(__always) func bind(_ index: Int32, _ value: Int64?) {
        if let value { sqlite3_bind_int64(raw, index, value) } else { sqlite3_bind_null(raw, index) }
    }

    @inline(__always) func bind(_ index: Int32, _ value: Double) {
        sqlite3_bind_double(raw, index, value)
    }

    @inline(__always) func bind(_ index: Int32, _ value: String?) {
        guard let value else {
            sqlite3_bind_null(raw, index)
            return
        }
        bind(index, value)
    }

    @inline(__always) func bind(_ index: Int32, _ value: String) {
        // Native strings lend their bytes as they are; anything else is copied once.
        let done: Void? = value.utf8.withContiguousStorageIfAvailable { utf8 in bindText(index, utf8) }
        if done == nil {
            var copy = value
            copy.withUTF8 { utf8 in bindText(index, utf8) }
        }
    }

    @inline(__always) private func bindText(_ index: Int32, _ utf8: UnsafeBufferPointer<UInt8>) {
        if let base = utf8.baseAddress, utf8.count > 0 {
            _ = sqlite3_bind_text(
                raw, index, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), Int32(utf8.count),
                sqliteTransient)
        } else {
            _ = sqlite3_bind_text(raw, index, "", 0, sqliteTransient)
        }
    }

    @inline(__always) func bind(_ index: Int32, blob: [UInt8]) {
        blob.withUnsafeBytes { buffer in
            // A zero-length blob still needs a non-null pointer to stay a blob rather than NULL.
            if buffer.count == 0 {
                _ = sqlite3_bind_zeroblob(raw, index, 0)
            } else {
                _ = sqlite3_bind_blob(raw, index, buffer.baseAddress, Int32(buffer.count), sqliteTransient)
            }
        }
    }

    @inline(__always) func bindNull(_ index: Int32) {
        sqlite3_bind_null(raw, index)
    }

    /// Runs a statement that returns no rows.
    func execute(_ db: Database) throws {
        try Interruption.check()
        let code = sqlite3_step(raw)
        guard code == SQLITE_DONE || code == SQLITE_ROW else { throw failure(db, code) }
        sqlite3_reset(raw)
    }

    /// Steps once: true when a row is available.
    @inline(__always) func step(_ db: Database) throws -> Bool {
        try Interruption.check()
        let code = sqlite3_step(raw)
        if code == SQLITE_ROW { return true }
        if code == SQLITE_DONE { return false }
        throw failure(db, code)
    }

    func failure(_ db: Database, _ code: Int32) -> DatabaseError {
        DatabaseError(resultCode: ResultCode(rawValue: code), message: db.lastErrorMessage, sql: sql)
    }

    // MARK: Columns of the current row

    @inline(__always) func isNull(_ index: Int32) -> Bool {
        sqlite3_column_type(raw, index) == SQLITE_NULL
    }

    @inline(__always) func columnType(_ index: Int32) -> Int32 {
        sqlite3_column_type(raw, index)
    }

    @inline(__always) func int64(_ index: Int32) -> Int64 {
        sqlite3_column_int64(raw, index)
    }

    @inline(__always) func double(_ index: Int32) -> Double {
        sqlite3_column_double(raw, index)
    }

    @inline(__always) func text(_ index: Int32) -> String {
        guard let pointer = sqlite3_column_text(raw, index) else { return "" }
        let count = Int(sqlite3_column_bytes(raw, index))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    @inline(__always) func optionalText(_ index: Int32) -> String? {
        isNull(index) ? nil : text(index)
    }

    @inline(__always) func blob(_ index: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(raw, index))
        guard count > 0, let pointer = sqlite3_column_blob(raw, index) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}

/// Where a row's column values are read from: the current row of a statement, or a copy of a
/// row taken from one (``CopiedRow``), which another thread may read once the statement has
/// moved on. The accessors are SQLite's, with its meanings.
protocol RowColumns {
    func isNull(_ index: Int32) -> Bool
    func columnType(_ index: Int32) -> Int32
    func int64(_ index: Int32) -> Int64
    func double(_ index: Int32) -> Double
    /// The column as text, UTF-8 (a nil start for NULL or empty text).
    func textBytes(_ index: Int32) -> UnsafeBufferPointer<UInt8>
    func blob(_ index: Int32) -> [UInt8]
}

extension RowColumns {
    @inline(__always) func optionalInt64(_ index: Int32) -> Int64? {
        isNull(index) ? nil : int64(index)
    }
}

extension PreparedStatement: RowColumns {
    @inline(__always) func textBytes(_ index: Int32) -> UnsafeBufferPointer<UInt8> {
        let pointer = sqlite3_column_text(raw, index)
        return UnsafeBufferPointer(start: pointer, count: pointer == nil ? 0 : Int(sqlite3_column_bytes(raw, index)))
    }
}

/// Where a row's column values go: a prepared statement's parameters, or values staged for
/// an SQL function to hand over (``RunUpdate``).
protocol ColumnSink {
    func bind(_ index: Int32, _ value: String)
    func bind(_ index: Int32, _ value: Int64?)
    func bind(_ index: Int32, _ value: Double)
    func bind(_ index: Int32, blob: [UInt8])
    func bindNull(_ index: Int32)
}

extension PreparedStatement: ColumnSink {}

extension Database {
    /// The number of rows the last INSERT, UPDATE or DELETE changed.
    var lastChanges: Int { Int(sqlite3_changes(sqliteConnection)) }
}

/// `name` as an SQL identifier.
func quoted(_ name: String) -> String {
    "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}
