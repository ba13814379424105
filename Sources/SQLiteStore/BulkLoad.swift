import Records
import StoreCore

// GRDB by name, so that its `Record` class stays out of the way of ckport's `Record`.
import class GRDB.Database
import struct GRDB.DatabaseValue
import class GRDB.Row

/// Loading into empty tables builds their indexes once at the end, from sorted data, instead
/// of updating every index for every row: several times faster for a first import. It all
/// happens inside the import's transaction, so a failed import still leaves nothing behind.
final class BulkLoad: RecordLoader {
    private let session: StoreSession
    private var decided: Set<String> = []
    /// Index statements to run at the end: table name → CREATE INDEX statements.
    private var deferred: [(table: String, statements: [String])] = []
    var replacesOtherTypes = false

    init(session: StoreSession) throws {
        self.session = session
        // The change log's sequence index too, when the store holds no records yet.
        if try Int.fetchOne(session.db, sql: "SELECT NOT EXISTS (SELECT 1 FROM _ck_record)") == 1 {
            try session.db.execute(sql: "DROP INDEX _ck_record_seq")
            deferred.append(("_ck_record", ["CREATE INDEX _ck_record_seq ON _ck_record (seq)"]))
            session.dropCachedStatements()
        }
    }

    /// Called before the first record of a type is saved.
    func prepare(for typeName: String) throws {
        guard !decided.contains(typeName) else { return }
        decided.insert(typeName)
        guard session.layouts[typeName] != nil else { return }
        let db = session.db
        let empty = try Int.fetchOne(db, sql: "SELECT NOT EXISTS (SELECT 1 FROM \(quoted(typeName)))") == 1
        guard empty else { return }
        let indexes = try Row.fetchAll(
            db, sql: "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
            arguments: [typeName])
        guard !indexes.isEmpty else { return }
        for index in indexes { try db.execute(sql: "DROP INDEX \(quoted(index["name"]))") }
        deferred.append((typeName, indexes.map { $0["sql"] }))
        session.dropCachedStatements()
    }

    /// Saves each record at once: SQLite's inserts are prepared statements in this process.
    func save(_ record: consuming Record, mode: WriteMode) throws -> SaveOutcome? {
        try session.save(record, mode: mode, replacingOtherType: replacesOtherTypes)
    }

    var wantsFlush: Bool { false }

    func flush() throws -> [Result<SaveOutcome, SaveRefusal>] { [] }

    /// Rebuilds the indexes dropped, and refreshes the statistics when `inserted` records may
    /// have made them stale.
    func finish(inserted: Int) throws {
        defer { deferred = [] }
        let rebuilt = !deferred.isEmpty
        if rebuilt {
            // SQLite's sorter, which builds each index, holds as much as the page cache's size
            // in memory besides the cache itself: with both at 64 MB an import of 10,000,000
            // records peaked at 196 MB. Both at 16 MB while the indexes are built keep it at the
            // row phase's level (150 MB at 1,000,000 and at 10,000,000 records), and the time
            // stayed within the machine's noise at both sizes (README, Benchmark).
            try session.db.execute(sql: "PRAGMA cache_size = \(RecordStore.indexBuildCacheSize)")
        }
        defer { if rebuilt { try? session.db.execute(sql: "PRAGMA cache_size = \(RecordStore.cacheSize)") } }
        for entry in deferred {
            // The schema may have dropped the table meanwhile (not in an import, but be safe).
            guard try session.db.tableExists(entry.table) else { continue }
            for sql in entry.statements { try session.db.execute(sql: sql) }
        }
        guard rebuilt || inserted > 0 else { return }
        // Fresh statistics let SQLite pick the most selective index for queries; the limit
        // keeps this to a sample, so it costs a few milliseconds even on large stores. That is
        // still most of the cost of a small import (a pulled page of 200 records), so they are
        // refreshed when indexes were rebuilt, when there are none, or when the changes made
        // since they were taken outnumber the records counted then: a run of small imports
        // analyzes a logarithmic number of times, and the planner's row counts stay within 2×.
        let sequence = session.changeSequence
        if !rebuilt, let last = try lastAnalysis(), sequence - last.sequence < max(last.records, 1) { return }
        try session.db.execute(sql: "PRAGMA analysis_limit = 1000; ANALYZE")
        try session.db.execute(
            sql: "INSERT OR REPLACE INTO _ck_meta (key, value) VALUES ('analyzedAtSeq', ?)", arguments: [sequence])
    }

    /// The change sequence and the change log's row count when the statistics were last taken.
    private func lastAnalysis() throws -> (sequence: Int64, records: Int64)? {
        guard try session.db.tableExists("sqlite_stat1"),
            let sequence = try Int64.fetchOne(
                session.db, sql: "SELECT value FROM _ck_meta WHERE key = 'analyzedAtSeq'"),
            let stat = try String.fetchOne(
                session.db, sql: "SELECT stat FROM sqlite_stat1 WHERE tbl = '_ck_record' LIMIT 1"),
            let records = stat.split(separator: " ").first.flatMap({ Int64($0) })
        else { return nil }
        return (sequence, records)
    }
}
