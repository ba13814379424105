import Records

// GRDB by name, so that its `Record` class stays out of the way of ckport's `Record`.
import class GRDB.Database

/// A record-level share as the store holds it: the record that roots it and how many records
/// its hierarchy carries.
public struct ShareHierarchy: Sendable, Equatable {
    /// The share record's name.
    public var share: String
    public var rootName: String
    public var rootType: String
    /// The root and every record whose `parent` chain leads to it (share records not counted).
    public var recordCount: Int

    public init(share: String, rootName: String, rootType: String, recordCount: Int) {
        self.share = share
        self.rootName = rootName
        self.rootType = rootType
        self.recordCount = recordCount
    }
}

/// The SQL both stores count a zone's share hierarchies with. `zoneRecords` selects (name,
/// parent, share) of every record of the zone but share records. Each share starts from one
/// root (the greatest name among records that claim it, should several), and walks down the
/// `parent` links. Record names are unique in a zone, so a record has one parent and the walk
/// from a root meets a record twice only if the links loop back to the root, which the walk
/// leaves out: it ends without remembering what it saw, and the database keeps the rows it
/// works on, so memory stays flat however large the zone.
public enum ShareHierarchySQL {
    /// The statement that answers, per share in share-name order: its name, its root's name,
    /// the root's type (`rootType`, an expression over `h.root` that looks it up in the
    /// store's registry) and how many records its hierarchy holds.
    public static func counting(zoneRecords: String, rootType: String) -> String {
        """
        WITH RECURSIVE z(name, parent, share) AS (\(zoneRecords)),
        tree(name, share, root) AS (
            SELECT max(name), share, max(name) FROM z WHERE share IS NOT NULL GROUP BY share
            UNION ALL
            SELECT z.name, tree.share, tree.root FROM tree JOIN z ON z.parent = tree.name WHERE z.name <> tree.root)
        SELECT h.share, h.root, \(rootType), CAST(h.n AS TEXT)
        FROM (SELECT share, max(root) AS root, count(*) AS n FROM tree GROUP BY share) h ORDER BY h.share
        """
    }
}

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
