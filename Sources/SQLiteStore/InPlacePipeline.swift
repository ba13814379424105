import Foundation
import GRDBSQLite
import Records
import StoreCore

import struct GRDB.DatabaseError
import struct GRDB.ResultCode

/// What the worker of a migration done in place made of a batch of rows, in their order: per
/// row whether the record stays, goes or gets new values, its name, and the values to write
/// (for an updated record, one per written field from its offset in `values`).
struct InPlaceResults {
    enum Outcome {
        case kept
        case deleted
        /// The record's new values start at this offset in `values`.
        case updated(Int)
    }
    var outcomes: [Outcome] = []
    var names: [String] = []
    /// Each record's zone, by its number in the store.
    var zoneRows: [Int64] = []
    var values: [FieldValue?] = []
    /// Read from a snapshot: whether the table's last row was among these.
    var finished = false
    /// The values of the row being migrated (see ``InPlaceValues``), their room reused.
    var scratch: [FieldValue?] = []

    init(capacity: Int, width: Int) {
        outcomes.reserveCapacity(capacity)
        names.reserveCapacity(capacity)
        zoneRows.reserveCapacity(capacity)
        values.reserveCapacity(capacity * width)
    }
}

/// A type's rows as the write transaction found them, read on a connection of its own: in a
/// store in WAL mode, a reader that starts while the writer holds the write lock sees what the
/// writer started from. ``StoreSession/updateInPlace(type:into:renames:writes:reads:_:)`` reads
/// through one when nothing in its transaction has changed a row or the schema before it, so
/// that the migration's worker reads and decodes while the store's thread only writes.
final class SnapshotRows: RowColumns {
    private var connection: OpaquePointer?
    private var statement: OpaquePointer?
    private let sql: String

    /// Opens the writer's database file (`path`, as SQLite names it) read-only and prepares
    /// `sql`; nil when that cannot be done, or when what is committed there is not what the
    /// writer began with: another store (`storeID`), another change sequence number, or
    /// another version of the schema (the caller then reads on its own connection).
    init?(path: String, sql: String, schemaVersion: Int64, storeID: String, changeSequence: Int64) {
        self.sql = sql
        guard
            sqlite3_open_v2(
                path, &connection, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_PRIVATECACHE, nil)
                == SQLITE_OK,
            let connection
        else { return nil }
        sqlite3_busy_timeout(connection, 5000)
        // The read transaction starts with the first read and keeps its snapshot to the end.
        guard sqlite3_exec(connection, "BEGIN", nil, nil, nil) == SQLITE_OK,
            SnapshotRows.value(connection, "PRAGMA schema_version") == String(schemaVersion),
            SnapshotRows.value(connection, "SELECT value FROM _ck_meta WHERE key = 'storeID'") == storeID,
            SnapshotRows.value(connection, "SELECT value FROM _ck_meta WHERE key = 'changeSeq'")
                == String(changeSequence),
            sqlite3_prepare_v2(connection, sql, -1, &statement, nil) == SQLITE_OK, statement != nil
        else { return nil }
    }

    /// The first column of the first row `sql` gives, as text.
    private static func value(_ connection: OpaquePointer, _ sql: String) -> String? {
        var query: OpaquePointer?
        guard sqlite3_prepare_v2(connection, sql, -1, &query, nil) == SQLITE_OK, let query else { return nil }
        defer { sqlite3_finalize(query) }
        guard sqlite3_step(query) == SQLITE_ROW, let text = sqlite3_column_text(query, 0) else { return nil }
        return String(cString: text)
    }

    deinit { close() }

    /// Ends the read transaction and closes the connection (once the rows are read, or the
    /// migration has failed).
    func close() {
        sqlite3_finalize(statement)
        statement = nil
        sqlite3_close_v2(connection)
        connection = nil
    }

    /// Steps once: true when a row is available.
    func step() throws -> Bool {
        try Interruption.check()
        let code = sqlite3_step(statement)
        if code == SQLITE_ROW { return true }
        if code == SQLITE_DONE { return false }
        throw DatabaseError(
            resultCode: ResultCode(rawValue: code), message: connection.map { String(cString: sqlite3_errmsg($0)) },
            sql: sql)
    }

    @inline(__always) func isNull(_ index: Int32) -> Bool { sqlite3_column_type(statement, index) == SQLITE_NULL }
    @inline(__always) func columnType(_ index: Int32) -> Int32 { sqlite3_column_type(statement, index) }
    @inline(__always) func int64(_ index: Int32) -> Int64 { sqlite3_column_int64(statement, index) }
    @inline(__always) func double(_ index: Int32) -> Double { sqlite3_column_double(statement, index) }
    @inline(__always) func textBytes(_ index: Int32) -> UnsafeBufferPointer<UInt8> {
        let pointer = sqlite3_column_text(statement, index)
        return UnsafeBufferPointer(
            start: pointer, count: pointer == nil ? 0 : Int(sqlite3_column_bytes(statement, index)))
    }
    @inline(__always) func blob(_ index: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(statement, index))
        guard count > 0, let pointer = sqlite3_column_blob(statement, index) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}

/// The worker of ``StoreSession/updateInPlace(type:into:renames:writes:reads:_:)``: on a thread
/// of its own it reads a batch of rows from a snapshot (or decodes a batch the store's thread
/// copied), passes each record through the migration's transform and picks out the values the
/// table takes, while the store's thread writes the batch before. The records live and die on
/// the worker; only names and values cross over.
///
/// Only the worker ever calls `transform`, and one batch at a time, so the transform needs no
/// locking of its own.
final class InPlacePipeline {
    typealias Transform = (Record) throws -> [Record]?

    /// How many rows the worker reads from a snapshot at a time: as many as a run writes.
    static let snapshotBatch = RunUpdate.longestRun

    private let side = SideThread<Result<InPlaceResults, Error>>(name: "ckport migrate", stackSize: 8 << 20)
    /// What the worker does with one row: a copied one, or the snapshot's current row.
    private let migrateCopied: (CopiedRow, inout InPlaceResults) throws -> Void
    private let migrateSnapshot: (SnapshotRows, inout InPlaceResults) throws -> Void
    private let width: Int
    /// The copied batch the worker has or had last (emptied when the next is handed over, its
    /// room kept); none until the first.
    private var spare: RowBatch?
    private(set) var busy = false

    /// Results the store's thread is done with, freed by the worker that allocated them: glibc
    /// makes a thread that frees another thread's memory wait for that thread's arena lock.
    private final class Retired {
        var results: [InPlaceResults] = []
    }
    private var retired = Retired()

    /// `zones`: the store's zones by number (a row names its zone by number). With `values`,
    /// rows become values, not records, and `transform` is not called; `writtenPositions` are
    /// the positions of the written fields among the layout's.
    init(
        layout: TableLayout, only: [Bool]?, type: String, writtenTargets: [String], writtenPositions: [Int],
        zones: [Int64: ZoneID],
        values: InPlaceValues.Transform?, transform: @escaping Transform
    ) {
        width = writtenTargets.count
        func migrate<Row: RowColumns>(_ row: Row, _ done: inout InPlaceResults) throws {
            let zoneRow = row.int64(0)
            guard let zone = zones[zoneRow] else {
                throw StoreError.corrupt("a record names zone \(zoneRow), which does not exist")
            }
            if let values {
                let name = String(decoding: row.textBytes(1), as: UTF8.self)
                try layout.decodeValues(row, only: only, into: &done.scratch)
                done.names.append(name)
                done.zoneRows.append(zoneRow)
                switch try values(name, &done.scratch) {
                case .kept: done.outcomes.append(.kept)
                case .deleted: done.outcomes.append(.deleted)
                case .updated:
                    done.outcomes.append(.updated(done.values.count))
                    for position in writtenPositions { done.values.append(done.scratch[position]) }
                }
                return
            }
            let record = try layout.decode(row, zone: zone, only: only)
            done.names.append(record.recordName)
            done.zoneRows.append(zoneRow)
            guard let results = try transform(record) else {
                done.outcomes.append(.kept)
                return
            }
            guard let result = results.first else {
                done.outcomes.append(.deleted)
                return
            }
            guard results.count == 1, result.id == record.id, result.recordType == type else {
                throw StoreError.corrupt(
                    "record '\(record.recordName)' changed its name or type in a migration done in place")
            }
            done.outcomes.append(.updated(done.values.count))
            for target in writtenTargets { done.values.append(result.fields[target]) }
        }
        migrateCopied = { try migrate($0, &$1) }
        migrateSnapshot = { try migrate($0, &$1) }
    }

    deinit { side.stop() }

    /// Hands `batch` to the worker and gives the caller an empty one with the room of the
    /// batch before; the worker must not be busy.
    func submit(_ batch: inout RowBatch) {
        // Taken out first, so that emptying it does not copy it.
        var given = spare ?? RowBatch()
        spare = nil
        given.clear()
        swap(&batch, &given)
        spare = given
        let rows = given
        let migrate = migrateCopied
        let width = self.width
        start {
            var done = InPlaceResults(capacity: rows.rowCount, width: width)
            try rows.forEachRow { _, copied in try migrate(copied, &done) }
            return done
        }
    }

    /// Has the worker read up to `count` rows from `snapshot` and migrate them; the worker must
    /// not be busy.
    func submit(reading snapshot: SnapshotRows, count: Int) {
        let migrate = migrateSnapshot
        let width = self.width
        start {
            var done = InPlaceResults(capacity: count, width: width)
            while done.outcomes.count < count {
                guard try snapshot.step() else {
                    done.finished = true
                    break
                }
                try migrate(snapshot, &done)
            }
            return done
        }
    }

    private func start(_ job: @escaping () throws -> InPlaceResults) {
        precondition(!busy, "InPlacePipeline: collect the last batch first")
        let retired = self.retired
        self.retired = Retired()
        side.start {
            retired.results = []
            return Result { try job() }
        }
        busy = true
    }

    /// What the worker made of the batch submitted last; rethrows what the transform threw.
    func collect() throws -> InPlaceResults {
        precondition(busy, "InPlacePipeline: nothing submitted")
        busy = false
        return try side.collect().get()
    }

    /// Waits for the worker, if it has a batch, and drops what it made of it.
    func settle() {
        guard busy else { return }
        busy = false
        _ = side.collect()
    }

    /// Hands back results the caller has written; the worker frees them with its next batch.
    func retire(_ results: InPlaceResults) {
        retired.results.append(results)
    }
}
