import Foundation

/// ISO-8601 text for CloudKit timestamps (milliseconds since 1970), written and read without
/// Foundation's formatters, which are slow and stop at year 1 or 9999.
///
/// Dates use the proleptic Gregorian calendar for any Int64 millisecond count, so a timestamp
/// before 1970 or far in the future still survives a round trip through text.
public enum ISO8601 {
    /// `2026-01-12T09:00:00.000Z`. Years outside 0…9999 get a sign and as many digits as they need.
    public static func format(milliseconds ms: Int64) -> String {
        format(milliseconds: ms, offsetSeconds: 0)
    }

    /// The same instant as local time at a fixed offset: `2026-01-12T10:00:00.000+01:00`.
    public static func format(milliseconds ms: Int64, offsetSeconds: Int) -> String {
        // Made on the stack and copied once into a String of its own length.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: maximumLength) { buffer in
            let count = write(milliseconds: ms, offsetSeconds: offsetSeconds, to: buffer.baseAddress!)
            return String(decoding: UnsafeBufferPointer(start: buffer.baseAddress!, count: count), as: UTF8.self)
        }
    }

    /// The same instant in a time zone, with that zone's offset at that instant.
    public static func format(milliseconds ms: Int64, timeZone: TimeZone) -> String {
        let offset = timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(ms) / 1000))
        return format(milliseconds: ms, offsetSeconds: offset)
    }

    /// Appends the formatted timestamp's UTF-8 to `out`.
    public static func append(milliseconds ms: Int64, offsetSeconds: Int = 0, to out: inout [UInt8]) {
        // Made in a stack buffer and appended at once (a timestamp is written for every
        // timestamp field of every record an export writes).
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: maximumLength) { buffer in
            let count = write(milliseconds: ms, offsetSeconds: offsetSeconds, to: buffer.baseAddress!)
            out.append(contentsOf: UnsafeBufferPointer(start: buffer.baseAddress!, count: count))
        }
    }

    /// The most bytes a timestamp's text takes: a sign and at most 19 digits of year,
    /// "-MM-DDTHH:MM:SS.mmm", and a sign, at most 17 digits of hours and ":MM".
    static let maximumLength = 64

    /// Writes the formatted timestamp's UTF-8 at `text` (room for ``maximumLength`` bytes);
    /// returns how many bytes it wrote.
    private static func write(milliseconds ms: Int64, offsetSeconds: Int, to text: UnsafeMutablePointer<UInt8>) -> Int {
        let (shifted, overflow) = ms.addingReportingOverflow(Int64(offsetSeconds) * 1000)
        let local = overflow ? ms : shifted
        let days = floorDiv(local, 86_400_000)
        // Not local - days * 86_400_000: for the earliest instants that product overflows.
        let msOfDay = Int((local % 86_400_000 + 86_400_000) % 86_400_000)
        let (year, month, day) = civil(fromDays: days)
        let zone = offsetSeconds == 0 || overflow ? 0 : offsetSeconds
        var at = 0
        @inline(__always) func put(_ byte: UInt8) {
            text[at] = byte
            at += 1
        }
        // At least `minWidth` digits, zeros in front (a year's or an offset's hours).
        @inline(__always) func digits(_ value: UInt64, minWidth: Int) {
            at += writeDigits(value, minWidth: minWidth, to: text + at)
        }
        @inline(__always) func two(_ value: Int) {
            text[at] = UInt8(truncatingIfNeeded: 48 + value / 10)
            text[at + 1] = UInt8(truncatingIfNeeded: 48 + value % 10)
            at += 2
        }
        if year < 0 { put(UInt8(ascii: "-")) } else if year > 9999 { put(UInt8(ascii: "+")) }
        digits(year.magnitude, minWidth: 4)
        put(UInt8(ascii: "-"))
        two(Int(month))
        put(UInt8(ascii: "-"))
        two(Int(day))
        put(UInt8(ascii: "T"))
        two(msOfDay / 3_600_000)
        put(UInt8(ascii: ":"))
        two(msOfDay / 60_000 % 60)
        put(UInt8(ascii: ":"))
        two(msOfDay / 1000 % 60)
        put(UInt8(ascii: "."))
        let millis = msOfDay % 1000
        put(UInt8(truncatingIfNeeded: 48 + millis / 100))
        two(millis % 100)
        if zone == 0 {
            put(UInt8(ascii: "Z"))
        } else {
            put(UInt8(ascii: zone < 0 ? "-" : "+"))
            let minutes = abs(zone) / 60
            digits(UInt64(minutes / 60), minWidth: 2)
            put(UInt8(ascii: ":"))
            two(minutes % 60)
        }
        return at
    }

    /// The date part alone, `2026-01-12`, of an instant in UTC.
    public static func formatDate(milliseconds ms: Int64) -> String {
        String(format(milliseconds: ms).prefix { $0 != "T" })
    }

    /// Reads the forms people write: `2026-01-12`, `2026-01-12T09:00`, `2026-01-12 09:00:00`,
    /// with optional fractional seconds (at most millisecond precision) and an optional `Z` or
    /// `±HH:MM` offset. Text without an offset is read in `timeZone` (UTC when nil).
    /// Returns nil when the text is not such a timestamp.
    public static func parse(_ text: String, timeZone: TimeZone? = nil) -> Int64? {
        var scanner = Scanner(Array(text.utf8))
        return scanner.timestamp(timeZone: timeZone)
    }

    // MARK: Calendar arithmetic

    /// Days since 1970-01-01 of a proleptic Gregorian date.
    public static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = floorDiv(y, 400)
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01.
    public static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = floorDiv(z, 146_097)
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    public static func daysInMonth(year: Int64, month: Int64) -> Int64 {
        switch month {
        case 2: return (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    @inline(__always) public static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }

    /// The decimal digits of `value`'s magnitude, at least `minWidth` of them (zeros in front).
    public static func appendDigits(_ value: Int64, minWidth: Int, to out: inout [UInt8]) {
        // An Int64's magnitude has at most 19 digits.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(20, minWidth)) { buffer in
            let count = writeDigits(value.magnitude, minWidth: minWidth, to: buffer.baseAddress!)
            out.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[0..<count]))
        }
    }

    /// Writes `value`'s decimal digits, at least `minWidth` of them (zeros in front), at `text`
    /// (room for `max(20, minWidth)` bytes); returns how many bytes it wrote.
    @inline(__always) static func writeDigits(_ value: UInt64, minWidth: Int, to text: UnsafeMutablePointer<UInt8>)
        -> Int
    {
        var count = 1
        var rest = value / 10
        while rest > 0 {
            count += 1
            rest /= 10
        }
        let width = max(count, minWidth)
        for position in 0..<(width - count) { text[position] = UInt8(ascii: "0") }
        rest = value
        for position in stride(from: width - 1, through: width - count, by: -1) {
            text[position] = UInt8(truncatingIfNeeded: 48 + rest % 10)
            rest /= 10
        }
        return width
    }

    private struct Scanner {
        let bytes: [UInt8]
        var i = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var peek: UInt8? { i < bytes.count ? bytes[i] : nil }

        mutating func digits(exactly count: Int) -> Int64? {
            guard i + count <= bytes.count else { return nil }
            var value: Int64 = 0
            for _ in 0..<count {
                let b = bytes[i]
                guard b >= 48 && b <= 57 else { return nil }
                value = value * 10 + Int64(b - 48)
                i += 1
            }
            return value
        }

        mutating func consume(_ ascii: Unicode.Scalar) -> Bool {
            if peek == UInt8(ascii: ascii) {
                i += 1
                return true
            }
            return false
        }

        mutating func timestamp(timeZone: TimeZone?) -> Int64? {
            var sign: Int64 = 1
            if consume("-") { sign = -1 } else { _ = consume("+") }
            var year: Int64 = 0
            var yearDigits = 0
            while let b = peek, b >= 48 && b <= 57 {
                guard yearDigits < 12 else { return nil }
                year = year * 10 + Int64(b - 48)
                yearDigits += 1
                i += 1
            }
            guard yearDigits >= 4 else { return nil }
            year *= sign
            guard consume("-"), let month = digits(exactly: 2), (1...12).contains(month),
                consume("-"), let day = digits(exactly: 2), day >= 1,
                day <= ISO8601.daysInMonth(year: year, month: month)
            else { return nil }
            var hour: Int64 = 0
            var minute: Int64 = 0
            var second: Int64 = 0
            var millis: Int64 = 0
            var offset: Int64? = nil
            if i < bytes.count {
                guard consume("T") || consume("t") || consume(" ") else { return nil }
                guard let h = digits(exactly: 2), h < 24, consume(":"), let m = digits(exactly: 2), m < 60 else {
                    return nil
                }
                hour = h
                minute = m
                if consume(":") {
                    guard let s = digits(exactly: 2), s < 60 else { return nil }
                    second = s
                    if consume(".") || consume(",") {
                        var fraction = 0
                        while let b = peek, b >= 48 && b <= 57 {
                            if fraction < 3 {
                                millis = millis * 10 + Int64(b - 48)
                            } else if b != 48 {
                                return nil  // sub-millisecond precision would be lost
                            }
                            fraction += 1
                            i += 1
                        }
                        guard fraction > 0 else { return nil }
                        if fraction < 3 { for _ in fraction..<3 { millis *= 10 } }
                    }
                }
                if consume("Z") || consume("z") {
                    offset = 0
                } else if let b = peek, b == UInt8(ascii: "+") || b == UInt8(ascii: "-") {
                    i += 1
                    guard let oh = digits(exactly: 2), oh <= 23 else { return nil }
                    var om: Int64 = 0
                    if consume(":") {
                        guard let m = digits(exactly: 2), m < 60 else { return nil }
                        om = m
                    } else if peek != nil {
                        guard let m = digits(exactly: 2), m < 60 else { return nil }
                        om = m
                    }
                    offset = (oh * 3600 + om * 60) * (b == UInt8(ascii: "-") ? -1 : 1)
                }
                guard i == bytes.count else { return nil }
            }
            let days = ISO8601.days(year: year, month: month, day: day)
            // 128-bit arithmetic: the first and last representable instants sit beyond the
            // midnight of their day in 64 bits.
            let wide = Int128(days) * 86_400_000 + Int128(((hour * 60 + minute) * 60 + second) * 1000 + millis)
            if let offset {
                let instant = wide - Int128(offset) * 1000
                guard instant >= Int128(Int64.min) && instant <= Int128(Int64.max) else { return nil }
                return Int64(instant)
            }
            guard wide >= Int128(Int64.min) && wide <= Int128(Int64.max) else { return nil }
            let local = Int64(wide)
            guard let timeZone else { return local }
            // Local wall time: find the instant whose offset maps back to it.
            let first = Int64(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(local) / 1000))) * 1000
            let second2 =
                Int64(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(local - first) / 1000))) * 1000
            return local - second2
        }
    }
}
