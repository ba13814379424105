import Formats
import Foundation
import ObjectStorage
import SQLiteStore
import StoreCore

/// Backup bundles made browsable: the chain checked, its records read as a restore reads them
/// (every checksum checked) into a store in this process's private folder (mode 0700), which
/// ``remove()`` deletes. The bundles themselves are only read.
public struct BundleView {
    /// The bundles, the full one first, as the view's `/bundle` page shows them.
    public let bundles: [BrowseSite.Bundle]
    /// Handles to the store the records were read into, as many as were asked for.
    public let handles: [RecordStore]
    private let folder: String

    /// Reads `paths` (a full bundle, then the incremental ones after it, each opened with
    /// `read`) and opens `handles` handles to the result.
    public static func open(
        _ paths: [String], read: BundleReadOptions, handles: Int = 1, progress: ProgressHandler? = nil
    ) throws -> BundleView {
        precondition(handles >= 1, "a view needs a handle")
        let opened = try paths.map { try Backups.open($0, options: read) }
        try Backups.checkChain(opened, intoExisting: false)
        let folder = try PrivateFiles.makeFolder("bundle-view-")
        do {
            let first = try RecordStore(path: folder + "/bundle.sqlite", create: true)
            _ = try Backups.restore(opened, into: first, options: RestoreOptions(read: read), progress: progress)
            let more = try (1..<handles).map { _ in try RecordStore(path: first.path, create: false) }
            return BundleView(
                bundles: opened.map {
                    BrowseSite.Bundle(path: $0.path, manifest: $0.manifest, encrypted: $0.isEncrypted)
                }, handles: [first] + more, folder: folder)
        } catch {
            try? FileManager.default.removeItem(atPath: folder)
            throw error
        }
    }

    /// A snapshot of a repository made browsable the same way: its chain restored as
    /// `restore --repo` restores it (every link and checksum checked) into the private store.
    /// The repository is only read, under its shared lock while the records are read.
    public static func open(
        snapshot: RepositorySnapshot, in repository: BackupRepository, handles: Int = 1,
        progress: ProgressHandler? = nil
    ) async throws -> BundleView {
        precondition(handles >= 1, "a view needs a handle")
        let folder = try PrivateFiles.makeFolder("bundle-view-")
        do {
            let first = try RecordStore(path: folder + "/bundle.sqlite", create: true)
            let lock = try await RepositoryLock.acquire(repository, exclusive: false, operation: "serve")
            let chain: [RepositorySnapshot]
            do {
                chain = try Backups.chain(
                    to: snapshot, in: try await repository.snapshots(), repository: repository.location)
                _ = try await Backups.restore(chain: chain, from: repository, into: first, progress: progress)
                await lock.release()
            } catch {
                await lock.release()
                throw error
            }
            let more = try (1..<handles).map { _ in try RecordStore(path: first.path, create: false) }
            return BundleView(
                bundles: chain.map {
                    BrowseSite.Bundle(
                        path: "snapshot \($0.shortID) in \(repository.location)", manifest: $0.parts.manifest,
                        encrypted: repository.isEncrypted)
                }, handles: [first] + more, folder: folder)
        } catch {
            try? FileManager.default.removeItem(atPath: folder)
            throw error
        }
    }

    /// Lets go of every handle and deletes the store the records were read into.
    public func remove() {
        for handle in handles { try? handle.closeConnections() }
        try? FileManager.default.removeItem(atPath: folder)
    }
}
