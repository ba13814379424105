import Foundation
import Records

/// What a store holds: counts per scope, zone and type, its size and its current change token.
public struct StoreStats: Sendable {
    /// One scope, zone and type's counts; as JSON (`ckport stats --json`'s `zones`): scope,
    /// zoneName, ownerRecordName, recordType, records, tombstones.
    public struct Entry: Sendable, Hashable, Encodable {
        public var zone: ZoneID
        public var recordType: String
        public var records: Int
        public var tombstones: Int

        public init(zone: ZoneID, recordType: String, records: Int, tombstones: Int) {
            self.zone = zone
            self.recordType = recordType
            self.records = records
            self.tombstones = tombstones
        }

        private enum CodingKeys: String, CodingKey {
            case scope, zoneName, ownerRecordName, recordType, records, tombstones
        }

        public func encode(to encoder: Encoder) throws {
            var out = encoder.container(keyedBy: CodingKeys.self)
            try out.encode(zone.scope.rawValue, forKey: .scope)
            try out.encode(zone.zoneName, forKey: .zoneName)
            try out.encode(zone.ownerRecordName, forKey: .ownerRecordName)
            try out.encode(recordType, forKey: .recordType)
            try out.encode(records, forKey: .records)
            try out.encode(tombstones, forKey: .tombstones)
        }
    }

    public var path: String
    public var fileSize: Int64
    public var token: ChangeToken
    public var entries: [Entry]
    public var recordTypeCount: Int
    /// Asset files held, and their total size.
    public var assetFiles = 0
    public var assetBytes: Int64 = 0

    public init(
        path: String, fileSize: Int64, token: ChangeToken, entries: [Entry], recordTypeCount: Int, assetFiles: Int = 0,
        assetBytes: Int64 = 0
    ) {
        self.path = path
        self.fileSize = fileSize
        self.token = token
        self.entries = entries
        self.recordTypeCount = recordTypeCount
        self.assetFiles = assetFiles
        self.assetBytes = assetBytes
    }

    public var totalRecords: Int { entries.reduce(0) { $0 + $1.records } }

    public var totalTombstones: Int { entries.reduce(0) { $0 + $1.tombstones } }
}

private func < (lhs: (ZoneID, String), rhs: (ZoneID, String)) -> Bool {
    lhs.0 != rhs.0 ? lhs.0 < rhs.0 : lhs.1.utf8.lexicographicallyPrecedes(rhs.1.utf8)
}
