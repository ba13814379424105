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
    /// The logical line exactly as read (unfolded), when the parser was asked to keep it.
    public var raw: String?

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
        guard text.utf8.contains(where: ICalText.needsEscape) else { return text }
        var out: [UInt8] = []
        appendEscaped(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    static func needsEscape(_ byte: UInt8) -> Bool {
        byte == 0x5C || byte == 0x3B || byte == 0x2C || byte == 0x0A || byte == 0x0D
    }

    /// Appends `text` escaped; a carriage return is dropped (CRLF inside a value is a newline).
    @inline(__always)
    static func appendEscaped(_ text: String, to out: inout [UInt8]) {
        for byte in text.utf8 {
            switch byte {
            case 0x5C, 0x3B, 0x2C:
                out.append(0x5C)
                out.append(byte)
            case 0x0A:
                out.append(0x5C)
                out.append(UInt8(ascii: "n"))
            case 0x0D: continue
            default: out.append(byte)
            }
        }
    }

    /// Whether `text.uppercased() == upper` (`upper` is ASCII capitals), without making a
    /// string when `text` is ASCII.
    public static func equalsIgnoringCase(_ text: String, _ upper: StaticString) -> Bool {
        let expected = UnsafeBufferPointer(start: upper.utf8Start, count: upper.utf8CodeUnitCount)
        // Outside ASCII a letter can upper-case to an ASCII one (ı to I, ſ to S).
        let match: Bool? = text.withUTF8Bytes { bytes in
            if bytes.contains(where: { $0 >= 0x80 }) { return nil }
            guard bytes.count == expected.count else { return false }
            for index in 0..<bytes.count {
                let byte = bytes[index]
                if (byte >= 0x61 && byte <= 0x7A ? byte - 0x20 : byte) != expected[index] { return false }
            }
            return true
        }
        return match ?? (text.uppercased() == upper.description)
    }

    /// Undoes the escaping; a stray backslash before another character keeps that character.
    public static func unescape(_ text: String) -> String {
        guard text.withUTF8Bytes({ $0.contains(0x5C) }) else { return text }
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        var escaped = false
        for byte in text.utf8 {
            if escaped {
                out.append(byte == UInt8(ascii: "n") || byte == UInt8(ascii: "N") ? 0x0A : byte)
                escaped = false
            } else if byte == 0x5C {
                escaped = true
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Splits a multi-valued TEXT (CATEGORIES) on unescaped commas, unescaping each part.
    public static func splitList(_ text: String) -> [String] {
        guard text.withUTF8Bytes({ $0.contains { $0 == 0x5C || $0 == 0x2C } }) else { return [text] }
        var parts: [String] = []
        var current: [UInt8] = []
        var escaped = false
        for byte in text.utf8 {
            if escaped {
                current.append(byte == UInt8(ascii: "n") || byte == UInt8(ascii: "N") ? 0x0A : byte)
                escaped = false
            } else if byte == 0x5C {
                escaped = true
            } else if byte == 0x2C {
                parts.append(String(decoding: current, as: UTF8.self))
                current.removeAll(keepingCapacity: true)
            } else {
                current.append(byte)
            }
        }
        parts.append(String(decoding: current, as: UTF8.self))
        return parts
    }
}

/// Writes content lines: CRLF line ends, lines folded at 75 octets without splitting a UTF-8
/// sequence, parameter values quoted when they hold `:`, `;` or `,`.
public struct ICalLineWriter: Sendable {
    public private(set) var bytes: [UInt8] = []
    /// The line being built, before folding.
    private var pending: [UInt8] = []

    public init() {}

    public mutating func line(_ name: String, _ value: String) {
        line(name, [], value)
    }

    public mutating func line(_ name: String, _ parameters: [(String, String)], _ value: String) {
        begin(name, parameters)
        pending.append(contentsOf: value.utf8)
        finish()
    }

    /// A logical line written as it is, folded.
    public mutating func raw(_ line: String) {
        pending.removeAll(keepingCapacity: true)
        pending.append(contentsOf: line.utf8)
        finish()
    }

    /// A TEXT value (RFC 5545 §3.3.11), escaped as it is written.
    public mutating func text(_ name: String, _ value: String) {
        text(name, [], value)
    }

    public mutating func text(_ name: String, _ parameters: [(String, String)], _ value: String) {
        begin(name, parameters)
        ICalText.appendEscaped(value, to: &pending)
        finish()
    }

    /// A UTC date-time such as `20260112T090000Z`, from milliseconds since 1970.
    public mutating func utc(_ name: String, _ ms: Int64) {
        begin(name, [])
        CalendarTime.appendBasic(LocalDateTime(wallSeconds: ISO8601.floorDiv(ms, 1000)), date: false, to: &pending)
        pending.append(UInt8(ascii: "Z"))
        finish()
    }

    private mutating func begin(_ name: String, _ parameters: [(String, String)]) {
        pending.removeAll(keepingCapacity: true)
        pending.append(contentsOf: name.utf8)
        for (key, parameterValue) in parameters {
            pending.append(0x3B)
            pending.append(contentsOf: key.utf8)
            pending.append(0x3D)
            let needsQuotes = parameterValue.utf8.contains { (byte: UInt8) -> Bool in
                byte == 0x3A || byte == 0x3B || byte == 0x2C
            }
            if needsQuotes { pending.append(0x22) }
            // A parameter value cannot hold a double quote (RFC 5545 §3.1); it becomes a single quote.
            for byte in parameterValue.utf8 { pending.append(byte == 0x22 ? 0x27 : byte) }
            if needsQuotes { pending.append(0x22) }
        }
        pending.append(0x3A)
    }

    /// Appends the pending line, folded at 75 octets, never inside a UTF-8 sequence.
    private mutating func finish() {
        let count = pending.count
        if count <= 75 {
            bytes.append(contentsOf: pending)
            bytes.append(0x0D)
            bytes.append(0x0A)
            return
        }
        var start = 0
        var first = true
        while start < count {
            let room = first ? 75 : 74  // a continuation line starts with a space
            var stop = min(start + room, count)
            while stop < count && stop > start && (pending[stop] & 0xC0) == 0x80 { stop -= 1 }
            if !first { bytes.append(0x20) }
            bytes.append(contentsOf: pending[start..<stop])
            bytes.append(0x0D)
            bytes.append(0x0A)
            start = stop
            first = false
        }
    }

    public mutating func take() -> [UInt8] {
        defer { bytes.removeAll(keepingCapacity: true) }
        return bytes
    }
}
