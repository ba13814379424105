import Foundation
import Records
import StoreCore

/// Counts of what a migration did (or would do) to one record type.
public struct MigrationCounts: Sendable, Hashable, Codable {
    public var scanned = 0
    public var changed = 0
    public var unchanged = 0
    public var failed = 0
    /// Of the changed: records deleted (not kept under their name).
    public var deleted = 0
    /// Records from the future: `_schemaVersion` above every version the set knows.
    public var future = 0
    public init() {}
}

/// One record's change, field by field: `- body: "Buy milk"` / `+ content: "Buy milk"`.
public struct RecordDiff: Sendable, Hashable, Codable {
    public var recordName: String
    public var recordType: String
    public var zoneName: String
    public var lines: [String]
    /// The zone's scope and owner (zones of several owners can share a name).
    public var scope: String?
    public var ownerRecordName: String?
}

/// What one migration did, or would do.
public struct MigrationReport: Sendable {
    public var version: Int
    public var description: String
    public var file: String
    public var counts: [String: MigrationCounts] = [:]
    /// The first records' diffs (up to the limit asked for).
    public var diffs: [RecordDiff] = []
    public var failures: [RecordFailure] = []
    /// A few records from the future, by name.
    public var futureExamples: [String] = []
    public var schemaChanges: [String] = []
    public var durationMilliseconds: Int64 = 0

    public var totals: MigrationCounts {
        counts.values.reduce(into: MigrationCounts()) { total, c in
            total.scanned += c.scanned
            total.changed += c.changed
            total.unchanged += c.unchanged
            total.failed += c.failed
            total.deleted += c.deleted
            total.future += c.future
        }
    }
}

/// Where a store stands with a migration set.
public struct MigrationStatus: Sendable {
    public var set: String
    public var applied: [MigrationHistoryEntry]
    public var pending: [Migration]
    /// What stops the set from being applied: edited files, missing files, versions out of order.
    public var problems: [Message]
    /// The store's version: the newest applied migration's.
    public var currentVersion: Int { applied.last?.version ?? 0 }
}

/// Plans and applies a migration set to a store.
///
/// ```swift
/// let set = try MigrationSet.load(directory: "migrations/notes")
/// let runner = MigrationRunner(store: store, set: set)
/// for report in try runner.plan(diffLimit: 20) { print(report.totals) }
/// try runner.apply()
/// ```
///
/// `plan` only reads: the store file stays byte for byte as it was. `apply` runs each
/// migration in a transaction of its own, so a record that fails leaves the store as the
/// previous migration left it, and records it in the store's history with its file's SHA-256.
public final class MigrationRunner {
    public let store: any RecordStoring
    public let set: MigrationSet
    /// Change records of append-only types anyway.
    public var force = false
    /// Accept applied files whose checksum changed, recording the new checksum.
    public var repair = false
    /// Called with the migration's version and how many records it has read.
    public var progress: ((Int, Int) -> Void)?
    /// Migrate in place when the steps allow it (faster); false always rebuilds the tables.
    public var inPlace = true
    /// How many renamed records' names (old → new, for a migration that gives records new
    /// names) are held in memory; beyond that they go to a temporary file of their own.
    public var renamesHeldInMemory = 100_000

    public init(store: any RecordStoring, set: MigrationSet) {
        self.store = store
        self.set = set
    }

    public func status() throws -> MigrationStatus {
        let history = try store.readSession { try $0.migrationHistory(set: set.name) }
        return status(history)
    }

    func status(_ history: [MigrationHistoryEntry]) -> MigrationStatus {
        var problems: [Message] = []
        let files = Dictionary(set.migrations.map { ($0.version, $0) }, uniquingKeysWith: { a, _ in a })
        for entry in history {
            guard let migration = files[entry.version] else {
                problems.append(
                    "migration \(entry.version) (\(entry.file)) was applied on \(ISO8601.format(milliseconds: entry.appliedAt)) but is not in \(set.directory): put the file back"
                )
                continue
            }
            if migration.checksum != entry.checksum && !repair {
                problems.append(
                    "\(migration.file) was edited after it was applied on \(ISO8601.format(milliseconds: entry.appliedAt)) (SHA-256 \(entry.checksum.prefix(12))… then, \(migration.checksum.prefix(12))… now): undo the edit and write a new migration, \(Wording.repairHistory)"
                )
            }
        }
        let appliedVersions = Set(history.map(\.version))
        let newest = history.map(\.version).max() ?? 0
        for migration in set.migrations where migration.version < newest && !appliedVersions.contains(migration.version)
        {
            problems.append(
                "\(migration.file) (version \(migration.version)) was never applied, but version \(newest) was: migrations run in order, so renumber it to \(String(format: "%04d", set.latestVersion + 1)) or later"
            )
        }
        return MigrationStatus(
            set: set.name, applied: history, pending: set.migrations.filter { $0.version > newest }, problems: problems)
    }

    private func pending(upTo target: Int?, _ status: MigrationStatus) throws -> [Migration] {
        guard status.problems.isEmpty else { throw MigrationError(Message.joined(status.problems, separator: "\n")) }
        if let target {
            guard target >= status.currentVersion else {
                throw MigrationError(
                    "the store is at version \(status.currentVersion); migrating down to \(target) is not something migrations do (restore a backup instead)"
                )
            }
            guard target <= set.latestVersion else {
                throw MigrationError(
                    "there is no version \(target) in \(set.directory) (the newest is \(set.latestVersion))")
            }
            return status.pending.filter { $0.version <= target }
        }
        return status.pending
    }

    /// Names of records that will move to new names, by zone, for repointing references:
    /// found by taking each record of a renaming type through the migration once.
    private func renamedNames(_ compiled: CompiledMigration, _ session: any RecordSession) throws -> NameMap {
        let result = NameMap(memoryLimit: renamesHeldInMemory)
        for type in compiled.renamingTypes.keys.sorted() where session.schema.recordType(named: type) != nil {
            try session.forEach(RecordQuery(recordTypes: [type])) { record in
                guard case .changed(let results) = compiled.migrate(record) else { return }
                for item in results
                where item.recordName != record.recordName
                    && item.fields[CompiledMigration.migratedFromField] == .string(record.recordName)
                {
                    try result.set(record.recordName, to: item.recordName, in: record.zone)
                }
            }
        }
        return result
    }

    /// The same, for a migration that runs after `earlier` ones: each stored record is taken
    /// through those first.
    private func renamedNames(
        _ compiled: CompiledMigration, after earlier: [CompiledMigration], _ session: any RecordSession
    ) throws -> NameMap {
        let result = NameMap(memoryLimit: renamesHeldInMemory)
        guard !compiled.renamingTypes.isEmpty else { return result }
        for type in session.schema.recordTypes.map(\.name).sorted() {
            try session.forEach(RecordQuery(recordTypes: [type])) { record in
                var items = [record]
                for prior in earlier {
                    items = items.flatMap { item -> [Record] in
                        if case .changed(let results) = prior.migrate(item) { return results }
                        return [item]
                    }
                }
                for item in items where compiled.renamingTypes[item.recordType] != nil {
                    guard case .changed(let results) = compiled.migrate(item) else { continue }
                    for moved in results
                    where moved.recordName != item.recordName
                        && moved.fields[CompiledMigration.migratedFromField] == .string(item.recordName)
                    {
                        try result.set(item.recordName, to: moved.recordName, in: item.zone)
                    }
                }
            }
        }
        return result
    }

    /// The types whose records may point at a renamed record: any type, since every record
    /// may name its parent (besides its REFERENCE fields).
    private static func referenceTypes(_ schema: Schema) -> Set<String> {
        Set(schema.recordTypes.map(\.name))
    }

    /// What the pending migrations (up to `target`) would do, record by record, without
    /// writing anything. Each record goes through the migrations in turn, as `apply` would.
    public func plan(to target: Int? = nil, diffLimit: Int = 20) throws -> [MigrationReport] {
        try store.readSession { session in
            let migrations = try pending(upTo: target, status(try session.migrationHistory(set: set.name)))
            var compiled: [CompiledMigration] = []
            var schema = session.schema
            for migration in migrations {
                var next = try CompiledMigration(
                    migration, schema: schema, latestVersion: set.latestVersion, appendOnly: set.appendOnly,
                    force: force)
                // Records that a later migration renames are found as the migrations before it
                // will have left them (one extra pass over the store for such a migration).
                next.renamed =
                    compiled.isEmpty
                    ? try renamedNames(next, session) : try renamedNames(next, after: compiled, session)
                compiled.append(next)
                schema = next.schemaAfter
            }
            var reports = compiled.map { c in
                MigrationReport(
                    version: c.migration.version, description: c.migration.description, file: c.migration.file,
                    schemaChanges: SchemaChange(from: c.schemaBefore, to: c.schemaAfter).summary)
            }
            var readTypes = Set<String>()
            for c in compiled {
                readTypes.formUnion(c.sourceTypes)
                if c.repoints { readTypes.formUnion(MigrationRunner.referenceTypes(c.schemaBefore)) }
            }
            var read = 0
            for type in readTypes.sorted() where session.schema.recordType(named: type) != nil {
                try session.forEach(RecordQuery(recordTypes: [type])) { record in
                    read += 1
                    if read % 8192 == 0 { progress?(compiled.first?.migration.version ?? 0, read) }
                    var inputs = [record]
                    for (index, c) in compiled.enumerated() {
                        var outputs: [Record] = []
                        for item in inputs {
                            guard c.sourceTypes.contains(item.recordType) || c.repoints else {
                                outputs.append(item)
                                continue
                            }
                            let outcome = c.migrate(item)
                            var counts = reports[index].counts[item.recordType, default: MigrationCounts()]
                            counts.scanned += 1
                            switch outcome {
                            case .unchanged:
                                counts.unchanged += 1
                                outputs.append(item)
                            case .future:
                                counts.future += 1
                                if reports[index].futureExamples.count < 5 {
                                    reports[index].futureExamples.append(item.recordName)
                                }
                                outputs.append(item)
                            case .changed(let results):
                                counts.changed += 1
                                if !results.contains(where: { $0.recordName == item.recordName }) {
                                    counts.deleted += 1
                                }
                                if reports[index].diffs.count < diffLimit {
                                    reports[index].diffs.append(MigrationRunner.diff(item, results))
                                }
                                outputs += results
                            case .failed(let failure):
                                counts.failed += 1
                                if reports[index].failures.count < max(diffLimit, 20) {
                                    reports[index].failures.append(failure)
                                }
                                outputs.append(item)
                            }
                            reports[index].counts[item.recordType] = counts
                        }
                        inputs = outputs
                    }
                }
            }
            return reports
        }
    }

    /// Applies the pending migrations (up to `target`), each in a transaction of its own.
    /// A record that fails stops the migration it is in: that migration writes nothing, the
    /// ones before it stay applied, and the error names the record, the field and the step.
    ///
    /// - Parameter beforeFirst: called inside the first pending migration's transaction, once
    ///   that migration has been checked against the schema and before it changes anything —
    ///   the place for a safety backup: it sees exactly the state the migration starts from,
    ///   and no other process can write in between.
    @discardableResult
    public func apply(to target: Int? = nil, beforeFirst: ((any RecordSession) throws -> Void)? = nil) throws
        -> [MigrationReport]
    {
        let history = try store.readSession { try $0.migrationHistory(set: set.name) }
        let current = status(history)
        let migrations = try pending(upTo: target, current)
        if repair {
            try store.writeSession { session in
                for var entry in history {
                    guard let migration = set.migrations.first(where: { $0.version == entry.version }),
                        migration.checksum != entry.checksum
                    else { continue }
                    entry.checksum = migration.checksum
                    try session.recordMigration(entry)
                }
            }
        }
        var reports: [MigrationReport] = []
        for migration in migrations {
            let started = Date()
            let report = try store.writeSession(schema: .changes) { session -> MigrationReport in
                var compiled = try CompiledMigration(
                    migration, schema: session.schema, latestVersion: set.latestVersion, appendOnly: set.appendOnly,
                    force: force)
                compiled.renamed = try renamedNames(compiled, session)
                if migration.version == migrations.first?.version { try beforeFirst?(session) }
                var report = MigrationReport(
                    version: migration.version, description: migration.description, file: migration.file,
                    schemaChanges: SchemaChange(from: compiled.schemaBefore, to: compiled.schemaAfter).summary)
                var types = compiled.sourceTypes.union(compiled.touchedTypes)
                if compiled.repoints { types.formUnion(MigrationRunner.referenceTypes(compiled.schemaBefore)) }
                var read = 0
                // The counts of the type met last, kept here until another type comes (records
                // come a type at a time: a lookup by name for each would cost more than counting).
                var tally: (type: String, counts: MigrationCounts)?
                func settleTally() {
                    if let tally { report.counts[tally.type] = tally.counts }
                    tally = nil
                }
                var lastType: String?
                var readsLastType = false
                enum Counted {
                    case unchanged, future
                    case changed(deleted: Bool)
                }
                /// Counts one record of `type` the migration read.
                func count(_ type: String, _ recordName: String, _ counted: Counted) {
                    if tally?.type != type {
                        settleTally()
                        tally = (type, report.counts[type, default: MigrationCounts()])
                    }
                    var counts = tally!.counts
                    counts.scanned += 1
                    switch counted {
                    case .unchanged:
                        counts.unchanged += 1
                    case .future:
                        counts.future += 1
                        if report.futureExamples.count < 5 { report.futureExamples.append(recordName) }
                    case .changed(let deleted):
                        counts.changed += 1
                        if deleted { counts.deleted += 1 }
                    }
                    tally!.counts = counts
                }
                func tick() {
                    read += 1
                    if read % 8192 == 0 { progress?(migration.version, read) }
                }
                func transform(_ record: Record) throws -> [Record]? {
                    tick()
                    // Records come a type at a time: whether the migration reads a type is
                    // asked when the type changes, not for every record.
                    if record.recordType != lastType {
                        lastType = record.recordType
                        readsLastType = compiled.sourceTypes.contains(record.recordType) || compiled.repoints
                    }
                    guard readsLastType else { return nil }
                    switch compiled.migrate(record) {
                    case .unchanged:
                        count(record.recordType, record.recordName, .unchanged)
                        return nil
                    case .future:
                        count(record.recordType, record.recordName, .future)
                        return nil
                    case .changed(let results):
                        count(
                            record.recordType, record.recordName,
                            .changed(deleted: !results.contains(where: { $0.recordName == record.recordName })))
                        return results
                    case .failed(let failure):
                        throw failure
                    }
                }
                /// The same for a type whose steps need only its records' values (see ValuesPlan).
                func byValues(_ type: String) -> InPlaceValues {
                    InPlaceValues { fields in
                        guard let plan = ValuesPlan(compiled, type: type, fields: fields) else { return nil }
                        return { recordName, values in
                            tick()
                            switch try plan.run(recordName, &values) {
                            case .unchanged:
                                count(type, recordName, .unchanged)
                                return .kept
                            case .future:
                                count(type, recordName, .future)
                                return .kept
                            case .changed:
                                count(type, recordName, .changed(deleted: false))
                                return .updated
                            }
                        }
                    }
                }
                let change = SchemaChange(from: compiled.schemaBefore, to: compiled.schemaAfter)
                let changedTypes = Set(
                    change.addedFields.map(\.type) + change.removedFields.map(\.type) + change.retypedFields.map(\.type)
                        + change.reindexedFields.map(\.type) + change.regrantedTypes)
                let renames = compiled.renames
                let writes = compiled.writes
                let reads = compiled.reads
                let present = compiled.sourceTypes.filter { session.schema.recordType(named: $0) != nil }
                if inPlace && compiled.canRunInPlace && !compiled.repoints && change.addedTypes.isEmpty
                    && change.removedTypes.isEmpty
                    && changedTypes.isSubset(of: present)
                    && present.allSatisfy({
                        session.canUpdateInPlace(type: $0, into: compiled.schemaAfter, renames: renames[$0] ?? [:])
                    })
                {
                    for type in present.sorted() {
                        let reads = reads.map { $0[type] ?? [] }
                        try session.updateInPlace(
                            type: type, into: compiled.schemaAfter, renames: renames[type] ?? [:],
                            writes: writes[type] ?? [],
                            reads: reads, byValues: reads == nil ? nil : byValues(type), transform)
                    }
                    guard session.schema.isEquivalent(to: compiled.schemaAfter) else {
                        throw StoreError.corrupt("migrating in place did not leave the schema the migration describes")
                    }
                } else {
                    try session.rewrite(types: types, into: compiled.schemaAfter, transform)
                }
                settleTally()
                report.durationMilliseconds = Int64(Date().timeIntervalSince(started) * 1000)
                try session.recordMigration(
                    MigrationHistoryEntry(
                        set: set.name, version: migration.version, description: migration.description,
                        file: (migration.file as NSString).lastPathComponent, checksum: migration.checksum,
                        appliedAt: Int64(Date().timeIntervalSince1970 * 1000),
                        durationMilliseconds: report.durationMilliseconds,
                        recordsChanged: report.totals.changed))
                return report
            }
            reports.append(report)
        }
        return reports
    }

    /// Field-level lines between a record and what it becomes.
    static func diff(_ before: Record, _ after: [Record]) -> RecordDiff {
        var lines: [String] = []
        if after.isEmpty { lines.append("deleted") }
        for result in after {
            if result == before { continue }
            if result.recordName != before.recordName || result.recordType != before.recordType {
                lines.append("→ \(result.recordType) \(result.recordName)")
            }
            let names = Set(before.fields.map(\.name)).union(result.fields.map(\.name)).sorted {
                $0.utf8.lexicographicallyPrecedes($1.utf8)
            }
            for name in names {
                let old = before.fields[name]
                let new = result.fields[name]
                if old == new { continue }
                if let old { lines.append("- \(name): \(text(old))") }
                if let new { lines.append("+ \(name): \(text(new))") }
            }
        }
        return RecordDiff(
            recordName: before.recordName, recordType: before.recordType, zoneName: before.zone.zoneName, lines: lines,
            scope: before.zone.scope.rawValue, ownerRecordName: before.zone.ownerRecordName)
    }

    static func text(_ value: FieldValue) -> String {
        var writer = JSONWriter(capacity: 64)
        FieldValueJSON.write(value, style: .plain, to: &writer)
        return writer.text
    }
}
