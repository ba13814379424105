import Records

/// One iCalendar property: `NAME;PARAM=value;PARAM="quoted,value":value`.
public struct ContentLine: Sendable, Hashable {
    public var name: String
    /// Parameters in order; a parameter may hold a list of values.
    public var parameters: [(name: String, values: [String])]
    /// The raw value, still escaped (TEXT unescaping depends on the property).
    public var value: String
    /// The physical line the property starts on, for error messages.
    public var line: Int

    public init(name: String, parameters: [(name: String, values: [String])] = [], value: String, line: Int = 0) {
        self.name = name
        self.parameters = parameters
        self.value = value
        self.line = line
    }

    public func parameter(_ name: String) -> String? {
        parameters.first { $0.name == name }?.values.first
    }

    public func parameterValues(_ name: String) -> [String] {
        parameters.first { $0.name == name }?.values ?? []
    }

    public static func == (lhs: ContentLine, rhs: ContentLine) -> Bool {
        lhs.name == rhs.name && lhs.value == rhs.value && lhs.line == rhs.line
            && lhs.parameters.map { [$0.name] + $0.values } == rhs.parameters.map { [$0.name] + $0.values }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(value)
    }
}

/// TEXT values (RFC 5545 §3.3.11): backslash, semicolon, comma and newline are escaped.
public enum ICalText {
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case ";": out += "\\;"
            case ",": out += "\\,"
            case "\n": out += "\\n"
            case "\r": continue
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Undoes the escaping; a stray backslash before another character keeps that character.
    public static func unescape(_ text: String) -> String {
        guard text.contains("\\") else { return text }
        var out = ""
        var escaped = false
        for scalar in text.unicodeScalars {
            if escaped {
                switch scalar {
                case "n", "N": out += "\n"
                default: out.unicodeScalars.append(scalar)
                }
                escaped = false
            } else if scalar == "\\" {
                escaped = true
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Splits a multi-valued TEXT (CATEGORIES) on unescaped commas, unescaping each part.
    public static func splitList(_ text: String) -> [String] {
        var parts: [String] = []
        var current = ""
        var escaped = false
        for scalar in text.unicodeScalars {
            if escaped {
                current.unicodeScalars.append("\\")
                current.unicodeScalars.append(scalar)
                escaped = false
            } else if scalar == "\\" {
                escaped = true
            } else if scalar == "," {
                parts.append(unescape(current))
                current = ""
            } else {
                current.unicodeScalars.append(scalar)
            }
        }
        parts.append(unescape(current))
        return parts
    }
}

/// Writes content lines: CRLF line ends, lines folded at 75 octets without splitting a UTF-8
/// sequence, parameter values quoted when they hold `:`, `;` or `,`.
public struct ICalLineWriter: Sendable {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    public mutating func line(_ name: String, _ value: String) {
        line(name, [], value)
    }

    public mutating func line(_ name: String, _ parameters: [(String, String)], _ value: String) {
        var text = name
        for (key, parameterValue) in parameters {
            text += ";" + key + "="
            let needsQuotes = parameterValue.contains(where: { $0 == ":" || $0 == ";" || $0 == "," })
            text += needsQuotes ? "\"" + parameterValue.replacingQuotes() + "\"" : parameterValue
        }
        text += ":" + value
        fold(text)
    }

    /// Appends `text` as one content line, folded at 75 octets.
    mutating func fold(_ text: String) {
        var utf8 = Array(text.utf8)
        var start = 0
        var first = true
        while start < utf8.count {
            let room = first ? 75 : 74 // a continuation line starts with a space
            var stop = min(start + room, utf8.count)
            // Never end a physical line inside a UTF-8 sequence.
            while stop < utf8.count && stop > start && (utf8[stop] & 0xC0) == 0x80 { stop -= 1 }
            if !first { bytes.append(0x20) }
            bytes.append(contentsOf: utf8[start..<stop])
            bytes.append(0x0D)
            bytes.append(0x0A)
            start = stop
            first = false
        }
        if utf8.isEmpty { bytes += [0x0D, 0x0A] }
        utf8.removeAll()
    }

    public mutating func take() -> [UInt8] {
        defer { bytes.removeAll(keepingCapacity: true) }
        return bytes
    }
}

extension String {
    /// Parameter values cannot hold a double quote (RFC 5545 §3.1); it becomes a single quote.
    func replacingQuotes() -> String { String(map { $0 == "\"" ? "'" : $0 }) }
}
