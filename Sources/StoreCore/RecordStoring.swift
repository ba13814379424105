import Foundation
import Records

/// A record store, whatever keeps it: what the operations need of one. `RecordStore` (SQLite,
/// the `SQLiteStore` module) and `PostgresStore` (PostgreSQL) implement it, each in a module of
/// its own on top of this one; what a store does faster than the protocols allow it offers as
/// a capability (``CanonicalJSONReading``, ``RowReading``, ``VersionedStore``) that callers
/// ask for with `as? any …`, never by naming a backend:
///
/// - Every read and every write happens in a transaction the body runs inside (``read(_:)``,
///   ``write(dryRun:_:)``); on a server that is one connection from a pool, held only for the
///   body. A body that throws leaves the store exactly as it was.
/// - Readers see one committed state and never wait for writers. Writers may run at the same
///   time as other processes' writers; a store that serialises them (SQLite) waits and then
///   fails with ``StoreError/busy(path:seconds:)``, one that does not (a server) lets them
///   proceed and reports conflicts the same way.
/// - Bulk loads go through ``importRecords(_:schema:options:hooks:)``, which each store
///   implements its own fastest way (SQLite: prepared inserts with indexes rebuilt once; a
///   server: its copy protocol).
/// - Change tokens, tombstones and assets belong to the store: a change token names the store
///   it comes from (``storeID``) and a sequence only that store advances.
///
/// `StoreConformance` (the `CKPortStoreConformance` product) holds the checks every
/// implementation must pass, one group per part of ``RecordSession``.
public protocol RecordStoring: AnyObject, Sendable {
    associatedtype Session: RecordSession

    /// Where the store is, for messages: a file's path, a server's address.
    var location: String { get }
    /// The store's identity, the first part of its change tokens.
    var storeID: String { get }
    /// The schema as the store holds it now, read afresh (when it cannot be read, the last one
    /// known: ``loadSchema()`` says why).
    var schema: Schema { get }
    /// The schema as the store holds it now, read afresh, or why it cannot be read (a lock
    /// held longer than the store's wait, a lost connection).
    func loadSchema() throws -> Schema

    /// Runs `body` in a read transaction: one committed state of the store.
    func read<T>(_ body: (Session) throws -> T) throws -> T
    /// Runs `body` in a write transaction that commits when it returns (and rolls back when it
    /// throws, or when `dryRun` is set).
    func write<T>(dryRun: Bool, _ body: (Session) throws -> T) throws -> T
    /// ``write(dryRun:_:)`` for a transaction that does to the schema what `schema` says: a
    /// store where writers run side by side takes, from the start, the locks such a change
    /// needs, so that two writers never each hold what the other waits for.
    func write<T>(dryRun: Bool, schema: SchemaUse, _ body: (Session) throws -> T) throws -> T
    /// Changes the schema to `schema`, refusing a change that would lose records' data.
    @discardableResult
    func importSchema(_ schema: Schema, dryRun: Bool) throws -> SchemaChange
    /// Loads records from `sources` in one transaction: all of them or, when one is invalid
    /// and invalid records are not skipped, none.
    func importRecords(_ sources: [RecordSource], schema: Schema?, options: ImportOptions, hooks: ImportHooks) throws
        -> ImportSummary
    /// Lets go of the store's connections once what uses them has finished (a SQLite store's
    /// last connection takes its write-ahead log files with it). Using the store afterwards
    /// is an error.
    func closeConnections() throws
}

extension RecordStoring {
    /// A store that holds nothing to let go of early: it goes with the handle.
    public func closeConnections() throws {}
}

/// What a write transaction may do to the schema.
public enum SchemaUse: Sendable {
    /// Records only: the schema stays as it is.
    case keeps
    /// May change the schema: add, drop or retype types and fields, rebuild tables (a schema
    /// import, a migration, an import that brings new fields).
    case changes
}

/// What a caller hears of, and adds to, a bulk load.
public struct ImportHooks {
    /// Progress: records and bytes read so far.
    public var progress: ((ImportProgress) -> Void)?
    /// Where rejected records go, when invalid records are skipped.
    public var rejects: RejectSink?
    /// Record types to add to the schema before the records go in.
    public var addingTypes: [RecordTypeDefinition]
    /// Runs in the load's transaction after the last record, before it commits; throwing
    /// rolls the whole load back.
    public var finishing: ((any RecordSession) throws -> Void)?

    public init(
        progress: ((ImportProgress) -> Void)? = nil, rejects: RejectSink? = nil,
        addingTypes: [RecordTypeDefinition] = [],
        finishing: ((any RecordSession) throws -> Void)? = nil
    ) {
        self.progress = progress
        self.rejects = rejects
        self.addingTypes = addingTypes
        self.finishing = finishing
    }
}

/// One transaction on a record store: everything a store's transaction can do, in five parts
/// that code asks for one at a time when it needs only one (a reader takes
/// `some RecordReading`). A backend implements each part; the conformance suite
/// (`StoreConformance`, the `CKPortStoreConformance` product) has a group of checks for each.
public protocol RecordSession: RecordWriting, AssetStoring, SyncStateStoring, MigrationRewriting {}

/// Reading records inside a transaction: one committed state of the store.
public protocol RecordReading: AnyObject {
    /// The schema as this transaction sees it.
    var schema: Schema { get }
    var storeID: String { get }
    /// The token of the last change this transaction sees.
    var currentToken: ChangeToken { get }
    /// Every zone that holds or held records, in order.
    var zones: [ZoneID] { get }

    /// The live record with this ID, if any.
    func record(_ id: RecordID) throws -> Record?
    /// The records `query` selects, in its order (scope, zone, type, name unless sorted).
    func forEach(_ query: RecordQuery, _ body: (Record) throws -> Void) throws
    /// How many records `query` selects.
    func count(_ query: RecordQuery) throws -> Int
    /// The store's plan for each statement of `query` (which indexes it uses), for
    /// `export --explain`.
    func queryPlan(_ query: RecordQuery) throws -> [(sql: String, plan: [String])]
    /// Every change after `token`, in the order it happened; deletions as tombstones.
    func forEachChange(
        since token: ChangeToken, recordTypes: [String], scope: DatabaseScope?, zoneName: String?,
        _ body: (Record) throws -> Void) throws
    /// Records and tombstones per zone and type.
    func stats() throws -> StoreStats
    /// The live record of `type` named `name`, in whichever zone holds it.
    func record(named name: String, ofType type: String) throws -> Record?
    /// The live records of `type` whose REFERENCE field `field` points at `target`.
    func records(ofType type: String, whose field: String, pointsAt target: RecordID) throws -> [Record]
    /// The record-level shares of `zone`, each with its root and how many records its
    /// hierarchy carries, counted in the store (memory stays flat however large the zone), in
    /// share-name order.
    func shareHierarchies(in zone: ZoneID) throws -> [ShareHierarchy]
    /// The earliest and latest value of these TIMESTAMP fields among the records `query`
    /// selects; nil when none of them has a value.
    func bounds(_ query: RecordQuery, fields: [String]) throws -> (Int64, Int64)?
}

/// Changing records inside a write transaction, with CloudKit's rules (save modes, reference
/// actions, shares that go with their roots).
public protocol RecordWriting: RecordReading {
    /// Saves a record in `mode`; says whether it was inserted, updated or unchanged.
    @discardableResult
    func save(_ record: Record, mode: WriteMode) throws -> SaveOutcome
    /// Deletes these records and what their reference actions take with them.
    @discardableResult
    func delete(_ ids: [RecordID]) throws -> [DeletedRecord]
    /// Deletes the records `query` selects, and what their reference actions take with them.
    @discardableResult
    func delete(matching query: RecordQuery) throws -> [DeletedRecord]
}

/// The bytes of ASSET fields, which a store keeps once each by their SHA-256.
public protocol AssetStoring: AnyObject {
    /// Stores an asset's bytes (a file's, or bytes set aside), checked against what the record
    /// says of them.
    @discardableResult
    func putAsset(_ source: AssetSource, expectedSHA256: String?, expectedSize: Int64?) throws -> (
        sha256: String, size: Int64, added: Bool
    )
    /// Passes an asset's bytes to `body`, a piece at a time; false when the store lacks them.
    @discardableResult
    func readAsset(_ sha256: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool
    /// The size of an asset the store holds.
    func assetSize(_ sha256: String) throws -> Int64?
}

/// How a migration changes records where they are, and the history of migrations applied.
public protocol MigrationRewriting: AnyObject {
    /// Changes the schema to `newSchema` and passes every record of `types` through
    /// `transform` (nil: unchanged; else the records that take its place), in this transaction:
    /// how a migration rewrites records. A transform that throws fails the transaction.
    @discardableResult
    func rewrite(types: Set<String>, into newSchema: Schema, _ transform: (Record) throws -> [Record]?) throws
        -> [String: RewriteCounts]
    /// Whether ``updateInPlace(type:into:renames:writes:reads:_:)`` can migrate `type` (a store may
    /// always answer false, and every migration then goes through ``rewrite(types:into:_:)``).
    func canUpdateInPlace(type: String, into newSchema: Schema, renames: [String: String]) -> Bool
    /// Migrates the records of one type where they are, renaming fields by `renames` and
    /// writing the fields in `writes` from what `transform` returns: faster than a rewrite
    /// when a migration only renames and sets fields. With `reads` (field names before the
    /// migration), the records `transform` sees may carry only those fields besides their
    /// name, zone and the times they were created and modified (not their change tags,
    /// creators, devices, parents or shares); nil hands it whole records. With `byValues`, a
    /// store may instead hand each record's name and field values (those of `reads`) to the
    /// transform it makes, and build no records (`transform` is then not called).
    @discardableResult
    func updateInPlace(
        type: String, into newSchema: Schema, renames: [String: String], writes: Set<String>, reads: Set<String>?,
        byValues: InPlaceValues?, _ transform: @escaping (Record) throws -> [Record]?
    ) throws -> RewriteCounts

    /// The migrations applied, oldest first, of one set or of all.
    func migrationHistory(set: String?) throws -> [MigrationHistoryEntry]
    /// Records a migration as applied.
    func recordMigration(_ entry: MigrationHistoryEntry) throws
}

/// Where pulls from a source (a CloudKit container's database) got to: one token per zone,
/// saved in the transaction that saves the records it covers.
public protocol SyncStateStoring: AnyObject {
    /// Where pulls from `source` got to, zone by zone.
    func syncStates(source: String) throws -> [SyncState]
    /// Every source a pull saved a sync state for, sorted.
    func syncSources() throws -> [String]
    /// Saves (or, with nil, forgets) where a pull of `zone` from `source` got to, in this
    /// transaction, so that a page of records and its token commit together.
    func saveSyncToken(_ token: String?, source: String, zone: ZoneID) throws

    /// The value kept under `key` of the state `kind`/`name` (a feed, a CalDAV publication or
    /// pull), or nil.
    func connectorState(kind: String, name: String, key: String) throws -> String?
    /// Every entry of `kind` (of `name` too, when given), in order of kind, name and key (byte
    /// by byte), one at a time.
    func forEachConnectorState(
        kind: String?, name: String?, _ body: (ConnectorStateEntry) throws -> Void
    ) throws
    /// The names kept under `kind`, sorted byte by byte.
    func connectorStateNames(kind: String) throws -> [String]
    /// Saves (or, with nil, removes) one entry, in this transaction: with the records it
    /// speaks of, so that both commit or neither does.
    func saveConnectorState(_ value: String?, kind: String, name: String, key: String) throws
    /// Removes every entry of `kind`/`name`, in this transaction.
    func removeConnectorState(kind: String, name: String) throws
}

/// A write transaction a bulk load drives: a ``RecordSession`` that also changes the schema as
/// the load goes (new fields, new types) and saves records through a ``RecordLoader``.
public protocol LoadingSession: RecordSession {
    /// Changes tables, columns and indexes to `newSchema` inside this transaction.
    @discardableResult
    func apply(schema newSchema: Schema) throws -> SchemaChange
    /// Adds a field to the schema and its column to the table, inside this transaction.
    func addField(_ field: FieldDefinition, toType typeName: String) throws
    /// A saver for the records of one load in this transaction.
    func makeLoader() throws -> any RecordLoader
}

/// Saves the records of one bulk load, each as ``RecordSession/save(_:mode:)`` would, in the
/// store's fastest way: one at a time (SQLite's prepared inserts) or held and saved many at once
/// (a server's copy protocol).
public protocol RecordLoader: AnyObject {
    /// Called before the first record of a type is saved.
    func prepare(for recordType: String) throws
    /// Saves `record` now and says what that did, or holds it and answers nil: held records are
    /// saved by ``flush()``, which ``wantsFlush`` asks for.
    ///
    /// - Throws: ``SaveRefusal`` when the record cannot be saved as it stands.
    func save(_ record: consuming Record, mode: WriteMode) throws -> SaveOutcome?
    /// True when enough records are held that they should be saved now.
    var wantsFlush: Bool { get }
    /// Saves the records held, and says for each, in the order they were given, what that did
    /// or why it was refused. A load flushes before it changes the schema and at its end.
    func flush() throws -> [Result<SaveOutcome, SaveRefusal>]
    /// The end of the load: indexes rebuilt, statistics refreshed, as the store needs.
    func finish(inserted: Int) throws
    /// A record under a name the store holds as another type replaces it (the row of the other
    /// type goes) instead of being refused: ``ImportOptions/replacesOtherTypes``.
    var replacesOtherTypes: Bool { get set }
}

extension RecordStoring where Session: LoadingSession {
    /// A bulk load through ``RecordImporter``, with the store's own ``RecordLoader``.
    public func importRecords(_ sources: [RecordSource], schema: Schema?, options: ImportOptions, hooks: ImportHooks)
        throws -> ImportSummary
    {
        let importer = RecordImporter(store: self, options: options)
        importer.progress = hooks.progress
        importer.rejects = hooks.rejects
        importer.addingTypes = hooks.addingTypes
        if let finishing = hooks.finishing { importer.finishing = { try finishing($0) } }
        return try importer.run(sources, schema: schema)
    }
}

extension AssetStoring {
    /// Stores an asset file's bytes, checked against what the record says of them.
    @discardableResult
    public func putAsset(file path: String, expectedSHA256: String? = nil, expectedSize: Int64? = nil) throws -> (
        sha256: String, size: Int64, added: Bool
    ) {
        try putAsset(.file(path), expectedSHA256: expectedSHA256, expectedSize: expectedSize)
    }
}

extension RecordWriting {
    /// Deletes every record a query selects, with the same reference actions: what
    /// ``delete(_:)`` does to the records ``forEach(_:_:)`` gives.
    @discardableResult
    public func delete(matching query: RecordQuery) throws -> [DeletedRecord] {
        var ids: [RecordID] = []
        try forEach(query) { ids.append($0.id) }
        return try delete(ids)
    }
}

extension RecordStoring {
    /// ``read(_:)`` for code that holds the store as `any RecordStoring`.
    public func readSession<T>(_ body: (any RecordSession) throws -> T) throws -> T {
        try read { try body($0) }
    }

    /// ``write(dryRun:_:)`` for code that holds the store as `any RecordStoring`.
    public func writeSession<T>(
        dryRun: Bool = false, schema: SchemaUse = .keeps, _ body: (any RecordSession) throws -> T
    ) throws -> T {
        try write(dryRun: dryRun, schema: schema) { try body($0) }
    }

    /// One writer at a time holds a store that takes no other locks: every transaction is
    /// ``write(dryRun:_:)``.
    public func write<T>(dryRun: Bool, schema: SchemaUse, _ body: (Session) throws -> T) throws -> T {
        try write(dryRun: dryRun, body)
    }
}

extension MigrationRewriting {
    /// ``updateInPlace(type:into:renames:writes:reads:_:)`` with whole records.
    @discardableResult
    public func updateInPlace(
        type: String, into newSchema: Schema, renames: [String: String], writes: Set<String>,
        _ transform: @escaping (Record) throws -> [Record]?
    ) throws -> RewriteCounts {
        try updateInPlace(
            type: type, into: newSchema, renames: renames, writes: writes, reads: nil, byValues: nil, transform)
    }

    /// ``updateInPlace(type:into:renames:writes:reads:byValues:_:)`` with records only.
    @discardableResult
    public func updateInPlace(
        type: String, into newSchema: Schema, renames: [String: String], writes: Set<String>, reads: Set<String>?,
        _ transform: @escaping (Record) throws -> [Record]?
    ) throws -> RewriteCounts {
        try updateInPlace(
            type: type, into: newSchema, renames: renames, writes: writes, reads: reads, byValues: nil, transform)
    }
}

extension RecordStoring {
    /// ``readSession(_:)`` from asynchronous code: the body runs on ``StoreThreads``, not on
    /// the caller's thread, as an operation of its own (cancelling the calling task stops it
    /// at its next row, and the transaction ends as for any failure).
    public func readSession<T>(_ body: (any RecordSession) throws -> T) async throws -> T {
        try await StoreThreads.run { try self.readSession(body) }
    }

    /// ``writeSession(dryRun:schema:_:)`` from asynchronous code, as ``readSession(_:)``
    /// runs a read.
    public func writeSession<T>(
        dryRun: Bool = false, schema: SchemaUse = .keeps, _ body: (any RecordSession) throws -> T
    ) async throws -> T {
        try await StoreThreads.run { try self.writeSession(dryRun: dryRun, schema: schema, body) }
    }
}

/// The threads on which asynchronous callers' store work runs: a transaction's body is
/// synchronous (a store's inner loops are), so it runs here rather than on Swift concurrency's
/// few threads, which would stall everything else while it reads or waits for a lock.
public final class StoreThreads: TaskExecutor, Sendable {
    private let queue = DispatchQueue(label: "ckport.store", attributes: .concurrent)

    public static let shared = StoreThreads()

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    /// Runs `work` on the store's threads, as an operation of its own inside the caller's.
    public static func run<T>(_ work: () throws -> T) async throws -> T {
        try await Cancellation.operation {
            try await withTaskExecutorPreference(shared) {
                try Interruption.check()
                return try work()
            }
        }
    }
}
