import Records

/// The occurrences of a recurring component: DTSTART, its RRULEs and RDATEs, less its EXDATEs.
///
/// Occurrences are computed in wall-clock time in DTSTART's zone (so 09:00 stays 09:00 across
/// a DST change), and `instant` turns each into UTC seconds for UNTIL, EXDATE and the window.
public struct RecurrenceSet {
    public var start: LocalDateTime
    public var isDate: Bool
    public var rules: [RecurrenceRule]
    public var dates: [CalendarTime]
    public var exceptions: [CalendarTime]
    /// UTC seconds of a wall time in DTSTART's zone.
    public var instant: (LocalDateTime) -> Int64
    /// UTC seconds of any CalendarTime (for UNTIL and EXDATE values in other zones).
    public var instantOf: (CalendarTime) -> Int64

    /// Stop after this many periods in a row without an occurrence: a rule that can never
    /// match (the 30th of February) must not loop forever.
    static let maxEmptyPeriods = 2_000
    static let maxOccurrences = 1_000_000

    public init(
        start: LocalDateTime, isDate: Bool, rules: [RecurrenceRule], dates: [CalendarTime] = [],
        exceptions: [CalendarTime] = [],
        instant: @escaping (LocalDateTime) -> Int64, instantOf: @escaping (CalendarTime) -> Int64
    ) {
        self.start = start
        self.isDate = isDate
        self.rules = rules
        self.dates = dates
        self.exceptions = exceptions
        self.instant = instant
        self.instantOf = instantOf
    }

    /// Occurrences whose start is in `from..<to` (UTC seconds), in order, as wall times.
    public func occurrences(from: Int64, to: Int64) throws(RecurrenceError) -> [LocalDateTime] {
        var found: Set<LocalDateTime> = []
        let startInstant = instant(start)
        if startInstant >= from && startInstant < to { found.insert(start) }
        for rule in rules {
            for occurrence in try expand(rule, from: from, until: to) {
                found.insert(occurrence)
            }
        }
        for date in dates {
            let wall = date.local
            let at = instantOf(date)
            if at >= from && at < to {
                found.insert(isDate ? LocalDateTime(year: wall.year, month: wall.month, day: wall.day) : wall)
            }
        }
        let excluded = Set(
            exceptions.map { exception -> Int64 in
                exception.isDate
                    ? LocalDateTime(year: exception.local.year, month: exception.local.month, day: exception.local.day)
                        .dayNumber : instantOf(exception)
            })
        return found.filter { occurrence in
            !excluded.contains(isDate ? occurrence.dayNumber : instant(occurrence))
                && !(excludedByDate(occurrence, excluded))
        }.sorted()
    }

    private func excludedByDate(_ occurrence: LocalDateTime, _ excluded: Set<Int64>) -> Bool {
        // An EXDATE;VALUE=DATE removes that day's occurrence of a timed event too.
        !isDate && exceptions.contains { $0.isDate && $0.local.dayNumber == occurrence.dayNumber }
    }

    /// The rule's occurrences in `from..<to` (UTC seconds), honouring COUNT and UNTIL. Only
    /// those in the window are kept; without COUNT, whole periods before the window are not
    /// even visited, so an early DTSTART with a short FREQ costs nothing.
    func expand(_ original: RecurrenceRule, from windowStart: Int64 = Int64.min, until windowEnd: Int64)
        throws(RecurrenceError) -> [LocalDateTime]
    {
        try expandCountingPeriods(original, from: windowStart, until: windowEnd).occurrences
    }

    /// ``expand(_:from:until:)``, and how many periods it looked at to find them.
    func expandCountingPeriods(
        _ original: RecurrenceRule, from windowStart: Int64 = Int64.min,
        until windowEnd: Int64
    ) throws(RecurrenceError) -> (occurrences: [LocalDateTime], periods: Int) {
        var visited = 0
        var rule = original
        // Defaults from DTSTART (RFC 5545 §3.3.10, as implementations apply them).
        if rule.byWeekNo.isEmpty && rule.byYearDay.isEmpty && rule.byMonthDay.isEmpty && rule.byDay.isEmpty {
            switch rule.frequency {
            case .yearly:
                if rule.byMonth.isEmpty { rule.byMonth = [Int(start.month)] }
                rule.byMonthDay = [Int(start.day)]
            case .monthly:
                rule.byMonthDay = [Int(start.day)]
            case .weekly:
                rule.byDay = [RecurrenceRule.WeekdayNumber(weekday: start.weekday)]
            default:
                break
            }
        }
        let untilInstant: Int64? = rule.until.map { until in
            switch until {
            case .date(let d):
                return instant(
                    LocalDateTime(year: d.year, month: d.month, day: d.day, hour: 23, minute: 59, second: 59))
            case .floating(let t), .zoned(let t, _): return instant(t)
            case .utc: return instantOf(until)
            }
        }
        var results: [LocalDateTime] = []
        var emitted = 0
        var startCounted = false
        var empty = 0
        var period = 0
        let startWall = start.wallSeconds
        if rule.count == nil, windowStart > instant(start) {
            // Periods that end before the window starts hold nothing wanted; two periods of
            // margin cover time zone offsets and daylight saving.
            let gap = windowStart - instant(start)
            let periods: Int64
            switch rule.frequency {
            case .yearly: periods = gap / (366 * 86_400)
            case .monthly: periods = gap / (31 * 86_400)
            case .weekly: periods = gap / (7 * 86_400)
            case .daily: periods = gap / 86_400
            case .hourly: periods = gap / 3600
            case .minutely: periods = gap / 60
            case .secondly: periods = gap
            }
            let interval = Int64(rule.interval)
            period = Int(max(0, (periods / interval - 2) * interval))
        }
        while true {
            let (candidates, periodStart) = periodCandidates(rule, period: period)
            period += rule.interval
            visited += 1
            // A period that starts after the window (or UNTIL) can hold nothing wanted.
            let periodInstant = instant(LocalDateTime(wallSeconds: periodStart))
            if periodInstant >= windowEnd || (untilInstant.map { periodInstant > $0 } ?? false) {
                return (results, visited)
            }
            let selected =
                rule.bySetPos.isEmpty ? candidates : RecurrenceSet.select(candidates, positions: rule.bySetPos)
            var any = false
            for candidate in selected where candidate.wallSeconds >= startWall {
                any = true
                // DTSTART always counts as the first occurrence (RFC 5545 §3.3.10): when the
                // rule's first is later (DTSTART does not fit the rule), DTSTART has taken one
                // of COUNT's occurrences.
                if !startCounted {
                    startCounted = true
                    if candidate.wallSeconds != startWall { emitted += 1 }
                }
                let at = instant(candidate)
                if let untilInstant, at > untilInstant { return (results, visited) }
                if let count = rule.count, emitted >= count { return (results, visited) }
                if at >= windowEnd { return (results, visited) }
                emitted += 1
                guard at >= windowStart else { continue }
                results.append(candidate)
                if results.count > RecurrenceSet.maxOccurrences {
                    throw RecurrenceError(
                        message:
                            "RRULE \(original.text) has more than \(RecurrenceSet.maxOccurrences) occurrences in the window; narrow \(Wording.expansionWindow)"
                    )
                }
            }
            empty = any ? 0 : empty + 1
            if empty > RecurrenceSet.maxEmptyPeriods { return (results, visited) }
        }
    }

    static func select(_ candidates: [LocalDateTime], positions: [Int]) -> [LocalDateTime] {
        var chosen: Set<LocalDateTime> = []
        for position in positions {
            let index = position > 0 ? position - 1 : candidates.count + position
            if index >= 0 && index < candidates.count { chosen.insert(candidates[index]) }
        }
        return chosen.sorted()
    }

    /// Every wall time of period number `period` (counted in the rule's frequency from
    /// DTSTART's period) that the BY parts allow, sorted.
    func periodCandidates(_ rule: RecurrenceRule, period: Int) -> (candidates: [LocalDateTime], start: Int64) {
        var days: [Int64] = []
        var fixedTime: (hour: Int64?, minute: Int64?, second: Int64?) = (nil, nil, nil)
        switch rule.frequency {
        case .yearly:
            let year = start.year + Int64(period)
            days = Array(ISO8601.days(year: year, month: 1, day: 1)...ISO8601.days(year: year, month: 12, day: 31))
        case .monthly:
            let monthIndex = start.year * 12 + (start.month - 1) + Int64(period)
            let year = ISO8601.floorDiv(monthIndex, 12)
            let month = monthIndex - year * 12 + 1
            let first = ISO8601.days(year: year, month: month, day: 1)
            days = Array(first..<(first + CalendarTime.daysInMonth(year, month)))
        case .weekly:
            let weekStartDay = start.dayNumber - Int64((start.weekday - rule.weekStart + 7) % 7) + Int64(period) * 7
            days = Array(weekStartDay..<(weekStartDay + 7))
        case .daily:
            days = [start.dayNumber + Int64(period)]
        case .hourly, .minutely, .secondly:
            let step: Int64 = rule.frequency == .hourly ? 3600 : rule.frequency == .minutely ? 60 : 1
            let base =
                rule.frequency == .hourly
                ? start.wallSeconds - start.minute * 60 - start.second
                : rule.frequency == .minutely ? start.wallSeconds - start.second : start.wallSeconds
            let moment = LocalDateTime(wallSeconds: base + Int64(period) * step)
            days = [moment.dayNumber]
            fixedTime = (
                moment.hour, rule.frequency == .hourly ? nil : moment.minute,
                rule.frequency == .secondly ? moment.second : nil
            )
        }
        let dayOrdinalScope: DayScope =
            rule.frequency == .monthly || (rule.frequency == .yearly && !rule.byMonth.isEmpty)
            ? .month : rule.frequency == .yearly ? .year : .none
        let periodStart =
            fixedTime.hour.map { h in
                days[0] * 86_400 + h * 3600 + (fixedTime.minute ?? 0) * 60 + (fixedTime.second ?? 0)
            } ?? days[0] * 86_400
        let matching = days.filter { matches(day: $0, rule: rule, scope: dayOrdinalScope) }
        guard !matching.isEmpty else { return ([], periodStart) }
        let hours: [Int64] =
            fixedTime.hour.map { h in rule.byHour.isEmpty || rule.byHour.contains(Int(h)) ? [h] : [] }
            ?? (rule.byHour.isEmpty ? [start.hour] : rule.byHour.map(Int64.init).sorted())
        let minutes: [Int64] =
            fixedTime.minute.map { m in rule.byMinute.isEmpty || rule.byMinute.contains(Int(m)) ? [m] : [] }
            ?? (rule.byMinute.isEmpty ? [start.minute] : rule.byMinute.map(Int64.init).sorted())
        let seconds: [Int64] =
            fixedTime.second.map { s in rule.bySecond.isEmpty || rule.bySecond.contains(Int(s)) ? [s] : [] }
            ?? (rule.bySecond.isEmpty ? [start.second] : rule.bySecond.map { Int64(min($0, 59)) }.sorted())
        var out: [LocalDateTime] = []
        for day in matching {
            for h in hours {
                for m in minutes {
                    for s in seconds { out.append(LocalDateTime(dayNumber: day, secondsOfDay: h * 3600 + m * 60 + s)) }
                }
            }
        }
        return (out, periodStart)
    }

    enum DayScope { case none, month, year }

    private func matches(day: Int64, rule: RecurrenceRule, scope: DayScope) -> Bool {
        let date = LocalDateTime(dayNumber: day)
        if !rule.byMonth.isEmpty && !rule.byMonth.contains(Int(date.month)) { return false }
        if !rule.byMonthDay.isEmpty {
            let length = CalendarTime.daysInMonth(date.year, date.month)
            let hit = rule.byMonthDay.contains { (n: Int) -> Bool in
                let wanted: Int64 = n > 0 ? Int64(n) : length + Int64(n) + 1
                return wanted == date.day
            }
            if !hit { return false }
        }
        if !rule.byYearDay.isEmpty {
            let first = ISO8601.days(year: date.year, month: 1, day: 1)
            let length = ISO8601.days(year: date.year + 1, month: 1, day: 1) - first
            let index = day - first + 1
            let hit = rule.byYearDay.contains { (n: Int) -> Bool in
                let wanted: Int64 = n > 0 ? Int64(n) : length + Int64(n) + 1
                return wanted == index
            }
            if !hit { return false }
        }
        if !rule.byWeekNo.isEmpty {
            let (weekYear, week, weeksInYear) = RecurrenceSet.weekNumber(day: day, weekStart: rule.weekStart)
            _ = weekYear
            let hit = rule.byWeekNo.contains { (n: Int) -> Bool in
                let wanted: Int = n > 0 ? n : weeksInYear + n + 1
                return wanted == week
            }
            if !hit { return false }
        }
        if !rule.byDay.isEmpty {
            let weekday = date.weekday
            let hit = rule.byDay.contains { entry in
                guard entry.weekday == weekday else { return false }
                guard entry.ordinal != 0, scope != .none else { return true }
                let (first, last): (Int64, Int64) =
                    scope == .month
                    ? (
                        ISO8601.days(year: date.year, month: date.month, day: 1),
                        ISO8601.days(
                            year: date.year, month: date.month, day: CalendarTime.daysInMonth(date.year, date.month))
                    )
                    : (
                        ISO8601.days(year: date.year, month: 1, day: 1),
                        ISO8601.days(year: date.year, month: 12, day: 31)
                    )
                if entry.ordinal > 0 {
                    return (day - first) / 7 + 1 == Int64(entry.ordinal)
                }
                return (last - day) / 7 + 1 == Int64(-entry.ordinal)
            }
            if !hit { return false }
        }
        return true
    }

    /// The week number of a day (RFC 5545 §3.3.10: week 1 is the first week with at least
    /// four days of the year, weeks starting on WKST) and how many weeks its year has.
    static func weekNumber(day: Int64, weekStart: Int) -> (year: Int64, week: Int, weeks: Int) {
        func firstWeekStart(_ year: Int64) -> Int64 {
            let jan1 = ISO8601.days(year: year, month: 1, day: 1)
            let jan1Weekday = Int(((jan1 % 7) + 7 + 3) % 7)
            let offset = Int64((jan1Weekday - weekStart + 7) % 7)
            let weekStartOnOrBefore = jan1 - offset
            // The week holding Jan 1 is week 1 when it has at least 4 days in the new year.
            return 7 - offset >= 4 ? weekStartOnOrBefore : weekStartOnOrBefore + 7
        }
        let date = LocalDateTime(dayNumber: day)
        var year = date.year
        if day < firstWeekStart(year) { year -= 1 } else if day >= firstWeekStart(year + 1) { year += 1 }
        let week = Int((day - firstWeekStart(year)) / 7) + 1
        let weeks = Int((firstWeekStart(year + 1) - firstWeekStart(year)) / 7)
        return (year, week, weeks)
    }
}
