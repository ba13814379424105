/// JSON text that does not parse, at a byte offset of the text given to the parser.
public struct JSONSyntaxError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var offset: Int
    public var message: String

    public var description: String { "byte \(offset): \(message)" }

    package init(offset: Int, message: String) {
        self.offset = offset
        self.message = message
    }
}

/// A strict RFC 8259 parser over UTF-8 bytes.
///
/// Strings must be valid UTF-8 (nothing is replaced), a key may appear once per object, and
/// nesting stops at 512 levels so hostile input cannot exhaust the stack.
public struct JSONParser {
    public static let maxDepth = 512

    @usableFromInline package let bytes: UnsafeRawBufferPointer
    @usableFromInline package var i = 0
    private var depth = 0

    package init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// Parses one JSON value filling `bytes` (whitespace around it allowed).
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONSyntaxError) -> JSONValue {
        var parser = JSONParser(bytes)
        parser.skipWhitespace()
        let value = try parser.parseValue()
        parser.skipWhitespace()
        if parser.i < bytes.count {
            throw parser.error("unexpected \(parser.describeCurrent()) after the JSON value")
        }
        return value
    }

    public static func parse(_ bytes: [UInt8]) throws(JSONSyntaxError) -> JSONValue {
        do {
            return try bytes.withUnsafeBytes { buffer in try parse(buffer) }
        } catch let error as JSONSyntaxError {
            throw error
        } catch {
            fatalError("unreachable")
        }
    }

    public static func parse(_ text: String) throws(JSONSyntaxError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    /// The byte offset where the value at `path` starts, or nil when the path is not there.
    /// Used to turn a JSON path in an error into a line and column.
    public static func offset(of path: [JSONPathComponent], in bytes: UnsafeRawBufferPointer) -> Int? {
        var parser = JSONParser(bytes)
        parser.skipWhitespace()
        return try? parser.locate(path[...])
    }

    // MARK: Values

    package mutating func parseValue() throws(JSONSyntaxError) -> JSONValue {
        guard i < bytes.count else { throw error("unexpected end of JSON, expected a value") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return .object(try parseObject())
        case UInt8(ascii: "["): return .array(try parseArray())
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw error("unexpected \(describeCurrent()), expected a value")
        }
    }

    private mutating func parseObject() throws(JSONSyntaxError) -> JSONObject {
        try enter()
        i += 1
        var members: [JSONObject.Member] = []
        members.reserveCapacity(8)
        skipWhitespace()
        if i < bytes.count && bytes[i] == UInt8(ascii: "}") {
            i += 1
            depth -= 1
            return JSONObject(members)
        }
        var seen: Set<String>? = nil
        while true {
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else {
                throw error("expected a key in double quotes, found \(describeCurrent())")
            }
            let keyStart = i
            let key = try parseString()
            if members.count < 16 {
                if members.contains(where: { $0.key == key }) {
                    throw JSONSyntaxError(offset: keyStart, message: "key \"\(key)\" appears twice in one object")
                }
            } else {
                if seen == nil { seen = Set(members.map(\.key)) }
                if !seen!.insert(key).inserted {
                    throw JSONSyntaxError(offset: keyStart, message: "key \"\(key)\" appears twice in one object")
                }
            }
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else {
                throw error("expected ':' after key \"\(key)\", found \(describeCurrent())")
            }
            i += 1
            skipWhitespace()
            let value = try parseValue()
            members.append(JSONObject.Member(key: key, value: value))
            skipWhitespace()
            guard i < bytes.count else { throw error("unexpected end of JSON inside an object, expected ',' or '}'") }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            if bytes[i] == UInt8(ascii: "}") {
                i += 1
                break
            }
            throw error("expected ',' or '}' in an object, found \(describeCurrent())")
        }
        depth -= 1
        return JSONObject(members)
    }

    private mutating func parseArray() throws(JSONSyntaxError) -> [JSONValue] {
        try enter()
        i += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if i < bytes.count && bytes[i] == UInt8(ascii: "]") {
            i += 1
            depth -= 1
            return elements
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            guard i < bytes.count else { throw error("unexpected end of JSON inside an array, expected ',' or ']'") }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            if bytes[i] == UInt8(ascii: "]") {
                i += 1
                break
            }
            throw error("expected ',' or ']' in an array, found \(describeCurrent())")
        }
        depth -= 1
        return elements
    }

    package mutating func parseString() throws(JSONSyntaxError) -> String {
        let start = i
        i += 1
        let contentStart = i
        // Fast path: no escapes. Text that is all ASCII needs no UTF-8 check of its own.
        var high: UInt8 = skipPlainWords(&i)
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                let slice = UnsafeRawBufferPointer(rebasing: bytes[contentStart..<i])
                i += 1
                if high < 0x80 { return String(decoding: slice, as: UTF8.self) }
                guard let string = UTF8Validation.string(slice) else {
                    let offset = UTF8Validation.firstInvalidOffset(slice.bindMemory(to: UInt8.self)) ?? 0
                    throw JSONSyntaxError(offset: contentStart + offset, message: "a string is not valid UTF-8")
                }
                return string
            }
            if b == UInt8(ascii: "\\") { break }
            if b < 0x20 {
                throw error("a control character (0x\(String(b, radix: 16))) must be escaped inside a string")
            }
            high |= b
            i += 1
        }
        guard i < bytes.count else { throw JSONSyntaxError(offset: start, message: "a string is not closed") }
        var out = Array(UnsafeRawBufferPointer(rebasing: bytes[contentStart..<i]))
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                i += 1
                guard let string = out.withUnsafeBytes({ UTF8Validation.string($0) }) else {
                    throw JSONSyntaxError(offset: start, message: "a string is not valid UTF-8")
                }
                return string
            }
            if b < 0x20 {
                throw error("a control character (0x\(String(b, radix: 16))) must be escaped inside a string")
            }
            if b != UInt8(ascii: "\\") {
                out.append(b)
                i += 1
                continue
            }
            i += 1
            guard i < bytes.count else { break }
            switch bytes[i] {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                let escapeStart = i - 1
                var scalar = try hex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard i + 2 < bytes.count, bytes[i + 1] == UInt8(ascii: "\\"), bytes[i + 2] == UInt8(ascii: "u")
                    else {
                        throw JSONSyntaxError(offset: escapeStart, message: "a \\u escape holds half a surrogate pair")
                    }
                    i += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else {
                        throw JSONSyntaxError(offset: escapeStart, message: "a \\u escape holds half a surrogate pair")
                    }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw JSONSyntaxError(offset: escapeStart, message: "a \\u escape holds half a surrogate pair")
                }
                out.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
            default:
                throw error("unknown escape '\\\(describeByte(bytes[i]))' in a string")
            }
            i += 1
        }
        throw JSONSyntaxError(offset: start, message: "a string is not closed")
    }

    /// Moves `index` eight bytes at a time while none of them is a quote, a backslash or a
    /// control character (the usual bit tricks: a byte is zero in x - 0x01… & ~x & 0x80…), and
    /// returns 0x80 when a byte passed over is not ASCII, else 0. The caller finishes byte by byte.
    @inlinable @inline(__always) package func skipPlainWords(_ index: inout Int) -> UInt8 {
        guard let base = bytes.baseAddress else { return 0 }
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var wide: UInt64 = 0
        while index + 8 <= bytes.count {
            let word = (base + index).loadUnaligned(as: UInt64.self)
            let quote = word ^ (ones &* 0x22)
            let backslash = word ^ (ones &* 0x5C)
            let stops =
                (((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((word &- ones &* 0x20) & ~word))
                & highs
            if stops != 0 {
                // The lowest flagged byte is exact (only bytes above a true hit can be false
                // ones): stop on it, counting the bytes before it.
                let before = stops.trailingZeroBitCount / 8
                if before > 0 { wide |= word & (UInt64.max >> (64 - 8 * UInt64(before))) }
                index += before
                break
            }
            wide |= word
            index += 8
        }
        return wide & highs != 0 ? 0x80 : 0
    }

    /// Reads the four hex digits after `\u`; leaves `i` on the last digit.
    private mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard i + 4 < bytes.count else { throw error("a \\u escape needs four hex digits") }
        var value: UInt32 = 0
        for k in 1...4 {
            let b = bytes[i + k]
            let digit: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - 48)
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - 87)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - 55)
            default: throw JSONSyntaxError(offset: i + k, message: "a \\u escape needs four hex digits")
            }
            value = value << 4 | digit
        }
        i += 4
        return value
    }

    package mutating func parseNumber() throws(JSONSyntaxError) -> String {
        let start = i
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard i < bytes.count, isDigit(bytes[i]) else { throw error("a number needs digits") }
        if bytes[i] == UInt8(ascii: "0") {
            i += 1
            if i < bytes.count && isDigit(bytes[i]) { throw error("a number cannot start with 0") }
        } else {
            while i < bytes.count && isDigit(bytes[i]) { i += 1 }
        }
        if i < bytes.count && bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard i < bytes.count, isDigit(bytes[i]) else { throw error("a number needs digits after '.'") }
            while i < bytes.count && isDigit(bytes[i]) { i += 1 }
        }
        if i < bytes.count && (bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E")) {
            i += 1
            if i < bytes.count && (bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-")) { i += 1 }
            guard i < bytes.count, isDigit(bytes[i]) else { throw error("a number needs digits in its exponent") }
            while i < bytes.count && isDigit(bytes[i]) { i += 1 }
        }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
    }

    // Walking a container without building it, for a caller that reads some values and skips
    // others:
    //
    //     if try parser.walkObject() { repeat { let key = try parser.walkKey(); …read or skip… } while try parser.walkNextMember() }
    //     if try parser.walkArray() { repeat { …read or skip… } while try parser.walkNextElement() }

    /// Consumes `{`; true when a member follows, false for `{}`.
    package mutating func walkObject() throws(JSONSyntaxError) -> Bool {
        try open(UInt8(ascii: "{"), UInt8(ascii: "}"), "an object")
    }

    /// Consumes `[`; true when an element follows, false for `[]`.
    package mutating func walkArray() throws(JSONSyntaxError) -> Bool {
        try open(UInt8(ascii: "["), UInt8(ascii: "]"), "an array")
    }

    /// Reads `"key":` and leaves the parser on the member's value.
    package mutating func walkKey() throws(JSONSyntaxError) -> String {
        skipWhitespace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else {
            throw error("expected a key in double quotes, found \(describeCurrent())")
        }
        let key = try parseString()
        skipWhitespace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else {
            throw error("expected ':' after key \"\(key)\", found \(describeCurrent())")
        }
        i += 1
        skipWhitespace()
        return key
    }

    /// After a member's value: true when another follows, false past the closing brace.
    package mutating func walkNextMember() throws(JSONSyntaxError) -> Bool {
        try next(UInt8(ascii: "}"), "an object")
    }

    /// After an element: true when another follows, false past the closing bracket.
    package mutating func walkNextElement() throws(JSONSyntaxError) -> Bool {
        try next(UInt8(ascii: "]"), "an array")
    }

    private mutating func open(_ opening: UInt8, _ closing: UInt8, _ what: String) throws(JSONSyntaxError) -> Bool {
        skipWhitespace()
        guard i < bytes.count, bytes[i] == opening else { throw error("expected \(what), found \(describeCurrent())") }
        try enter()
        i += 1
        skipWhitespace()
        guard i < bytes.count, bytes[i] == closing else { return true }
        i += 1
        depth -= 1
        return false
    }

    private mutating func next(_ closing: UInt8, _ what: String) throws(JSONSyntaxError) -> Bool {
        skipWhitespace()
        guard i < bytes.count else { throw error("unexpected end of JSON inside \(what)") }
        if bytes[i] == UInt8(ascii: ",") {
            i += 1
            skipWhitespace()
            return true
        }
        guard bytes[i] == closing else {
            throw error("expected ',' or '\(describeByte(closing))' in \(what), found \(describeCurrent())")
        }
        i += 1
        depth -= 1
        return false
    }

    /// Steps over one value without building it: brackets, separators, literals and string
    /// ends are checked, nesting is limited as in ``parse(_:)``, but the text of strings and
    /// numbers is not — for finding where a value ends when whoever reads it later parses it
    /// strictly.
    package mutating func skipValue() throws(JSONSyntaxError) {
        guard i < bytes.count else { throw error("unexpected end of JSON, expected a value") }
        switch bytes[i] {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            let close = bytes[i] == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
            let isObject = close == UInt8(ascii: "}")
            try enter()
            i += 1
            skipWhitespace()
            if i < bytes.count && bytes[i] == close {
                i += 1
                depth -= 1
                return
            }
            while true {
                skipWhitespace()
                if isObject {
                    guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else {
                        throw error("expected a key in double quotes, found \(describeCurrent())")
                    }
                    try skipString()
                    skipWhitespace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else {
                        throw error("expected ':' after a key, found \(describeCurrent())")
                    }
                    i += 1
                    skipWhitespace()
                }
                try skipValue()
                skipWhitespace()
                guard i < bytes.count else {
                    throw error("unexpected end of JSON inside \(isObject ? "an object" : "an array")")
                }
                if bytes[i] == UInt8(ascii: ",") {
                    i += 1
                    continue
                }
                if bytes[i] == close {
                    i += 1
                    break
                }
                throw error("expected ',' or '\(describeByte(close))', found \(describeCurrent())")
            }
            depth -= 1
        case UInt8(ascii: "\""): try skipString()
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            i += 1
            while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"),
                    UInt8(ascii: "+"), UInt8(ascii: "-"):
                    i += 1
                default: return
                }
            }
        default: throw error("unexpected \(describeCurrent()), expected a value")
        }
    }

    /// Steps over a string from its opening quote to just past its closing one.
    private mutating func skipString() throws(JSONSyntaxError) {
        i += 1
        while true {
            _ = skipPlainWords(&i)
            guard i < bytes.count else { throw error("unexpected end of JSON inside a string") }
            switch bytes[i] {
            case UInt8(ascii: "\""):
                i += 1
                return
            case UInt8(ascii: "\\"): i += 2
            default: i += 1
            }
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let count = word.utf8CodeUnitCount
        guard i + count <= bytes.count,
            memcmp(bytes.baseAddress! + i, word.utf8Start, count) == 0
        else {
            throw error("unexpected \(describeCurrent()), expected a value")
        }
        i += count
    }

    // MARK: Locating a path

    private mutating func locate(_ path: ArraySlice<JSONPathComponent>) throws(JSONSyntaxError) -> Int? {
        guard let first = path.first else { return i }
        guard i < bytes.count else { return nil }
        switch (first, bytes[i]) {
        case (.key(let wanted), UInt8(ascii: "{")):
            i += 1
            skipWhitespace()
            if i < bytes.count && bytes[i] == UInt8(ascii: "}") { return nil }
            while i < bytes.count {
                skipWhitespace()
                let key = try parseString()
                skipWhitespace()
                i += 1  // ':'
                skipWhitespace()
                if key == wanted { return try locate(path.dropFirst()) }
                _ = try parseValue()
                skipWhitespace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ",") else { return nil }
                i += 1
            }
            return nil
        case (.index(let wanted), UInt8(ascii: "[")):
            i += 1
            var index = 0
            while i < bytes.count {
                skipWhitespace()
                if index == wanted { return try locate(path.dropFirst()) }
                _ = try parseValue()
                skipWhitespace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ",") else { return nil }
                i += 1
                index += 1
            }
            return nil
        default:
            return nil
        }
    }

    // MARK: Helpers

    private mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        if depth > JSONParser.maxDepth { throw error("JSON nests deeper than \(JSONParser.maxDepth) levels") }
    }

    @inlinable @inline(__always) package mutating func skipWhitespace() {
        while i < bytes.count {
            switch bytes[i] {
            case 0x20, 0x0A, 0x0D, 0x09: i += 1
            default: return
            }
        }
    }

    @inline(__always) private func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    private func error(_ message: String) -> JSONSyntaxError {
        JSONSyntaxError(offset: i, message: message)
    }

    private func describeCurrent() -> String {
        guard i < bytes.count else { return "end of input" }
        return "'\(describeByte(bytes[i]))'"
    }

    private func describeByte(_ b: UInt8) -> String {
        b >= 0x20 && b < 0x7F ? String(UnicodeScalar(b)) : "\\x" + String(b, radix: 16)
    }

}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
