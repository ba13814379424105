import ArgumentParser
import CKPort
import Foundation
import Records
import SQLiteStore
import StoreCore

struct CopyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy",
        abstract: "Copy one store into another: SQLite to PostgreSQL, PostgreSQL to SQLite, or alike.",
        discussion: """
            The schema, every record with its system fields and change tag, the asset files the \
            records name, the migration history and the sync tokens go from --from into --to, \
            streamed (no bundle between them) and written in one transaction on --to: a copy that \
            fails leaves --to as it was. --from is read in one consistent state while others \
            keep writing to it. --to is created when it does not exist.

              ckport copy --from family.sqlite \\
                  --to 'postgresql://ckport@db.example:5432/mirror?schema=family'
              ckport copy --from 'postgresql://ckport@db.example/mirror?schema=family' \\
                  --to family.sqlite
              ckport copy --from family.sqlite --to family-1.sqlite \\
                  --zone family-1-zone --type Event

            Exports of the two stores afterwards are byte-identical. A --to that already holds \
            records takes the copied ones by --mode (upsert by default, as import).
            """
    )

    @Option(
        help: ArgumentHelp(
            "The store to read: a SQLite file, or postgresql://USER@HOST:PORT/DB?schema=NAME.", valueName: "path-or-url"
        ))
    var from: String

    @Option(
        help: ArgumentHelp(
            "The store to write (created when missing): a SQLite file, or a postgresql:// URL.",
            valueName: "path-or-url"))
    var to: String

    @Option(help: "How copied records combine with records of the same name --to already holds.")
    var mode: WriteMode = .upsert

    @Option(
        name: .customLong("type"),
        help: ArgumentHelp("Copy only this record type; repeat for several.", valueName: "type"))
    var recordTypes: [String] = []

    @Option(help: ArgumentHelp("Copy only zones with this name.", valueName: "name"))
    var zone: String?

    @Flag(help: "Read and check everything, then leave --to as it was.")
    var dryRun = false

    @Flag(name: [.short, .long], help: "No progress and no summary on standard error (errors are still reported).")
    var quiet = false

    @Option(
        help: ArgumentHelp(
            "How long to wait while another ckport writes to a SQLite store, or for a lock on a PostgreSQL store, in seconds.",
            valueName: "seconds"))
    var wait: Double = RecordStore.defaultWaitSeconds

    func validate() throws {
        guard from != to else { throw ValidationError("--from and --to name the same store") }
        guard wait >= 0, wait.isFinite else { throw ValidationError("--wait takes a number of seconds, 0 or more") }
    }

    func run() async throws {
        let started = Date()
        let source = try StoreOptions.open(from, create: false, wait: wait, quiet: quiet)
        let target = try StoreOptions.open(to, create: true, wait: wait, quiet: quiet)
        let progress = ProgressLine("copying", quiet: quiet)
        let summary = try Copies.run(
            from: source, to: target,
            options: CopyOptions(
                mode: mode, query: RecordQuery(recordTypes: recordTypes, zoneName: zone), dryRun: dryRun),
            progress: progress.handler)
        progress.finish()
        guard !quiet else { return }
        let totals = summary.totals
        let assets = summary.assets > 0 ? " and \(Console.count(summary.assets)) asset files" : ""
        let verb = dryRun ? "would copy" : "copied"
        Console.error(
            "\(verb) \(Console.count(totals.inserted + totals.updated)) records\(assets) (\(Console.count(totals.unchanged)) unchanged) from \(from) (\(StoreOptions.backend(from))) into \(to) (\(StoreOptions.backend(to))) in \(Console.seconds(Date().timeIntervalSince(started)))"
        )
        if let token = summary.token, !dryRun { Console.error("change token of \(to): \(token)") }
    }
}
