import Crypto
import Foundation
import Records
import StoreCore

/// The built-in `archive` mapping: any RFC 5545 calendar kept whole, so that import and export
/// give back the same calendar, component by component.
///
/// Each component directly inside VCALENDAR (VEVENT, VTODO, VJOURNAL, VFREEBUSY, VTIMEZONE,
/// and any other, X- ones included) becomes one `CalendarComponent` record. Its `content`
/// holds the component's content lines exactly as read (unfolded; parameters, escapes,
/// non-ASCII text, nested VALARMs and every property ckport has no name for kept byte for byte),
/// and a few fields are filled from it for queries: `uid`, `recurrenceId`, `sequence`,
/// `summary`, `start` (DTSTART as an instant) and `tzid`. An override (RECURRENCE-ID, with or
/// without RANGE) is a record of its own, tied to its master by `uid`. The calendar's own
/// properties (PRODID, VERSION, CALSCALE, X-WR-CALNAME, …) are a `CalendarInfo` record. Both
/// carry `calendar`, the calendar's name, so several calendars can share a store; records are
/// named from the calendar, the component and its UID (and RECURRENCE-ID), so importing a file
/// again changes nothing.
public enum CalendarArchive {
    public static let mappingName = "archive"
    public static let componentType = "CalendarComponent"
    public static let infoType = "CalendarInfo"

    public static let schemaText = """
        DEFINE SCHEMA

            RECORD TYPE CalendarComponent (
                calendar     STRING QUERYABLE SORTABLE,
                component    STRING QUERYABLE,
                content      STRING,
                position     INT64 QUERYABLE SORTABLE,
                recurrenceId STRING QUERYABLE,
                sequence     INT64,
                start        TIMESTAMP QUERYABLE SORTABLE,
                summary      STRING QUERYABLE SEARCHABLE SORTABLE,
                tzid         STRING QUERYABLE,
                uid          STRING QUERYABLE SORTABLE
            );

            RECORD TYPE CalendarInfo (
                calendar     STRING QUERYABLE SORTABLE,
                content      STRING
            );

        """

    public static let schema: Schema = try! SchemaParser.parse(schemaText, file: "the archive mapping")

    /// Whether `schema` holds the archive's record types as the archive needs them.
    public static func fits(_ schema: Schema) -> Bool {
        [componentType, infoType].allSatisfy { name in
            guard let have = schema.recordType(named: name), let want = CalendarArchive.schema.recordType(named: name)
            else { return false }
            return want.userFields.allSatisfy { field in have.field(named: field.name)?.type == field.type }
        }
    }

    /// `schema` with the archive's record types added.
    public static func adding(to schema: Schema) -> Schema {
        var result = schema
        for type in CalendarArchive.schema.recordTypes where result.recordType(named: type.name) == nil {
            result.recordTypes.append(type)
        }
        return result
    }

    /// The record name for a component: readable, within CloudKit's rules, and the same for
    /// the same calendar, kind, UID and RECURRENCE-ID.
    static func recordName(calendar: String, kind: String, key: String) -> String {
        let digest = SHA256.hash(data: Array("\(calendar)\u{0}\(kind)\u{0}\(key)".utf8)).prefix(16).map {
            String(format: "%02x", $0)
        }.joined()
        return "ical-\(kind.lowercased().prefix(12))-\(digest)"
    }
}

/// Reads calendars into archive records (see ``CalendarArchive``).
public final class CalendarArchiveReader: AnnotatedRecordSource, SchemaExtendingSource, LossReportingSource {
    public var addedRecordTypes: [RecordTypeDefinition] { CalendarArchive.schema.recordTypes }
    private let parser: ICalParser
    private let input: ByteInput
    private let zone: ZoneID
    private let calendarName: String?
    private let zones: ZoneResolver
    private var pending: [SourceItem] = []
    private var position = 0
    private var seen: [Int: Int] = [:]
    private var counts: [String: Int] = [:]

    /// - Parameter calendarName: the name records carry in `calendar`; default: the calendar's
    ///   X-WR-CALNAME, else its NAME (RFC 7986), else the file's name.
    public init(input: ByteInput, zone: ZoneID = .defaultZone, calendarName: String? = nil, timeZone: TimeZone? = nil) {
        self.input = input
        parser = ICalParser(input: input)
        parser.keepRaw = true
        self.zone = zone
        self.calendarName = calendarName
        zones = ZoneResolver(defaultZone: timeZone)
    }

    public var name: String { input.name }
    public var bytesRead: Int64 { input.bytesRead }
    public var totalBytes: Int64? { input.totalBytes }

    public var notes: [Message] {
        var notes: [Message] = []
        let lost = notKeptItems
        if !counts.isEmpty {
            let archived = counts.keys.sorted().map { "\(counts[$0]!) \($0)" }.joined(separator: ", ")
            let kept = lost.isEmpty ? "every property kept" : "every property kept but " + lost.joined(separator: ", ")
            notes.append(Message("archived \(archived) whole, \(kept)"))
        }
        if counts.isEmpty && parser.calendarCount > 0 {
            notes.append(
                "warning: \(input.name) holds a calendar with no components (RFC 5545 asks for one at least): its own properties were kept, but an iCalendar export of it alone is refused"
            )
        }
        for (warning, count) in parser.warnings.sorted(by: { $0.key < $1.key }) {
            notes.append("warning: \(warning) (\(count)×)")
        }
        return notes
    }

    /// The lines left out because they were not properties (everything else is kept whole).
    public var notKeptItems: [String] {
        parser.unreadableLineItems
    }

    public func next() throws -> SourceItem? {
        while pending.isEmpty {
            let component = try parser.next()
            // Each calendar's own properties, once its END is read (they may follow its components).
            for finished in parser.takeFinishedCalendars() {
                emitInfo(number: finished.number, properties: finished.properties)
            }
            guard let component else {
                if pending.isEmpty { return nil }
                break
            }
            read(component)
        }
        return pending.removeFirst()
    }

    /// The name of each calendar of the input by its number, once it has one.
    private var names: [Int: String] = [:]

    /// The name the current calendar's records carry: the one given, else its X-WR-CALNAME or
    /// NAME, else the file's name. Several calendars in one file (a stream of scheduling
    /// messages) are each kept whole, as calendars of their own: a name an earlier calendar of
    /// the file took is followed by the calendar's number, as in "invites (2)".
    private func name(of number: Int, properties: [ContentLine]) -> String {
        if let known = names[number] { return known }
        var name =
            calendarName
            ?? properties.first { $0.name == "X-WR-CALNAME" }.map { ICalText.unescape($0.value) }
            ?? properties.first { $0.name == "NAME" }.map { ICalText.unescape($0.value) }
            ?? ((input.name as NSString).lastPathComponent as NSString).deletingPathExtension
        if names.values.contains(name) { name += " (\(number))" }
        names[number] = name
        return name
    }

    private var calendar: String { name(of: parser.calendarCount, properties: parser.calendarProperties) }

    private func emitInfo(number: Int, properties: [ContentLine]) {
        let calendar = name(of: number, properties: properties)
        var record = Record(
            id: RecordID(
                recordName: CalendarArchive.recordName(calendar: calendar, kind: "VCALENDAR", key: ""), zone: zone),
            recordType: CalendarArchive.infoType)
        record["calendar"] = .string(calendar)
        record["content"] = .string(properties.map { $0.raw ?? "\($0.name):\($0.value)" }.joined(separator: "\n"))
        pending.append(.record(SourcedRecord(record: record, position: SourcePosition(file: input.name, line: 1))))
    }

    private func read(_ component: ICalComponent) {
        position += 1
        if let problem = component.problem {
            pending.append(.invalid(problem, raw: nil))
            return
        }
        if component.name == "VTIMEZONE" { try? zones.add(component) }
        let kind = component.name
        counts[kind, default: 0] += 1
        var lines: [String] = []
        CalendarArchiveReader.lines(of: component, into: &lines)
        let content = lines.joined(separator: "\n")
        let uid = component.property("UID").map(\.value)
        let recurrence = component.property("RECURRENCE-ID")
        let tzid = component.property("TZID")?.value ?? component.property("DTSTART")?.parameter("TZID")
        var key: String
        if let uid {
            key = uid + "\u{0}" + (recurrence.map { ($0.parameter("TZID") ?? "") + ":" + $0.value } ?? "")
        } else if kind == "VTIMEZONE", let tzid {
            key = tzid
        } else {
            key = SHA256.hash(data: Array(content.utf8)).map { String(format: "%02x", $0) }.joined()
        }
        // The same key twice in one calendar (a client that repeats a UID): both are kept.
        // A hash per component, not its key: memory stays small however long the calendar.
        let hash = (calendar + "\u{0}" + kind + "\u{0}" + key).hashValue
        let repeats = seen[hash, default: 0]
        seen[hash] = repeats + 1
        if repeats > 0 { key += "\u{0}#\(repeats)" }
        var record = Record(
            id: RecordID(recordName: CalendarArchive.recordName(calendar: calendar, kind: kind, key: key), zone: zone),
            recordType: CalendarArchive.componentType)
        record["calendar"] = .string(calendar)
        record["component"] = .string(kind)
        record["content"] = .string(content)
        record["position"] = .int64(Int64(position))
        if let uid { record["uid"] = .string(uid) }
        if let recurrence {
            record["recurrenceId"] = .string(
                recurrence.raw.map { String($0.drop { $0 != ":" && $0 != ";" }) } ?? recurrence.value)
        }
        if let text = component.property("SEQUENCE")?.value,
            let sequence = Int64(text.trimmingCharacters(in: .whitespaces))
        {
            record["sequence"] = .int64(sequence)
        }
        if let summary = component.property("SUMMARY")?.value {
            record["summary"] = .string(ICalText.unescape(summary))
        }
        if let tzid { record["tzid"] = .string(tzid) }
        if let start = component.property("DTSTART"), let time = CalendarTime.parse(start),
            let ms = try? zones.milliseconds(time)
        {
            record["start"] = .timestamp(ms)
        }
        pending.append(
            .record(SourcedRecord(record: record, position: SourcePosition(file: input.name, line: component.line))))
    }

    /// A component's logical lines as read, BEGIN and END included.
    static func lines(of component: ICalComponent, into lines: inout [String]) {
        lines.append("BEGIN:" + component.name)
        for property in component.properties { lines.append(property.raw ?? "\(property.name):\(property.value)") }
        for child in component.components { CalendarArchiveReader.lines(of: child, into: &lines) }
        lines.append("END:" + component.name)
    }
}

/// What an archive export wrote.
public struct CalendarArchiveSummary: Sendable {
    public var components: [String: Int] = [:]
    public var calendars: [String] = []
}

/// Writes archive records back as one iCalendar file: each calendar as a VCALENDAR of its own
/// (its own properties, then its components in the order they were read, each line as it was
/// read, folded at 75 octets), calendars read from one file in that file's order.
public struct CalendarArchiveExporter {
    public let session: any RecordReading

    public init(session: any RecordReading) {
        self.session = session
    }

    /// Writes the components `predicate` selects (all when nil) of every archived calendar.
    /// An empty selection is an error: an empty VCALENDAR is not a calendar RFC 5545 readers take.
    public func export(predicate: RecordPredicate? = nil, predicateText: String? = nil, to output: OutputFile) throws
        -> CalendarArchiveSummary
    {
        guard CalendarArchive.fits(session.schema) else {
            throw StoreError.badQuery("the store holds no archived calendars (\(Wording.importIntoArchive))")
        }
        var summary = CalendarArchiveSummary()
        var infos: [String: String] = [:]
        try session.forEach(RecordQuery(recordTypes: [CalendarArchive.infoType])) { record in
            if case .string(let name)? = record["calendar"], case .string(let content)? = record["content"] {
                infos[name] = content
            }
        }
        var query = RecordQuery(
            recordTypes: [CalendarArchive.componentType], predicate: predicate, predicateText: predicateText)
        query.sortField = "position"
        // The calendars in the order they were read: by the position of their first component
        // (calendars of one file follow each other in it), then by name.
        // Calendars whose components follow each other in that order (one file's, or files
        // imported one after another) are written in one more pass over the selection; else
        // each calendar is read through a query of its own on its (indexed) name. Either way
        // the selection is read twice, not once per calendar.
        var first: [String: Int64] = [:]
        var contiguous = true
        var current: String?
        var lastFirst = Int64.min
        try session.forEach(query) { record in
            guard case .string(let calendar)? = record["calendar"], calendar != current else { return }
            current = calendar
            guard first[calendar] == nil else {
                contiguous = false
                return
            }
            var position = Int64.max
            if case .int64(let value)? = record["position"] { position = value }
            first[calendar] = position
            if position <= lastFirst { contiguous = false }
            lastFirst = position
        }
        var writer = ICalLineWriter()
        // Calendar by calendar, each in the order it was read; one record in memory at a time.
        var opened: String?
        var timeZones: Set<String> = []
        func close() throws {
            guard let name = opened else { return }
            writer.raw("END:VCALENDAR")
            try output.write(writer.take())
            summary.calendars.append(name)
            opened = nil
        }
        func write(_ record: Record) throws {
            guard case .string(let calendar)? = record["calendar"], case .string(let content)? = record["content"],
                case .string(let kind)? = record["component"]
            else { return }
            if opened != calendar {
                try close()
                opened = calendar
                timeZones = []
                writer.raw("BEGIN:VCALENDAR")
                var wrote = Set<String>()
                for line in (infos[calendar] ?? "").split(separator: "\n", omittingEmptySubsequences: true) {
                    writer.raw(String(line))
                    wrote.insert(String(line.prefix { $0 != ":" && $0 != ";" }).uppercased())
                }
                if !wrote.contains("PRODID") { writer.raw("PRODID:-//ckport//archive//EN") }
                if !wrote.contains("VERSION") { writer.raw("VERSION:2.0") }
            }
            if kind == "VTIMEZONE", case .string(let tzid)? = record["tzid"] {
                // A zone the calendar defines twice (two imports of it): once is enough.
                guard timeZones.insert(tzid).inserted else { return }
            }
            for line in content.split(separator: "\n", omittingEmptySubsequences: false) {
                writer.raw(String(line))
            }
            summary.components[kind, default: 0] += 1
            try output.write(writer.take())
        }
        if contiguous {
            try session.forEach(query) { try write($0) }
        } else {
            let order = first.keys.sorted { a, b in
                first[a]! != first[b]! ? first[a]! < first[b]! : a.utf8.lexicographicallyPrecedes(b.utf8)
            }
            for name in order {
                try session.forEach(CalendarArchiveExporter.components(of: name, in: query)) { try write($0) }
                try close()
            }
        }
        try close()
        guard !summary.calendars.isEmpty else {
            throw StoreError.badQuery(
                "nothing to export: the selection holds no calendar components, and an empty calendar is not one RFC 5545 readers accept"
            )
        }
        return summary
    }

    /// The selection's components of one calendar, in the order they were read.
    static func components(of calendar: String, in query: RecordQuery) -> RecordQuery {
        var narrowed = query
        narrowed.predicate = RecordPredicate(
            (query.predicate?.conditions ?? []) + [Condition(field: "calendar", op: .equal, value: .string(calendar))])
        return narrowed
    }
}
