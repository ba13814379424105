import Formats
import Foundation
import ObjectStorage
import Records
import StoreCore
import Synchronization

/// What a backup into a repository writes.
public struct RepositoryBackupOptions: Sendable {
    /// The records to write. An incremental snapshot takes its types, scope and zone, not its
    /// predicate.
    public var query: RecordQuery
    /// A full snapshot even when an earlier one of the same store could be built on.
    public var full: Bool

    public init(query: RecordQuery = RecordQuery(), full: Bool = false) {
        self.query = query
        self.full = full
    }
}

/// What a backup into a repository wrote.
public struct RepositoryBackupResult: Sendable {
    public var snapshot: RepositorySnapshot
    /// Asset files written now, and those an earlier snapshot had written already.
    public var newAssets: Int
    public var keptAssets: Int
    /// Assets the records name whose bytes the store does not hold.
    public var missingAssets: [String]
    /// Why a snapshot is full although the repository holds one of the same store.
    public var fullBecause: String?
}

extension Backups {
    /// Writes a snapshot of `store` into `repository`: only what changed since the newest
    /// snapshot of the same store (by its store id), or everything when there is none. The
    /// records' compressed bytes travel while later records are still being read; the snapshot
    /// appears only once all of it is written.
    public static func backup(
        _ store: some RecordStoring, to repository: BackupRepository,
        options: RepositoryBackupOptions = RepositoryBackupOptions(), progress: ProgressHandler? = nil
    ) async throws -> RepositoryBackupResult {
        let lock = try await RepositoryLock.acquire(repository, exclusive: false, operation: "backup")
        do {
            let result = try await backupLocked(
                store, to: repository, options: options, lock: lock, progress: progress)
            await lock.release()
            return result
        } catch {
            await lock.release()
            throw error
        }
    }

    private enum Piece: Sendable {
        case body([UInt8])
        case assetStart(String)
        case asset([UInt8])
        case assetEnd
    }

    private static func backupLocked(
        _ store: some RecordStoring, to repository: BackupRepository, options: RepositoryBackupOptions,
        lock: RepositoryLock, progress: ProgressHandler?
    ) async throws -> RepositoryBackupResult {
        // What a backup killed earlier left half-written goes first, when no one else is at
        // work (credentials that may not delete leave it to a prune).
        if try await RepositoryLock.holders(repository).count <= 1 {
            _ = try? await repository.storage.removeUnfinished(before: Date() - RepositoryLock.staleAfter)
        }
        let snapshots = try await repository.snapshots()
        let storeID = store.storeID
        // A snapshot builds on the newest of the same store and the same selection; one chosen
        // by a predicate is always full (changes since a token know no predicate), and nothing
        // builds on it.
        let selection = Backups.selection(options.query)
        let base =
            options.full || options.query.predicate != nil
            ? nil : snapshots.last { $0.store == storeID && $0.selection == selection }
        let schemaHasAssets = try await store.readSession { session in
            session.schema.recordTypes.contains { type in type.fields.contains { $0.type.primitive == .asset } }
        }
        let present: Set<String> = schemaHasAssets ? Set(try await repository.storage.list("data/").map(\.key)) : []
        let bodyName = repository.newDataObject()
        let body = try await repository.startObject(bodyName)
        let channel = ThreadToTask<Piece>(depth: 8)
        let fullBecause = Slot<String?>(nil)
        let query = options.query
        let total = progress != nil && base == nil ? try await store.readSession { try $0.count(query) } : nil
        let progress = Unchecked(progress)
        let producer = Task {
            try await onOwnThread("ckport backup") { () throws -> (BundleParts, [String], Int) in
                do {
                    let made = try store.readSession { session -> (BundleParts, [String], Int) in
                        var since: ChangeToken?
                        if let base, let token = try? ChangeToken(parsing: base.token) {
                            if token.storeID == session.currentToken.storeID
                                && token.sequence <= session.currentToken.sequence
                            {
                                since = token
                            } else {
                                fullBecause.value.withLock {
                                    $0 =
                                        "the store's changes do not follow on from snapshot \(base.shortID) (it was restored or replaced since)"
                                }
                            }
                        }
                        let (parts, missing) = try BundleWriter().writeParts(
                            session, query: query, since: since,
                            body: { chunk in
                                guard channel.put(.body(chunk)) else { throw CancellationError() }
                            },
                            progress: { records in
                                progress.value?(
                                    OperationProgress(
                                        records: records, done: total.map { _ in Int64(records) },
                                        total: total.map(Int64.init)))
                            })
                        for member in parts.assets where !present.contains(repository.assetObject(member.sha256)) {
                            guard channel.put(.assetStart(member.sha256)) else { throw CancellationError() }
                            try BundleWriter.readAsset(member, from: session) { bytes in
                                guard channel.put(.asset(bytes)) else { throw CancellationError() }
                            }
                            guard channel.put(.assetEnd) else { throw CancellationError() }
                        }
                        // What a restore of it will hold, from the same state of the store.
                        let held = since == nil ? parts.manifest.recordCount : try session.count(query)
                        return (parts, missing, held)
                    }
                    channel.finish()
                    return made
                } catch {
                    channel.finish(throwing: error)
                    throw error
                }
            }
        }
        var bodyDone = false
        var asset: RepositoryObjectWriter?
        var newAssets = 0
        var newBytes: Int64 = 0
        do {
            while let piece = try await channel.next() {
                switch piece {
                case .body(let bytes):
                    try await body.add(bytes)
                case .assetStart(let sha256):
                    if !bodyDone {
                        try await body.finish()
                        bodyDone = true
                    }
                    asset = try await repository.startObject(repository.assetObject(sha256))
                case .asset(let bytes):
                    try await asset!.add(bytes)
                case .assetEnd:
                    try await asset!.finish()
                    newBytes += asset!.storedBytes
                    newAssets += 1
                    asset = nil
                }
            }
            if !bodyDone { try await body.finish() }
        } catch {
            channel.cancel()
            _ = try? await producer.value
            if !bodyDone { await body.abort() }
            await asset?.abort()
            throw error
        }
        let (parts, missing, held) = try await producer.value
        // The asset files it shares with earlier snapshots must still be there, and this
        // process's lock must still stand (a prune may remove what no snapshot names yet).
        if parts.assets.count > newAssets {
            let now = Set(try await repository.storage.list("data/").map(\.key))
            for member in parts.assets where !now.contains(repository.assetObject(member.sha256)) {
                throw RepositoryError.damaged(
                    location: repository.location, object: repository.assetObject(member.sha256),
                    problem: "went while the backup ran (asset \(member.sha256)); run the backup again")
            }
        }
        try await lock.confirm()
        let snapshot = RepositorySnapshot(
            id: RepositoryNames.random(32),
            time: ISO8601.format(milliseconds: Int64(Date().timeIntervalSince1970 * 1000)),
            host: ProcessInfo.processInfo.hostName, store: storeID, storeLocation: store.location,
            parent: parts.manifest.baseToken == nil ? nil : base?.id, records: parts.manifest.recordCount,
            bytes: body.storedBytes + newBytes, body: bodyName, bodyStoredBytes: body.storedBytes, parts: parts,
            selection: selection, storeRecords: held)
        try await repository.publish(snapshot)
        return RepositoryBackupResult(
            snapshot: snapshot, newAssets: newAssets, keptAssets: parts.assets.count - newAssets,
            missingAssets: missing, fullBecause: fullBecause.value.withLock { $0 })
    }

    /// The part of a store a query selects, in words a snapshot keeps; nil for the whole store.
    static func selection(_ query: RecordQuery) -> String? {
        var parts: [String] = []
        if !query.recordTypes.isEmpty { parts.append("types=" + query.recordTypes.sorted().joined(separator: ",")) }
        if let scope = query.scope { parts.append("scope=" + scope.rawValue) }
        if let zone = query.zoneName { parts.append("zone=" + zone) }
        if let owner = query.ownerRecordName { parts.append("owner=" + owner) }
        if query.predicate != nil { parts.append("where=" + (query.predicateText ?? "a predicate")) }
        return parts.isEmpty ? nil : parts.joined(separator: ";")
    }
}

// MARK: - Choosing snapshots

/// Which snapshot a restore, a listing or a `serve` means.
public struct SnapshotChoice: Sendable {
    /// A snapshot id, or the first characters of one.
    public var id: String?
    /// The newest snapshot at or before this moment (milliseconds since 1970).
    public var at: Int64?
    /// The store the snapshots are of (its id, or the first characters of it).
    public var source: String?

    public init(id: String? = nil, at: Int64? = nil, source: String? = nil) {
        self.id = id
        self.at = at
        self.source = source
    }
}

extension Backups {
    /// The snapshots of the store `source` names, or of the only store the repository holds
    /// snapshots of; oldest first.
    public static func snapshots(of source: String?, in all: [RepositorySnapshot], repository: String) throws
        -> [RepositorySnapshot]
    {
        let stores = Array(Set(all.map(\.store))).sorted()
        if let source {
            let matching = stores.filter { $0.hasPrefix(source) }
            guard matching.count == 1 else {
                if matching.isEmpty {
                    throw RepositoryError.noSnapshot(location: repository, what: "of a store whose id starts \(source)")
                }
                throw RepositoryError.ambiguousStore(location: repository, stores: matching)
            }
            return all.filter { $0.store == matching[0] }
        }
        guard stores.count <= 1 else { throw RepositoryError.ambiguousStore(location: repository, stores: stores) }
        return all
    }

    /// The snapshot `choice` names (the newest when it names none).
    public static func choose(_ choice: SnapshotChoice, in all: [RepositorySnapshot], repository: String) throws
        -> RepositorySnapshot
    {
        if let id = choice.id {
            let matching = all.filter { $0.id.hasPrefix(id.lowercased()) }
            guard matching.count == 1 else {
                throw RepositoryError.noSnapshot(
                    location: repository,
                    what: matching.isEmpty ? "whose id starts \(id)" : "of one id starting \(id) (\(matching.count) do)"
                )
            }
            if let source = choice.source, !matching[0].store.hasPrefix(source) {
                throw RepositoryError.noSnapshot(location: repository, what: "\(id) of store \(source)")
            }
            return matching[0]
        }
        let candidates = try snapshots(of: choice.source, in: all, repository: repository)
        if let at = choice.at {
            guard let found = candidates.last(where: { $0.milliseconds <= at }) else {
                throw RepositoryError.noSnapshot(
                    location: repository, what: "made at or before \(ISO8601.format(milliseconds: at))")
            }
            return found
        }
        guard let newest = candidates.last else { throw RepositoryError.noSnapshot(location: repository, what: "yet") }
        return newest
    }

    /// The full snapshot `target` builds on and every snapshot between, oldest first. A folded
    /// snapshot's base comes first, as a link of its own.
    public static func chain(to target: RepositorySnapshot, in all: [RepositorySnapshot], repository: String) throws
        -> [RepositorySnapshot]
    {
        let byID = Dictionary(all.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var chain = [target]
        while let parent = chain.last!.parent {
            guard let found = byID[parent], chain.count < 100_000 else {
                throw RepositoryError.damaged(
                    location: repository, object: "snapshots/\(chain.last!.id)",
                    problem: "builds on snapshot \(parent), which the repository does not hold")
            }
            chain.append(found)
        }
        // A folded snapshot's changes apply to the full bundle its description keeps.
        if let base = chain.last!.base { chain.append(base.link(of: chain.last!)) }
        return chain.reversed()
    }
}

// MARK: - Restoring

extension Backups {
    /// Restores a snapshot — the chain of snapshots it is the last of — into `store`, as
    /// ``restore(_:into:options:progress:)-([BundleReader],_,_,_)`` restores a chain of bundles:
    /// every snapshot's bundle is made again from the repository's objects as it is read, and
    /// checked as a bundle file is (sizes, SHA-256, counts, every record, the chain's tokens);
    /// the store commits only once all of it checked out.
    public static func restore(
        from repository: BackupRepository, snapshot target: RepositorySnapshot, into store: some RecordStoring,
        options: RestoreOptions = RestoreOptions(), progress: ProgressHandler? = nil
    ) async throws -> ImportSummary {
        let lock = try await RepositoryLock.acquire(repository, exclusive: false, operation: "restore")
        do {
            let chain = try Backups.chain(
                to: target, in: try await repository.snapshots(), repository: repository.location)
            let summary = try await restore(
                chain: chain, from: repository, into: store, options: options, progress: progress)
            await lock.release()
            return summary
        } catch {
            await lock.release()
            throw error
        }
    }

    /// Restores a chain of snapshots, the repository locked by the caller. The newest link's
    /// description gives the restore its schema and migration history; the links are opened one
    /// after another as the restore reaches them (a task opens the next while one is read), so
    /// memory holds at most two links' buffers however long the chain; all of it still goes in
    /// one transaction, which commits once every link checked out.
    static func restore(
        chain: [RepositorySnapshot], from repository: BackupRepository, into store: some RecordStoring,
        options: RestoreOptions = RestoreOptions(), progress: ProgressHandler? = nil
    ) async throws -> ImportSummary {
        try checkLinks(chain, repository: repository.location)
        // A chain starts full, unless the records go into a store that holds an earlier restore.
        if let base = chain.first!.parts.manifest.baseToken, options.mode == nil {
            throw OperationError.chainStartsIncremental(
                bundle: "snapshot \(chain.first!.shortID) in \(repository.location)", base: base)
        }
        try await checkObjects(of: chain, in: repository)
        let newest = chain.last!
        let newestName = "snapshot \(newest.shortID) in \(repository.location)"
        let description = try described(newest, name: newestName, repository: repository.location)
        let links = TaskToThread<SnapshotStream>(depth: 1)
        let limits = options.read.limits
        let opener = Task {
            var closers: [@Sendable () async -> Void] = []
            do {
                for link in chain {
                    // The next link is opened once the one before it is being read, not sooner.
                    guard await links.room() else { break }
                    let stream = try await SnapshotStream.open(link, in: repository, limits: limits)
                    closers.append(stream.closing)
                    guard await links.send(stream) else { break }
                }
                links.finish()
            } catch {
                links.finish(throwing: error)
            }
            return closers
        }
        let sources = chain.map {
            LinkSource(
                name: "snapshot \($0.shortID) in \(repository.location)", token: $0.parts.manifest.token,
                location: repository.location, links: links)
        }
        let work = Unchecked((sources, options, progress, description))
        do {
            let summary = try await onOwnThread("ckport restore") {
                try restoreLinks(
                    work.value.0, schema: work.value.3.0, history: work.value.3.1,
                    connectorState: newest.parts.manifest.connectorState ?? [], name: newestName, into: store,
                    options: work.value.1, progress: work.value.2)
            }
            await closeLinks(sources, links: links, opener: opener)
            return summary
        } catch {
            await closeLinks(sources, links: links, opener: opener)
            throw error
        }
    }

    /// The restore of a chain's links (see ``restore(chain:from:into:options:progress:)``), on
    /// the thread that writes the store.
    private static func restoreLinks(
        _ sources: [LinkSource], schema: Schema, history: [MigrationHistoryEntry],
        connectorState: [ConnectorStateEntry], name: String,
        into store: some RecordStoring, options: RestoreOptions, progress: ProgressHandler?
    ) throws -> ImportSummary {
        try Backups.restore(
            sources, schema: schema, history: history, connectorState: connectorState, name: name,
            finishChecks: { for source in sources { try source.finish() } },
            damage: { sources.lazy.compactMap(\.damage).first }, into: store, options: options, progress: progress)
    }

    /// A snapshot's schema and migration history, from its description.
    private static func described(_ snapshot: RepositorySnapshot, name: String, repository: String) throws -> (
        Schema, [MigrationHistoryEntry]
    ) {
        do {
            let schema = try SchemaParser.parse(snapshot.parts.schema, file: name + "/schema.ckdb")
            let history =
                try snapshot.parts.migrations.map {
                    try JSONDecoder().decode([MigrationHistoryEntry].self, from: Data($0.utf8))
                } ?? []
            return (schema, history)
        } catch {
            throw RepositoryError.damaged(location: repository, object: "snapshots/\(snapshot.id)", problem: "\(error)")
        }
    }

    /// Lets a restore's links go: no more are opened, and every one opened is closed.
    private static func closeLinks(
        _ sources: [LinkSource], links: TaskToThread<SnapshotStream>,
        opener: Task<[@Sendable () async -> Void], Never>
    ) async {
        links.cancel()
        opener.cancel()
        for source in sources { source.close() }
        for close in await opener.value { await close() }
    }

    /// Checks before any record is read that every link's description is sound and that the
    /// objects it names are there at their sizes (one listing), so that a damaged link late in
    /// a long chain is found before the work on the ones before it, not after.
    static func checkObjects(of chain: [RepositorySnapshot], in repository: BackupRepository) async throws {
        for link in chain {
            if let problem = link.parts.problem() {
                throw RepositoryError.damaged(
                    location: repository.location, object: "snapshots/\(link.id)", problem: problem)
            }
        }
        let sizes = Dictionary(
            try await repository.storage.list("data/").map { ($0.key, $0.size) },
            uniquingKeysWith: { first, _ in first })
        for link in chain {
            guard let size = sizes[link.body] else {
                throw RepositoryError.damaged(
                    location: repository.location, object: link.body,
                    problem: "is missing (the body of snapshot \(link.shortID))")
            }
            guard size == link.bodyStoredBytes else {
                throw RepositoryError.damaged(
                    location: repository.location, object: link.body,
                    problem: "is \(size) bytes; snapshot \(link.shortID) says \(link.bodyStoredBytes)")
            }
            for asset in link.parts.assets where sizes[repository.assetObject(asset.sha256)] == nil {
                throw RepositoryError.damaged(
                    location: repository.location, object: repository.assetObject(asset.sha256),
                    problem: "is missing (an asset file of snapshot \(link.shortID))")
            }
        }
    }

    /// Checks from their descriptions that each snapshot of a chain starts where the one it
    /// builds on ends, from the same store, before any of their bundles is read.
    static func checkLinks(_ links: [RepositorySnapshot], repository: String) throws {
        for (previous, next) in zip(links, links.dropFirst())
        where next.parts.manifest.baseToken != previous.parts.manifest.token
            || next.parts.manifest.storeID != previous.parts.manifest.storeID
        {
            throw RepositoryError.damaged(
                location: repository, object: "snapshots/\(next.id)",
                problem: "does not start where snapshot \(previous.shortID), which it builds on, ends")
        }
    }

    /// Opens a snapshot's bundle for reading, made again from the repository's objects as it is
    /// read: a reader of the bundle, and what to call when done with it.
    public static func openSnapshot(_ snapshot: RepositorySnapshot, in repository: BackupRepository) async throws
        -> (reader: BundleReader, close: @Sendable () async -> Void)
    {
        let stream = try await SnapshotStream.open(snapshot, in: repository)
        return (stream.reader, { await stream.close() })
    }
}

/// A value behind a lock, that closures on several threads share.
final class Slot<Value>: Sendable {
    let value: Mutex<Value>
    init(_ value: sending Value) { self.value = Mutex(value) }
}

/// A value handed to a thread that uses it alone.
struct Unchecked<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}

/// One snapshot's bundle, made again as it is read: a task fetches the body and the asset
/// files a few MB at a time, a thread puts the bundle together (``BundleAssembly``), and the
/// bundle's reader takes its bytes. Memory holds a few chunks of each.
final class SnapshotStream: @unchecked Sendable {
    let reader: BundleReader
    private let fetched: TaskToThread<[UInt8]>
    private let assembled: BoundedHandoff<[UInt8]>
    private let fetcher: Task<Void, Never>
    private let failure: Slot<(any Error)?>

    private init(
        reader: BundleReader, fetched: TaskToThread<[UInt8]>, assembled: BoundedHandoff<[UInt8]>,
        fetcher: Task<Void, Never>, failure: Slot<(any Error)?>
    ) {
        self.reader = reader
        self.fetched = fetched
        self.assembled = assembled
        self.fetcher = fetcher
        self.failure = failure
    }

    static func open(
        _ snapshot: RepositorySnapshot, in repository: BackupRepository,
        limits given: DecompressionLimits = DecompressionLimits(), stageAssets: Bool = true
    ) async throws -> SnapshotStream {
        // The bundle is made here from parts its description sizes: it may expand as far as the
        // members it names (a family's photos may pass the default 64 GiB), and a file of zeros
        // may compress far beyond the ratio a downloaded bundle is allowed; the sizes and
        // checksums are checked member by member as it is read.
        let named = snapshot.parts.manifest.members.reduce(Int64(0)) { $0 + $1.bytes + 1_024 }
        let limits = DecompressionLimits(
            maxTotalBytes: max(given.maxTotalBytes, named + (1 << 20)), maxRatio: max(given.maxRatio, 1_000_000),
            ratioGrace: given.ratioGrace)
        if let problem = snapshot.parts.problem() {
            throw RepositoryError.damaged(
                location: repository.location, object: "snapshots/\(snapshot.id)", problem: problem)
        }
        let fetched = TaskToThread<[UInt8]>(depth: 1)
        // The body, then each asset file, in the bundle's order.
        let objects = [(snapshot.body, snapshot.bodyStoredBytes)]
        let assets = snapshot.parts.assets.map { repository.assetObject($0.sha256) }
        var sizes: [Int64] = []
        for name in assets {
            guard let size = try await repository.storage.size(of: name) else {
                throw RepositoryError.damaged(
                    location: repository.location, object: name,
                    problem: "is missing (an asset file of snapshot \(snapshot.shortID))")
            }
            sizes.append(size)
        }
        let all = objects + Array(zip(assets, sizes))
        let fetcher = Task {
            do {
                for (name, size) in all {
                    let object = repository.objectReader(name, storedSize: size)
                    while let bytes = try await object.next() {
                        if bytes.isEmpty { continue }
                        guard await fetched.send(bytes) else { return }
                    }
                }
                fetched.finish()
            } catch {
                fetched.finish(throwing: error)
            }
        }
        // The bundle's bytes, from the thread that assembles them; an empty piece is the end.
        let assembled = BoundedHandoff<[UInt8]>(depth: 8)
        let failure = Slot<(any Error)?>(nil)
        let parts = snapshot.parts
        let thread = Thread {
            var held: [UInt8] = []
            var offset = 0
            func pull(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
                while offset == held.count {
                    guard let next = try fetched.take() else { return 0 }
                    held = next
                    offset = 0
                }
                let n = min(buffer.count, held.count - offset)
                held.withUnsafeBytes {
                    buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + n)]))
                }
                offset += n
                return n
            }
            struct Stopped: Error {}
            do {
                try BundleAssembly.assemble(
                    parts, body: pull,
                    asset: { member, put in
                        var left = member.bytes
                        var buffer = [UInt8](repeating: 0, count: 1 << 18)
                        while left > 0 {
                            let want = Int(min(left, Int64(buffer.count)))
                            let got = try buffer.withUnsafeMutableBytes {
                                try pull(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<want]))
                            }
                            guard got > 0 else { throw ArchiveError(file: "", message: "an asset file ended early") }
                            try put(Array(buffer[0..<got]))
                            left -= Int64(got)
                        }
                    },
                    emit: { bytes in
                        if !bytes.isEmpty { guard assembled.put(bytes) else { throw Stopped() } }
                    })
            } catch is Stopped {
                fetched.cancel()
                return
            } catch {
                failure.value.withLock { $0 = error }
            }
            fetched.cancel()
            _ = assembled.put([])
        }
        thread.name = "ckport snapshot"
        thread.start()
        let name = "snapshot \(snapshot.shortID) in \(repository.location)"
        let location = repository.location
        do {
            // Made on a thread of its own: opening the reader waits for the bundle's first bytes,
            // which no thread of the pool should do.
            let reader = try await onOwnThread("ckport snapshot open") {
                var piece: [UInt8] = []
                var offset = 0
                var ended = false
                return Unchecked(
                    try BundleReader(name: name, limits: limits, stageAssets: stageAssets) { buffer in
                        while offset == piece.count {
                            if ended { return 0 }
                            guard let next = assembled.takeUnlessCancelled() else {
                                throw RepositoryError.storage(location: location, message: "\(name) was closed")
                            }
                            piece = next
                            offset = 0
                            if piece.isEmpty {
                                ended = true
                                if let error = failure.value.withLock({ $0 }) { throw error }
                                return 0
                            }
                        }
                        let n = min(buffer.count, piece.count - offset)
                        piece.withUnsafeBytes {
                            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + n)]))
                        }
                        offset += n
                        return n
                    })
            }.value
            return SnapshotStream(
                reader: reader, fetched: fetched, assembled: assembled, fetcher: fetcher, failure: failure)
        } catch {
            assembled.cancel()
            fetched.cancel()
            await fetcher.value
            if let cause = failure.value.withLock({ $0 }) { throw cause }
            throw error
        }
    }

    /// Stops the fetching and the assembling without waiting: from the thread that read it.
    func cancel() {
        assembled.cancel()
        fetched.cancel()
    }

    /// What ``close()`` does, holding nothing of the reader (whose buffers go with it).
    var closing: @Sendable () async -> Void {
        let assembled = self.assembled
        let fetched = self.fetched
        let fetcher = self.fetcher
        return {
            assembled.cancel()
            fetched.cancel()
            await fetcher.value
        }
    }

    /// Stops the fetching and the assembling (when the reader stopped early) and waits for the
    /// fetching task.
    func close() async {
        assembled.cancel()
        fetched.cancel()
        await fetcher.value
    }
}

/// An earlier link of a chain being restored: its bundle, opened by a task as the restore
/// reaches it, read, checked and let go.
final class LinkSource: RecordSource, @unchecked Sendable {
    // `next()` comes from one thread at a time (a prefetching one, perhaps); `bytesRead` and
    // `close()` from others: what they share is behind a lock.
    private struct State {
        var stream: SnapshotStream?
        var done = false
        var readBefore: Int64 = 0
        var damage: (any Error)?
        var failure: (any Error)?
    }
    let name: String
    /// The change token its snapshot ends at: the bundle it is handed must be its own.
    private let token: String
    private let location: String
    private let links: TaskToThread<SnapshotStream>
    private let state = Mutex(State())

    init(name: String, token: String, location: String, links: TaskToThread<SnapshotStream>) {
        self.name = name
        self.token = token
        self.location = location
        self.links = links
    }

    var bytesRead: Int64 { state.withLock { $0.stream?.reader.bytesRead ?? $0.readBefore } }
    var totalBytes: Int64? { nil }
    /// The damage its bundle was found to have, when reading it failed.
    var damage: (any Error)? { state.withLock { $0.damage } }

    func next() throws -> SourceItem? {
        let (current, done, failure) = state.withLock { ($0.stream, $0.done, $0.failure) }
        if let failure { throw failure }
        if done { return nil }
        let stream: SnapshotStream
        if let current {
            stream = current
        } else {
            guard let opened = try links.take() else {
                throw RepositoryError.storage(location: location, message: "\(name) was not opened")
            }
            state.withLock { $0.stream = opened }
            stream = opened
            // The links come in the chain's order, read one after another: a bundle of another
            // snapshot here would apply records out of order.
            guard opened.reader.manifest.token == token else {
                let error = RepositoryError.storage(
                    location: location, message: "\(name) was handed another snapshot's bundle")
                state.withLock { $0.failure = error }
                close()
                throw error
            }
        }
        let reader = stream.reader
        do {
            if let item = try reader.next() { return item }
            try reader.finishChecks()
        } catch {
            let found = reader.damageFound()
            state.withLock {
                $0.damage = found
                $0.failure = error
            }
            close()
            throw error
        }
        let read = reader.bytesRead
        state.withLock {
            $0.readBefore = read
            $0.done = true
        }
        close()
        return nil
    }

    /// Stops its bundle's fetching and lets the bundle go.
    func close() {
        let stream = state.withLock { state -> SnapshotStream? in
            let stream = state.stream
            state.stream = nil
            return stream
        }
        stream?.cancel()
    }

    /// Throws unless it was read to its end (and checked).
    func finish() throws {
        guard state.withLock({ $0.done }) else {
            throw RepositoryError.damaged(location: location, object: name, problem: "was not read to its end")
        }
    }
}
