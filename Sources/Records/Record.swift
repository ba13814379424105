/// Who changed a record, and when: CloudKit's `created` and `modified` system fields.
public struct RecordStamp: Hashable, Sendable {
    /// Milliseconds since 1970.
    public var timestamp: Int64
    public var userRecordName: String?
    public var deviceID: String?

    public init(timestamp: Int64, userRecordName: String? = nil, deviceID: String? = nil) {
        self.timestamp = timestamp
        self.userRecordName = userRecordName
        self.deviceID = deviceID
    }
}

/// A CloudKit record: identity, type, system fields and typed field values.
public struct Record: Hashable, Sendable {
    public var id: RecordID
    public var recordType: String
    /// CloudKit's `recordChangeTag` (the `___etag` system field).
    public var changeTag: String?
    public var created: RecordStamp?
    public var modified: RecordStamp?
    /// True for a tombstone: a record that was deleted, reported by change queries.
    public var isDeleted: Bool
    public var fields: RecordFields
    /// CloudKit's `parent`: the record name of the record this one belongs to, in the same
    /// zone. A share of the parent's hierarchy carries this record too.
    public var parent: String?
    /// CloudKit's `share`: the record name of the share (a `cloudkit.share` record in the same
    /// zone) whose root this record is.
    public var share: String?
    /// What CloudKit says of a share beyond its fields, as the compact JSON object it came in:
    /// for a `cloudkit.share` record its `publicPermission`, `participants`, `owner`,
    /// `currentUserParticipant`, `shortGUID`, URL and any other key CloudKit gave; for a
    /// share's root record its `shortGUID`. ``ShareDetails`` reads it.
    public var shareDetails: String?

    public init(
        id: RecordID, recordType: String, fields: RecordFields = RecordFields(), changeTag: String? = nil,
        created: RecordStamp? = nil, modified: RecordStamp? = nil, isDeleted: Bool = false,
        parent: String? = nil, share: String? = nil, shareDetails: String? = nil
    ) {
        self.id = id
        self.recordType = recordType
        self.fields = fields
        self.changeTag = changeTag
        self.created = created
        self.modified = modified
        self.isDeleted = isDeleted
        self.parent = parent
        self.share = share
        self.shareDetails = shareDetails
    }

    /// CloudKit's record type of a share.
    public static let shareType = "cloudkit.share"
    /// The record name of a zone's share (a share of the whole zone rather than of a hierarchy).
    public static let zoneShareName = "cloudkit.zoneshare"

    /// Whether this is a share record (`cloudkit.share`).
    public var isShare: Bool { recordType == Record.shareType }

    public var recordName: String { id.recordName }
    public var zone: ZoneID { id.zone }

    public subscript(field: String) -> FieldValue? {
        get { fields[field] }
        set { fields[field] = newValue }
    }

    /// The record's size as CloudKit counts it toward the 1 MB limit (assets excluded).
    public var encodedSize: Int {
        fields.entries.reduce(recordName.utf8.count + recordType.utf8.count) { total, entry in
            total + entry.name.utf8.count + entry.value.encodedSize
        }
    }

    /// Field names in the order ckport writes them: byte order of their UTF-8.
    public var sortedFieldNames: [String] { fields.names }
}
