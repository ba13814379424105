import Foundation
import Records

/// A record object that cannot be read, with the path inside it where it went wrong.
public struct RecordDecodingError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var path: [JSONPathComponent]
    /// Where the problem is, when known as a byte offset rather than a path.
    public var byteOffset: Int? = nil
    public var field: String?
    public var recordName: String?
    public var recordType: String?
    public var message: Message

    public var description: String { explanation.description }

    public var explanation: Message {
        var parts: [String] = []
        if let recordName { parts.append("record '\(recordName)'") }
        if let field { parts.append("field '\(field)'") } else if !path.isEmpty { parts.append(path.pathString) }
        return parts.isEmpty ? message : "\(parts.joined(separator: ", ")): \(message)"
    }
}

/// Reads and writes records as JSON objects, in CloudKit Web Services' shape (`canonical`)
/// or flat (`plain`).
///
/// Canonical:
/// ```json
/// {"recordName":"task-1","recordType":"Task","scope":"shared",
///  "zoneID":{"zoneName":"Household-1","ownerRecordName":"_a1b2"},
///  "created":{"timestamp":1768208400000,"userRecordName":"_a1b2"},
///  "fields":{"title":{"value":"Take out trash","type":"STRING"}}}
/// ```
/// Plain:
/// ```json
/// {"recordName":"task-1","recordType":"Task","scope":"shared","zoneName":"Household-1",
///  "title":"Take out trash","dueDate":"2026-01-12T09:00:00.000Z"}
/// ```
/// `scope` is ckport's addition (Web Services names the database in the URL instead); a record
/// without it takes the default scope.
///
/// A record's `parent` and `share` are CloudKit's `{"recordName": …}`; a plain record names them
/// `parentRecordName` and `shareRecordName`. A share record (`cloudkit.share`) keeps every other
/// key CloudKit gives it (`publicPermission`, `participants`, `owner`, …) as its share details,
/// and a share's root record its `shortGUID` and stable URL; a plain record carries them as
/// `shareDetails`. Key material CloudKit protects a share with is not kept
/// (``ShareDetails/keyMaterial``).
///
/// Reading is lenient where real exports differ: a field without `type` takes the schema's,
/// INT64 may come as text, TIMESTAMP as ISO-8601 text, and other unknown keys (`pluginFields`,
/// …) are ignored.
public struct JSONRecordCodec: Sendable {
    /// Keys of a plain record that are not fields.
    public static let plainSystemKeys: Set<String> = [
        "recordName", "recordType", "scope", "zoneName", "ownerRecordName", "recordChangeTag",
        "created", "createdBy", "createdDevice", "modified", "modifiedBy", "modifiedDevice", "deleted",
        "parentRecordName", "shareRecordName", "shareDetails",
    ]

    /// What a share's root record says of its share besides the link: its URL's parts.
    public static let rootShareKeys: Set<String> = ["shortGUID", "stableUrl", "displayedHostname"]

    /// Keys of a canonical record that are the record's own, never a share's details.
    public static let canonicalRecordKeys: Set<String> = [
        "recordName", "recordType", "scope", "databaseScope", "zoneID", "recordChangeTag",
        "created", "modified", "deleted", "fields", "parent", "share", "pluginFields",
    ]

    public var schema: Schema
    /// The style to read; nil detects it per record.
    public var readStyle: ValueStyle?
    /// Type for records that name none.
    public var defaultRecordType: String?
    /// Zone (and scope) for records that name none.
    public var defaultZone: ZoneID
    /// Time zone for timestamps written without an offset.
    public var timeZone: TimeZone?

    /// Declared types of every user field, by record type and field name.
    private let fieldTypes: [String: [String: FieldType]]
    private let scanner: CanonicalRecordScanner

    public init(
        schema: Schema, readStyle: ValueStyle? = nil, defaultRecordType: String? = nil,
        defaultZone: ZoneID = .defaultZone, timeZone: TimeZone? = nil
    ) {
        self.schema = schema
        var types: [String: [String: FieldType]] = [:]
        for type in schema.recordTypes {
            types[type.name] = Dictionary(type.userFields.map { ($0.name, $0.type) }, uniquingKeysWith: { a, _ in a })
        }
        fieldTypes = types
        scanner = CanonicalRecordScanner(
            fieldTypes: types, defaultRecordType: defaultRecordType, defaultZone: defaultZone)
        self.readStyle = readStyle
        self.defaultRecordType = defaultRecordType
        self.defaultZone = defaultZone
        self.timeZone = timeZone
    }

    /// Fields of `types` whose names a plain record would confuse with its system keys.
    public static func plainCollisions(in schema: Schema, types: [String]? = nil) -> [String] {
        schema.recordTypes
            .filter { types == nil || types!.contains($0.name) }
            .flatMap { type in
                type.userFields.filter { plainSystemKeys.contains($0.name) }.map { "\(type.name).\($0.name)" }
            }
    }

    // MARK: Reading

    /// Reads a record from its JSON bytes: the common canonical shape directly, anything else
    /// (and every error) through the general reader below.
    public func decode(bytes: UnsafeRawBufferPointer) throws(RecordDecodingError) -> (Record, ValueStyle) {
        let (record, style, _) = try decodeChecked(bytes: bytes)
        return (record, style)
    }

    /// As ``decode(bytes:)``, with what was found of the record's fields while reading them
    /// against the schema's types, when they were (``CheckedFields``).
    public func decodeChecked(bytes: UnsafeRawBufferPointer) throws(RecordDecodingError) -> (
        Record, ValueStyle, CheckedFields?
    ) {
        if readStyle != .plain, let (record, checked) = scanner.scanChecked(bytes) {
            return (record, .canonical, checked)
        }
        let json: JSONValue
        do {
            json = try JSONParser.parse(bytes)
        } catch {
            throw RecordDecodingError(path: [], byteOffset: error.offset, message: "not valid JSON: \(error.message)")
        }
        return (try decode(json), style(of: json), nil)
    }

    /// Reads a record from a parsed JSON value. `typeHints` give the types of fields the
    /// schema lacks where the value alone cannot tell them (a property list's `<date>`,
    /// carried here as text); the schema's types always come first.
    public func decode(_ json: JSONValue, typeHints: [String: FieldType] = [:]) throws(RecordDecodingError) -> Record {
        guard case .object(let object) = json else {
            throw RecordDecodingError(path: [], message: "expected a record object, found \(json.summary)")
        }
        let recordName = object["recordName"]?.stringValue
        let recordType = object["recordType"]?.stringValue ?? defaultRecordType
        func fail(_ path: [JSONPathComponent], _ message: Message, field: String? = nil) -> RecordDecodingError {
            RecordDecodingError(
                path: path, field: field, recordName: recordName, recordType: recordType, message: message)
        }
        guard let recordName else {
            throw fail(
                object["recordName"] == nil ? [] : [.key("recordName")],
                object["recordName"] == nil
                    ? "a record needs \"recordName\""
                    : "\"recordName\" must be text, found \(object["recordName"]!.summary)")
        }
        guard let recordType else {
            throw fail(
                object["recordType"] == nil ? [] : [.key("recordType")],
                object["recordType"] == nil
                    ? "a record needs \"recordType\" (\(Wording.defaultRecordType))"
                    : "\"recordType\" must be text")
        }
        let style = readStyle ?? detectStyle(object)
        var zone = defaultZone
        if let scopeValue = object["scope"] ?? object["databaseScope"] {
            guard case .string(let text) = scopeValue, let scope = DatabaseScope(text: text) else {
                throw fail([.key("scope")], "scope is private, shared or public, found \(scopeValue.summary)")
            }
            zone.scope = scope
        }
        var record = Record(id: RecordID(recordName: recordName, zone: zone), recordType: recordType)
        if case .bool(true)? = object["deleted"] { record.isDeleted = true }
        if style == .canonical {
            try decodeCanonicalSystem(object, into: &record, fail: fail)
            if !record.isDeleted { try decodeCanonicalFields(object, into: &record, fail: fail) }
        } else {
            try decodePlain(object, into: &record, typeHints: typeHints, fail: fail)
        }
        return record
    }

    private func detectStyle(_ object: JSONObject) -> ValueStyle {
        if case .object(let fields)? = object["fields"] {
            let typeHasFieldsField =
                fieldTypes[object["recordType"]?.stringValue ?? defaultRecordType ?? ""]?["fields"] != nil
            if !typeHasFieldsField
                && fields.members.allSatisfy({
                    if case .object(let o) = $0.value {
                        return o["value"] != nil || o["type"] != nil
                    } else {
                        return false
                    }
                })
            {
                return .canonical
            }
        }
        if object["zoneID"] != nil { return .canonical }
        return object["fields"] == nil ? .plain : .canonical
    }

    private func decodeCanonicalSystem(
        _ object: JSONObject, into record: inout Record,
        fail: ([JSONPathComponent], Message, String?) -> RecordDecodingError
    ) throws(RecordDecodingError) {
        if let zoneValue = object["zoneID"] {
            guard case .object(let zoneObject) = zoneValue else {
                throw fail([.key("zoneID")], "zoneID must be an object {zoneName, ownerRecordName}", nil)
            }
            if let name = zoneObject["zoneName"] {
                guard case .string(let text) = name, !text.isEmpty else {
                    throw fail([.key("zoneID"), .key("zoneName")], "zoneName must be text", nil)
                }
                record.id.zone.zoneName = text
            }
            if let owner = zoneObject["ownerRecordName"] {
                guard case .string(let text) = owner, !text.isEmpty else {
                    throw fail([.key("zoneID"), .key("ownerRecordName")], "ownerRecordName must be text", nil)
                }
                record.id.zone.ownerRecordName = text
            }
        }
        if let tag = object["recordChangeTag"] {
            guard case .string(let text) = tag else {
                throw fail([.key("recordChangeTag")], "recordChangeTag must be text", nil)
            }
            record.changeTag = text
        }
        record.created = try stamp(object, "created", fail: fail)
        record.modified = try stamp(object, "modified", fail: fail)
        if record.isDeleted { return }
        record.parent = try link(object, "parent", of: record, fail: fail)
        record.share = try link(object, "share", of: record, fail: fail)
        var details = JSONObject()
        for member in object.members where !JSONRecordCodec.canonicalRecordKeys.contains(member.key) {
            // A share keeps all CloudKit says of it; its root, what makes the share's URL.
            if record.isShare || JSONRecordCodec.rootShareKeys.contains(member.key) { details.members.append(member) }
        }
        if case .object(let kept) = ShareDetails.withoutKeyMaterial(.object(details)), !kept.members.isEmpty {
            record.shareDetails = ShareDetails(kept).text
        }
    }

    /// A record's `parent` or `share`: `{"recordName": …}`, perhaps with the record's own
    /// `zoneID` and (for a parent) the action NONE, as CloudKit writes them.
    private func link(
        _ object: JSONObject, _ key: String, of record: Record,
        fail: ([JSONPathComponent], Message, String?) -> RecordDecodingError
    ) throws(RecordDecodingError) -> String? {
        guard let value = object[key], value != .null else { return nil }
        guard case .object(let link) = value else {
            throw fail([.key(key)], "\(key) must be an object {\"recordName\": …}, found \(value.summary)", nil)
        }
        guard case .string(let name)? = link["recordName"] else {
            throw fail(
                [.key(key), .key("recordName")],
                "\(key) needs the record name of the \(key == "share" ? "share" : "parent record") as text", nil)
        }
        if let problem = Names.referenceTargetProblem(name) {
            throw fail([.key(key), .key("recordName")], "\(key) names '\(name)', which \(problem)", nil)
        }
        if case .object(let zone)? = link["zoneID"], case .string(let zoneName)? = zone["zoneName"],
            zoneName != record.zone.zoneName
        {
            throw fail(
                [.key(key), .key("zoneID")],
                "\(key) is in zone '\(zoneName)', but CloudKit keeps a record's \(key) in the record's own zone ('\(record.zone.zoneName)')",
                nil)
        }
        return name
    }

    private func stamp(
        _ object: JSONObject, _ key: String, fail: ([JSONPathComponent], Message, String?) -> RecordDecodingError
    ) throws(RecordDecodingError) -> RecordStamp? {
        guard let value = object[key], value != .null else { return nil }
        guard case .object(let stampObject) = value else {
            throw fail([.key(key)], "\(key) must be an object {timestamp, userRecordName, deviceID}", nil)
        }
        guard let timestampValue = stampObject["timestamp"] else {
            throw fail([.key(key)], "\(key) needs a timestamp", nil)
        }
        let timestamp: Int64
        do {
            guard case .timestamp(let t) = try FieldValueJSON.read(timestampValue, as: .timestamp, timeZone: timeZone)
            else { return nil }
            timestamp = t
        } catch {
            throw fail([.key(key), .key("timestamp")], error.message, nil)
        }
        var result = RecordStamp(timestamp: timestamp)
        for (name, path) in [("userRecordName", \RecordStamp.userRecordName), ("deviceID", \RecordStamp.deviceID)] {
            guard let v = stampObject[name], v != .null else { continue }
            guard case .string(let text) = v else { throw fail([.key(key), .key(name)], "\(name) must be text", nil) }
            result[keyPath: path] = text
        }
        return result
    }

    private func decodeCanonicalFields(
        _ object: JSONObject, into record: inout Record,
        fail: ([JSONPathComponent], Message, String?) -> RecordDecodingError
    ) throws(RecordDecodingError) {
        guard let fieldsValue = object["fields"], fieldsValue != .null else { return }
        guard case .object(let fields) = fieldsValue else {
            throw fail([.key("fields")], "fields must be an object of {value, type}", nil)
        }
        let declaredTypes = fieldTypes[record.recordType]
        var values = RecordFields(minimumCapacity: fields.members.count)
        for member in fields.members {
            let name = member.key
            let path: [JSONPathComponent] = [.key("fields"), .key(name)]
            guard case .object(let entry) = member.value else {
                throw fail(path, "a field is {\"value\": …, \"type\": …}, found \(member.value.summary)", name)
            }
            guard let json = entry["value"], json != .null else { continue }
            var declared: FieldType? = nil
            // A type name ckport does not know (UNKNOWN_LIST, or one CloudKit adds later).
            var unknownName: String? = nil
            if let typeValue = entry["type"] {
                guard case .string(let typeName) = typeValue else {
                    throw fail(
                        path + [.key("type")], "a field's type is text (STRING, INT64, …), found \(typeValue.summary)",
                        name)
                }
                if let parsed = FieldType.parseWebServicesName(typeName) {
                    declared = parsed
                } else {
                    unknownName = typeName
                }
            }
            let valueType: FieldType
            if let schemaType = declaredTypes?[name] {
                if let declared, !schemaType.accepts(declared) {
                    throw fail(
                        path + [.key("type")],
                        "the schema says \(record.recordType).\(name) is \(schemaType), but the record says \(declared.webServicesName)",
                        name)
                }
                valueType = schemaType.primitive == .number ? (declared ?? schemaType) : schemaType
            } else if let unknownName {
                // Nothing says what the value is: the schema lacks the field, and CloudKit's
                // name for its type is not one ckport knows.
                if unknownName == FieldType.unknownListName {
                    // An empty list of a type nobody knows holds nothing to keep.
                    if case .array(let elements) = json, elements.isEmpty { continue }
                    throw fail(
                        path + [.key("type")],
                        "field '\(name)' is a list whose element type CloudKit no longer knows (UNKNOWN_LIST), and the schema does not declare it; add it to the schema as a LIST",
                        name)
                }
                throw fail(
                    path + [.key("type")],
                    "unknown field type \"\(unknownName)\" for field '\(name)', which the schema does not declare (known: STRING, INT64, DOUBLE, TIMESTAMP, BYTES, REFERENCE, ASSETID, LOCATION, ENCRYPTED_BYTES, …_LIST, UNKNOWN_LIST)",
                    name)
            } else if let declared {
                valueType = declared
            } else if let inferred = FieldValueJSON.inferType(of: json) {
                valueType = inferred
            } else {
                throw fail(path, "field '\(name)' is not in the schema and has no \"type\"", name)
            }
            do {
                values[name] = try FieldValueJSON.read(json, as: valueType, zone: record.zone, timeZone: timeZone)
            } catch {
                // The schema's type is what a value with an unknown type name is read as.
                let named =
                    unknownName.map { " (CloudKit named its type \($0), read as the schema's \(valueType))" } ?? ""
                throw fail(path + [.key("value")] + error.path, error.message + Message(named), name)
            }
        }
        record.fields = values
    }

    private func decodePlain(
        _ object: JSONObject, into record: inout Record, typeHints: [String: FieldType],
        fail: ([JSONPathComponent], Message, String?) -> RecordDecodingError
    ) throws(RecordDecodingError) {
        func text(_ key: String) throws(RecordDecodingError) -> String? {
            guard let value = object[key], value != .null else { return nil }
            guard case .string(let s) = value, !s.isEmpty else {
                throw fail([.key(key)], "\(key) must be text, found \(value.summary)", nil)
            }
            return s
        }
        if let zoneName = try text("zoneName") { record.id.zone.zoneName = zoneName }
        if let owner = try text("ownerRecordName") { record.id.zone.ownerRecordName = owner }
        record.changeTag = try text("recordChangeTag")
        for (key, byKey, deviceKey) in [
            ("created", "createdBy", "createdDevice"), ("modified", "modifiedBy", "modifiedDevice"),
        ] {
            guard let value = object[key], value != .null else { continue }
            let timestamp: Int64
            do {
                guard case .timestamp(let t) = try FieldValueJSON.read(value, as: .timestamp, timeZone: timeZone) else {
                    continue
                }
                timestamp = t
            } catch {
                throw fail([.key(key)], error.message, nil)
            }
            let stamp = RecordStamp(
                timestamp: timestamp, userRecordName: try text(byKey), deviceID: try text(deviceKey))
            if key == "created" { record.created = stamp } else { record.modified = stamp }
        }
        if record.isDeleted { return }
        for (key, path) in [("parentRecordName", \Record.parent), ("shareRecordName", \Record.share)] {
            guard let name = try text(key) else { continue }
            if let problem = Names.referenceTargetProblem(name) {
                throw fail([.key(key)], "\(key) '\(name)' \(problem)", nil)
            }
            record[keyPath: path] = name
        }
        if var value = object["shareDetails"], value != .null {
            // A property list carries them as JSON text.
            if case .string(let text) = value, let parsed = try? JSONParser.parse(text) { value = parsed }
            guard case .object(let details) = value else {
                throw fail(
                    [.key("shareDetails")],
                    "shareDetails must be an object (publicPermission, participants, …), found \(value.summary)", nil)
            }
            if let clash = details.members.first(where: { JSONRecordCodec.canonicalRecordKeys.contains($0.key) }) {
                throw fail(
                    [.key("shareDetails"), .key(clash.key)],
                    "shareDetails holds what a share says beyond its record; '\(clash.key)' belongs to the record itself",
                    nil)
            }
            if case .object(let kept) = ShareDetails.withoutKeyMaterial(.object(details)), !kept.members.isEmpty {
                record.shareDetails = ShareDetails(kept).text
            }
        }
        let declaredTypes = fieldTypes[record.recordType]
        var values = RecordFields(minimumCapacity: object.members.count)
        for member in object.members where !JSONRecordCodec.plainSystemKeys.contains(member.key) {
            let name = member.key
            if member.value == .null { continue }
            let valueType: FieldType
            if let schemaType = declaredTypes?[name] {
                valueType = schemaType
            } else if let hinted = typeHints[name] {
                valueType = hinted
            } else if let inferred = FieldValueJSON.inferType(of: member.value) {
                valueType = inferred
            } else {
                throw fail(
                    [.key(name)],
                    "field '\(name)' is not in the schema, and its type cannot be told from \(member.value.summary)",
                    name)
            }
            do {
                values[name] = try FieldValueJSON.read(
                    member.value, as: valueType, zone: record.zone, timeZone: timeZone)
            } catch {
                throw fail([.key(name)] + error.path, error.message, name)
            }
        }
        record.fields = values
    }

    /// Where a field's value sits in a record object of the given style, as a JSON path.
    public static func path(ofField field: String, style: ValueStyle) -> [JSONPathComponent] {
        style == .canonical ? [.key("fields"), .key(field), .key("value")] : [.key(field)]
    }

    public func style(of json: JSONValue) -> ValueStyle {
        if let readStyle { return readStyle }
        if case .object(let object) = json { return detectStyle(object) }
        return .canonical
    }

    // MARK: Writing

    /// `,"parent":{"recordName":…}` and `,"share":{"recordName":…}`, as CloudKit writes them.
    public static func writeLinks(_ record: Record, to out: inout JSONWriter) {
        if let parent = record.parent {
            out.raw(",\"parent\":{\"recordName\":")
            out.string(parent)
            out.byte(UInt8(ascii: "}"))
        }
        if let share = record.share {
            out.raw(",\"share\":{\"recordName\":")
            out.string(share)
            out.byte(UInt8(ascii: "}"))
        }
    }

    /// The members of the record's share details, as members of the record object.
    public static func spliceShareDetails(_ record: Record, to out: inout JSONWriter) {
        guard let details = record.shareDetails else { return }
        var text = details
        text.withUTF8 { bytes in
            // `{…}`: the members between the braces, after a comma.
            guard bytes.count > 2, bytes.first == UInt8(ascii: "{"), bytes.last == UInt8(ascii: "}") else { return }
            out.byte(UInt8(ascii: ","))
            out.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[1..<(bytes.count - 1)]))
        }
    }

    private func writeStamp(_ stamp: RecordStamp, to out: inout JSONWriter) {
        out.raw("{\"timestamp\":")
        out.int(stamp.timestamp)
        if let user = stamp.userRecordName {
            out.raw(",\"userRecordName\":")
            out.string(user)
        }
        if let device = stamp.deviceID {
            out.raw(",\"deviceID\":")
            out.string(device)
        }
        out.byte(UInt8(ascii: "}"))
    }

    /// Writes a record as a `records/modify` operation carries it: name, type, the change tag
    /// when `withChangeTag` (CloudKit checks it for update, replace and delete), and the fields;
    /// the zone goes in the request and the server keeps its own system fields.
    ///
    /// The record's `parent` goes with it (`{"recordName": …}`, as CloudKit takes it); its
    /// `share` does not (CloudKit sets it when a share is created). `createShortGUID` asks
    /// CloudKit for the short GUID a share's URL is made of, for a record that is to root one.
    public func encodeForModify(
        _ record: Record, withChangeTag: Bool, createShortGUID: Bool = false, to out: inout JSONWriter
    ) {
        out.raw("{\"recordName\":")
        out.string(record.recordName)
        out.raw(",\"recordType\":")
        out.string(record.recordType)
        if withChangeTag, let tag = record.changeTag {
            out.raw(",\"recordChangeTag\":")
            out.string(tag)
        }
        if !record.isDeleted {
            if let parent = record.parent {
                out.raw(",\"parent\":{\"recordName\":")
                out.string(parent)
                out.byte(UInt8(ascii: "}"))
            }
            if createShortGUID { out.raw(",\"createShortGUID\":true") }
            writeCanonicalFields(record, declaredTypes: fieldTypes[record.recordType], forCloudKit: true, to: &out)
        }
        out.byte(UInt8(ascii: "}"))
    }

    /// `,"fields":{…}` in the canonical style: each value with its CloudKit type.
    ///
    /// `forCloudKit`: as a request to CloudKit carries them, assets with CloudKit's own keys
    /// only (ckport's `localPath` and `sha256`, and the `downloadURL` CloudKit gave, stay home).
    private func writeCanonicalFields(
        _ record: Record, declaredTypes: [String: FieldType]?, forCloudKit: Bool = false, to out: inout JSONWriter
    ) {
        out.raw(",\"fields\":{")
        var first = true
        for entry in record.fields.entries {
            if !first { out.byte(UInt8(ascii: ",")) }
            first = false
            out.string(entry.name)
            out.raw(":{\"value\":")
            FieldValueJSON.write(entry.value, style: .canonical, forCloudKit: forCloudKit, to: &out)
            var fieldType = entry.value.type
            if let declared = declaredTypes?[entry.name], declared.isEncrypted { fieldType.isEncrypted = true }
            fieldType.appendTypeClosing(to: &out.bytes)
        }
        out.byte(UInt8(ascii: "}"))
    }

    /// Writes one record as a compact JSON object.
    public func encode(_ record: Record, style: ValueStyle, to out: inout JSONWriter) {
        let declaredTypes = style == .canonical ? fieldTypes[record.recordType] : nil
        out.raw("{\"recordName\":")
        out.string(record.recordName)
        out.raw(",\"recordType\":")
        out.string(record.recordType)
        out.raw(",\"scope\":")
        out.string(record.zone.scope.rawValue)
        if style == .canonical {
            out.raw(",\"zoneID\":{\"zoneName\":")
            out.string(record.zone.zoneName)
            out.raw(",\"ownerRecordName\":")
            out.string(record.zone.ownerRecordName)
            out.byte(UInt8(ascii: "}"))
            if let tag = record.changeTag {
                out.raw(",\"recordChangeTag\":")
                out.string(tag)
            }
            if let stamp = record.created {
                out.raw(",\"created\":")
                writeStamp(stamp, to: &out)
            }
            if let stamp = record.modified {
                out.raw(",\"modified\":")
                writeStamp(stamp, to: &out)
            }
            if record.isDeleted {
                out.raw(",\"deleted\":true}")
                return
            }
            JSONRecordCodec.writeLinks(record, to: &out)
            writeCanonicalFields(record, declaredTypes: declaredTypes, to: &out)
            JSONRecordCodec.spliceShareDetails(record, to: &out)
            out.byte(UInt8(ascii: "}"))
        } else {
            out.raw(",\"zoneName\":")
            out.string(record.zone.zoneName)
            if record.zone.ownerRecordName != ZoneID.defaultOwnerName {
                out.raw(",\"ownerRecordName\":")
                out.string(record.zone.ownerRecordName)
            }
            if let tag = record.changeTag {
                out.raw(",\"recordChangeTag\":")
                out.string(tag)
            }
            if let stamp = record.created {
                out.raw(",\"created\":\"")
                ISO8601.append(milliseconds: stamp.timestamp, to: &out.bytes)
                out.byte(UInt8(ascii: "\""))
                if let user = stamp.userRecordName {
                    out.raw(",\"createdBy\":")
                    out.string(user)
                }
                if let device = stamp.deviceID {
                    out.raw(",\"createdDevice\":")
                    out.string(device)
                }
            }
            if let stamp = record.modified {
                out.raw(",\"modified\":\"")
                ISO8601.append(milliseconds: stamp.timestamp, to: &out.bytes)
                out.byte(UInt8(ascii: "\""))
                if let user = stamp.userRecordName {
                    out.raw(",\"modifiedBy\":")
                    out.string(user)
                }
                if let device = stamp.deviceID {
                    out.raw(",\"modifiedDevice\":")
                    out.string(device)
                }
            }
            if record.isDeleted {
                out.raw(",\"deleted\":true}")
                return
            }
            if let parent = record.parent {
                out.raw(",\"parentRecordName\":")
                out.string(parent)
            }
            if let share = record.share {
                out.raw(",\"shareRecordName\":")
                out.string(share)
            }
            if let details = record.shareDetails, details.utf8.count > 2 {
                out.raw(",\"shareDetails\":")
                var text = details
                text.withUTF8 { out.bytes.append(contentsOf: $0) }
            }
            for entry in record.fields.entries {
                out.byte(UInt8(ascii: ","))
                out.string(entry.name)
                out.byte(UInt8(ascii: ":"))
                FieldValueJSON.write(entry.value, style: .plain, to: &out)
            }
            out.byte(UInt8(ascii: "}"))
        }
    }
}
