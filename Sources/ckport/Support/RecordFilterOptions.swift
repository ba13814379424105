import ArgumentParser
import Records
import SQLiteStore
import StoreCore

/// The options that pick records — by type, scope, zone and a CloudKit predicate — for the
/// commands that read a selection of the store (export, backup).
struct RecordFilterOptions: ParsableArguments {
    @Option(
        name: .customLong("type"),
        help: ArgumentHelp("Only this record type; repeat for several. Default: all.", valueName: "type"))
    var recordTypes: [String] = []

    @Option(help: "Only this database scope: private, shared or public.")
    var scope: DatabaseScope?

    @Option(help: ArgumentHelp("Only zones with this name.", valueName: "name"))
    var zone: String?

    @Option(
        name: .customLong("where"),
        help: ArgumentHelp(
            "A CloudKit predicate, e.g. \"status == 'next' AND dueDate < 2026-02-01\".", valueName: "predicate"))
    var predicate: String?

    /// The query these options select, with --where parsed.
    func query() throws -> RecordQuery {
        var query = RecordQuery(recordTypes: recordTypes, scope: scope, zoneName: zone)
        if let predicate {
            do {
                query.predicate = try RecordPredicate.parse(predicate)
                query.predicateText = predicate
            } catch {
                throw CommandFailure.invalid("--where \"\(predicate)\"\n  at column \(error.column): \(error.message)")
            }
        }
        return query
    }
}
