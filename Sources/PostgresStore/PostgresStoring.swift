import Foundation
import Records
import StoreCore

/// The PostgreSQL store behind the store protocols: every operation (import, export, backups,
/// restores, migrations, deletes, pulls and pushes) works on it as on the SQLite store.
extension PostgresStore: RecordStoring {}

extension PostgresSession: RecordSession {}

extension PostgresSession {
    /// Saves `records` in this transaction, each in `mode`, many at a time (see
    /// ``PostgresLoader``); the first refusal fails the save (and the transaction with it).
    @discardableResult
    public func save(_ records: [Record], mode: WriteMode = .replace) throws -> Int {
        let loader = PostgresLoader(self)
        var results: [Result<SaveOutcome, SaveRefusal>] = []
        for record in records {
            guard schema.recordType(named: record.recordType) != nil else {
                throw StoreError.schemaChangeRefused([
                    "record \(record.recordName) is of type \(record.recordType), which the store's schema does not define (import a schema that does first)"
                ])
            }
            _ = try loader.save(record, mode: mode)
            if loader.wantsFlush { results += try loader.flush() }
        }
        results += try loader.flush()
        for result in results { _ = try result.get() }
        return records.count
    }
}

extension PostgresStore {
    /// Saves `records` in one transaction, each replacing a stored record of the same name
    /// (fields as given; the change tag and stamp parts it does not say are kept); the last of
    /// a name given twice wins. Refused, with nothing saved, when a name is held by a record of
    /// another type.
    @discardableResult
    public func save(_ records: [Record]) throws -> Int {
        try save(records, whileOpen: nil)
    }

    /// ``save(_:)``, running `whileOpen` just before the transaction commits (for tests that
    /// hold a write open while others work).
    func save(_ records: [Record], whileOpen: (() throws -> Void)?) throws -> Int {
        try write { session in
            let saved = try session.save(records)
            try whileOpen?()
            return saved
        }
    }

    /// Deletes records with their reference actions, in one transaction; see
    /// ``PostgresSession/delete(_:)``.
    @discardableResult
    public func delete(_ ids: [RecordID]) throws -> [DeletedRecord] {
        try write { try $0.delete(ids) }
    }

    /// Every live record of `type`, in zone and name order.
    public func forEach(recordType type: String, _ body: (Record) throws -> Void) throws {
        try read { try $0.forEach(RecordQuery(recordTypes: [type]), body) }
    }

    /// The live record with this ID, if any.
    public func record(_ id: RecordID) throws -> Record? {
        try read { try $0.record(id) }
    }

    /// Records and tombstones per zone and type, the size on the server, the change token.
    public func stats() throws -> StoreStats {
        try read { try $0.stats() }
    }

    /// The migrations applied to this store, oldest first; only `set`'s when given.
    public func migrationHistory(set: String? = nil) throws -> [MigrationHistoryEntry] {
        try read { try $0.migrationHistory(set: set) }
    }

    /// The sync states saved for `source`, by zone.
    public func syncStates(source: String) throws -> [SyncState] {
        try read { try $0.syncStates(source: source) }
    }

    /// The size of an asset the store holds.
    public func assetSize(_ sha256: String) throws -> Int64? {
        try read { try $0.assetSize(sha256) }
    }

    /// Passes an asset's bytes to `body` a megabyte at a time, in one snapshot; false when the
    /// store lacks them.
    @discardableResult
    public func readAsset(_ sha256: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
        try read { try $0.readAsset(sha256, body) }
    }
}

extension PostgresStore: VersionedStore {
    public var formatVersion: Int { Self.format }
}

/// PostgreSQL stores, named by `postgresql://` (or `postgres://`) URLs.
public struct PostgresBackend: RecordStoreBackend {
    private let environment: [String: String]

    /// `environment` gives the password's variables (`PGPASSWORD`) and `~/.pgpass`'s home.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.environment = environment
    }

    public var name: String { "PostgreSQL" }

    public func handles(_ location: String) -> Bool { PostgresLocation.isURL(location) }

    public func open(_ location: String, options: StoreOpenOptions) throws -> any RecordStoring {
        try PostgresStore(
            PostgresLocation(location, environment: environment), create: options.create, upgrade: options.upgrade,
            waitSeconds: options.waitSeconds, environment: environment)
    }

    public func exists(_ location: String, options: StoreOpenOptions) -> Bool {
        var options = options
        options.create = false
        do {
            let store = try open(location, options: options)
            try store.closeConnections()
            return true
        } catch PostgresStoreError.noStore {
            return false
        } catch {
            return true
        }
    }
}
