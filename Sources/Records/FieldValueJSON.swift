import Foundation

/// A field value that does not fit its type, with the path inside the value where it went wrong.
public struct ValueError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var message: Message
    /// Path below the value itself: `[2]` for the third list element, `latitude` in a location.
    public var path: [JSONPathComponent]

    public init(_ message: Message, path: [JSONPathComponent] = []) {
        self.message = message
        self.path = path
    }

    public var explanation: Message { path.isEmpty ? message : "\(path.pathString): \(message)" }
    public var description: String { explanation.description }
}

/// How field values look in JSON.
///
/// `canonical` is CloudKit Web Services' shape (timestamps in milliseconds, references as
/// `{recordName, action}`); `plain` is the shape people write by hand (ISO-8601 timestamps,
/// references as their record name). Reading accepts both shapes in either style, so a file
/// mixing them still imports.
public enum ValueStyle: String, Sendable, CaseIterable {
    case canonical
    case plain
}

public enum FieldValueJSON {
    // MARK: Writing

    /// `forCloudKit`: an asset as a request to CloudKit carries it, with CloudKit's keys only
    /// (`fileChecksum`, `size`, `referenceChecksum`, `wrappingKey`, `receipt`); ckport's
    /// `localPath` and `sha256`, and the `downloadURL` CloudKit answered with, are left out.
    public static func write(
        _ value: FieldValue, style: ValueStyle, forCloudKit: Bool = false, to out: inout JSONWriter
    ) {
        switch value {
        case .string(let s): out.string(s)
        case .int64(let i): out.int(i)
        case .double(let d): out.double(d)
        case .timestamp(let t):
            if style == .plain {
                out.byte(UInt8(ascii: "\""))
                ISO8601.append(milliseconds: t, to: &out.bytes)
                out.byte(UInt8(ascii: "\""))
            } else {
                out.int(t)
            }
        case .bytes(let b):
            out.byte(UInt8(ascii: "\""))
            Base64.append(b, to: &out.bytes)
            out.byte(UInt8(ascii: "\""))
        case .reference(let r):
            if style == .plain && r.action == .none {
                out.string(r.recordName)
            } else {
                out.raw("{\"recordName\":")
                out.string(r.recordName)
                out.raw(",\"action\":")
                out.string(r.action.rawValue)
                out.byte(UInt8(ascii: "}"))
            }
        case .asset(let a):
            out.raw("{\"fileChecksum\":")
            out.string(a.fileChecksum)
            out.raw(",\"size\":")
            out.int(a.size)
            if let v = a.referenceChecksum {
                out.raw(",\"referenceChecksum\":")
                out.string(v)
            }
            if let v = a.wrappingKey {
                out.raw(",\"wrappingKey\":")
                out.string(v)
            }
            if let v = a.receipt {
                out.raw(",\"receipt\":")
                out.string(v)
            }
            if !forCloudKit {
                if let v = a.downloadURL {
                    out.raw(",\"downloadURL\":")
                    out.string(v)
                }
                if let v = a.localPath {
                    out.raw(",\"localPath\":")
                    out.string(v)
                }
                if let v = a.sha256 {
                    out.raw(",\"sha256\":")
                    out.string(v)
                }
            }
            out.byte(UInt8(ascii: "}"))
        case .location(let l):
            out.raw("{\"latitude\":")
            out.double(l.latitude)
            out.raw(",\"longitude\":")
            out.double(l.longitude)
            if let v = l.horizontalAccuracy {
                out.raw(",\"horizontalAccuracy\":")
                out.double(v)
            }
            if let v = l.verticalAccuracy {
                out.raw(",\"verticalAccuracy\":")
                out.double(v)
            }
            if let v = l.altitude {
                out.raw(",\"altitude\":")
                out.double(v)
            }
            if let v = l.speed {
                out.raw(",\"speed\":")
                out.double(v)
            }
            if let v = l.course {
                out.raw(",\"course\":")
                out.double(v)
            }
            if let v = l.timestamp {
                out.raw(",\"timestamp\":")
                write(.timestamp(v), style: style, to: &out)
            }
            out.byte(UInt8(ascii: "}"))
        case .list(_, let elements):
            out.byte(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { out.byte(UInt8(ascii: ",")) }
                write(element, style: style, forCloudKit: forCloudKit, to: &out)
            }
            out.byte(UInt8(ascii: "]"))
        }
    }

    /// The canonical JSON text of a value: how ckport keeps lists, assets and locations in SQLite.
    public static func canonicalText(_ value: FieldValue) -> String {
        var out = JSONWriter(capacity: 64)
        write(value, style: .canonical, to: &out)
        return out.text
    }

    // MARK: Reading

    /// Reads a JSON value as a value of `type`.
    ///
    /// - Parameter zone: the zone of the record holding the value; a reference that names
    ///   another zone is refused, because CloudKit references stay inside one zone.
    public static func read(_ json: JSONValue, as type: FieldType, zone: ZoneID? = nil, timeZone: TimeZone? = nil)
        throws(ValueError) -> FieldValue
    {
        if type.isList {
            guard case .array(let elements) = json else {
                throw ValueError("expected \(type) as a JSON array, found \(json.summary)")
            }
            let elementType = type.element
            var values: [FieldValue] = []
            values.reserveCapacity(elements.count)
            for (index, element) in elements.enumerated() {
                do {
                    values.append(try read(element, as: elementType, zone: zone, timeZone: timeZone))
                } catch {
                    var error = error
                    error.path.insert(.index(index), at: 0)
                    throw error
                }
            }
            return .list(elementType.primitive == .number ? numberElementType(values) : elementType.primitive, values)
        }
        switch type.primitive {
        case .string:
            guard case .string(let s) = json else { throw mismatch(json, "STRING", "a JSON string") }
            return .string(s)
        case .int64:
            return .int64(try int64(json))
        case .double:
            return .double(try double(json))
        case .number:
            if case .number(let text) = json, !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }),
                let i = Int64(text)
            {
                return .int64(i)
            }
            return .double(try double(json))
        case .timestamp:
            return .timestamp(try timestamp(json, timeZone: timeZone))
        case .bytes:
            guard case .string(let s) = json else { throw mismatch(json, "BYTES", "Base64 text") }
            guard let bytes = Base64.decode(s) else {
                throw ValueError("expected BYTES as Base64 text, found \(json.summary), which is not Base64")
            }
            return .bytes(bytes)
        case .reference:
            return .reference(try reference(json, zone: zone))
        case .asset:
            return .asset(try asset(json))
        case .location:
            return .location(try location(json, timeZone: timeZone))
        }
    }

    /// The value a JSON value stands for when no schema says its type: strings, integers,
    /// other numbers, and arrays of one of those. Used for fields new to the schema.
    public static func inferType(of json: JSONValue) -> FieldType? {
        switch json {
        case .string: return .string
        case .bool: return .int64
        case .number(let text):
            return text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) || Int64(text) == nil
                ? .double : .int64
        case .array(let elements):
            guard let first = elements.first, var element = inferType(of: first), !element.isList else {
                return elements.isEmpty ? .list(.string) : nil
            }
            for other in elements.dropFirst() {
                guard let type = inferType(of: other), !type.isList else { return nil }
                if type != element {
                    if Set([type.primitive, element.primitive]) == [.int64, .double] {
                        element = .double
                    } else {
                        return nil
                    }
                }
            }
            element.isList = true
            return element
        case .object(let object):
            if object["recordName"] != nil { return .reference }
            if object["latitude"] != nil && object["longitude"] != nil { return .location }
            if object["fileChecksum"] != nil { return .asset }
            return nil
        case .null: return nil
        }
    }

    private static func numberElementType(_ values: [FieldValue]) -> PrimitiveType {
        values.allSatisfy { if case .int64 = $0 { return true } else { return false } } ? .int64 : .double
    }

    static func mismatch(_ json: JSONValue, _ type: String, _ form: String) -> ValueError {
        ValueError("expected \(type) (\(form)), found \(json.summary)")
    }

    static func int64(_ json: JSONValue) throws(ValueError) -> Int64 {
        switch json {
        case .number(let text), .string(let text):
            if let value = Int64(text) { return value }
            if case .number = json, let exact = exactInteger(text) { return exact }
            if text.allSatisfy({ $0.isNumber || $0 == "-" || $0 == "+" }) && !text.isEmpty {
                throw ValueError(
                    "expected INT64, found \(json.summary), which is outside -9223372036854775808…9223372036854775807")
            }
            throw mismatch(json, "INT64", "a whole number")
        case .bool(let b):
            return b ? 1 : 0
        default:
            throw mismatch(json, "INT64", "a whole number")
        }
    }

    /// `1.0`, `2e3`: numbers written with a fraction or exponent that are whole all the same.
    private static func exactInteger(_ text: String) -> Int64? {
        guard let d = Double(text), d.isFinite, d == d.rounded(), abs(d) < 9.007_199_254_740_992e15 else { return nil }
        return Int64(d)
    }

    static func double(_ json: JSONValue) throws(ValueError) -> Double {
        let value: Double?
        switch json {
        case .number(let text): value = Double(text)
        case .string(let text): value = isDecimalText(text) ? Double(text) : nil
        default: value = nil
        }
        guard let value else { throw mismatch(json, "DOUBLE", "a number") }
        guard value.isFinite else {
            throw ValueError("expected DOUBLE, found \(json.summary), which is too large for a double")
        }
        return value
    }

    /// Decimal number text as people write it (`-1.5`, `2e3`, `+4`), and not the hex floats,
    /// `nan` or `inf` that `Double(_:)` would also take.
    private static func isDecimalText(_ text: String) -> Bool {
        !text.isEmpty
            && text.utf8.allSatisfy {
                ($0 >= 48 && $0 <= 57) || $0 == 46 || $0 == 43 || $0 == 45 || $0 == 101 || $0 == 69
            }
    }

    static func timestamp(_ json: JSONValue, timeZone: TimeZone?) throws(ValueError) -> Int64 {
        switch json {
        case .number(let text):
            if let ms = Int64(text) ?? exactInteger(text) { return ms }
            throw ValueError("expected TIMESTAMP, found \(json.summary): milliseconds since 1970 are whole numbers")
        case .string(let text):
            if let ms = ISO8601.parse(text, timeZone: timeZone) { return ms }
            throw ValueError(
                "expected TIMESTAMP (milliseconds since 1970, or ISO-8601 text such as 2026-01-12T09:00:00.000Z), found \(json.summary)"
            )
        default:
            throw mismatch(json, "TIMESTAMP", "milliseconds since 1970, or ISO-8601 text")
        }
    }

    static func reference(_ json: JSONValue, zone: ZoneID?) throws(ValueError) -> Reference {
        switch json {
        case .string(let name):
            if let problem = Names.referenceTargetProblem(name) {
                throw ValueError("a REFERENCE names its target record: \(problem)")
            }
            return Reference(recordName: name)
        case .object(let object):
            guard case .string(let name)? = object["recordName"] else {
                throw ValueError(
                    "a REFERENCE needs \"recordName\" (text)",
                    path: object["recordName"] == nil ? [] : [.key("recordName")])
            }
            if let problem = Names.referenceTargetProblem(name) {
                throw ValueError("a REFERENCE names its target record: \(problem)", path: [.key("recordName")])
            }
            var action = ReferenceAction.none
            if let raw = object["action"] {
                guard case .string(let text) = raw, let parsed = ReferenceAction(rawValue: text.uppercased()) else {
                    throw ValueError(
                        "a REFERENCE action is NONE, DELETE_SELF or VALIDATE, found \(raw.summary)",
                        path: [.key("action")])
                }
                action = parsed
            }
            // The zone a reference names must be its record's: by name. The owner is not
            // compared: CloudKit's answers name it in references as they please (the creator's
            // user in the public database, the signed-in user in the private one), and a
            // reference never leaves its zone anyway.
            if let zone, case .object(let zoneObject)? = object["zoneID"] {
                let zoneName = zoneObject["zoneName"]?.stringValue ?? ZoneID.defaultZoneName
                if zoneName != zone.zoneName {
                    throw ValueError(
                        "a REFERENCE must point into its record's own zone (\(zone.zoneName)); this one points into \(zoneName)",
                        path: [.key("zoneID")])
                }
            }
            return Reference(recordName: name, action: action)
        default:
            throw mismatch(json, "REFERENCE", "a record name or {\"recordName\": …, \"action\": …}")
        }
    }

    static func asset(_ json: JSONValue) throws(ValueError) -> Asset {
        guard case .object(let object) = json else {
            throw mismatch(json, "ASSETID", "{\"fileChecksum\": …, \"size\": …}")
        }
        guard case .string(let checksum)? = object["fileChecksum"] else {
            throw ValueError("an ASSETID needs \"fileChecksum\" (text)")
        }
        guard let sizeValue = object["size"] else { throw ValueError("an ASSETID needs \"size\" (bytes)") }
        let size: Int64
        do { size = try int64(sizeValue) } catch {
            throw ValueError(error.message, path: [.key("size")])
        }
        func text(_ key: String) throws(ValueError) -> String? {
            guard let value = object[key] else { return nil }
            guard case .string(let s) = value else {
                throw ValueError("expected text, found \(value.summary)", path: [.key(key)])
            }
            return s
        }
        let sha256 = try text("sha256")
        if let sha256, !Asset.isSHA256(sha256) {
            throw ValueError(
                "expected a SHA-256 as 64 lowercase hex digits, found \"\(sha256.prefix(80))\"", path: [.key("sha256")])
        }
        return Asset(
            fileChecksum: checksum, size: size, referenceChecksum: try text("referenceChecksum"),
            wrappingKey: try text("wrappingKey"), receipt: try text("receipt"),
            downloadURL: try text("downloadURL"), localPath: try text("localPath"), sha256: sha256)
    }

    static func location(_ json: JSONValue, timeZone: TimeZone?) throws(ValueError) -> Location {
        guard case .object(let object) = json else {
            throw mismatch(json, "LOCATION", "{\"latitude\": …, \"longitude\": …}")
        }
        func number(_ key: String) throws(ValueError) -> Double? {
            guard let value = object[key] else { return nil }
            do { return try double(value) } catch { throw ValueError(error.message, path: [.key(key)]) }
        }
        guard let latitude = try number("latitude"), let longitude = try number("longitude") else {
            throw ValueError("a LOCATION needs \"latitude\" and \"longitude\"")
        }
        guard (-90...90).contains(latitude) else {
            throw ValueError("latitude \(latitude) is outside -90…90", path: [.key("latitude")])
        }
        guard (-180...180).contains(longitude) else {
            throw ValueError("longitude \(longitude) is outside -180…180", path: [.key("longitude")])
        }
        var stamp: Int64? = nil
        if let value = object["timestamp"] {
            do { stamp = try timestamp(value, timeZone: timeZone) } catch {
                throw ValueError(error.message, path: [.key("timestamp")])
            }
        }
        return Location(
            latitude: latitude, longitude: longitude, horizontalAccuracy: try number("horizontalAccuracy"),
            verticalAccuracy: try number("verticalAccuracy"), altitude: try number("altitude"),
            speed: try number("speed"), course: try number("course"), timestamp: stamp)
    }
}
