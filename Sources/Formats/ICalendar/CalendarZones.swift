import Foundation
import Records

/// Turns iCalendar times into instants: UTC values directly, TZIDs through the calendar's own
/// VTIMEZONE definitions or the system's time-zone database (IANA names such as
/// `Europe/Berlin`, which Google and Apple use), floating times in a default zone.
public final class ZoneResolver {
    /// The zone for floating times and DATE values; nil means UTC.
    public var defaultZone: TimeZone?
    private var defined: [String: DefinedZone] = [:]
    private var system: [String: TimeZone?] = [:]

    public init(defaultZone: TimeZone? = nil) {
        self.defaultZone = defaultZone
    }

    /// Learns a VTIMEZONE of the calendar.
    public func add(_ component: ICalComponent) throws(RecurrenceError) {
        guard let tzid = component.property("TZID")?.value else {
            throw RecurrenceError(message: "VTIMEZONE without TZID (line \(component.line))")
        }
        defined[tzid] = try DefinedZone(component)
    }

    /// Whether a TZID can be resolved.
    public func knows(_ tzid: String) -> Bool {
        systemZone(tzid) != nil || defined[tzid] != nil
    }

    private func systemZone(_ tzid: String) -> TimeZone? {
        if let cached = system[tzid] { return cached }
        // Some producers write "/Europe/Berlin" or a prefix ending in the IANA name.
        var zone = TimeZone(identifier: tzid)
        if zone == nil, let slash = tzid.firstIndex(of: "/") {
            let trimmed = tzid.hasPrefix("/") ? String(tzid.dropFirst()) : String(tzid[tzid.index(after: slash)...])
            zone = TimeZone(identifier: trimmed)
        }
        system[tzid] = zone
        return zone
    }

    /// UTC seconds of a wall time in a zone (nil: the default zone; "UTC": UTC).
    public func instant(wall: LocalDateTime, tzid: String?) throws(RecurrenceError) -> Int64 {
        guard let tzid else {
            guard let defaultZone else { return wall.wallSeconds }
            return ZoneResolver.instant(wall: wall, in: defaultZone)
        }
        if tzid == "UTC" || tzid == "Z" { return wall.wallSeconds }
        // Prefer the calendar's own definition for names the system does not know; IANA names
        // resolve through the system's database, which covers every year.
        if let zone = systemZone(tzid) { return ZoneResolver.instant(wall: wall, in: zone) }
        if let zone = defined[tzid] { return zone.instant(wall: wall) }
        throw RecurrenceError(
            message: "TZID \"\(tzid)\" has no VTIMEZONE in the calendar and is not a time-zone name this system knows")
    }

    /// UTC milliseconds of a DATE or DATE-TIME value.
    public func milliseconds(_ time: CalendarTime) throws(RecurrenceError) -> Int64 {
        switch time {
        case .utc(let t): return t.wallSeconds * 1000
        case .zoned(let t, let tzid): return try instant(wall: t, tzid: tzid) * 1000
        case .floating(let t), .date(let t): return try instant(wall: t, tzid: nil) * 1000
        }
    }

    /// UTC seconds of a wall-clock time in `zone` (a time a change skips is read with the offset before it).
    public static func instant(wall: LocalDateTime, in zone: TimeZone) -> Int64 {
        let naive = wall.wallSeconds
        let first = Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(naive))))
        let second = Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(naive - first))))
        return naive - second
    }

    /// The wall clock in `zone` of an instant in UTC milliseconds.
    public static func wall(milliseconds: Int64, in zone: TimeZone) -> LocalDateTime {
        let seconds = ISO8601.floorDiv(milliseconds, 1000)
        return LocalDateTime(
            wallSeconds: seconds + Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(seconds)))))
    }

    /// UTC milliseconds of the midnight that starts `day` in `zone`.
    public static func midnight(_ day: LocalDateTime, in zone: TimeZone) -> Int64 {
        instant(wall: LocalDateTime(year: day.year, month: day.month, day: day.day), in: zone) * 1000
    }
}

/// A VTIMEZONE from the calendar: STANDARD and DAYLIGHT observances with their onsets.
final class DefinedZone {
    struct Observance {
        var recurrence: RecurrenceSet
        var offsetFrom: Int64
        var offsetTo: Int64
    }

    private var observances: [Observance] = []
    /// Onsets (UTC seconds, offset after) known so far, sorted, and how far they reach.
    private var onsets: [(at: Int64, offset: Int64)] = []
    private var computedUntil = Int64.min

    init(_ component: ICalComponent) throws(RecurrenceError) {
        for child in component.components where child.name == "STANDARD" || child.name == "DAYLIGHT" {
            guard let startProperty = child.property("DTSTART"), let start = CalendarTime.parse(startProperty),
                let fromText = child.property("TZOFFSETFROM")?.value, let from = UTCOffset.parse(fromText),
                let toText = child.property("TZOFFSETTO")?.value, let to = UTCOffset.parse(toText)
            else {
                throw RecurrenceError(
                    message:
                        "a \(child.name) of a VTIMEZONE (line \(child.line)) needs DTSTART, TZOFFSETFROM and TZOFFSETTO"
                )
            }
            var rules: [RecurrenceRule] = []
            for line in child.all("RRULE") { rules.append(try RecurrenceRule(parsing: line.value)) }
            var dates: [CalendarTime] = []
            for line in child.all("RDATE") {
                for value in line.value.split(separator: ",") {
                    if let time = CalendarTime.parse(
                        ContentLine(name: "RDATE", parameters: line.parameters, value: String(value)))
                    {
                        dates.append(time)
                    }
                }
            }
            let recurrence = RecurrenceSet(
                start: start.local, isDate: false, rules: rules, dates: dates,
                instant: { $0.wallSeconds - from }, instantOf: { $0.local.wallSeconds - from })
            observances.append(Observance(recurrence: recurrence, offsetFrom: from, offsetTo: to))
        }
        if observances.isEmpty {
            throw RecurrenceError(message: "a VTIMEZONE (line \(component.line)) has no STANDARD or DAYLIGHT")
        }
    }

    private func extend(to instant: Int64) {
        guard instant > computedUntil else { return }
        let target = instant + 20 * 365 * 86_400
        var all: [(Int64, Int64)] = []
        for observance in observances {
            let occurrences = (try? observance.recurrence.occurrences(from: Int64.min / 2, to: target)) ?? []
            all += occurrences.map { ($0.wallSeconds - observance.offsetFrom, observance.offsetTo) }
        }
        onsets = all.sorted { $0.0 < $1.0 }
        computedUntil = target
    }

    /// The UTC offset in effect at a UTC instant.
    func offset(at instant: Int64) -> Int64 {
        extend(to: instant)
        var low = 0
        var high = onsets.count
        while low < high {
            let mid = (low + high) / 2
            if onsets[mid].at <= instant { low = mid + 1 } else { high = mid }
        }
        if low == 0 {
            // Before the first onset: the offset the earliest observance changes from.
            return observances.min { $0.recurrence.start < $1.recurrence.start }!.offsetFrom
        }
        return onsets[low - 1].offset
    }

    func instant(wall: LocalDateTime) -> Int64 {
        let naive = wall.wallSeconds
        let first = offset(at: naive)
        return naive - offset(at: naive - first)
    }
}

/// Builds a VTIMEZONE for a system time zone, covering the instants between `from` and `to`:
/// one observance for the offset in effect at `from`, then one per transition up to `to`,
/// each with an explicit DTSTART — nothing for a reader to get wrong.
public enum VTimeZoneBuilder {
    /// TZNAME: the zone database's abbreviation ("CET", "CEST"), read from the system's TZif
    /// files; Foundation's own answer ("GMT+1") only when the system has none.
    static func abbreviation(_ zone: TimeZone, at date: Date) -> String {
        TZif.abbreviation(
            zone.identifier, at: Int64(date.timeIntervalSince1970.rounded(.down)),
            isDST: zone.isDaylightSavingTime(for: date))
            ?? zone.abbreviation(for: date) ?? zone.identifier
    }

    public static func lines(for zone: TimeZone, from: Int64, to: Int64) -> [(name: String, value: String)] {
        var out: [(String, String)] = [("BEGIN", "VTIMEZONE"), ("TZID", zone.identifier)]
        let startDate = Date(timeIntervalSince1970: Double(ISO8601.floorDiv(from, 1000)))
        var offset = Int64(zone.secondsFromGMT(for: startDate))
        var isDaylight = zone.isDaylightSavingTime(for: startDate)
        // The first observance starts at the last transition before the range (or the range itself).
        var previous = startDate
        var cursor = startDate.addingTimeInterval(-400 * 86_400)
        while let next = zone.nextDaylightSavingTimeTransition(after: cursor), next <= startDate {
            previous = next
            cursor = next
        }
        let previousOffset = Int64(zone.secondsFromGMT(for: previous.addingTimeInterval(-1)))
        out += observance(
            daylight: isDaylight, at: previous, from: previous == startDate ? offset : previousOffset, to: offset,
            name: VTimeZoneBuilder.abbreviation(zone, at: startDate))
        var at = startDate
        let end = Date(timeIntervalSince1970: Double(ISO8601.floorDiv(to, 1000)))
        while let transition = zone.nextDaylightSavingTimeTransition(after: at), transition <= end {
            let after = Int64(zone.secondsFromGMT(for: transition))
            isDaylight = zone.isDaylightSavingTime(for: transition)
            out += observance(
                daylight: isDaylight, at: transition, from: offset, to: after,
                name: VTimeZoneBuilder.abbreviation(zone, at: transition))
            offset = after
            at = transition
        }
        out.append(("END", "VTIMEZONE"))
        return out
    }

    private static func observance(daylight: Bool, at date: Date, from: Int64, to: Int64, name: String) -> [(
        String, String
    )] {
        let kind = daylight ? "DAYLIGHT" : "STANDARD"
        // DTSTART is the onset in the local time that was in effect before it.
        let local = LocalDateTime(wallSeconds: Int64(date.timeIntervalSince1970.rounded(.down)) + from)
        return [
            ("BEGIN", kind), ("DTSTART", CalendarTime.basic(local, date: false)),
            ("TZOFFSETFROM", UTCOffset.format(from)),
            ("TZOFFSETTO", UTCOffset.format(to)), ("TZNAME", name), ("END", kind),
        ]
    }
}
