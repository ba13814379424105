import Foundation
import PostgresNIO
import Records
import Store

/// One write transaction on a PostgreSQL store: what it does commits together, or not at all
/// (a pulled page of records and its zone's sync token, say).
public final class PostgresSession {
    let store: PostgresStore

    init(_ store: PostgresStore) { self.store = store }

    /// Saves records (new ones inserted, existing ones replaced) through COPY; see
    /// ``PostgresStore/save(_:)``.
    @discardableResult
    public func save(_ records: [Record]) throws -> Int {
        try store.saveInTransaction(records)
    }

    /// Deletes records with their reference actions; see ``PostgresStore/delete(_:)``.
    @discardableResult
    public func delete(_ ids: [RecordID]) throws -> [DeletedRecord] {
        try store.deleteInTransaction(ids)
    }

    /// Saves where a pull of `zone` from `source` got to (nil forgets it), in this transaction.
    public func saveSyncToken(_ token: String?, source: String, zone: ZoneID) throws {
        let schema = store.location.schema
        if let token {
            let savedAt = Int64(Date().timeIntervalSince1970 * 1000)
            try store.link.execute(query: """
                INSERT INTO \(unescaped: schema)._ck_sync (source, scope, "zoneName", "ownerRecordName", token, "savedAt")
                VALUES (\(source), \(zone.scope.rawValue), \(zone.zoneName), \(zone.ownerRecordName), \(token), \(savedAt))
                ON CONFLICT (source, scope, "zoneName", "ownerRecordName") DO UPDATE SET token = EXCLUDED.token, "savedAt" = EXCLUDED."savedAt"
                """)
        } else {
            try store.link.execute(query: """
                DELETE FROM \(unescaped: schema)._ck_sync
                WHERE source = \(source) AND scope = \(zone.scope.rawValue) AND "zoneName" = \(zone.zoneName) AND "ownerRecordName" = \(zone.ownerRecordName)
                """)
        }
    }
}

extension PostgresSession {
    /// Adds (or, for the same set and version, replaces) an entry of the migration history, in
    /// this transaction: with the records the migration rewrote.
    public func recordMigration(_ entry: MigrationHistoryEntry) throws {
        try store.link.execute(query: """
            INSERT INTO \(unescaped: store.location.schema)._ck_migration ("set", version, description, file, checksum, "appliedAt", "durationMs", "recordsChanged")
            VALUES (\(entry.set), \(entry.version), \(entry.description), \(entry.file), \(entry.checksum), \(entry.appliedAt),
                    \(entry.durationMilliseconds), \(entry.recordsChanged))
            ON CONFLICT ("set", version) DO UPDATE SET description = EXCLUDED.description, file = EXCLUDED.file, checksum = EXCLUDED.checksum,
                "appliedAt" = EXCLUDED."appliedAt", "durationMs" = EXCLUDED."durationMs", "recordsChanged" = EXCLUDED."recordsChanged"
            """)
    }
}

extension PostgresStore {
    /// The migrations applied to this store, oldest first; only `set`'s when given.
    public func migrationHistory(set: String? = nil) throws -> [MigrationHistoryEntry] {
        let sql = """
            SELECT "set", version::text, description, file, checksum, "appliedAt"::text, "durationMs"::text, "recordsChanged"::text
            FROM \(location.schema)._ck_migration
            """
        let rows = try set.map { try link.rows("\(unescaped: sql) WHERE \"set\" = \($0) ORDER BY \"set\", version") }
            ?? link.rows(PostgresQuery(unsafeSQL: sql + " ORDER BY \"set\", version"))
        return try rows.map { row in
            guard let set = row[0], let version = row[1].flatMap(Int.init), let description = row[2], let file = row[3], let checksum = row[4],
                  let appliedAt = row[5].flatMap(Int64.init), let duration = row[6].flatMap(Int64.init), let changed = row[7].flatMap(Int.init) else {
                throw PostgresStoreError.notAStore("\(location): a migration history row is incomplete")
            }
            return MigrationHistoryEntry(set: set, version: version, description: description, file: file, checksum: checksum, appliedAt: appliedAt,
                                         durationMilliseconds: duration, recordsChanged: changed)
        }
    }

    /// Runs `body` in one write transaction and commits it, or rolls everything back when
    /// `body` throws or `dryRun` is set.
    public func write<T>(dryRun: Bool = false, _ body: (PostgresSession) throws -> T) throws -> T {
        try link.transaction(rollback: dryRun) { try body(PostgresSession(self)) }
    }

    /// The sync states saved for `source`, by zone.
    public func syncStates(source: String) throws -> [SyncState] {
        try link.rows("""
            SELECT source, scope, "zoneName", "ownerRecordName", token, "savedAt"::text FROM \(name: location.schema)._ck_sync
            WHERE source = \(source) ORDER BY scope, "zoneName", "ownerRecordName"
            """).compactMap { row in
            guard let source = row[0], let scope = row[1].flatMap(DatabaseScope.init(rawValue:)), let zoneName = row[2], let owner = row[3],
                  let token = row[4], let savedAt = row[5].flatMap(Int64.init) else { return nil }
            return SyncState(source: source, zone: ZoneID(scope: scope, zoneName: zoneName, ownerRecordName: owner), token: token, savedAt: savedAt)
        }
    }
}
