/// Strict UTF-8 checks (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF),
/// with an ASCII fast path. Input that fails is reported, never repaired: repairing would
/// silently change a user's text.
public enum UTF8Validation {
    /// The string these bytes spell, or nil when they are not valid UTF-8.
    public static func string(_ bytes: UnsafeRawBufferPointer) -> String? {
        let utf8 = bytes.bindMemory(to: UInt8.self)
        guard firstInvalidOffset(utf8) == nil else { return nil }
        return String(decoding: utf8, as: UTF8.self)
    }

    /// The offset of the first byte that is not part of valid UTF-8, or nil when all are.
    public static func firstInvalidOffset(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var i = 0
        let count = bytes.count
        guard let base = bytes.baseAddress else { return nil }
        while i < count {
            // Eight ASCII bytes at a time.
            if i + 8 <= count {
                let word = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
                if word & 0x8080_8080_8080_8080 == 0 {
                    i += 8
                    continue
                }
            }
            let b0 = base[i]
            if b0 < 0x80 {
                i += 1
                continue
            }
            let width: Int
            var lower: UInt8 = 0x80
            var upper: UInt8 = 0xBF
            switch b0 {
            case 0xC2...0xDF: width = 2
            case 0xE0:
                width = 3
                lower = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: width = 3
            case 0xED:
                width = 3
                upper = 0x9F
            case 0xF0:
                width = 4
                lower = 0x90
            case 0xF1...0xF3: width = 4
            case 0xF4:
                width = 4
                upper = 0x8F
            default: return i
            }
            guard i + width <= count else { return i }
            let b1 = base[i + 1]
            guard b1 >= lower && b1 <= upper else { return i }
            for k in 2..<width where base[i + k] & 0xC0 != 0x80 { return i }
            i += width
        }
        return nil
    }
}
