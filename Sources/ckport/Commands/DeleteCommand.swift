import ArgumentParser
import CKPort
import Foundation
import Records
import SQLiteStore
import StoreCore

struct DeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete records, honouring reference actions.",
        discussion: """
            Deleting a record also deletes, transitively, every record that points at it with a \
            DELETE_SELF reference, and is refused — with nothing deleted — while a VALIDATE \
            reference from a record that stays points at it. Deleted records leave tombstones, so \
            'ckport export --since' reports them.

            Shares follow CloudKit: deleting a share's root record deletes the share too, and \
            deleting a share (a cloudkit.share record) leaves its records, whose root then no \
            longer names it. A parent link never deletes anything: the records under a deleted \
            record stay (unless a DELETE_SELF reference takes them).

              # the family, its members and events, their participants…
              ckport delete family-1
              ckport delete --type Event --where "isDeleted == true"
              ckport delete --type Task --where "status == 'done'" --dry-run
            """
    )

    @Argument(help: ArgumentHelp("Record names to delete.", valueName: "recordName"))
    var recordNames: [String] = []

    @Option(
        name: .customLong("type"),
        help: ArgumentHelp("Delete records of this type matching --where.", valueName: "type"))
    var recordType: String?

    @Option(
        name: .customLong("where"),
        help: ArgumentHelp("A CloudKit predicate selecting the records to delete.", valueName: "predicate"))
    var predicate: String?

    @Option(help: ArgumentHelp("The zone of the named records, when a name is in several zones.", valueName: "name"))
    var zone: String?

    @Option(help: "The scope of the named records or of --where: private, shared or public.")
    var scope: DatabaseScope?

    @Flag(help: "Show what would be deleted; delete nothing.")
    var dryRun = false

    @Flag(help: "List every deleted record, not only the counts.")
    var verbose = false

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        if recordNames.isEmpty && recordType == nil {
            throw ValidationError("name records to delete, or give --type (with --where)")
        }
        if !recordNames.isEmpty && (recordType != nil || predicate != nil) {
            throw ValidationError("give record names or --type/--where, not both")
        }
        if predicate != nil && recordType == nil { throw ValidationError("--where needs --type") }
    }

    func run() async throws {
        let store = try storeOptions.open(create: false)
        var parsed: RecordPredicate?
        if let predicate {
            do { parsed = try RecordPredicate.parse(predicate) } catch {
                throw CommandFailure.invalid("--where \"\(predicate)\"\n  at column \(error.column): \(error.message)")
            }
        }
        let records: [DeletedRecord]
        if let recordType {
            let query = RecordQuery(
                recordTypes: [recordType], scope: scope, zoneName: zone, predicate: parsed, predicateText: predicate)
            records = try Deletes.records(matching: query, in: store, dryRun: dryRun)
        } else {
            records = try Deletes.records(named: recordNames, zone: zone, scope: scope, in: store, dryRun: dryRun)
        }
        if !storeOptions.quiet {
            var counts: [String: Int] = [:]
            for record in records { counts[record.recordType, default: 0] += 1 }
            let verb = dryRun ? "would delete" : "deleted"
            var lines = [
                "\(verb) \(Console.count(records.count)) record\(records.count == 1 ? "" : "s")"
                    + (counts.isEmpty
                        ? "" : ": " + counts.keys.sorted().map { "\(counts[$0]!) \($0)" }.joined(separator: ", "))
            ]
            if verbose {
                for record in records {
                    let why =
                        record.cause.map { cause in
                            record.recordType == Record.shareType && record.field == "share"
                                ? "the share whose root '\(cause.recordName)' is deleted: CloudKit deletes a share with its root"
                                : "cascade: points at '\(cause.recordName)' through \(record.field!) with DELETE_SELF"
                        } ?? "asked for"
                    lines.append("  \(record.recordType) '\(record.id.recordName)' in \(record.id.zone) — \(why)")
                }
            }
            if dryRun { lines.append("dry run: nothing was deleted") }
            Console.error(lines.joined(separator: "\n"))
        }
    }
}
