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
