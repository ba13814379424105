import ArgumentParser
import CKPort
import Foundation

/// Flags that only inputs of some formats take. Each group is shown under its own title in
/// help, and a command refuses a group's flags when none of its inputs is in one of the
/// group's formats.
protocol FormatOptionGroup {
    static var formats: Set<RecordFormat> { get }
    /// "CSV files", for "--map applies to CSV files".
    static var inputsWord: String { get }
    /// What is wrong when no input is in the group's formats.
    static var noneWord: String { get }
    /// The first of the group's flags that was given, if any.
    var givenFlag: String? { get }
}

struct CSVImportOptions: ParsableArguments, FormatOptionGroup {
    @Option(help: ArgumentHelp("Rename a column, \"Header=field\"; repeat for several.", valueName: "header=field"))
    var map: [String] = []

    @Flag(help: "Let columns that are not fields pass instead of refusing the file.")
    var ignoreColumns = false

    @Option(
        help: ArgumentHelp(
            "Record names from fields for rows without recordName, e.g. 'DailyEntry_{date:yyyy-MM-dd}_{authorUserRecordID}'.",
            valueName: "template"))
    var nameTemplate: String?

    @Option(help: ArgumentHelp("The cell delimiter (default: sniffed from the header).", valueName: "char"))
    var delimiter: String?

    @Flag(help: "Take off the ' that an export with --spreadsheet-safe put before formula-like text.")
    var spreadsheetSafe = false

    static let formats: Set<RecordFormat> = [.csv, .tsv]
    static let inputsWord = "CSV files"
    static let noneWord = "none of the files is CSV (.csv, .tsv, or --format csv)"

    var givenFlag: String? {
        [
            ("--map", !map.isEmpty), ("--ignore-columns", ignoreColumns), ("--name-template", nameTemplate != nil),
            ("--delimiter", delimiter != nil), ("--spreadsheet-safe", spreadsheetSafe),
        ].first { $0.1 }?.0
    }

    func validate() throws {
        _ = try ArgumentChecks.delimiter(delimiter)
        for entry in map where !entry.contains("=") {
            throw ValidationError("--map takes \"Header=field\", found \"\(entry)\"")
        }
    }

    func settings() throws -> CSVReadSettings {
        var columnMap: [String: String] = [:]
        for entry in map {
            let parts = entry.split(separator: "=", maxSplits: 1)
            columnMap[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        var template: NameTemplate?
        if let nameTemplate {
            do { template = try NameTemplate(nameTemplate) } catch { throw CommandFailure.usage(error.commandLine) }
        }
        return CSVReadSettings(
            delimiter: try ArgumentChecks.delimiter(delimiter), spreadsheetSafe: spreadsheetSafe, columnMap: columnMap,
            ignoreUnknownColumns: ignoreColumns, nameTemplate: template)
    }
}

struct CalendarImportOptions: ParsableArguments, FormatOptionGroup {
    @Option(
        help: ArgumentHelp(
            "The mapping file (YAML or JSON), or 'archive' to keep every calendar whole (its record types are added to the schema); default: the sample app's mapping when the store's schema is one.",
            valueName: "file"))
    var mapping: String?

    @Option(
        help: ArgumentHelp(
            "Expand recurring events into their occurrences starting in FROM..TO (dates or ISO-8601 times; TO's day included).",
            valueName: "from..to"))
    var expand: String?

    @Option(
        name: .customLong("set"),
        help: ArgumentHelp(
            "Give new records (and those without the field) this field value, e.g. familyID=family-1; a record the store holds with another value keeps its own. Repeat for several.",
            valueName: "field=value"))
    var fixedFields: [String] = []

    @Flag(
        help:
            "Refuse the import when the mapping has no place for something the file holds (a second alarm, an RDATE, an attendee's role, an X- property…)."
    )
    var strict = false

    static let formats = Set(RecordFormats.all.filter { $0.kind == .calendar })
    static let inputsWord = "iCalendar and xCal files"
    static let noneWord = "none of the files is .ics or .xcal (or --format ics or xcal)"

    var givenFlag: String? {
        [("--mapping", mapping != nil), ("--expand", expand != nil), ("--set", !fixedFields.isEmpty)].first { $0.1 }?.0
    }

    var keepsCalendarsWhole: Bool { mapping == CalendarArchive.mappingName }

    func validate() throws {
        for entry in fixedFields where !entry.contains("=") {
            throw ValidationError("--set takes field=value, found \"\(entry)\"")
        }
    }

    /// `--expand FROM..TO` in UTC milliseconds, TO's whole day included when it is a date.
    func expandWindow(tz: String?) throws -> (from: Int64, to: Int64)? {
        guard let expand else { return nil }
        let parts = expand.components(separatedBy: "..")
        let zone = try ArgumentChecks.timeZone(tz)
        guard parts.count == 2, let from = ISO8601.parse(parts[0], timeZone: zone),
            var to = ISO8601.parse(parts[1], timeZone: zone)
        else {
            throw ValidationError("--expand takes FROM..TO, e.g. 2026-01-01..2026-12-31")
        }
        if !parts[1].contains("T") && !parts[1].contains(" ") { to += 86_400_000 }
        guard to > from else { throw ValidationError("--expand: TO comes before FROM") }
        return (from, to)
    }

    /// The calendar settings; `mapping` resolves the mapping (named, or the default) when
    /// calendars are not kept whole.
    func settings(tz: String?, mapping resolve: () throws -> CalendarMapping) throws -> CalendarReadSettings {
        if keepsCalendarsWhole && expand != nil {
            throw CommandFailure.usage(
                "--expand does not combine with --mapping archive, which keeps recurring components whole")
        }
        if keepsCalendarsWhole && !fixedFields.isEmpty {
            throw CommandFailure.usage("--set does not combine with --mapping archive, whose record types are fixed")
        }
        if keepsCalendarsWhole { return CalendarReadSettings(keepsCalendarsWhole: true) }
        let fixed = fixedFields.map { entry in
            let parts = entry.split(separator: "=", maxSplits: 1)
            return (field: String(parts[0]), text: parts.count > 1 ? String(parts[1]) : "")
        }
        return CalendarReadSettings(mapping: try resolve(), expand: try expandWindow(tz: tz), fixedFields: fixed)
    }
}

struct CSVExportOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The fields to write, in order, e.g. title,status,dueDate.", valueName: "a,b,c"))
    var fields: String?

    @Flag(
        help:
            "Add the system columns (scope, zoneName, ownerRecordName, recordChangeTag, created, createdBy, createdDevice, modified, modifiedBy, modifiedDevice, parentRecordName, shareRecordName, shareDetails)."
    )
    var system = false

    @Option(help: "LOCATION cells as latlon (lat,lon) or json.")
    var location: LocationForm = .latlon

    @Flag(help: "End rows with LF instead of CRLF.")
    var lf = false

    @Flag(help: "Start the file with a UTF-8 byte order mark, for Excel.")
    var bom = false

    @Option(help: ArgumentHelp("The cell delimiter, e.g. ';'.", valueName: "char"))
    var delimiter: String?

    @Flag(help: "Put ' before text cells starting with = + - @ so a spreadsheet cannot run them as formulas.")
    var spreadsheetSafe = false

    var givenFlag: String? {
        [
            ("--fields", fields != nil), ("--system", system), ("--location", location != .latlon),
            ("--lf", lf), ("--bom", bom), ("--delimiter", delimiter != nil), ("--spreadsheet-safe", spreadsheetSafe),
        ].first { $0.1 }?.0
    }

    func validate() throws {
        _ = try ArgumentChecks.delimiter(delimiter)
    }

    func options(tsv: Bool, tz: String?) throws -> CSVWriteOptions {
        var dialect = tsv ? CSVDialect.tsv : CSVDialect.csv
        if let byte = try ArgumentChecks.delimiter(delimiter) { dialect.delimiter = byte }
        dialect.crlf = !lf
        dialect.byteOrderMark = bom
        dialect.spreadsheetSafe = spreadsheetSafe
        let chosen = fields.map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        return CSVWriteOptions(
            dialect: dialect,
            values: CSVValues(timeZone: try ArgumentChecks.timeZone(tz), locationAsJSON: location == .json),
            fields: chosen, includeSystem: system)
    }
}

struct CalendarExportOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The mapping file (YAML or JSON), or 'archive' for calendars an import kept whole; default: the sample app's mapping when the store's schema is one.",
            valueName: "file"))
    var mapping: String?

    @Option(help: ArgumentHelp("Pin DTSTAMP (ISO-8601) so that two exports are byte-identical.", valueName: "time"))
    var dtstamp: String?

    @Flag(
        help:
            "Write records the mapping calls cancelled (soft-deleted events) with STATUS:CANCELLED instead of leaving them out."
    )
    var includeDeleted = false

    var givenFlag: String? {
        [("--mapping", mapping != nil), ("--dtstamp", dtstamp != nil), ("--include-deleted", includeDeleted)].first {
            $0.1
        }?.0
    }

    var keepsCalendarsWhole: Bool { mapping == CalendarArchive.mappingName }
}
