import Formats
import Foundation
import Records
import StoreCore

/// Backup bundles: writing one from a store, checking one completely, restoring one — or a
/// chain of a full bundle and the incremental ones after it — into a store.
public enum Backups {}

// MARK: - Writing

/// What a backup writes.
public struct BackupOptions {
    /// The records to write. With `since`, its types, scope and zone apply, its predicate not.
    public var query: RecordQuery
    /// An earlier bundle of the same store: write only what changed or was deleted after it.
    public var since: String?
    /// Encrypt the bundle (AES-256-GCM, key derived by scrypt from `passphrase`).
    public var encrypt: Bool
    /// The passphrase that encrypts the new bundle and opens an encrypted `since` bundle.
    public var passphrase: String?

    public init(
        query: RecordQuery = RecordQuery(), since: String? = nil, encrypt: Bool = false, passphrase: String? = nil
    ) {
        self.query = query
        self.since = since
        self.encrypt = encrypt
        self.passphrase = passphrase
    }
}

/// What a backup wrote.
public struct BackupResult {
    public var path: String
    public var manifest: BundleManifest
    public var bytesWritten: Int64
    /// Whether the bundle holds the changes after an earlier bundle rather than the records.
    public var isIncremental: Bool
    /// Assets the records name whose bytes the store does not hold: the bundle keeps the
    /// values without the files.
    public var missingAssets: [String]
    /// Members besides the manifest.
    public var memberCount: Int { manifest.members.count - 1 }
}

extension Backups {
    /// Writes a bundle of `store` to `path` (a temporary file until it is complete).
    public static func write(
        _ store: some RecordStoring, to path: String, options: BackupOptions = BackupOptions(),
        progress: ProgressHandler? = nil
    ) throws -> BackupResult {
        var base: ChangeToken?
        if let since = options.since {
            let previous = try BundleReader(
                path: since, passphrase: options.passphrase, allowUnencrypted: !options.encrypt)
            base = try ChangeToken(parsing: previous.manifest.token)
        }
        if options.encrypt && options.passphrase == nil { throw OperationError.noPassphrase }
        // A full backup reads the records in one pass, so their count is what the pass will
        // meet: it gives progress its end. Counting costs a pass over the keys, so only when
        // someone listens.
        let total = progress != nil && base == nil ? try store.readSession { try $0.count(options.query) } : nil
        let summary = try BundleWriter().write(
            store, query: options.query, since: base, to: path,
            passphrase: options.encrypt ? options.passphrase : nil
        ) { records in
            progress?(
                OperationProgress(
                    records: records, done: total.map { _ in Int64(records) }, total: total.map(Int64.init)))
        }
        return BackupResult(
            path: path, manifest: summary.manifest, bytesWritten: summary.bytesWritten,
            isIncremental: base != nil, missingAssets: summary.missingAssets)
    }
}

// MARK: - Verifying

/// How a bundle is opened for reading.
public struct BundleReadOptions {
    /// Refuse a bundle that expands beyond these limits (a decompression bomb).
    public var limits: DecompressionLimits
    /// The passphrase of an encrypted bundle.
    public var passphrase: String?
    /// With a passphrase, take a bundle that is not encrypted too (else it is refused: it may
    /// have been put in the encrypted one's place).
    public var allowUnencrypted: Bool

    public init(
        limits: DecompressionLimits = DecompressionLimits(), passphrase: String? = nil, allowUnencrypted: Bool = false
    ) {
        self.limits = limits
        self.passphrase = passphrase
        self.allowUnencrypted = allowUnencrypted
    }
}

/// A bundle that checked out, and what it holds.
public struct BundleCheck {
    /// A reference from a record in the bundle to one that is not in it.
    public struct Reference: Equatable, Sendable {
        public var from: String
        public var to: String
    }

    public var bundle: String
    public var manifest: BundleManifest
    public var records: Int
    public var assetFiles: Int
    public var assetBytes: Int64
    public var recordsByType: [String: Int]
    /// References to records outside the bundle: how many, and up to three of them.
    public var outsideReferences: Int
    public var outsideReferenceExamples: [Reference]
    /// Assets the records name (by SHA-256) that the bundle does not carry, sorted.
    public var absentAssets: [String]
    /// Whether the bundle is encrypted.
    public var encrypted: Bool
}

extension Backups {
    /// Opens a bundle: its manifest, schema and migration history, which come first, are read
    /// at once; its records as the reader is read (once).
    /// `forRestore`: the records members' SHA-256 are checked by a second reading of the file
    /// while the store builds its indexes (see `BundleReader`); a restore waits for it before it
    /// commits. A reader opened so and read by anything else has its records members' SHA-256
    /// checked only if that calls `BundleReader.finishChecks()`.
    public static func open(_ path: String, options: BundleReadOptions = BundleReadOptions(), forRestore: Bool = false)
        throws -> BundleReader
    {
        try BundleReader(
            path: path, limits: options.limits, passphrase: options.passphrase,
            allowUnencrypted: options.allowUnencrypted,
            checkRecordsAfterReading: forRestore)
    }

    /// Checks a bundle completely without restoring it: gzip and tar structure, every member's
    /// size, SHA-256 and record count against the manifest, and every record against the
    /// bundled schema. Throws ``OperationError/bundleNotSound(bundle:problems:)`` naming up to
    /// twenty problems.
    public static func verify(
        _ path: String, options: BundleReadOptions = BundleReadOptions(),
        progress: ProgressHandler? = nil
    ) throws -> BundleCheck {
        let reader = try BundleReader(
            path: path, limits: options.limits, passphrase: options.passphrase,
            allowUnencrypted: options.allowUnencrypted, stageAssets: false, decodeOnTwoThreads: true)
        let validator = RecordValidator(schema: reader.schema)
        var assetsInBundle = Set<String>()
        var assetsNamed = Set<String>()
        var assetBytes: Int64 = 0
        var problems: [String] = []
        var perType: [String: Int] = [:]
        // Records and reference targets are kept as 64-bit hashes, so that memory stays small
        // at millions of records; a reference to a record not seen yet keeps its names (up to
        // a limit) for the report.
        var keys = RecordKeyHasher()
        var seen: Set<Int> = []
        seen.reserveCapacity(min(reader.manifest.recordCount, 20_000_000))
        var forward: [(hash: Int, from: String, to: String)] = []
        var forwardHashes: [Int] = []
        let typesWithAssets = Set(
            reader.schema.recordTypes.filter { type in type.fields.contains { $0.type.primitive == .asset } }.map(
                \.name))
        var lastType = ""
        var lastTypeCount = 0
        var records = 0
        // Decompressing and hashing run a thread ahead, parsing on two more (see BundleReader's
        // decodeOnTwoThreads); checking runs here.
        let items = PrefetchingSource(reader)
        while let item = try items.next() {
            switch item {
            case .invalid(let issue, _):
                problems.append(issue.description)
            case .record(let sourced):
                let record = sourced.record
                records += 1
                if records % 8192 == 0 {
                    progress?(OperationProgress(records: records, done: items.bytesRead, total: items.totalBytes))
                }
                if record.recordType == lastType {
                    lastTypeCount += 1
                } else {
                    if lastTypeCount > 0 { perType[lastType, default: 0] += lastTypeCount }
                    lastType = record.recordType
                    lastTypeCount = 1
                }
                seen.insert(keys.key(record.zone, record.recordName))
                for issue in validator.issues(in: record) {
                    problems.append(
                        "\(sourced.position): record '\(record.recordName)' (\(record.recordType)): \(issue)")
                }
                record.fields.entries.withUnsafeBufferPointer { entries in
                    for k in 0..<entries.count {
                        guard case .reference(let target) = entries[k].value else { continue }
                        let hash = keys.key(record.zone, target.recordName)
                        if seen.contains(hash) { continue }
                        if forward.count < 10_000 {
                            forward.append((hash, record.recordName, target.recordName))
                        } else {
                            forwardHashes.append(hash)
                        }
                    }
                }
                if typesWithAssets.contains(record.recordType) {
                    record.forEachAsset { _, asset in if let sha256 = asset.sha256 { assetsNamed.insert(sha256) } }
                }
            case .asset(let asset):
                assetsInBundle.insert(asset.sha256)
                assetBytes += asset.size
            }
            if problems.count >= 20 { break }
        }
        if lastTypeCount > 0 { perType[lastType, default: 0] += lastTypeCount }
        guard problems.isEmpty else { throw OperationError.bundleNotSound(bundle: path, problems: problems) }
        let outside = forward.filter { !seen.contains($0.hash) }
        return BundleCheck(
            bundle: path, manifest: reader.manifest, records: reader.recordsRead,
            assetFiles: assetsInBundle.count, assetBytes: assetBytes, recordsByType: perType,
            outsideReferences: outside.count + forwardHashes.filter { !seen.contains($0) }.count,
            outsideReferenceExamples: outside.prefix(3).map { BundleCheck.Reference(from: $0.from, to: $0.to) },
            absentAssets: assetsNamed.subtracting(assetsInBundle).sorted(), encrypted: reader.isEncrypted)
    }
}

// MARK: - Restoring

/// What a restore takes from its bundles, and how it combines them with the store.
public struct RestoreOptions {
    /// How bundled records combine with stored ones. Nil: the store must hold no records, and a
    /// chain's later bundles replace what earlier ones put there (records, fields and links as
    /// they were when each bundle was made).
    public var mode: WriteMode?
    /// Restore only these record types (empty: all).
    public var recordTypes: Set<String>
    /// Restore only zones with these names (empty: all).
    public var zones: Set<String>
    /// Restore the records of zone OLD into zone NEW (same scope and owner).
    public var zoneRenames: [String: String]
    public var read: BundleReadOptions

    public init(
        mode: WriteMode? = nil, recordTypes: Set<String> = [], zones: Set<String> = [],
        zoneRenames: [String: String] = [:], read: BundleReadOptions = BundleReadOptions()
    ) {
        self.mode = mode
        self.recordTypes = recordTypes
        self.zones = zones
        self.zoneRenames = zoneRenames
        self.read = read
    }
}

extension Backups {
    /// Restores a bundle, or a chain of a full bundle and the incremental ones after it, into
    /// `store`. The chain is checked before anything is written; then the schema and every
    /// record go in one transaction, which commits only once every bundle has checked out
    /// (sizes, checksums, counts, every record valid), so a damaged bundle restores nothing.
    /// The newest bundle's migration history comes along.
    public static func restore(
        _ bundles: [String], into store: some RecordStoring, options: RestoreOptions = RestoreOptions(),
        progress: ProgressHandler? = nil
    ) throws -> ImportSummary {
        let readers = try bundles.map { try open($0, options: options.read, forRestore: true) }
        return try restore(readers, into: store, options: options, progress: progress)
    }

    /// Restores bundles already opened (``RestoreOptions/read`` is not used): a program that
    /// checks the chain with ``checkChain(_:intoExisting:)`` before it opens or creates the
    /// store passes the same readers here (opened with `open(_:options:forRestore:)`, their
    /// records members' SHA-256 are checked while the store builds its indexes). Each reader is
    /// read once.
    public static func restore(
        _ readers: [BundleReader], into store: some RecordStoring, options: RestoreOptions = RestoreOptions(),
        progress: ProgressHandler? = nil
    ) throws -> ImportSummary {
        try checkChain(readers, intoExisting: options.mode != nil)
        return try restore(
            readers, newest: readers.last!, finishChecks: { for reader in readers { try reader.finishChecks() } },
            damage: { readers.lazy.compactMap { $0.damageFound() }.first }, into: store, options: options,
            progress: progress)
    }

    /// Restores a chain already checked: `sources` its bundles' records in order (the last of
    /// them `newest`'s), `finishChecks` the checks of every bundle once all is read, `damage`
    /// the damage a bundle found, if any, when the import failed.
    static func restore(
        _ sources: [RecordSource], newest: BundleReader, finishChecks: @escaping () throws -> Void,
        damage: () -> (any Error)?, into store: some RecordStoring, options: RestoreOptions,
        progress: ProgressHandler?
    ) throws -> ImportSummary {
        try restore(
            sources, schema: newest.schema, history: newest.migrationHistory,
            connectorState: newest.manifest.connectorState ?? [], name: newest.path,
            finishChecks: finishChecks, damage: damage, into: store, options: options, progress: progress)
    }

    /// The same, given the newest bundle's schema, migration history and name rather than its
    /// reader (a repository's snapshot says them in its description).
    static func restore(
        _ sources: [RecordSource], schema: Schema, history: [MigrationHistoryEntry],
        connectorState: [ConnectorStateEntry] = [], name: String, finishChecks: @escaping () throws -> Void,
        damage: () -> (any Error)?, into store: some RecordStoring,
        options: RestoreOptions, progress: ProgressHandler?
    ) throws -> ImportSummary {
        let stats = try store.readSession { try $0.stats() }
        if stats.totalRecords > 0 && options.mode == nil {
            throw OperationError.storeNotEmpty(store: store.location, records: stats.totalRecords)
        }
        // A bundle of another app (or of another version of the schema) would take away
        // types this store holds records of: say what it is, and where it can go instead.
        let bundleTypes = Set(schema.recordTypes.map(\.name))
        let heldTypes = Set(stats.entries.filter { $0.records > 0 }.map(\.recordType))
        let missing = heldTypes.subtracting(bundleTypes).sorted()
        if !missing.isEmpty {
            throw OperationError.bundleOfAnotherSchema(
                bundle: name, missingTypes: missing, store: store.location)
        }
        var hooks = ImportHooks()
        if let progress {
            hooks.progress = {
                progress(OperationProgress(records: $0.records, done: $0.bytesRead, total: $0.totalBytes))
            }
        }
        let selecting = !options.recordTypes.isEmpty || !options.zones.isEmpty || !options.zoneRenames.isEmpty
        let sources: [RecordSource] =
            selecting
            ? sources.map {
                SelectingSource($0, types: options.recordTypes, zones: options.zones, renames: options.zoneRenames)
            }
            : sources
        // Bundles opened for a restore have their records members' SHA-256 checked by a second
        // reading, on a core the store leaves idle while it builds its indexes: the load commits
        // only once every bundle has checked out.
        // The migration history comes along: the newest bundle's, added to what the store has.
        hooks.finishing = { session in
            try finishChecks()
            for entry in history { try session.recordMigration(entry) }
            // Feeds, publications and pulls come along too: the newest bundle's, each entry
            // taking the place of the store's of the same name.
            var replaced: Set<[String]> = []
            for entry in connectorState {
                // A feed or a calendar comes back as the bundle has it: whole, its old entries
                // (a token revoked since, an event deleted since) gone first.
                if replaced.insert([entry.kind, entry.name]).inserted {
                    try session.removeConnectorState(kind: entry.kind, name: entry.name)
                }
                try session.saveConnectorState(entry.value, kind: entry.kind, name: entry.name, key: entry.key)
            }
        }
        // A bundle holds whole records: into a store that was empty, a later bundle's record
        // replaces an earlier one's, so a field or link it no longer has goes too; and one of
        // another type under the same name too (the earlier record was deleted between the two
        // bundles and its name used again: a bundle holds each record's last state only). Not
        // when zones are renamed: two zones merged into one may hold one name twice, and that
        // is a clash to name, not a deletion.
        var importOptions = ImportOptions(mode: options.mode ?? .replace)
        importOptions.replacesOtherTypes = options.mode == nil && options.zoneRenames.isEmpty
        do {
            return try store.importRecords(sources, schema: schema, options: importOptions, hooks: hooks)
        } catch {
            // Records refused by a bundle whose member turns out damaged: the damage is the news.
            if let damage = damage() { throw damage }
            throw error
        }
    }

    /// Checks that bundles form a chain: it starts with a full bundle (or, into a store that
    /// already holds an earlier restore, with an incremental one) and each incremental bundle
    /// starts where the one before it ended, from the same store.
    public static func checkChain(_ readers: [BundleReader], intoExisting: Bool) throws {
        guard let first = readers.first else { throw OperationError.noBundles }
        if let base = first.manifest.baseToken, !intoExisting {
            throw OperationError.chainStartsIncremental(bundle: first.path, base: base)
        }
        for (previous, next) in zip(readers, readers.dropFirst()) {
            guard let base = next.manifest.baseToken else {
                throw OperationError.chainFullBundleInside(bundle: next.path, previous: previous.path)
            }
            guard next.manifest.storeID == previous.manifest.storeID else {
                throw OperationError.chainFromOtherStore(
                    bundle: next.path, store: next.manifest.storeID,
                    previous: previous.path, previousStore: previous.manifest.storeID)
            }
            guard base == previous.manifest.token else {
                let baseSequence = (try? ChangeToken(parsing: base))?.sequence ?? 0
                let previousSequence = (try? ChangeToken(parsing: previous.manifest.token))?.sequence ?? 0
                throw OperationError.chainBroken(
                    bundle: next.path, base: base, previous: previous.path,
                    previousEnd: previous.manifest.token, missing: baseSequence > previousSequence)
            }
        }
    }
}
