import Foundation
import Records
import StoreCore

/// How iCalendar files are read: through a mapping onto the schema's record types, or kept
/// whole in the archive's own record types.
public struct CalendarReadSettings: Sendable {
    /// Components → record types. Needed unless `keepsCalendarsWhole`.
    public var mapping: CalendarMapping?
    /// Keep every calendar whole (``CalendarArchive``) instead of mapping it.
    public var keepsCalendarsWhole: Bool
    /// Expand recurring components into one record per occurrence starting in this window
    /// (UTC milliseconds, end exclusive).
    public var expand: (from: Int64, to: Int64)?
    /// Field values every main record gets, as CSV cells (`familyID` = `family-1`).
    public var fixedFields: [(field: String, text: String)]

    public init(
        mapping: CalendarMapping? = nil, keepsCalendarsWhole: Bool = false, expand: (from: Int64, to: Int64)? = nil,
        fixedFields: [(field: String, text: String)] = []
    ) {
        self.mapping = mapping
        self.keepsCalendarsWhole = keepsCalendarsWhole
        self.expand = expand
        self.fixedFields = fixedFields
    }
}

/// How calendars are written: through a mapping from record types to components, or back as an
/// archive import kept them.
public struct CalendarWriteSettings: Sendable {
    public var mapping: CalendarMapping?
    /// Write the calendars an archive import kept whole.
    public var keepsCalendarsWhole: Bool
    /// Time zone, DTSTAMP and whether cancelled records are written. A write context's time
    /// zone, when it has one, takes the place of the options'.
    public var options: ICalExportOptions

    public init(
        mapping: CalendarMapping? = nil, keepsCalendarsWhole: Bool = false,
        options: ICalExportOptions = ICalExportOptions()
    ) {
        self.mapping = mapping
        self.keepsCalendarsWhole = keepsCalendarsWhole
        self.options = options
    }
}

/// A field given to a calendar's records (`--set`) that none of its record types has.
public struct CalendarFixedFieldUnknown: CKPortError, Sendable {
    public var field: String
    public var text: String
    public var recordTypes: [String]
    public var category: ErrorCategory { .usage }
    public var description: String { explanation.description }
    public var explanation: Message {
        "\(Wording.fixedField(field: field, text: text)): none of the record types the calendar's components become (\(recordTypes.joined(separator: ", "))) has a field '\(field)'"
    }
}

extension Array where Element == String {
    /// The names in their first order, each once.
    func uniquedNames() -> [String] {
        var seen: Set<String> = []
        return filter { seen.insert($0).inserted }
    }
}

/// A calendar import or export was asked for without a mapping.
public struct CalendarMappingMissing: CKPortError, Sendable {
    public var file: String
    public var category: ErrorCategory { .usage }
    public var description: String {
        "\(file): calendars are read and written through a calendar mapping, and none was given"
    }
}

extension RecordFormat {
    /// iCalendar (RFC 5545): events, to-dos, journal entries, alarms and attendees.
    public static let iCalendar = RecordFormat(
        names: ["ics"], extensions: ["ics"], title: "iCalendar", summary: "calendars, through a mapping",
        noun: "an iCalendar file", kind: .calendar,
        sniff: { head in
            Sniffing.firstLine(head).map { $0 >= 0x61 && $0 <= 0x7A ? $0 - 0x20 : $0 }.starts(
                with: Array("BEGIN:VCALENDAR".utf8))
        },
        makeReader: { input, context in
            let settings = context.settings.get(CalendarReadSettings.self, default: CalendarReadSettings())
            if settings.keepsCalendarsWhole {
                return CalendarArchiveReader(
                    input: try input.open(), zone: context.defaultZone, timeZone: context.timeZone)
            }
            guard let mapping = settings.mapping else { throw CalendarMappingMissing(file: input.name) }
            // A field no component's record type has would be given to nothing: say so.
            let types = mapping.components.map(\.recordType).uniquedNames()
            for (field, text) in settings.fixedFields
            where !types.contains(where: { context.schema.recordType(named: $0)?.field(named: field) != nil }) {
                throw CalendarFixedFieldUnknown(field: field, text: text, recordTypes: types)
            }
            // Attendees become links to the people the store knows by e-mail address.
            // Looked up once for all of an import's inputs.
            let people = try context.memo.value("iCalendar.people") {
                try context.store?.readSession { try ICalendarRecordReader.people(mapping, in: $0) } ?? [:]
            }
            var options = ICalImportOptions(
                timeZone: context.timeZone, expand: settings.expand, zone: context.defaultZone,
                fixedFields: settings.fixedFields, people: people)
            // A first pass finds the overridden occurrences (when expanding) and the messages a
            // later one for the same event supersedes.
            let source = try input.reopenable()
            let found = try ICalendarRecordReader.firstPass(
                in: try source.open(), timeZone: context.timeZone, overrides: settings.expand != nil)
            options.overrides = found.overrides
            options.superseded = found.superseded
            options.nameOnExport = try context.memo.value("iCalendar.nameOnExport") {
                try ICalendarRecordReader.nameOnExport(
                    mapping, fixedFields: settings.fixedFields, zone: context.defaultZone, store: context.store)
            }
            let reader = ICalendarRecordReader(
                input: try source.open(), mapping: mapping, schema: context.schema, options: options)
            reader.spool = source.spool
            if source.isReopenable { reader.reopen = { try source.open() } }
            return reader
        },
        makeWriter: nil,
        exportFromStore: { session, query, output, context in
            let settings = context.settings.get(CalendarWriteSettings.self, default: CalendarWriteSettings())
            var details = FormatSettings()
            if settings.keepsCalendarsWhole {
                let summary = try CalendarArchiveExporter(session: session).export(
                    predicate: query.predicate, predicateText: query.predicateText, to: output)
                try output.commit()
                details[CalendarArchiveSummary.self] = summary
                return FormatExportSummary(written: summary.components, details: details)
            }
            guard let mapping = settings.mapping else { throw CalendarMappingMissing(file: output.path) }
            var options = settings.options
            if context.timeZone != nil { options.timeZone = context.timeZone }
            let summary = try ICalendarExporter(session: session, mapping: mapping, options: options).export(
                query, to: output)
            details[ICalExportSummary.self] = summary
            return FormatExportSummary(written: summary.written, details: details)
        })
}
