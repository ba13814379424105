import ArgumentParser
import CKPort
import Formats
import Foundation
import Records
import SampleApps

extension SampleApp: ExpressibleByArgument {}

struct GenerateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate",
        abstract: "Generate realistic records for a sample app, for tests and benchmarks.",
        discussion: """
            The same --seed gives the same records, byte for byte, on every machine; memory stays \
            flat at any --records.

              ckport generate --app family-todo --records 1000000 -o big.jsonl
              ckport generate --app family-calendar --schema -o schema.ckdb
              ckport generate --app family-calendar --mapping -o calendar.yaml
              ckport generate --app notes --records 50 --style plain

            Apps: \(SampleApp.allCases.map { "\($0.rawValue) (\($0.summary))" }.joined(separator: "; ")).
            """
    )

    @Option(help: "The sample app.")
    var app: SampleApp

    @Option(help: "How many records to generate.")
    var records: Int = 1000

    @Option(help: "Seed for the generator.")
    var seed: UInt64 = 1

    @Flag(help: "Write the app's schema instead of records.")
    var schema = false

    @Flag(
        help:
            "Write the app's iCalendar mapping (family-calendar, family-todo, relationship-checkin) instead of records."
    )
    var mapping = false

    @Option(help: "canonical or plain.")
    var style: ValueStyle = .canonical

    @Option(help: "json or jsonl/ndjson. Default: from -o's extension, else jsonl.")
    var format: DataFormat?

    @Option(
        name: [.short, .customLong("output")],
        help: ArgumentHelp("Where to write ('-' for standard output).", valueName: "file"))
    var output: String = "-"

    @Flag(name: [.short, .long], help: "No progress on standard error.")
    var quiet = false

    func validate() throws {
        if records < 0 { throw ValidationError("--records cannot be negative") }
        if schema && mapping { throw ValidationError("--schema and --mapping each write a whole file; pass one") }
        // Generated records are JSON; never write something other than what was asked for.
        let chosen = format ?? (schema || mapping ? nil : DataFormat.infer(output))
        if let chosen, chosen != .json && chosen != .jsonl {
            let given = format != nil ? "--format \(chosen.rawValue)" : "-o \(output)"
            throw ValidationError(
                "generate writes JSON or JSON Lines, not \(chosen.rawValue) (\(given)); generate JSON Lines and 'ckport import' them, then 'ckport export' the format you need"
            )
        }
        if mapping && app.calendarMappingText == nil {
            throw ValidationError(
                "\(app.rawValue) has no iCalendar mapping (apps with one: \(SampleApp.allCases.filter { $0.calendarMappingText != nil }.map(\.rawValue).joined(separator: ", ")))"
            )
        }
    }

    func run() async throws {
        let file = try OutputFile(path: output)
        if schema || mapping {
            try file.write(schema ? app.schemaText : app.calendarMappingText!)
            try file.commit()
            return
        }
        let chosen = (format ?? DataFormat.infer(output) ?? .jsonl).format
        var settings = FormatSettings()
        settings[JSONWriteSettings.self] = JSONWriteSettings(style: style)
        let writer = BackgroundSink(
            try chosen.makeWriter!(file, RecordWriteContext(schema: app.schema, settings: settings)))
        let progress = ProgressLine("generating", quiet: quiet)
        try Exports.stream(into: writer, progress: progress.handler, total: records) { emit in
            try app.generate(records: records, seed: seed, emit: emit)
        }
        progress.finish()
    }
}
