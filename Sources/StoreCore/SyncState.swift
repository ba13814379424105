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

/// One entry of the state a connector keeps in the store between runs: a feed's definition
/// and its subscribers' token hashes, a CalDAV publication's collection, sync token and each
/// event's address and ETag. An entry is named by its `kind` (`feed`, `caldav-publish`…), the
/// `name` of the feed or collection, and a `key` within it (`""` for the thing itself); its
/// value is text (JSON, as the connector writes it). The state lives in the store, so it moves
/// with backups and copies.
public struct ConnectorStateEntry: Sendable, Hashable, Codable {
    public var kind: String
    public var name: String
    public var key: String
    public var value: String

    public init(kind: String, name: String, key: String, value: String) {
        self.kind = kind
        self.name = name
        self.key = key
        self.value = value
    }
}
