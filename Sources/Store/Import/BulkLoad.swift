import GRDB
import Records

/// Loading into empty tables builds their indexes once at the end, from sorted data, instead
/// of updating every index for every row: several times faster for a first import. It all
/// happens inside the import's transaction, so a failed import still leaves nothing behind.
final class BulkLoad {
    private let session: StoreSession
    private var decided: Set<String> = []
    /// Index statements to run at the end: table name → CREATE INDEX statements.
    private var deferred: [(table: String, statements: [String])] = []

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
        let indexes = try Row.fetchAll(db, sql: "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", arguments: [typeName])
        guard !indexes.isEmpty else { return }
        for index in indexes { try db.execute(sql: "DROP INDEX \(quoted(index["name"]))") }
        deferred.append((typeName, indexes.map { $0["sql"] }))
        session.dropCachedStatements()
    }

    func finish() throws {
        defer { deferred = [] }
        for entry in deferred {
            // The schema may have dropped the table meanwhile (not in an import, but be safe).
            guard try session.db.tableExists(entry.table) else { continue }
            for sql in entry.statements { try session.db.execute(sql: sql) }
        }
        // Fresh statistics let SQLite pick the most selective index for queries; the limit
        // keeps this to a sample, so it costs milliseconds even on large stores.
        try session.db.execute(sql: "PRAGMA analysis_limit = 1000; ANALYZE")
    }
}
