import ArgumentParser
import Foundation
import Formats
import Records
import Store

enum DataFormat: String, ExpressibleByArgument, CaseIterable {
    case json, jsonl, ndjson, csv, tsv, ics

    /// The format a file name implies.
    static func infer(_ path: String) -> DataFormat? {
        let lower = path.lowercased()
        for format in allCases where lower.hasSuffix("." + format.rawValue) { return format }
        return nil
    }

    var layout: JSONRecordReader.Layout { self == .json ? .document : .lines }
    var isCSV: Bool { self == .csv || self == .tsv }
}

enum StyleOption: String, ExpressibleByArgument, CaseIterable {
    case auto, canonical, plain

    var valueStyle: ValueStyle? {
        switch self {
        case .auto: return nil
        case .canonical: return .canonical
        case .plain: return .plain
        }
    }
}

extension WriteMode: ExpressibleByArgument {}

extension DatabaseScope: ExpressibleByArgument {
    public init?(argument: String) { self.init(text: argument) }
}

struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import records from JSON, JSON Lines, CSV or iCalendar files into the store.",
        discussion: """
        Each file is JSON Lines (.jsonl, .ndjson: one record per line), a JSON document \
        (.json: {"records": [ … ]} as CloudKit's records/query returns it, or a bare array), or \
        CSV (.csv, .tsv); '-' reads standard input. JSON records may be in CloudKit Web \
        Services' shape or plain (flat) objects; a schema file (cktool's 'DEFINE SCHEMA' text, \
        any extension) among the files is applied first.

        CSV is typed by the schema: the header names the fields (--map renames columns), cells \
        are parsed by each field's type, and an empty unquoted cell is no value while "" is the \
        empty string. Rows without a recordName column are named by --name-template:

          ckport import tasks.csv --type Task --map "Due date=dueDate"
          ckport import entries.csv --type DailyEntry \\
              --name-template 'DailyEntry_{date:yyyy-MM-dd}_{authorUserRecordID}'

        iCalendar (.ics) goes through a mapping from components to record types (--mapping, or \
        the sample app's when the store's schema is one): VEVENT → Event with an \
        EventParticipant per ATTENDEE, VTODO → Task, and so on. Records are named from the UID, \
        so importing a file twice changes nothing. --expand FROM..TO turns recurring events \
        into one record per occurrence in the window; --set fills a field of every record; \
        floating times and dates are read in --tz (else UTC):

          ckport import family.ics --expand 2026-01-01..2026-12-31 \\
              --set familyID=family-1 --scope shared --zone family-1-zone \\
              --owner _4f00e3e229b648635c6f63dca8da05ef

        Every record is checked against the schema and CloudKit's limits. By default one bad \
        record fails the whole import and the store is left as it was; --skip-invalid imports \
        the rest and --rejects FILE keeps what was turned away, with the reasons.

          ckport import samples/family-todo/schema.ckdb \\
              samples/family-todo/records.jsonl
          ckport import tasks.json --mode newer
          ckport import entries.jsonl --dry-run
          ckport import export.json --skip-invalid --rejects rejected.jsonl
          jq -c '.records[]' export.json | ckport import - --type Task

        Modes: upsert (default) sets the given fields and keeps the others; insert fails on an \
        existing record; replace clears fields not given; newer keeps whichever side has the \
        later modified time (a tie keeps the stored record).
        """
    )

    @Argument(help: ArgumentHelp("Files to import ('-' for standard input).", valueName: "file"))
    var files: [String]

    @Option(help: "How incoming records combine with stored ones: insert, upsert, replace or newer.")
    var mode: WriteMode = .upsert

    @Option(help: "File format when the extension does not say: json, jsonl, ndjson, csv, tsv or ics.")
    var format: DataFormat?

    @Option(help: ArgumentHelp("CSV: rename a column, \"Header=field\"; repeat for several.", valueName: "header=field"))
    var map: [String] = []

    @Flag(help: "CSV: let columns that are not fields pass instead of refusing the file.")
    var ignoreColumns = false

    @Option(help: ArgumentHelp("CSV: record names from fields for rows without recordName, e.g. 'DailyEntry_{date:yyyy-MM-dd}_{authorUserRecordID}'.", valueName: "template"))
    var nameTemplate: String?

    @Option(help: ArgumentHelp("CSV: the cell delimiter (default: sniffed from the header).", valueName: "char"))
    var delimiter: String?

    @Flag(help: "CSV: take off the ' that an export with --spreadsheet-safe put before formula-like text.")
    var spreadsheetSafe = false

    @Option(help: ArgumentHelp("iCalendar: the mapping file (YAML or JSON), or 'archive' to keep every calendar whole (its record types are added to the schema); default: the sample app's mapping when the store's schema is one.", valueName: "file"))
    var mapping: String?

    @Option(help: ArgumentHelp("iCalendar: expand recurring events into their occurrences starting in FROM..TO (dates or ISO-8601 times; TO's day included).", valueName: "from..to"))
    var expand: String?

    @Option(name: .customLong("set"), help: ArgumentHelp("iCalendar: give every imported record this field value, e.g. familyID=family-1; repeat for several.", valueName: "field=value"))
    var fixedFields: [String] = []

    @Option(help: "Record shape: canonical (CloudKit Web Services), plain (flat objects) or auto.")
    var style: StyleOption = .auto

    @Option(name: .customLong("type"), help: ArgumentHelp("Record type for records that name none.", valueName: "type"))
    var recordType: String?

    @Option(help: ArgumentHelp("Zone for records that name none.", valueName: "name"))
    var zone: String = ZoneID.defaultZoneName

    @Option(help: ArgumentHelp("Zone owner for records that name none.", valueName: "userRecordName"))
    var owner: String = ZoneID.defaultOwnerName

    @Option(help: "Database scope for records that name none: private, shared or public.")
    var scope: DatabaseScope = .private

    @Option(help: ArgumentHelp("Time zone for timestamps written without an offset, and for iCalendar's floating times and dates (default UTC).", valueName: "zone"))
    var tz: String?

    @Flag(help: "Add fields and record types the schema lacks, as CloudKit's development environment does.")
    var allowNewFields = false

    @Flag(help: "Import the valid records and reject the others (see --rejects).")
    var skipInvalid = false

    @Flag(help: "iCalendar: refuse the import when the mapping has no place for something the file holds (a second alarm, an RDATE, an attendee's role, an X- property…).")
    var strict = false

    @Option(help: ArgumentHelp("With --skip-invalid: write rejected records here as JSON Lines, with reasons.", valueName: "file"))
    var rejects: String?

    @Flag(help: "Check everything and report what would change; write nothing.")
    var dryRun = false

    @Option(help: ArgumentHelp("Store asset files from this folder with their records: DIR/<sha256> for values with a sha256, else the value's localPath (relative to DIR).", valueName: "dir"))
    var assets: String?

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        if let assets {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: assets, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw ValidationError("--assets \(assets): no such folder")
            }
        }
        if rejects != nil && !skipInvalid { throw ValidationError("--rejects needs --skip-invalid") }
        _ = try ArgumentChecks.timeZone(tz)
        if files.filter({ $0 == "-" }).count > 1 { throw ValidationError("standard input ('-') can be read once") }
        _ = try ArgumentChecks.delimiter(delimiter)
        for entry in map where !entry.contains("=") { throw ValidationError("--map takes \"Header=field\", found \"\(entry)\"") }
        for entry in fixedFields where !entry.contains("=") { throw ValidationError("--set takes field=value, found \"\(entry)\"") }
        _ = try expandWindow()
    }

    func run() throws {
        defer { for spool in ImportCommand.stdinSpools { unlink(spool) } }
        var schemaFile: (path: String, schema: Schema)?
        var dataFiles: [String] = []
        for file in files {
            if file != "-", try ImportCommand.isSchemaFile(file) {
                if let first = schemaFile { throw CommandFailure.usage("two schema files given (\(first.path) and \(file)); import one schema at a time") }
                schemaFile = (file, try SchemaCommand.read(file))
            } else {
                let kind: String
                switch format ?? DataFormat.infer(file) {
                case .csv?, .tsv?: kind = "CSV"
                case .ics?: kind = "an iCalendar file"
                default: kind = "JSON"
                }
                try InputFiles.check(file, as: kind)
                dataFiles.append(file)
            }
        }
        if !dataFiles.contains(where: { (format ?? DataFormat.infer($0))?.isCSV == true }) {
            let csvOnly = [("--map", !map.isEmpty), ("--ignore-columns", ignoreColumns), ("--name-template", nameTemplate != nil),
                           ("--delimiter", delimiter != nil), ("--spreadsheet-safe", spreadsheetSafe)]
            if let (flag, _) = csvOnly.first(where: { $0.1 }) {
                throw CommandFailure.usage("\(flag) applies to CSV files; none of the files is CSV (.csv, .tsv, or --format csv)")
            }
        }
        if !dataFiles.contains(where: { (format ?? DataFormat.infer($0)) == .ics }) {
            let icsOnly = [("--mapping", mapping != nil), ("--expand", expand != nil), ("--set", !fixedFields.isEmpty)]
            if let (flag, _) = icsOnly.first(where: { $0.1 }) {
                throw CommandFailure.usage("\(flag) applies to iCalendar files; none of the files is .ics (or --format ics)")
            }
        }
        // Records need a schema to be checked against: say so once, before any file is made.
        let archive = mapping == CalendarArchive.mappingName
        let needsSchema = schemaFile == nil && !allowNewFields && !archive && !dataFiles.isEmpty
        if needsSchema && !FileManager.default.fileExists(atPath: storeOptions.path) {
            throw CommandFailure.invalid(ImportCommand.noSchema(storeOptions.path, exists: false))
        }
        let store = try storeOptions.open(create: true)
        if needsSchema && store.schema.recordTypes.isEmpty {
            throw CommandFailure.invalid(ImportCommand.noSchema(storeOptions.path, exists: true))
        }
        let schema = schemaFile?.schema ?? store.schema
        let codec = JSONRecordCodec(schema: schema, readStyle: style.valueStyle, defaultRecordType: recordType,
                                    defaultZone: ZoneID(scope: scope, zoneName: zone, ownerRecordName: owner),
                                    timeZone: try ArgumentChecks.timeZone(tz))
        var calendarMapping: CalendarMapping?
        var people: [String: String] = [:]
        if archive && expand != nil { throw CommandFailure.usage("--expand does not combine with --mapping archive, which keeps recurring components whole") }
        if archive && !fixedFields.isEmpty { throw CommandFailure.usage("--set does not combine with --mapping archive, whose record types are fixed") }
        if !archive && dataFiles.contains(where: { (format ?? DataFormat.infer($0)) == .ics }) {
            let mappingStore = try storeOptions.open(create: true)
            calendarMapping = try CalendarMappingChoice.resolve(mapping, store: mappingStore, schema: schema, quiet: storeOptions.quiet)
            people = try mappingStore.read { try ICalendarRecordReader.people(calendarMapping!, in: $0) }
        }
        let sources: [RecordSource] = try dataFiles.map { file in
            let fileFormat = format ?? DataFormat.infer(file)
            if fileFormat == .ics && archive {
                return CalendarArchiveReader(input: try ByteInput(path: file), zone: ZoneID(scope: scope, zoneName: zone, ownerRecordName: owner),
                                             timeZone: try ArgumentChecks.timeZone(tz))
            }
            if fileFormat == .ics, let calendarMapping {
                return try icsReader(file, mapping: calendarMapping, schema: schema, people: people)
            }
            if fileFormat?.isCSV == true {
                return CSVRecordReader(input: try ByteInput(path: file), schema: schema, options: try csvOptions(fileFormat!))
            }
            return JSONRecordReader(input: try ByteInput(path: file), layout: fileFormat?.layout, codec: codec)
        }
        var rejectsWriter: RejectsWriter?
        if let rejects { rejectsWriter = RejectsWriter(output: try OutputFile(path: rejects)) }
        var options = ImportOptions(mode: mode, allowNewFields: allowNewFields, skipInvalid: skipInvalid, dryRun: dryRun)
        options.assetDirectory = assets
        let importer = RecordImporter(store: store, options: options)
        if archive { importer.addingTypes = CalendarArchive.schema.recordTypes }
        if strict {
            let calendars = sources.compactMap { $0 as? ICalendarRecordReader }
            importer.finishing = { _ in
                let items = calendars.flatMap(\.notKeptItems)
                guard items.isEmpty else {
                    throw CommandFailure.invalid("--strict: the mapping would not keep " + items.joined(separator: ", ") + "; nothing was imported (--mapping archive keeps a calendar whole)")
                }
            }
        }
        importer.rejects = rejectsWriter
        let progress = ProgressLine(dryRun ? "checking" : "importing", quiet: storeOptions.quiet)
        importer.progress = { step in
            progress.update(records: step.records, bytesDone: step.bytesRead, bytesTotal: step.totalBytes)
        }
        let summary: ImportSummary
        do {
            summary = try importer.run(sources, schema: schemaFile?.schema)
            progress.finish()
        } catch {
            progress.finish()
            rejectsWriter?.discard()
            throw error
        }
        try rejectsWriter?.finish()
        if !storeOptions.quiet {
            for file in dataFiles where file != "-" && ((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber)?.int64Value ?? -1) == 0 {
                Console.error("note: \(file) is empty: it holds no records")
            }
            Console.error(ImportCommand.report(summary, files: dataFiles.count, seconds: progress.elapsed, rejects: rejects))
        }
    }

    func csvOptions(_ format: DataFormat) throws -> CSVReadOptions {
        var columnMap: [String: String] = [:]
        for entry in map {
            let parts = entry.split(separator: "=", maxSplits: 1)
            columnMap[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        var template: NameTemplate?
        if let nameTemplate {
            do { template = try NameTemplate(nameTemplate) } catch { throw CommandFailure.usage(error.message) }
        }
        return CSVReadOptions(delimiter: try ArgumentChecks.delimiter(delimiter) ?? (format == .tsv ? 0x09 : nil),
                              spreadsheetSafe: spreadsheetSafe, values: CSVValues(timeZone: try ArgumentChecks.timeZone(tz)),
                              defaultRecordType: recordType, defaultZone: ZoneID(scope: scope, zoneName: zone, ownerRecordName: owner),
                              columnMap: columnMap, ignoreUnknownColumns: ignoreColumns, allowNewFields: allowNewFields, nameTemplate: template)
    }

    /// `--expand FROM..TO` in UTC milliseconds, TO's whole day included when it is a date.
    func expandWindow() throws -> (from: Int64, to: Int64)? {
        guard let expand else { return nil }
        let parts = expand.components(separatedBy: "..")
        let zone = try ArgumentChecks.timeZone(tz)
        guard parts.count == 2, let from = ISO8601.parse(parts[0], timeZone: zone), var to = ISO8601.parse(parts[1], timeZone: zone) else {
            throw ValidationError("--expand takes FROM..TO, e.g. 2026-01-01..2026-12-31")
        }
        if !parts[1].contains("T") && !parts[1].contains(" ") { to += 86_400_000 }
        guard to > from else { throw ValidationError("--expand: TO comes before FROM") }
        return (from, to)
    }


    func icsReader(_ file: String, mapping: CalendarMapping, schema: Schema, people: [String: String]) throws -> ICalendarRecordReader {
        var path = file
        let window = try expandWindow()
        if file == "-" && window != nil {
            // Overrides are found in a first pass, so standard input is kept in a file first.
            // Named after this process, so a later run clears it if this one is killed.
            let spool = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-stdin-\(getpid())-\(UUID().uuidString).ics")
            OutputFile.removeStale(in: FileManager.default.temporaryDirectory.path)
            guard FileManager.default.createFile(atPath: spool.path, contents: nil, attributes: [.posixPermissions: 0o600]),
                  let handle = FileHandle(forWritingAtPath: spool.path) else {
                throw CommandFailure(status: .failure, message: "cannot create a temporary file in \(FileManager.default.temporaryDirectory.path) (set TMPDIR to a writable folder)")
            }
            try handle.write(contentsOf: FileHandle.standardInput.readDataToEndOfFile())
            try handle.close()
            ImportCommand.stdinSpools.append(spool.path)
            path = spool.path
        }
        var fixed: [(field: String, text: String)] = []
        for entry in fixedFields {
            let parts = entry.split(separator: "=", maxSplits: 1)
            fixed.append((String(parts[0]), parts.count > 1 ? String(parts[1]) : ""))
        }
        let zone = try ArgumentChecks.timeZone(tz)
        var options = ICalImportOptions(timeZone: zone, expand: window, zone: ZoneID(scope: scope, zoneName: self.zone, ownerRecordName: owner),
                                        fixedFields: fixed, people: people)
        if window != nil { options.overrides = try ICalendarRecordReader.overrides(in: try ByteInput(path: path), timeZone: zone) }
        return ICalendarRecordReader(input: try ByteInput(path: path), mapping: mapping, schema: schema, options: options)
    }

    static func noSchema(_ store: String, exists: Bool) -> String {
        "\(exists ? "the store \(store) has no schema yet" : "there is no store at \(store) yet"), so the records cannot be checked against one. "
            + "Import a schema first ('ckport schema import schema.ckdb'), or name the schema file beside the records "
            + "('ckport import schema.ckdb records.jsonl'), or let the records build one with --allow-new-fields. Nothing was written."
    }

    /// Standard input kept in files for a second pass; removed when the import ends.
    nonisolated(unsafe) static var stdinSpools: [String] = []

    static func isSchemaFile(_ path: String) throws -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        let head = (try? handle.read(upToCount: 4096)) ?? Data()
        return SchemaParser.looksLikeSchema(String(decoding: head, as: UTF8.self))
    }

    static func report(_ summary: ImportSummary, files: Int, seconds: Double, rejects: String?) -> String {
        var lines: [String] = []
        for note in summary.notes { lines.append("note: " + note) }
        if !summary.schemaChanges.isEmpty {
            lines.append("schema \(summary.dryRun ? "would change" : "changed"):")
            lines += summary.schemaChanges.map { "  " + $0 }
        }
        let totals = summary.totals
        let rows = summary.counts.keys.sorted().map { type -> [String] in
            let c = summary.counts[type]!
            return [type, Console.count(c.inserted), Console.count(c.updated), Console.count(c.unchanged), Console.count(c.deleted), Console.count(c.rejected)]
        } + [["total", Console.count(totals.inserted), Console.count(totals.updated), Console.count(totals.unchanged), Console.count(totals.deleted), Console.count(totals.rejected)]]
        let rate = seconds > 0 ? " (\(Console.count(Int(Double(totals.total) / seconds)))/s)" : ""
        // The headline counts what went in; rejected records are said apart.
        let accepted = totals.total - totals.rejected
        let rejectedPart = totals.rejected > 0 ? "; \(Console.count(totals.rejected)) rejected" : ""
        let verb = summary.dryRun ? "checked \(Console.count(totals.total)) records" : "imported \(Console.count(accepted)) record\(accepted == 1 ? "" : "s")"
        lines.append("\(verb) from \(files) file\(files == 1 ? "" : "s") in \(Console.seconds(seconds))\(rate)\(rejectedPart)")
        if totals.total > 0 {
            let header = summary.dryRun ? ["type", "would insert", "would update", "unchanged", "would delete", "rejected"] : ["type", "inserted", "updated", "unchanged", "deleted", "rejected"]
            lines.append(Console.table(header, rows, numeric: [1, 2, 3, 4, 5]))
        }
        if totals.rejected > 0 {
            for issue in summary.issues.prefix(5) { lines.append("rejected: \(issue)") }
            if summary.issues.count > 5 { lines.append("… and \(summary.issues.count - 5) more") }
            if let rejects { lines.append("rejected records are in \(rejects)") }
        }
        if summary.assets > 0 {
            lines.append("\(summary.dryRun ? "would store" : "stored") \(Console.count(summary.assets)) asset file\(summary.assets == 1 ? "" : "s")")
        }
        if summary.dryRun {
            lines.append("dry run: nothing was written")
        } else if let token = summary.token {
            lines.append("change token: \(token)")
        }
        return lines.joined(separator: "\n")
    }
}
