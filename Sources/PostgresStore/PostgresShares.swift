import PostgresNIO
import Records
import StoreCore

extension PostgresSession {
    /// The record-level shares of `zone` with their roots and the size of their hierarchies,
    /// counted by the server, in share-name order (see ``ShareHierarchySQL``).
    public func shareHierarchies(in zone: ZoneID) throws -> [ShareHierarchy] {
        guard let number = try zoneNumber(zone) else { return [] }
        let types = schema.recordTypes.filter { $0.name != Record.shareType }.sorted {
            $0.name.utf8.lexicographicallyPrecedes($1.name.utf8)
        }
        guard !types.isEmpty else { return [] }
        let zoneRecords = types.map {
            "SELECT \"___recordID\", \"___parent\", \"___share\" FROM \(PostgresLayout(type: $0, schema: namespace).table) WHERE \"___zone\" = \(number)"
        }.joined(separator: " UNION ALL ")
        let sql = ShareHierarchySQL.counting(
            zoneRecords: zoneRecords,
            rootType:
                "(SELECT r.\"recordType\" FROM \(namespace)._ck_record r WHERE r.zone = \(number) AND r.\"recordName\" = h.root)"
        )
        var found: [ShareHierarchy] = []
        try forEachRow(PostgresQuery(unsafeSQL: sql)) { row in
            guard let share = row[0], let root = row[1], let type = row[2], let count = row[3].flatMap({ Int($0) })
            else {
                throw StoreError.corrupt(
                    "share \(row[0] ?? "?") in zone \(zone.zoneName) has a root the store does not register")
            }
            found.append(ShareHierarchy(share: share, rootName: root, rootType: type, recordCount: count))
        }
        return found
    }
}
