/// Reads the common shape of a canonical (CloudKit Web Services) record straight from its
/// bytes, without building a JSON tree first — the import hot path.
///
/// It covers well-formed records whose fields are schema-known STRING, INT64, DOUBLE,
/// TIMESTAMP, BYTES and REFERENCE values in their usual JSON forms. For anything else — an
/// unknown key, a list, an asset, a value in one of the lenient forms, any error — it gives
/// up and returns nil, and the caller reads the record the general way, which also owns every
/// error message. Both ways give the same record for the same bytes.
public struct CanonicalRecordScanner: Sendable {
    /// A type's fields sorted by name. Records list their fields in the same order, so each
    /// lookup starts where the last one matched and usually succeeds at once.
    struct FieldTable: Sendable {
        let names: [String]
        let types: [FieldType]
        /// The `type` each field's values usually carry (`STRING`, `ENCRYPTED_STRING`, …).
        let typeNames: [String]
        let hasFieldsField: Bool

        init(names: [String], types: [FieldType]) {
            self.names = names
            self.types = types
            typeNames = types.map(\.webServicesName)
            hasFieldsField = names.contains("fields")
        }

        /// The index of a field, searching from where the last lookup matched.
        func lookup(_ name: String, from hint: inout Int) -> Int? {
            let count = names.count
            guard count > 0 else { return nil }
            for step in 0..<count {
                let index = (hint + step) % count
                if names[index] == name {
                    hint = index + 1
                    return index
                }
            }
            return nil
        }
    }

    let tables: [String: FieldTable]
    let defaultRecordType: String?
    let defaultZone: ZoneID

    public init(fieldTypes: [String: [String: FieldType]], defaultRecordType: String?, defaultZone: ZoneID) {
        tables = fieldTypes.mapValues { fields in
            let sorted = fields.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            return FieldTable(names: sorted.map(\.key), types: sorted.map(\.value))
        }
        self.defaultRecordType = defaultRecordType
        self.defaultZone = defaultZone
    }

    public func scan(_ bytes: UnsafeRawBufferPointer) -> Record? {
        var parser = JSONParser(bytes)
        return try? parser.scanCanonicalRecord(self)
    }
}

private struct GiveUp: Error {}

extension JSONParser {
    @inline(__always) private var current: UInt8? { i < bytes.count ? bytes[i] : nil }

    @inline(__always) private mutating func expect(_ byte: UInt8) throws {
        skipWhitespace()
        guard i < bytes.count, bytes[i] == byte else { throw GiveUp() }
        i += 1
    }

    /// Iterates an object's members: `body` is called with each key, positioned at its value.
    private mutating func members(_ body: (inout JSONParser, String) throws -> Void) throws {
        try expect(UInt8(ascii: "{"))
        skipWhitespace()
        if current == UInt8(ascii: "}") { i += 1; return }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw GiveUp() }
            let key = try parseString()
            try expect(UInt8(ascii: ":"))
            skipWhitespace()
            try body(&self, key)
            skipWhitespace()
            guard let b = current else { throw GiveUp() }
            i += 1
            if b == UInt8(ascii: ",") { continue }
            if b == UInt8(ascii: "}") { return }
            throw GiveUp()
        }
    }

    private mutating func string() throws -> String {
        guard current == UInt8(ascii: "\"") else { throw GiveUp() }
        return try parseString()
    }

    /// A JSON integer (no fraction, no exponent) that fits an Int64.
    private mutating func integer() throws -> Int64 {
        var negative = false
        if current == UInt8(ascii: "-") { negative = true; i += 1 }
        guard let first = current, first >= 0x30 && first <= 0x39 else { throw GiveUp() }
        if first == 0x30, i + 1 < bytes.count, bytes[i + 1] >= 0x30 && bytes[i + 1] <= 0x39 { throw GiveUp() }
        var magnitude: UInt64 = 0
        while let b = current, b >= 0x30 && b <= 0x39 {
            let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(b - 0x30))
            guard !o1 && !o2 else { throw GiveUp() }
            magnitude = sum
            i += 1
        }
        if let b = current, b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E") { throw GiveUp() }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { throw GiveUp() }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { throw GiveUp() }
        return Int64(magnitude)
    }

    private mutating func isNull() -> Bool {
        guard i + 4 <= bytes.count, bytes[i] == UInt8(ascii: "n"), bytes[i + 1] == UInt8(ascii: "u"),
              bytes[i + 2] == UInt8(ascii: "l"), bytes[i + 3] == UInt8(ascii: "l") else { return false }
        i += 4
        return true
    }

    private mutating func stamp() throws -> RecordStamp {
        var timestamp: Int64?
        var user: String?
        var device: String?
        try members { p, key in
            switch key {
            case "timestamp" where timestamp == nil: timestamp = try p.integer()
            case "userRecordName" where user == nil: user = try p.string()
            case "deviceID" where device == nil: device = try p.string()
            default: throw GiveUp()
            }
        }
        guard let timestamp else { throw GiveUp() }
        return RecordStamp(timestamp: timestamp, userRecordName: user, deviceID: device)
    }

    private mutating func value(as type: FieldType) throws -> FieldValue {
        switch type.primitive {
        case .string: return .string(try string())
        case .int64: return .int64(try integer())
        case .timestamp: return .timestamp(try integer())
        case .double:
            guard let b = current, b == UInt8(ascii: "-") || (b >= 0x30 && b <= 0x39) else { throw GiveUp() }
            guard let value = Double(try parseNumber()), value.isFinite else { throw GiveUp() }
            return .double(value)
        case .bytes:
            guard let decoded = Base64.decode(try string()) else { throw GiveUp() }
            return .bytes(decoded)
        case .reference:
            var name: String?
            var action = ReferenceAction.none
            var sawAction = false
            try members { p, key in
                switch key {
                case "recordName" where name == nil: name = try p.string()
                case "action" where !sawAction:
                    sawAction = true
                    guard let parsed = ReferenceAction(rawValue: try p.string()) else { throw GiveUp() }
                    action = parsed
                default: throw GiveUp()
                }
            }
            guard let name, Names.referenceTargetProblem(name) == nil else { throw GiveUp() }
            return .reference(Reference(recordName: name, action: action))
        case .asset, .location, .number:
            throw GiveUp()
        }
    }

    private mutating func scanFields(of type: String, _ scanner: CanonicalRecordScanner, into fields: inout RecordFields) throws {
        // A type with a field named "fields" makes the general reader look closer; let it.
        guard let table = scanner.tables[type], !table.hasFieldsField else { throw GiveUp() }
        var hint = 0
        try members { p, name in
            guard let field = table.lookup(name, from: &hint), !table.types[field].isList else { throw GiveUp() }
            let schemaType = table.types[field]
            var value: FieldValue?
            var sawValue = false, sawType = false
            try p.members { q, key in
                switch key {
                case "value" where !sawValue:
                    sawValue = true
                    if !q.isNull() { value = try q.value(as: schemaType) }
                case "type" where !sawType:
                    sawType = true
                    let given = try q.string()
                    if given != table.typeNames[field] {
                        guard let parsed = FieldType.parseWebServicesName(given), schemaType.accepts(parsed) else { throw GiveUp() }
                    }
                default: throw GiveUp()
                }
            }
            if let value, !fields.insertNew(name, value) { throw GiveUp() }
        }
    }

    mutating func scanCanonicalRecord(_ scanner: CanonicalRecordScanner) throws -> Record {
        var recordName: String?
        var recordType: String?
        var zone = scanner.defaultZone
        var sawScope = false, sawZone = false, sawTag = false, sawCreated = false, sawModified = false, sawDeleted = false
        var changeTag: String?
        var created: RecordStamp?
        var modified: RecordStamp?
        var deleted = false
        var fields = RecordFields(minimumCapacity: 16)
        var sawFields = false
        // Fields may come before recordType; their bytes wait until the type is known.
        var fieldsStart: Int?
        skipWhitespace()
        try members { p, key in
            switch key {
            case "recordName" where recordName == nil: recordName = try p.string()
            case "recordType" where recordType == nil: recordType = try p.string()
            case "scope" where !sawScope:
                sawScope = true
                guard let scope = DatabaseScope(text: try p.string()) else { throw GiveUp() }
                zone.scope = scope
            case "zoneID" where !sawZone:
                sawZone = true
                var sawName = false, sawOwner = false
                try p.members { q, zoneKey in
                    switch zoneKey {
                    case "zoneName" where !sawName:
                        sawName = true
                        zone.zoneName = try q.string()
                        if zone.zoneName.isEmpty { throw GiveUp() }
                    case "ownerRecordName" where !sawOwner:
                        sawOwner = true
                        zone.ownerRecordName = try q.string()
                        if zone.ownerRecordName.isEmpty { throw GiveUp() }
                    default: throw GiveUp()
                    }
                }
            case "recordChangeTag" where !sawTag:
                sawTag = true
                changeTag = try p.string()
            case "created" where !sawCreated:
                sawCreated = true
                created = try p.stamp()
            case "modified" where !sawModified:
                sawModified = true
                modified = try p.stamp()
            case "deleted" where !sawDeleted:
                sawDeleted = true
                if p.bytes.count - p.i >= 4 && p.bytes[p.i] == UInt8(ascii: "t") { deleted = true; p.i += 4 }
                else if p.bytes.count - p.i >= 5 && p.bytes[p.i] == UInt8(ascii: "f") { p.i += 5 }
                else { throw GiveUp() }
            case "fields" where !sawFields:
                sawFields = true
                if let type = recordType {
                    try p.scanFields(of: type, scanner, into: &fields)
                } else {
                    // The type comes later: read the fields once it is known.
                    fieldsStart = p.i
                    _ = try p.parseValue()
                }
            default:
                throw GiveUp()
            }
        }
        skipWhitespace()
        // Without these keys the general reader takes a record for the plain style.
        guard sawFields || sawZone else { throw GiveUp() }
        guard i == bytes.count, let recordName, let type = recordType ?? scanner.defaultRecordType else { throw GiveUp() }
        if let fieldsStart {
            let end = i
            i = fieldsStart
            try scanFields(of: type, scanner, into: &fields)
            i = end
        }
        if deleted { fields = RecordFields() }
        return Record(id: RecordID(recordName: recordName, zone: zone), recordType: type, fields: fields,
                      changeTag: changeTag, created: created, modified: modified, isDeleted: deleted)
    }
}
