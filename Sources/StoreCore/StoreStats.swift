import Foundation
import Records

/// What a store holds: counts per scope, zone and type, its size and its current change token.
public struct StoreStats: Sendable {
    public struct Entry: Sendable, Hashable {
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

    /// The entries as a JSON array, one object per zone and type: scope, zoneName,
    /// ownerRecordName, recordType, records, tombstones (`ckport stats --json`'s `zones`).
    public func writeEntriesJSON(to out: inout JSONWriter) {
        out.raw("[")
        for (index, entry) in entries.enumerated() {
            if index > 0 { out.raw(",") }
            out.raw("{\"scope\":")
            out.string(entry.zone.scope.rawValue)
            out.raw(",\"zoneName\":")
            out.string(entry.zone.zoneName)
            out.raw(",\"ownerRecordName\":")
            out.string(entry.zone.ownerRecordName)
            out.raw(",\"recordType\":")
            out.string(entry.recordType)
            out.raw(",\"records\":")
            out.int(Int64(entry.records))
            out.raw(",\"tombstones\":")
            out.int(Int64(entry.tombstones))
            out.raw("}")
        }
        out.raw("]")
    }
    public var totalTombstones: Int { entries.reduce(0) { $0 + $1.tombstones } }
}

private func < (lhs: (ZoneID, String), rhs: (ZoneID, String)) -> Bool {
    lhs.0 != rhs.0 ? lhs.0 < rhs.0 : lhs.1.utf8.lexicographicallyPrecedes(rhs.1.utf8)
}
