import CloudKitWeb
import Crypto
import Foundation
import Records

extension EmulatedContainer {
    /// The type names a value may come under in `records/modify`: CloudKit's value types, their
    /// lists, and ENCRYPTED_BYTES. (ENCRYPTED_STRING and its kind name schema types, not values.)
    static let valueTypeNames: Set<String> = {
        let scalars = ["STRING", "INT64", "DOUBLE", "TIMESTAMP", "BYTES", "REFERENCE", "ASSETID", "ASSET", "LOCATION"]
        return Set(scalars + scalars.map { $0 + "_LIST" } + ["ENCRYPTED_BYTES"])
    }()

    /// The schema's type of a field, if the emulator was given a schema that declares it.
    private func declaredType(_ recordType: String, _ field: String) -> FieldType? {
        schema?.recordType(named: recordType)?.field(named: field)?.type
    }

    /// Why CloudKit would refuse a record's fields, or nil: a type name that is not a value
    /// type; an encrypted field's value not marked encrypted.
    private func fieldProblem(_ record: CloudKitWire.Record) -> String? {
        let type = record.recordType ?? ""
        for (name, entry) in record.fields ?? [:] {
            if let tag = entry.type, !EmulatedContainer.valueTypeNames.contains(tag) {
                return "BadRequestException: Unexpected input (type \(tag) of field '\(name)')"
            }
            if let declared = declaredType(type, name), declared.isEncrypted {
                let marked = entry.isEncrypted == true || entry.type == "ENCRYPTED_BYTES"
                if !marked {
                    let schemaName = "ENCRYPTED_" + FieldType(declared.primitive, list: declared.isList).webServicesName
                    return
                        "invalid attempt to set value type ENCRYPTED_BYTES for field '\(name)' for type '\(type)', defined to be: \(schemaName)"
                }
            }
        }
        return nil
    }

    /// The server's stamp on what it saves: who saved it when, from where.
    func stamp(_ user: String) -> CloudKitWire.Stamp {
        CloudKitWire.Stamp(timestamp: Int64(now.timeIntervalSince1970 * 1000), userRecordName: user, deviceID: "2")
    }

    func modifyRecords(
        _ database: String, scope: CloudKitDatabase.Scope, _ body: Data, caller: Caller, base: URL,
        busy: (count: Int, retryAfter: Double)?
    ) -> CloudKitHTTPResponse {
        guard let request = decoded(CloudKitWire.ModifyRequest.self, body) else {
            return error(400, "BAD_REQUEST", "BadRequestException: Unexpected input")
        }
        let operations = request.operations
        guard operations.count <= settings.maxOperations else {
            return error(
                400, "BAD_REQUEST",
                "a request holds at most \(settings.maxOperations) operations; this one holds \(operations.count)")
        }
        guard let zone = zone(database, scope: scope, request.zoneID, caller: caller) else {
            return error(404, "ZONE_NOT_FOUND", "Zone does not exist")
        }
        let atomic = request.atomic == true
        if atomic && zone.isDefault {
            return error(400, "BAD_REQUEST", "atomic operations not supported in default zone")
        }
        // The whole request fails when an operation that CloudKit checks lacks its change tag.
        for operation in operations where ["update", "replace", "delete"].contains(operation.operationType ?? "") {
            if operation.record?.recordChangeTag == nil {
                return error(400, "BAD_REQUEST", "BadRequestException: missing required field 'recordChangeTag'")
            }
        }
        // The server keeps the system fields: who saved a record when, from where.
        let stamp = stamp(caller.user)
        // A parent may come earlier in the same request than its child.
        var savedHere: Set<String> = []
        var results: [Data] = []  // each operation's outcome as JSON
        for (index, given) in operations.enumerated() {
            var operation = given
            // A record created without a name gets a random one, as the reference says.
            if operation.operationType == "create", var unnamed = operation.record, unnamed.recordName == nil {
                unnamed.recordName =
                    unnamed.recordType?.lowercased() == "cloudkit.share"
                    ? "Share-" + UUID().uuidString : UUID().uuidString
                operation.record = unnamed
            }
            guard let type = operation.operationType, var record = operation.record, let recordName = record.recordName
            else {
                return error(400, "BAD_REQUEST", "an operation needs an operationType and a record with a recordName")
            }
            func refuse(_ code: String, _ reason: String, retryAfter: Double? = nil) {
                var outcome = CloudKitWire.Record(recordName: recordName)
                outcome.serverErrorCode = code
                outcome.reason = reason
                outcome.retryAfter = retryAfter
                results.append((try? CloudKitWire.encode(outcome)) ?? Data("{}".utf8))
            }
            if let busy, index < busy.count {
                refuse("TRY_AGAIN_LATER", "the zone is busy", retryAfter: busy.retryAfter)
                continue
            }
            if type == "create", let recordType = record.recordType, recordType.lowercased() == "cloudkit.share" {
                switch createShare(record, recordType: recordType, atomic: atomic, zone: zone, stamp: stamp) {
                case .success(let created): results.append(created)
                case .failure(let refusal): refuse(refusal.code, refusal.reason)
                }
                continue
            }
            let existing = zone.record(recordName)
            // A record loaded in a shape the models cannot read (a plain-style export, say) is
            // not taken for a missing one.
            if existing == nil && zone.encoded[recordName] != nil {
                return error(
                    500, "INTERNAL_ERROR", "the emulator holds record \(recordName) in a form it cannot read")
            }
            switch type {
            case "create" where existing != nil:
                refuse("EXISTS", "record to insert already exists")
                continue
            case "update", "replace", "delete":
                guard let existing else {
                    refuse("NOT_FOUND", "record not found")
                    continue
                }
                if record.recordChangeTag != existing.recordChangeTag {
                    refuse("CONFLICT", "oplock error: the record has changed")
                    continue
                }
            case "create", "forceUpdate", "forceReplace", "forceDelete": break
            default: return error(400, "BAD_REQUEST", "unknown operationType \(type)")
            }
            if type == "delete" || type == "forceDelete" {
                guard let existing else {
                    refuse("NOT_FOUND", "record not found")
                    continue
                }
                sequence += 1
                zone.changed(recordName, at: sequence)
                zone.save(recordName, nil)
                unlinkShare(of: existing, named: recordName, in: zone, stamp: stamp)
                var deleted = CloudKitWire.Record(recordName: recordName)
                deleted.deleted = true
                deleted.zoneID = zone.wireID
                results.append((try? CloudKitWire.encode(deleted)) ?? Data("{}".utf8))
                continue
            }
            if let problem = fieldProblem(record) {
                refuse("BAD_REQUEST", problem)
                continue
            }
            // The parent must be there already, or saved earlier in the same request. (CloudKit's
            // code for a missing parent is not documented for Web Services: the one for a
            // reference that does not hold is an assumption, as is refusing a parent saved later
            // in the request.)
            if let parent = record.parent {
                guard let name = parent.recordName, zone.encoded[name] != nil || savedHere.contains(name) else {
                    refuse("VALIDATING_REFERENCE_ERROR", "the parent record \(parent.recordName ?? "") does not exist")
                    continue
                }
                record.parent = CloudKitWire.RecordLink(recordName: name)
            }
            // Who shares a record is CloudKit's to say: a client's `share` is not taken, and a
            // record keeps the one it has (and its short GUID).
            record.share = existing?.share
            record.shortGUID = existing?.shortGUID
            if record.createShortGUID == true, record.shortGUID == nil {
                record.shortGUID = EmulatedContainer.newShortGUID()
            }
            record.createShortGUID = nil
            // An asset names its upload by receipt (an ASSETID_LIST, one per element); the
            // record keeps where to download it.
            if var fields = record.fields {
                var unknown: String?
                for (fieldName, var entry) in fields {
                    switch entry.value {
                    case .object(let value) where value["receipt"] != nil:
                        switch attach(value, base: base) {
                        case .success(let stored): entry.value = .object(stored)
                        case .failure(let problem): unknown = "field \(fieldName): \(problem)"
                        }
                    case .array(let elements)
                    where elements.contains(where: { $0.objectValue?["receipt"] != nil }):
                        var stored: [JSONValue] = []
                        for element in elements {
                            guard case .object(let value) = element, value["receipt"] != nil else {
                                stored.append(element)
                                continue
                            }
                            switch attach(value, base: base) {
                            case .success(let kept): stored.append(.object(kept))
                            case .failure(let problem): unknown = "field \(fieldName): \(problem)"
                            }
                        }
                        entry.value = .array(stored)
                    default:
                        break
                    }
                    if case .array(let elements) = entry.value, elements.isEmpty, settings.emptyListsAsUnknown {
                        entry.type = FieldType.unknownListName
                    }
                    fields[fieldName] = entry
                }
                if let unknown {
                    refuse("BAD_REQUEST", unknown)
                    continue
                }
                record.fields = fields
            }
            sequence += 1
            zone.changed(recordName, at: sequence)
            if type == "update" || type == "forceUpdate", let existing {
                var fields = existing.fields ?? [:]
                for (key, value) in record.fields ?? [:] { fields[key] = value }
                record.fields = fields
            }
            record.created = existing?.created ?? stamp
            record.modified = stamp
            record.pluginFields = [:]
            record.deleted = false
            record.recordChangeTag = changeTag(sequence)
            record.zoneID = zone.wireID
            zone.save(recordName, record)
            savedHere.insert(recordName)
            results.append(zone.encoded[recordName] ?? Data())
            // Saving a child changes its parent's change tag (as apps see on devices): a client
            // that shares the parent afterwards needs its tag anew.
            if let parentName = record.parent?.recordName, var parent = zone.record(parentName) {
                sequence += 1
                parent.recordChangeTag = changeTag(sequence)
                zone.save(parentName, parent)
                zone.changed(parentName, at: sequence)
            }
        }
        var answer = Data("{\"records\":[".utf8)
        for (index, result) in results.enumerated() {
            if index > 0 { answer.append(UInt8(ascii: ",")) }
            answer.append(result)
        }
        answer.append(Data("]}".utf8))
        return CloudKitHTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: answer)
    }

    private func zoneJSONText(_ zone: EmulatedZone) -> String {
        String(decoding: (try? CloudKitWire.encode(zone.wireID)) ?? Data("{}".utf8), as: UTF8.self)
    }

    /// `records/changes`: a custom zone's changes after its sync token, a page at a time.
    func changes(_ database: String, scope: CloudKitDatabase.Scope, _ body: Data, caller: Caller)
        -> CloudKitHTTPResponse
    {
        guard let request = decoded(CloudKitWire.RecordChangesRequest.self, body) else {
            return error(400, "BAD_REQUEST", "BadRequestException: Unexpected input")
        }
        guard let zone = zone(database, scope: scope, request.zoneID, caller: caller) else {
            return error(404, "ZONE_NOT_FOUND", "Zone does not exist")
        }
        guard !zone.isDefault else {
            return error(400, "BAD_REQUEST", "record changes are fetched from custom zones only")
        }
        if let limit = request.resultsLimit, !(1...200).contains(limit) {
            return error(400, "BAD_REQUEST", "resultsLimit must be between 1 and 200")
        }
        var after = 0
        if let token = request.syncToken {
            guard let value = zone.sequence(of: token) else {
                // A token of this zone from before its tokens expired (or it was reset), or
                // one never issued.
                if let data = Data(base64Encoded: token),
                    String(decoding: data, as: UTF8.self).hasPrefix(zone.name + "|")
                {
                    return error(400, "CHANGE_TOKEN_EXPIRED", "client knowledge differs from server knowledge")
                }
                return error(400, "BAD_REQUEST", "invalid sync token")
            }
            after = value
        }
        let limit = min(settings.pageSize, request.resultsLimit ?? settings.pageSize)
        // The first change after the token, by binary search; then the live entries in order.
        var low = 0
        var high = zone.changes.count
        while low < high {
            let middle = (low + high) / 2
            if zone.changes[middle].sequence <= after { low = middle + 1 } else { high = middle }
        }
        var records: [Data] = []
        var last = after
        var index = low
        while index < zone.changes.count && records.count < limit {
            let change = zone.changes[index]
            index += 1
            last = change.sequence
            guard zone.changedAt[change.name] == change.sequence else { continue }
            records.append(
                zone.encoded[change.name] ?? Data("{\"deleted\":true,\"recordName\":\(quoted(change.name))}".utf8))
        }
        let moreComing = zone.changes[index...].contains { zone.changedAt[$0.name] == $0.sequence }
        if !moreComing { last = max(last, zone.changes.last?.sequence ?? after) }
        var answer = Data("{\"moreComing\":\(moreComing),\"records\":[".utf8)
        for (index, record) in records.enumerated() {
            if index > 0 { answer.append(UInt8(ascii: ",")) }
            answer.append(record)
        }
        answer.append(
            Data("],\"syncToken\":\(quoted(zone.syncToken(after: last))),\"zoneID\":\(zoneJSONText(zone))}".utf8))
        return CloudKitHTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: answer)
    }

    /// `records/query`: a type's records in a zone, by record name, a page at a time. System
    /// types are never queried; with a schema, only types whose `___recordID` is QUERYABLE are.
    func query(_ database: String, scope: CloudKitDatabase.Scope, _ body: Data, caller: Caller)
        -> CloudKitHTTPResponse
    {
        guard let request = decoded(CloudKitWire.QueryRequest.self, body) else {
            return error(400, "BAD_REQUEST", "a query needs a recordType")
        }
        guard let zone = zone(database, scope: scope, request.zoneID, caller: caller) else {
            return error(404, "ZONE_NOT_FOUND", "Zone does not exist")
        }
        guard let type = request.query.recordType else {
            return error(400, "BAD_REQUEST", "a query needs a recordType")
        }
        if type == "Users" || type.hasPrefix("cloudkit.") {
            return error(400, "BAD_REQUEST", "Can't query system types")
        }
        if let schema, schema.recordType(named: type)?.field(named: "___recordID")?.options.contains(.queryable) != true
        {
            return error(400, "BAD_REQUEST", "Queried type is not marked indexable")
        }
        if let limit = request.resultsLimit, !(1...200).contains(limit) {
            return error(400, "BAD_REQUEST", "resultsLimit must be between 1 and 200")
        }
        let start = Int(request.continuationMarker ?? "0") ?? 0
        let limit = min(settings.pageSize, request.resultsLimit ?? settings.pageSize)
        let matching = zone.types.filter { $0.value == type }.map(\.key).sorted()
        let page = matching.dropFirst(start).prefix(limit)
        var answer = Data("{\"records\":[".utf8)
        for (index, recordName) in page.enumerated() {
            if index > 0 { answer.append(UInt8(ascii: ",")) }
            answer.append(zone.encoded[recordName] ?? Data())
        }
        answer.append(UInt8(ascii: "]"))
        if start + page.count < matching.count {
            answer.append(Data(",\"continuationMarker\":\"\(start + page.count)\"".utf8))
        }
        answer.append(UInt8(ascii: "}"))
        return CloudKitHTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: answer)
    }

    // MARK: Shares

    struct Refusal: Error {
        var code: String
        var reason: String
    }

    static func newShortGUID() -> String {
        "0" + String(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(24))
    }

    /// A share created by `records/modify`, as CloudKit Web Services does it: a `cloudkit.share`
    /// (CloudKit's spelling; the reference's `cloudKit.share` is refused as CloudKit refuses it)
    /// in an atomic request, `forRecord` naming its root and the root's current change tag.
    /// The participants named are INVITED (nobody accepts for somebody else); the zone's owner
    /// is the share's OWNER. The root gains `share` and a short GUID.
    func createShare(
        _ request: CloudKitWire.Record, recordType: String, atomic: Bool, zone: EmulatedZone, stamp: CloudKitWire.Stamp
    ) -> Result<Data, Refusal> {
        guard recordType == "cloudkit.share" else {
            return .failure(Refusal(code: "BAD_REQUEST", reason: "Cannot share - no such record exists to share"))
        }
        guard atomic else {
            return .failure(Refusal(code: "BAD_REQUEST", reason: "You can only create a share with atomic=true"))
        }
        guard let forRecord = request.forRecord, let rootName = forRecord.recordName, let root = zone.record(rootName)
        else {
            return .failure(Refusal(code: "BAD_REQUEST", reason: "Cannot share - no such record exists to share"))
        }
        guard forRecord.recordChangeTag == root.recordChangeTag else {
            return .failure(Refusal(code: "CONFLICT", reason: "oplock error: the root record has changed"))
        }
        // One share per root (CloudKit's native API calls it alreadyShared).
        if root.share != nil { return .failure(Refusal(code: "BAD_REQUEST", reason: "record is already shared")) }
        let name = request.recordName ?? "Share-" + UUID().uuidString
        if zone.encoded[name] != nil {
            return .failure(Refusal(code: "EXISTS", reason: "record to insert already exists"))
        }
        let owner = CloudKitWire.Participant(
            participantId: UUID().uuidString,
            userIdentity: .init(userRecordName: zone.owner, nameComponents: [:]), type: "OWNER",
            acceptanceStatus: "ACCEPTED", permission: "READ_WRITE")
        var participants = [owner]
        for given in request.participants ?? [] {
            participants.append(
                CloudKitWire.Participant(
                    participantId: UUID().uuidString,
                    userIdentity: .init(
                        lookupInfo: given.userIdentity?.lookupInfo ?? .init(), nameComponents: [:]),
                    type: given.type ?? "USER", acceptanceStatus: "INVITED", permission: given.permission ?? "READ_ONLY"
                ))
        }
        let shortGUID = root.shortGUID ?? EmulatedContainer.newShortGUID()
        saveShare(
            name, of: rootName, root, in: zone, fields: request.fields ?? [:],
            publicPermission: request.publicPermission ?? "NONE", participants: participants, shortGUID: shortGUID,
            linksItself: true, stamp: stamp)
        return .success(zone.encoded[name] ?? Data())
    }

    /// Saves a new share `name` of the root record `rootName` (`root` as the zone holds it), and
    /// links the root to it; both changes reach the zone's change feed. `participants` come
    /// first the owner. A share made through `records/modify` names itself in `share` and gives
    /// the root its short GUID (as CloudKit answers); one a test makes does neither.
    private func saveShare(
        _ name: String, of rootName: String, _ root: CloudKitWire.Record, in zone: EmulatedZone,
        fields: [String: CloudKitWire.Field], publicPermission: String, participants: [CloudKitWire.Participant],
        shortGUID: String, linksItself: Bool, stamp: CloudKitWire.Stamp
    ) {
        sequence += 1
        var share = CloudKitWire.Record(recordName: name, recordType: "cloudkit.share")
        share.fields = fields
        share.pluginFields = [:]
        share.recordChangeTag = changeTag(sequence)
        share.created = stamp
        share.modified = stamp
        share.deleted = false
        share.zoneID = zone.wireID
        if linksItself { share.share = CloudKitWire.RecordLink(recordName: name, zoneID: zone.wireID) }
        share.publicPermission = publicPermission
        share.participants = participants
        share.owner = participants.first
        share.currentUserParticipant = participants.first
        share.shortGUID = shortGUID
        zone.save(name, share)
        zone.changed(name, at: sequence)
        sequence += 1
        var root = root
        root.share = CloudKitWire.RecordLink(recordName: name, zoneID: zone.wireID)
        if linksItself { root.shortGUID = shortGUID }
        root.recordChangeTag = changeTag(sequence)
        root.modified = stamp
        zone.save(rootName, root)
        zone.changed(rootName, at: sequence)
    }

    /// After `record` was deleted: a root takes its share with it; a share leaves its root
    /// without `share` (CloudKit does both).
    func unlinkShare(
        of record: CloudKitWire.Record, named name: String, in zone: EmulatedZone, stamp: CloudKitWire.Stamp
    ) {
        if record.recordType == "cloudkit.share" {
            for (other, type) in zone.types where type != "cloudkit.share" {
                guard var root = zone.record(other), root.share?.recordName == name else { continue }
                sequence += 1
                root.share = nil
                root.recordChangeTag = changeTag(sequence)
                root.modified = stamp
                zone.save(other, root)
                zone.changed(other, at: sequence)
            }
        } else if let share = record.share?.recordName, share != name, zone.encoded[share] != nil {
            sequence += 1
            zone.changed(share, at: sequence)
            zone.save(share, nil)
        }
    }

    /// `records/lookup`: records by name, each as CloudKit holds it, or NOT_FOUND.
    func lookup(_ database: String, scope: CloudKitDatabase.Scope, _ body: Data, caller: Caller)
        -> CloudKitHTTPResponse
    {
        guard let request = decoded(CloudKitWire.LookupRequest.self, body) else {
            return error(400, "BAD_REQUEST", "BadRequestException: Unexpected input")
        }
        guard let zone = zone(database, scope: scope, request.zoneID, caller: caller) else {
            return error(404, "ZONE_NOT_FOUND", "Zone does not exist")
        }
        var answer = Data("{\"records\":[".utf8)
        for (index, wanted) in (request.records ?? []).enumerated() {
            if index > 0 { answer.append(UInt8(ascii: ",")) }
            let name = wanted.recordName ?? ""
            if let encoded = zone.encoded[name] {
                answer.append(encoded)
            } else {
                let missing = CloudKitWire.Outcome(
                    recordName: name, serverErrorCode: "NOT_FOUND", reason: "Record not found")
                answer.append((try? CloudKitWire.encode(missing)) ?? Data("{}".utf8))
            }
        }
        answer.append(Data("]}".utf8))
        return CloudKitHTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: answer)
    }

    /// Shares `root` (a record of a custom zone) as an app would with `CKShare(rootRecord:)`:
    /// a `cloudkit.share` record joins the zone, its owner and participants with it, and the
    /// root record names it in `share`; both changes reach the zone's change feed. Returns
    /// the share's record name.
    @discardableResult
    func share(
        _ root: String, zone name: String, title: String,
        participants: [(user: String, permission: String, accepted: Bool)] = [],
        publicPermission: String = "NONE", environment: CloudKitDatabase.Environment = .development,
        scope: CloudKitDatabase.Scope = .private
    ) -> String? {
        do {
            let database = "\(environment.rawValue)/\(scope.rawValue)"
            guard let zone = zonesOf(database).values.first(where: { $0.name == name }),
                let rootRecord = zone.record(root)
            else { return nil }
            let shareName = "Share-" + UUID().uuidString
            func participant(_ user: String, type: String, permission: String, status: String)
                -> CloudKitWire.Participant
            {
                CloudKitWire.Participant(
                    userIdentity: .init(
                        userRecordName: user, lookupInfo: .init(emailAddress: "\(user.dropFirst())@example.com")),
                    type: type, acceptanceStatus: status, permission: permission)
            }
            let owner = participant(zone.owner, type: "OWNER", permission: "READ_WRITE", status: "ACCEPTED")
            let others = participants.map {
                participant(
                    $0.user, type: "USER", permission: $0.permission, status: $0.accepted ? "ACCEPTED" : "INVITED")
            }
            saveShare(
                shareName, of: root, rootRecord, in: zone,
                fields: ["cloudkit.title": CloudKitWire.Field(value: .string(title), type: "STRING")],
                publicPermission: publicPermission, participants: [owner] + others,
                shortGUID: String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(25)),
                linksItself: false, stamp: stamp(zone.owner))
            return shareName
        }
    }

    // MARK: Assets

    /// An ASSETID value with a receipt, as the record keeps it: its size, checksum and where to
    /// download it.
    private func attach(_ value: JSONObject, base: URL) -> Result<JSONObject, AssetProblem> {
        guard let receipt = value["receipt"]?.stringValue, let bytes = assets[receipt] else {
            return .failure(
                AssetProblem(description: "no uploaded asset has the receipt \(value["receipt"]?.summary ?? "")"))
        }
        let kept = value.members.filter { !["receipt", "size", "fileChecksum", "downloadURL"].contains($0.key) }
        return .success(
            JSONObject(
                kept + [
                    JSONObject.Member(key: "size", value: .number(String(bytes.count))),
                    JSONObject.Member(
                        key: "fileChecksum",
                        value: .string(Data(SHA256.hash(data: bytes).prefix(20)).base64EncodedString())),
                    JSONObject.Member(
                        key: "downloadURL", value: .string(address(base, "/download/\(receipt)/") + "${f}")),
                ]))
    }

    struct AssetProblem: Error, CustomStringConvertible { var description: String }

    /// `assets/upload`: a URL on this server for each asset named (several for one list field),
    /// to POST the bytes to.
    func uploadURLs(_ body: Data, base: URL) -> CloudKitHTTPResponse {
        guard let request = decoded(CloudKitWire.AssetUploadRequest.self, body) else {
            return error(400, "BAD_REQUEST", "BadRequestException: Unexpected input")
        }
        var places: [CloudKitWire.AssetUploadPlaces.Place] = []
        let asked = request.tokens ?? []
        guard asked.count <= 200 else { return error(400, "BAD_REQUEST", "a request holds at most 200 tokens") }
        for token in asked {
            guard let recordName = token.recordName, let fieldName = token.fieldName else {
                return error(400, "BAD_REQUEST", "an upload token names a recordName and a fieldName")
            }
            let slot = "u-" + UUID().uuidString.lowercased()
            pendingUploads.insert(slot)
            places.append(.init(recordName: recordName, fieldName: fieldName, url: address(base, "/upload/\(slot)")))
        }
        return json(CloudKitWire.AssetUploadPlaces(tokens: places))
    }

    /// The bytes POSTed to an upload URL: kept, and answered with the dictionary that the
    /// record's asset field is then saved with.
    func receiveAsset(_ request: CloudKitHTTPRequest) -> CloudKitHTTPResponse {
        let slot = String(request.url.path.dropFirst("/upload/".count))
        guard request.method == "POST", pendingUploads.remove(slot) != nil else {
            return error(404, "NOT_FOUND", "no such upload")
        }
        guard request.body.count <= settings.maxAssetSize else {
            return error(
                413, "BAD_REQUEST",
                "an asset holds at most \(settings.maxAssetSize) bytes; this one holds \(request.body.count)")
        }
        let receipt = "r-" + UUID().uuidString.lowercased()
        assets[receipt] = request.body
        let checksum = Data(SHA256.hash(data: request.body).prefix(20)).base64EncodedString()
        return json(
            CloudKitWire.UploadedAsset(
                singleFile: .init(
                    fileChecksum: checksum, size: request.body.count, receipt: receipt, referenceChecksum: checksum,
                    wrappingKey: "emulator-key")))
    }

    func sendAsset(_ request: CloudKitHTTPRequest) -> CloudKitHTTPResponse {
        let parts = request.url.path.split(separator: "/")
        guard parts.count >= 2, let bytes = assets[String(parts[1])] else {
            return error(404, "NOT_FOUND", "no such asset")
        }
        return CloudKitHTTPResponse(status: 200, headers: [("Content-Type", "application/octet-stream")], body: bytes)
    }

    func address(_ base: URL, _ path: String) -> String {
        var components = URLComponents()
        components.scheme = base.scheme
        components.host = base.host
        components.port = base.port
        components.path = path
        return components.url!.absoluteString
    }
}
