import Foundation
import Records
import StoreCore

/// Copying a store into another, whatever keeps each (SQLite to PostgreSQL and back): the
/// schema, every live record with its system fields, the asset files they name, the migration
/// history and the sync tokens, streamed from one to the other without a bundle between them.
public enum Copies {}

/// How a copy writes into its target.
public struct CopyOptions: Sendable {
    /// How copied records combine with records of the same name the target already holds.
    public var mode: WriteMode
    /// The records to copy.
    public var query: RecordQuery
    /// Read and check everything, then roll the target back.
    public var dryRun: Bool

    public init(mode: WriteMode = .upsert, query: RecordQuery = RecordQuery(), dryRun: Bool = false) {
        self.mode = mode
        self.query = query
        self.dryRun = dryRun
    }
}

extension Copies {
    /// Copies `source` into `target` in one transaction on the target: its schema (refused, with
    /// nothing written, when the target's schema cannot take it without losing data), the
    /// records `options.query` selects, the asset files those name, the migration history and
    /// the sync tokens. The source is read in one consistent state.
    public static func run(
        from source: some RecordStoring, to target: some RecordStoring, options: CopyOptions = CopyOptions(),
        progress: ProgressHandler? = nil
    ) throws -> ImportSummary {
        let schema = try source.loadSchema()
        let records = StoreRecordSource(source, query: options.query)
        defer { records.cancel() }
        var importOptions = ImportOptions(mode: options.mode, dryRun: options.dryRun)
        importOptions.maxErrors = 20
        let hooks = ImportHooks(
            progress: progress.map { report in { step in report(OperationProgress(records: step.records)) } },
            finishing: { session in
                try source.readSession { reading in
                    for entry in try reading.migrationHistory(set: nil) { try session.recordMigration(entry) }
                    for name in try reading.syncSources() {
                        for state in try reading.syncStates(source: name) {
                            try session.saveSyncToken(state.token, source: name, zone: state.zone)
                        }
                    }
                }
            })
        return try target.importRecords([records], schema: schema, options: importOptions, hooks: hooks)
    }
}

/// The records of a store as a source of an import: a read transaction on a thread of its own
/// walks them and hands them over a few hundred at a time, each preceded by the asset files
/// it names that the store holds (staged in temporary files), so memory stays flat.
final class StoreRecordSource: RecordSource {
    private let handoff = BoundedHandoff<Result<SourceItem?, Error>>(depth: 256)
    private let location: String
    private var finished = false

    init(_ store: any RecordStoring, query: RecordQuery) {
        location = store.location
        let handoff = handoff
        WorkerThread.start(name: "ckport store reader", stackSize: 4 << 20) {
            let origin = store.location
            do {
                try store.readSession { session in
                    var staged: Set<String> = []
                    try session.forEach(query) { record in
                        for sha256 in StoreRecordSource.assetHashes(record) where !staged.contains(sha256) {
                            staged.insert(sha256)
                            guard let asset = try StoreRecordSource.stage(sha256, from: session, origin: origin) else {
                                continue
                            }
                            guard handoff.put(.success(.asset(asset))) else {
                                asset.discard()
                                throw CancellationError()
                            }
                        }
                        let position = SourcePosition(
                            file: origin,
                            path: "\(record.recordType) \(record.recordName) in zone \(record.zone.zoneName)")
                        guard handoff.put(.success(.record(SourcedRecord(record: record, position: position)))) else {
                            throw CancellationError()
                        }
                    }
                }
                _ = handoff.put(.success(nil))
            } catch is CancellationError {
            } catch {
                _ = handoff.put(.failure(error))
            }
        }
    }

    var name: String { location }
    var bytesRead: Int64 { 0 }
    var totalBytes: Int64? { nil }

    func next() throws -> SourceItem? {
        guard !finished else { return nil }
        guard let item = try handoff.take().get() else {
            finished = true
            return nil
        }
        return item
    }

    /// Stops the reading thread (after a failure on the writing side).
    func cancel() {
        handoff.cancel()
    }

    /// The SHA-256 of every asset a record names.
    static func assetHashes(_ record: Record) -> [String] {
        var hashes: [String] = []
        for (_, value) in record.fields {
            switch value {
            case .asset(let asset): if let sha256 = asset.sha256 { hashes.append(sha256) }
            case .list(_, let values):
                for case .asset(let asset) in values { if let sha256 = asset.sha256 { hashes.append(sha256) } }
            default: break
            }
        }
        return hashes
    }

    /// An asset's bytes set aside (sealed, in a file no name reaches), or nil when the store
    /// does not hold them.
    static func stage(_ sha256: String, from session: any RecordSession, origin: String) throws -> StagedAsset? {
        let staged = try SealedBytes()
        let found = try session.readAsset(sha256) { bytes in try staged.append(bytes) }
        guard found else { return nil }
        return StagedAsset(sha256: sha256, size: staged.count, bytes: staged, origin: "\(origin) asset \(sha256)")
    }
}
