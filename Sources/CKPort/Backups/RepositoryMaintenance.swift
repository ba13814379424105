import Crypto
import Formats
import Foundation
import ObjectStorage
import Records
import SQLiteStore
import StoreCore

/// What `forget` decided about one snapshot.
public struct ForgetDecision: Sendable {
    public var snapshot: RepositorySnapshot
    /// Empty when it goes.
    public var reasons: [String]
    /// A kept snapshot that built on one that goes: the changes of those that go are folded
    /// into it.
    public var folded: Bool
    public var kept: Bool { !reasons.isEmpty }
}

/// What `forget` did (or, with `dryRun`, would do).
public struct ForgetResult: Sendable {
    public var decisions: [ForgetDecision]
    /// With prune: objects removed, and their bytes.
    public var prunedObjects: Int
    public var prunedBytes: Int64
}

extension Backups {
    /// Applies `policy` to the snapshots of each store in the repository (or of `source`'s
    /// only), store by store, and removes the snapshots it does not keep. A kept snapshot that
    /// builds on one that goes is first folded: the changes of those that go merged into it,
    /// written, read back and checked, the full snapshot at the start of its chain kept as its
    /// base when that goes too — only then does anything go. With `prune`, the
    /// objects no snapshot needs any more are removed too. Holds the repository's exclusive
    /// lock (a dry run, a shared one).
    public static func forget(
        _ repository: BackupRepository, policy: RetentionPolicy, source: String? = nil, dryRun: Bool = false,
        prune: Bool = false, pruneGrace: TimeInterval = 2 * RepositoryLock.staleAfter, timeZone: TimeZone = .current,
        progress: ((String) -> Void)? = nil
    ) async throws -> ForgetResult {
        let lock = try await RepositoryLock.acquire(
            repository, exclusive: !dryRun, operation: prune ? "forget and prune" : "forget")
        do {
            let result = try await forgetLocked(
                repository, policy: policy, source: source, dryRun: dryRun, prune: prune, pruneGrace: pruneGrace,
                timeZone: timeZone, progress: progress)
            await lock.release()
            return result
        } catch {
            await lock.release()
            throw error
        }
    }

    private static func forgetLocked(
        _ repository: BackupRepository, policy: RetentionPolicy, source: String?, dryRun: Bool, prune: Bool,
        pruneGrace: TimeInterval, timeZone: TimeZone, progress: ((String) -> Void)?
    ) async throws -> ForgetResult {
        let all = try await repository.snapshots()
        let chosen = source == nil ? all : try snapshots(of: source, in: all, repository: repository.location)
        var decisions: [ForgetDecision] = []
        for store in Set(chosen.map(\.store)).sorted() {
            let ofStore = chosen.filter { $0.store == store }
            let decided = policy.apply(ofStore, time: \.milliseconds, timeZone: timeZone)
            let going = Set(decided.filter { $0.reasons.isEmpty }.map(\.item.id))
            for (snapshot, reasons) in decided {
                let folded = !reasons.isEmpty && snapshot.parent.map { going.contains($0) } == true
                decisions.append(ForgetDecision(snapshot: snapshot, reasons: reasons, folded: folded))
            }
        }
        guard !dryRun else { return ForgetResult(decisions: decisions, prunedObjects: 0, prunedBytes: 0) }
        // Fold first, oldest first: each kept snapshot that builds on one that goes takes in
        // the changes of those that go.
        var current = all
        let going = Set(decisions.filter { !$0.kept }.map(\.snapshot.id))
        for decision in decisions.filter(\.folded).sorted(by: { $0.snapshot.milliseconds < $1.snapshot.milliseconds }) {
            progress?("folding snapshot \(decision.snapshot.shortID) (the snapshots it built on go)")
            let folded = try await fold(decision.snapshot, in: current, going: going, repository: repository)
            current = current.map { $0.id == folded.id ? folded : $0 }
        }
        for decision in decisions where !decision.kept {
            do {
                try await repository.remove(decision.snapshot)
            } catch let error as ObjectStorageError where error.kind == .refused {
                throw RepositoryError.cannotDelete(
                    location: repository.location, object: "snapshots/\(decision.snapshot.id)")
            }
        }
        var pruned = (objects: 0, bytes: Int64(0))
        if prune { pruned = try await Backups.prune(repository, grace: pruneGrace, progress: progress) }
        return ForgetResult(decisions: decisions, prunedObjects: pruned.objects, prunedBytes: pruned.bytes)
    }

    /// Folds `snapshot` so that it needs none of the snapshots in `going`: the changes of the
    /// links between it and the newest link that stays (or the chain's full bundle, when no
    /// link stays) are merged with its own — each record's last change, in the order the last
    /// changes were made — into one new body, read back and checked, and its description is
    /// replaced (one object: a reader sees the old or the new). When no link stays, the full
    /// bundle is kept inside the description as its base (``RepositoryBase``), so nothing of
    /// the store is written again; once the merged changes pass half of the base's records,
    /// or for a description that does not say how many records its store held, the whole
    /// chain is written again as one full bundle instead (``rewrite(_:in:repository:)``).
    private static func fold(
        _ snapshot: RepositorySnapshot, in all: [RepositorySnapshot], going: Set<String>,
        repository: BackupRepository
    ) async throws -> RepositorySnapshot {
        let links = try chain(to: snapshot, in: all, repository: repository.location)
        try checkLinks(links, repository: repository.location)
        // A base is no snapshot of its own: it never stays as a link to build on.
        let snapshotIDs = Set(all.map(\.id))
        let staying = links.dropLast().lastIndex { snapshotIDs.contains($0.id) && !going.contains($0.id) }
        let first = staying ?? 0
        let merged = Array(links[(first + 1)...])
        guard staying != nil || (snapshot.storeRecords != nil && links[0].parts.manifest.baseToken == nil) else {
            return try await rewrite(snapshot, in: all, repository: repository)
        }
        var folded = snapshot
        if staying == nil {
            let full = links[0]
            folded.parent = nil
            // The chain's full bundle: the base of a snapshot folded before, or a full
            // snapshot's, kept now as this one's base.
            folded.base =
                links.count > 1 && links[1].base?.id == full.id
                ? links[1].base
                : RepositoryBase(
                    id: full.id, time: full.time, records: full.records, body: full.body,
                    bodyStoredBytes: full.bodyStoredBytes, parts: full.parts)
            folded.records = snapshot.storeRecords!
        } else {
            folded.parent = links[first].id
        }
        // One link left to take in: its body is already the merged changes.
        if merged.count == 1 { return try await publishFolded(folded, repository: repository) }
        // Pass 1: where each record's last change is, and its last deletion before that: a
        // name deleted and then made again (perhaps as another type) must still be deleted
        // first, or the earlier record's row would meet the new one.
        var last: [ChangeKey: Int] = [:]
        var deleted: [ChangeKey: Int] = [:]
        var position = 0
        try await forEachChange(in: merged, repository: repository) { record in
            let key = key(of: record)
            last[key] = position
            if record.isDeleted { deleted[key] = position }
            position += 1
        }
        // The positions whose changes the merged body keeps.
        var kept = Set(last.values)
        for (key, at) in deleted where at < last[key]! { kept.insert(at) }
        deleted = [:]
        if staying == nil, last.count > max(links[0].records, 1) / 2 {
            return try await rewrite(snapshot, in: all, repository: repository)
        }
        // Pass 2: those last changes, in their order, as one incremental body.
        let assets = Dictionary(
            links.flatMap(\.parts.assets).map { ($0.sha256, $0) }, uniquingKeysWith: { _, newer in newer })
        let newest = snapshot.parts
        let bodyName = repository.newDataObject()
        let body = try await repository.startObject(bodyName)
        let channel = ThreadToTask<[UInt8]>(depth: 8)
        let changes = TaskToThread<[Record]>(depth: 4)
        let base = links[first].parts.manifest.token
        let writer = Task {
            try await onOwnThread("ckport fold") { () throws -> BundleParts in
                do {
                    let parts = try BundleWriter().writeChangeParts(
                        schema: newest.schema, migrations: newest.migrations,
                        connectorState: newest.manifest.connectorState, storeID: newest.manifest.storeID,
                        token: newest.manifest.token, baseToken: base, created: newest.manifest.created,
                        assets: assets, body: { chunk in guard channel.put(chunk) else { throw CancellationError() } }
                    ) { add in
                        while let batch = try changes.take() { for record in batch { try add(record) } }
                    }
                    channel.finish()
                    return parts
                } catch {
                    changes.cancel()
                    channel.finish(throwing: error)
                    throw error
                }
            }
        }
        let uploader = Task {
            do {
                while let chunk = try await channel.next() { try await body.add(chunk) }
                try await body.finish()
            } catch {
                channel.cancel()
                await body.abort()
                throw error
            }
        }
        do {
            position = 0
            var batch: [Record] = []
            try await forEachChange(in: merged, repository: repository) { record in
                if kept.contains(position) {
                    batch.append(record)
                    if batch.count == 512 {
                        guard await changes.send(batch) else { throw CancellationError() }
                        batch = []
                    }
                }
                position += 1
            }
            if !batch.isEmpty { guard await changes.send(batch) else { throw CancellationError() } }
            changes.finish()
            try await uploader.value
        } catch {
            changes.cancel()
            channel.cancel()
            let writing = await failure(of: writer)
            let uploading = await failure(of: uploader)
            await body.abort()
            // A side that stopped because the other failed reports only that it was stopped.
            throw [error, uploading, writing].compactMap { $0 }.first { !($0 is CancellationError) } ?? error
        }
        let parts = try await writer.value
        folded.parts = parts
        folded.body = bodyName
        folded.bodyStoredBytes = body.storedBytes
        folded.bytes = body.storedBytes
        if folded.base == nil { folded.records = parts.manifest.recordCount }
        guard parts.manifest.recordCount == kept.count else {
            throw RepositoryError.damaged(
                location: repository.location, object: bodyName,
                problem:
                    "holds \(parts.manifest.recordCount) changes where the chain has \(kept.count); nothing was removed"
            )
        }
        return try await publishFolded(folded, repository: repository)
    }

    /// The error a task ended with, if any.
    private static func failure<T>(of task: Task<T, any Error>) async -> (any Error)? {
        do {
            _ = try await task.value
            return nil
        } catch {
            return error
        }
    }

    /// A snapshot's bundle without its asset files: what a fold reads of it (the files stay
    /// where they are, and the descriptions name them).
    private static func recordsOnly(_ snapshot: RepositorySnapshot) -> RepositorySnapshot {
        var records = snapshot
        records.parts.manifest.members.removeAll { $0.kind == "asset" }
        return records
    }

    /// A record's identity in a chain's changes: the first 128 bits of the SHA-256 of its
    /// zone and name (each part after its length), so that a fold of a million changes holds
    /// 16 bytes for each, and no two records share one.
    struct ChangeKey: Hashable {
        var high: UInt64
        var low: UInt64
    }

    private static func key(of record: Record) -> ChangeKey {
        let zone = record.zone
        var hasher = SHA256()
        for part in [zone.scope.rawValue, zone.zoneName, zone.ownerRecordName, record.recordName] {
            let bytes = Array(part.utf8)
            withUnsafeBytes(of: UInt64(bytes.count).littleEndian) { hasher.update(bufferPointer: $0) }
            hasher.update(data: bytes)
        }
        return hasher.finalize().withUnsafeBytes {
            ChangeKey(
                high: $0.loadUnaligned(as: UInt64.self), low: $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        }
    }

    /// Reads the changes of `links` (incremental snapshots, oldest first), one after another,
    /// each checked as a restore checks it, handing each record (a deletion as a tombstone) to
    /// `body` on the calling task.
    private static func forEachChange(
        in links: [RepositorySnapshot], repository: BackupRepository, _ body: (Record) async throws -> Void
    ) async throws {
        for link in links {
            let stream = try await SnapshotStream.open(recordsOnly(link), in: repository, stageAssets: false)
            let reader = Unchecked(stream.reader)
            do {
                let batches = ThreadToTask<[Record]>(depth: 4)
                let thread = Task {
                    try await onOwnThread("ckport fold read") {
                        do {
                            var batch: [Record] = []
                            while let item = try reader.value.next() {
                                switch item {
                                case .record(let sourced):
                                    batch.append(sourced.record)
                                    if batch.count == 512 {
                                        guard batches.put(batch) else { throw CancellationError() }
                                        batch = []
                                    }
                                case .invalid(let issue, _):
                                    throw RepositoryError.damaged(
                                        location: repository.location, object: link.body,
                                        problem: "holds a change that cannot be read (\(issue))")
                                case .asset:
                                    break
                                }
                            }
                            try reader.value.finishChecks()
                            if !batch.isEmpty { guard batches.put(batch) else { throw CancellationError() } }
                            batches.finish()
                        } catch {
                            batches.finish(throwing: error)
                            throw error
                        }
                    }
                }
                do {
                    while let batch = try await batches.next() { for record in batch { try await body(record) } }
                    try await thread.value
                } catch {
                    batches.cancel()
                    _ = try? await thread.value
                    throw error
                }
                await stream.close()
            } catch {
                await stream.close()
                throw error
            }
        }
    }

    /// Reads a folded snapshot's new body back, checked as a restore checks it, and puts the
    /// description in place of the old one. A description with a base needs a ckport that
    /// knows bases: the repository's version says so first.
    private static func publishFolded(_ folded: RepositorySnapshot, repository: BackupRepository) async throws
        -> RepositorySnapshot
    {
        if folded.base != nil { try await repository.require(version: RepositoryConfig.basesVersion) }
        let check = try await SnapshotStream.open(recordsOnly(folded), in: repository, stageAssets: false)
        let reader = Unchecked(check.reader)
        let read: Int
        do {
            read = try await onOwnThread("ckport fold check") {
                var records = 0
                while let item = try reader.value.next() { if case .record = item { records += 1 } }
                try reader.value.finishChecks()
                return records
            }
            await check.close()
        } catch {
            await check.close()
            throw error
        }
        guard read == folded.parts.manifest.recordCount else {
            throw RepositoryError.damaged(
                location: repository.location, object: folded.body,
                problem:
                    "reads back \(read) records where it was written with \(folded.parts.manifest.recordCount); nothing was removed"
            )
        }
        try await repository.publish(folded)
        return folded
    }

    /// Makes `snapshot` full: the chain it ends restored into a private temporary store, written
    /// again as a full snapshot of the same id, time and token, read back and checked, then put
    /// in place of the incremental one (one object replaced: a reader sees the old or the new).
    private static func rewrite(
        _ snapshot: RepositorySnapshot, in all: [RepositorySnapshot], repository: BackupRepository
    ) async throws -> RepositorySnapshot {
        let folder = try PrivateFiles.folder() + "/fold-" + snapshot.shortID + "-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let scratch = try RecordStore(path: folder + "/chain.sqlite")
        // The chain restored as a restore does: one link open at a time (two or three while
        // the next is fetched), in one transaction.
        _ = try await restore(
            chain: try chain(to: snapshot, in: all, repository: repository.location), from: repository,
            into: scratch)
        // The body goes to a new object; the snapshot keeps its id, so what builds on it still does.
        let bodyName = repository.newDataObject()
        let body = try await repository.startObject(bodyName)
        let channel = ThreadToTask<[UInt8]>(depth: 8)
        let producer = Task {
            try await onOwnThread("ckport fold") { () throws -> BundleParts in
                do {
                    let parts = try scratch.read { session in
                        try BundleWriter().writeParts(
                            session, body: { chunk in guard channel.put(chunk) else { throw CancellationError() } }
                        ).parts
                    }
                    channel.finish()
                    return parts
                } catch {
                    channel.finish(throwing: error)
                    throw error
                }
            }
        }
        do {
            while let chunk = try await channel.next() { try await body.add(chunk) }
            try await body.finish()
        } catch {
            channel.cancel()
            _ = try? await producer.value
            await body.abort()
            throw error
        }
        var parts = try await producer.value
        // The bundle is the snapshot's: its store and token, not the scratch store's.
        parts.manifest.storeID = snapshot.parts.manifest.storeID
        parts.manifest.token = snapshot.parts.manifest.token
        parts.manifest.baseToken = nil
        parts.manifest.created = snapshot.parts.manifest.created
        var full = snapshot
        full.parent = nil
        full.base = nil
        full.parts = parts
        full.body = bodyName
        full.bodyStoredBytes = body.storedBytes
        full.records = parts.manifest.recordCount
        full.bytes = body.storedBytes
        // Read back and checked before it takes the old one's place.
        let expected = try scratch.read { try $0.count(RecordQuery()) }
        let check = try await SnapshotStream.open(full, in: repository)
        let counted = Unchecked(check.reader)
        let read: Int
        do {
            read = try await onOwnThread("ckport fold check") {
                var records = 0
                while let item = try counted.value.next() { if case .record = item { records += 1 } }
                return records
            }
            await check.close()
        } catch {
            await check.close()
            throw error
        }
        guard read == expected else {
            throw RepositoryError.damaged(
                location: repository.location, object: bodyName,
                problem: "holds \(read) records where the folded chain has \(expected); nothing was removed")
        }
        try await repository.publish(full)
        return full
    }

    /// Removes every object no snapshot needs: bodies and asset files of snapshots that are
    /// gone, and what stopped backups left — but nothing written in the last `grace` seconds
    /// (a backup whose lock was taken for stale may still be writing it). Needs the exclusive
    /// lock. A repository that holds data but no snapshot is refused: more likely a listing
    /// that failed than a repository to empty.
    static func prune(_ repository: BackupRepository, grace: TimeInterval, progress: ((String) -> Void)?) async throws
        -> (objects: Int, bytes: Int64)
    {
        let snapshots = try await repository.snapshots()
        let cutoff = Date() - grace
        var needed = Set<String>()
        for snapshot in snapshots {
            needed.insert(snapshot.body)
            for asset in snapshot.parts.assets { needed.insert(repository.assetObject(asset.sha256)) }
            if let base = snapshot.base {
                needed.insert(base.body)
                for asset in base.parts.assets { needed.insert(repository.assetObject(asset.sha256)) }
            }
        }
        var removed = 0
        var bytes: Int64 = 0
        let objects = try await repository.storage.list("data/")
        if snapshots.isEmpty && !objects.isEmpty {
            throw RepositoryError.damaged(
                location: repository.location, object: "snapshots/",
                problem: "lists no snapshot although data/ holds \(objects.count) objects: nothing was pruned")
        }
        progress?("pruning: \(objects.count) objects, \(needed.count) needed")
        do {
            for object in objects where !needed.contains(object.key) && (object.modified ?? .distantFuture) < cutoff {
                try await repository.storage.delete(object.key)
                removed += 1
                bytes += object.size
            }
            removed += try await repository.storage.removeUnfinished(before: cutoff)
            _ = try await RepositoryLock.removeStale(repository)
        } catch let error as ObjectStorageError where error.kind == .refused {
            throw RepositoryError.cannotDelete(location: repository.location, object: "data/")
        }
        return (removed, bytes)
    }
}

/// What `verify --repo` found.
public struct RepositoryCheck: Sendable {
    public var snapshots: Int
    public var objects: Int
    /// Snapshots read whole (their bundles made again and checked member by member).
    public var read: Int
    public var problems: [String]
}

extension Backups {
    /// Checks a repository: every snapshot readable and its description sound, every chain
    /// whole, every object a snapshot names there with its size; with `readFraction` (0…1),
    /// that share of the snapshots (every one at 1) read whole, every member's SHA-256 and
    /// record count checked as a restore checks them. Problems are named, not thrown.
    public static func verify(_ repository: BackupRepository, readFraction: Double = 0) async throws -> RepositoryCheck
    {
        let lock = try await RepositoryLock.acquire(repository, exclusive: false, operation: "verify")
        do {
            let check = try await verifyLocked(repository, readFraction: readFraction)
            await lock.release()
            return check
        } catch {
            await lock.release()
            throw error
        }
    }

    private static func verifyLocked(_ repository: BackupRepository, readFraction: Double) async throws
        -> RepositoryCheck
    {
        var problems: [String] = []
        var snapshots: [RepositorySnapshot] = []
        for object in try await repository.storage.list("snapshots/") {
            do {
                snapshots.append(try await repository.snapshot(named: object.key))
            } catch {
                problems.append("\(object.key): \(error)")
            }
        }
        let objects = Dictionary(
            try await repository.storage.list("data/").map { ($0.key, $0.size) }, uniquingKeysWith: { a, _ in a })
        for snapshot in snapshots {
            let name = "snapshots/\(snapshot.id)"
            // A folded snapshot's base is checked as its own body is.
            var bodies = [(snapshot.body, snapshot.bodyStoredBytes, snapshot.parts, "the body")]
            if let base = snapshot.base { bodies.append((base.body, base.bodyStoredBytes, base.parts, "the base")) }
            for (body, storedBytes, parts, role) in bodies {
                if let problem = parts.problem() { problems.append("\(name): \(role): \(problem)") }
                if objects[body] != storedBytes {
                    problems.append(
                        objects[body] == nil
                            ? "\(body) is missing (\(role) of snapshot \(snapshot.shortID))"
                            : "\(body) is \(objects[body]!) bytes; snapshot \(snapshot.shortID) says \(storedBytes)"
                    )
                }
                for asset in parts.assets where objects[repository.assetObject(asset.sha256)] == nil {
                    problems.append(
                        "\(repository.assetObject(asset.sha256)) is missing (asset \(asset.sha256) of snapshot \(snapshot.shortID))"
                    )
                }
            }
            do {
                _ = try chain(to: snapshot, in: snapshots, repository: repository.location)
            } catch {
                problems.append("\(error)")
            }
        }
        var read = 0
        if readFraction > 0 {
            // A random share, so that runs in turn cover them all.
            let count = Int((Double(snapshots.count) * min(readFraction, 1)).rounded(.up))
            for snapshot in snapshots.shuffled().prefix(count) {
                do {
                    for bundle in [snapshot.base.map { $0.link(of: snapshot) }, snapshot].compactMap({ $0 }) {
                        let stream = try await SnapshotStream.open(bundle, in: repository, stageAssets: false)
                        let reader = Unchecked(stream.reader)
                        do {
                            _ = try await onOwnThread("ckport verify") {
                                while try reader.value.next() != nil {}
                                try reader.value.finishChecks()
                            }
                            await stream.close()
                        } catch {
                            await stream.close()
                            throw error
                        }
                    }
                    read += 1
                } catch {
                    problems.append("snapshot \(snapshot.shortID): \(error)")
                }
            }
        }
        return RepositoryCheck(snapshots: snapshots.count, objects: objects.count, read: read, problems: problems)
    }
}
