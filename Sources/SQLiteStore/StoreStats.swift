import GRDB
import Records
import StoreCore

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
