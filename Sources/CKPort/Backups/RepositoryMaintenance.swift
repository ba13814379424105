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
    /// A kept snapshot that built on one that goes: it is made full (its chain folded into it).
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
    /// builds on one that goes is first made full: its chain is restored into a private
    /// temporary store and written again as one full snapshot with the same id, time and
    /// change token, read back and checked — only then does anything go. With `prune`, the
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
        // Fold first, oldest first: each kept snapshot that builds on one that goes becomes full.
        var current = all
        for decision in decisions.filter(\.folded).sorted(by: { $0.snapshot.milliseconds < $1.snapshot.milliseconds }) {
            progress?("making snapshot \(decision.snapshot.shortID) full (the snapshots it built on go)")
            let full = try await fold(decision.snapshot, in: current, repository: repository)
            current = current.map { $0.id == full.id ? full : $0 }
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

    /// Makes `snapshot` full: the chain it ends restored into a private temporary store, written
    /// again as a full snapshot of the same id, time and token, read back and checked, then put
    /// in place of the incremental one (one object replaced: a reader sees the old or the new).
    private static func fold(_ snapshot: RepositorySnapshot, in all: [RepositorySnapshot], repository: BackupRepository)
        async throws -> RepositorySnapshot
    {
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
            if let problem = snapshot.parts.problem() { problems.append("\(name): \(problem)") }
            if objects[snapshot.body] != snapshot.bodyStoredBytes {
                problems.append(
                    objects[snapshot.body] == nil
                        ? "\(snapshot.body) is missing (the body of snapshot \(snapshot.shortID))"
                        : "\(snapshot.body) is \(objects[snapshot.body]!) bytes; snapshot \(snapshot.shortID) says \(snapshot.bodyStoredBytes)"
                )
            }
            for asset in snapshot.parts.assets where objects[repository.assetObject(asset.sha256)] == nil {
                problems.append(
                    "\(repository.assetObject(asset.sha256)) is missing (asset \(asset.sha256) of snapshot \(snapshot.shortID))"
                )
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
                    let stream = try await SnapshotStream.open(snapshot, in: repository)
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
                    read += 1
                } catch {
                    problems.append("snapshot \(snapshot.shortID): \(error)")
                }
            }
        }
        return RepositoryCheck(snapshots: snapshots.count, objects: objects.count, read: read, problems: problems)
    }
}
