import Records
import StoreCore

// GRDB by name, so that its `Record` class stays out of the way of ckport's `Record`.
import class GRDB.Database

extension StoreSession {
    /// The record-level shares of `zone` with their roots and the size of their hierarchies,
    /// counted by SQLite (its temporary tables on disk), in share-name order.
    public func shareHierarchies(in zone: ZoneID) throws -> [ShareHierarchy] {
        guard let row = try zoneRow(zone, create: false) else { return [] }
        let types = layouts.keys.filter { $0 != Record.shareType }.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        guard !types.isEmpty else { return [] }
        let zoneRecords = types.map {
            "SELECT ___recordID, ___parent, ___share FROM \(layouts[$0]!.table) WHERE ___zone = \(row)"
        }
        .joined(separator: " UNION ALL ")
        let select = try statement(
            ShareHierarchySQL.counting(
                zoneRecords: zoneRecords,
                rootType: "(SELECT recordType FROM _ck_record WHERE zone = \(row) AND recordName = h.root)"))
        select.reset()
        defer { select.reset() }
        var found: [ShareHierarchy] = []
        while try select.step(db) {
            found.append(
                ShareHierarchy(
                    share: select.text(0), rootName: select.text(1), rootType: select.text(2),
                    recordCount: Int(select.int64(3))))
        }
        return found
    }
}
