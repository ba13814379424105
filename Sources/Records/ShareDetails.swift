/// A share as CloudKit describes it beyond its fields: who may see the shared records, and how.
///
/// Read from ``Record/shareDetails``, the compact JSON object ckport keeps as CloudKit gave it.
/// The keys CloudKit Web Services documents for a share record are read into properties here;
/// every other key stays in the JSON, untouched, so that a backup keeps what a later CloudKit
/// adds.
public struct ShareDetails: Sendable, Equatable {
    /// One person a share names: its owner, someone invited, or (for a public share) anyone
    /// who opened its URL.
    public struct Participant: Sendable, Equatable {
        public var participantID: String?
        public var userRecordName: String?
        public var givenName: String?
        public var familyName: String?
        public var emailAddress: String?
        public var phoneNumber: String?
        /// `OWNER`, `USER` (CloudKit JS: `PRIVATE_USER`), `ADMINISTRATOR`, `PUBLIC_USER` or `UNKNOWN`.
        public var type: String?
        /// `INVITED`, `ACCEPTED`, `REMOVED`, `UNSUBSCRIBED` or `UNKNOWN` (CloudKit JS says
        /// `PENDING` for invited).
        public var acceptanceStatus: String?
        /// `UNKNOWN`, `NONE`, `READ_ONLY` or `READ_WRITE`.
        public var permission: String?

        public init(
            participantID: String? = nil, userRecordName: String? = nil, givenName: String? = nil,
            familyName: String? = nil, emailAddress: String? = nil, phoneNumber: String? = nil,
            type: String? = nil, acceptanceStatus: String? = nil, permission: String? = nil
        ) {
            self.participantID = participantID
            self.userRecordName = userRecordName
            self.givenName = givenName
            self.familyName = familyName
            self.emailAddress = emailAddress
            self.phoneNumber = phoneNumber
            self.type = type
            self.acceptanceStatus = acceptanceStatus
            self.permission = permission
        }

        /// How a person reads in a table: their name, else their email address or phone
        /// number, else their user record name.
        public var displayName: String {
            let name = [givenName, familyName].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: " ")
            if !name.isEmpty { return name }
            return emailAddress ?? phoneNumber ?? userRecordName ?? participantID ?? "(unknown)"
        }

        /// The same person, whichever of their identities two descriptions carry.
        public func isSamePerson(as other: Participant) -> Bool {
            if let a = participantID, let b = other.participantID { return a == b }
            if let a = userRecordName, let b = other.userRecordName { return a == b }
            if let a = emailAddress, let b = other.emailAddress { return a.lowercased() == b.lowercased() }
            if let a = phoneNumber, let b = other.phoneNumber { return a == b }
            return false
        }

        init(_ object: JSONObject) {
            participantID = object["participantId"]?.stringValue
            type = object["type"]?.stringValue
            acceptanceStatus = object["acceptanceStatus"]?.stringValue
            permission = object["permission"]?.stringValue
            guard let identity = object["userIdentity"]?.objectValue else { return }
            userRecordName = identity["userRecordName"]?.stringValue
            if let names = identity["nameComponents"]?.objectValue {
                givenName = names["givenName"]?.stringValue
                familyName = names["familyName"]?.stringValue
            }
            if let lookup = identity["lookupInfo"]?.objectValue {
                emailAddress = lookup["emailAddress"]?.stringValue
                phoneNumber = lookup["phoneNumber"]?.stringValue
                if userRecordName == nil { userRecordName = lookup["userRecordName"]?.stringValue }
            }
        }

        /// The participant as CloudKit Web Services writes one.
        public var json: JSONValue {
            var identity = JSONObject()
            if let userRecordName {
                identity.members.append(.init(key: "userRecordName", value: .string(userRecordName)))
            }
            var names = JSONObject()
            if let givenName { names.members.append(.init(key: "givenName", value: .string(givenName))) }
            if let familyName { names.members.append(.init(key: "familyName", value: .string(familyName))) }
            if !names.members.isEmpty { identity.members.append(.init(key: "nameComponents", value: .object(names))) }
            var lookup = JSONObject()
            if let emailAddress { lookup.members.append(.init(key: "emailAddress", value: .string(emailAddress))) }
            if let phoneNumber { lookup.members.append(.init(key: "phoneNumber", value: .string(phoneNumber))) }
            if !lookup.members.isEmpty { identity.members.append(.init(key: "lookupInfo", value: .object(lookup))) }
            var object = JSONObject()
            if let participantID { object.members.append(.init(key: "participantId", value: .string(participantID))) }
            object.members.append(.init(key: "userIdentity", value: .object(identity)))
            if let type { object.members.append(.init(key: "type", value: .string(type))) }
            if let acceptanceStatus {
                object.members.append(.init(key: "acceptanceStatus", value: .string(acceptanceStatus)))
            }
            if let permission { object.members.append(.init(key: "permission", value: .string(permission))) }
            return .object(object)
        }
    }

    /// The JSON object as kept.
    public var object: JSONObject

    /// What CloudKit's answers carry to protect a share that is no use outside CloudKit and
    /// must not sit in plain exports: a participant's out-of-network private key, the sharing
    /// keys in a root's stable URL, the share's PCS blobs. ckport does not keep them; CloudKit
    /// never takes them back (a share is created from its root, permission and participants).
    public static let keyMaterial: Set<String> = [
        "outOfNetworkPrivateKey", "protectionInfo", "invitedPCS", "selfAddedPCS", "chainPrivateKey",
        "chainProtectionInfo",
        "chainParentKey", "protectedFullToken", "encryptedPublicSharingKey",
    ]

    /// `value` without ``keyMaterial``, however deep (to the JSON reader's depth).
    public static func withoutKeyMaterial(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let object):
            return .object(
                JSONObject(
                    object.members.filter { !keyMaterial.contains($0.key) }
                        .map { JSONObject.Member(key: $0.key, value: withoutKeyMaterial($0.value)) }))
        case .array(let items):
            return .array(items.map(withoutKeyMaterial))
        default:
            return value
        }
    }

    /// Reads a share's details; nil when the text is not a JSON object.
    public init?(json text: String) {
        guard let value = try? JSONParser.parse(text), case .object(let object) = value else { return nil }
        self.object = object
    }

    public init(_ object: JSONObject) {
        self.object = object
    }

    /// Who besides the participants may open the share by its URL: `NONE`, `READ_ONLY` or
    /// `READ_WRITE`.
    public var publicPermission: String? { object["publicPermission"]?.stringValue }
    /// The share's short identifier, the last part of its URL.
    public var shortGUID: String? {
        // A share names it as text; a share's metadata as {"value": …}.
        if let text = object["shortGUID"]?.stringValue { return text }
        return object["shortGUID"]?.objectValue?["value"]?.stringValue
    }
    /// The URL people open to join the share: the one CloudKit gave, else the one its short
    /// GUID makes (`https://www.icloud.com/share/<shortGUID>`, on the host CloudKit names for
    /// it where it names one).
    public var url: String? {
        for key in ["url", "shareURL", "URL"] {
            if let text = object[key]?.stringValue { return text }
        }
        guard let shortGUID else { return nil }
        let host =
            object["displayedHostname"]?.stringValue ?? object["stableUrl"]?.objectValue?["displayedHostname"]?
            .stringValue ?? "www.icloud.com"
        return "https://\(host)/share/\(shortGUID)"
    }
    public var participants: [Participant] {
        guard case .array(let items)? = object["participants"] else { return [] }
        return items.compactMap { $0.objectValue.map(Participant.init) }
    }
    public var owner: Participant? { object["owner"]?.objectValue.map(Participant.init) }
    public var currentUserParticipant: Participant? {
        object["currentUserParticipant"]?.objectValue.map(Participant.init)
    }

    /// The compact JSON text ckport keeps.
    public var text: String {
        var out = JSONWriter(capacity: 256)
        out.value(.object(object))
        return out.text
    }
}
