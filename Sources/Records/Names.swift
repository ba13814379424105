/// The naming rules CloudKit enforces, in one place.
public enum Names {
    public static let maxRecordNameLength = 255
    public static let maxIdentifierLength = 255

    /// The implicit system fields of every record type, in the order cktool prints them.
    public static let systemFields: [(name: String, type: PrimitiveType)] = [
        ("___createTime", .timestamp),
        ("___createdBy", .reference),
        ("___etag", .string),
        ("___modTime", .timestamp),
        ("___modifiedBy", .reference),
        ("___recordID", .reference),
    ]

    /// CloudKit's record type of shares: the one record type a schema may declare whose name is
    /// not an identifier (cktool writes it `"cloudkit.share"`).
    public static let shareType = "cloudkit.share"

    /// The fields CloudKit gives `cloudkit.share`, as cktool exports them.
    public static let shareFields: [(name: String, type: PrimitiveType)] = [
        ("cloudkit.thumbnailImageData", .bytes),
        ("cloudkit.title", .string),
        ("cloudkit.type", .string),
    ]

    /// Roles every container has.
    public static let implicitRoles: Set<String> = ["_world", "_icloud", "_creator"]

    public static func isSystemField(_ name: String) -> Bool {
        name.hasPrefix("___")
    }

    /// Why `name` cannot be a record name, or nil when it can.
    ///
    /// CloudKit record names are ASCII, 1–255 characters, and may not start with `_`, which
    /// CloudKit keeps for its own records.
    public static func recordNameProblem(_ name: String) -> String? {
        let utf8 = name.utf8
        if utf8.isEmpty { return "a record name cannot be empty" }
        if utf8.count > maxRecordNameLength {
            return "a record name has at most \(maxRecordNameLength) characters, this one has \(utf8.count)"
        }
        if utf8.first == UInt8(ascii: "_") { return "a record name cannot start with '_' (CloudKit keeps those names)" }
        let outside = name.withUTF8Bytes { bytes in bytes.first { $0 < 0x20 || $0 > 0x7E } }
        guard let outside else { return nil }
        return outside > 0x7E ? "a record name must be ASCII" : "a record name cannot hold control characters"
    }

    /// Why `name` cannot be the target of a reference, or nil when it can. Targets follow the
    /// record name rules, except that a leading `_` is allowed: references to a user's record
    /// (`_a1b2…`, CloudKit's own records) are common.
    public static func referenceTargetProblem(_ name: String) -> String? {
        if name.hasPrefix("_") {
            return recordNameProblem("x" + name.dropFirst())
        }
        return recordNameProblem(name)
    }

    /// Why `name` cannot be a record type name, or nil when it can: `[A-Za-z][A-Za-z0-9_]*`, or
    /// CloudKit's own `cloudkit.share`.
    public static func recordTypeNameProblem(_ name: String) -> String? {
        if name == shareType { return nil }
        guard let problem = identifierProblem(name, what: "a record type name", allowLeadingUnderscore: false) else {
            return nil
        }
        if name.hasPrefix("cloudkit.") {
            return
                "'\(name)' is not a record type CloudKit defines (of its own types with a dot, a schema declares only \(shareType)); \(problem)"
        }
        if name.contains(".") {
            return problem + " (a dot belongs only to CloudKit's own \(shareType))"
        }
        return problem
    }

    /// Why `name` cannot be a field name, or nil when it can.
    ///
    /// Field names follow `[A-Za-z][A-Za-z0-9_]*`. A single leading underscore is accepted for
    /// the metadata fields apps keep beside their data (`_schemaVersion`, `_appVersion`); names
    /// starting with three underscores are CloudKit's system fields.
    ///
    /// In `cloudkit.share` (`recordType`), the fields CloudKit gives shares (`cloudkit.title`,
    /// `cloudkit.type`, `cloudkit.thumbnailImageData`) are names too.
    public static func fieldNameProblem(_ name: String, recordType: String? = nil) -> String? {
        if isSystemField(name) {
            return "'\(name)' starts with '___', which CloudKit keeps for system fields"
        }
        if recordType == shareType && shareFields.contains(where: { $0.name == name }) { return nil }
        guard let problem = identifierProblem(name, what: "a field name", allowLeadingUnderscore: true) else {
            return nil
        }
        if name.hasPrefix("cloudkit.") {
            let known = shareFields.map(\.name).joined(separator: ", ")
            return recordType == shareType
                ? "'\(name)' is not a field CloudKit gives shares (those are \(known)); \(problem)"
                : "'\(name)' is a name of CloudKit's own, which only \(shareType) has (\(known)); \(problem)"
        }
        return problem
    }

    static func identifierProblem(_ name: String, what: String, allowLeadingUnderscore: Bool) -> String? {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty else { return "\(what) cannot be empty" }
        if bytes.count > maxIdentifierLength {
            return "\(what) has at most \(maxIdentifierLength) characters"
        }
        var index = 0
        if allowLeadingUnderscore && bytes[0] == UInt8(ascii: "_") { index = 1 }
        guard index < bytes.count, isLetter(bytes[index]) else {
            return "\(what) must start with a letter: '\(name)'"
        }
        for byte in bytes[(index + 1)...] where !(isLetter(byte) || isDigit(byte) || byte == UInt8(ascii: "_")) {
            return "\(what) may hold only letters, digits and '_': '\(name)'"
        }
        return nil
    }

    @inline(__always) static func isLetter(_ b: UInt8) -> Bool {
        (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
    }

    @inline(__always) static func isDigit(_ b: UInt8) -> Bool {
        b >= 0x30 && b <= 0x39
    }
}
