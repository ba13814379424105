internal import CSQLite
import Foundation
import Records

/// A SQLite database for one process's working data, which nothing needs after it: a file of
/// its own in a new folder of this process's private folder (``PrivateFiles``), with neither
/// journal nor syncing (a crash loses it, which is all right), removed with the object.
///
/// It is a working file, not a store: the sets that grow past memory (``NameSet``,
/// ``NameMap``) keep their names in it whatever store the work is on, through SQLite's C API
/// with statements prepared once each. One thread at a time uses it.
final class ScratchDatabase {
    let folder: String
    private let connection: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    /// Makes the folder and the database, and runs `schema` in it (removing the folder again
    /// when something fails). `prefix` begins the folder's name, to tell what it is for.
    init(prefix: String, schema: String) throws {
        folder = try PrivateFiles.makeFolder(prefix)
        var opened: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        guard sqlite3_open_v2(folder + "/scratch.sqlite", &opened, flags, nil) == SQLITE_OK, let opened else {
            let reason = opened.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(opened)
            PrivateFiles.removeFolder(folder)
            throw ScratchError(folder: folder, reason: reason)
        }
        connection = opened
        do {
            try execute("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; " + schema)
        } catch {
            sqlite3_close_v2(connection)
            PrivateFiles.removeFolder(folder)
            throw error
        }
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(connection)
        PrivateFiles.removeFolder(folder)
    }

    /// Runs statements that take no arguments.
    func execute(_ sql: String) throws {
        guard sqlite3_exec(connection, sql, nil, nil, nil) == SQLITE_OK else { throw failure() }
    }

    /// Runs `body` in one transaction, rolled back when it throws.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            _ = sqlite3_exec(connection, "ROLLBACK", nil, nil, nil)
            throw error
        }
    }

    /// Runs `sql` with `arguments` bound in order, and gives the first column of its first
    /// row as text: nil when it has no row (or the value is NULL).
    @discardableResult
    func text(_ sql: String, _ arguments: [String]) throws -> String? {
        let statement = try prepared(sql)
        defer { sqlite3_reset(statement) }
        for (index, argument) in arguments.enumerated() {
            guard sqlite3_bind_text(statement, Int32(index + 1), argument, -1, transient) == SQLITE_OK else {
                throw failure()
            }
        }
        switch sqlite3_step(statement) {
        case SQLITE_ROW:
            return sqlite3_column_text(statement, 0).map { String(cString: $0) }
        case SQLITE_DONE:
            return nil
        default:
            throw failure()
        }
    }

    /// How many rows the last statement inserted, changed or removed.
    var changes: Int { Int(sqlite3_changes(connection)) }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(connection, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK,
            let statement
        else { throw failure() }
        statements[sql] = statement
        return statement
    }

    private func failure() -> ScratchError {
        ScratchError(folder: folder, reason: String(cString: sqlite3_errmsg(connection)))
    }
}

/// SQLite's "copy this buffer now" destructor for bound text.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A working file of this process's could not be made or written (a full disk, most often).
public struct ScratchError: CKPortError, Sendable {
    public var category: ErrorCategory { .environment }
    /// The working folder.
    public var folder: String
    /// What SQLite said.
    public var reason: String

    public var description: String {
        "cannot write working data in \(folder) (\(reason)); the disk holding it may be full"
    }
}
