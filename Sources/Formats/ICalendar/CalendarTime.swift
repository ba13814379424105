import Foundation
import Records

/// A wall-clock date and time, without a zone: what DTSTART holds before its TZID is applied.
public struct LocalDateTime: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var year: Int64
    public var month: Int64
    public var day: Int64
    public var hour: Int64 = 0
    public var minute: Int64 = 0
    public var second: Int64 = 0

    public init(year: Int64, month: Int64, day: Int64, hour: Int64 = 0, minute: Int64 = 0, second: Int64 = 0) {
        self.year = year
        self.month = month
        self.day = day
        self.hour = hour
        self.minute = minute
        self.second = second
    }

    /// Days since 1970-01-01 of the date part.
    public var dayNumber: Int64 { ISO8601.days(year: year, month: month, day: day) }

    /// Seconds since 1970-01-01T00:00 as if this wall time were UTC.
    public var wallSeconds: Int64 { dayNumber * 86_400 + hour * 3600 + minute * 60 + second }

    public init(dayNumber: Int64, secondsOfDay: Int64 = 0) {
        let (y, m, d) = ISO8601.civil(fromDays: dayNumber)
        self.init(
            year: y, month: m, day: d, hour: secondsOfDay / 3600, minute: secondsOfDay / 60 % 60,
            second: secondsOfDay % 60)
    }

    public init(wallSeconds: Int64) {
        let days = ISO8601.floorDiv(wallSeconds, 86_400)
        self.init(dayNumber: days, secondsOfDay: wallSeconds - days * 86_400)
    }

    /// 0 = Monday … 6 = Sunday.
    public var weekday: Int { Int(((dayNumber % 7) + 7 + 3) % 7) }

    public static func < (lhs: LocalDateTime, rhs: LocalDateTime) -> Bool { lhs.wallSeconds < rhs.wallSeconds }

    public var description: String { CalendarTime.basic(self, date: false) }
}

/// A DATE or DATE-TIME value of iCalendar, as written.
public enum CalendarTime: Hashable, Sendable {
    /// `20260112`
    case date(LocalDateTime)
    /// `20260112T090000Z`
    case utc(LocalDateTime)
    /// `20260112T090000` with `TZID=…`
    case zoned(LocalDateTime, tzid: String)
    /// `20260112T090000`, no zone: the reader's local time.
    case floating(LocalDateTime)

    public var local: LocalDateTime {
        switch self {
        case .date(let t), .utc(let t), .zoned(let t, _), .floating(let t): return t
        }
    }

    public var isDate: Bool { if case .date = self { return true } else { return false } }

    /// A DATE or a floating time: a wall clock that names no instant until a zone is chosen.
    public var isWallClock: Bool {
        switch self {
        case .date, .floating: return true
        case .utc, .zoned: return false
        }
    }

    /// Parses a property's value with its VALUE and TZID parameters.
    public static func parse(_ property: ContentLine) -> CalendarTime? {
        let isDate = property.parameter("VALUE").map { ICalText.equalsIgnoringCase($0, "DATE") } ?? false
        // Read in place, without surrounding spaces and tabs.
        let parsed: (LocalDateTime, isDate: Bool, utc: Bool)? = property.value.withUTF8Bytes { raw in
            var start = 0
            var end = raw.count
            while end > start, raw[end - 1] == 0x20 || raw[end - 1] == 0x09 { end -= 1 }
            while start < end, raw[start] == 0x20 || raw[start] == 0x09 { start += 1 }
            let text = raw[start..<end]
            if isDate || (text.count == 8 && !text.contains(UInt8(ascii: "T"))) {
                return parseDate(text).map { ($0, true, false) }
            }
            return parseDateTime(text).map { ($0.0, false, $0.1) }
        }
        guard let (time, isDateValue, utc) = parsed else { return nil }
        if isDateValue { return .date(time) }
        if utc { return .utc(time) }
        if let tzid = property.parameter("TZID") { return .zoned(time, tzid: tzid) }
        return .floating(time)
    }

    /// `yyyyMMdd`, checked to be a real date.
    static func parseDate<S: StringProtocol>(_ text: S) -> LocalDateTime? {
        parseDate(Array(text.utf8)[...])
    }

    static func parseDate<Digits: RandomAccessCollection>(_ digits: Digits) -> LocalDateTime?
    where Digits.Element == UInt8, Digits.Index == Int {
        guard digits.count == 8, digits.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        let base = digits.startIndex
        func number(_ range: Range<Int>) -> Int64 {
            digits[(base + range.lowerBound)..<(base + range.upperBound)].reduce(0) { $0 * 10 + Int64($1 - 48) }
        }
        let year = number(0..<4)
        let month = number(4..<6)
        let day = number(6..<8)
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year, month) else { return nil }
        return LocalDateTime(year: year, month: month, day: day)
    }

    /// `yyyyMMddTHHmmss[Z]`.
    static func parseDateTime<S: StringProtocol>(_ text: S) -> (LocalDateTime, Bool)? {
        parseDateTime(Array(text.utf8)[...])
    }

    static func parseDateTime<Text: RandomAccessCollection>(_ text: Text) -> (LocalDateTime, Bool)?
    where Text.Element == UInt8, Text.Index == Int {
        var utf8 = text[...]
        var utc = false
        if utf8.last == UInt8(ascii: "Z") || utf8.last == UInt8(ascii: "z") {
            utc = true
            utf8 = utf8.dropLast()
        }
        let base = utf8.startIndex
        guard utf8.count == 15, utf8[base + 8] == UInt8(ascii: "T") || utf8[base + 8] == UInt8(ascii: "t"),
            var date = parseDate(utf8[base..<(base + 8)])
        else { return nil }
        let time = utf8[(base + 9)..<(base + 15)]
        guard time.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        func pair(_ offset: Int) -> Int64 {
            Int64(time[time.startIndex + offset] - 48) * 10 + Int64(time[time.startIndex + offset + 1] - 48)
        }
        let hour = pair(0)
        let minute = pair(2)
        let second = pair(4)
        guard hour < 24, minute < 60, second <= 60 else { return nil }
        date.hour = hour
        date.minute = minute
        date.second = min(second, 59)  // a leap second is read as :59
        return (date, utc)
    }

    /// The bytes of a value without surrounding spaces and tabs.
    static func trimmedBytes(_ text: String) -> [UInt8] {
        var bytes = Array(text.utf8)
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes.removeLast() }
        var start = 0
        while start < bytes.count, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        if start > 0 { bytes.removeFirst(start) }
        return bytes
    }

    static func daysInMonth(_ year: Int64, _ month: Int64) -> Int64 {
        switch month {
        case 2: return (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// `20260112` or `20260112T090000`.
    public static func basic(_ time: LocalDateTime, date: Bool) -> String {
        var out: [UInt8] = []
        appendBasic(time, date: date, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    static func appendBasic(_ time: LocalDateTime, date: Bool, to out: inout [UInt8]) {
        if time.year < 0 || time.year > 9999 {
            out.append(contentsOf: String(time.year).utf8)  // outside what iCalendar can say; kept visible
        } else {
            append(time.year, width: 4, to: &out)
        }
        append(time.month, width: 2, to: &out)
        append(time.day, width: 2, to: &out)
        guard !date else { return }
        out.append(UInt8(ascii: "T"))
        append(time.hour, width: 2, to: &out)
        append(time.minute, width: 2, to: &out)
        append(time.second, width: 2, to: &out)
    }

    @inline(__always)
    private static func append(_ value: Int64, width: Int, to out: inout [UInt8]) {
        var divisor: Int64 = width == 4 ? 1000 : 10
        var n = value
        while divisor > 0 {
            out.append(UInt8(48 + n / divisor))
            n %= divisor
            divisor /= 10
        }
    }

    /// The UTC form of an instant in milliseconds: `20260112T090000Z`. Milliseconds are dropped,
    /// as iCalendar has none.
    public static func utcText(_ ms: Int64) -> String {
        basic(LocalDateTime(wallSeconds: ISO8601.floorDiv(ms, 1000)), date: false) + "Z"
    }
}

/// iCalendar DURATION (`-PT15M`, `P1D`, `P2W`), in seconds.
public enum CalendarDuration {
    public static func parse(_ text: String) -> Int64? {
        let bytes = CalendarTime.trimmedBytes(text)
        var i = 0
        var sign: Int64 = 1
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") {
            sign = -1
            i += 1
        } else if i < bytes.count, bytes[i] == UInt8(ascii: "+") {
            i += 1
        }
        guard i < bytes.count, bytes[i] | 0x20 == UInt8(ascii: "p") else { return nil }
        i += 1
        var total: Int64 = 0
        var number: Int64? = nil
        var inTime = false
        var sawUnit = false
        while i < bytes.count {
            let c = bytes[i]
            i += 1
            if c >= 48 && c <= 57 {
                guard (number ?? 0) < Int64.max / 100 else { return nil }
                number = (number ?? 0) * 10 + Int64(c - 48)
                continue
            }
            let unit = c & ~0x20  // upper case
            if unit == UInt8(ascii: "T") && !inTime && number == nil {
                inTime = true
                continue
            }
            guard let n = number else { return nil }
            switch (unit, inTime) {
            case (UInt8(ascii: "W"), false): total += n * 604_800
            case (UInt8(ascii: "D"), false): total += n * 86_400
            case (UInt8(ascii: "H"), true): total += n * 3600
            case (UInt8(ascii: "M"), true): total += n * 60
            case (UInt8(ascii: "S"), true): total += n
            default: return nil
            }
            number = nil
            sawUnit = true
        }
        guard sawUnit, number == nil else { return nil }
        return sign * total
    }

    public static func format(seconds: Int64) -> String {
        var s = seconds.magnitude
        var out = seconds < 0 ? "-P" : "P"
        if s == 0 { return "PT0S" }
        if s % 604_800 == 0 { return out + "\(s / 604_800)W" }
        let days = s / 86_400
        s %= 86_400
        if days > 0 { out += "\(days)D" }
        if s > 0 {
            out += "T"
            if s / 3600 > 0 { out += "\(s / 3600)H" }
            if s / 60 % 60 > 0 { out += "\(s / 60 % 60)M" }
            if s % 60 > 0 { out += "\(s % 60)S" }
        }
        return out
    }
}

/// iCalendar UTC-OFFSET (`+0100`, `-0500`, `+053000`), in seconds.
public enum UTCOffset {
    public static func parse(_ text: String) -> Int64? {
        let utf8 = CalendarTime.trimmedBytes(text)
        guard utf8.count == 5 || utf8.count == 7, utf8[0] == UInt8(ascii: "+") || utf8[0] == UInt8(ascii: "-"),
            utf8.dropFirst().allSatisfy({ $0 >= 48 && $0 <= 57 })
        else { return nil }
        let digits = utf8.dropFirst().map { Int64($0 - 48) }
        let hours = digits[0] * 10 + digits[1]
        let minutes = digits[2] * 10 + digits[3]
        let seconds = utf8.count == 7 ? digits[4] * 10 + digits[5] : 0
        guard hours < 24, minutes < 60, seconds < 60 else { return nil }
        return (hours * 3600 + minutes * 60 + seconds) * (utf8[0] == UInt8(ascii: "-") ? -1 : 1)
    }

    public static func format(_ seconds: Int64) -> String {
        let m = seconds.magnitude
        func pad(_ n: UInt64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        var text = (seconds < 0 ? "-" : "+") + pad(m / 3600) + pad(m / 60 % 60)
        if m % 60 != 0 { text += pad(m % 60) }
        return text
    }
}
