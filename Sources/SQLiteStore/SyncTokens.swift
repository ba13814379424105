import Foundation
import Records
import StoreCore

// GRDB by name, so that its `Record` class stays out of the way of ckport's `Record`.
import class GRDB.Database
import class GRDB.Row

extension StoreSession {
    private static let syncTable = """
        CREATE TABLE IF NOT EXISTS _ck_sync (
          source TEXT NOT NULL,
          scope TEXT NOT NULL,
          zoneName TEXT NOT NULL,
          ownerRecordName TEXT NOT NULL,
          token TEXT NOT NULL,
          savedAt INTEGER NOT NULL,
          PRIMARY KEY (source, scope, zoneName, ownerRecordName)
        ) WITHOUT ROWID
        """

    /// The sync states saved for `source`, by zone.
    public func syncStates(source: String) throws -> [SyncState] {
        guard try db.tableExists("_ck_sync") else { return [] }
        let rows = try Row.fetchAll(
            db, sql: "SELECT * FROM _ck_sync WHERE source = ? ORDER BY scope, zoneName, ownerRecordName",
            arguments: [source])
        return rows.compactMap { row in
            guard let scope = DatabaseScope(text: row["scope"]) else { return nil }
            return SyncState(
                source: row["source"],
                zone: ZoneID(scope: scope, zoneName: row["zoneName"], ownerRecordName: row["ownerRecordName"]),
                token: row["token"], savedAt: row["savedAt"])
        }
    }

    /// Every source a pull saved a sync state for, sorted.
    public func syncSources() throws -> [String] {
        guard try db.tableExists("_ck_sync") else { return [] }
        return try String.fetchAll(db, sql: "SELECT DISTINCT source FROM _ck_sync ORDER BY source")
    }

    /// Saves where a pull of `zone` from `source` got to (nil forgets it, so that the next
    /// pull starts over), in this transaction: with the records of the same page, so that
    /// both commit or neither does.
    public func saveSyncToken(_ token: String?, source: String, zone: ZoneID) throws {
        precondition(writable)
        try db.execute(sql: StoreSession.syncTable)
        if let token {
            try db.execute(
                sql: "INSERT OR REPLACE INTO _ck_sync VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [
                    source, zone.scope.rawValue, zone.zoneName, zone.ownerRecordName, token,
                    Int64(Date().timeIntervalSince1970 * 1000),
                ])
        } else {
            try db.execute(
                sql: "DELETE FROM _ck_sync WHERE source = ? AND scope = ? AND zoneName = ? AND ownerRecordName = ?",
                arguments: [source, zone.scope.rawValue, zone.zoneName, zone.ownerRecordName])
        }
    }
}
