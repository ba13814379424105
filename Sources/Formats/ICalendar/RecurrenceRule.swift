import Records

/// A problem with a recurrence rule, or with expanding one.
public struct RecurrenceError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var message: Message
    public var explanation: Message { message }
    public var description: String { message.description }
}

/// An RRULE (RFC 5545 §3.3.10): FREQ, INTERVAL, COUNT, UNTIL, BYSECOND … BYSETPOS, WKST.
public struct RecurrenceRule: Sendable, Hashable {
    public enum Frequency: String, Sendable, CaseIterable, Comparable {
        case secondly = "SECONDLY"
        case minutely = "MINUTELY"
        case hourly = "HOURLY"
        case daily = "DAILY"
        case weekly = "WEEKLY"
        case monthly = "MONTHLY"
        case yearly = "YEARLY"

        var rank: Int { Frequency.allCases.firstIndex(of: self)! }
        public static func < (a: Frequency, b: Frequency) -> Bool { a.rank < b.rank }
    }

    /// A BYDAY entry: a weekday (0 = Monday … 6 = Sunday) and an ordinal (0 = every one).
    public struct WeekdayNumber: Sendable, Hashable {
        public var ordinal: Int
        public var weekday: Int

        public init(ordinal: Int = 0, weekday: Int) {
            self.ordinal = ordinal
            self.weekday = weekday
        }
    }

    static let weekdayNames = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]

    public var frequency: Frequency
    public var interval = 1
    public var count: Int?
    public var until: CalendarTime?
    public var bySecond: [Int] = []
    public var byMinute: [Int] = []
    public var byHour: [Int] = []
    public var byDay: [WeekdayNumber] = []
    public var byMonthDay: [Int] = []
    public var byYearDay: [Int] = []
    public var byWeekNo: [Int] = []
    public var byMonth: [Int] = []
    public var bySetPos: [Int] = []
    /// 0 = Monday (the default) … 6 = Sunday.
    public var weekStart = 0

    public init(frequency: Frequency) {
        self.frequency = frequency
    }

    public init(parsing text: String) throws(RecurrenceError) {
        var frequency: Frequency?
        var rule = RecurrenceRule(frequency: .daily)
        var seen: Set<String> = []
        func fail(_ message: String) -> RecurrenceError { RecurrenceError(message: "RRULE \(text): \(message)") }
        func numbers(_ value: String, _ name: String, _ range: ClosedRange<Int>, signed: Bool) throws(RecurrenceError)
            -> [Int]
        {
            var out: [Int] = []
            for part in value.split(separator: ",") {
                guard let n = Int(part), range.contains(abs(n)), signed || n >= 0, !(signed && n == 0) else {
                    throw fail(
                        "\(name) takes \(signed ? "±" : "")\(range.lowerBound)…\(range.upperBound), found \(part)")
                }
                out.append(n)
            }
            return out
        }
        for part in text.split(separator: ";") where !part.isEmpty {
            let pieces = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard pieces.count == 2 else { throw fail("'\(part)' is not NAME=value") }
            let name = pieces[0].uppercased()
            let value = pieces[1].uppercased()
            guard seen.insert(name).inserted else { throw fail("\(name) is given twice") }
            switch name {
            case "FREQ":
                guard let parsed = Frequency(rawValue: value) else { throw fail("unknown FREQ \(value)") }
                frequency = parsed
            case "INTERVAL":
                guard let n = Int(value), n >= 1 else { throw fail("INTERVAL is a positive number, found \(value)") }
                rule.interval = n
            case "COUNT":
                guard let n = Int(value), n >= 1 else { throw fail("COUNT is a positive number, found \(value)") }
                rule.count = n
            case "UNTIL":
                let property = ContentLine(name: "UNTIL", value: value)
                guard let until = CalendarTime.parse(property) else {
                    throw fail("UNTIL is a date or date-time, found \(value)")
                }
                rule.until = until
            case "BYSECOND": rule.bySecond = try numbers(value, name, 0...60, signed: false)
            case "BYMINUTE": rule.byMinute = try numbers(value, name, 0...59, signed: false)
            case "BYHOUR": rule.byHour = try numbers(value, name, 0...23, signed: false)
            case "BYMONTHDAY": rule.byMonthDay = try numbers(value, name, 1...31, signed: true)
            case "BYYEARDAY": rule.byYearDay = try numbers(value, name, 1...366, signed: true)
            case "BYWEEKNO": rule.byWeekNo = try numbers(value, name, 1...53, signed: true)
            case "BYMONTH": rule.byMonth = try numbers(value, name, 1...12, signed: false)
            case "BYSETPOS": rule.bySetPos = try numbers(value, name, 1...366, signed: true)
            case "BYDAY":
                for item in value.split(separator: ",") {
                    let dayName = String(item.suffix(2))
                    guard let weekday = RecurrenceRule.weekdayNames.firstIndex(of: dayName) else {
                        throw fail("unknown weekday in BYDAY: \(item)")
                    }
                    let prefix = item.dropLast(2)
                    var ordinal = 0
                    if !prefix.isEmpty {
                        guard let n = Int(prefix), (1...53).contains(abs(n)) else {
                            throw fail("a BYDAY ordinal is ±1…53, found \(prefix)")
                        }
                        ordinal = n
                    }
                    rule.byDay.append(WeekdayNumber(ordinal: ordinal, weekday: weekday))
                }
            case "WKST":
                guard let weekday = RecurrenceRule.weekdayNames.firstIndex(of: value) else {
                    throw fail("unknown WKST \(value)")
                }
                rule.weekStart = weekday
            default:
                if !name.hasPrefix("X-") { throw fail("unknown part \(name)") }
            }
        }
        guard let frequency else { throw fail("FREQ is required") }
        guard rule.count == nil || rule.until == nil else { throw fail("COUNT and UNTIL cannot both be given") }
        rule.frequency = frequency
        self = rule
    }

    /// The rule as RRULE text, parts in a fixed order.
    public var text: String {
        var parts = ["FREQ=\(frequency.rawValue)"]
        if interval != 1 { parts.append("INTERVAL=\(interval)") }
        if let count { parts.append("COUNT=\(count)") }
        if let until {
            switch until {
            case .date(let d): parts.append("UNTIL=" + CalendarTime.basic(d, date: true))
            case .utc(let t): parts.append("UNTIL=" + CalendarTime.basic(t, date: false) + "Z")
            case .zoned(let t, _), .floating(let t): parts.append("UNTIL=" + CalendarTime.basic(t, date: false))
            }
        }
        func list(_ name: String, _ values: [Int]) {
            if !values.isEmpty { parts.append("\(name)=" + values.map(String.init).joined(separator: ",")) }
        }
        list("BYSECOND", bySecond)
        list("BYMINUTE", byMinute)
        list("BYHOUR", byHour)
        if !byDay.isEmpty {
            parts.append(
                "BYDAY="
                    + byDay.map {
                        ($0.ordinal != 0 ? String($0.ordinal) : "") + RecurrenceRule.weekdayNames[$0.weekday]
                    }.joined(separator: ","))
        }
        list("BYMONTHDAY", byMonthDay)
        list("BYYEARDAY", byYearDay)
        list("BYWEEKNO", byWeekNo)
        list("BYMONTH", byMonth)
        list("BYSETPOS", bySetPos)
        if weekStart != 0 { parts.append("WKST=" + RecurrenceRule.weekdayNames[weekStart]) }
        return parts.joined(separator: ";")
    }

    public static func == (a: RecurrenceRule, b: RecurrenceRule) -> Bool { a.text == b.text }
    public func hash(into hasher: inout Hasher) { hasher.combine(text) }
}
