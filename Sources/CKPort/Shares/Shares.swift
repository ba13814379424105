import Records
import StoreCore

/// One share a store holds: the `cloudkit.share` record, what it shares, and with whom.
public struct StoredShare: Sendable {
    /// The share record itself.
    public var record: Record
    public var details: ShareDetails?
    /// The record the share starts from (its root), nil for a share of the whole zone or a
    /// root the store does not hold.
    public var root: (recordName: String, recordType: String)?
    /// True for a share of a whole zone (the share named `cloudkit.zoneshare`).
    public var isZoneWide: Bool
    /// The records the share carries to its participants: the root and every record whose
    /// `parent` chain leads to it, or every record of the zone for a zone share (the share
    /// record not counted).
    public var recordCount: Int

    public var zone: ZoneID { record.zone }
    /// The title people see in the invitation (`cloudkit.title`).
    public var title: String? {
        if case .string(let title)? = record.fields["cloudkit.title"] { return title }
        return nil
    }
    public var participants: [ShareDetails.Participant] { details?.participants ?? [] }
}

/// What a store says about sharing.
public enum Shares {
    /// Every live share in the store (optionally of one scope or zone name), in export order,
    /// each with its root and the number of records it carries. The store counts each zone's
    /// hierarchies, so memory holds the shares, never the zone's links.
    public static func list(_ session: any RecordSession, scope: DatabaseScope? = nil, zoneName: String? = nil) throws
        -> [StoredShare]
    {
        guard session.schema.recordType(named: Record.shareType) != nil else { return [] }
        var shares: [Record] = []
        try session.forEach(RecordQuery(recordTypes: [Record.shareType], scope: scope, zoneName: zoneName)) {
            shares.append($0)
        }
        var result: [StoredShare] = []
        var zonesSeen: [ZoneID] = []
        for share in shares where !zonesSeen.contains(share.zone) { zonesSeen.append(share.zone) }
        let recordTypes = session.schema.recordTypes.map(\.name).filter { $0 != Record.shareType }
        for zone in zonesSeen {
            // The zone's hierarchies, counted only when it holds a share of records (a zone
            // share alone needs a count of the zone, not a walk of its links).
            var hierarchies: [String: ShareHierarchy] = [:]
            if shares.contains(where: { $0.zone == zone && $0.recordName != Record.zoneShareName }) {
                for hierarchy in try session.shareHierarchies(in: zone) { hierarchies[hierarchy.share] = hierarchy }
            }
            for share in shares where share.zone == zone {
                let details = share.shareDetails.flatMap(ShareDetails.init(json:))
                if share.recordName == Record.zoneShareName {
                    // Everything in the zone but share records.
                    let total =
                        recordTypes.isEmpty
                        ? 0
                        : try session.count(
                            RecordQuery(
                                recordTypes: recordTypes, scope: zone.scope, zoneName: zone.zoneName,
                                ownerRecordName: zone.ownerRecordName))
                    result.append(
                        StoredShare(record: share, details: details, root: nil, isZoneWide: true, recordCount: total))
                } else if let hierarchy = hierarchies[share.recordName] {
                    result.append(
                        StoredShare(
                            record: share, details: details, root: (hierarchy.rootName, hierarchy.rootType),
                            isZoneWide: false, recordCount: hierarchy.recordCount))
                } else {
                    result.append(
                        StoredShare(record: share, details: details, root: nil, isZoneWide: false, recordCount: 0))
                }
            }
        }
        return result
    }
}

/// The share as one JSON object: where it is, its title, root and record count, public
/// permission, URL, and each participant (what `ckport shares --json` prints per share and the
/// browser view's `/shares.json` lists). A value the store does not hold is `null`.
extension StoredShare: Encodable {
    private enum Key: String, CodingKey {
        case recordName, scope, zoneName, ownerRecordName, title, zoneWide, root, records, publicPermission, url
        case shortGUID, participants, name, userRecordName, emailAddress, phoneNumber, type, permission
        case acceptanceStatus, recordType
    }

    public func encode(to encoder: Encoder) throws {
        var out = encoder.container(keyedBy: Key.self)
        try out.encode(record.recordName, forKey: .recordName)
        try out.encode(zone.scope.rawValue, forKey: .scope)
        try out.encode(zone.zoneName, forKey: .zoneName)
        try out.encode(zone.ownerRecordName, forKey: .ownerRecordName)
        try out.encode(title, forKey: .title)
        try out.encode(isZoneWide, forKey: .zoneWide)
        if let root {
            var inner = out.nestedContainer(keyedBy: Key.self, forKey: .root)
            try inner.encode(root.recordName, forKey: .recordName)
            try inner.encode(root.recordType, forKey: .recordType)
        } else {
            try out.encodeNil(forKey: .root)
        }
        try out.encode(recordCount, forKey: .records)
        try out.encode(details?.publicPermission, forKey: .publicPermission)
        try out.encode(details?.url, forKey: .url)
        try out.encode(details?.shortGUID, forKey: .shortGUID)
        var people = out.nestedUnkeyedContainer(forKey: .participants)
        for person in participants {
            var inner = people.nestedContainer(keyedBy: Key.self)
            try inner.encode(person.displayName, forKey: .name)
            try inner.encode(person.userRecordName, forKey: .userRecordName)
            try inner.encode(person.emailAddress, forKey: .emailAddress)
            try inner.encode(person.phoneNumber, forKey: .phoneNumber)
            try inner.encode(person.type, forKey: .type)
            try inner.encode(person.permission, forKey: .permission)
            try inner.encode(person.acceptanceStatus, forKey: .acceptanceStatus)
        }
    }
}
