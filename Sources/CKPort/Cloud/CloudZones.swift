import CloudKitWeb
import Foundation
import Records

/// A zone CloudKit says is gone, from `zones/changes`.
struct ZoneChange: Sendable {
    var zone: ZoneID
    var deleted: Bool
    var purged: Bool
}

extension CloudSync {
    /// The zones of the database `client` speaks to (`zones/list`), as the store names them.
    ///
    /// In the private database every zone is the signed-in user's, and in the public one the
    /// container's: CloudKit names the owner (`_aca0…`, `ffffffffffffffff`), which would be a
    /// stranger's name once the records travel to another account or container, so the store
    /// keeps such zones under the default owner, as CloudKit's own frameworks do
    /// (`CKCurrentUserDefaultName`). Zones of the shared database belong to the people who
    /// shared them, and keep their owners' names.
    public static func zones(_ client: CloudKitClient) async throws -> [ZoneID] {
        try await zonesAndAccount(client).zones
    }

    /// The zones (sorted), and in the private database the account they belong to, as CloudKit
    /// names their owner.
    static func zonesAndAccount(_ client: CloudKitClient) async throws -> (zones: [ZoneID], account: String?) {
        let entries = try await listedZones(client)
        let account = client.database.scope == .private ? entries.lazy.compactMap(\.ownerRecordName).first : nil
        return (entries.compactMap { zoneID($0, in: client.database.scope) }.sorted(), account)
    }

    /// The zones `zones/list` names.
    static func listedZones(_ client: CloudKitClient) async throws -> [CloudKitWire.ZoneID] {
        let listing = try CloudKitWire.decode(
            CloudKitWire.Zones.self, from: try await client.send("zones/list"), operation: "zones/list")
        return listing.zones.compactMap(\.zoneID)
    }

    /// A zone as CloudKit names it, as the store names it (see ``zones(_:)``).
    static func zoneID(_ wire: CloudKitWire.ZoneID, in scope: CloudKitDatabase.Scope) -> ZoneID? {
        guard let name = wire.zoneName, !name.isEmpty else { return nil }
        let owner = scope == .shared ? (wire.ownerRecordName ?? ZoneID.defaultOwnerName) : ZoneID.defaultOwnerName
        return ZoneID(scope: DatabaseScope(rawValue: scope.rawValue)!, zoneName: name, ownerRecordName: owner)
    }

    /// A zone as requests name it: its owner only in the shared database, where the zone is
    /// somebody else's. In the private and public databases CloudKit takes the zone to be the
    /// signed-in user's (or the container's) when no owner is named.
    static func wireZone(_ zone: ZoneID) -> CloudKitWire.ZoneID {
        CloudKitWire.ZoneID(
            zoneName: zone.zoneName,
            ownerRecordName: zone.scope == .shared && zone.ownerRecordName != ZoneID.defaultOwnerName
                ? zone.ownerRecordName : nil)
    }

    /// The zones that changed in the database since `token` (`zones/changes`, which takes and
    /// gives a `metaSyncToken`; a `syncToken` there is ignored, and the first page comes back
    /// again and again), page after page, and the token to ask with next time.
    static func zoneChanges(_ client: CloudKitClient, since token: String?) async throws -> (
        changes: [ZoneChange], token: String?
    ) {
        var changes: [ZoneChange] = []
        var next = token
        var pages = 0
        while true {
            let body = try CloudKitWire.encode(CloudKitWire.ZoneChangesRequest(metaSyncToken: next))
            let answer = try CloudKitWire.decode(
                CloudKitWire.ZoneChanges.self, from: try await client.send("zones/changes", body: body),
                operation: "zones/changes")
            for entry in answer.zones {
                guard let zone = entry.zoneID.flatMap({ zoneID($0, in: client.database.scope) }) else { continue }
                changes.append(ZoneChange(zone: zone, deleted: entry.deleted ?? false, purged: entry.purged ?? false))
            }
            let given = answer.metaSyncToken
            pages += 1
            // A server that hands back the token it was given has nothing further to say.
            guard answer.moreComing == true, let given, given != next, pages < 10_000 else {
                return (changes, given ?? next)
            }
            next = given
        }
    }
}
