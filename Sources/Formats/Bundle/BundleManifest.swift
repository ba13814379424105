import Foundation
import StoreCore

/// What a bundle holds, written first in it as `manifest.json`.
public struct BundleManifest: Codable, Sendable, Equatable {
    /// Format 2: records may carry `parent`, `share` and a share's details, which a reader of
    /// format 1 would drop; it refuses the bundle instead. Format 1 bundles read as before.
    public static let currentFormat = 2

    public struct Member: Codable, Sendable, Equatable {
        public var path: String
        /// `schema`, `migrations`, `records`, `changes` or `asset`.
        public var kind: String
        public var bytes: Int64
        public var sha256: String
        /// For records members: how many records, and which.
        public var records: Int?
        public var scope: String?
        public var zoneName: String?
        public var ownerRecordName: String?
        public var recordType: String?
    }

    public var format: Int
    public var ckportVersion: String
    /// ISO-8601 UTC.
    public var created: String
    public var storeID: String
    /// The store's change token when the bundle was made.
    public var token: String
    /// For an incremental bundle: the token it starts from.
    public var baseToken: String?
    public var recordTypes: [String]
    public var members: [Member]
    /// The store's connector state when the bundle was made (feeds and their token hashes,
    /// CalDAV publications and pulls): a restore brings it back with the records. Absent when
    /// the store had none (and in bundles of ckport before 0.3).
    public var connectorState: [ConnectorStateEntry]? = nil

    public var recordCount: Int { members.reduce(0) { $0 + ($1.records ?? 0) } }
}
