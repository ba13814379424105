import Foundation
import Records

/// One applied migration, as the store remembers it (table `_ck_migration`).
public struct MigrationHistoryEntry: Sendable, Hashable, Codable {
    /// The migration set's name (its folder's name, e.g. `notes`).
    public var set: String
    public var version: Int
    public var description: String
    public var file: String
    /// SHA-256 of the migration file's bytes when it was applied.
    public var checksum: String
    /// Milliseconds since 1970.
    public var appliedAt: Int64
    public var durationMilliseconds: Int64
    public var recordsChanged: Int

    public init(
        set: String, version: Int, description: String, file: String, checksum: String, appliedAt: Int64,
        durationMilliseconds: Int64, recordsChanged: Int
    ) {
        self.set = set
        self.version = version
        self.description = description
        self.file = file
        self.checksum = checksum
        self.appliedAt = appliedAt
        self.durationMilliseconds = durationMilliseconds
        self.recordsChanged = recordsChanged
    }
}
