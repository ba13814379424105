import Foundation
import Records

/// Where a pull from a CloudKit zone got to: the zone's `syncToken` from its change feed (or
/// the marker of a query), kept in the store so that the next pull asks only for what changed.
public struct SyncState: Sendable, Hashable {
    /// The source: container, environment and database, e.g. `iCloud.com.example.App/production/private`.
    public var source: String
    public var zone: ZoneID
    public var token: String
    /// When it was saved, in milliseconds since 1970.
    public var savedAt: Int64

    public init(source: String, zone: ZoneID, token: String, savedAt: Int64) {
        self.source = source
        self.zone = zone
        self.token = token
        self.savedAt = savedAt
    }
}
