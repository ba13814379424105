import CSQLiteConfig
import Foundation
import GRDB
import Records

/// A record store: one SQLite file holding a CloudKit schema, zones, records, tombstones and
/// the change sequence.
///
/// ```swift
/// let store = try RecordStore(path: "family.sqlite")
/// try store.importSchema(SchemaParser.parse(text))
/// try store.write { session in
///     _ = try session.save(record, mode: .upsert)
/// }
/// ```
///
/// Every write runs in one transaction: when the closure throws, the store is left exactly as
/// it was. The file is a plain SQLite database whose tables are named after the record types,
/// so `sqlite3 family.sqlite 'SELECT title FROM "Task"'` works too.
///
/// ## Topics
/// - ``write(dryRun:_:)``, ``read(_:)``: transactions
/// - ``importSchema(_:)``: schema changes
/// - ``StoreSession``: records, queries, changes and deletes inside a transaction
public final class RecordStore {
    /// The store format this version of ckport writes and reads.
    public static let formatVersion = 1
    /// Where the store lives when neither `--store` nor `$CKPORT_STORE` says.
    public static let defaultPath = "ckport.sqlite"

    public let path: String
    let queue: DatabaseQueue
    /// A random identifier fixed when the store is created; change tokens carry it.
    public let storeID: String
    /// The schema as of the last committed transaction.
    public private(set) var schema: Schema

    /// Opens the store at `path`.
    ///
    /// - Parameter create: create an empty store when no file is there. Commands that only
    ///   read pass false, so a mistyped path is an error rather than a new empty store.
    /// SQLite's process-wide settings, applied once before the first connection opens.
    private static let sqliteConfigured: Int32 = ckport_configure_sqlite()

    public init(path: String, create: Bool = true) throws {
        _ = RecordStore.sqliteConfigured
        self.path = path
        let exists = FileManager.default.fileExists(atPath: path)
        if !exists && !create { throw StoreError.missing(path: path) }
        var configuration = Configuration()
        configuration.label = "ckport"
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            // A rollback journal keeps the store one file at rest, and costs nothing for the
            // new pages of a bulk import; FULL sync makes every commit durable.
            try db.execute(sql: "PRAGMA journal_mode = DELETE; PRAGMA synchronous = FULL; PRAGMA cache_size = -65536; PRAGMA temp_store = FILE")
        }
        do {
            queue = try DatabaseQueue(path: path, configuration: configuration)
            (storeID, schema) = try queue.inDatabase { db in
                try RecordStore.prepare(db, path: path, create: create)
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_NOTADB {
            throw StoreError.notAStore(path: path, reason: "it is not an SQLite database")
        }
    }

    private static func prepare(_ db: Database, path: String, create: Bool) throws -> (String, Schema) {
        if try db.tableExists("_ck_meta") {
            let version = try Int.fetchOne(db, sql: "SELECT value FROM _ck_meta WHERE key = 'format'") ?? 0
            guard version <= formatVersion else { throw StoreError.unsupportedFormat(path: path, version: version) }
            guard let id = try String.fetchOne(db, sql: "SELECT value FROM _ck_meta WHERE key = 'storeID'") else {
                throw StoreError.corrupt("the store has no identifier")
            }
            let text = try String.fetchOne(db, sql: "SELECT value FROM _ck_meta WHERE key = 'schema'") ?? "DEFINE SCHEMA\n"
            do {
                return (id, try SchemaParser.parse(text, file: "stored schema"))
            } catch {
                throw StoreError.corrupt("its schema does not parse: \(error)")
            }
        }
        let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'")
        guard tables.isEmpty else {
            throw StoreError.notAStore(path: path, reason: "it holds other tables (\(tables.prefix(3).joined(separator: ", "))) and no ckport metadata")
        }
        guard create else { throw StoreError.missing(path: path) }
        let id = RecordStore.makeStoreID()
        try db.inTransaction {
            try db.execute(sql: """
                CREATE TABLE _ck_meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
                CREATE TABLE _ck_zone (
                  id INTEGER PRIMARY KEY,
                  scope TEXT NOT NULL,
                  zoneName TEXT NOT NULL,
                  ownerRecordName TEXT NOT NULL,
                  UNIQUE (scope, zoneName, ownerRecordName)
                );
                -- One row per record name ever stored: live records and tombstones. Record names
                -- are unique per zone whatever the type, and seq is the change that last touched it.
                CREATE TABLE _ck_record (
                  zone INTEGER NOT NULL,
                  recordName TEXT NOT NULL,
                  recordType TEXT NOT NULL,
                  seq INTEGER NOT NULL,
                  deleted INTEGER NOT NULL DEFAULT 0,
                  PRIMARY KEY (zone, recordName)
                ) WITHOUT ROWID;
                CREATE INDEX _ck_record_seq ON _ck_record (seq);
                """)
            try db.execute(sql: "INSERT INTO _ck_meta (key, value) VALUES ('format', ?), ('storeID', ?), ('changeSeq', 0), ('schema', ?), ('created', ?)",
                           arguments: [formatVersion, id, SchemaPrinter.print(Schema()), ISO8601.format(milliseconds: Int64(Date().timeIntervalSince1970 * 1000))])
            return .commit
        }
        return (id, Schema())
    }

    static func makeStoreID() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<12).map { _ in String("0123456789abcdef".randomElement(using: &generator)!) }.joined()
    }

    /// Where the store is, from `--store`, then `$CKPORT_STORE`, then `./ckport.sqlite`.
    public static func resolvePath(_ option: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let option, !option.isEmpty { return option }
        if let fromEnvironment = environment["CKPORT_STORE"], !fromEnvironment.isEmpty { return fromEnvironment }
        return defaultPath
    }

    // MARK: Transactions

    /// Runs `body` in one write transaction and commits it, or rolls everything back when
    /// `body` throws or `dryRun` is true.
    public func write<T>(dryRun: Bool = false, _ body: (StoreSession) throws -> T) throws -> T {
        do {
            return try writeTransaction(dryRun: dryRun, body)
        } catch let error as DatabaseError where error.resultCode == .SQLITE_FULL || error.resultCode == .SQLITE_IOERR {
            throw StoreError.cannotWrite(path: path, reason: "SQLite: \(error.message ?? "\(error.resultCode)")")
        }
    }

    private func writeTransaction<T>(dryRun: Bool, _ body: (StoreSession) throws -> T) throws -> T {
        try queue.inDatabase { db in
            var result: T?
            var newSchema: Schema?
            try db.inTransaction(.immediate) {
                let session = try StoreSession(db: db, store: self, writable: true)
                result = try body(session)
                try session.finish()
                if session.schemaChanged { newSchema = session.schema }
                return dryRun ? .rollback : .commit
            }
            if !dryRun, let newSchema { schema = newSchema }
            return result!
        }
    }

    /// Runs `body` in a read transaction: it sees one consistent state of the store.
    public func read<T>(_ body: (StoreSession) throws -> T) throws -> T {
        try queue.inDatabase { db in
            var result: T?
            try db.inTransaction(.deferred) {
                let session = try StoreSession(db: db, store: self, writable: false)
                result = try body(session)
                return .rollback
            }
            return result!
        }
    }

    /// Replaces the store's schema, changing tables, columns and indexes to match.
    ///
    /// New types and fields are always accepted. A type or field that goes away, or a field
    /// whose type changes, is accepted only while no stored record holds a value for it;
    /// otherwise nothing changes and the error lists every stored value in the way.
    @discardableResult
    public func importSchema(_ newSchema: Schema, dryRun: Bool = false) throws -> SchemaChange {
        try write(dryRun: dryRun) { session in try session.apply(schema: newSchema) }
    }

    /// The size of the store on disk, in bytes.
    public var fileSize: Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? NSNumber)?.int64Value ?? 0
    }

    /// Runs SQLite's integrity check and returns its report (`["ok"]` when the file is sound).
    public func integrityCheck() throws -> [String] {
        try queue.inDatabase { db in try String.fetchAll(db, sql: "PRAGMA integrity_check") }
    }
}
