import ArgumentParser
import CKPort
import Formats
import Foundation
import Records
import SQLiteStore
import StoreCore

/// A `--format` value: one of the registry's formats, by any of its names.
struct DataFormat: ExpressibleByArgument, Equatable {
    let format: RecordFormat

    init(_ format: RecordFormat) { self.format = format }

    init?(argument: String) {
        guard let format = RecordFormats.named(argument) else { return nil }
        self.format = format
    }

    static var allValueStrings: [String] { RecordFormats.allNames }
    var defaultValueDescription: String { format.name }

    static let json = DataFormat(.json), jsonl = DataFormat(.jsonLines), csv = DataFormat(.csv), tsv = DataFormat(.tsv),
        ics = DataFormat(.iCalendar)

    /// The format a file name implies.
    static func infer(_ path: String) -> DataFormat? { RecordFormats.forPath(path).map(DataFormat.init) }

    var isCSV: Bool { format.oneRecordTypePerFile }
    var rawValue: String { format.name }
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

struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import records from JSON, JSON Lines, CSV, property list, iCalendar or xCal files into the store.",
        discussion: """
            Each file is JSON Lines (.jsonl, .ndjson: one record per line), a JSON document \
            (.json: {"records": [ … ]} as CloudKit's records/query returns it, or a bare array), or \
            CSV (.csv, .tsv), or an XML property list (.plist: an array with a dictionary per \
            record, keys as in the plain style); '-' reads standard input. JSON records may be in \
            CloudKit Web Services' shape or plain (flat) objects; a schema file (cktool's 'DEFINE \
            SCHEMA' text, any extension) among the files is applied first.

            CSV is typed by the schema: the header names the fields (--map renames columns), cells \
            are parsed by each field's type, and an empty unquoted cell is no value while "" is the \
            empty string. Rows without a recordName column are named by --name-template:

              ckport import tasks.csv --type Task --map "Due date=dueDate"
              ckport import entries.csv --type DailyEntry \\
                  --name-template 'DailyEntry_{date:yyyy-MM-dd}_{authorUserRecordID}'

            iCalendar (.ics) and xCal (.xcal, RFC 6321's XML form of it) go through a mapping from \
            components to record types (--mapping, or \
            the sample app's when the store's schema is one): VEVENT → Event with an \
            EventParticipant per ATTENDEE, VTODO → Task, and so on. Records are named from the UID, \
            so importing a file twice changes nothing. --expand FROM..TO turns recurring events \
            into one record per occurrence in the window; --set fills a field of the new records; \
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

    @Option(
        help: ArgumentHelp(
            "The files' format. Default: each file's extension, else what its first bytes show, else JSON.",
            valueName: "format"))
    var format: DataFormat?

    @Option(help: "Record shape: canonical (CloudKit Web Services), plain (flat objects) or auto.")
    var style: StyleOption = .auto

    @Option(name: .customLong("type"), help: ArgumentHelp("Record type for records that name none.", valueName: "type"))
    var recordType: String?

    @Option(help: ArgumentHelp("Zone for records that name none (default: _defaultZone).", valueName: "name"))
    var zone: String?

    @Option(
        help: ArgumentHelp(
            "Zone owner for records that name none (default: __defaultOwner__).", valueName: "userRecordName"))
    var owner: String?

    @Option(help: "Database scope for records that name none: private (the default), shared or public.")
    var scope: DatabaseScope?

    @Option(
        help: ArgumentHelp(
            "Time zone for timestamps written without an offset, and for iCalendar's floating times and dates (default UTC).",
            valueName: "zone"))
    var tz: String?

    @Flag(help: "Add fields and record types the schema lacks, as CloudKit's development environment does.")
    var allowNewFields = false

    @Flag(help: "Import the valid records and reject the others (see --rejects).")
    var skipInvalid = false

    @Option(
        help: ArgumentHelp(
            "With --skip-invalid: write rejected records here as JSON Lines, with reasons.", valueName: "file"))
    var rejects: String?

    @Flag(help: "Check everything and report what would change; write nothing.")
    var dryRun = false

    @Option(
        help: ArgumentHelp(
            "Store asset files from this folder with their records: DIR/<sha256> for values with a sha256, else the value's localPath (relative to DIR).",
            valueName: "dir"))
    var assets: String?

    @OptionGroup(title: "CSV") var csv: CSVImportOptions

    @OptionGroup(title: "iCalendar") var calendar: CalendarImportOptions

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        if let assets {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: assets, isDirectory: &isDirectory), isDirectory.boolValue
            else {
                throw ValidationError("--assets \(assets): no such folder")
            }
        }
        if rejects != nil && !skipInvalid { throw ValidationError("--rejects needs --skip-invalid") }
        _ = try ArgumentChecks.timeZone(tz)
        if files.filter({ $0 == "-" }).count > 1 { throw ValidationError("standard input ('-') can be read once") }
        _ = try calendar.expandWindow(tz: tz)
    }

    func run() async throws {
        var schemaFile: (path: String, schema: Schema)?
        var inputs: [ImportInput] = []
        for file in files {
            if file != "-", try ImportCommand.isSchemaFile(file) {
                if let first = schemaFile {
                    throw CommandFailure.usage(
                        "two schema files given (\(first.path) and \(file)); import one schema at a time")
                }
                schemaFile = (file, try SchemaCommand.read(file))
                continue
            }
            let input = ImportInput.file(file, format: format?.format)
            try InputFiles.check(file, as: input.format.noun)
            inputs.append(input)
        }
        // A format's own flags apply only when an input is in that format.
        let formats = Set(inputs.map(\.format))
        for group in [csv as FormatOptionGroup, calendar] {
            if let flag = group.givenFlag, formats.isDisjoint(with: type(of: group).formats) {
                throw CommandFailure.usage(
                    "\(flag) applies to \(type(of: group).inputsWord); \(type(of: group).noneWord)")
            }
        }
        let timeZone = try ArgumentChecks.timeZone(tz)
        let archive = calendar.keepsCalendarsWhole
        // Records need a schema to be checked against: say so once, before any file is made.
        if schemaFile == nil && !allowNewFields && !archive && !inputs.isEmpty
            && !StoreOptions.exists(storeOptions.path, wait: storeOptions.wait)
        {
            throw OperationError.noSchema(store: storeOptions.path, storeExists: false)
        }
        // A first load into a new store builds it aside (a dry run's never appears).
        let store = try storeOptions.open(create: true, buildAside: true)
        var settings = FormatSettings()
        settings[JSONReadSettings.self] = JSONReadSettings(style: style.valueStyle)
        settings[CSVReadSettings.self] = try csv.settings()
        if formats.contains(where: { $0.kind == .calendar }) {
            settings[CalendarReadSettings.self] = try calendar.settings(tz: tz) {
                try CalendarMappingChoice.resolve(
                    calendar.mapping, store: store, schema: schemaFile?.schema ?? store.loadSchema(),
                    quiet: storeOptions.quiet)
            }
        }
        var options = ImportOptions(
            mode: mode, allowNewFields: allowNewFields, skipInvalid: skipInvalid, dryRun: dryRun)
        options.assetDirectory = assets
        let request = ImportRequest(
            inputs: inputs, schema: schemaFile?.schema, options: options, defaultRecordType: recordType,
            defaultZone: ZoneID(
                scope: scope ?? .private, zoneName: zone ?? ZoneID.defaultZoneName,
                ownerRecordName: owner ?? ZoneID.defaultOwnerName), timeZone: timeZone,
            settings: settings, strict: calendar.strict,
            rejects: try rejects.map { RejectsWriter(output: try OutputFile(path: $0), words: CommandLineWords.words) })
        let progress = ProgressLine(dryRun ? "checking" : "importing", quiet: storeOptions.quiet)
        let summary: ImportSummary
        do {
            summary = try Imports.run(request, into: store, progress: progress.handler)
            progress.finish()
        } catch {
            progress.finish()
            throw error
        }
        if !storeOptions.quiet {
            for input in inputs
            where input.input.name != "-"
                && ((try? FileManager.default.attributesOfItem(atPath: input.input.name)[.size] as? NSNumber)?
                    .int64Value ?? -1) == 0
            {
                Console.error("note: \(input.input.name) is empty: it holds no records")
            }
            Console.error(
                ImportCommand.report(
                    summary, files: inputs.count, seconds: progress.elapsed, rejects: rejects,
                    filled: calendar.fixedFields,
                    schemaFile: schemaFile?.path))
        }
    }

    static func isSchemaFile(_ path: String) throws -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        let head = (try? handle.read(upToCount: 4096)) ?? Data()
        return SchemaParser.looksLikeSchema(String(decoding: head, as: UTF8.self))
    }

    static func report(
        _ summary: ImportSummary, files: Int, seconds: Double, rejects: String?, filled: [String] = [],
        schemaFile: String? = nil
    ) -> String {
        var lines: [String] = []
        for note in summary.notes { lines.append("note: " + note.commandLine) }
        // --set fills new records; a record the store holds with another value keeps its own.
        for (key, count) in summary.keptOwnValues.sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: ".", maxSplits: 1).map(String.init)
            let given = filled.last { $0.hasPrefix(parts[1] + "=") } ?? parts[1]
            lines.append(
                "note: --set \(given) fills new records only: \(Console.count(count)) \(parts[0]) record\(count == 1 ? "" : "s") already in the store with another \(parts[1]) kept \(count == 1 ? "its" : "their") own"
            )
        }
        if !summary.schemaChanges.isEmpty {
            lines.append("schema \(summary.dryRun ? "would change" : "changed"):")
            lines += summary.schemaChanges.map { "  " + $0 }
        }
        let totals = summary.totals
        let rows =
            summary.counts.keys.sorted().map { type -> [String] in
                let c = summary.counts[type]!
                return [
                    type, Console.count(c.inserted), Console.count(c.updated), Console.count(c.unchanged),
                    Console.count(c.deleted), Console.count(c.rejected),
                ]
            } + [
                [
                    "total", Console.count(totals.inserted), Console.count(totals.updated),
                    Console.count(totals.unchanged), Console.count(totals.deleted), Console.count(totals.rejected),
                ]
            ]
        let rate = seconds > 0 ? " (\(Console.count(Int(Double(totals.total) / seconds)))/s)" : ""
        // The headline counts what went in; rejected records are said apart.
        let accepted = totals.total - totals.rejected
        let rejectedPart = totals.rejected > 0 ? "; \(Console.count(totals.rejected)) rejected" : ""
        let verb =
            summary.dryRun
            ? "checked \(Console.count(totals.total)) records"
            : "imported \(Console.count(accepted)) record\(accepted == 1 ? "" : "s")"
        let schemaPart = schemaFile.map { ", and the schema from \($0)," } ?? ""
        lines.append(
            "\(verb) from \(files) file\(files == 1 ? "" : "s")\(schemaPart) in \(Console.seconds(seconds))\(rate)\(rejectedPart)"
        )
        if totals.total > 0 {
            let header =
                summary.dryRun
                ? ["type", "would insert", "would update", "unchanged", "would delete", "rejected"]
                : ["type", "inserted", "updated", "unchanged", "deleted", "rejected"]
            lines.append(Console.table(header, rows, numeric: [1, 2, 3, 4, 5]))
        }
        if totals.rejected > 0 {
            for issue in summary.issues.prefix(5) { lines.append("rejected: \(issue.commandLine)") }
            if summary.issues.count > 5 { lines.append("… and \(summary.issues.count - 5) more") }
            if let rejects { lines.append("rejected records are in \(rejects)") }
        }
        if summary.assets > 0 {
            lines.append(
                "\(summary.dryRun ? "would store" : "stored") \(Console.count(summary.assets)) asset file\(summary.assets == 1 ? "" : "s")"
            )
        }
        if summary.dryRun {
            lines.append("dry run: nothing was written")
        } else if let token = summary.token {
            lines.append("change token: \(token)")
        }
        return lines.joined(separator: "\n")
    }
}
