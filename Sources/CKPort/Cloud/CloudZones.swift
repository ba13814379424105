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
        let listing =
            try JSONSerialization.jsonObject(with: try await client.send("zones/list")) as? [String: Any] ?? [:]
        let entries = (listing["zones"] as? [[String: Any]] ?? []).compactMap { $0["zoneID"] as? [String: Any] }
        let account =
            client.database.scope == .private ? entries.lazy.compactMap { $0["ownerRecordName"] as? String }.first : nil
        return (entries.compactMap { zoneID($0, in: client.database.scope) }.sorted(), account)
    }

    /// A zone from CloudKit's `zoneID` dictionary, as the store names it (see ``zones(_:)``).
    static func zoneID(_ json: [String: Any], in scope: CloudKitDatabase.Scope) -> ZoneID? {
        guard let name = json["zoneName"] as? String, !name.isEmpty else { return nil }
        let owner =
            scope == .shared ? (json["ownerRecordName"] as? String ?? ZoneID.defaultOwnerName) : ZoneID.defaultOwnerName
        return ZoneID(scope: DatabaseScope(rawValue: scope.rawValue)!, zoneName: name, ownerRecordName: owner)
    }

    /// A zone as requests name it: its owner only in the shared database, where the zone is
    /// somebody else's. In the private and public databases CloudKit takes the zone to be the
    /// signed-in user's (or the container's) when no owner is named.
    static func zoneJSON(_ zone: ZoneID) -> [String: Any] {
        var json: [String: Any] = ["zoneName": zone.zoneName]
        if zone.scope == .shared && zone.ownerRecordName != ZoneID.defaultOwnerName {
            json["ownerRecordName"] = zone.ownerRecordName
        }
        return json
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
            var request: [String: Any] = [:]
            if let next { request["metaSyncToken"] = next }
            let body = try JSONSerialization.data(withJSONObject: request, options: [.sortedKeys])
            let answer =
                try JSONSerialization.jsonObject(with: try await client.send("zones/changes", body: body))
                as? [String: Any] ?? [:]
            for entry in answer["zones"] as? [[String: Any]] ?? [] {
                guard let zone = (entry["zoneID"] as? [String: Any]).flatMap({ zoneID($0, in: client.database.scope) })
                else { continue }
                changes.append(
                    ZoneChange(
                        zone: zone, deleted: entry["deleted"] as? Bool ?? false,
                        purged: entry["purged"] as? Bool ?? false))
            }
            let given = answer["metaSyncToken"] as? String
            pages += 1
            // A server that hands back the token it was given has nothing further to say.
            guard answer["moreComing"] as? Bool == true, let given, given != next, pages < 10_000 else {
                return (changes, given ?? next)
            }
            next = given
        }
    }
}
