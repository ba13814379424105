import ArgumentParser
import CKPort
import Formats
import Foundation
import Records
import SQLiteStore
import SampleApps
import StoreCore

struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export records from the store as JSON, JSON Lines, CSV, a property list, iCalendar or xCal.",
        discussion: """
            Records come in a fixed order (scope, zone, record type, record name), so two exports \
            of one store are byte-identical. Output goes to standard output unless -o names a file; \
            a file is written under a temporary name and moved into place only when complete.

              ckport export -o backup.jsonl
              ckport export --type Event --sort startDate \\
                  --where "familyID == 'family-1' AND startDate >= 2026-03-01 AND isDeleted == false"
              ckport export --type Task --style plain | jq -r '.title'
              ckport export --since ck1-4f0c2a9e81b3-1520 -o changes.jsonl

            --where takes CloudKit's predicate subset: == != < <= > >=, IN ['a','b'], \
            BEGINSWITH 'x', CONTAINS (list membership), joined by AND. Values are 'text', numbers, \
            dates (2026-03-01 or 2026-03-01T09:00:00Z) and true/false (INT64 1/0). References \
            compare by record name. recordName, ___createTime and ___modTime can be queried too.

            --since TOKEN exports what changed after TOKEN, deleted records as \
            {"recordName": …, "deleted": true}, and prints the token to pass next time.

            CSV (--format csv or tsv, or a .csv/.tsv file) holds one record type per file: \
            recordName, then the fields in schema order (or --fields), then with --system the zone, \
            owner, change tag and created/modified columns. A REFERENCE cell is the target's record \
            name, with its action in a field:action column; an ASSET cell is its checksum, with its \
            size in field:size; LOCATION is lat,lon; a LIST is a JSON array; TIMESTAMP is ISO-8601 \
            UTC (--tz for local time). An empty unquoted cell is no value, "" the empty string.

              ckport export --type Task -o tasks.csv
              ckport export --type Task --type Area -o sheets/  # Task.csv, Area.csv
              ckport export --type Event --format csv --tz Europe/Berlin --bom \\
                  --fields title,startDate,location
              # before opening in a spreadsheet:
              ckport export --type Task -o tasks.csv --spreadsheet-safe

            A property list (--format plist, or a .plist file) is Apple's XML plist: an array \
            with a dictionary per record, each value as its plist type (string, integer, real, \
            date, data, array; references and locations as dictionaries). A timestamp with \
            milliseconds is ISO-8601 text, since a plist date holds whole seconds.

              ckport export --type Task -o tasks.plist

            iCalendar (--format ics, or a .ics file) goes through a mapping from record types to \
            components (--mapping FILE, or the sample app's when the store's schema is one): \
            events with attendees and alarms, to-dos, chores with their RRULE. Times are UTC \
            unless --tz names a zone, which is then written as a VTIMEZONE; soft-deleted events \
            stay out unless --include-deleted. UIDs are record names, so calendars that subscribe \
            see the same events again.

              ckport export -o march.ics \\
                  --where "familyID == 'family-1' AND startDate >= 2026-03-01 AND startDate < 2026-04-01"
              ckport export --type Task --type RecurringChore \\
                  -o chores.ics --tz Europe/Berlin
            """
    )

    @Option(
        name: [.short, .customLong("output")],
        help: ArgumentHelp("Where to write ('-' for standard output).", valueName: "file"))
    var output: String = "-"

    @Option(
        help: ArgumentHelp(
            "The output's format: \(ExportCommand.writtenFormats). Default: from -o's extension, else jsonl.",
            valueName: "format"))
    var format: DataFormat?

    @Option(
        help: ArgumentHelp(
            "CSV and iCalendar: write times as local time in this time zone (CSV with its offset, iCalendar with TZID and a VTIMEZONE).",
            valueName: "zone"))
    var tz: String?

    @OptionGroup(title: "CSV") var csv: CSVExportOptions

    @OptionGroup(title: "iCalendar") var calendar: CalendarExportOptions

    @Option(help: "canonical (CloudKit Web Services' record shape) or plain (flat objects).")
    var style: ValueStyle = .canonical

    @OptionGroup var filter: RecordFilterOptions
    var recordTypes: [String] { filter.recordTypes }
    var scope: DatabaseScope? { filter.scope }
    var zone: String? { filter.zone }
    var predicate: String? { filter.predicate }

    @Option(help: ArgumentHelp("Sort by this field.", valueName: "field"))
    var sort: String?

    @Flag(help: "Sort in descending order.")
    var desc = false

    @Option(help: "Stop after this many records.")
    var limit: Int?

    @Option(help: ArgumentHelp("Export only what changed after this change token.", valueName: "token"))
    var since: String?

    @Option(help: ArgumentHelp("Also write the new change token to this file.", valueName: "file"))
    var tokenFile: String?

    @Option(
        help: ArgumentHelp(
            "JSON and CSV: also write the asset files the exported records name to DIR/<sha256> (import them back with import --assets DIR).",
            valueName: "dir"))
    var assets: String?

    @Flag(help: "Print the SQL and SQLite's query plan (which indexes it uses) instead of exporting.")
    var explain = false

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        if assets != nil && (isICS || explain) { throw ValidationError("--assets goes with JSON and CSV exports") }
        if since != nil && (predicate != nil || sort != nil) {
            throw ValidationError("--since exports changes in change order; it does not combine with --where or --sort")
        }
        if (predicate != nil || sort != nil) && recordTypes.isEmpty && !isICS {
            throw ValidationError("--where and --sort need --type")
        }
        if let limit, limit < 0 { throw ValidationError("--limit cannot be negative") }
        if since != nil && limit != nil {
            throw ValidationError("--since exports every change; it does not combine with --limit")
        }
        _ = try ArgumentChecks.timeZone(tz)
        // A format's own flags apply only to output in that format.
        if !isICS, let flag = calendar.givenFlag {
            throw ValidationError(
                "\(flag) applies to calendar output; add --format ics or xcal, or write to a .ics or .xcal file")
        }
        if isICS {
            if since != nil {
                throw ValidationError("a calendar has no place for deleted records: export changes (--since) as JSON")
            }
            if let dtstamp = calendar.dtstamp, ISO8601.parse(dtstamp) == nil {
                throw ValidationError("--dtstamp is an ISO-8601 time such as 2026-01-01T00:00:00Z")
            }
        }
        if !isCSV, let flag = tz != nil && !isICS ? "--tz" : csv.givenFlag {
            throw ValidationError("\(flag) applies to CSV output; add --format csv or write to a .csv file")
        }
        if isCSV {
            if since != nil {
                throw ValidationError("CSV has no place for deleted records: export changes (--since) as JSON")
            }
            if recordTypes.count != 1 && !writesDirectory {
                throw ValidationError(
                    "CSV holds one record type per file: give one --type, or -o DIR/ for one file per type")
            }
        }
        if format == nil && DataFormat.infer(output) == nil, let dot = output.lastIndex(of: "."), output != "-" {
            let ext = output[output.index(after: dot)...].lowercased()
            if ["ckbundle", "gz"].contains(ext) {
                throw ValidationError(
                    "-o \(output): export writes \(ExportCommand.writtenExtensions); a backup bundle (.\(ext)) is written by 'ckport backup -o \(output)'"
                )
            }
            // A name that says another format (.xlsx, .xml, .txt) is not given JSON Lines silently.
            if !writesDirectory, !ext.isEmpty, ext.allSatisfy({ $0.isLetter }) {
                throw ValidationError(
                    "-o \(output): ckport does not write .\(ext) files; it writes \(ExportCommand.writtenExtensions). Name the file so (out.csv), or give --format to write one of them under this name"
                )
            }
        }
    }

    /// Calendar output (iCalendar, xCal), by --format or by -o's extension.
    var isICS: Bool { (format ?? DataFormat.infer(output))?.format.kind == .calendar }

    /// CSV output, by --format or by -o's extension (a folder's files are .csv unless tsv).
    var isCSV: Bool { (format ?? DataFormat.infer(output))?.isCSV == true || (writesDirectory && format == nil) }

    /// `-o DIR/` (or an existing folder) takes one file per record type.
    var writesDirectory: Bool {
        var isDirectory: ObjCBool = false
        return output.hasSuffix("/")
            || (FileManager.default.fileExists(atPath: output, isDirectory: &isDirectory) && isDirectory.boolValue)
    }

    func run() async throws {
        let store = try storeOptions.open(create: false)
        var query = try filter.query()
        query.sortField = sort
        query.descending = desc
        query.limit = limit
        if explain {
            for (sql, plan) in try await store.readSession({ try $0.queryPlan(query) }) {
                print(sql)
                for line in plan { print("  " + line) }
            }
            return
        }
        if isICS {
            try exportICS(store: store, query: query)
            return
        }
        var settings = FormatSettings()
        settings[JSONWriteSettings.self] = JSONWriteSettings(style: style)
        let chosen = format ?? DataFormat.infer(output) ?? (writesDirectory ? .csv : .jsonl)
        if isCSV {
            settings[CSVWriteOptions.self] = try csv.options(
                tsv: chosen == .tsv || output.lowercased().hasSuffix(".tsv"), tz: tz)
        }
        let request = ExportRequest(
            query: query, since: try since.map { try ChangeToken(parsing: $0) }, format: chosen.format,
            timeZone: try ArgumentChecks.timeZone(tz), settings: settings, assetDirectory: assets)
        let progress = ProgressLine("exporting", quiet: storeOptions.quiet || output == "-")
        let result = try Exports.records(
            from: store, to: isCSV && writesDirectory ? .directory(output) : .file(output), request: request,
            progress: progress.handler)
        progress.finish()
        if let tokenFile {
            let out = try OutputFile(path: tokenFile)
            try out.write(result.token.description + "\n")
            try out.commit()
        }
        guard !storeOptions.quiet else { return }
        if isCSV {
            if output != "-" {
                for file in result.files {
                    Console.error(
                        "exported \(Console.count(file.records)) \(file.recordType ?? "") records to \(file.path)")
                }
            }
            if result.files.count > 1 {
                Console.error(
                    "exported \(Console.count(result.records)) records in \(result.files.count) files in \(Console.seconds(progress.elapsed))"
                )
            }
        } else {
            let target = output == "-" ? "" : " to \(output)"
            Console.error(
                "exported \(Console.count(result.records)) records\(target) in \(Console.seconds(progress.elapsed))")
            Console.error("change token: \(result.token)")
        }
        result.assets?.report()
    }
}

extension ExportCommand {
    /// The formats export writes, from the registry: "json (JSON (a document of records)), …".
    static var writtenFormats: String {
        RecordFormats.all.filter { $0.makeWriter != nil || $0.exportFromStore != nil }
            .map { "\($0.names.joined(separator: "/")) (\($0.summary))" }.joined(separator: ", ")
    }

    /// "JSON (.json), JSON Lines (.jsonl, .ndjson), …", for messages about -o.
    static var writtenExtensions: String {
        RecordFormats.all.filter { $0.makeWriter != nil || $0.exportFromStore != nil }
            .map { "\($0.title) (\($0.extensions.map { "." + $0 }.joined(separator: ", ")))" }.joined(separator: ", ")
    }
}

extension ValueStyle: ExpressibleByArgument {}

enum LocationForm: String, ExpressibleByArgument, CaseIterable {
    case latlon, json
}

extension ExportCommand {
    func exportICS(store: any RecordStoring, query: RecordQuery) throws {
        var settings = FormatSettings()
        if calendar.keepsCalendarsWhole {
            settings[CalendarWriteSettings.self] = CalendarWriteSettings(keepsCalendarsWhole: true)
        } else {
            var options = ICalExportOptions(
                timeZone: try ArgumentChecks.timeZone(tz), includeCancelled: calendar.includeDeleted)
            if let dtstamp = calendar.dtstamp, let ms = ISO8601.parse(dtstamp) { options.dtstamp = ms }
            let mapping = try CalendarMappingChoice.resolve(calendar.mapping, store: store, quiet: storeOptions.quiet)
            settings[CalendarWriteSettings.self] = CalendarWriteSettings(mapping: mapping, options: options)
        }
        let started = Date()
        let format = (format ?? DataFormat.infer(output) ?? .ics).format
        let result = try Exports.records(
            from: store, to: .file(output), request: ExportRequest(query: query, format: format, settings: settings))
        guard !storeOptions.quiet, let summary = result.summary else { return }
        let target = output == "-" ? "" : " to \(output)"
        if let archive = summary.details[CalendarArchiveSummary.self] {
            let parts = archive.components.keys.sorted().map { "\(Console.count(archive.components[$0]!)) \($0)" }
            Console.error(
                "exported " + parts.joined(separator: ", ") + target
                    + " from \(archive.calendars.count) archived calendar\(archive.calendars.count == 1 ? "" : "s")")
        } else if let written = summary.details[ICalExportSummary.self] {
            let parts = written.written.keys.sorted().map { "\(Console.count(written.written[$0]!)) \($0)" }
            var line =
                "exported " + (parts.isEmpty ? "nothing" : parts.joined(separator: ", ")) + target
                + " in \(Console.seconds(Date().timeIntervalSince(started)))"
            if let name = written.calendarName { line += " (calendar \"\(name)\")" }
            Console.error(line)
            if written.cancelledLeftOut > 0 {
                Console.error(
                    "left out \(written.cancelledLeftOut) cancelled records (--include-deleted writes them with STATUS:CANCELLED)"
                )
            }
        }
    }
}
