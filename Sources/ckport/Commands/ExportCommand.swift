import ArgumentParser
import Foundation
import Formats
import Records
import Store

struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export records from the store as JSON or JSON Lines.",
        discussion: """
        Records come in a fixed order (scope, zone, record type, record name), so two exports \
        of one store are byte-identical. Output goes to standard output unless -o names a file; \
        a file is written under a temporary name and moved into place only when complete.

          ckport export -o backup.jsonl
          ckport export --type Event --where "familyID == 'family-1' AND startDate >= 2026-03-01 AND isDeleted == false" --sort startDate
          ckport export --type Task --style plain | jq -r '.title'
          ckport export --since ck1-4f0c2a9e81b3-1520 -o changes.jsonl

        --where takes CloudKit's predicate subset: == != < <= > >=, IN ['a','b'], \
        BEGINSWITH 'x', CONTAINS (list membership), joined by AND. Values are 'text', numbers, \
        dates (2026-03-01 or 2026-03-01T09:00:00Z) and true/false (INT64 1/0). References \
        compare by record name. recordName, ___createTime and ___modTime can be queried too.

        --since TOKEN exports what changed after TOKEN, deleted records as \
        {"recordName": …, "deleted": true}, and prints the token to pass next time.
        """
    )

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("Where to write ('-' for standard output).", valueName: "file"))
    var output: String = "-"

    @Option(help: "json (a {\"records\": [ … ]} document) or jsonl/ndjson (one record per line). Default: from -o's extension, else jsonl.")
    var format: DataFormat?

    @Option(help: "canonical (CloudKit Web Services' record shape) or plain (flat objects).")
    var style: ValueStyle = .canonical

    @Option(name: .customLong("type"), help: ArgumentHelp("Record type to export; repeat for several. Default: all.", valueName: "type"))
    var recordTypes: [String] = []

    @Option(help: "Only this database scope: private, shared or public.")
    var scope: DatabaseScope?

    @Option(help: ArgumentHelp("Only zones with this name.", valueName: "name"))
    var zone: String?

    @Option(name: .customLong("where"), help: ArgumentHelp("A CloudKit predicate, e.g. \"status == 'next' AND dueDate < 2026-02-01\".", valueName: "predicate"))
    var predicate: String?

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

    @Flag(help: "Print the SQL and SQLite's query plan (which indexes it uses) instead of exporting.")
    var explain = false

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        if since != nil && (predicate != nil || sort != nil) { throw ValidationError("--since exports changes in change order; it does not combine with --where or --sort") }
        if (predicate != nil || sort != nil) && recordTypes.isEmpty { throw ValidationError("--where and --sort need --type") }
        if let limit, limit < 0 { throw ValidationError("--limit cannot be negative") }
        if since != nil && limit != nil { throw ValidationError("--since exports every change; it does not combine with --limit") }
        if format == nil && DataFormat.infer(output) == nil, let dot = output.lastIndex(of: "."), output != "-" {
            let ext = output[output.index(after: dot)...].lowercased()
            if ["csv", "tsv", "ics", "ckbundle", "gz"].contains(ext) {
                throw ValidationError("-o \(output): ckport writes JSON (.json) and JSON Lines (.jsonl, .ndjson) here; .\(ext) output is a separate feature not in this version")
            }
        }
    }

    func run() throws {
        let store = try storeOptions.open(create: false)
        var query = RecordQuery(recordTypes: recordTypes, scope: scope, zoneName: zone, sortField: sort, descending: desc, limit: limit)
        if let predicate {
            do {
                query.predicate = try RecordPredicate.parse(predicate)
                query.predicateText = predicate
            } catch {
                throw CommandFailure.invalid("--where \"\(predicate)\"\n  at column \(error.column): \(error.message)")
            }
        }
        if explain {
            for (sql, plan) in try store.read({ try $0.queryPlan(query) }) {
                print(sql)
                for line in plan { print("  " + line) }
            }
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
        let newToken = try store.read { session in
            // The count is one quick pass over the primary keys; it gives the progress line an ETA.
            let total = progress.isEnabled && token == nil ? try session.count(query) : nil
            return try stream(into: writer, progress: progress, total: total) { emit in
                if let token {
                    try session.forEachChange(since: token, recordTypes: recordTypes, scope: scope, zoneName: zone, emit)
                } else {
                    try session.forEach(query, emit)
                }
                return session.currentToken
            }
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
        }
    }
}

extension ValueStyle: ExpressibleByArgument {}
