import Foundation
import Records

/// CloudKit Web Services' messages as Codable models, shared by the client and the emulator:
/// the requests ckport sends and the answers it reads (zones, records, assets, users, shares),
/// as Apple's "CloudKit Web Services Reference" describes them. A key ckport does not model is
/// kept where it would otherwise be lost: a record's and a field's other keys travel in
/// `other`, so that a record read and written again says everything it said at those two
/// levels (keys unknown inside a stamp, a link or a participant are not kept).
///
/// A record page (`records/changes`, `records/query`) is not decoded here: its records are read
/// straight from the answer's bytes by the import's own reader (``Formats``), as fast as a file.
public enum CloudKitWire {
    /// Encodes a message: keys sorted, slashes as they are.
    public static func encode(_ message: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(message)
    }

    /// Decodes an answer; an answer that is not the message it should be is CloudKit's
    /// `BAD_ANSWER`, naming the operation.
    public static func decode<Message: Decodable>(_ type: Message.Type, from data: Data, operation: String) throws
        -> Message
    {
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch {
            throw CloudKitServerError(
                serverErrorCode: "BAD_ANSWER", reason: "\(operation) answered with JSON ckport cannot read (\(error))",
                status: 200)
        }
    }

    /// A zone's identity: `{"zoneName": …, "ownerRecordName": …, "zoneType": …}`. (An answer's
    /// zone without a name is read, and left out by whoever reads it.)
    public struct ZoneID: Codable, Hashable, Sendable {
        public var zoneName: String?
        public var ownerRecordName: String?
        public var zoneType: String?

        public init(zoneName: String, ownerRecordName: String? = nil, zoneType: String? = nil) {
            self.zoneName = zoneName
            self.ownerRecordName = ownerRecordName
            self.zoneType = zoneType
        }
    }

    /// A zone in an answer of `zones/list`, `zones/changes` or `zones/modify`, or a zone a
    /// `zones/modify` operation names; with an error instead when its operation failed.
    public struct Zone: Codable, Sendable {
        public var zoneID: ZoneID?
        public var atomic: Bool?
        public var syncToken: String?
        public var deleted: Bool?
        /// In `zones/changes`: the zone's user purged it (deleted, and its records with it).
        public var purged: Bool?
        public var serverErrorCode: String?
        public var reason: String?

        public init(
            zoneID: ZoneID?, atomic: Bool? = nil, syncToken: String? = nil, deleted: Bool? = nil, purged: Bool? = nil,
            serverErrorCode: String? = nil, reason: String? = nil
        ) {
            self.zoneID = zoneID
            self.atomic = atomic
            self.syncToken = syncToken
            self.deleted = deleted
            self.purged = purged
            self.serverErrorCode = serverErrorCode
            self.reason = reason
        }
    }

    /// `zones/list` and `zones/modify` answer with the zones.
    public struct Zones: Codable, Sendable {
        public var zones: [Zone]

        public init(zones: [Zone]) { self.zones = zones }

        /// An answer without `zones` names none.
        public init(from decoder: Decoder) throws {
            zones =
                try decoder.container(keyedBy: AnyKey.self).decodeIfPresent([Zone].self, forKey: AnyKey("zones")) ?? []
        }
    }

    /// `zones/changes`: the zones made or deleted after `metaSyncToken`.
    public struct ZoneChangesRequest: Codable, Sendable {
        public var metaSyncToken: String?

        public init(metaSyncToken: String?) { self.metaSyncToken = metaSyncToken }
    }

    public struct ZoneChanges: Codable, Sendable {
        public var zones: [Zone]
        public var metaSyncToken: String?
        public var moreComing: Bool?

        public init(zones: [Zone], metaSyncToken: String?, moreComing: Bool?) {
            self.zones = zones
            self.metaSyncToken = metaSyncToken
            self.moreComing = moreComing
        }

        /// An answer without `zones` names none.
        public init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: AnyKey.self)
            zones = try container.decodeIfPresent([Zone].self, forKey: AnyKey("zones")) ?? []
            metaSyncToken = try container.decodeIfPresent(String.self, forKey: AnyKey("metaSyncToken"))
            moreComing = try container.decodeIfPresent(Bool.self, forKey: AnyKey("moreComing"))
        }
    }

    /// `zones/modify`: create or delete zones.
    public struct ZoneModifyRequest: Codable, Sendable {
        public struct Operation: Codable, Sendable {
            public var operationType: String?
            public var zone: Zone?

            public init(operationType: String, zone: Zone) {
                self.operationType = operationType
                self.zone = zone
            }
        }

        public var operations: [Operation]

        public init(operations: [Operation]) { self.operations = operations }
    }

    /// `users/current`: who the request comes from.
    public struct User: Codable, Sendable {
        public var userRecordName: String?

        public init(userRecordName: String?) { self.userRecordName = userRecordName }
    }

    /// `records/changes`: a zone's changes after its sync token.
    public struct RecordChangesRequest: Codable, Sendable {
        /// The zone; CloudKit takes the default zone when none is named.
        public var zoneID: ZoneID?
        public var syncToken: String?
        public var resultsLimit: Int?
        public var desiredKeys: [String]?

        public init(zoneID: ZoneID?, syncToken: String? = nil, resultsLimit: Int? = nil, desiredKeys: [String]? = nil) {
            self.zoneID = zoneID
            self.syncToken = syncToken
            self.resultsLimit = resultsLimit
            self.desiredKeys = desiredKeys
        }
    }

    /// `records/query`: a type's records in a zone, a page at a time.
    public struct QueryRequest: Codable, Sendable {
        public struct Query: Codable, Sendable {
            public var recordType: String?

            public init(recordType: String) { self.recordType = recordType }
        }

        /// The zone; CloudKit takes the default zone when none is named.
        public var zoneID: ZoneID?
        public var query: Query
        public var resultsLimit: Int?
        public var continuationMarker: String?
        public var desiredKeys: [String]?

        public init(
            zoneID: ZoneID?, query: Query, resultsLimit: Int? = nil, continuationMarker: String? = nil,
            desiredKeys: [String]? = nil
        ) {
            self.zoneID = zoneID
            self.query = query
            self.resultsLimit = resultsLimit
            self.continuationMarker = continuationMarker
            self.desiredKeys = desiredKeys
        }
    }

    /// Who saved a record when, and from where.
    public struct Stamp: Codable, Sendable, Equatable {
        public var timestamp: Int64?
        public var userRecordName: String?
        public var deviceID: String?

        public init(timestamp: Int64?, userRecordName: String?, deviceID: String?) {
            self.timestamp = timestamp
            self.userRecordName = userRecordName
            self.deviceID = deviceID
        }
    }

    /// A link to a record: a parent, a share, a root to share.
    public struct RecordLink: Codable, Sendable, Equatable {
        public var recordName: String?
        public var recordChangeTag: String?
        public var zoneID: ZoneID?

        public init(recordName: String?, recordChangeTag: String? = nil, zoneID: ZoneID? = nil) {
            self.recordName = recordName
            self.recordChangeTag = recordChangeTag
            self.zoneID = zoneID
        }
    }

    /// A field of a record: its value (any JSON: a string, a number, an asset's or a location's
    /// object, a list), its type, and any other key the sender gave.
    public struct Field: Codable, Sendable, Equatable {
        public var value: JSONValue
        public var type: String?
        public var isEncrypted: Bool?
        /// Keys not modelled above, kept as they came.
        public var other: [String: JSONValue] = [:]

        public init(value: JSONValue, type: String? = nil, isEncrypted: Bool? = nil) {
            self.value = value
            self.type = type
            self.isEncrypted = isEncrypted
        }

        private static let modelled: Set<String> = ["value", "type", "isEncrypted"]

        public init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: AnyKey.self)
            value = try container.decodeIfPresent(JSONValue.self, forKey: AnyKey("value")) ?? .null
            type = try container.decodeIfPresent(String.self, forKey: AnyKey("type"))
            isEncrypted = try container.decodeIfPresent(Bool.self, forKey: AnyKey("isEncrypted"))
            other = try AnyKey.others(in: container, except: Field.modelled)
        }

        public func encode(to encoder: Encoder) throws {
            var container = encoder.container(keyedBy: AnyKey.self)
            try container.encode(value, forKey: AnyKey("value"))
            try container.encodeIfPresent(type, forKey: AnyKey("type"))
            try container.encodeIfPresent(isEncrypted, forKey: AnyKey("isEncrypted"))
            for (key, value) in other { try container.encode(value, forKey: AnyKey(key)) }
        }
    }

    /// Someone a share is shared with, or its owner.
    public struct Participant: Codable, Sendable, Equatable {
        public struct Identity: Codable, Sendable, Equatable {
            public struct LookupInfo: Codable, Sendable, Equatable {
                public var emailAddress: String?
                public var phoneNumber: String?
                public var userRecordName: String?

                public init(emailAddress: String? = nil, phoneNumber: String? = nil, userRecordName: String? = nil) {
                    self.emailAddress = emailAddress
                    self.phoneNumber = phoneNumber
                    self.userRecordName = userRecordName
                }
            }

            public var userRecordName: String?
            public var lookupInfo: LookupInfo?
            /// A person's name in parts (`givenName`, `familyName`, `phoneticRepresentation`…).
            public var nameComponents: [String: JSONValue]?

            public init(
                userRecordName: String? = nil, lookupInfo: LookupInfo? = nil, nameComponents: [String: JSONValue]? = nil
            ) {
                self.userRecordName = userRecordName
                self.lookupInfo = lookupInfo
                self.nameComponents = nameComponents
            }
        }

        public var participantId: String?
        public var userIdentity: Identity?
        /// OWNER, USER, ADMINISTRATOR, PUBLIC_USER.
        public var type: String?
        /// INVITED, ACCEPTED, REMOVED, UNKNOWN.
        public var acceptanceStatus: String?
        /// NONE, READ_ONLY, READ_WRITE.
        public var permission: String?

        public init(
            participantId: String? = nil, userIdentity: Identity?, type: String?, acceptanceStatus: String?,
            permission: String?
        ) {
            self.participantId = participantId
            self.userIdentity = userIdentity
            self.type = type
            self.acceptanceStatus = acceptanceStatus
            self.permission = permission
        }
    }

    /// A record as CloudKit sends and takes it, or (in an answer to a modify or a lookup) the
    /// error of its operation instead. A share's own keys (participants, permission, short
    /// GUID) are modelled; any other key is kept in `other`.
    public struct Record: Codable, Sendable, Equatable {
        public var recordName: String?
        public var recordType: String?
        public var recordChangeTag: String?
        public var fields: [String: Field]?
        public var pluginFields: [String: Field]?
        public var created: Stamp?
        public var modified: Stamp?
        public var deleted: Bool?
        public var zoneID: ZoneID?
        public var parent: RecordLink?
        public var share: RecordLink?
        /// A share's root, when a share is created.
        public var forRecord: RecordLink?
        public var shortGUID: String?
        public var createShortGUID: Bool?
        public var publicPermission: String?
        public var participants: [Participant]?
        public var owner: Participant?
        public var currentUserParticipant: Participant?
        /// An operation's error, in an answer.
        public var serverErrorCode: String?
        public var reason: String?
        public var retryAfter: Double?
        /// Keys not modelled above, kept as they came.
        public var other: [String: JSONValue] = [:]

        public init(recordName: String? = nil, recordType: String? = nil) {
            self.recordName = recordName
            self.recordType = recordType
        }

        enum Key: String, CaseIterable {
            case recordName, recordType, recordChangeTag, fields, pluginFields, created, modified, deleted, zoneID
            case parent, share, forRecord, shortGUID, createShortGUID, publicPermission, participants, owner
            case currentUserParticipant, serverErrorCode, reason, retryAfter
        }

        private static let modelled = Set(Key.allCases.map(\.rawValue))

        public init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: AnyKey.self)
            func key(_ key: Key) -> AnyKey { AnyKey(key.rawValue) }
            recordName = try c.decodeIfPresent(String.self, forKey: key(.recordName))
            recordType = try c.decodeIfPresent(String.self, forKey: key(.recordType))
            recordChangeTag = try c.decodeIfPresent(String.self, forKey: key(.recordChangeTag))
            fields = try c.decodeIfPresent([String: Field].self, forKey: key(.fields))
            pluginFields = try c.decodeIfPresent([String: Field].self, forKey: key(.pluginFields))
            created = try c.decodeIfPresent(Stamp.self, forKey: key(.created))
            modified = try c.decodeIfPresent(Stamp.self, forKey: key(.modified))
            deleted = try c.decodeIfPresent(Bool.self, forKey: key(.deleted))
            zoneID = try c.decodeIfPresent(ZoneID.self, forKey: key(.zoneID))
            parent = try c.decodeIfPresent(RecordLink.self, forKey: key(.parent))
            share = try c.decodeIfPresent(RecordLink.self, forKey: key(.share))
            forRecord = try c.decodeIfPresent(RecordLink.self, forKey: key(.forRecord))
            shortGUID = try c.decodeIfPresent(String.self, forKey: key(.shortGUID))
            createShortGUID = try c.decodeIfPresent(Bool.self, forKey: key(.createShortGUID))
            publicPermission = try c.decodeIfPresent(String.self, forKey: key(.publicPermission))
            participants = try c.decodeIfPresent([Participant].self, forKey: key(.participants))
            owner = try c.decodeIfPresent(Participant.self, forKey: key(.owner))
            currentUserParticipant = try c.decodeIfPresent(Participant.self, forKey: key(.currentUserParticipant))
            serverErrorCode = try c.decodeIfPresent(String.self, forKey: key(.serverErrorCode))
            reason = try c.decodeIfPresent(String.self, forKey: key(.reason))
            retryAfter = try c.decodeIfPresent(Double.self, forKey: key(.retryAfter))
            other = try AnyKey.others(in: c, except: Record.modelled)
        }

        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: AnyKey.self)
            func key(_ key: Key) -> AnyKey { AnyKey(key.rawValue) }
            try c.encodeIfPresent(recordName, forKey: key(.recordName))
            try c.encodeIfPresent(recordType, forKey: key(.recordType))
            try c.encodeIfPresent(recordChangeTag, forKey: key(.recordChangeTag))
            try c.encodeIfPresent(fields, forKey: key(.fields))
            try c.encodeIfPresent(pluginFields, forKey: key(.pluginFields))
            try c.encodeIfPresent(created, forKey: key(.created))
            try c.encodeIfPresent(modified, forKey: key(.modified))
            try c.encodeIfPresent(deleted, forKey: key(.deleted))
            try c.encodeIfPresent(zoneID, forKey: key(.zoneID))
            try c.encodeIfPresent(parent, forKey: key(.parent))
            try c.encodeIfPresent(share, forKey: key(.share))
            try c.encodeIfPresent(forRecord, forKey: key(.forRecord))
            try c.encodeIfPresent(shortGUID, forKey: key(.shortGUID))
            try c.encodeIfPresent(createShortGUID, forKey: key(.createShortGUID))
            try c.encodeIfPresent(publicPermission, forKey: key(.publicPermission))
            try c.encodeIfPresent(participants, forKey: key(.participants))
            try c.encodeIfPresent(owner, forKey: key(.owner))
            try c.encodeIfPresent(currentUserParticipant, forKey: key(.currentUserParticipant))
            try c.encodeIfPresent(serverErrorCode, forKey: key(.serverErrorCode))
            try c.encodeIfPresent(reason, forKey: key(.reason))
            try c.encodeIfPresent(retryAfter, forKey: key(.retryAfter))
            for (name, value) in other { try c.encode(value, forKey: AnyKey(name)) }
        }
    }

    /// `records/modify`: operations on records of one zone.
    public struct ModifyRequest: Codable, Sendable {
        public struct Operation: Codable, Sendable {
            /// create, update, forceUpdate, replace, forceReplace, delete, forceDelete.
            public var operationType: String?
            public var record: Record?

            public init(operationType: String, record: Record) {
                self.operationType = operationType
                self.record = record
            }
        }

        public var operations: [Operation]
        public var zoneID: ZoneID?
        public var atomic: Bool?

        public init(operations: [Operation], zoneID: ZoneID?, atomic: Bool? = nil) {
            self.operations = operations
            self.zoneID = zoneID
            self.atomic = atomic
        }
    }

    /// The answer of `records/modify` and `records/lookup`: each record, or its error.
    public struct Records: Codable, Sendable {
        public var records: [Record]

        public init(records: [Record]) { self.records = records }
    }

    /// An error answer: the whole request failed.
    public struct Failure: Codable, Sendable {
        public var uuid: String?
        public var serverErrorCode: String
        public var reason: String?
        public var retryAfter: Double?
        public var redirectURL: String?

        public init(
            uuid: String?, serverErrorCode: String, reason: String?, retryAfter: Double? = nil,
            redirectURL: String? = nil
        ) {
            self.uuid = uuid
            self.serverErrorCode = serverErrorCode
            self.reason = reason
            self.retryAfter = retryAfter
            self.redirectURL = redirectURL
        }
    }

    /// What a client reads of each record in an answer to `records/modify` or
    /// `records/lookup`: the record's name, type and change tag, or its operation's error.
    /// (The rest of each record is there too, and not read.)
    public struct Outcome: Codable, Sendable, Equatable {
        public var recordName: String?
        public var recordType: String?
        public var recordChangeTag: String?
        public var deleted: Bool?
        public var shortGUID: String?
        public var serverErrorCode: String?
        public var reason: String?
        public var retryAfter: Double?

        public init(recordName: String?, serverErrorCode: String? = nil, reason: String? = nil) {
            self.recordName = recordName
            self.serverErrorCode = serverErrorCode
            self.reason = reason
        }
    }

    public struct Outcomes: Codable, Sendable {
        public var records: [Outcome]

        public init(records: [Outcome]) { self.records = records }

        /// An answer without `records` mentions none (each operation then has no answer).
        public init(from decoder: Decoder) throws {
            records =
                try decoder.container(keyedBy: AnyKey.self).decodeIfPresent([Outcome].self, forKey: AnyKey("records"))
                ?? []
        }
    }

    /// `records/lookup`: records of a zone by name.
    public struct LookupRequest: Codable, Sendable {
        public var records: [RecordLink]?
        public var zoneID: ZoneID?

        public init(records: [RecordLink]?, zoneID: ZoneID?) {
            self.records = records
            self.zoneID = zoneID
        }
    }

    /// `assets/upload`: where to send the bytes of each asset a record's field will hold.
    public struct AssetUploadRequest: Codable, Sendable {
        public struct Token: Codable, Sendable {
            public var recordName: String?
            public var recordType: String?
            public var fieldName: String?

            public init(recordName: String, recordType: String?, fieldName: String) {
                self.recordName = recordName
                self.recordType = recordType
                self.fieldName = fieldName
            }
        }

        public var zoneID: ZoneID?
        public var tokens: [Token]?

        public init(zoneID: ZoneID?, tokens: [Token]?) {
            self.zoneID = zoneID
            self.tokens = tokens
        }
    }

    public struct AssetUploadPlaces: Codable, Sendable {
        public struct Place: Codable, Sendable {
            public var recordName: String?
            public var fieldName: String?
            public var url: String?

            public init(recordName: String?, fieldName: String?, url: String?) {
                self.recordName = recordName
                self.fieldName = fieldName
                self.url = url
            }
        }

        public var tokens: [Place]

        public init(tokens: [Place]) { self.tokens = tokens }
    }

    /// The answer to an asset's bytes sent to its upload URL: what the record's field then
    /// holds (the receipt names the upload).
    public struct UploadedAsset: Codable, Sendable {
        public struct File: Codable, Sendable {
            public var fileChecksum: String?
            public var size: Int?
            public var receipt: String?
            public var referenceChecksum: String?
            public var wrappingKey: String?

            public init(
                fileChecksum: String?, size: Int?, receipt: String?, referenceChecksum: String?, wrappingKey: String?
            ) {
                self.fileChecksum = fileChecksum
                self.size = size
                self.receipt = receipt
                self.referenceChecksum = referenceChecksum
                self.wrappingKey = wrappingKey
            }
        }

        public var singleFile: File?

        public init(singleFile: File?) { self.singleFile = singleFile }
    }

    /// A key of a JSON object that a model does not name in advance.
    typealias AnyKey = JSONObjectKey
}

extension CloudKitWire.ZoneID {
    /// The zone a store's zone is in CloudKit: its owner only when it is not the default.
    public init(_ zone: ZoneID) {
        self.init(
            zoneName: zone.zoneName,
            ownerRecordName: zone.ownerRecordName == ZoneID.defaultOwnerName ? nil : zone.ownerRecordName)
    }
}

extension CloudKitClient {
    /// Who the requests come from (`users/current`): the user's record name, as CloudKit
    /// names the owner of the user's zones.
    public func currentUser() async throws -> String? {
        try CloudKitWire.decode(
            CloudKitWire.User.self, from: try await send("users/current"), operation: "users/current"
        )
        .userRecordName
    }
}
