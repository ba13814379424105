import Foundation
import Records
import StoreCore

/// How an iCalendar import reads its file.
public struct ICalImportOptions: Sendable {
    /// The zone for floating times and DATE values; nil is UTC.
    public var timeZone: TimeZone?
    /// Expand recurring components into one record per occurrence starting in this window
    /// (UTC milliseconds, end exclusive).
    public var expand: (from: Int64, to: Int64)?
    /// Zone and scope of the records made.
    public var zone: ZoneID
    /// Field values every main record gets (`--set familyID=family-1`), as CSV cells.
    public var fixedFields: [(field: String, text: String)]
    /// Calendar addresses (lowercased e-mail) → the record names of the people they belong to.
    public var people: [String: String]
    /// RECURRENCE-ID overrides found by a first pass: UID + NUL + UTC seconds.
    public var overrides: Set<String>
    /// The calendar name an export of these records would write (X-WR-CALNAME), when it is
    /// known: the mapping's fixed name, or the name of the record every imported record
    /// points at (`--set familyID=…`). A file's X-WR-CALNAME that says the same is kept by
    /// that; one that says something else is named as not kept.
    public var nameOnExport: String?
    /// Components that a later one of the file supersedes, by their number in the file (from
    /// 1, every component directly inside a VCALENDAR counted): found by ``firstPass(in:timeZone:)``.
    public var superseded: Set<Int> = []

    public init(
        timeZone: TimeZone? = nil, expand: (from: Int64, to: Int64)? = nil, zone: ZoneID = .defaultZone,
        fixedFields: [(field: String, text: String)] = [], people: [String: String] = [:], overrides: Set<String> = []
    ) {
        self.timeZone = timeZone
        self.expand = expand
        self.zone = zone
        self.fixedFields = fixedFields
        self.people = people
        self.overrides = overrides
    }
}

/// Reads records from an iCalendar file through a mapping: VEVENT → Event (and an
/// EventParticipant per ATTENDEE), VTODO → Task, and so on. Records are named from the UID, so
/// importing the same file twice changes nothing; recurring components expand into their
/// occurrences within a window.
public final class ICalendarRecordReader: AnnotatedRecordSource, LossReportingSource {
    /// A temporary copy of standard input this reader reads, kept until the reader goes.
    var spool: TemporarySpool?
    private let parser: ICalParser
    private let input: ByteInput
    private let mapping: CalendarMapping
    private let schema: Schema
    private let options: ICalImportOptions
    /// Resolves the times of the component being read: `givenZones` (floating times and dates
    /// in --tz), or, for a component whose mapping keeps how its times were written and whose
    /// DTSTART is floating or a DATE, `wallClockZones`: those times are kept as their wall
    /// clock (stored as if UTC), so that no --tz, on import or export, moves them to another day.
    private var zones: ZoneResolver
    private let givenZones: ZoneResolver
    private let wallClockZones = ZoneResolver()
    /// The component being read was written by `--tz` from floating times: its zoned times
    /// are read back as the wall clocks they were (see ``CalendarMapping/keptFormProperty``).
    private var zonedAsWallClock = false
    /// The fields of the component being read that --set filled (see ``SourcedRecord/filledFields``).
    private var filled: [String] = []
    private let values: CSVValues
    private var queue: [SourceItem] = []
    private var queueIndex = 0
    /// The rest of an expansion: adds the next occurrences' records to the queue, and says
    /// whether more remain.
    private var pendingOccurrences: (() -> Bool)?
    private var skippedComponents: [String: Int] = [:]
    /// Components left out for a later one of the same event (see ``firstPass(in:timeZone:overrides:)``), by kind.
    private var supersededComponents: [String: Int] = [:]
    /// What the mapping had no place for: item → how many, in how many components, and the
    /// line of the last component counted (components come one at a time).
    private var notKept: [String: (count: Int, components: Int, lastLine: Int, kind: String)] = [:]

    /// Everything the import did not keep, item by item; empty when it kept everything read.
    public var notKeptItems: [String] {
        var items = skippedComponents.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
        items += supersededComponents.sorted { $0.key < $1.key }.map {
            "\($0.value) \($0.key)\($0.value == 1 ? "" : "s") superseded by a later message for the same event (the one with the highest SEQUENCE, the last of equals, kept whole)"
        }
        // The calendar's own properties: what every calendar says of itself (VERSION, the
        // writer's PRODID, the Gregorian CALSCALE) needs no place; the name has one when the
        // mapping writes it back from the records (its `name`); anything else (METHOD,
        // X-WR-CALDESC, X-WR-TIMEZONE, REFRESH-INTERVAL, …) has none in an app's records.
        for (name, count) in parser.calendarPropertyCounts.sorted(by: { $0.key < $1.key }) {
            if ["VERSION", "PRODID", "CALSCALE", CalendarMapping.exportZoneProperty].contains(name) { continue }
            // The zone ckport's export wrote in, which its X-CKPORT-TZ says again and the import used.
            if name == "X-WR-TIMEZONE", parser.calendarPropertyCounts[CalendarMapping.exportZoneProperty] != nil {
                continue
            }
            if name == "X-WR-CALNAME", let kept = options.nameOnExport, calendarNames.allSatisfy({ $0 == kept }) {
                continue
            }
            if name == "X-WR-CALNAME", mapping.calendarName != nil {
                let differing = calendarNames.filter { $0 != options.nameOnExport }.map { "\"\($0)\"" }
                items.append(
                    "\(differing.count) X-WR-CALNAME of the calendar (\(differing.joined(separator: ", "))), "
                        + (options.nameOnExport.map { "which the records' calendar calls \"\($0)\"" }
                            ?? "which the records do not name"))
                continue
            }
            items.append("\(count) \(name) of the calendar")
        }
        items += parser.unreadableLineItems
        items += notKept.sorted { $0.key < $1.key }.map { item, value in
            let noun = value.kind + (value.components == 1 ? "" : "s")
            return "\(value.count) \(item) in \(value.components) \(noun)"
        }
        return items
    }

    private func dropped(_ item: String, _ component: ICalComponent, count: Int = 1) {
        guard count > 0 else { return }
        var entry = notKept[item] ?? (0, 0, -1, ICalendarRecordReader.noun(component.name))
        entry.count += count
        if entry.lastLine != component.line {
            entry.components += 1
            entry.lastLine = component.line
        }
        notKept[item] = entry
    }

    static func noun(_ component: String) -> String {
        switch component {
        case "VEVENT": return "event"
        case "VTODO": return "to-do"
        case "VJOURNAL": return "journal entry"
        default: return component
        }
    }
    private var recurringKeptOnce = 0
    private var calendars = 0
    private let numbers: PropertyNumbers
    /// The mapping's entries prepared for reading, by their index in the mapping; nil where the
    /// schema lacks the entry's record type.
    private var plans: [Int: ComponentPlan?] = [:]

    public init(input: ByteInput, mapping: CalendarMapping, schema: Schema, options: ICalImportOptions) {
        self.input = input
        parser = ICalParser(input: input)
        self.mapping = mapping
        self.schema = schema
        self.options = options
        givenZones = ZoneResolver(defaultZone: options.timeZone)
        zones = givenZones
        values = CSVValues(timeZone: options.timeZone)
        numbers = PropertyNumbers(mapping)
    }

    private func plan(_ index: Int) -> ComponentPlan? {
        if let known = plans[index] { return known }
        let spec = mapping.components[index]
        let plan = schema.recordType(named: spec.recordType).map {
            ComponentPlan(spec: spec, type: $0, schema: schema, numbers: numbers)
        }
        plans[index] = plan
        return plan
    }

    public var name: String { input.name }
    public var bytesRead: Int64 { input.bytesRead }
    public var totalBytes: Int64? { input.totalBytes }

    public var notes: [Message] {
        var notes: [Message] = []
        let items = notKeptItems
        if !items.isEmpty {
            notes.append(
                "not kept (the mapping has no place for them): \(items.joined(separator: ", ")) (\(Wording.keepWholeOrRefuse))"
            )
        }
        if recurringKeptOnce > 0 {
            notes.append(
                "\(recurringKeptOnce) recurring component\(recurringKeptOnce == 1 ? " was" : "s were") imported once, without the rule (\(Wording.expandForOccurrences))"
            )
        }
        for (warning, count) in parser.warnings.sorted(by: { $0.key < $1.key }) {
            notes.append("warning: \(warning) (\(count)×)")
        }
        if componentsRead == 0 && parser.calendarCount > 0 {
            notes.append(
                "warning: \(input.name) holds a calendar with no components (no event, to-do, journal or time zone): nothing in it to import"
            )
        }
        return notes
    }

    /// Components read from the file, of any kind.
    private var componentsRead = 0

    /// The store's calendar addresses → the record names of the people they belong to: every
    /// record of the types the mapping looks people up in, by their e-mail field.
    public static func people(_ mapping: CalendarMapping, in session: any RecordSession) throws -> [String: String] {
        var lookups: [(type: String, email: String)] = []
        for component in mapping.components {
            for person in [component.organizer, component.attendees?.person].compactMap({ $0 }) {
                if let type = person.lookup, let email = person.email { lookups.append((type, email)) }
            }
        }
        var people: [String: String] = [:]
        for (type, email) in lookups where session.schema.recordType(named: type) != nil {
            try session.forEach(RecordQuery(recordTypes: [type])) { record in
                if case .string(let address)? = record.fields[email] {
                    people[address.lowercased()] = record.recordName
                }
            }
        }
        return people
    }

    /// The RECURRENCE-ID overrides of a file, read in a first pass so that an override wins
    /// over its occurrence wherever it stands in the file.
    public static func overrides(in input: ByteInput, timeZone: TimeZone?) throws -> Set<String> {
        try firstPass(in: input, timeZone: timeZone, overrides: true).overrides
    }

    /// The calendar name an export of what `mapping` reads would write back (see
    /// ``ICalImportOptions/nameOnExport``): its fixed name, or the field of the record the
    /// fixed reference (`--set familyID=family-1`) points at, read from `store`.
    public static func nameOnExport(
        _ mapping: CalendarMapping, fixedFields: [(field: String, text: String)], zone: ZoneID,
        store: (any RecordStoring)?
    ) throws -> String? {
        switch mapping.calendarName {
        case .constant(let text)?:
            return text
        case .reference(let field, let target)?:
            guard let name = fixedFields.last(where: { $0.field == field })?.text, let store else { return nil }
            return try store.readSession { session in
                if case .string(let text)? = try session.record(RecordID(recordName: name, zone: zone))?.fields[target]
                {
                    return text
                }
                // In whichever zone holds it (a family's records live in the family's zone).
                for type in session.schema.recordTypes where type.field(named: target)?.type == .string {
                    if case .string(let text)? = try session.record(named: name, ofType: type.name)?.fields[target] {
                        return text
                    }
                }
                return nil
            }
        default:
            return nil
        }
    }

    /// What a first pass over a file finds: the RECURRENCE-ID overrides (when `overrides`),
    /// and the components that later ones supersede. Several components for one event (the
    /// same UID and RECURRENCE-ID: a stream of scheduling messages, a REQUEST and its later
    /// CANCEL) become one record, and blending them field by field could give an event no
    /// message said (an end before its start); the one kept whole is the one with the highest
    /// SEQUENCE, the last of those in the file when several share it. Memory: one entry per
    /// event, a hash and two numbers.
    public static func firstPass(in input: ByteInput, timeZone: TimeZone?, overrides wantOverrides: Bool) throws -> (
        overrides: Set<String>, superseded: Set<Int>
    ) {
        let parser = ICalParser(input: input)
        let zones = ZoneResolver(defaultZone: timeZone)
        var found: Set<String> = []
        var latest: [Int: (sequence: Int64, number: Int)] = [:]
        var superseded: Set<Int> = []
        var number = 0
        while let component = try parser.next() {
            number += 1
            if component.name == "VTIMEZONE" {
                try? zones.add(component)
                continue
            }
            guard let uid = component.property("UID")?.value else { continue }
            let recurrence = component.property("RECURRENCE-ID")
            if wantOverrides, let recurrence, let time = CalendarTime.parse(recurrence) {
                found.insert(overrideKey(uid: uid, time, zones: zones))
            }
            let sequence =
                component.property("SEQUENCE").flatMap { Int64($0.value.trimmingCharacters(in: .whitespaces)) } ?? 0
            let key = [component.name, uid, recurrence?.value ?? ""].joined(separator: "\u{0}").hashValue
            if let earlier = latest[key] {
                if sequence >= earlier.sequence {
                    superseded.insert(earlier.number)
                    latest[key] = (sequence, number)
                } else {
                    superseded.insert(number)
                }
            } else {
                latest[key] = (sequence, number)
            }
        }
        return (found, superseded)
    }

    /// What identifies an occurrence its override replaces: the UID and the instant, or for a
    /// floating or DATE recurrence (whose instant depends on the zone it is read in) the wall clock.
    static func overrideKey(uid: String, _ time: CalendarTime, zones: ZoneResolver) -> String {
        if time.isWallClock { return uid + "\u{0}L" + String(time.local.wallSeconds) }
        guard let ms = try? zones.milliseconds(time) else { return uid + "\u{0}?" }
        return uid + "\u{0}" + String(ISO8601.floorDiv(ms, 1000))
    }

    /// Each calendar's X-WR-CALNAME, as read.
    private var calendarNames: [String] = []

    private func noteFinishedCalendars() {
        for finished in parser.takeFinishedCalendars() {
            for property in finished.properties where property.name == "X-WR-CALNAME" {
                calendarNames.append(ICalText.unescape(property.value))
            }
        }
    }

    public func next() throws -> SourceItem? {
        defer { noteFinishedCalendars() }
        while queueIndex >= queue.count {
            queue.removeAll(keepingCapacity: true)
            queueIndex = 0
            if let more = pendingOccurrences {
                if !more() { pendingOccurrences = nil }
                continue
            }
            guard let component = try parser.next() else { return nil }
            read(component)
        }
        queueIndex += 1
        return queue[queueIndex - 1]
    }

    private func issue(_ line: Int, _ message: Message, name: String? = nil, type: String? = nil, field: String? = nil)
        -> SourceItem
    {
        .invalid(
            InputIssue(
                position: SourcePosition(file: input.name, line: line), recordName: name, recordType: type,
                field: field, message: message), raw: nil)
    }

    private func read(_ component: ICalComponent) {
        componentsRead += 1
        if let problem = component.problem {
            queue.append(
                .invalid(
                    InputIssue(
                        position: problem.position, recordType: mapping.component(for: component)?.recordType,
                        message: "\(problem.message) (in the \(component.name) of line \(component.line))"), raw: nil))
            return
        }
        if component.name == "VTIMEZONE" {
            do {
                try givenZones.add(component)
                try wallClockZones.add(component)
            } catch { queue.append(issue(component.line, error.message)) }
            return
        }
        guard let index = mapping.componentIndex(for: component), let plan = plan(index) else {
            skippedComponents[component.name, default: 0] += 1
            return
        }
        if options.superseded.contains(componentsRead) {
            supersededComponents[component.name, default: 0] += 1
            return
        }
        do {
            try convert(component, plan)
        } catch let problem as ComponentProblem {
            queue.append(
                issue(
                    problem.line ?? component.line, problem.message, name: problem.recordName,
                    type: plan.spec.recordType, field: problem.field))
        } catch {
            queue.append(issue(component.line, "\(error)", type: plan.spec.recordType))
        }
    }

    struct ComponentProblem: Error {
        var line: Int?
        var message: Message
        var recordName: String?
        var field: String?
    }

    /// What an alarm holds besides its trigger that is not reported as not kept.
    static let alarmProperties: Set<String> = ["ACTION", "TRIGGER", "DESCRIPTION", "SUMMARY", "UID", "X-WR-ALARMUID"]
    /// ATTENDEE parameters the mapping has no field for.
    static let attendeeParameters: Set<String> = [
        "ROLE", "RSVP", "CUTYPE", "DELEGATED-TO", "DELEGATED-FROM", "MEMBER", "SENT-BY", "DIR",
    ]

    /// The zone a ckport file names for the component, else the one the options give.
    private func zone(of properties: NumberedProperties, recordName: String) throws -> ZoneID {
        guard let property = properties.first(PropertyNumbers.zone) else { return options.zone }
        var zone = ZoneID(zoneName: ICalText.unescape(property.value))
        if let text = property.parameter("SCOPE") {
            guard let scope = DatabaseScope(text: text) else {
                throw ComponentProblem(
                    line: property.line,
                    message: "\(property.name): SCOPE is private, shared or public, found \"\(text)\"",
                    recordName: recordName)
            }
            zone.scope = scope
        }
        if let owner = property.parameter("OWNER") { zone.ownerRecordName = owner }
        if zone.zoneName.isEmpty || zone.ownerRecordName.isEmpty {
            throw ComponentProblem(
                line: property.line,
                message: "\(property.name) needs a zone name (and OWNER, when given, a user record name)",
                recordName: recordName)
        }
        return zone
    }

    /// Opens the input again from its start, when it can be (a file, or standard input kept
    /// for a second pass): for a VTIMEZONE that comes after the components that use it.
    public var reopen: (() throws -> ByteInput)?
    private var scannedForZones = false

    /// Whether `tzid` is defined by a VTIMEZONE further on in the input: the first time a TZID
    /// is not known, the whole input is read once more for its VTIMEZONEs (RFC 5545 puts no
    /// order on a calendar's components, and some writers put the zones last).
    private func zoneDefinedLater(_ tzid: String) throws -> Bool {
        guard !scannedForZones, let reopen else { return false }
        scannedForZones = true
        let scan = ICalParser(input: try reopen())
        while let component = try scan.next() {
            guard component.name == "VTIMEZONE", component.problem == nil, component.property("TZID") != nil else {
                continue
            }
            try? givenZones.add(component)
            try? wallClockZones.add(component)
        }
        return zones.knows(tzid)
    }

    private func time(_ property: ContentLine, recordName: String?) throws -> (CalendarTime, Int64) {
        guard let time = CalendarTime.parse(property) else {
            throw ComponentProblem(
                line: property.line, message: "\(property.name) is not a date or date-time: \"\(property.value)\"",
                recordName: recordName)
        }
        if zonedAsWallClock, case .zoned(let wall, _) = time { return (.floating(wall), wall.wallSeconds * 1000) }
        if case .zoned(_, let tzid) = time, !zones.knows(tzid), !(try zoneDefinedLater(tzid)) {
            throw ComponentProblem(
                line: property.line,
                message:
                    "\(property.name) names TZID \"\(tzid)\", which has no VTIMEZONE in the calendar and is not a time-zone name this system knows",
                recordName: recordName)
        }
        do { return (time, try zones.milliseconds(time)) } catch {
            throw ComponentProblem(line: property.line, message: error.message, recordName: recordName)
        }
    }

    private func convert(_ component: ICalComponent, _ plan: ComponentPlan) throws {
        let spec = plan.spec
        let type = plan.type
        let properties = numbers.number(component)
        guard let uid = properties.first(PropertyNumbers.uid)?.value, !uid.isEmpty else {
            throw ComponentProblem(
                line: component.line, message: "a \(component.name) without UID: ckport names records from it")
        }
        let baseName = ICalendarRecordReader.recordName(from: ICalText.unescape(uid))
        zones = givenZones
        if spec.timeZone != nil, let dtstart = properties.first(PropertyNumbers.dtstart),
            let form = CalendarTime.parse(dtstart), form.isWallClock
        {
            zones = wallClockZones
        }
        // What the record's timeZone field held, where the times as written say otherwise
        // (ckport's export with --tz): the record comes back as it was.
        var keptForm: String??
        zonedAsWallClock = false
        let givenDefault = givenZones.defaultZone
        defer { givenZones.defaultZone = givenDefault }
        // ckport's export with --tz says the zone its dates were written in: read them in it.
        if options.timeZone == nil,
            let written = parser.calendarProperties.last(where: { $0.name == CalendarMapping.exportZoneProperty }),
            let zone = TimeZone(identifier: ICalText.unescape(written.value))
        {
            givenZones.defaultZone = zone
        }
        if spec.timeZone != nil, let marker = properties.first(PropertyNumbers.keptForm) {
            let form = ICalText.unescape(marker.value)
            if marker.parameter(CalendarMapping.keptEmptyParameter) != nil {
                // No form kept: its dates were the midnights of the zone named, else UTC's.
                keptForm = .some(nil)
                zones = givenZones
                givenZones.defaultZone = marker.parameter("TZID").flatMap(TimeZone.init(identifier:))
            } else {
                keptForm = form
                switch form {
                case CalendarMapping.keptFloating:
                    zonedAsWallClock = true
                    zones = wallClockZones
                case CalendarMapping.keptDate:
                    zones = wallClockZones
                default:
                    zones = givenZones
                }
            }
        }
        var record = Record(
            id: RecordID(recordName: baseName, zone: try zone(of: properties, recordName: baseName)),
            recordType: type.name,
            fields: RecordFields(minimumCapacity: type.fields.count))
        if let created = properties.first(PropertyNumbers.created),
            let (_, ms) = try? time(created, recordName: baseName)
        {
            record.created = RecordStamp(timestamp: ms)
        }
        if let modified = properties.first(PropertyNumbers.lastModified),
            let (_, ms) = try? time(modified, recordName: baseName)
        {
            record.modified = RecordStamp(timestamp: ms)
        }

        // Properties the mapping names.
        var start: (CalendarTime, Int64)?
        let startField = plan.startField
        let endField = plan.endField
        for mapped in plan.mapped {
            guard let property = properties.first(mapped.number) else { continue }
            if mapped.isTime {
                let parsed = try time(property, recordName: baseName)
                if mapped.number == PropertyNumbers.dtstart { start = parsed }
                if let field = mapped.value.sourceField, case .field = mapped.value {
                    record.fields[field] = .timestamp(parsed.1)
                }
                if let field = mapped.value.sourceField, case .date = mapped.value {
                    // A DATE is its day's midnight in UTC, whatever zone dates are read in.
                    if case .date(let day) = parsed.0 {
                        record.fields[field] = .timestamp(day.wallSeconds * 1000)
                    } else {
                        record.fields[field] = .timestamp(parsed.1)
                    }
                }
                continue
            }
            try assign(property, mapped, to: &record, type: type)
        }
        // How the times were written: kept in the mapping's timeZone field, or said not kept.
        if let keptForm, let field = spec.timeZone {
            if let form = keptForm { record.fields[field] = .string(form) }
        } else if let start {
            switch start.0 {
            case .zoned(_, let tzid):
                if let field = spec.timeZone {
                    record.fields[field] = .string(tzid)
                } else {
                    dropped("DTSTART TZID=\(tzid)", component)
                }
            case .floating:
                if let field = spec.timeZone {
                    record.fields[field] = .string(CalendarMapping.keptFloating)
                } else {
                    dropped("floating DTSTART", component)
                }
            case .date:
                // Without a field a DATE still comes back a DATE when the event spans whole days.
                if let field = spec.timeZone { record.fields[field] = .string(CalendarMapping.keptDate) }
            case .utc:
                if let field = spec.timeZone { record.fields[field] = .string(CalendarMapping.keptUTC) }
            }
        }
        // DURATION stands for DTEND (or DUE) when those are absent.
        if let durationProperty = properties.first(PropertyNumbers.duration), let endField,
            record.fields[endField] == nil, let start
        {
            guard let seconds = CalendarDuration.parse(durationProperty.value) else {
                throw ComponentProblem(
                    line: durationProperty.line, message: "DURATION is not a duration: \"\(durationProperty.value)\"",
                    recordName: baseName)
            }
            record.fields[endField] = .timestamp(start.1 + seconds * 1000)
        }
        // Cancelled components set the mapping's cancel flag; the others clear it.
        if let cancelled = plan.cancelled {
            let isCancelled =
                properties.first(PropertyNumbers.status).map { ICalText.equalsIgnoringCase($0.value, "CANCELLED") }
                ?? false
            if isCancelled, let value = cancelled.whenCancelled {
                record.fields[cancelled.field] = value
            } else if !isCancelled, let value = cancelled.otherwise {
                record.fields[cancelled.field] = value
            }
        }
        if let organizerSpec = spec.organizer, let organizer = properties.first(PropertyNumbers.organizer),
            let definition = plan.organizer
        {
            record.fields[organizerSpec.field] = personValue(organizer.value, definition.type)
        }
        let valarms = component.components.isEmpty ? [] : component.components.filter { $0.name == "VALARM" }
        for (index, alarmSpec) in spec.alarms.enumerated() {
            guard index < valarms.count, let trigger = valarms[index].property("TRIGGER") else { continue }
            if trigger.parameter("VALUE")?.uppercased() == "DATE-TIME" {
                record.fields[alarmSpec.trigger] = .timestamp(try time(trigger, recordName: baseName).1)
            } else if let seconds = CalendarDuration.parse(trigger.value) {
                let relatedToEnd = trigger.parameter("RELATED")?.uppercased() == "END"
                let anchorField = relatedToEnd ? endField : startField
                if let anchorField, case .timestamp(let anchor)? = record.fields[anchorField] {
                    record.fields[alarmSpec.trigger] = .timestamp(anchor + seconds * 1000)
                }
            } else {
                throw ComponentProblem(
                    line: trigger.line, message: "TRIGGER is neither a duration nor a date-time: \"\(trigger.value)\"",
                    recordName: baseName)
            }
        }
        // What the mapping has no place for, and a second one of what is read once (the
        // first is kept: a second DTSTART or SUMMARY would otherwise vanish without a word).
        var seen: [Int] = []
        for (index, property) in component.properties.enumerated() {
            let number = properties.numbers[index]
            if number < 0 || !plan.kept[number] {
                dropped(property.name, component)
            } else if plan.once[number] {
                if seen.contains(number) {
                    dropped("repeated \(property.name)", component)
                } else {
                    seen.append(number)
                }
            }
        }
        // SEQUENCE and STATUS are read by ckport itself (which message of an event is the
        // latest; a cancelled event), but a record keeps them only in fields of its own: an
        // export writes SEQUENCE:0 and no STATUS but a cancelled one's.
        if !plan.keepsSequence, let sequence = properties.first(PropertyNumbers.sequence),
            Int64(sequence.value.trimmingCharacters(in: .whitespaces)) != 0
        {
            dropped("SEQUENCE other than 0", component)
        }
        if !plan.keepsStatus, let status = properties.first(PropertyNumbers.status) {
            let value = ICalText.unescape(status.value).uppercased()
            if value != "CANCELLED" || plan.cancelled == nil { dropped("STATUS:\(value)", component) }
        }
        // A second CATEGORIES, or a second value where the field holds one.
        if let value = plan.categories {
            dropped("CATEGORIES", component, count: properties.count(PropertyNumbers.categories) - 1)
            if let field = value.sourceField, let definition = type.field(named: field), !definition.type.isList,
                let first = properties.first(PropertyNumbers.categories)
            {
                dropped("CATEGORIES value", component, count: ICalText.splitList(first.value).count - 1)
            }
        }
        // Alarms beyond the mapping's, alarms of another action, and what an alarm holds
        // besides its trigger.
        dropped("VALARM", component, count: valarms.count - spec.alarms.count)
        for (alarm, alarmSpec) in zip(valarms, spec.alarms) {
            if let action = alarm.property("ACTION")?.value.uppercased(), action != alarmSpec.action.uppercased() {
                dropped("VALARM ACTION:\(action)", component)
            }
            for property in alarm.properties where !ICalendarRecordReader.alarmProperties.contains(property.name) {
                dropped("VALARM \(property.name)", component)
            }
        }
        for child in component.components where child.name != "VALARM" { dropped(child.name, component) }
        // Participants' roles and replies have no field in the mapping.
        if spec.attendees != nil {
            for (index, attendee) in component.properties.enumerated()
            where properties.numbers[index] == PropertyNumbers.attendee {
                // Most parameters are CN, PARTSTAT and ckport's own: the set is asked only about the rest.
                for (name, values) in attendee.parameters
                where name != "CN" && name != "PARTSTAT" && name != ICalendarExporter.recordParameter
                    && ICalendarRecordReader.attendeeParameters.contains(name)
                {
                    if name == "ROLE"
                        && values.first.map({ ICalText.equalsIgnoringCase($0, "REQ-PARTICIPANT") }) == true
                    {
                        continue
                    }
                    if name == "CUTYPE" && values.first.map({ ICalText.equalsIgnoringCase($0, "INDIVIDUAL") }) == true {
                        continue
                    }
                    if name == "RSVP" && values.first.map({ ICalText.equalsIgnoringCase($0, "FALSE") }) == true {
                        continue
                    }
                    dropped("ATTENDEE \(name)=\(values.joined(separator: ","))", component)
                }
            }
        } else {
            dropped("ATTENDEE", component, count: properties.count(PropertyNumbers.attendee))
        }
        if spec.organizer == nil { dropped("ORGANIZER", component, count: properties.count(PropertyNumbers.organizer)) }

        // --set's values, where the file gave the field none: those the import may fill
        // (a record the store holds with another value keeps its own). A value the field
        // cannot take is refused even where the file gives the field one.
        filled = []
        for (field, text) in options.fixedFields {
            guard let definition = type.field(named: field) else { continue }
            do {
                let converted = try values.value(text, as: definition.type)
                if record.fields[field] == nil, var value = converted {
                    if case .reference(var reference) = value, let action = spec.referenceActions[field] {
                        reference.action = action
                        value = .reference(reference)
                    }
                    record.fields[field] = value
                    filled.append(field)
                }
            } catch {
                throw ComponentProblem(
                    line: component.line,
                    message: "\(Wording.fixedField(field: field, text: text)): \(error.message)",
                    recordName: baseName, field: field)
            }
        }

        // Recurrence: keep the rule, expand it, or note it.
        if let recurrenceID = properties.first(PropertyNumbers.recurrenceID) {
            let (time, ms) = try self.time(recurrenceID, recordName: baseName)
            record.id.recordName = ICalendarRecordReader.occurrenceName(baseName, time, ms)
            emit(record, component, properties, plan)
            return
        }
        let ruleCount = properties.count(PropertyNumbers.rrule)
        if ruleCount == 0 && properties.count(PropertyNumbers.rdate) == 0 {
            emit(record, component, properties, plan)
            return
        }
        let rules = properties.all(PropertyNumbers.rrule)
        if let recurrenceSpec = spec.recurrence, let rule = rules.first {
            try keep(rule, recurrenceSpec, in: &record, type: type)
            dropped("RRULE", component, count: rules.count - 1)
            dropped("RDATE", component, count: properties.count(PropertyNumbers.rdate))
            dropped("EXDATE", component, count: properties.count(PropertyNumbers.exdate))
            emit(record, component, properties, plan)
            return
        }
        guard let window = options.expand, let start else {
            recurringKeptOnce += 1
            dropped("RRULE", component, count: ruleCount)
            dropped("RDATE", component, count: properties.count(PropertyNumbers.rdate))
            dropped("EXDATE", component, count: properties.count(PropertyNumbers.exdate))
            emit(record, component, properties, plan)
            return
        }
        var parsedRules: [RecurrenceRule] = []
        for rule in rules {
            let parts = rule.value.uppercased().split(separator: ";").map {
                $0.split(separator: "=").first.map(String.init) ?? ""
            }
            if parts.contains("RSCALE") || parts.contains("SKIP") {
                throw ComponentProblem(
                    line: rule.line,
                    message:
                        "RRULE \(rule.value) uses RSCALE or SKIP (RFC 7529, non-Gregorian calendars and skipped days), which ckport cannot expand; \(Wording.importWithoutExpanding)",
                    recordName: baseName)
            }
            do { parsedRules.append(try RecurrenceRule(parsing: rule.value)) } catch {
                throw ComponentProblem(line: rule.line, message: error.message, recordName: baseName)
            }
        }
        let dates = try properties.all(PropertyNumbers.rdate).flatMap { try timeList($0, recordName: baseName) }
        // An RDATE given as a PERIOD has a length of its own: start/end or start/duration.
        var periodLengths: [Int64: Int64] = [:]
        for rdate in properties.all(PropertyNumbers.rdate) where rdate.parameter("VALUE")?.uppercased() == "PERIOD" {
            for period in rdate.value.split(separator: ",") {
                let halves = period.split(separator: "/", maxSplits: 1).map(String.init)
                guard halves.count == 2 else { continue }
                let (_, startMS) = try time(
                    ContentLine(
                        name: "RDATE", parameters: rdate.parameters.filter { $0.name != "VALUE" }, value: halves[0],
                        line: rdate.line), recordName: baseName)
                if let seconds = CalendarDuration.parse(halves[1]) {
                    periodLengths[ISO8601.floorDiv(startMS, 1000)] = seconds * 1000
                } else {
                    let (_, endMS) = try time(
                        ContentLine(
                            name: "RDATE", parameters: rdate.parameters.filter { $0.name != "VALUE" }, value: halves[1],
                            line: rdate.line), recordName: baseName)
                    guard endMS >= startMS else {
                        throw ComponentProblem(
                            line: rdate.line, message: "RDATE period \(period) ends before it starts",
                            recordName: baseName)
                    }
                    periodLengths[ISO8601.floorDiv(startMS, 1000)] = endMS - startMS
                }
            }
        }
        let exceptions = try properties.all(PropertyNumbers.exdate).flatMap { try timeList($0, recordName: baseName) }
        let tzid: String?
        switch start.0 {
        case .zoned(_, let id): tzid = id
        case .utc: tzid = "UTC"
        default: tzid = nil
        }
        let zones = self.zones
        let set = RecurrenceSet(
            start: start.0.local, isDate: start.0.isDate, rules: parsedRules, dates: dates, exceptions: exceptions,
            instant: { (try? zones.instant(wall: $0, tzid: tzid)) ?? $0.wallSeconds },
            instantOf: { ((try? zones.milliseconds($0)) ?? $0.local.wallSeconds * 1000) / 1000 })
        let occurrences: [LocalDateTime]
        do {
            occurrences = try set.occurrences(
                from: ISO8601.floorDiv(window.from, 1000), to: ISO8601.floorDiv(window.to, 1000))
        } catch {
            throw ComponentProblem(line: component.line, message: error.message, recordName: baseName)
        }
        // Occurrences become records a batch at a time, as the importer asks for them: a
        // short rule over a long window must not build every record before the first is stored.
        var index = 0
        let overrides = options.overrides
        let shifted = [startField, endField] + spec.alarms.map(\.trigger)
        pendingOccurrences = { [unowned self] in
            let stop = min(index + 256, occurrences.count)
            while index < stop {
                let occurrence = occurrences[index]
                index += 1
                let ms = set.instant(occurrence) * 1000
                let occurrenceTime: CalendarTime =
                    start.0.isDate
                    ? .date(occurrence)
                    : start.0.isWallClock ? .floating(occurrence) : .utc(LocalDateTime(wallSeconds: ms / 1000))
                if overrides.contains(ICalendarRecordReader.overrideKey(uid: uid, occurrenceTime, zones: zones)) {
                    continue
                }
                var copy = record
                let shift = ms - start.1
                for field in shifted {
                    if let field, case .timestamp(let t)? = copy.fields[field] {
                        copy.fields[field] = .timestamp(t + shift)
                    }
                }
                if let length = periodLengths[ms / 1000], let endField {
                    copy.fields[endField] = .timestamp(ms + length)
                }
                let time: CalendarTime =
                    start.0.isDate ? .date(occurrence) : .utc(LocalDateTime(wallSeconds: ms / 1000))
                copy.id.recordName = ICalendarRecordReader.occurrenceName(baseName, time, ms)
                emit(copy, component, properties, plan, isOccurrence: true)
            }
            return index < occurrences.count
        }
    }

    private func timeList(_ property: ContentLine, recordName: String) throws -> [CalendarTime] {
        try property.value.split(separator: ",").map { value in
            let text = String(value.split(separator: "/").first ?? value)  // a PERIOD starts with its start
            return try time(
                ContentLine(name: property.name, parameters: property.parameters, value: text, line: property.line),
                recordName: recordName
            ).0
        }
    }

    /// The record, then one attendee record per ATTENDEE.
    private func emit(
        _ record: Record, _ component: ICalComponent, _ properties: NumberedProperties, _ plan: ComponentPlan,
        isOccurrence: Bool = false
    ) {
        let file = input.name
        var sourced = SourcedRecord(record: record, position: SourcePosition(file: file, line: component.line))
        sourced.filledFields = filled
        queue.append(.record(sourced))
        guard let attendees = plan.attendees else { return }
        let spec = attendees.spec
        for (index, attendee) in properties.properties.enumerated()
        where properties.numbers[index] == PropertyNumbers.attendee {
            guard let personField = attendees.person else { continue }
            let person = personValue(attendee.value, personField.type)
            // A file ckport wrote names the participant record; others get a name from the event's and the person's.
            let participantName: String
            if !isOccurrence, let named = attendee.parameter(ICalendarExporter.recordParameter),
                Names.recordNameProblem(named) == nil
            {
                participantName = named
            } else {
                let key: String
                switch person {
                case .string(let s): key = s
                case .reference(let r): key = r.recordName
                default: key = attendee.value
                }
                participantName = ICalendarRecordReader.recordName(from: record.recordName + "_" + key)
            }
            var participant = Record(
                id: RecordID(recordName: participantName, zone: record.zone), recordType: spec.recordType,
                fields: RecordFields(minimumCapacity: attendees.type.fields.count))
            participant.fields[spec.reference] = .reference(
                Reference(recordName: record.recordName, action: spec.referenceAction))
            participant.fields[spec.person.field] = person
            if let partstat = spec.partstat, let state = attendee.parameter("PARTSTAT") {
                var text = state.uppercased()
                if case .mapped = partstat { text = attendees.partstat[text] ?? state.lowercased() }
                if let field = partstat.sourceField { participant.fields[field] = .string(text) }
            }
            queue.append(
                .record(SourcedRecord(record: participant, position: SourcePosition(file: file, line: attendee.line))))
        }
    }

    private func assign(
        _ property: ContentLine, _ mapped: ComponentPlan.Mapped, to record: inout Record, type: RecordTypeDefinition
    ) throws {
        guard let field = mapped.value.sourceField, let definition = mapped.definition else { return }
        switch mapped.value {
        case .constant, .reference:
            return
        case .mapped:
            let raw = ICalText.unescape(property.value)
            let key = mapped.renamed[raw.uppercased()] ?? raw.lowercased()
            record.fields[field] = .string(key)
        case .field, .date:
            if property.name == "CATEGORIES" || definition.type.isList {
                let items = ICalText.splitList(property.value)
                if definition.type.isList {
                    record.fields[field] = .list(definition.type.primitive, items.map(FieldValue.string))
                } else if let first = items.first {
                    record.fields[field] = .string(first)
                }
                return
            }
            let text = ICalText.unescape(property.value)
            do {
                if let parsed = try values.value(text, as: definition.type) { record.fields[field] = parsed }
            } catch {
                throw ComponentProblem(
                    line: property.line, message: "\(property.name) → \(type.name).\(field): \(error.message)",
                    recordName: record.recordName, field: field)
            }
        }
    }

    private static let mailto = Array("mailto:".utf8)

    /// A calendar address as the person field holds it: the record name of the person whose
    /// e-mail it is, else the address itself (or the name ckport wrote as urn:x-ckport:NAME).
    private func personValue(_ address: String, _ type: FieldType) -> FieldValue {
        var key = address
        // An ASCII address (nearly every one) is matched byte by byte; the others through
        // Unicode's case mapping.
        let (ascii, mailto) = address.withUTF8Bytes { bytes in
            (
                !bytes.contains { $0 >= 0x80 },
                bytes.count >= 7
                    && ICalendarRecordReader.mailto.indices.allSatisfy { index in
                        let byte = bytes[index]
                        return (byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte)
                            == ICalendarRecordReader.mailto[index]
                    }
            )
        }
        if ascii ? mailto : key.lowercased().hasPrefix("mailto:") { key = String(key.dropFirst(7)) }
        if key.hasPrefix("urn:x-ckport:") { key = String(key.dropFirst(13)).removingPercentEncoding ?? key }
        var name = key
        if !options.people.isEmpty {
            let lower = key.withUTF8Bytes { !$0.contains { ($0 >= 0x41 && $0 <= 0x5A) || $0 >= 0x80 } }
            name = options.people[lower ? key : key.lowercased()] ?? key
        }
        return type.primitive == .reference ? .reference(Reference(recordName: name)) : .string(name)
    }

    /// Puts a rule back into the fields it came from.
    private func keep(
        _ rule: ContentLine, _ spec: CalendarMapping.Recurrence, in record: inout Record, type: RecordTypeDefinition
    ) throws {
        let parsed: RecurrenceRule
        do { parsed = try RecurrenceRule(parsing: rule.value) } catch {
            throw ComponentProblem(line: rule.line, message: error.message, recordName: record.recordName)
        }
        switch spec {
        case .rule(let field):
            record.fields[field] = .string(parsed.text)
        case .chore(let typeField, let weekdayField, let monthDayField):
            let weekday = parsed.byDay.first.map { Int64($0.weekday + 1) }
            switch (parsed.frequency, parsed.interval) {
            case (.daily, 1): record.fields[typeField] = .string("daily")
            case (.weekly, 1): record.fields[typeField] = .string("weekly")
            case (.weekly, 2): record.fields[typeField] = .string("biweekly")
            case (.monthly, 1):
                record.fields[typeField] = .string("monthly")
                if let monthDayField, let day = parsed.byMonthDay.max(), day > 0 {
                    record.fields[monthDayField] = .int64(Int64(day))
                }
            default:
                throw ComponentProblem(
                    line: rule.line,
                    message: "RRULE \(rule.value) is not one of the chore rules (daily, weekly, biweekly, monthly)",
                    recordName: record.recordName)
            }
            if let weekdayField, let weekday, parsed.frequency == .weekly {
                record.fields[weekdayField] = .int64(weekday)
            }
        }
    }

    /// A record name from a UID: the UID itself when it is a valid record name, else a stable
    /// hash of it.
    static func recordName(from uid: String) -> String {
        if Names.recordNameProblem(uid) == nil { return uid }
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in uid.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
        let readable = String(
            uid.unicodeScalars.filter {
                $0.isASCII
                    && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-.@".unicodeScalars.contains($0))
            }.prefix(40).map(Character.init))
        return (readable.isEmpty || readable.hasPrefix("_") ? "ics" : readable) + "-" + String(hash, radix: 16)
    }

    static func occurrenceName(_ base: String, _ time: CalendarTime, _ ms: Int64) -> String {
        let suffix = time.isDate ? CalendarTime.basic(time.local, date: true) : CalendarTime.utcText(ms)
        return recordName(from: base + "_" + suffix)
    }
}
