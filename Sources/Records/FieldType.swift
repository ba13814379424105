/// The value types of CloudKit's schema language.
public enum PrimitiveType: String, Sendable, CaseIterable, Hashable {
    case asset = "ASSET"
    case bytes = "BYTES"
    case double = "DOUBLE"
    case int64 = "INT64"
    case location = "LOCATION"
    case number = "NUMBER"
    case reference = "REFERENCE"
    case string = "STRING"
    case timestamp = "TIMESTAMP"

    /// The types CloudKit can encrypt (`ENCRYPTED STRING`, …). Assets are always encrypted and
    /// references never are, so both are refused.
    public var canBeEncrypted: Bool {
        switch self {
        case .bytes, .string, .double, .int64, .location, .timestamp: return true
        case .asset, .reference, .number: return false
        }
    }

    /// The types CloudKit can index at all.
    public var canBeIndexed: Bool {
        self != .bytes && self != .asset
    }
}

/// The preferred representation of a legacy `NUMBER` field.
public enum NumberPreference: String, Sendable, Hashable {
    case int64 = "INT64"
    case double = "DOUBLE"
}

/// A field's declared type: a primitive, optionally a `LIST<…>` of it, optionally `ENCRYPTED`.
public struct FieldType: Hashable, Sendable, CustomStringConvertible {
    public var primitive: PrimitiveType
    public var isList: Bool
    public var isEncrypted: Bool
    /// For `NUMBER PREFERRED AS …`; nil for every other type and for a bare `NUMBER`.
    public var numberPreference: NumberPreference?

    public init(
        _ primitive: PrimitiveType, list: Bool = false, encrypted: Bool = false,
        numberPreference: NumberPreference? = nil
    ) {
        self.primitive = primitive
        self.isList = list
        self.isEncrypted = encrypted
        self.numberPreference = numberPreference
    }

    public static let string = FieldType(.string)
    public static let int64 = FieldType(.int64)
    public static let double = FieldType(.double)
    public static let timestamp = FieldType(.timestamp)
    public static let bytes = FieldType(.bytes)
    public static let reference = FieldType(.reference)
    public static let asset = FieldType(.asset)
    public static let location = FieldType(.location)

    public static func list(_ element: PrimitiveType, encrypted: Bool = false) -> FieldType {
        FieldType(element, list: true, encrypted: encrypted)
    }

    /// The element type: the same type without `LIST`.
    public var element: FieldType {
        var copy = self
        copy.isList = false
        return copy
    }

    /// The type in schema-language form: `LIST<ENCRYPTED STRING>`, `NUMBER PREFERRED AS INT64`.
    public var description: String {
        var base = primitive.rawValue
        if let numberPreference { base += " PREFERRED AS \(numberPreference.rawValue)" }
        if isEncrypted { base = "ENCRYPTED " + base }
        return isList ? "LIST<\(base)>" : base
    }

    /// The type name CloudKit Web Services uses for a value in a record's `fields`: `STRING`,
    /// `ASSETID`, `TIMESTAMP_LIST`. An encrypted field's value travels under its plain type
    /// with `"isEncrypted": true` beside it (see ``marksEncrypted``), except encrypted BYTES,
    /// which CloudKit names `ENCRYPTED_BYTES`. (Names such as `ENCRYPTED_STRING` exist in
    /// CloudKit's schema only; a value sent with one is refused. Earlier ckport files used them,
    /// and they are still read.)
    public var webServicesName: String {
        var name: String
        switch primitive {
        case .asset: name = "ASSETID"
        case .number: name = numberPreference == .int64 ? "INT64" : "DOUBLE"
        default: name = primitive.rawValue
        }
        if isEncrypted && primitive == .bytes && !isList { name = "ENCRYPTED_" + name }
        if isList { name += "_LIST" }
        return name
    }

    /// Whether a value of this type carries `"isEncrypted": true` beside its type name.
    public var marksEncrypted: Bool {
        isEncrypted && !(primitive == .bytes && !isList)
    }

    /// Appends `webServicesName` as UTF-8 without building a String (the export hot path).
    public func appendWebServicesName(to out: inout [UInt8]) {
        if !isEncrypted && !isList && primitive != .asset && primitive != .number {
            out.append(contentsOf: primitive.rawValue.utf8)
        } else {
            out.append(contentsOf: webServicesName.utf8)
        }
    }

    /// Appends what follows a value in a record's `fields`: `,"type":"STRING"}`, or
    /// `,"type":"STRING","isEncrypted":true}` for an encrypted field.
    public func appendTypeClosing(to out: inout [UInt8]) {
        out.append(contentsOf: #","type":""#.utf8)
        appendWebServicesName(to: &out)
        out.append(contentsOf: marksEncrypted ? #"","isEncrypted":true}"#.utf8 : #""}"#.utf8)
    }

    private static let knownWebServicesNames: [String: FieldType] = {
        var table: [String: FieldType] = [:]
        for primitive in PrimitiveType.allCases where primitive != .number {
            for list in [false, true] {
                let type = FieldType(primitive, list: list)
                table[type.webServicesName] = type
            }
        }
        table["ENCRYPTED_BYTES"] = FieldType(.bytes, encrypted: true)
        return table
    }()

    /// The name CloudKit gives an empty list whose element type it no longer knows.
    public static let unknownListName = "UNKNOWN_LIST"

    /// Reads a Web Services type name, the common spellings from a table.
    public static func parseWebServicesName(_ name: String) -> FieldType? {
        knownWebServicesNames[name] ?? FieldType(webServicesName: name)
    }

    /// Reads a Web Services type name back. `NUMBER_INT64` and `NUMBER_DOUBLE`, `ASSET` and
    /// `LIST<…>`-free spellings found in older exports are accepted too.
    public init?(webServicesName: String) {
        var name = Substring(webServicesName.uppercased())
        var list = false
        var encrypted = false
        if name.hasSuffix("_LIST") {
            list = true
            name = name.dropLast(5)
        }
        if name.hasPrefix("ENCRYPTED_") {
            encrypted = true
            name = name.dropFirst(10)
        }
        let primitive: PrimitiveType
        switch name {
        case "ASSETID", "ASSET": primitive = .asset
        case "NUMBER_INT64": primitive = .int64
        case "NUMBER_DOUBLE": primitive = .double
        default:
            guard let known = PrimitiveType(rawValue: String(name)), known != .number else { return nil }
            primitive = known
        }
        self.init(primitive, list: list, encrypted: encrypted)
    }

    /// Whether a value of `other`'s Web Services type may be stored in a field of this type.
    /// Encryption is a property of the field, so it is not compared; `NUMBER` takes both numbers.
    public func accepts(_ other: FieldType) -> Bool {
        guard isList == other.isList else { return false }
        if primitive == .number { return other.primitive == .int64 || other.primitive == .double }
        return primitive == other.primitive
    }
}
