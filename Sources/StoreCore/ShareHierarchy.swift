import Foundation
import Records

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
