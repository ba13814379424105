import Foundation
import Records

/// A set of names kept on disk, so that it may grow to millions of names while memory stays
/// flat: a SQLite table in a temporary file of its own, in a folder of this process's private
/// folder (``PrivateFiles``), removed with the set. A pull that fetches a zone again from the start notes here every
/// record CloudKit still holds, to find afterwards the ones it no longer does.
public final class NameSet {
    private let scratch: ScratchDatabase
    public private(set) var count = 0

    public init() throws {
        scratch = try ScratchDatabase(
            prefix: "names-", schema: "CREATE TABLE names (name TEXT PRIMARY KEY) WITHOUT ROWID")
    }

    /// Adds names (once each, however often they are added).
    public func insert<S: Sequence>(_ names: S) throws where S.Element == String {
        try scratch.transaction {
            for name in names {
                try scratch.text("INSERT OR IGNORE INTO names VALUES (?)", [name])
                count += scratch.changes
            }
        }
    }

    public func contains(_ name: String) throws -> Bool {
        try scratch.text("SELECT 1 FROM names WHERE name = ?", [name]) != nil
    }
}
