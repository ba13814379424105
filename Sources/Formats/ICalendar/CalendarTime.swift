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
        self.init(year: y, month: m, day: d, hour: secondsOfDay / 3600, minute: secondsOfDay / 60 % 60, second: secondsOfDay % 60)
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

    /// Parses a property's value with its VALUE and TZID parameters.
    public static func parse(_ property: ContentLine) -> CalendarTime? {
        let text = property.value.trimmingCharacters(in: .whitespaces)
        if property.parameter("VALUE")?.uppercased() == "DATE" || (text.count == 8 && !text.contains("T")) {
            guard let date = parseDate(text) else { return nil }
            return .date(date)
        }
        guard let (time, utc) = parseDateTime(text) else { return nil }
        if utc { return .utc(time) }
        if let tzid = property.parameter("TZID") { return .zoned(time, tzid: tzid) }
        return .floating(time)
    }

    /// `yyyyMMdd`, checked to be a real date.
    static func parseDate<S: StringProtocol>(_ text: S) -> LocalDateTime? {
        let digits = Array(text.utf8)
        guard digits.count == 8, digits.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        func number(_ range: Range<Int>) -> Int64 { digits[range].reduce(0) { $0 * 10 + Int64($1 - 48) } }
        let year = number(0..<4), month = number(4..<6), day = number(6..<8)
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year, month) else { return nil }
        return LocalDateTime(year: year, month: month, day: day)
    }

    /// `yyyyMMddTHHmmss[Z]`.
    static func parseDateTime<S: StringProtocol>(_ text: S) -> (LocalDateTime, Bool)? {
        var utf8 = Array(text.utf8)
        var utc = false
        if utf8.last == UInt8(ascii: "Z") || utf8.last == UInt8(ascii: "z") { utc = true; utf8.removeLast() }
        guard utf8.count == 15, utf8[8] == UInt8(ascii: "T") || utf8[8] == UInt8(ascii: "t"),
              var date = parseDate(String(decoding: utf8[0..<8], as: UTF8.self)) else { return nil }
        let time = utf8[9..<15]
        guard time.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        let digits = Array(time).map { Int64($0 - 48) }
        let hour = digits[0] * 10 + digits[1], minute = digits[2] * 10 + digits[3], second = digits[4] * 10 + digits[5]
        guard hour < 24, minute < 60, second <= 60 else { return nil }
        date.hour = hour
        date.minute = minute
        date.second = min(second, 59) // a leap second is read as :59
        return (date, utc)
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
        func pad(_ n: Int64, _ width: Int) -> String {
            let text = String(n.magnitude)
            return (n < 0 ? "-" : "") + String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let day = pad(time.year, 4) + pad(time.month, 2) + pad(time.day, 2)
        return date ? day : day + "T" + pad(time.hour, 2) + pad(time.minute, 2) + pad(time.second, 2)
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
        var scalars = Array(text.trimmingCharacters(in: .whitespaces).uppercased().unicodeScalars)
        var sign: Int64 = 1
        if scalars.first == "-" { sign = -1; scalars.removeFirst() } else if scalars.first == "+" { scalars.removeFirst() }
        guard scalars.first == "P" else { return nil }
        scalars.removeFirst()
        var total: Int64 = 0
        var number: Int64? = nil
        var inTime = false
        var sawUnit = false
        for c in scalars {
            if let digit = Int64(String(c)), c.isASCII {
                number = (number ?? 0) * 10 + digit
                continue
            }
            if c == "T" { inTime = true; continue }
            guard let n = number else { return nil }
            switch (c, inTime) {
            case ("W", false): total += n * 604_800
            case ("D", false): total += n * 86_400
            case ("H", true): total += n * 3600
            case ("M", true): total += n * 60
            case ("S", true): total += n
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
        let utf8 = Array(text.trimmingCharacters(in: .whitespaces).utf8)
        guard utf8.count == 5 || utf8.count == 7, utf8[0] == UInt8(ascii: "+") || utf8[0] == UInt8(ascii: "-"),
              utf8.dropFirst().allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        let digits = utf8.dropFirst().map { Int64($0 - 48) }
        let hours = digits[0] * 10 + digits[1], minutes = digits[2] * 10 + digits[3]
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
