import Foundation

/// Builds JSON text into a byte buffer. Nothing is validated: callers write well-formed JSON
/// by construction, which keeps this on the fast path of every export.
public struct JSONWriter: Sendable {
    public var bytes: [UInt8]

    public init(capacity: Int = 4096) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inline(__always) public mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    @inline(__always) public mutating func byte(_ b: UInt8) {
        bytes.append(b)
    }

    /// Writes a JSON string: quotes, escapes for `"`, `\` and control characters, UTF-8 as is.
    public mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        // Native strings lend their UTF-8 directly; copying into a `var` first would cost a
        // retain and a release for every string of every record.
        if value.utf8.withContiguousStorageIfAvailable({ appendEscaped($0) }) == nil {
            var copy = value
            copy.withUTF8 { appendEscaped($0) }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Writes a JSON string from UTF-8 bytes known to be valid (text SQLite hands back, say),
    /// exactly as ``string(_:)`` writes the same text.
    public mutating func string(utf8: UnsafeBufferPointer<UInt8>) {
        bytes.append(UInt8(ascii: "\""))
        appendEscaped(utf8)
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func appendEscaped(_ utf8: UnsafeBufferPointer<UInt8>) {
        var runStart = 0
        for index in 0..<utf8.count {
            let b = utf8[index]
            guard b < 0x20 || b == 0x22 || b == 0x5C else { continue }
            if runStart < index { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index])) }
            switch b {
            case 0x22:
                bytes.append(0x5C)
                bytes.append(0x22)
            case 0x5C:
                bytes.append(0x5C)
                bytes.append(0x5C)
            case 0x0A:
                bytes.append(0x5C)
                bytes.append(UInt8(ascii: "n"))
            case 0x0D:
                bytes.append(0x5C)
                bytes.append(UInt8(ascii: "r"))
            case 0x09:
                bytes.append(0x5C)
                bytes.append(UInt8(ascii: "t"))
            case 0x08:
                bytes.append(0x5C)
                bytes.append(UInt8(ascii: "b"))
            case 0x0C:
                bytes.append(0x5C)
                bytes.append(UInt8(ascii: "f"))
            default:
                let hex = JSONWriter.hexDigits
                bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 15)]])
            }
            runStart = index + 1
        }
        if runStart < utf8.count {
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    public mutating func int(_ value: Int64) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        if magnitude < 10 {
            bytes.append(UInt8(ascii: "0") + UInt8(magnitude))
            return
        }
        var digits: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)  // 32 bytes: room for 20 digits
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while magnitude > 0 {
                buffer[31 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            }
            bytes.append(contentsOf: buffer[(32 - count)...])
        }
    }

    /// Writes a finite double in Swift's shortest round-trip form (`0.1`, `1e-05`, `100.0`).
    public mutating func double(_ value: Double) {
        var text = value.description
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }

    public mutating func bool(_ value: Bool) {
        if value { raw("true") } else { raw("false") }
    }

    /// Writes any JSONValue, compactly, keys in their stored order.
    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null: raw("null")
        case .bool(let b): bool(b)
        case .number(let n):
            var n = n
            n.withUTF8 { bytes.append(contentsOf: $0) }
        case .string(let s): string(s)
        case .array(let elements):
            byte(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { byte(UInt8(ascii: ",")) }
                self.value(element)
            }
            byte(UInt8(ascii: "]"))
        case .object(let object):
            byte(UInt8(ascii: "{"))
            for (index, member) in object.members.enumerated() {
                if index > 0 { byte(UInt8(ascii: ",")) }
                string(member.key)
                byte(UInt8(ascii: ":"))
                self.value(member.value)
            }
            byte(UInt8(ascii: "}"))
        }
    }

    public var text: String { String(decoding: bytes, as: UTF8.self) }
}

extension JSONWriter {
    /// `value` as `JSONEncoder` writes it, its keys sorted: a model's JSON inside text this
    /// writer builds.
    public mutating func encoded(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        bytes.append(contentsOf: try encoder.encode(value))
    }
}
