import Foundation
import GRDB
import Records

/// A set of names kept on disk, so that it may grow to millions of names while memory stays
/// flat: a SQLite table in a temporary file of its own, in a folder of this process's private
/// folder (``PrivateFiles``), removed with the set. A pull that fetches a zone again from the start notes here every
/// record CloudKit still holds, to find afterwards the ones it no longer does.
public final class NameSet {
    private let scratch: ScratchDatabase
    private var queue: DatabaseQueue { scratch.queue }
    public private(set) var count = 0

    public init() throws {
        scratch = try ScratchDatabase(
            prefix: "names-", schema: "CREATE TABLE names (name TEXT PRIMARY KEY) WITHOUT ROWID")
    }

    /// Adds names (once each, however often they are added).
    public func insert<S: Sequence>(_ names: S) throws where S.Element == String {
        try queue.write { db in
            let statement = try db.makeStatement(sql: "INSERT OR IGNORE INTO names VALUES (?)")
            for name in names {
                try statement.execute(arguments: [name])
                count += db.changesCount
            }
        }
    }

    public func contains(_ name: String) throws -> Bool {
        try queue.read { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM names WHERE name = ?", arguments: [name]) ?? false
        }
    }
}
