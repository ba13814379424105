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

    public init(id: RecordID, recordType: String, fields: RecordFields = RecordFields(), changeTag: String? = nil,
                created: RecordStamp? = nil, modified: RecordStamp? = nil, isDeleted: Bool = false) {
        self.id = id
        self.recordType = recordType
        self.fields = fields
        self.changeTag = changeTag
        self.created = created
        self.modified = modified
        self.isDeleted = isDeleted
    }

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
