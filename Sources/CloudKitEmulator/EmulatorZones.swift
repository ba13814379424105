import CloudKitWeb
import Crypto
import Foundation
import Records

/// One zone: its records as answers carry them, and its change history.
final class EmulatedZone {
    let name: String
    /// The owner's user record name, as CloudKit names it in every `zoneID`.
    let owner: String
    /// Bumped when the zone's sync tokens stop working (expired, or the zone was reset).
    var tokenEpoch = 0
    /// Which zone of that name this is: one deleted and made again is another, and the old
    /// one's tokens do not work on it.
    let incarnation = String(UUID().uuidString.prefix(8))
    var isDefault: Bool { name == ZoneID.defaultZoneName }

    init(name: String, owner: String) {
        self.name = name
        self.owner = owner
    }

    /// The `zoneID` of answers: name, owner and type.
    var wireID: CloudKitWire.ZoneID {
        CloudKitWire.ZoneID(
            zoneName: name, ownerRecordName: owner, zoneType: isDefault ? "DEFAULT_ZONE" : "REGULAR_CUSTOM_ZONE")
    }

    var jsonValue: JSONValue {
        .object(
            JSONObject([
                JSONObject.Member(key: "zoneName", value: .string(name)),
                JSONObject.Member(key: "ownerRecordName", value: .string(owner)),
                JSONObject.Member(key: "zoneType", value: .string(isDefault ? "DEFAULT_ZONE" : "REGULAR_CUSTOM_ZONE")),
            ]))
    }

    /// Record name → the record's JSON as answers carry it (encoded once, when saved: a
    /// record kept as a dictionary would cost ten times the memory), and its type.
    var encoded: [String: Data] = [:]
    var types: [String: String] = [:]

    func save(_ name: String, _ record: CloudKitWire.Record?) {
        encoded[name] = record.flatMap { try? CloudKitWire.encode($0) }
        types[name] = record?.recordType
    }

    func save(_ name: String, encoded data: Data, type: String?) {
        encoded[name] = data
        types[name] = type
    }

    /// The record named `name`, read back from its JSON.
    func record(_ name: String) -> CloudKitWire.Record? {
        encoded[name].flatMap { try? JSONDecoder().decode(CloudKitWire.Record.self, from: $0) }
    }

    /// Record name → the change sequence of its last change.
    var changedAt: [String: Int] = [:]
    /// Every change in order (sequence, record name); an entry a later change of the same
    /// record superseded is skipped when read.
    var changes: [(sequence: Int, name: String)] = []

    func changed(_ name: String, at sequence: Int) {
        changedAt[name] = sequence
        changes.append((sequence, name))
    }

    /// A sync token: opaque to clients, as CloudKit's are (`AQAAAaBJidqD`).
    func syncToken(after sequence: Int) -> String {
        Data("\(name)|\(incarnation).\(tokenEpoch)|\(sequence)".utf8).base64EncodedString()
    }

    /// The sequence a token stands for; nil when the token is not this zone's now.
    func sequence(of token: String) -> Int? {
        guard let data = Data(base64Encoded: token) else { return nil }
        let parts = String(decoding: data, as: UTF8.self).split(separator: "|", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == name, parts[1] == "\(incarnation).\(tokenEpoch)" else { return nil }
        return Int(parts[2])
    }
}

extension EmulatedContainer {
    /// The database's zones, made with its default zone when first asked for.
    func zonesOf(_ database: String) -> [String: EmulatedZone] {
        if databases[database] == nil {
            let scope = database.split(separator: "/").last.map(String.init) ?? "private"
            databases[database] =
                scope == "shared"
                ? [:]
                : [
                    ZoneID.defaultZoneName: EmulatedZone(
                        name: ZoneID.defaultZoneName, owner: ownerName(scope: scope, caller: nil))
                ]
        }
        return databases[database]!
    }

    /// Who owns the zones of a database that are not somebody else's: in the private
    /// database the signed-in user, in the public one the container (its answers name
    /// `ffffffffffffffff`).
    func ownerName(scope: String, caller: Caller?) -> String {
        scope == "public" ? "ffffffffffffffff" : (caller?.user ?? signInUser)
    }

    static func key(name: String, owner: String, scope: CloudKitDatabase.Scope) -> String {
        scope == .shared ? "\(owner)/\(name)" : name
    }

    /// The zone a request's `zoneID` names: in the shared database, with its owner (a zone
    /// named without one would be the caller's own, which the shared database never holds).
    func zone(_ database: String, scope: CloudKitDatabase.Scope, _ zoneID: CloudKitWire.ZoneID?, caller: Caller)
        -> EmulatedZone?
    {
        let name = zoneID?.zoneName ?? ZoneID.defaultZoneName
        let owner = zoneID?.ownerRecordName ?? caller.user
        return zonesOf(database)[EmulatedContainer.key(name: name, owner: owner, scope: scope)]
    }

    /// A zone for records being loaded: in the shared database somebody else's (the owner the
    /// record names, or one made up from the zone's name).
    func zoneForLoading(_ database: String, scope: CloudKitDatabase.Scope, name: String, owner given: String?)
        -> EmulatedZone
    {
        _ = zonesOf(database)
        let owner: String
        if scope == .shared {
            if let given, given != ZoneID.defaultOwnerName {
                owner = given
            } else {
                owner = "_" + SHA256.hash(data: Data(name.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
            }
        } else {
            owner = ownerName(scope: scope.rawValue, caller: nil)
        }
        let key = EmulatedContainer.key(name: name, owner: owner, scope: scope)
        if let zone = databases[database]![key] { return zone }
        let zone = EmulatedZone(name: name, owner: owner)
        databases[database]![key] = zone
        logZone(database, zone, deleted: false)
        return zone
    }

    // MARK: Zones as tests change them

    /// Deletes a zone and its records, as its owner would in an app.
    func deleteZone(
        _ name: String, environment: CloudKitDatabase.Environment = .development,
        scope: CloudKitDatabase.Scope = .private,
        owner: String? = nil
    ) {
        do {
            let database = "\(environment.rawValue)/\(scope.rawValue)"
            let key = EmulatedContainer.key(name: name, owner: owner ?? signInUser, scope: scope)
            guard let zone = zonesOf(database)[key] else { return }
            databases[database]![key] = nil
            logZone(database, zone, deleted: true)
        }
    }

    /// Notes a zone made or deleted, for `zones/changes` (zones count apart from records, so
    /// that record sequences stay as loaded).
    func logZone(_ database: String, _ zone: EmulatedZone, deleted: Bool) {
        zoneSequence += 1
        zoneLog[database, default: []].append((zoneSequence, zone, deleted))
    }

    /// Makes a zone's sync tokens stop working, as CloudKit's do when they are old or the zone
    /// was reset; `keeping` names the records it still holds afterwards (nil: all).
    func expireSyncTokens(
        zone name: String, environment: CloudKitDatabase.Environment = .development,
        scope: CloudKitDatabase.Scope = .private,
        keeping: Set<String>? = nil
    ) {
        do {
            let database = "\(environment.rawValue)/\(scope.rawValue)"
            guard let zone = zonesOf(database).values.first(where: { $0.name == name }) else { return }
            zone.tokenEpoch += 1
            guard let keeping else { return }
            // A reset zone forgets what it held: the records it lost leave no tombstones.
            for recordName in Array(zone.encoded.keys) where !keeping.contains(recordName) {
                zone.encoded[recordName] = nil
                zone.types[recordName] = nil
                zone.changedAt[recordName] = nil
            }
        }
    }

    // MARK: Operations

    func listZones(_ database: String, scope: CloudKitDatabase.Scope, caller: Caller) -> CloudKitHTTPResponse {
        let zones = zonesOf(database).values.sorted { ($0.owner, $0.name) < ($1.owner, $1.name) }
        return json(
            CloudKitWire.Zones(
                zones: zones.map { zone in
                    CloudKitWire.Zone(
                        zoneID: zone.wireID, atomic: !zone.isDefault,
                        syncToken: zone.isDefault ? nil : zone.syncToken(after: zone.changes.last?.sequence ?? 0))
                }))
    }

    func modifyZones(
        _ database: String, scope: CloudKitDatabase.Scope, _ body: Data, caller: Caller,
        refusal: (code: String, reason: String)?
    ) -> CloudKitHTTPResponse {
        _ = zonesOf(database)
        guard let request = decoded(CloudKitWire.ZoneModifyRequest.self, body) else {
            return error(400, "BAD_REQUEST", "BadRequestException: Unexpected input")
        }
        var results: [CloudKitWire.Zone] = []
        for operation in request.operations {
            let zoneID = operation.zone?.zoneID
            let name = zoneID?.zoneName ?? ""
            guard !name.isEmpty else { return error(400, "BAD_REQUEST", "a zone operation needs a zoneID") }
            let owner = zoneID?.ownerRecordName ?? caller.user
            let key = EmulatedContainer.key(name: name, owner: owner, scope: scope)
            let echo = CloudKitWire.ZoneID(zoneName: name, ownerRecordName: owner)
            if let refusal {
                results.append(CloudKitWire.Zone(zoneID: echo, serverErrorCode: refusal.code, reason: refusal.reason))
                continue
            }
            switch operation.operationType {
            case "create":
                if scope == .shared || name.hasPrefix("_") {
                    results.append(
                        CloudKitWire.Zone(
                            zoneID: echo, serverErrorCode: scope == .shared ? "ACCESS_DENIED" : "BAD_REQUEST",
                            reason: scope == .shared
                                ? "zones in the shared database are made by their owners"
                                : "zone names starting with _ are reserved"))
                    continue
                }
                if databases[database]![key] == nil {
                    let zone = EmulatedZone(name: name, owner: ownerName(scope: scope.rawValue, caller: caller))
                    databases[database]![key] = zone
                    logZone(database, zone, deleted: false)
                }
                results.append(CloudKitWire.Zone(zoneID: databases[database]![key]!.wireID))
            case "delete":
                guard let zone = databases[database]![key], !zone.isDefault else {
                    results.append(
                        CloudKitWire.Zone(
                            zoneID: echo, serverErrorCode: "ZONE_NOT_FOUND", reason: "zone \(name) does not exist"))
                    continue
                }
                databases[database]![key] = nil
                logZone(database, zone, deleted: true)
                results.append(CloudKitWire.Zone(zoneID: zone.wireID, deleted: true))
            default:
                return error(400, "BAD_REQUEST", "a zone operation is create or delete")
            }
        }
        return json(CloudKitWire.Zones(zones: results))
    }

    /// `zones/changes`: the zones created or deleted after `metaSyncToken` (every zone without
    /// one, deleted ones too), each once, as it last changed.
    func zoneChanges(_ database: String, _ body: Data, caller: Caller) -> CloudKitHTTPResponse {
        _ = zonesOf(database)
        guard let request = decoded(CloudKitWire.ZoneChangesRequest.self, body) else {
            return error(400, "BAD_REQUEST", "BadRequestException: Unexpected input")
        }
        var after = 0
        if let token = request.metaSyncToken {
            guard let data = Data(base64Encoded: token),
                case let parts = String(decoding: data, as: UTF8.self).split(separator: "|"),
                parts.count == 2, parts[0] == "zones", let value = Int(parts[1])
            else {
                return error(400, "BAD_REQUEST", "unknown metaSyncToken")
            }
            after = value
        }
        let log = zoneLog[database] ?? []
        var latest: [ObjectIdentifier: (sequence: Int, zone: EmulatedZone, deleted: Bool)] = [:]
        for entry in log where entry.sequence > after { latest[ObjectIdentifier(entry.zone)] = entry }
        let ordered = latest.values.sorted { $0.sequence < $1.sequence }
        let page = ordered.prefix(settings.pageSize)
        let last = page.last?.sequence ?? max(after, log.last?.sequence ?? 0)
        let zones = page.map { entry in
            CloudKitWire.Zone(zoneID: entry.zone.wireID, deleted: entry.deleted ? true : nil)
        }
        return json(
            CloudKitWire.ZoneChanges(
                zones: zones, metaSyncToken: Data("zones|\(last)".utf8).base64EncodedString(),
                moreComing: ordered.count > page.count))
    }
}
