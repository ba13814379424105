import Foundation
import Records

/// How field values read as CSV cells.
///
/// | type       | cell                                                                     |
/// |------------|--------------------------------------------------------------------------|
/// | STRING     | the text                                                                 |
/// | INT64      | `42` (reading also takes `true`/`false`)                                 |
/// | DOUBLE     | shortest round-trip form: `0.1`, `1e-05`, `-0.0`                          |
/// | TIMESTAMP  | `2026-01-12T09:00:00.000Z`, or local with offset under `--tz`            |
/// | BYTES      | Base64                                                                   |
/// | REFERENCE  | the target's record name; its action in the `field:action` column        |
/// | ASSET      | its checksum; its size in the `field:size` column                        |
/// | LOCATION   | `lat,lon`                                                                |
/// | LIST<…>    | a JSON array                                                             |
///
/// A location with more than latitude and longitude, or an asset with more than checksum and
/// size, is written as its JSON object instead, so nothing is lost.
public struct CSVValues: Sendable {
    public var timeZone: TimeZone?
    /// Write every location as its JSON object.
    public var locationAsJSON: Bool

    public init(timeZone: TimeZone? = nil, locationAsJSON: Bool = false) {
        self.timeZone = timeZone
        self.locationAsJSON = locationAsJSON
    }

    // MARK: Writing

    public func cell(_ value: FieldValue) -> String {
        switch value {
        case .string(let s): return s
        case .int64(let i): return String(i)
        case .double(let d): return d.description
        case .timestamp(let t):
            guard let timeZone else { return ISO8601.format(milliseconds: t) }
            return ISO8601.format(milliseconds: t, timeZone: timeZone)
        case .bytes(let b): return Base64.encode(b)
        case .reference(let r): return r.recordName
        case .asset(let a):
            return isPlainAsset(a) ? a.fileChecksum : json(value)
        case .location(let l):
            return !locationAsJSON && isPlainLocation(l)
                ? "\(l.latitude.description),\(l.longitude.description)" : json(value)
        case .list:
            return json(value)
        }
    }

    func isPlainAsset(_ a: Asset) -> Bool {
        a.referenceChecksum == nil && a.wrappingKey == nil && a.receipt == nil && a.downloadURL == nil
            && a.localPath == nil && a.sha256 == nil
    }

    func isPlainLocation(_ l: Location) -> Bool {
        l.horizontalAccuracy == nil && l.verticalAccuracy == nil && l.altitude == nil && l.speed == nil
            && l.course == nil && l.timestamp == nil
    }

    private func json(_ value: FieldValue) -> String {
        var out = JSONWriter(capacity: 64)
        FieldValueJSON.write(value, style: .plain, to: &out)
        return out.text
    }

    // MARK: Reading

    /// Reads a cell as a value of `type`. Call it for cells that hold something — an unquoted
    /// empty cell is no value. An empty quoted cell (`""`) is the empty string for a STRING
    /// field and no bytes for a BYTES field, and no value for the others, which have no empty
    /// form.
    public func value(_ text: String, as type: FieldType) throws(ValueError) -> FieldValue? {
        if text.isEmpty {
            guard !type.isList else { return nil }
            switch type.primitive {
            case .string: return .string("")
            case .bytes: return .bytes([])
            default: return nil
            }
        }
        if type.isList || (text.first == "{" && (type.primitive == .asset || type.primitive == .location)) {
            let json: JSONValue
            do { json = try JSONParser.parse(text) } catch {
                throw ValueError(
                    "expected \(type) as JSON (\(type.isList ? "an array such as [\"a\", \"b\"]" : "an object")), found \"\(text)\", which is not JSON: \(error.message)"
                )
            }
            return try FieldValueJSON.read(json, as: type, timeZone: timeZone)
        }
        switch type.primitive {
        case .string:
            return .string(text)
        case .int64:
            if let i = Int64(text) { return .int64(i) }
            switch text.lowercased() {
            case "true": return .int64(1)
            case "false": return .int64(0)
            default: throw mismatch(type, "a whole number, or true/false", text)
            }
        case .double:
            guard let d = decimal(text) else { throw mismatch(type, "a number", text) }
            return .double(d)
        case .number:
            if let i = Int64(text) { return .int64(i) }
            guard let d = decimal(text) else { throw mismatch(type, "a number", text) }
            return .double(d)
        case .timestamp:
            if let ms = ISO8601.parse(text, timeZone: timeZone) { return .timestamp(ms) }
            if let ms = Int64(text) { return .timestamp(ms) }
            throw mismatch(type, "a date such as 2026-01-12, 2026-01-12 09:00 or 2026-01-12T09:00:00.000Z", text)
        case .bytes:
            guard let bytes = Base64.decode(text) else { throw mismatch(type, "Base64", text) }
            return .bytes(bytes)
        case .reference:
            if let problem = Names.referenceTargetProblem(text) {
                throw ValueError("expected REFERENCE (a record name), found \"\(text)\": \(problem)")
            }
            return .reference(Reference(recordName: text))
        case .asset:
            return .asset(Asset(fileChecksum: text, size: -1))
        case .location:
            let parts = text.split(separator: ",", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            guard parts.count == 2, let latitude = decimal(parts[0]), let longitude = decimal(parts[1]) else {
                throw mismatch(type, "latitude,longitude such as 52.52,13.405", text)
            }
            guard (-90...90).contains(latitude), (-180...180).contains(longitude) else {
                throw ValueError("expected LOCATION, found \"\(text)\": latitude is -90…90 and longitude -180…180")
            }
            return .location(Location(latitude: latitude, longitude: longitude))
        }
    }

    private func decimal(_ text: String) -> Double? {
        guard !text.isEmpty,
            text.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || $0 == 46 || $0 == 43 || $0 == 45 || $0 == 101 || $0 == 69 }
            ),
            let d = Double(text), d.isFinite
        else { return nil }
        return d
    }

    private func mismatch(_ type: FieldType, _ form: String, _ text: String) -> ValueError {
        ValueError("expected \(type) (\(form)), found \"\(text.count > 60 ? String(text.prefix(57)) + "..." : text)\"")
    }
}
