import GRDB
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

extension StoreSession {
    public func stats() throws -> StoreStats {
        var entries: [StoreStats.Entry] = []
        let statement = try PreparedStatement(
            db, "SELECT zone, recordType, sum(deleted = 0), sum(deleted != 0) FROM _ck_record GROUP BY zone, recordType"
        )
        while try statement.step(db) {
            entries.append(
                StoreStats.Entry(
                    zone: try zone(row: statement.int64(0)), recordType: statement.text(1),
                    records: Int(statement.int64(2)), tombstones: Int(statement.int64(3))))
        }
        entries.sort { ($0.zone, $0.recordType) < ($1.zone, $1.recordType) }
        var stats = StoreStats(
            path: store.path, fileSize: store.fileSize, token: currentToken, entries: entries,
            recordTypeCount: schema.recordTypes.count)
        (stats.assetFiles, stats.assetBytes) = try assetTotals()
        return stats
    }
}

private func < (lhs: (ZoneID, String), rhs: (ZoneID, String)) -> Bool {
    lhs.0 != rhs.0 ? lhs.0 < rhs.0 : lhs.1.utf8.lexicographicallyPrecedes(rhs.1.utf8)
}
