/// A parsed JSON value. Numbers keep their source text so that an INT64 is read exactly and a
/// DOUBLE keeps every digit; objects keep their members in source order.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// How the value reads in an error message: its kind and a short excerpt.
    public var summary: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .number(let n):
            return
                "the number \(n.count > 40 ? n.prefix(20) + "…" + n.suffix(6) + " (\(n.count) digits)" : Substring(n))"
        case .string(let s): return "the string \"\(s.count > 60 ? s.prefix(57) + "..." : Substring(s))\""
        case .array(let a): return "an array of \(a.count)"
        case .object: return "an object"
        }
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var objectValue: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }
}

/// A JSON object's members, in source order.
public struct JSONObject: Sendable, Equatable {
    public struct Member: Sendable, Equatable {
        public var key: String
        public var value: JSONValue

        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    public var members: [Member]

    public init(_ members: [Member] = []) {
        self.members = members
    }

    public subscript(key: String) -> JSONValue? {
        for member in members where member.key == key { return member.value }
        return nil
    }

    public var keys: [String] { members.map(\.key) }
}

/// One step of a path into a JSON document, for error messages: `records[3].fields.title.value`.
public enum JSONPathComponent: Sendable, Hashable {
    case key(String)
    case index(Int)
}

extension Array where Element == JSONPathComponent {
    /// The path as people read it: `fields.dueDate.value`, `[12].recordName`.
    public var pathString: String {
        var out = ""
        for component in self {
            switch component {
            case .key(let key):
                let plain = key.unicodeScalars.allSatisfy {
                    $0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_"
                }
                if plain && !key.isEmpty {
                    out += out.isEmpty ? key : "." + key
                } else {
                    out += "[\"" + key + "\"]"
                }
            case .index(let index):
                out += "[\(index)]"
            }
        }
        return out
    }
}

/// Any JSON value through `Codable`, for messages whose parts are any JSON (a CloudKit field's
/// value). A number that is an integer (`1.0` too) is kept as its digits, anything else as a
/// double's text; an integer beyond Int64 is read as a double, as JSONSerialization reads it.
/// An object's members come in the order the decoder gives them (JSONDecoder's is none in
/// particular: compare two objects read this way by their members, not their order), and go
/// out in the object's.
extension JSONValue: Codable {
    public init(from decoder: Decoder) throws {
        if let container = try? decoder.container(keyedBy: JSONObjectKey.self) {
            var members: [JSONObject.Member] = []
            for key in container.allKeys {
                members.append(
                    JSONObject.Member(key: key.stringValue, value: try container.decode(JSONValue.self, forKey: key)))
            }
            self = .object(JSONObject(members))
            return
        }
        if var container = try? decoder.unkeyedContainer() {
            var elements: [JSONValue] = []
            while !container.isAtEnd { elements.append(try container.decode(JSONValue.self)) }
            self = .array(elements)
            return
        }
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let bool = try? container.decode(Bool.self) {
            self = .bool(bool)
        } else if let integer = try? container.decode(Int64.self) {
            self = .number(String(integer))
        } else if let double = try? container.decode(Double.self) {
            self = .number("\(double)")
        } else {
            self = .string(try container.decode(String.self))
        }
    }

    public func encode(to encoder: Encoder) throws {
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let bool):
            var container = encoder.singleValueContainer()
            try container.encode(bool)
        case .number(let text):
            var container = encoder.singleValueContainer()
            if let integer = Int64(text) {
                try container.encode(integer)
            } else if let double = Double(text) {
                try container.encode(double)
            } else {
                throw EncodingError.invalidValue(
                    text, EncodingError.Context(codingPath: encoder.codingPath, debugDescription: "not a number"))
            }
        case .string(let string):
            var container = encoder.singleValueContainer()
            try container.encode(string)
        case .array(let elements):
            var container = encoder.unkeyedContainer()
            for element in elements { try container.encode(element) }
        case .object(let object):
            var container = encoder.container(keyedBy: JSONObjectKey.self)
            for member in object.members { try container.encode(member.value, forKey: JSONObjectKey(member.key)) }
        }
    }
}

/// Any key of a JSON object, for Codable models whose keys are not all known in advance
/// (``JSONValue``'s objects, a message's keys no model names).
public struct JSONObjectKey: CodingKey, Sendable {
    public var stringValue: String
    public var intValue: Int? { nil }
    public init(_ name: String) { stringValue = name }
    public init?(stringValue: String) { self.stringValue = stringValue }
    public init?(intValue: Int) { nil }

    /// The members of `container` whose keys are not in `modelled`.
    public static func others(in container: KeyedDecodingContainer<JSONObjectKey>, except modelled: Set<String>) throws
        -> [String: JSONValue]
    {
        var others: [String: JSONValue] = [:]
        for key in container.allKeys where !modelled.contains(key.stringValue) {
            others[key.stringValue] = try container.decode(JSONValue.self, forKey: key)
        }
        return others
    }
}
