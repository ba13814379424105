import GRDB
import Records
import StoreCore

extension StoreSession {
    private static let historyTable = """
        CREATE TABLE IF NOT EXISTS _ck_migration (
          "set" TEXT NOT NULL,
          version INTEGER NOT NULL,
          description TEXT NOT NULL,
          file TEXT NOT NULL,
          checksum TEXT NOT NULL,
          appliedAt INTEGER NOT NULL,
          durationMs INTEGER NOT NULL,
          recordsChanged INTEGER NOT NULL,
          PRIMARY KEY ("set", version)
        ) WITHOUT ROWID
        """

    /// The migrations applied to this store, oldest first; only `set`'s when given.
    public func migrationHistory(set: String? = nil) throws -> [MigrationHistoryEntry] {
        guard try db.tableExists("_ck_migration") else { return [] }
        let rows = try Row.fetchAll(
            db,
            sql: "SELECT * FROM _ck_migration" + (set == nil ? "" : " WHERE \"set\" = ?")
                + " ORDER BY \"set\", version",
            arguments: set.map { [$0] } ?? [])
        return rows.map { row in
            MigrationHistoryEntry(
                set: row["set"], version: row["version"], description: row["description"], file: row["file"],
                checksum: row["checksum"], appliedAt: row["appliedAt"], durationMilliseconds: row["durationMs"],
                recordsChanged: row["recordsChanged"])
        }
    }

    /// Adds (or, for the same set and version, replaces) an entry of the history.
    public func recordMigration(_ entry: MigrationHistoryEntry) throws {
        precondition(writable)
        try db.execute(sql: StoreSession.historyTable)
        try db.execute(
            sql: "INSERT OR REPLACE INTO _ck_migration VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            arguments: [
                entry.set, entry.version, entry.description, entry.file, entry.checksum, entry.appliedAt,
                entry.durationMilliseconds, entry.recordsChanged,
            ])
    }
}
