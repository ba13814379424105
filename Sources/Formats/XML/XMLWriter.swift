import Foundation
import Records

/// A value that XML 1.0 cannot hold: a control character (other than tab, line feed and
/// carriage return), U+FFFE or U+FFFF. Not even a character reference can carry one, so an
/// export stops rather than change the text.
struct XMLCharacterError: Error, Sendable {
    /// The offending character's code point.
    var scalar: UInt32
    /// Its position in the text, in characters from the start.
    var offset: Int

    var message: String {
        "holds the character U+\(String(format: "%04X", scalar)) at character \(offset + 1), which XML 1.0 cannot hold (not even as &#…;)"
    }
}

/// Writes XML into a byte buffer, streaming: elements, attributes and text, escaped, with
/// the buffer handed to an ``OutputFile`` whenever it grows large. Indentation is the
/// caller's (property lists indent with tabs, xCal with spaces).
///
/// Text is escaped so that a reader gets back exactly what was written: `&`, `<`, `>` as
/// entities, and a carriage return as `&#13;` (a reader would turn a raw one into a line
/// feed). Characters XML cannot hold at all are refused with ``XMLCharacterError``.
///
/// ckport writes XML itself rather than through libxml2's `xmlTextWriter`: the escaping is
/// the whole of the work, the writer needs to check each character anyway (libxml2's writes
/// control characters through and so produces files no reader accepts), and the layout is
/// then exactly the one Apple's and RFC 6321's examples show.
struct XMLWriter {
    /// What is written and not yet handed to the output; values formatted elsewhere (dates,
    /// base64) append here directly.
    var bytes: [UInt8] = []
    private let output: OutputFile
    private let flushSize = 1 << 18

    init(output: OutputFile) {
        self.output = output
        bytes.reserveCapacity(flushSize + 4096)
    }

    /// Bytes as they are: markup the caller built.
    @inline(__always) mutating func raw(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    @inline(__always) mutating func raw(_ text: String) {
        var text = text
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }

    @inline(__always) mutating func byte(_ byte: UInt8) { bytes.append(byte) }

    mutating func indent(_ depth: Int, with unit: UInt8 = 0x09, width: Int = 1) {
        for _ in 0..<(depth * width) { bytes.append(unit) }
    }

    /// `<name>` + escaped text + `</name>`.
    mutating func element(_ name: StaticString, text: String) throws(XMLCharacterError) {
        byte(UInt8(ascii: "<"))
        raw(name)
        byte(UInt8(ascii: ">"))
        try escaped(text)
        raw("</")
        raw(name)
        byte(UInt8(ascii: ">"))
    }

    /// Appends `text` escaped for element content (and for a double-quoted attribute value:
    /// `"` and white space other than a space become references there too).
    mutating func escaped(_ text: String, inAttribute: Bool = false) throws(XMLCharacterError) {
        var text = text
        let clean = text.withUTF8 { utf8 in utf8.allSatisfy { XMLWriter.isPlain($0, inAttribute: inAttribute) } }
        if clean {
            text.withUTF8 { bytes.append(contentsOf: $0) }
            return
        }
        var offset = 0
        for scalar in text.unicodeScalars {
            defer { offset += 1 }
            switch scalar.value {
            case 0x26: raw("&amp;")
            case 0x3C: raw("&lt;")
            case 0x3E: raw("&gt;")
            case 0x0D: raw("&#13;")
            case 0x22 where inAttribute: raw("&quot;")
            case 0x09 where inAttribute: raw("&#9;")
            case 0x0A where inAttribute: raw("&#10;")
            case 0x09, 0x0A: bytes.append(UInt8(scalar.value))
            case 0..<0x20, 0xFFFE, 0xFFFF: throw XMLCharacterError(scalar: scalar.value, offset: offset)
            default: UTF8.encode(scalar) { bytes.append($0) }
            }
        }
    }

    @inline(__always) private static func isPlain(_ byte: UInt8, inAttribute: Bool) -> Bool {
        if byte >= 0x20 {
            // U+FFFE and U+FFFF start with EF BF; such text takes the slow path and its check.
            return byte != 0x26 && byte != 0x3C && byte != 0x3E && byte != 0xEF && !(inAttribute && byte == 0x22)
        }
        return !inAttribute && (byte == 0x09 || byte == 0x0A)
    }

    /// Hands the buffer to the output when it has grown large.
    @inline(__always) mutating func flushIfLarge() throws {
        if bytes.count >= flushSize { try flush() }
    }

    mutating func flush() throws {
        guard !bytes.isEmpty else { return }
        try output.write(bytes)
        bytes.removeAll(keepingCapacity: true)
    }
}
