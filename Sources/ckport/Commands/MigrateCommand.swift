import ArgumentParser
import CKPort
import Formats
import Foundation
import Migrations
import Records
import SQLiteStore
import StoreCore

struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Rehearse, apply and track schema migrations.",
        discussion: """
            A migration set is a folder of NNNN_description.yaml files, each with a version, a \
            description and steps (addField, renameField, changeType, removeField, \
            migrateRecordType, setField, deleteRecords). The store remembers which versions it \
            has had, with each file's SHA-256.

              ckport migrate status --dir migrations/notes
              ckport migrate plan --dir migrations/notes --limit 5
              ckport migrate apply --dir migrations/notes
              ckport migrate lint --dir migrations/notes
            """,
        subcommands: [Status.self, Plan.self, Apply.self, Lint.self]
    )

    struct SetOptions: ParsableArguments {
        @Option(help: ArgumentHelp("The folder of migration files.", valueName: "dir"))
        var dir: String

        func load() throws -> MigrationSet { try SchemaMigrations.load(dir) }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the applied migrations and the pending ones.",
            discussion: """
                Applied migrations come from the store's history (version, file, SHA-256, when, how \
                long, records changed); pending ones from the folder. An applied file that was \
                edited, an applied file that is gone, or a new file numbered below an applied one is \
                reported, and the command exits 2.

                  ckport migrate status --dir migrations/notes
                """
        )

        @OptionGroup var set: SetOptions
        @Flag(help: "Print the status as JSON.")
        var json = false
        @OptionGroup var storeOptions: StoreOptions

        func run() async throws {
            let set = try self.set.load()
            let store = try storeOptions.open(create: false)
            let status = try SchemaMigrations.status(set, in: store)
            if json {
                var out = JSONWriter()
                out.raw("{\"set\":")
                out.string(status.set)
                out.raw(",\"version\":")
                out.int(Int64(status.currentVersion))
                out.raw(",\"latest\":")
                out.int(Int64(set.latestVersion))
                out.raw(",\"applied\":[")
                for (index, entry) in status.applied.enumerated() {
                    if index > 0 { out.raw(",") }
                    out.raw("{\"version\":")
                    out.int(Int64(entry.version))
                    out.raw(",\"file\":")
                    out.string(entry.file)
                    out.raw(",\"checksum\":")
                    out.string(entry.checksum)
                    out.raw(",\"appliedAt\":")
                    out.string(ISO8601.format(milliseconds: entry.appliedAt))
                    out.raw(",\"durationMs\":")
                    out.int(entry.durationMilliseconds)
                    out.raw(",\"recordsChanged\":")
                    out.int(Int64(entry.recordsChanged))
                    out.raw("}")
                }
                out.raw("],\"pending\":[")
                for (index, migration) in status.pending.enumerated() {
                    if index > 0 { out.raw(",") }
                    out.raw("{\"version\":")
                    out.int(Int64(migration.version))
                    out.raw(",\"file\":")
                    out.string((migration.file as NSString).lastPathComponent)
                    out.raw(",\"description\":")
                    out.string(migration.description)
                    out.raw("}")
                }
                out.raw("],\"problems\":[")
                for (index, problem) in status.problems.enumerated() {
                    if index > 0 { out.raw(",") }
                    out.string(problem.commandLine)
                }
                out.raw("]}")
                print(out.text)
            } else {
                print(
                    "set \(set.name) (\(set.directory)): the store is at version \(status.currentVersion) of \(set.latestVersion)"
                )
                if !status.applied.isEmpty {
                    print("")
                    print(
                        Console.table(
                            ["applied", "file", "sha-256", "at", "took", "changed"],
                            status.applied.map { entry in
                                [
                                    String(entry.version), entry.file, String(entry.checksum.prefix(12)),
                                    ISO8601.format(milliseconds: entry.appliedAt),
                                    Console.seconds(Double(entry.durationMilliseconds) / 1000),
                                    Console.count(entry.recordsChanged),
                                ]
                            }, numeric: [0, 5]))
                }
                if !status.pending.isEmpty {
                    print("")
                    print(
                        Console.table(
                            ["pending", "file", "description"],
                            status.pending.map { migration in
                                [
                                    String(migration.version), (migration.file as NSString).lastPathComponent,
                                    migration.description,
                                ]
                            }, numeric: [0]))
                }
            }
            if !status.problems.isEmpty {
                throw CommandFailure.invalid(
                    status.problems.map { "problem: " + $0.commandLine }.joined(separator: "\n"))
            }
        }
    }

    struct Plan: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show what the pending migrations would do, record by record, and write nothing.",
            discussion: """
                For each pending migration and record type: records scanned, that would change, \
                unchanged, that would fail, and records from the future (a _schemaVersion above \
                every migration the folder knows, left alone); then each changed record's fields \
                before and after. The store file is not written at all.

                  ckport migrate plan --dir migrations/notes --limit 3
                  ckport migrate plan --dir migrations/notes --format json | jq '.[].counts'
                """
        )

        @OptionGroup var set: SetOptions
        @Option(help: ArgumentHelp("Plan up to this version (default: the newest).", valueName: "version"))
        var to: Int?
        @Option(help: "How many changed records to show per migration.")
        var limit = 10
        @Option(help: "text or json.")
        var format: ReportFormat = .text
        @Flag(help: "Plan changes to append-only types too.")
        var force = false
        @OptionGroup var storeOptions: StoreOptions

        func run() async throws {
            let set = try self.set.load()
            let store = try storeOptions.open(create: false)
            let progress = ProgressLine("planning", quiet: storeOptions.quiet)
            let started = Date()
            let reports = try SchemaMigrations.plan(
                set, in: store, options: MigrationRunOptions(target: to, force: force, diffLimit: limit),
                progress: progress.handler)
            progress.finish()
            MigrateCommand.show(reports, format: format, dryRun: true)
            if format == .text && !storeOptions.quiet {
                let scanned = reports.reduce(0) { $0 + $1.totals.scanned }
                Console.error(
                    "planned \(reports.count) migration\(reports.count == 1 ? "" : "s") over \(Console.count(scanned)) records in \(Console.seconds(Date().timeIntervalSince(started))); nothing was written"
                )
            }
            if reports.contains(where: { $0.totals.failed > 0 }) {
                throw OperationError.recordsWouldFail
            }
        }
    }

    struct Apply: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply the pending migrations, each in one transaction.",
            discussion: """
                A backup bundle of the store is written first, beside it (--no-backup skips it). \
                Each migration commits as a whole or not at all: a record that fails names its \
                field and step, and leaves the store as the migrations before it left it. \
                Re-running is a no-op. An applied file that was edited is refused (--repair accepts \
                the edit and records its new SHA-256); so is a gap or a version out of order.

                  ckport migrate apply --dir migrations/notes
                  ckport migrate apply --dir migrations/notes --to 2
                  ckport migrate apply --dir migrations/notes --dry-run     # the same as plan
                """
        )

        @OptionGroup var set: SetOptions
        @Option(help: ArgumentHelp("Apply up to this version (default: the newest).", valueName: "version"))
        var to: Int?
        @Flag(help: "Only plan: report what would change and write nothing.")
        var dryRun = false
        @Flag(help: "Accept applied files whose contents changed, recording their new SHA-256.")
        var repair = false
        @Flag(help: "Change records of append-only types too.")
        var force = false
        @Flag(help: "Do not write a backup bundle first.")
        var noBackup = false
        @Option(help: ArgumentHelp("Where the backup bundle goes (default: beside the store).", valueName: "file"))
        var backup: String?
        @Option(help: "How many changed records to show with --dry-run.")
        var limit = 10
        @OptionGroup var storeOptions: StoreOptions

        func run() async throws {
            let set = try self.set.load()
            let store = try storeOptions.open(create: false)
            let options = MigrationRunOptions(target: to, force: force, diffLimit: limit)
            if dryRun {
                let reports = try SchemaMigrations.plan(set, in: store, options: options)
                MigrateCommand.show(reports, format: .text, dryRun: true)
                Console.error("dry run: nothing was written")
                return
            }
            let progress = ProgressLine("migrating", quiet: storeOptions.quiet)
            let quiet = storeOptions.quiet
            let result: MigrationApplyResult
            do {
                result = try SchemaMigrations.apply(
                    set, to: store, options: options, repair: repair,
                    backup: noBackup ? .none : backup.map { .at($0) } ?? .besideStore,
                    progress: progress.handler
                ) { path, summary in
                    progress.finish()
                    if !quiet {
                        Console.error(
                            "backed up \(Console.count(summary.manifest.recordCount)) records to \(path) (to go back: 'ckport restore \(path) --store before.sqlite')"
                        )
                    }
                }
                progress.finish()
            } catch {
                progress.finish()
                throw error
            }
            guard !storeOptions.quiet else { return }
            if result.reports.isEmpty && result.repaired.isEmpty && result.before.problems.isEmpty {
                Console.error(
                    "nothing to apply: the store is at version \(result.before.currentVersion), the newest in \(set.directory)"
                )
                return
            }
            for repair in result.repaired {
                Console.error(
                    "repaired: \(repair.file) is accepted as edited; its SHA-256 is now \(repair.newChecksum.prefix(12))… (was \(repair.oldChecksum.prefix(12))…)"
                )
            }
            for report in result.reports {
                let totals = report.totals
                let future =
                    totals.future > 0
                    ? ", \(Console.count(totals.future)) from the future left alone (e.g. \(report.futureExamples.joined(separator: ", ")))"
                    : ""
                Console.error(
                    "applied \(report.version) \(report.description): \(Console.count(totals.changed)) of \(Console.count(totals.scanned)) records changed\(future) in \(Console.seconds(Double(report.durationMilliseconds) / 1000))"
                )
            }
            Console.error("the store is at version \(result.after.currentVersion) of \(set.latestVersion)")
        }
    }

    struct Lint: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Flag steps that CloudKit's production schema would refuse, with the safe way.",
            discussion: """
                A production schema only ever adds record types and fields: removing a field, \
                changing a field's type in place or renaming one cannot be deployed. Each such step \
                is listed with the change that can. Exits 2 when there is any.

                  ckport migrate lint --dir migrations/notes
                """
        )

        @OptionGroup var set: SetOptions
        @Flag(help: "Print the findings as JSON.")
        var json = false

        func run() async throws {
            let set = try self.set.load()
            let findings = MigrationLint.lint(set)
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                print(String(decoding: try encoder.encode(findings), as: UTF8.self))
            } else if findings.isEmpty {
                print("\(set.directory): every step could deploy to CloudKit's production schema")
            } else {
                for finding in findings { print(finding.description) }
            }
            if !findings.isEmpty {
                throw CommandFailure.invalid(
                    "\(findings.count) step\(findings.count == 1 ? "" : "s") would not deploy to a production schema as written"
                )
            }
        }
    }

    enum ReportFormat: String, ExpressibleByArgument, CaseIterable {
        case text, json
    }

    static func show(_ reports: [MigrationReport], format: ReportFormat, dryRun: Bool) {
        if format == .json {
            var out = JSONWriter()
            out.raw("[")
            for (index, report) in reports.enumerated() {
                if index > 0 { out.raw(",") }
                out.raw("{\"version\":")
                out.int(Int64(report.version))
                out.raw(",\"description\":")
                out.string(report.description)
                out.raw(",\"file\":")
                out.string((report.file as NSString).lastPathComponent)
                out.raw(",\"schemaChanges\":[")
                for (i, line) in report.schemaChanges.enumerated() {
                    if i > 0 { out.raw(",") }
                    out.string(line)
                }
                out.raw("],\"counts\":{")
                for (i, (type, c)) in report.counts.sorted(by: { $0.key < $1.key }).enumerated() {
                    if i > 0 { out.raw(",") }
                    out.string(type)
                    out.raw(":{\"scanned\":")
                    out.int(Int64(c.scanned))
                    out.raw(",\"change\":")
                    out.int(Int64(c.changed))
                    out.raw(",\"unchanged\":")
                    out.int(Int64(c.unchanged))
                    out.raw(",\"fail\":")
                    out.int(Int64(c.failed))
                    out.raw(",\"delete\":")
                    out.int(Int64(c.deleted))
                    out.raw(",\"future\":")
                    out.int(Int64(c.future))
                    out.raw("}")
                }
                out.raw("},\"records\":[")
                for (i, diff) in report.diffs.enumerated() {
                    if i > 0 { out.raw(",") }
                    out.raw("{\"recordName\":")
                    out.string(diff.recordName)
                    out.raw(",\"recordType\":")
                    out.string(diff.recordType)
                    out.raw(",\"zoneName\":")
                    out.string(diff.zoneName)
                    out.raw(",\"diff\":[")
                    for (j, line) in diff.lines.enumerated() {
                        if j > 0 { out.raw(",") }
                        out.string(line)
                    }
                    out.raw("]}")
                }
                out.raw("],\"failures\":[")
                for (i, failure) in report.failures.enumerated() {
                    if i > 0 { out.raw(",") }
                    out.string(failure.commandLine)
                }
                out.raw("],\"future\":[")
                for (i, name) in report.futureExamples.enumerated() {
                    if i > 0 { out.raw(",") }
                    out.string(name)
                }
                out.raw("]}")
            }
            out.raw("]")
            print(out.text)
            return
        }
        if reports.isEmpty {
            print("nothing to do: no pending migrations")
            return
        }
        for report in reports {
            print("migration \(report.version): \(report.description) (\((report.file as NSString).lastPathComponent))")
            if !report.schemaChanges.isEmpty {
                print("  schema:")
                for line in report.schemaChanges { print("    " + line) }
            }
            let rows = report.counts.sorted(by: { $0.key < $1.key }).map { type, c in
                [
                    type, Console.count(c.scanned), Console.count(c.changed), Console.count(c.unchanged),
                    Console.count(c.failed), Console.count(c.future),
                ]
            }
            if !rows.isEmpty {
                let header =
                    dryRun
                    ? ["type", "scanned", "would change", "unchanged", "would fail", "future"]
                    : ["type", "scanned", "changed", "unchanged", "failed", "future"]
                print(
                    Console.table(header, rows, numeric: [1, 2, 3, 4, 5]).split(separator: "\n").map { "  " + $0 }
                        .joined(separator: "\n"))
            }
            for diff in report.diffs {
                print("  \(diff.recordType) \(diff.recordName) (\(diff.zoneName))")
                for line in diff.lines { print("    " + line) }
            }
            let changed = report.totals.changed
            if changed > report.diffs.count && !report.diffs.isEmpty {
                print("  … and \(Console.count(changed - report.diffs.count)) more changed records")
            }
            for failure in report.failures { print("  would fail: \(failure.commandLine)") }
            if report.totals.future > 0 {
                print(
                    "  left alone: \(Console.count(report.totals.future)) records from the future, e.g. \(report.futureExamples.joined(separator: ", "))"
                )
            }
            print("")
        }
    }
}
