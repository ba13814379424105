import Formats
import Foundation
import Migrations
import Records
import StoreCore

/// Migration sets run against a store: their status, a plan that writes nothing, and apply,
/// with a backup bundle of what the first migration starts from.
public enum SchemaMigrations {}

/// How far and how a plan or an apply goes.
public struct MigrationRunOptions {
    /// Up to this version; nil: the newest.
    public var target: Int?
    /// Change records of append-only types too.
    public var force: Bool
    /// How many changed records a plan shows per migration.
    public var diffLimit: Int

    public init(target: Int? = nil, force: Bool = false, diffLimit: Int = 10) {
        self.target = target
        self.force = force
        self.diffLimit = diffLimit
    }
}

/// Where apply writes the backup of the store it starts from.
public enum MigrationBackup: Equatable, Sendable {
    case none
    /// Beside the store: `STORE.before-SET-NNNN.ckbundle`, NNNN the first pending version.
    case besideStore
    case at(String)
}

/// An applied migration whose file was edited, accepted by a repair.
public struct MigrationRepair: Equatable, Sendable {
    public var file: String
    public var oldChecksum: String
    public var newChecksum: String
}

/// What an apply did.
public struct MigrationApplyResult {
    /// One report per migration applied, in order; empty when there was nothing to apply.
    public var reports: [MigrationReport]
    public var before: MigrationStatus
    public var after: MigrationStatus
    /// Applied files accepted as edited.
    public var repaired: [MigrationRepair]
    /// The backup bundle written first, if any.
    public var backup: String?
}

extension SchemaMigrations {
    /// The migration set in `directory`, which must hold at least one migration file.
    public static func load(_ directory: String) throws -> MigrationSet {
        let set = try MigrationSet.load(directory: directory)
        guard !set.migrations.isEmpty else { throw OperationError.noMigrations(directory: directory) }
        return set
    }

    /// The applied migrations (from the store's history), the pending ones, and problems: an
    /// applied file edited or gone, a new file numbered below an applied one.
    public static func status(_ set: MigrationSet, in store: some RecordStoring) throws -> MigrationStatus {
        try MigrationRunner(store: store, set: set).status()
    }

    /// What the pending migrations would do, record by record. The store file is not written.
    public static func plan(
        _ set: MigrationSet, in store: some RecordStoring, options: MigrationRunOptions = MigrationRunOptions(),
        progress: ProgressHandler? = nil
    ) throws -> [MigrationReport] {
        let runner = MigrationRunner(store: store, set: set)
        runner.force = options.force
        if let progress { runner.progress = { _, read in progress(OperationProgress(records: read)) } }
        return try runner.plan(to: options.target, diffLimit: options.diffLimit)
    }

    /// Applies the pending migrations, each in one transaction. With a backup, the bundle is
    /// written inside the first migration's transaction once that migration fits the schema:
    /// it holds exactly the records the migration starts from. `backedUp` hears of it at once,
    /// so that a caller can say where it is even when a later migration fails.
    public static func apply(
        _ set: MigrationSet, to store: some RecordStoring, options: MigrationRunOptions = MigrationRunOptions(),
        repair: Bool = false, backup: MigrationBackup = .besideStore, progress: ProgressHandler? = nil,
        backedUp: ((String, BundleWriter.Summary) -> Void)? = nil
    ) throws -> MigrationApplyResult {
        let runner = MigrationRunner(store: store, set: set)
        runner.force = options.force
        let before = try runner.status()
        runner.repair = repair
        var backupPath: String?
        if before.problems.isEmpty || repair {
            let pending = before.pending.filter { options.target == nil || $0.version <= options.target! }
            if pending.isEmpty && before.problems.isEmpty {
                return MigrationApplyResult(reports: [], before: before, after: before, repaired: [], backup: nil)
            }
            if !pending.isEmpty {
                switch backup {
                case .none: break
                case .besideStore:
                    backupPath = defaultBackupPath(store: store.location, set: set.name, version: pending[0].version)
                case .at(let path): backupPath = path
                }
            }
        }
        if let progress { runner.progress = { _, read in progress(OperationProgress(records: read)) } }
        let reports = try runner.apply(
            to: options.target,
            beforeFirst: backupPath.map { path in
                { session in
                    let summary = try BundleWriter().write(session, to: path)
                    backedUp?(path, summary)
                }
            })
        var repaired: [MigrationRepair] = []
        if repair {
            for entry in before.applied {
                guard let migration = set.migrations.first(where: { $0.version == entry.version }),
                    migration.checksum != entry.checksum
                else { continue }
                repaired.append(
                    MigrationRepair(file: entry.file, oldChecksum: entry.checksum, newChecksum: migration.checksum))
            }
        }
        return MigrationApplyResult(
            reports: reports, before: before, after: try runner.status(), repaired: repaired, backup: backupPath)
    }

    /// `STORE.before-SET-NNNN.ckbundle` beside the store, with a time added when that exists; for
    /// a store on a server (a URL), `NAMESPACE.before-SET-NNNN.ckbundle` in the current folder.
    public static func defaultBackupPath(store: String, set: String, version: Int) -> String {
        var base = store.hasSuffix(".sqlite") ? String(store.dropLast(".sqlite".count)) : store
        if store.contains("://") {
            base = URLComponents(string: store)?.queryItems?.first { $0.name == "schema" }?.value ?? "store"
        }
        var path = "\(base).before-\(set)-\(String(format: "%04d", version)).ckbundle"
        if FileManager.default.fileExists(atPath: path) {
            let stamp = ISO8601.format(milliseconds: Int64(Date().timeIntervalSince1970 * 1000)).replacingOccurrences(
                of: ":", with: "")
            path = "\(base).before-\(set)-\(String(format: "%04d", version))-\(stamp).ckbundle"
        }
        return path
    }
}
