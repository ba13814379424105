import CPlatform
import CSQLiteConfig
import Foundation
import GRDB
import Records
import StoreCore
import Synchronization

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
public final class RecordStore: Sendable {
    /// The store format this version of ckport writes and reads. Format 2 added the `parent`,
    /// `share` and share-details system columns; a format 1 store is upgraded in place when it
    /// is opened (``upgradedFrom``).
    public static let formatVersion = 2
    /// Where the store lives when neither `--store` nor `$CKPORT_STORE` says.
    public static let defaultPath = "ckport.sqlite"
    /// How long a write waits for another process's write to end before giving up, in seconds.
    public static let defaultWaitSeconds = StoreOpenOptions.defaultWaitSeconds

    public let path: String
    /// The connection: a new store built aside gets another once it has its name.
    var queue: DatabaseQueue { state.withLock { $0.queue } }
    /// A random identifier fixed when the store is created; change tokens carry it.
    public let storeID: String
    private let schemaCache = SchemaCache()
    private let waiter: LockWaiter
    /// True while this instance created the file and nothing it wrote has been committed: a
    /// failed first write then removes the file again rather than leave an empty store behind.
    private var createdHere: Bool {
        get { state.withLock { $0.createdHere } }
        set { state.withLock { $0.createdHere = newValue } }
    }
    /// The format the store had before opening it upgraded it, nil when it needed no upgrade.
    public let upgradedFrom: Int?
    /// While a new store is built aside (see `init`'s `buildAside`): the file it is built in,
    /// which takes ``path``'s name when its first write commits.
    private var aside: String? { state.withLock { $0.aside } }

    /// What changes after the store is opened (a store built aside is given its name when its
    /// first write commits), behind a lock of its own: one handle serves many threads.
    private struct State {
        var queue: DatabaseQueue
        var createdHere: Bool
        var aside: String?
        var willPublish: (@Sendable (String) -> Void)?
    }
    private let state: Mutex<State>
    /// Held for the whole of ``write(dryRun:_:)``.
    private let writing = NSRecursiveLock()

    /// True while the store is being built aside: nothing is at ``path`` yet, and nothing will
    /// be unless a write commits.
    public var isBuiltAside: Bool { aside != nil }

    /// The page cache of each connection, in SQLite's notation (negative: kibibytes): 64 MB.
    static let cacheSize = -65536

    /// The page cache while a bulk load rebuilds indexes: 16 MB. SQLite's sorter holds as much
    /// again besides the cache, so the two stay within what the cache alone takes otherwise.
    static let indexBuildCacheSize = -16384

    /// SQLite's process-wide settings, applied once before the first connection opens.
    private static let sqliteConfigured: Int32 = ckport_configure_sqlite()

    /// Opens the store at `path`.
    ///
    /// - Parameters:
    ///   - create: create an empty store when no file is there. Commands that only read pass
    ///     false, so a mistyped path is an error rather than a new empty store.
    ///   - waitSeconds: how long a write waits while another process writes to the same store
    ///     before it gives up with ``StoreError/busy(path:seconds:)``. Readers never wait for
    ///     writers: they read the last committed state.
    ///   - waiting: called once each time a write starts to wait for another process.
    ///   - upgrade: bring a store of an older format up to date in place (a write); false
    ///     refuses such a store instead, for a caller that promises to change nothing.
    ///   - buildAside: when no store is at `path`, build the new store in a file of its own
    ///     beside it, which no other process can see, and give it `path`'s name when the first
    ///     write commits (see ``isBuiltAside``). Nobody can read a store that is not there yet,
    ///     so that file needs no write-ahead log: a bulk load writes each page once instead of
    ///     twice, and syncs once, at the end (README, Benchmark). Until then nothing is at `path`;
    ///     a write that fails, or a process that is killed, leaves nothing there either.
    public init(
        path: String, create: Bool = true, upgrade: Bool = true, waitSeconds: Double = RecordStore.defaultWaitSeconds,
        waiting: (@Sendable () -> Void)? = nil, buildAside: Bool = false
    ) throws {
        _ = RecordStore.sqliteConfigured
        self.path = path
        var isDirectory: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
        if exists && isDirectory.boolValue { throw StoreError.notAStore(path: path, reason: "it is a folder") }
        if !exists && !create { throw StoreError.missing(path: path) }
        if !exists {
            let folder = (path as NSString).deletingLastPathComponent
            if !folder.isEmpty && !FileManager.default.fileExists(atPath: folder) {
                throw StoreError.unavailable(path: path, reason: "its folder \(folder) does not exist")
            }
        }
        let waiter = LockWaiter(limit: waitSeconds, onWait: waiting)
        self.waiter = waiter
        let configuration = RecordStore.configuration(waiter: waiter)
        // Only where nothing is at the path, or a link to nothing (not a loop of links).
        var entry = stat()
        let nothingThere = lstat(path, &entry) != 0 && errno == ENOENT
        let linkTarget = RecordStore.danglingLinkTarget(path)
        if !exists && create && buildAside && (nothingThere || linkTarget != nil),
            let temporary = RecordStore.makeAside(for: linkTarget ?? path)
        {
            do {
                let queue = try DatabaseQueue(
                    path: temporary, configuration: RecordStore.configuration(waiter: waiter, aside: true))
                storeID = try queue.inDatabase { db in try RecordStore.prepare(db, path: path, create: true).id }
                state = Mutex(State(queue: queue, createdHere: true, aside: temporary))
            } catch {
                for suffix in RecordStore.fileSuffixes { unlink(temporary + suffix) }
                throw RecordStore.translate(error, path: path, waiter: waiter)
            }
            upgradedFrom = nil
            return
        }
        // A link to a store not made yet: the store is made where the link points, whole and
        // its owner's alone, as at any other path (SQLite would otherwise create the file
        // behind the link with the umask's mode). createWhole's errors are the store's own.
        let madeWhole =
            try !exists && RecordStore.createWhole(at: RecordStore.danglingLinkTarget(path) ?? path, waiter: waiter)
        let queue: DatabaseQueue
        var createdHere: Bool
        do {
            waiter.reading = true
            defer { waiter.reading = false }
            queue = try DatabaseQueue(path: path, configuration: configuration)
            (storeID, createdHere) = try queue.inDatabase { db in
                try RecordStore.prepare(db, path: path, create: create)
            }
            if !upgrade {
                // A store without a format row is of format 0 here, as the upgrade takes it.
                let seen =
                    try queue.inDatabase { db in
                        try Int.fetchOne(db, sql: "SELECT value FROM _ck_meta WHERE key = 'format'")
                    } ?? 0
                if seen < RecordStore.formatVersion { throw StoreError.readOnlyNeedsUpgrade(path: path, version: seen) }
            }
            upgradedFrom = try queue.inDatabase { db in try RecordStore.upgrade(db, path: path) }
        } catch {
            throw RecordStore.translate(error, path: path, waiter: waiter)
        }
        if exists { createdHere = false } else if madeWhole { createdHere = true }
        state = Mutex(State(queue: queue, createdHere: createdHere))
    }

    /// How every connection to a store is opened; `aside`, a store built aside (see
    /// ``isBuiltAside``).
    private static func configuration(waiter: LockWaiter, aside: Bool = false) -> Configuration {
        var configuration = Configuration()
        configuration.label = aside ? "ckport-aside" : "ckport"
        configuration.busyMode = .callback { tries in waiter.shouldRetry(tries) }
        // Write-ahead logging: readers keep reading the last committed state while a write
        // runs, and a write that fails or is killed never touches the main file. FULL sync
        // makes every commit durable; the log is folded back into the file, and removed, when
        // the last connection closes. A store built aside, which nobody else reads, keeps a
        // rollback journal instead and is not synced: the journal holds the few pages there
        // before the write (a new store's tables), so a failed write still rolls back, and
        // every page the load adds goes to the file once; the file is synced when it is whole
        // (``publishAside()``), and a process killed before leaves a file nobody reads.
        let journal =
            aside
            ? "PRAGMA journal_mode = DELETE; PRAGMA synchronous = OFF"
            : "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA journal_size_limit = 67108864"
        configuration.prepareDatabase { db in
            // A new store gets 16 KB pages (SQLite's default is 4 KB; an existing store keeps
            // the size it has): a bulk load writes a quarter as many pages into the log and
            // reads a quarter as many back while it builds the indexes, which made importing
            // 10,000,000 records 1.3× faster (README, Benchmark).
            try db.execute(sql: "PRAGMA page_size = 16384")
            // Entering write-ahead logging takes the file whole for a moment, and SQLite answers
            // a connection that cannot have it at once "busy" without calling the busy handler
            // (another ckport opening the same store at that moment holds it): try again as the
            // busy handler would, for as long (a deadline of its own: the busy handler, when
            // SQLite does call it inside the statement, starts its own clock again).
            let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(min(max(waiter.limit, 0), 1e9) * 1e9)
            var tries = 0
            while true {
                do {
                    try db.execute(sql: journal)
                    break
                } catch let error as DatabaseError
                    where error.resultCode == .SQLITE_BUSY && DispatchTime.now().uptimeNanoseconds < deadline
                    && waiter.shouldRetry(tries)
                {
                    tries += 1
                }
            }
            try db.execute(sql: "PRAGMA cache_size = \(RecordStore.cacheSize); PRAGMA temp_store = FILE")
        }
        return configuration
    }

    /// The files SQLite keeps for a database: the file itself, its rollback journal, its
    /// write-ahead log and the log's index.
    static let fileSuffixes = ["", "-journal", "-wal", "-shm"]

    /// A new, empty file beside `path` to build a store in, named as ckport's other files on
    /// their way (a killed process's is removed once that process is gone); nil when the file
    /// system cannot give it `path`'s name later without replacing what may be there by then
    /// (the store is then made as usual).
    private static func makeAside(for path: String) -> String? {
        let folder = RecordStore.folder(of: path)
        PrivateFiles.removeStale(in: folder)
        let temporary = sideName(for: path)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        close(fd)
        // Whether a name can be given without replacing: tried once on a name nobody has.
        let probe = sideName(for: path)
        guard place(temporary, at: probe) == 0 else {
            unlink(temporary)
            return nil
        }
        guard rename(probe, temporary) == 0 else {
            unlink(probe)
            return nil
        }
        return temporary
    }

    /// A new name beside `path` for a file on its way there: `.NAME.ckport-PID-N.tmp`, as
    /// ckport names its other such files, so that what a killed process left is removed as
    /// soon as that process is gone (``PrivateFiles/removeStale(in:)``).
    private static func sideName(for path: String) -> String {
        (folder(of: path) as NSString).appendingPathComponent(
            ".\((path as NSString).lastPathComponent).ckport-\(getpid())-\(makeStoreID()).tmp")
    }

    /// Gives `temporary` the name `path` if nothing has that name, by a rename that never
    /// replaces a file (or, where the file system has none, a hard link, after which the
    /// temporary name goes); 0, or why not (`errno`'s value).
    private static func place(_ temporary: String, at path: String) -> Int32 {
        if ckport_rename_exclusive(temporary, path) == 0 { return 0 }
        guard [EINVAL, ENOSYS, ENOTSUP, EOPNOTSUPP].contains(errno) else { return errno }
        guard link(temporary, path) == 0 else { return errno }
        unlink(temporary)
        return 0
    }

    /// Syncs the folder of `path`: a name given there is durable once it is synced.
    private static func syncFolder(of path: String) {
        let fd = open(folder(of: path), O_RDONLY | O_CLOEXEC)
        if fd >= 0 {
            _ = fsync(fd)
            close(fd)
        }
    }

    /// Called with the file of a store built aside once it is whole and synced, just before it
    /// is given its name (tests look at it there).
    var willPublish: (@Sendable (String) -> Void)? {
        get { state.withLock { $0.willPublish } }
        set { state.withLock { $0.willPublish = newValue } }
    }

    /// Makes the store built aside the store at ``path``: the log's mode is set (as every
    /// store has it), the file is synced and given its name, which it takes only if nothing
    /// has it (another process that made a store there meanwhile keeps theirs, and this write
    /// fails, having written nothing there), and the store is opened there as usual.
    private func publishAside() throws {
        // Under the lock throughout: a reader on another thread asks for the connection after
        // this one has closed it, and gets the one opened at the store's name.
        try state.withLock { (state: inout State) throws -> Void in
            guard let temporary = state.aside else { return }
            do {
                try state.queue.inDatabase { db in _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") }
                try state.queue.close()
            } catch {
                throw RecordStore.translate(error, path: path, waiter: waiter)
            }
            // A journal left beside it would mean the last commit did not finish; the log and its
            // index, empty once the only connection closed, go.
            guard access(temporary + "-journal", F_OK) != 0 else {
                throw StoreError.cannotWrite(path: path, reason: "the new store could not be written whole")
            }
            for suffix in ["-wal", "-shm"] { unlink(temporary + suffix) }
            let fd = open(temporary, O_RDONLY | O_CLOEXEC)
            let synced = fd >= 0 && fsync(fd) == 0
            let syncError = errno
            if fd >= 0 { close(fd) }
            guard synced else {
                throw StoreError.cannotWrite(
                    path: path,
                    reason: "the new store could not be written to disk (\(String(cString: strerror(syncError))))")
            }
            state.willPublish?(temporary)
            let target = RecordStore.danglingLinkTarget(path) ?? path
            let reason = RecordStore.place(temporary, at: target)
            guard reason == 0 else {
                if reason == EEXIST {
                    throw StoreError.unavailable(
                        path: path,
                        reason:
                            "something appeared there while this store was being built (another process's store?), and it is kept; nothing of this write went into it: run the command again to write into what is there"
                    )
                }
                throw StoreError.unavailable(
                    path: path,
                    reason: "the new store could not be given its name (\(String(cString: strerror(reason))))")
            }
            // The load is at the path from here on: nothing removes it.
            state.aside = nil
            state.createdHere = false
            RecordStore.syncFolder(of: target)
            // Opened as a store is opened: waiting out another process opening it at this moment.
            waiter.reading = true
            defer { waiter.reading = false }
            do {
                state.queue = try DatabaseQueue(path: path, configuration: RecordStore.configuration(waiter: waiter))
            } catch {
                throw StoreError.unavailable(
                    path: path,
                    reason:
                        "the new store was written there whole, but could not be opened again (\(RecordStore.translate(error, path: path, waiter: waiter)))"
                )
            }
        }
    }

    /// Removes the file of a store built aside that was never given its name.
    private func removeAside() {
        state.withLock { state in
            guard let temporary = state.aside else { return }
            state.aside = nil
            try? state.queue.close()
            for suffix in RecordStore.fileSuffixes { unlink(temporary + suffix) }
        }
    }

    deinit {
        removeAside()
    }

    /// Closes the store's connection (it waits for the work under way): the last connection
    /// to the file checkpoints the write-ahead log and removes the `-wal` and `-shm` files.
    public func closeConnections() throws {
        try queue.close()
    }

    /// Makes a new, empty store at `path` that appears there whole: its tables are created in a
    /// file of its own beside `path`, in rollback-journal mode (so that once they are committed
    /// the file holds them all, with no log beside it), and only then is the file given the
    /// store's name. A process killed meanwhile leaves no file at `path`, never one without
    /// tables. The name is given by a rename that never replaces a file (or, where the file
    /// system has none, by a hard link): another process that made the store a moment earlier
    /// keeps it, and this one opens theirs. Opening the store as usual then turns on
    /// write-ahead logging.
    ///
    /// A new store is its owner's alone (0600; SQLite gives its log files the same mode): it
    /// holds a family's data. Returns true when this call made the store; false when another
    /// process did, or when the file system allows neither (the store is then made in place,
    /// as ``prepare(_:path:create:)`` does for an empty file). A store that cannot be made (a
    /// full disk) is an error, and nothing is left at `path`.
    private static func createWhole(at path: String, waiter: LockWaiter) throws -> Bool {
        let folder = RecordStore.folder(of: path)
        PrivateFiles.removeStale(in: folder)
        let temporary = sideName(for: path)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            // A name too long for one more prefix is made in place; any other reason (a folder
            // that cannot be written) is SQLite's to report when it opens the path.
            return errno == ENAMETOOLONG ? createInPlace(path) : false
        }
        close(fd)
        defer { for suffix in fileSuffixes { unlink(temporary + suffix) } }
        var configuration = Configuration()
        configuration.label = "ckport-new"
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA page_size = 16384; PRAGMA journal_mode = DELETE; PRAGMA synchronous = FULL")
        }
        do {
            let queue = try DatabaseQueue(path: temporary, configuration: configuration)
            _ = try queue.inDatabase { db in try prepare(db, path: path, create: true) }
            try queue.close()
        } catch {
            throw translate(error, path: path, waiter: waiter)
        }
        // A journal left beside it would mean the commit did not finish.
        guard access(temporary + "-journal", F_OK) != 0 else {
            throw StoreError.cannotWrite(path: path, reason: "the new store's tables could not be written whole")
        }
        let reason = place(temporary, at: path)
        if reason == 0 {
            syncFolder(of: path)
            return true
        }
        if reason == EEXIST { return false }
        if [EPERM, ENOTSUP, EOPNOTSUPP, EXDEV, EMLINK, EINVAL, ENOSYS].contains(reason) { return createInPlace(path) }
        throw StoreError.unavailable(
            path: path, reason: "the new store could not be given its name (\(String(cString: strerror(reason))))")
    }

    /// The file of a new store made in place, for file systems that can neither rename
    /// exclusively nor link: an empty file that ``prepare(_:path:create:)`` then fills. Another
    /// process making it at the same moment is fine.
    private static func createInPlace(_ path: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd >= 0 { close(fd) }
        return false
    }

    private static func prepare(_ db: Database, path: String, create: Bool) throws -> (id: String, created: Bool) {
        if let id = try existingStoreID(db, path: path) { return (id, false) }
        guard create else { throw StoreError.missing(path: path) }
        // Two processes may create the same store at once: the first to take the write lock
        // creates it, the second finds it made.
        var result: (String, Bool)?
        try db.inTransaction(.immediate) {
            if let id = try existingStoreID(db, path: path) {
                result = (id, false)
                return .commit
            }
            let id = RecordStore.makeStoreID()
            try db.execute(
                sql: """
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
            try db.execute(
                sql:
                    "INSERT INTO _ck_meta (key, value) VALUES ('format', ?), ('storeID', ?), ('changeSeq', 0), ('schema', ?), ('created', ?)",
                arguments: [
                    formatVersion, id, SchemaPrinter.print(Schema()),
                    ISO8601.format(milliseconds: Int64(Date().timeIntervalSince1970 * 1000)),
                ])
            result = (id, true)
            return .commit
        }
        return result!
    }

    /// The identifier of the store in `db`, nil when the file holds nothing yet.
    private static func existingStoreID(_ db: Database, path: String) throws -> String? {
        guard try db.tableExists("_ck_meta") else {
            let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'")
            guard tables.isEmpty else {
                throw StoreError.notAStore(
                    path: path,
                    reason: "it holds other tables (\(tables.prefix(3).joined(separator: ", "))) and no ckport metadata"
                )
            }
            return nil
        }
        let version = try Int.fetchOne(db, sql: "SELECT value FROM _ck_meta WHERE key = 'format'") ?? 0
        guard version <= formatVersion else { throw StoreError.unsupportedFormat(path: path, version: version) }
        guard let id = try String.fetchOne(db, sql: "SELECT value FROM _ck_meta WHERE key = 'storeID'") else {
            throw StoreError.corrupt("the store has no identifier")
        }
        return id
    }

    /// Brings a store of an older format up to ``formatVersion`` in one transaction, and says
    /// from which format; nil when it was current. Another process may upgrade it at the same
    /// moment: the format is read again under the write lock.
    private static func upgrade(_ db: Database, path: String) throws -> Int? {
        let seen = try Int.fetchOne(db, sql: "SELECT value FROM _ck_meta WHERE key = 'format'") ?? 0
        guard seen < formatVersion else { return nil }
        if access(path, W_OK) != 0 {
            throw StoreError.needsUpgrade(
                path: path, version: seen, reason: RecordStore.accessProblem(path) ?? "the file cannot be written")
        }
        var from: Int?
        try db.inTransaction(.immediate) {
            let version = try Int.fetchOne(db, sql: "SELECT value FROM _ck_meta WHERE key = 'format'") ?? 0
            guard version < formatVersion else { return .commit }
            from = version
            if version < 2 {
                // Format 2: every record type's table gains the parent, share and share-details columns.
                let tables = try String.fetchAll(
                    db,
                    sql:
                        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_ck\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
                )
                for table in tables {
                    let columns = try Set(
                        Row.fetchAll(db, sql: "PRAGMA table_info(\(quoted(table)))").map { $0["name"] as String })
                    guard columns.contains("___recordID") else { continue }
                    for (column, type) in TableLayout.linkColumns where !columns.contains(column) {
                        try db.execute(sql: "ALTER TABLE \(quoted(table)) ADD COLUMN \(column) \(type)")
                    }
                }
            }
            try db.execute(sql: "UPDATE _ck_meta SET value = ? WHERE key = 'format'", arguments: [formatVersion])
            return .commit
        }
        return from
    }

    static func makeStoreID() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<12).map { _ in String("0123456789abcdef".randomElement(using: &generator)!) }.joined()
    }

    // MARK: Schema

    /// The schema as the store holds it now (read afresh: another process may have changed it).
    /// Inside a transaction, use the session's ``StoreSession/schema``: it belongs to the
    /// transaction's snapshot.
    public var schema: Schema {
        if let session = activeSession { return session.schema }
        // One statement reads the schema text: no session, no zone checks.
        waiter.reading = true
        defer { waiter.reading = false }
        return (try? loadSchema()) ?? schemaCache.schema
    }

    /// ``schema``, or why it cannot be read.
    public func loadSchema() throws -> Schema {
        if let session = activeSession { return session.schema }
        waiter.reading = true
        defer { waiter.reading = false }
        return try queue.inDatabase { db in try loadSchema(db) }
    }

    /// The session of the transaction this thread runs now in this store, if any: asked for its
    /// schema inside a transaction, the store answers from that transaction (the connection is
    /// busy with it). Kept per thread: other threads' transactions are their own.
    private var activeSession: StoreSession? {
        Thread.current.threadDictionary[activeSessionKey] as? StoreSession
    }

    private let activeSessionKey = threadKey("session")

    /// The stored schema, read inside the caller's transaction; parsed only when its text changed.
    func loadSchema(_ db: Database) throws -> Schema {
        let text = try String.fetchOne(db, sql: "SELECT value FROM _ck_meta WHERE key = 'schema'") ?? "DEFINE SCHEMA\n"
        return try schemaCache.schema(for: text)
    }

    func schemaCommitted(_ schema: Schema) {
        schemaCache.store(schema, text: SchemaPrinter.print(schema))
    }

    // MARK: Transactions

    /// Runs `body` in one write transaction and commits it, or rolls everything back when
    /// `body` throws or `dryRun` is true.
    ///
    /// A write waits while another process writes (see `waitSeconds`); the session reads the
    /// schema and the change sequence afresh once it holds the lock, so what another process
    /// committed before is never written over.
    public func write<T>(dryRun: Bool = false, _ body: (StoreSession) throws -> T) throws -> T {
        // One write of this handle at a time, from its transaction to its store's publishing or
        // removal: a write that fails on a new store removes the file, which must never take
        // another thread's committed write with it. (SQLite has one writer at a time anyway.)
        writing.lock()
        defer { writing.unlock() }
        do {
            let result = try writeTransaction(dryRun: dryRun, body)
            if !dryRun {
                try publishAside()
                createdHere = false
            }
            return result
        } catch {
            let translated = RecordStore.translate(error, path: path, waiter: waiter)
            if createdHere { removeIfUnused() }
            throw translated
        }
    }

    private func writeTransaction<T>(dryRun: Bool, _ body: (StoreSession) throws -> T) throws -> T {
        try queue.inDatabase { db in
            var result: T?
            var newSchema: Schema?
            try db.inTransaction(.immediate) {
                let session = try StoreSession(db: db, store: self, writable: true)
                result = try active(session, body)
                try session.finish()
                if session.schemaChanged { newSchema = session.schema }
                return dryRun ? .rollback : .commit
            }
            if !dryRun, let newSchema { schemaCommitted(newSchema) }
            return result!
        }
    }

    /// Runs `body` in a read transaction: it sees one consistent state of the store, the last
    /// one committed when it began, however long it runs and whatever other processes write
    /// meanwhile. It never waits for a writer.
    public func read<T>(_ body: (StoreSession) throws -> T) throws -> T {
        waiter.reading = true
        defer { waiter.reading = false }
        do {
            return try queue.inDatabase { db in
                var result: T?
                try db.inTransaction(.deferred) {
                    result = try active(try StoreSession(db: db, store: self, writable: false), body)
                    return .rollback
                }
                return result!
            }
        } catch {
            throw RecordStore.translate(error, path: path, waiter: waiter)
        }
    }

    /// Runs `body` with `session` as the store's transaction of the moment.
    private func active<T>(_ session: StoreSession, _ body: (StoreSession) throws -> T) rethrows -> T {
        let key = activeSessionKey
        let outer = Thread.current.threadDictionary[key]
        Thread.current.threadDictionary[key] = session
        defer { Thread.current.threadDictionary[key] = outer }
        return try body(session)
    }

    /// A store this instance created and never committed to is removed after a failed write,
    /// unless another connection has it open meanwhile (SQLite leaves write-ahead logging only
    /// when it is the only connection, which tells exactly that).
    private func removeIfUnused() {
        createdHere = false
        if aside != nil { return removeAside() }
        let pristine =
            (try? queue.inDatabase { db -> Bool in
                let sequence = try Int64.fetchOne(db, sql: "SELECT value FROM _ck_meta WHERE key = 'changeSeq'") ?? 0
                let tables =
                    try Int.fetchOne(
                        db,
                        sql:
                            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_ck\\_%' ESCAPE '\\'"
                    ) ?? 0
                let schema = try String.fetchOne(db, sql: "SELECT value FROM _ck_meta WHERE key = 'schema'") ?? ""
                guard sequence == 0, tables == 0, schema == SchemaPrinter.print(Schema()) else { return false }
                let mode = try String.fetchOne(db, sql: "PRAGMA journal_mode = DELETE")
                return mode?.lowercased() == "delete"
            }) ?? false
        guard pristine else { return }
        try? queue.close()
        for suffix in RecordStore.fileSuffixes { unlink(path + suffix) }
    }

    /// Store errors in words a user can act on: which store, what happened, never SQL text.
    static func translate(_ error: Error, path: String, waiter: LockWaiter) -> Error {
        if let reason = Interruption.reason, !(error is InterruptedError) {
            return InterruptedError(signal: reason)
        }
        guard let error = error as? DatabaseError else { return error }
        let reason = error.message ?? "SQLite result code \(error.resultCode.rawValue)"
        switch error.resultCode {
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return StoreError.busy(path: path, seconds: waiter.limit)
        case .SQLITE_FULL, .SQLITE_IOERR:
            return StoreError.cannotWrite(path: path, reason: "SQLite: \(reason)")
        case .SQLITE_READONLY, .SQLITE_PERM, .SQLITE_CANTOPEN, .SQLITE_AUTH:
            return StoreError.unavailable(path: path, reason: RecordStore.accessProblem(path) ?? reason)
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            return StoreError.notAStore(path: path, reason: "SQLite finds it damaged (\(reason))")
        default:
            return StoreError.unavailable(path: path, reason: reason)
        }
    }

    /// Where `path` leads when it is a symbolic link (or a chain of them) to nothing yet; nil
    /// when it is not a link, or the chain is longer than the system would follow.
    static func danglingLinkTarget(_ path: String) -> String? {
        var current = path
        var followed = 0
        while followed < 32 {
            var info = stat()
            guard lstat(current, &info) == 0 else { return followed > 0 ? current : nil }
            guard (info.st_mode & S_IFMT) == S_IFLNK,
                let destination = try? FileManager.default.destinationOfSymbolicLink(atPath: current)
            else { return nil }
            current =
                destination.hasPrefix("/")
                ? destination : (folder(of: current) as NSString).appendingPathComponent(destination)
            followed += 1
        }
        return nil
    }

    /// The folder a store's file is in ("." for a bare name).
    private static func folder(of path: String) -> String {
        let folder = (path as NSString).deletingLastPathComponent
        return folder.isEmpty ? "." : folder
    }

    /// Why the store's file or folder cannot be written, in the file system's words.
    static func accessProblem(_ path: String) -> String? {
        let folder = RecordStore.folder(of: path)
        if access(folder, W_OK) != 0 {
            return "its folder \(folder) cannot be written (\(String(cString: strerror(errno))))"
        }
        if FileManager.default.fileExists(atPath: path), access(path, W_OK) != 0 {
            return "the file cannot be written (\(String(cString: strerror(errno))))"
        }
        if FileManager.default.fileExists(atPath: path), access(path, R_OK) != 0 {
            return "the file cannot be read (\(String(cString: strerror(errno))))"
        }
        if !FileManager.default.fileExists(atPath: path) {
            // Ask the file system itself why a file cannot be made there.
            let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if fd < 0 { return "the file cannot be created (\(String(cString: strerror(errno))))" }
            close(fd)
            unlink(path)
        }
        return nil
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
        do {
            return try queue.inDatabase { db in try String.fetchAll(db, sql: "PRAGMA integrity_check") }
        } catch {
            throw RecordStore.translate(error, path: path, waiter: waiter)
        }
    }
}

/// The parsed schema for the schema text last read, shared by the store's transactions.
final class SchemaCache: Sendable {
    private let cached = Mutex<(text: String, schema: Schema)>(("", Schema()))

    var schema: Schema { cached.withLock { $0.schema } }

    func schema(for text: String) throws -> Schema {
        try cached.withLock { cached in
            if text == cached.text { return cached.schema }
            let schema: Schema
            do {
                schema = try SchemaParser.parse(text, file: "stored schema")
            } catch {
                throw StoreError.corrupt("its schema does not parse: \(error)")
            }
            cached = (text, schema)
            return schema
        }
    }

    func store(_ schema: Schema, text: String) {
        cached.withLock { $0 = (text, schema) }
    }
}

/// SQLite's busy handler: a write that finds another process writing waits, says so once, and
/// gives up after its limit.
/// A key of this process's thread dictionaries that no other handle uses.
private func threadKey(_ what: String) -> String {
    "ckport.store.\(what).\(threadKeys.add(1, ordering: .relaxed).newValue)"
}
private let threadKeys = Atomic<UInt64>(0)

final class LockWaiter: Sendable {
    let limit: Double
    private let onWait: (@Sendable () -> Void)?
    private let state = Mutex<(started: UInt64, announced: Bool)>((0, false))

    init(limit: Double, onWait: (@Sendable () -> Void)?) {
        self.limit = limit
        self.onWait = onWait
    }

    /// Set while this thread opens or reads the store. Readers never wait for a writer's
    /// transaction, but SQLite can be busy for a moment while another connection opens, closes
    /// or folds the log back into the file; a reader always waits out such moments, whatever
    /// `limit` is. Kept per thread: the busy handler runs on the thread whose call is busy, and
    /// another thread's reading says nothing about it.
    var reading: Bool {
        get { Thread.current.threadDictionary[readingKey] != nil }
        set { Thread.current.threadDictionary[readingKey] = newValue ? true : nil }
    }
    private let readingKey = threadKey("reading")
    static let readerGrace: Double = 30

    func shouldRetry(_ tries: Int) -> Bool {
        let now = DispatchTime.now().uptimeNanoseconds
        let reading = self.reading
        let (waited, announce) = state.withLock { state in
            if tries == 0 {
                state.started = now
                state.announced = false
            }
            let waited = Double(now - state.started) / 1e9
            let announce = !state.announced && waited >= 0.25 && !reading
            if announce { state.announced = true }
            return (waited, announce)
        }
        let limit = reading ? max(self.limit, LockWaiter.readerGrace) : self.limit
        if waited >= limit || Interruption.requested { return false }
        if announce { onWait?() }
        // 1 ms, doubling to 50 ms: quick to notice a short write, cheap during a long one.
        usleep(useconds_t(min(1_000 << min(tries, 6), 50_000)))
        return true
    }
}
