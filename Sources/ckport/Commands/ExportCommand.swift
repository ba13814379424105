import ArgumentParser
import Foundation
import Formats
import Records
import SampleApps
import Store

struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export records from the store as JSON, JSON Lines, CSV or iCalendar.",
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

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("Where to write ('-' for standard output).", valueName: "file"))
    var output: String = "-"

    @Option(help: "json (a {\"records\": [ … ]} document), jsonl/ndjson (one record per line), csv, tsv or ics. Default: from -o's extension, else jsonl.")
    var format: DataFormat?

    @Option(help: ArgumentHelp("CSV: the fields to write, in order, e.g. title,status,dueDate.", valueName: "a,b,c"))
    var fields: String?

    @Flag(help: "CSV: add the system columns (scope, zoneName, ownerRecordName, recordChangeTag, created, createdBy, createdDevice, modified, modifiedBy, modifiedDevice).")
    var system = false

    @Option(help: ArgumentHelp("CSV and iCalendar: write times as local time in this time zone (CSV with its offset, iCalendar with TZID and a VTIMEZONE).", valueName: "zone"))
    var tz: String?

    @Option(help: "CSV: LOCATION cells as latlon (lat,lon) or json.")
    var location: LocationForm = .latlon

    @Flag(help: "CSV: end rows with LF instead of CRLF.")
    var lf = false

    @Flag(help: "CSV: start the file with a UTF-8 byte order mark, for Excel.")
    var bom = false

    @Option(help: ArgumentHelp("CSV: the cell delimiter, e.g. ';'.", valueName: "char"))
    var delimiter: String?

    @Flag(help: "CSV: put ' before text cells starting with = + - @ so a spreadsheet cannot run them as formulas.")
    var spreadsheetSafe = false

    @Option(help: ArgumentHelp("iCalendar: the mapping file (YAML or JSON); default: the sample app's mapping when the store's schema is one.", valueName: "file"))
    var mapping: String?

    @Option(help: ArgumentHelp("iCalendar: pin DTSTAMP (ISO-8601) so that two exports are byte-identical.", valueName: "time"))
    var dtstamp: String?

    @Flag(help: "iCalendar: write records the mapping calls cancelled (soft-deleted events) with STATUS:CANCELLED instead of leaving them out.")
    var includeDeleted = false

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

    @Option(help: ArgumentHelp("JSON and CSV: also write the asset files the exported records name to DIR/<sha256> (import them back with import --assets DIR).", valueName: "dir"))
    var assets: String?

    @Flag(help: "Print the SQL and SQLite's query plan (which indexes it uses) instead of exporting.")
    var explain = false

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        if assets != nil && (isICS || explain) { throw ValidationError("--assets goes with JSON and CSV exports") }
        if since != nil && (predicate != nil || sort != nil) { throw ValidationError("--since exports changes in change order; it does not combine with --where or --sort") }
        if (predicate != nil || sort != nil) && recordTypes.isEmpty && !isICS { throw ValidationError("--where and --sort need --type") }
        if let limit, limit < 0 { throw ValidationError("--limit cannot be negative") }
        if since != nil && limit != nil { throw ValidationError("--since exports every change; it does not combine with --limit") }
        _ = try ArgumentChecks.timeZone(tz)
        _ = try ArgumentChecks.delimiter(delimiter)
        if !isICS {
            let icsOnly = [("--mapping", mapping != nil), ("--dtstamp", dtstamp != nil), ("--include-deleted", includeDeleted)]
            if let (flag, _) = icsOnly.first(where: { $0.1 }) {
                throw ValidationError("\(flag) applies to iCalendar output; add --format ics or write to a .ics file")
            }
        } else {
            if since != nil { throw ValidationError("iCalendar has no place for deleted records: export changes (--since) as JSON") }
            if let dtstamp, ISO8601.parse(dtstamp) == nil { throw ValidationError("--dtstamp is an ISO-8601 time such as 2026-01-01T00:00:00Z") }
        }
        if !isCSV {
            let csvOnly = [("--fields", fields != nil), ("--system", system), ("--tz", tz != nil && !isICS), ("--location", location != .latlon),
                           ("--lf", lf), ("--bom", bom), ("--delimiter", delimiter != nil), ("--spreadsheet-safe", spreadsheetSafe)]
            if let (flag, _) = csvOnly.first(where: { $0.1 }) {
                throw ValidationError("\(flag) applies to CSV output; add --format csv or write to a .csv file")
            }
        }
        if isCSV {
            if since != nil { throw ValidationError("CSV has no place for deleted records: export changes (--since) as JSON") }
            if recordTypes.count != 1 && !writesDirectory {
                throw ValidationError("CSV holds one record type per file: give one --type, or -o DIR/ for one file per type")
            }
        }
        if format == nil && DataFormat.infer(output) == nil, let dot = output.lastIndex(of: "."), output != "-" {
            let ext = output[output.index(after: dot)...].lowercased()
            if ["ckbundle", "gz"].contains(ext) {
                throw ValidationError("-o \(output): export writes JSON (.json), JSON Lines (.jsonl, .ndjson), CSV (.csv, .tsv) and iCalendar (.ics); a backup bundle (.\(ext)) is written by 'ckport backup -o \(output)'")
            }
        }
    }

    /// iCalendar output, by --format or by -o's extension.
    var isICS: Bool { (format ?? DataFormat.infer(output)) == .ics }

    /// CSV output, by --format or by -o's extension (a folder's files are .csv unless tsv).
    var isCSV: Bool { (format ?? DataFormat.infer(output))?.isCSV == true || (writesDirectory && format == nil) }

    /// `-o DIR/` (or an existing folder) takes one file per record type.
    var writesDirectory: Bool {
        var isDirectory: ObjCBool = false
        return output.hasSuffix("/") || (FileManager.default.fileExists(atPath: output, isDirectory: &isDirectory) && isDirectory.boolValue)
    }

    func run() throws {
        let store = try storeOptions.open(create: false)
        var query = try filter.query()
        query.sortField = sort
        query.descending = desc
        query.limit = limit
        if explain {
            for (sql, plan) in try store.read({ try $0.queryPlan(query) }) {
                print(sql)
                for line in plan { print("  " + line) }
            }
            return
        }
        if isCSV && !explain {
            try exportCSV(store: store, query: query)
            return
        }
        if isICS && !explain {
            try exportICS(store: store, query: query)
            return
        }
        let token = try since.map { try ChangeToken(parsing: $0) }
        if style == .plain {
            let collisions = JSONRecordCodec.plainCollisions(in: store.schema, types: recordTypes.isEmpty ? nil : recordTypes)
            if !collisions.isEmpty {
                throw CommandFailure.invalid("--style plain cannot export \(collisions.joined(separator: ", ")): those field names are plain records' system keys; use --style canonical")
            }
        }
        let layout = (format ?? DataFormat.infer(output) ?? .jsonl).layout
        let file = try OutputFile(path: output)
        let jsonWriter = JSONRecordWriter(output: file, layout: layout, style: style, schema: store.schema)
        let writer = BackgroundSink(jsonWriter)
        let progress = ProgressLine("exporting", quiet: storeOptions.quiet || output == "-")
        let assetFiles = AssetFolderWriter(directory: assets)
        let newToken = try store.read { session in
            // The count is one quick pass over the primary keys; it gives the progress line an ETA.
            let total = progress.isEnabled && token == nil ? try session.count(query) : nil
            let newToken = try stream(into: writer, progress: progress, total: total) { emit in
                let collect: (Records.Record) throws -> Void = { assetFiles.note($0); try emit($0) }
                if let token {
                    try session.forEachChange(since: token, recordTypes: recordTypes, scope: scope, zoneName: zone, collect)
                } else {
                    try session.forEach(query, collect)
                }
                return session.currentToken
            }
            try assetFiles.write(from: session)
            return newToken
        }
        if let tokenFile {
            let out = try OutputFile(path: tokenFile)
            try out.write(newToken.description + "\n")
            try out.commit()
        }
        if !storeOptions.quiet {
            let target = output == "-" ? "" : " to \(output)"
            Console.error("exported \(Console.count(jsonWriter.recordsWritten)) records\(target) in \(Console.seconds(progress.elapsed))")
            Console.error("change token: \(newToken)")
            assetFiles.report()
        }
    }
}

extension ValueStyle: ExpressibleByArgument {}

enum LocationForm: String, ExpressibleByArgument, CaseIterable {
    case latlon, json
}

extension ExportCommand {
    func csvOptions() throws -> CSVWriteOptions {
        var dialect = (format == .tsv || output.lowercased().hasSuffix(".tsv")) ? CSVDialect.tsv : CSVDialect.csv
        if let byte = try ArgumentChecks.delimiter(delimiter) { dialect.delimiter = byte }
        dialect.crlf = !lf
        dialect.byteOrderMark = bom
        dialect.spreadsheetSafe = spreadsheetSafe
        let chosen = fields.map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        return CSVWriteOptions(dialect: dialect, values: CSVValues(timeZone: try ArgumentChecks.timeZone(tz), locationAsJSON: location == .json),
                               fields: chosen, includeSystem: system)
    }

    /// One CSV file for one type, or a file per type in a folder, all from one state of the
    /// store. A folder this export created is removed again when the export fails.
    func exportCSV(store: RecordStore, query: RecordQuery) throws {
        let options = try csvOptions()
        let directory = writesDirectory ? output : nil
        let fileExtension = options.dialect.delimiter == 0x09 ? "tsv" : "csv"
        var total = 0
        let progress = ProgressLine("exporting", quiet: storeOptions.quiet || output == "-")
        let assetFiles = AssetFolderWriter(directory: assets)
        var createdDirectory: String?
        var typeCount = 0
        do {
            try store.read { (session: StoreSession) throws -> Void in
                let schema = session.schema
                let types = recordTypes.isEmpty ? schema.recordTypes.map(\.name).sorted() : recordTypes
                typeCount = types.count
                var definitions: [RecordTypeDefinition] = []
                for typeName in types {
                    guard let type = schema.recordType(named: typeName) else {
                        let known = schema.recordTypes.map(\.name).sorted().joined(separator: ", ")
                        throw CommandFailure.invalid("unknown record type '\(typeName)' (the schema has \(known))")
                    }
                    definitions.append(type)
                }
                if let directory, !FileManager.default.fileExists(atPath: directory) {
                    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                    createdDirectory = directory
                }
                for type in definitions {
                    let path = directory.map { URL(fileURLWithPath: $0).appendingPathComponent("\(type.name).\(fileExtension)").path } ?? output
                    let csv: CSVRecordWriter
                    do { csv = try CSVRecordWriter(output: try OutputFile(path: path), type: type, options: options) } catch let error as ValueError {
                        throw CommandFailure.invalid(error.message)
                    }
                    var typeQuery = query
                    typeQuery.recordTypes = [type.name]
                    let count = progress.isEnabled ? try session.count(typeQuery) : nil
                    try stream(into: BackgroundSink(csv), progress: progress, total: count) { emit in
                        try session.forEach(typeQuery) { record in
                            assetFiles.note(record)
                            try emit(record)
                        }
                    }
                    try assetFiles.write(from: session)
                    total += csv.recordsWritten
                    if !storeOptions.quiet && output != "-" { Console.error("exported \(Console.count(csv.recordsWritten)) \(type.name) records to \(path)") }
                }
            }
        } catch {
            if let createdDirectory { try? FileManager.default.removeItem(atPath: createdDirectory) }
            throw error
        }
        if !storeOptions.quiet && typeCount > 1 { Console.error("exported \(Console.count(total)) records in \(typeCount) files in \(Console.seconds(progress.elapsed))") }
        if !storeOptions.quiet { assetFiles.report() }
    }
}

extension ExportCommand {
    func exportICS(store: RecordStore, query: RecordQuery) throws {
        if mapping == CalendarArchive.mappingName {
            let file = try OutputFile(path: output)
            let summary: CalendarArchiveSummary
            do {
                summary = try store.read { session in
                    try CalendarArchiveExporter(session: session).export(predicate: query.predicate, predicateText: query.predicateText, to: file)
                }
                try file.commit()
            } catch {
                file.discard()
                throw error
            }
            if !storeOptions.quiet {
                let parts = summary.components.keys.sorted().map { "\(Console.count(summary.components[$0]!)) \($0)" }
                Console.error("exported " + parts.joined(separator: ", ") + (output == "-" ? "" : " to \(output)") + " from \(summary.calendars.count) archived calendar\(summary.calendars.count == 1 ? "" : "s")")
            }
            return
        }
        let calendarMapping = try CalendarMappingChoice.resolve(mapping, store: store, quiet: storeOptions.quiet)
        var options = ICalExportOptions(timeZone: try ArgumentChecks.timeZone(tz), includeCancelled: includeDeleted)
        if let dtstamp, let ms = ISO8601.parse(dtstamp) { options.dtstamp = ms }
        let file = try OutputFile(path: output)
        let progress = ProgressLine("exporting", quiet: true)
        let summary: ICalExportSummary
        do {
            summary = try store.read { session in
                try ICalendarExporter(session: session, mapping: calendarMapping, options: options).export(query, to: file)
            }
        } catch {
            file.discard()
            throw error
        }
        if !storeOptions.quiet {
            let parts = summary.written.keys.sorted().map { "\(Console.count(summary.written[$0]!)) \($0)" }
            var line = "exported " + (parts.isEmpty ? "nothing" : parts.joined(separator: ", ")) + (output == "-" ? "" : " to \(output)") + " in \(Console.seconds(progress.elapsed))"
            if let name = summary.calendarName { line += " (calendar \"\(name)\")" }
            Console.error(line)
            if summary.cancelledLeftOut > 0 { Console.error("left out \(summary.cancelledLeftOut) cancelled records (--include-deleted writes them with STATUS:CANCELLED)") }
        }
    }
}
