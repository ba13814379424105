import Foundation
import Records
import StoreCore

// GRDB by name, so that its `Record` class stays out of the way of ckport's `Record`.
import class GRDB.Database
import class GRDB.Row
import struct GRDB.StatementArguments

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

// MARK: - Connector state

extension StoreSession {
    private static let stateTable = """
        CREATE TABLE IF NOT EXISTS _ck_state (
          kind TEXT NOT NULL,
          name TEXT NOT NULL,
          key TEXT NOT NULL,
          value TEXT NOT NULL,
          PRIMARY KEY (kind, name, key)
        ) WITHOUT ROWID
        """

    /// The value kept under `key` of `kind`/`name`, or nil.
    public func connectorState(kind: String, name: String, key: String) throws -> String? {
        guard try db.tableExists("_ck_state") else { return nil }
        return try String.fetchOne(
            db, sql: "SELECT value FROM _ck_state WHERE kind = ? AND name = ? AND key = ?",
            arguments: [kind, name, key])
    }

    /// Every entry of `kind` (and `name`), in order of kind, name and key, one at a time.
    public func forEachConnectorState(
        kind: String?, name: String?, _ body: (ConnectorStateEntry) throws -> Void
    ) throws {
        guard try db.tableExists("_ck_state") else { return }
        var conditions: [String] = []
        var arguments: [String] = []
        if let kind {
            conditions.append("kind = ?")
            arguments.append(kind)
        }
        if let name {
            conditions.append("name = ?")
            arguments.append(name)
        }
        let filter = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
        let rows = try Row.fetchCursor(
            db, sql: "SELECT kind, name, key, value FROM _ck_state\(filter) ORDER BY kind, name, key",
            arguments: StatementArguments(arguments))
        while let row = try rows.next() {
            try body(ConnectorStateEntry(kind: row[0], name: row[1], key: row[2], value: row[3]))
        }
    }

    /// The names kept under `kind`, sorted.
    public func connectorStateNames(kind: String) throws -> [String] {
        guard try db.tableExists("_ck_state") else { return [] }
        return try String.fetchAll(
            db, sql: "SELECT DISTINCT name FROM _ck_state WHERE kind = ? ORDER BY name", arguments: [kind])
    }

    /// Saves (nil removes) one entry, in this transaction.
    public func saveConnectorState(_ value: String?, kind: String, name: String, key: String) throws {
        precondition(writable)
        if let value {
            try db.execute(sql: StoreSession.stateTable)
            try db.execute(
                sql: "INSERT OR REPLACE INTO _ck_state VALUES (?, ?, ?, ?)", arguments: [kind, name, key, value])
        } else if try db.tableExists("_ck_state") {
            try db.execute(
                sql: "DELETE FROM _ck_state WHERE kind = ? AND name = ? AND key = ?", arguments: [kind, name, key])
        }
    }

    /// Removes every entry of `kind`/`name`, in this transaction.
    public func removeConnectorState(kind: String, name: String) throws {
        precondition(writable)
        guard try db.tableExists("_ck_state") else { return }
        try db.execute(sql: "DELETE FROM _ck_state WHERE kind = ? AND name = ?", arguments: [kind, name])
    }
}
