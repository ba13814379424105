import Foundation
import Records
import StoreCore

/// How a calendar export is written.
public struct ICalExportOptions: Sendable {
    /// Write times as local times with TZID, and a VTIMEZONE; nil writes UTC.
    public var timeZone: TimeZone?
    /// DTSTAMP of every component, in milliseconds: the export time unless pinned.
    public var dtstamp: Int64
    /// Write records the mapping calls cancelled, with STATUS:CANCELLED, instead of leaving them out.
    public var includeCancelled: Bool
    public var productID: String
    /// Each component's DTSTAMP and SEQUENCE from its record rather than from the export: DTSTAMP
    /// the record's modification time (its creation time, else `dtstamp`), and, where the
    /// mapping names no field for SEQUENCE, the whole seconds between the record's creation and
    /// its last modification, which rise only when the record changes. A feed is written so:
    /// the same store gives the same bytes at any time, and a subscriber sees which events
    /// changed.
    public var revisionsFromRecords: Bool
    /// A selection without records writes a calendar of no events, holding only a VTIMEZONE
    /// (RFC 5545 wants one component at least; GMT's when no zone is named), instead of
    /// failing. A feed is written so: when its last event goes, subscribers must see it go,
    /// where an error would leave them showing the last calendar they fetched.
    public var allowsEmpty: Bool

    public init(
        timeZone: TimeZone? = nil, dtstamp: Int64 = Int64(Date().timeIntervalSince1970 * 1000),
        includeCancelled: Bool = false,
        productID: String = "-//ckport//ckport \(CKPortVersion.current)//EN", revisionsFromRecords: Bool = false,
        allowsEmpty: Bool = false
    ) {
        self.timeZone = timeZone
        self.dtstamp = dtstamp
        self.includeCancelled = includeCancelled
        self.productID = productID
        self.revisionsFromRecords = revisionsFromRecords
        self.allowsEmpty = allowsEmpty
    }

    /// The SEQUENCE of `record` under ``revisionsFromRecords``: the whole seconds from its
    /// creation to its last modification (0 for a record never changed, or without the times),
    /// at most 2³¹ − 1 (RFC 5545's INTEGER).
    public static func sequence(of record: Record) -> Int64 {
        guard let created = record.created?.timestamp, let modified = record.modified?.timestamp, modified > created
        else { return 0 }
        return min((modified - created) / 1000, Int64(Int32.max))
    }
}

/// What an export wrote.
public struct ICalExportSummary: Sendable {
    /// Components written per record type.
    public var written: [String: Int] = [:]
    /// Records left out because the mapping calls them cancelled.
    public var cancelledLeftOut = 0
    public var calendarName: String?
}

/// Writes records as an iCalendar file (RFC 5545) through a mapping.
///
/// Output is deterministic: the same store gives the same bytes, DTSTAMP aside (which the
/// options can pin). Components come in the mapping's order, records in export order, and
/// attendees by record name.
public final class ICalendarExporter {
    private let session: any RecordSession
    private let mapping: CalendarMapping
    private let options: ICalExportOptions
    private var people: [String: Record?] = [:]
    private var writer = ICalLineWriter()
    /// How the record being written keeps its times, when its mapping's `timeZone` field says
    /// so: a zone of its own (unless `--tz` names another), UTC, floating or a DATE. Floating
    /// times and dates are stored as their wall clock (as if UTC) and written as that wall
    /// clock, whatever `--tz` says; under `--tz` a floating time gets that zone's TZID.
    private var recordZone: TimeZone?
    private var recordUTC = false
    private var recordFloating = false
    private var recordDate = false
    /// The record keeps a TZID of its own that `--tz` writes over.
    private var recordOtherZone = false
    /// Whether the record says how its times were written (then no midnight-to-midnight guess).
    private var recordKeepsForm: Bool {
        recordZone != nil || recordUTC || recordFloating || recordDate || recordOtherZone
    }

    public init(session: any RecordSession, mapping: CalendarMapping, options: ICalExportOptions) {
        self.session = session
        self.mapping = mapping
        self.options = options
    }

    /// The query for each component the export writes: the user's predicate (which every
    /// chosen type must be able to answer) and the mapping's own `where`.
    /// How many years past the last stored date a VTIMEZONE reaches when the calendar has
    /// repeating components.
    public static let recurrenceHorizonYears = 10

    public func queries(_ base: RecordQuery) throws -> [(CalendarMapping.Component, RecordQuery)] {
        var out: [(CalendarMapping.Component, RecordQuery)] = []
        for type in base.recordTypes where !mapping.components.contains(where: { $0.recordType == type }) {
            throw StoreError.badQuery(
                "the calendar mapping has no component for \(type) (it maps \(mapping.components.map(\.recordType).joined(separator: ", ")))"
            )
        }
        for component in mapping.components
        where base.recordTypes.isEmpty || base.recordTypes.contains(component.recordType) {
            var query = base
            query.recordTypes = [component.recordType]
            var conditions = base.predicate?.conditions ?? []
            if let type = session.schema.recordType(named: component.recordType) {
                for condition in conditions
                where type.field(named: condition.field) == nil
                    && !["recordName", "___createTime", "___modTime"].contains(condition.field)
                {
                    throw StoreError.badQuery(
                        "\(Wording.predicateWord) names field '\(condition.field)', which \(component.recordType) does not have; \(Wording.chooseRecordTypes)"
                    )
                }
            }
            conditions += component.filter?.conditions ?? []
            query.predicate = conditions.isEmpty ? nil : RecordPredicate(conditions)
            out.append((component, query))
        }
        return out
    }

    public func export(_ base: RecordQuery, to output: OutputFile) throws -> ICalExportSummary {
        var summary = ICalExportSummary()
        let plan = try queries(base)
        writer.line("BEGIN", "VCALENDAR")
        writer.line("VERSION", "2.0")
        writer.text("PRODID", options.productID)
        writer.line("CALSCALE", "GREGORIAN")
        if let name = try calendarName(plan) {
            summary.calendarName = name
            writer.text("X-WR-CALNAME", name)
        }
        if let zone = options.timeZone {
            writer.line("X-WR-TIMEZONE", zone.identifier)
            // The zone its dates and floating times are written in, for ckport's import of it.
            writer.line(CalendarMapping.exportZoneProperty, zone.identifier)
            var low: Int64?
            var high: Int64?
            for (component, query) in plan {
                let fields = component.properties.compactMap { property -> String? in
                    CalendarMapping.timeProperties.contains(property.name) ? property.value.sourceField : nil
                }
                if let (a, b) = try session.bounds(query, fields: fields) {
                    low = min(low ?? a, a)
                    high = max(high ?? b, b)
                }
            }
            let from = low ?? options.dtstamp
            var to = max(high ?? options.dtstamp, from) + 86_400_000
            // Repeating components go on past their last stored date: their occurrences need
            // the zone's changes too, for as far as a family plans ahead.
            if plan.contains(where: { $0.0.recurrence != nil }) {
                to += Int64(ICalendarExporter.recurrenceHorizonYears) * 366 * 86_400_000
            }
            for (name, value) in VTimeZoneBuilder.lines(for: zone, from: from, to: to) { writer.line(name, value) }
        }
        var wroteZone = options.timeZone != nil
        if options.timeZone == nil { wroteZone = try writeKeptZones(plan) }
        try output.write(writer.take())
        for (component, query) in plan {
            guard let type = session.schema.recordType(named: component.recordType) else { continue }
            try session.forEach(query) { record in
                let cancelled =
                    try component.cancelled.map { predicate throws in try predicate.matches(record, type: type) }
                    ?? false
                if cancelled && !options.includeCancelled {
                    summary.cancelledLeftOut += 1
                    return
                }
                try write(record, component, cancelled: cancelled)
                summary.written[component.recordType, default: 0] += 1
                if writer.bytes.count >= 1 << 18 { try output.write(writer.take()) }
            }
        }
        if summary.written.isEmpty, options.allowsEmpty {
            if !wroteZone {
                let utc = TimeZone(identifier: "UTC")!
                for (name, value) in VTimeZoneBuilder.lines(for: utc, from: options.dtstamp, to: options.dtstamp) {
                    writer.line(name, value)
                }
            }
            writer.line("END", "VCALENDAR")
            try output.write(writer.take())
            try output.commit()
            return summary
        }
        guard !summary.written.isEmpty else {
            // An empty VCALENDAR is not a calendar RFC 5545 readers accept.
            output.discard()
            let cancelled =
                summary.cancelledLeftOut > 0
                ? " (\(summary.cancelledLeftOut) cancelled record\(summary.cancelledLeftOut == 1 ? " was" : "s were") left out)"
                : ""
            throw StoreError.badQuery(
                "nothing to export: the selection holds no records for the calendar's components\(cancelled), and an empty calendar is not one RFC 5545 readers accept"
            )
        }
        writer.line("END", "VCALENDAR")
        try output.write(writer.take())
        try output.commit()
        return summary
    }

    /// A VTIMEZONE for every zone the records' `timeZone` fields keep, covering their times.
    /// - Returns: whether it wrote any.
    private func writeKeptZones(_ plan: [(CalendarMapping.Component, RecordQuery)]) throws -> Bool {
        var spans: [String: (low: Int64, high: Int64, repeats: Bool)] = [:]
        for (component, query) in plan {
            guard let field = component.timeZone else { continue }
            let timeFields = component.properties.compactMap {
                CalendarMapping.timeProperties.contains($0.name) ? $0.value.sourceField : nil
            }
            try session.forEach(query) { record in
                guard case .string(let kept)? = record.fields[field], !CalendarMapping.keptForms.contains(kept),
                    TimeZone(identifier: kept) != nil
                else { return }
                for name in timeFields {
                    guard case .timestamp(let ms)? = record.fields[name] else { continue }
                    let span = spans[kept] ?? (ms, ms, false)
                    spans[kept] = (min(span.low, ms), max(span.high, ms), span.repeats || component.recurrence != nil)
                }
            }
        }
        for (identifier, span) in spans.sorted(by: { $0.key < $1.key }) {
            let zone = TimeZone(identifier: identifier)!
            var to = span.high + 86_400_000
            if span.repeats { to += Int64(ICalendarExporter.recurrenceHorizonYears) * 366 * 86_400_000 }
            for (name, value) in VTimeZoneBuilder.lines(for: zone, from: span.low, to: to) { writer.line(name, value) }
        }
        return !spans.isEmpty
    }

    /// X-WR-CALNAME: a fixed text, or read through the first record's reference when every
    /// exported record points at the same target (one family's calendar).
    private func calendarName(_ plan: [(CalendarMapping.Component, RecordQuery)]) throws -> String? {
        guard let spec = mapping.calendarName, let (_, query) = plan.first else { return nil }
        switch spec {
        case .constant(let text): return text
        case .reference(let field, let target):
            var first: Record?
            var limited = query
            limited.limit = 1
            try session.forEach(limited) { first = $0 }
            guard let first, case .reference(let reference)? = first.fields[field] else { return nil }
            var others = query
            others.limit = 1
            var conditions = others.predicate?.conditions ?? []
            conditions.append(
                Condition(
                    field: field, op: .notEqual, value: .string(reference.recordName), fieldColumn: 0, valueColumn: 0))
            others.predicate = RecordPredicate(conditions)
            if try session.count(others) > 0 { return nil }
            guard let targetRecord = try session.record(RecordID(recordName: reference.recordName, zone: first.zone)),
                case .string(let name)? = targetRecord.fields[target]
            else { return nil }
            return name
        case .field, .mapped, .date:
            return nil
        }
    }

    // MARK: Components

    private func write(_ record: Record, _ component: CalendarMapping.Component, cancelled: Bool) throws {
        (recordZone, recordUTC, recordFloating, recordDate, recordOtherZone) = (nil, false, false, false, false)
        if let field = component.timeZone, case .string(let kept)? = record.fields[field] {
            switch kept {
            case CalendarMapping.keptDate: recordDate = true
            case CalendarMapping.keptFloating: recordFloating = true
            case CalendarMapping.keptUTC: recordUTC = options.timeZone == nil
            default:
                if options.timeZone == nil { recordZone = TimeZone(identifier: kept) } else { recordOtherZone = true }
            }
        }
        defer {
            (recordZone, recordUTC, recordFloating, recordDate, recordOtherZone) = (nil, false, false, false, false)
        }
        writer.line("BEGIN", component.component)
        writer.text("UID", record.recordName)
        writer.utc(
            "DTSTAMP",
            options.revisionsFromRecords
                ? record.modified?.timestamp ?? record.created?.timestamp ?? options.dtstamp : options.dtstamp)
        // Where the record lives and what it is, so that importing this file updates it.
        if record.zone != .defaultZone {
            var parameters: [(String, String)] = [("SCOPE", record.zone.scope.rawValue)]
            if record.zone.ownerRecordName != ZoneID.defaultOwnerName {
                parameters.append(("OWNER", record.zone.ownerRecordName))
            }
            writer.text(CalendarMapping.zoneProperty, parameters, record.zone.zoneName)
        }
        if mapping.isShared(component.component) { writer.text(CalendarMapping.typeProperty, record.recordType) }
        let start = timestamp(record, component.property("DTSTART"))
        let end = timestamp(record, component.property("DTEND"))
        // An event from local midnight to local midnight is an all-day event.
        let allDay =
            component.component == "VEVENT" && !recordKeepsForm && start != nil && end != nil && isMidnight(start!)
            && isMidnight(end!) && end! > start!
        if let form = keptForm(record, component, hasStart: start != nil, allDay: allDay) {
            writer.text(CalendarMapping.keptFormProperty, form.parameters, form.value)
        }
        var wroteStatus = false
        for (name, value) in component.properties {
            if name == "STATUS" { wroteStatus = true }
            try writeProperty(name, value, of: record, allDay: allDay && (name == "DTSTART" || name == "DTEND"))
        }
        if component.property("CREATED") == nil, let created = record.created {
            writer.utc("CREATED", created.timestamp)
        }
        if component.property("LAST-MODIFIED") == nil, let modified = record.modified {
            writer.utc("LAST-MODIFIED", modified.timestamp)
        }
        if component.property("SEQUENCE") == nil {
            writer.line("SEQUENCE", options.revisionsFromRecords ? String(ICalExportOptions.sequence(of: record)) : "0")
        }
        if cancelled && !wroteStatus { writer.line("STATUS", "CANCELLED") }
        if let recurrence = component.recurrence, let rule = rule(recurrence, record) { writer.line("RRULE", rule) }
        if let organizer = component.organizer, let (name, address) = try person(organizer, record) {
            writer.line("ORGANIZER", name.map { [("CN", $0)] } ?? [], address)
        }
        if let attendees = component.attendees {
            for attendee in try session.records(
                ofType: attendees.recordType, whose: attendees.reference, pointsAt: record.id)
            {
                guard let (name, address) = try person(attendees.person, attendee) else { continue }
                var parameters: [(String, String)] = []
                if let name { parameters.append(("CN", name)) }
                parameters.append(("ROLE", "REQ-PARTICIPANT"))
                if let partstat = attendees.partstat, let text = try text(partstat, of: attendee) {
                    parameters.append(("PARTSTAT", text.uppercased()))
                }
                // The participant record's own name, so that importing this file updates it.
                parameters.append((ICalendarExporter.recordParameter, attendee.recordName))
                writer.line("ATTENDEE", parameters, address)
            }
        }
        for alarm in component.alarms {
            guard case .timestamp(let at)? = record.fields[alarm.trigger] else { continue }
            writer.line("BEGIN", "VALARM")
            writer.line("ACTION", alarm.action)
            if let start {
                writer.line("TRIGGER", CalendarDuration.format(seconds: ISO8601.floorDiv(at - start, 1000)))
            } else {
                writer.line("TRIGGER", [("VALUE", "DATE-TIME")], CalendarTime.utcText(at))
            }
            if alarm.action == "DISPLAY" {
                let description =
                    try alarm.description.flatMap { try text($0, of: record) }
                    ?? (try component.property("SUMMARY").flatMap { try text($0, of: record) }) ?? "Reminder"
                writer.text("DESCRIPTION", description)
            }
            writer.line("END", "VALARM")
        }
        writer.line("END", component.component)
    }

    /// What the record's `timeZone` field holds, when the times as written do not say it
    /// (`--tz` writes every time in its zone; a record that keeps no form would get one; a
    /// component without DTSTART says nothing of its form), so that importing this file gives
    /// the record back as it is: the field's value, or, when it holds none, `none` marked
    /// `X-CKPORT-EMPTY=TRUE` (with `TZID`, the zone whose midnights its dates are).
    private func keptForm(_ record: Record, _ component: CalendarMapping.Component, hasStart: Bool, allDay: Bool) -> (
        value: String, parameters: [(String, String)]
    )? {
        guard let field = component.timeZone else { return nil }
        guard case .string(let kept)? = record.fields[field] else {
            var parameters = [(CalendarMapping.keptEmptyParameter, "TRUE")]
            if allDay, let zone = options.timeZone { parameters.append(("TZID", zone.identifier)) }
            return (CalendarMapping.keptNone, parameters)
        }
        // Only DTSTART says how a component's times were written.
        guard hasStart else { return (kept, []) }
        switch kept {
        case CalendarMapping.keptDate:
            return nil
        case CalendarMapping.keptFloating, CalendarMapping.keptUTC:
            return options.timeZone == nil ? nil : (kept, [])
        default:
            let written = options.timeZone ?? recordZone
            return written?.identifier == kept ? nil : (kept, [])
        }
    }

    private func writeProperty(_ name: String, _ value: CalendarMapping.Value, of record: Record, allDay: Bool) throws {
        if CalendarMapping.timeProperties.contains(name) {
            guard let ms = timestamp(record, value) else { return }
            let utcOnly = name == "CREATED" || name == "LAST-MODIFIED" || name == "COMPLETED"
            if case .date = value {
                // A date field holds its day's midnight in UTC, as the apps keep dates: the same
                // day under any --tz (a check-in of 5 January is never written on the 4th).
                writer.line(
                    name, [("VALUE", "DATE")],
                    CalendarTime.basic(LocalDateTime(wallSeconds: ISO8601.floorDiv(ms, 1000)), date: true))
            } else if allDay || (recordDate && !utcOnly) {
                writer.line(name, [("VALUE", "DATE")], CalendarTime.basic(local(ms), date: true))
            } else if recordFloating && !utcOnly {
                if let zone = options.timeZone {
                    writer.line(name, [("TZID", zone.identifier)], CalendarTime.basic(local(ms), date: false))
                } else {
                    writer.line(name, CalendarTime.basic(local(ms), date: false))
                }
            } else if let zone = options.timeZone ?? recordZone, !utcOnly {
                writer.line(name, [("TZID", zone.identifier)], CalendarTime.basic(local(ms), date: false))
            } else {
                writer.utc(name, ms)
            }
            return
        }
        switch name {
        case "SEQUENCE", "PRIORITY", "PERCENT-COMPLETE":
            guard let text = try text(value, of: record), Int(text) != nil else { return }
            writer.line(name, text)
        case "CATEGORIES":
            if let field = value.sourceField, case .list(_, let items)? = record.fields[field], case .field = value {
                let texts = items.compactMap {
                    if case .string(let s) = $0 { return ICalText.escape(s) } else { return nil }
                }
                if !texts.isEmpty { writer.line(name, texts.joined(separator: ",")) }
            } else if let text = try text(value, of: record), !text.isEmpty {
                writer.text(name, text)
            }
        case "URL":
            if let text = try text(value, of: record), !text.isEmpty { writer.line(name, text) }
        default:
            if let text = try text(value, of: record) { writer.text(name, text) }
        }
    }

    /// The text a value spec gives for a record, or nil when it gives nothing.
    func text(_ value: CalendarMapping.Value, of record: Record) throws -> String? {
        switch value {
        case .constant(let text): return text
        case .field(let name), .date(let name): return record.fields[name].flatMap(Self.plainText)
        case .mapped(let name, let values):
            guard let raw = record.fields[name].flatMap(Self.plainText) else { return nil }
            return values[raw] ?? raw
        case .reference(let name, let target):
            guard case .reference(let reference)? = record.fields[name],
                let targetRecord = try session.record(RecordID(recordName: reference.recordName, zone: record.zone))
            else { return nil }
            return targetRecord.fields[target].flatMap(Self.plainText)
        }
    }

    static func plainText(_ value: FieldValue) -> String? {
        switch value {
        case .string(let s): return s
        case .int64(let i): return String(i)
        case .double(let d): return d.description
        case .timestamp(let t): return ISO8601.format(milliseconds: t)
        case .reference(let r): return r.recordName
        case .list(_, let items): return items.compactMap(plainText).joined(separator: ", ")
        default: return nil
        }
    }

    private func timestamp(_ record: Record, _ value: CalendarMapping.Value?) -> Int64? {
        guard let field = value?.sourceField, case .timestamp(let ms)? = record.fields[field] else { return nil }
        return ms
    }

    private func local(_ ms: Int64) -> LocalDateTime {
        let seconds = ISO8601.floorDiv(ms, 1000)
        if recordDate || recordFloating { return LocalDateTime(wallSeconds: seconds) }
        let offset =
            (options.timeZone ?? recordZone).map {
                Int64($0.secondsFromGMT(for: Date(timeIntervalSince1970: Double(seconds))))
            } ?? 0
        return LocalDateTime(wallSeconds: seconds + offset)
    }

    private func isMidnight(_ ms: Int64) -> Bool {
        let wall = local(ms)
        return ms % 1000 == 0 && wall.hour == 0 && wall.minute == 0 && wall.second == 0
    }

    /// A person's CN and calendar address.
    private func person(_ spec: CalendarMapping.Person, _ record: Record) throws -> (String?, String)? {
        let key: String
        switch record.fields[spec.field] {
        case .string(let s)?: key = s
        case .reference(let r)?: key = r.recordName
        default: return nil
        }
        var name: String?
        var email: String?
        if let lookup = spec.lookup {
            let cacheKey = lookup + "\u{0}" + key
            if people[cacheKey] == nil { people[cacheKey] = .some(try session.record(named: key, ofType: lookup)) }
            if let found = people[cacheKey] ?? nil {
                if let field = spec.name, case .string(let s)? = found.fields[field] { name = s }
                if let field = spec.email, case .string(let s)? = found.fields[field] { email = s }
            }
        }
        if email == nil && key.contains("@") { email = key }
        let address =
            email.map { "mailto:" + $0 } ?? "urn:x-ckport:" + key.addingPercentEncoding(
                withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~")))!
        return (name, address)
    }

    /// The ATTENDEE parameter that carries the participant record's name.
    public static let recordParameter = "X-CKPORT-RECORD"

    /// RRULE text for a record, or nil when its fields give none.
    func rule(_ recurrence: CalendarMapping.Recurrence, _ record: Record) -> String? {
        switch recurrence {
        case .rule(let field):
            guard case .string(let text)? = record.fields[field], let rule = try? RecurrenceRule(parsing: text) else {
                return nil
            }
            return rule.text
        case .chore(let typeField, let weekdayField, let monthDayField):
            guard case .string(let kind)? = record.fields[typeField] else { return nil }
            var weekday: String?
            if let weekdayField, case .int64(let n)? = record.fields[weekdayField], (1...7).contains(n) {
                weekday = RecurrenceRule.weekdayNames[Int(n) - 1]
            }
            switch kind.lowercased() {
            case "daily": return "FREQ=DAILY"
            case "weekly": return "FREQ=WEEKLY" + (weekday.map { ";BYDAY=" + $0 } ?? "")
            case "biweekly": return "FREQ=WEEKLY;INTERVAL=2" + (weekday.map { ";BYDAY=" + $0 } ?? "")
            case "monthly":
                guard let monthDayField, case .int64(let day)? = record.fields[monthDayField], (1...31).contains(day)
                else { return "FREQ=MONTHLY" }
                // Days 29–31 fall on the month's last day in shorter months (a chore for the
                // 31st happens on 30 April and 28 February), rather than skipping those months.
                if day <= 28 { return "FREQ=MONTHLY;BYMONTHDAY=\(day)" }
                return "FREQ=MONTHLY;BYMONTHDAY=" + (28...day).map(String.init).joined(separator: ",") + ";BYSETPOS=-1"
            default: return nil
            }
        }
    }
}
