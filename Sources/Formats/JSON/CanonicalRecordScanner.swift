import Records

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

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
    /// lookup starts where the last one matched and usually succeeds at once. Names are compared
    /// as bytes, straight against the input, so reading a key allocates nothing.
    final class FieldTable: Sendable {
        let names: [String]
        let types: [FieldType]
        /// The names' UTF-8 bytes one after another; name k is `nameBytes[offsets[k]..<offsets[k + 1]]`.
        let nameBytes: [UInt8]
        let nameOffsets: [Int]
        /// The `type` each field's values usually carry (`STRING`, `ENCRYPTED_STRING`, …), stored the same way.
        let typeNameBytes: [UInt8]
        let typeNameOffsets: [Int]
        /// What usually follows a field's value, written compactly: `,"type":"STRING"}`, stored the same way.
        let tailBytes: [UInt8]
        let tailOffsets: [Int]
        let hasFieldsField: Bool

        init(names: [String], types: [FieldType]) {
            self.names = names
            self.types = types
            (nameBytes, nameOffsets) = FieldTable.flatten(names)
            (typeNameBytes, typeNameOffsets) = FieldTable.flatten(types.map(\.webServicesName))
            (tailBytes, tailOffsets) = FieldTable.flatten(types.map { ",\"type\":\"\($0.webServicesName)\"}" })
            hasFieldsField = names.contains("fields")
        }

        private static func flatten(_ strings: [String]) -> ([UInt8], [Int]) {
            var bytes: [UInt8] = []
            var offsets = [0]
            for string in strings {
                bytes.append(contentsOf: string.utf8)
                offsets.append(bytes.count)
            }
            return (bytes, offsets)
        }

        /// The index of the field named by `key`, searching from where the last lookup matched.
        func lookup(_ key: UnsafeRawBufferPointer, from hint: inout Int) -> Int? {
            let count = names.count
            guard count > 0 else { return nil }
            return nameBytes.withUnsafeBytes { all in
                for step in 0..<count {
                    let index = (hint + step) % count
                    if FieldTable.equal(all, nameOffsets[index], nameOffsets[index + 1], key) {
                        hint = index + 1
                        return index
                    }
                }
                return nil
            }
        }

        /// The length of field `index`'s usual tail when `bytes` start with it, else nil.
        @inline(__always)
        func usualTail(of index: Int, at bytes: UnsafeRawBufferPointer) -> Int? {
            tailBytes.withUnsafeBytes { all in
                let from = tailOffsets[index]
                let count = tailOffsets[index + 1] - from
                return bytes.count >= count && memcmp(all.baseAddress! + from, bytes.baseAddress!, count) == 0
                    ? count : nil
            }
        }

        /// The index of the field whose key — `"name":`, quotes and colon included — `bytes`
        /// start with, trying field `hint` (the one after the last match) and no other.
        @inline(__always)
        func key(at bytes: UnsafeRawBufferPointer, hint: Int) -> Int? {
            guard hint < names.count else { return nil }
            return nameBytes.withUnsafeBytes { all in
                let from = nameOffsets[hint]
                let count = nameOffsets[hint + 1] - from
                guard bytes.count >= count + 3, bytes[0] == UInt8(ascii: "\""), bytes[count + 1] == UInt8(ascii: "\""),
                    bytes[count + 2] == UInt8(ascii: ":"),
                    count == 0 || memcmp(all.baseAddress! + from, bytes.baseAddress! + 1, count) == 0
                else { return nil }
                return hint
            }
        }

        /// Whether `text` is the type name field `index`'s values usually carry.
        func isUsualTypeName(_ text: UnsafeRawBufferPointer, of index: Int) -> Bool {
            typeNameBytes.withUnsafeBytes { all in
                FieldTable.equal(all, typeNameOffsets[index], typeNameOffsets[index + 1], text)
            }
        }

        @inline(__always)
        private static func equal(_ all: UnsafeRawBufferPointer, _ from: Int, _ to: Int, _ key: UnsafeRawBufferPointer)
            -> Bool
        {
            to - from == key.count
                && (key.count == 0 || memcmp(all.baseAddress! + from, key.baseAddress!, key.count) == 0)
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
        scanChecked(bytes)?.record
    }

    /// The record, and what was found of its fields on the way (``CheckedFields``) when the
    /// fields were read against their type.
    public func scanChecked(_ bytes: UnsafeRawBufferPointer) -> (record: Record, checked: CheckedFields?)? {
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

    // Objects are walked with three calls, without a closure per member:
    //
    //     if try openObject() { repeat { let key = try memberKey(); …read the value… } while try nextMember() }

    /// Consumes `{`; true when a member follows, false for `{}`.
    @inline(__always) private mutating func openObject() throws -> Bool {
        try expect(UInt8(ascii: "{"))
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            i += 1
            return false
        }
        return true
    }

    /// Reads `"key":` and stops at the value. The key's bytes are borrowed from the input; a key
    /// with an escape or a control character is left to the general reader.
    @inline(__always) private mutating func memberKey() throws -> UnsafeRawBufferPointer {
        skipWhitespace()
        // Keys are short: a byte at a time, in place.
        guard i < bytes.count, bytes[i] == UInt8(ascii: "\""), let base = bytes.baseAddress else { throw GiveUp() }
        let start = i + 1
        var j = start
        while true {
            guard j < bytes.count else { throw GiveUp() }
            let b = base.load(fromByteOffset: j, as: UInt8.self)
            if b == UInt8(ascii: "\"") { break }
            if b == UInt8(ascii: "\\") || b < 0x20 { throw GiveUp() }
            j += 1
        }
        let key = UnsafeRawBufferPointer(start: base + start, count: j - start)
        i = j + 1
        if i < bytes.count, base.load(fromByteOffset: i, as: UInt8.self) == UInt8(ascii: ":") {
            i += 1
        } else {
            try expect(UInt8(ascii: ":"))
        }
        skipWhitespace()
        return key
    }

    /// Steps over the key `"name":` when it comes next exactly so (and any whitespace after it),
    /// which is what ``memberKey()`` followed by a match of `name` would do, in fewer steps.
    @inline(__always) private mutating func skipKey(_ quotedWithColon: StaticString) -> Bool {
        guard skip(quotedWithColon) else { return false }
        skipWhitespace()
        return true
    }

    /// After a member's value: true when another member follows, false at the closing brace.
    @inline(__always) private mutating func nextMember() throws -> Bool {
        skipWhitespace()
        guard let b = current else { throw GiveUp() }
        i += 1
        if b == UInt8(ascii: ",") { return true }
        if b == UInt8(ascii: "}") { return false }
        throw GiveUp()
    }

    /// The bytes of a string without escapes, borrowed from the input.
    private mutating func rawString() throws -> UnsafeRawBufferPointer {
        guard current == UInt8(ascii: "\"") else { throw GiveUp() }
        let start = i + 1
        var j = start
        _ = skipPlainWords(&j)
        while j < bytes.count {
            let b = bytes[j]
            if b == UInt8(ascii: "\"") {
                i = j + 1
                return UnsafeRawBufferPointer(rebasing: bytes[start..<j])
            }
            if b == UInt8(ascii: "\\") || b < 0x20 { throw GiveUp() }
            j += 1
        }
        throw GiveUp()
    }

    /// Steps over `literal` when the input goes on with exactly its bytes, else stays put.
    @inline(__always) private mutating func skip(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - i >= count, memcmp(bytes.baseAddress! + i, literal.utf8Start, count) == 0 else {
            return false
        }
        i += count
        return true
    }

    @inline(__always) private func key(_ key: UnsafeRawBufferPointer, is name: StaticString) -> Bool {
        key.count == name.utf8CodeUnitCount && memcmp(key.baseAddress!, name.utf8Start, key.count) == 0
    }

    private mutating func string() throws -> String {
        guard current == UInt8(ascii: "\"") else { throw GiveUp() }
        return try parseString()
    }

    /// A string; one equal to `known` comes back as `known` itself, sharing its storage. A
    /// record names its owner up to three times (zone, created, modified).
    private mutating func string(reusing known: String?) throws -> String {
        if let known, current == UInt8(ascii: "\"") {
            let start = i
            if let raw = try? rawString() {
                let same = known.utf8.withContiguousStorageIfAvailable { utf8 in
                    utf8.count == raw.count
                        && (raw.count == 0 || memcmp(utf8.baseAddress!, raw.baseAddress!, raw.count) == 0)
                }
                if same == true { return known }
            }
            i = start
        }
        return try string()
    }

    /// A JSON integer (no fraction, no exponent) that fits an Int64.
    private mutating func integer() throws -> Int64 {
        var negative = false
        if current == UInt8(ascii: "-") {
            negative = true
            i += 1
        }
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
        if let b = current, b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E") {
            throw GiveUp()
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { throw GiveUp() }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { throw GiveUp() }
        return Int64(magnitude)
    }

    private mutating func isNull() -> Bool {
        guard i + 4 <= bytes.count, bytes[i] == UInt8(ascii: "n"), bytes[i + 1] == UInt8(ascii: "u"),
            bytes[i + 2] == UInt8(ascii: "l"), bytes[i + 3] == UInt8(ascii: "l")
        else { return false }
        i += 4
        return true
    }

    private mutating func stamp(usualUser: String?) throws -> RecordStamp {
        var timestamp: Int64?
        var user: String?
        var device: String?
        if try openObject() {
            repeat {
                // The usual keys, in their usual order, matched by their bytes first.
                if timestamp == nil, skipKey("\"timestamp\":") {
                    timestamp = try integer()
                    continue
                }
                if timestamp != nil, user == nil, skipKey("\"userRecordName\":") {
                    user = try string(reusing: usualUser)
                    continue
                }
                if user != nil, device == nil, skipKey("\"deviceID\":") {
                    device = try string()
                    continue
                }
                let name = try memberKey()
                if key(name, is: "timestamp"), timestamp == nil {
                    timestamp = try integer()
                } else if key(name, is: "userRecordName"), user == nil {
                    user = try string(reusing: usualUser)
                } else if key(name, is: "deviceID"), device == nil {
                    device = try string()
                } else {
                    throw GiveUp()
                }
            } while try nextMember()
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
            if try openObject() {
                repeat {
                    if name == nil, skipKey("\"recordName\":") {
                        name = try string()
                        continue
                    }
                    let member = try memberKey()
                    if key(member, is: "recordName"), name == nil {
                        name = try string()
                    } else if key(member, is: "action"), !sawAction {
                        sawAction = true
                        let text = try rawString()
                        if key(text, is: "DELETE_SELF") {
                            action = .deleteSelf
                        } else if key(text, is: "VALIDATE") {
                            action = .validate
                        } else if key(text, is: "NONE") {
                            action = .none
                        } else {
                            throw GiveUp()
                        }
                    } else {
                        throw GiveUp()
                    }
                } while try nextMember()
            }
            guard let name, Names.referenceTargetProblem(name) == nil else { throw GiveUp() }
            return .reference(Reference(recordName: name, action: action))
        case .asset, .location, .number:
            throw GiveUp()
        }
    }

    /// The fields the record's type has; every field read is one of them with a value its type
    /// accepts, or `sound` is made false. `size` counts what each field adds to the record's size
    /// (as the validator counts it).
    private mutating func scanFields(
        of type: String, _ scanner: CanonicalRecordScanner, into fields: inout RecordFields,
        size: inout Int, sound: inout Bool
    ) throws -> CanonicalRecordScanner.FieldTable {
        // A type with a field named "fields" makes the general reader look closer; let it.
        guard let table = scanner.tables[type], !table.hasFieldsField else { throw GiveUp() }
        // Fields met without a value (null, or none): a second key of the same name is a
        // duplicate the general reader refuses, even though nothing was stored the first time.
        var valueless: [Int] = []
        /// Stores a field's value (a later "type" that does not fit discards the whole scan).
        func store(_ value: consuming FieldValue, as field: Int, in fields: inout RecordFields) throws {
            if !valueless.isEmpty, valueless.contains(field) { throw GiveUp() }
            sound = sound && table.types[field].accepts(FieldValue.type(of: value))
            size += table.names[field].utf8.count + FieldValue.size(of: value)
            if !fields.insertNew(table.names[field], value) { throw GiveUp() }
        }
        guard try openObject() else { return table }
        fields = RecordFields(minimumCapacity: min(table.names.count, 16))
        var hint = 0
        repeat {
            // Fields usually come in the table's order: the next one's key is matched where it
            // lies; any other key is read and looked up.
            let field: Int
            if let next = table.key(at: UnsafeRawBufferPointer(rebasing: bytes[i...]), hint: hint) {
                i += table.nameOffsets[next + 1] - table.nameOffsets[next] + 3
                skipWhitespace()
                hint = next + 1
                field = next
            } else {
                guard let found = table.lookup(try memberKey(), from: &hint) else { throw GiveUp() }
                field = found
            }
            guard !table.types[field].isList else { throw GiveUp() }
            let schemaType = table.types[field]
            var sawValue = false
            var sawType = false
            var sawEncrypted = false
            // The usual shape, written compactly — `{"value":…,"type":"STRING"}` — is matched
            // byte for byte around the value; anything else is walked member by member.
            var more: Bool
            let storedBefore = fields.count
            if skip("{\"value\":") {
                sawValue = true
                skipWhitespace()
                if !isNull() { try store(try self.value(as: schemaType), as: field, in: &fields) }
                if let tail = table.usualTail(of: field, at: UnsafeRawBufferPointer(rebasing: bytes[i...])) {
                    i += tail
                    more = false
                } else {
                    more = try nextMember()
                }
            } else {
                more = try openObject()
            }
            while more {
                let member = try memberKey()
                if key(member, is: "value"), !sawValue {
                    sawValue = true
                    if !isNull() { try store(try self.value(as: schemaType), as: field, in: &fields) }
                } else if key(member, is: "type"), !sawType {
                    sawType = true
                    let given = try rawString()
                    if !table.isUsualTypeName(given, of: field) {
                        guard let parsed = FieldType.parseWebServicesName(String(decoding: given, as: UTF8.self)),
                            schemaType.accepts(parsed)
                        else { throw GiveUp() }
                    }
                } else if key(member, is: "isEncrypted"), !sawEncrypted {
                    // How CloudKit marks an encrypted field's value; the schema says as much.
                    sawEncrypted = true
                    guard skip("true") || skip("false") else { throw GiveUp() }
                } else {
                    throw GiveUp()
                }
                more = try nextMember()
            }
            if fields.count == storedBefore {
                if valueless.contains(field) || fields[table.names[field]] != nil { throw GiveUp() }
                valueless.append(field)
            }
        } while try nextMember()
        return table
    }

    mutating func scanCanonicalRecord(_ scanner: CanonicalRecordScanner) throws -> (
        record: Record, checked: CheckedFields?
    ) {
        var recordName: String?
        var recordType: String?
        var zone = scanner.defaultZone
        var sawScope = false
        var sawZone = false
        var sawTag = false
        var sawCreated = false
        var sawModified = false
        var sawDeleted = false
        var changeTag: String?
        var created: RecordStamp?
        var modified: RecordStamp?
        var deleted = false
        var parent: String?
        var share: String?
        // Room is made once the type, and so its number of fields, is known.
        var fields = RecordFields()
        var sawFields = false
        // The type whose fields were read, and what was found on the way.
        var table: CanonicalRecordScanner.FieldTable?
        var fieldsSize = 0
        var sound = true
        // Fields may come before recordType; their bytes wait until the type is known.
        var fieldsStart: Int?
        skipWhitespace()
        if try openObject() {
            repeat {
                let name = try memberKey()
                if key(name, is: "recordName"), recordName == nil {
                    recordName = try string()
                } else if key(name, is: "recordType"), recordType == nil {
                    recordType = try string()
                } else if key(name, is: "scope"), !sawScope {
                    sawScope = true
                    let text = try rawString()
                    if key(text, is: "private") {
                        zone.scope = .private
                    } else if key(text, is: "shared") {
                        zone.scope = .shared
                    } else if key(text, is: "public") {
                        zone.scope = .public
                    } else {
                        throw GiveUp()
                    }
                } else if key(name, is: "zoneID"), !sawZone {
                    sawZone = true
                    var sawName = false
                    var sawOwner = false
                    if try openObject() {
                        repeat {
                            let zoneKey = try memberKey()
                            if key(zoneKey, is: "zoneName"), !sawName {
                                sawName = true
                                zone.zoneName = try string()
                                if zone.zoneName.isEmpty { throw GiveUp() }
                            } else if key(zoneKey, is: "ownerRecordName"), !sawOwner {
                                sawOwner = true
                                zone.ownerRecordName = try string()
                                if zone.ownerRecordName.isEmpty { throw GiveUp() }
                            } else {
                                throw GiveUp()
                            }
                        } while try nextMember()
                    }
                } else if key(name, is: "recordChangeTag"), !sawTag {
                    sawTag = true
                    changeTag = try string()
                } else if key(name, is: "created"), !sawCreated {
                    sawCreated = true
                    created = try stamp(usualUser: sawZone ? zone.ownerRecordName : nil)
                } else if key(name, is: "modified"), !sawModified {
                    sawModified = true
                    modified = try stamp(usualUser: created?.userRecordName ?? (sawZone ? zone.ownerRecordName : nil))
                } else if key(name, is: "deleted"), !sawDeleted {
                    sawDeleted = true
                    if skip("true") { deleted = true } else if !skip("false") { throw GiveUp() }
                } else if key(name, is: "parent"), parent == nil {
                    parent = try link()
                } else if key(name, is: "share"), share == nil {
                    share = try link()
                } else if key(name, is: "fields"), !sawFields {
                    sawFields = true
                    if let type = recordType {
                        table = try scanFields(of: type, scanner, into: &fields, size: &fieldsSize, sound: &sound)
                    } else {
                        // The type comes later: read the fields once it is known.
                        fieldsStart = i
                        try skipValue()
                    }
                } else {
                    throw GiveUp()
                }
            } while try nextMember()
        }
        skipWhitespace()
        // Without these keys the general reader takes a record for the plain style.
        guard sawFields || sawZone else { throw GiveUp() }
        guard i == bytes.count, let recordName, let type = recordType ?? scanner.defaultRecordType else {
            throw GiveUp()
        }
        if let fieldsStart {
            let end = i
            i = fieldsStart
            table = try scanFields(of: type, scanner, into: &fields, size: &fieldsSize, sound: &sound)
            i = end
        }
        // A share's details (and anything about links but their name) are the general reader's.
        if type == Record.shareType { throw GiveUp() }
        if deleted {
            fields = RecordFields()
            parent = nil
            share = nil
        }
        let checked = table.flatMap { table in
            sound && !deleted
                ? CheckedFields(
                    names: table.names, types: table.types, size: recordName.utf8.count + type.utf8.count + fieldsSize)
                : nil
        }
        return (
            Record(
                id: RecordID(recordName: recordName, zone: zone), recordType: type, fields: fields,
                changeTag: changeTag, created: created, modified: modified, isDeleted: deleted,
                parent: parent, share: share), checked
        )
    }

    /// `{"recordName": …}`: a parent or share in its usual form.
    private mutating func link() throws -> String {
        guard try openObject() else { throw GiveUp() }
        let member = try memberKey()
        guard key(member, is: "recordName") else { throw GiveUp() }
        let name = try string()
        guard try !nextMember(), Names.referenceTargetProblem(name) == nil else { throw GiveUp() }
        return name
    }
}
