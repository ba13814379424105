import Foundation
import Records
import StoreCore

/// One occurrence of a calendar component in a window of time: the record it comes from, its
/// title, and when it starts and ends (UTC milliseconds).
public struct CalendarOccurrence: Sendable {
    public var record: Record
    /// VEVENT or VTODO, as the mapping says.
    public var component: String
    public var title: String
    public var start: Int64
    public var end: Int64?
    /// A whole day (or days): a DATE, or an event from local midnight to local midnight.
    public var allDay: Bool
    /// One of several occurrences of a recurring record.
    public var recurring: Bool
}

/// The occurrences a calendar app would show for the iCalendar export of a store, with `--tz`
/// naming the viewer's zone: each record's start and end from the fields the mapping gives
/// DTSTART and DTEND (DUE for a to-do without a start), and a recurring record's RRULE expanded
/// in that zone's wall clock, so 09:00 stays 09:00 across a change of daylight saving time.
/// Records the mapping calls cancelled are left out, as the export leaves them out.
///
/// Records are read through the store's queries, a type at a time, limited to the window where
/// the mapping allows it (a recurring record that started before the window is read too).
public enum CalendarOccurrences {
    /// The occurrences that overlap `from..<to` (UTC milliseconds), by start time, at most
    /// `limit` of them; `more` when there were others.
    public static func find(
        in session: any RecordSession, mapping: CalendarMapping, from: Int64, to: Int64, zone: TimeZone,
        limit: Int
    ) throws -> (occurrences: [CalendarOccurrence], more: Bool) {
        let exporter = ICalendarExporter(session: session, mapping: mapping, options: ICalExportOptions(timeZone: zone))
        var found: [CalendarOccurrence] = []
        for component in mapping.components {
            guard let type = session.schema.recordType(named: component.recordType),
                let startField = (component.property("DTSTART") ?? component.property("DUE"))?.sourceField,
                type.field(named: startField)?.type == .timestamp
            else { continue }
            let endField = component.property("DTSTART") != nil ? component.property("DTEND")?.sourceField : nil
            // Every record that starts before the window ends; without a recurrence, only those
            // that end (or start) after it begins. A day's margin each way: a DATE or a floating
            // time is stored as its wall clock, which the viewer's zone moves by up to 14 hours.
            let before = Condition(
                field: startField, op: .less, value: .date(ISO8601.format(milliseconds: to + 86_400_000)),
                fieldColumn: 0, valueColumn: 0)
            func since(_ field: String) -> Condition {
                Condition(
                    field: field, op: .greaterOrEqual, value: .date(ISO8601.format(milliseconds: from - 86_400_000)),
                    fieldColumn: 0, valueColumn: 0)
            }
            var windows = [[before]]
            if component.recurrence == nil {
                // Those that start in the window, and (when they have an end) those that end in
                // it or after it: a record without an end, or with an end before its start, is
                // found by its start. A record both finds is shown once.
                windows = [[before, since(startField)]]
                if let endField, type.field(named: endField)?.type == .timestamp {
                    windows.append([before, since(endField)])
                }
            }
            var seen = Set<RecordID>()
            for conditions in windows {
                let base = RecordQuery(recordTypes: [component.recordType], predicate: RecordPredicate(conditions))
                for (_, query) in try exporter.queries(base) {
                    try session.forEach(query) { record in
                        if windows.count > 1 { guard seen.insert(record.id).inserted else { return } }
                        if try component.cancelled?.matches(record, type: type) == true { return }
                        guard case .timestamp(let start)? = record.fields[startField] else { return }
                        var end: Int64?
                        if let endField, case .timestamp(let value)? = record.fields[endField], value >= start {
                            end = value
                        }
                        let title =
                            (try component.property("SUMMARY").flatMap { try exporter.text($0, of: record) })
                            ?? record.recordName
                        // How the record keeps its times: a DATE or a floating time is its wall clock.
                        var wallClock = false
                        if let field = component.timeZone, case .string(let kept)? = record.fields[field] {
                            wallClock = kept == CalendarMapping.keptDate || kept == CalendarMapping.keptFloating
                        }
                        // A DATE: the mapping writes the field as one, or the record kept one.
                        var isDate =
                            component.timeZone.flatMap { record.fields[$0] } == .string(CalendarMapping.keptDate)
                        if case .date? = component.property("DTSTART") ?? component.property("DUE") { isDate = true }
                        // The wall clock the export writes (a DATE: its day's midnight).
                        func wall(_ ms: Int64) -> LocalDateTime {
                            let clock =
                                wallClock
                                ? LocalDateTime(wallSeconds: ISO8601.floorDiv(ms, 1000))
                                : ZoneResolver.wall(milliseconds: ms, in: zone)
                            return isDate ? LocalDateTime(year: clock.year, month: clock.month, day: clock.day) : clock
                        }
                        // As UTC milliseconds: a wall-clock time is read in the viewer's zone.
                        func instant(_ ms: Int64) -> Int64 {
                            wallClock || isDate ? ZoneResolver.instant(wall: wall(ms), in: zone) * 1000 : ms
                        }
                        let length = end.map { $0 - start }
                        let midnight: (Int64) -> Bool = {
                            let w = wall($0)
                            return $0 % 1000 == 0 && w.hour == 0 && w.minute == 0 && w.second == 0
                        }
                        let allDay =
                            isDate
                            || (component.component == "VEVENT" && end != nil && end! > start && midnight(start)
                                && midnight(end!))
                        func add(_ at: Int64, recurring: Bool) {
                            guard at < to && (at >= from || at + max(length ?? 0, 0) > from) else { return }
                            found.append(
                                CalendarOccurrence(
                                    record: record, component: component.component, title: title, start: at,
                                    end: length.map { at + $0 }, allDay: allDay, recurring: recurring))
                            // Memory stays bounded: past twice the limit, only the earliest are kept.
                            if found.count >= 2 * (limit + 1) { trim(&found, to: limit + 1) }
                        }
                        guard let recurrence = component.recurrence, let text = exporter.rule(recurrence, record),
                            let rule = try? RecurrenceRule(parsing: text)
                        else {
                            add(instant(start), recurring: false)
                            return
                        }
                        let set = RecurrenceSet(
                            start: wall(start), isDate: isDate, rules: [rule],
                            instant: { ZoneResolver.instant(wall: $0, in: zone) },
                            instantOf: { time in
                                switch time {
                                case .utc(let t): return t.wallSeconds
                                case .zoned(let t, let id):
                                    return ZoneResolver.instant(wall: t, in: TimeZone(identifier: id) ?? zone)
                                case .date(let t), .floating(let t): return ZoneResolver.instant(wall: t, in: zone)
                                }
                            })
                        let reach = max(length ?? 0, 0)
                        let occurrences =
                            (try? set.occurrences(
                                from: ISO8601.floorDiv(from - reach, 1000), to: ISO8601.floorDiv(to, 1000) + 1)) ?? []
                        for occurrence in occurrences {
                            add(ZoneResolver.instant(wall: occurrence, in: zone) * 1000, recurring: true)
                        }
                    }
                }
            }
        }
        trim(&found, to: limit + 1)
        let more = found.count > limit
        if more { found.removeLast(found.count - limit) }
        return (found, more)
    }

    /// Sorts by start (then title, then record name) and keeps the first `count`.
    private static func trim(_ found: inout [CalendarOccurrence], to count: Int) {
        found.sort {
            if $0.start != $1.start { return $0.start < $1.start }
            if $0.title != $1.title { return RecordFields.precedes($0.title, $1.title) }
            return RecordFields.precedes($0.record.recordName, $1.record.recordName)
        }
        if found.count > count { found.removeLast(found.count - count) }
    }
}
