import Foundation
import Records

/// Who is using a repository, as restic keeps it: each ckport that reads or writes one puts a
/// lock object in `locks/` (a backup or a restore a shared one, a `forget --prune` an exclusive
/// one), refreshes it while it works, and removes it when done. A lock is stale, and ignored
/// (and removed by the next exclusive locker), when its host is this host and its process is
/// gone, or when it has not been refreshed for ``staleAfter``.
public final class RepositoryLock: Sendable {
    public struct Holder: Codable, Sendable, Equatable {
        public var time: String
        public var exclusive: Bool
        public var host: String
        public var pid: Int32
        public var user: String
        /// What it is doing: `backup`, `forget --prune`, …
        public var operation: String

        public init(time: String, exclusive: Bool, host: String, pid: Int32, user: String, operation: String) {
            self.time = time
            self.exclusive = exclusive
            self.host = host
            self.pid = pid
            self.user = user
            self.operation = operation
        }

        /// Who holds it, for a message.
        public var words: String {
            "\(operation) by \(user) on \(host) (process \(pid)), \(exclusive ? "exclusive, " : "")since \(time)"
        }
    }

    /// A lock not refreshed for this long is stale (ckport refreshes its own every 5 minutes).
    public static let staleAfter: TimeInterval = 30 * 60
    static let refreshEvery: TimeInterval = 5 * 60

    private let repository: BackupRepository
    public let name: String
    private let holder: Holder
    private let refresher: Task<Void, Never>

    private init(repository: BackupRepository, name: String, holder: Holder) {
        self.repository = repository
        self.name = name
        self.holder = holder
        refresher = Task { [repository, name, holder] in
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(RepositoryLock.refreshEvery * 1e9))
                if Task.isCancelled { break }
                var fresh = holder
                fresh.time = RepositoryLock.now()
                try? await repository.writeSmall(name, RepositoryLock.encode(fresh))
            }
        }
    }

    static func now() -> String { ISO8601.format(milliseconds: Int64(Date().timeIntervalSince1970 * 1000)) }

    static func encode(_ holder: Holder) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array((try? encoder.encode(holder)) ?? Data())
    }

    /// Takes a lock: shared (many may hold one together) or exclusive (no one else). Fails,
    /// naming the holder, when another's lock stands in the way.
    public static func acquire(_ repository: BackupRepository, exclusive: Bool, operation: String) async throws
        -> RepositoryLock
    {
        let holder = Holder(
            time: now(), exclusive: exclusive, host: ProcessInfo.processInfo.hostName,
            pid: ProcessInfo.processInfo.processIdentifier, user: ProcessInfo.processInfo.userName,
            operation: operation)
        // Look first, write, then look again: of two lockers that raced, at least one sees the
        // other and steps back.
        try await check(repository, exclusive: exclusive, ignoring: nil)
        let name = "locks/" + RepositoryNames.random(16)
        try await repository.writeSmall(name, encode(holder))
        do {
            try await check(repository, exclusive: exclusive, ignoring: name)
        } catch {
            try? await repository.storage.delete(name)
            throw error
        }
        return RepositoryLock(repository: repository, name: name, holder: holder)
    }

    /// Gives the lock up (a refresh under way ends first, so that it cannot write the lock
    /// again after it is gone).
    public func release() async {
        refresher.cancel()
        await refresher.value
        try? await repository.storage.delete(name)
    }

    /// Throws unless the lock still stands: before a backup makes its snapshot visible, so
    /// that one whose lock another process took for stale (and whose objects a prune may have
    /// removed) says so instead.
    public func confirm() async throws {
        guard try await repository.storage.size(of: name) != nil else {
            throw RepositoryError.lockLost(location: repository.location, lock: name)
        }
    }

    /// The locks others hold that are not stale.
    public static func holders(_ repository: BackupRepository, ignoring: String? = nil) async throws -> [(
        name: String, holder: Holder
    )] {
        var found: [(name: String, holder: Holder)] = []
        for object in try await repository.storage.list("locks/") where object.key != ignoring {
            // A lock removed since the listing is no lock; one that cannot be read stands (the
            // storage failed, or another version of ckport wrote it).
            let holder: Holder
            do {
                guard let bytes = try await repository.readSmall(object.key) else { continue }
                holder = try JSONDecoder().decode(Holder.self, from: Data(bytes))
            } catch {
                holder = Holder(
                    time: now(), exclusive: true, host: "an unknown host", pid: 0, user: "someone",
                    operation: "a lock that cannot be read (\(object.key))")
            }
            if isStale(holder) { continue }
            found.append((object.key, holder))
        }
        return found
    }

    static func isStale(_ holder: Holder) -> Bool {
        let age = Date().timeIntervalSince1970 - Double(ISO8601.parse(holder.time) ?? 0) / 1000
        if age > staleAfter { return true }
        if holder.host == ProcessInfo.processInfo.hostName, holder.pid > 0,
            kill(holder.pid, 0) != 0 && errno == ESRCH
        {
            return true
        }
        return false
    }

    private static func check(_ repository: BackupRepository, exclusive: Bool, ignoring: String?) async throws {
        for (_, holder) in try await holders(repository, ignoring: ignoring) where exclusive || holder.exclusive {
            throw RepositoryError.locked(location: repository.location, holder: holder.words)
        }
    }

    /// Removes stale locks (an exclusive locker's tidying); how many went.
    public static func removeStale(_ repository: BackupRepository) async throws -> Int {
        var removed = 0
        for object in try await repository.storage.list("locks/") {
            guard let bytes = try? await repository.readSmall(object.key),
                let holder = try? JSONDecoder().decode(Holder.self, from: Data(bytes)), isStale(holder)
            else { continue }
            try await repository.storage.delete(object.key)
            removed += 1
        }
        return removed
    }
}

/// What went wrong with a repository.
public enum RepositoryError: CKPortError, Equatable {
    /// The storage could not do what was asked (a folder not writable, a disk full).
    case storage(location: String, message: String)
    /// There is no repository there (no `config`).
    case notARepository(location: String)
    /// A repository is there already.
    case exists(location: String)
    /// The repository is encrypted and no passphrase was given.
    case needsPassphrase(location: String)
    /// No key of the repository opens with the passphrase.
    case wrongPassphrase(location: String)
    /// A passphrase was given for a repository that is not encrypted.
    case notEncrypted(location: String)
    /// An object is missing or damaged.
    case damaged(location: String, object: String, problem: String)
    /// Another process's lock stands in the way.
    case locked(location: String, holder: String)
    /// No snapshot answers the request.
    case noSnapshot(location: String, what: String)
    /// Snapshots of several stores are there and the request did not say which.
    case ambiguousStore(location: String, stores: [String])
    /// The storage refused to delete: the credentials may write but not delete (an
    /// append-only policy).
    case cannotDelete(location: String, object: String)
    /// This process's lock is gone (another took it for stale): what it wrote is not made
    /// visible.
    case lockLost(location: String, lock: String)

    public var category: ErrorCategory {
        switch self {
        case .storage, .locked, .lockLost: return .environment
        case .cannotDelete: return .authentication
        case .needsPassphrase, .wrongPassphrase: return .authentication
        case .notARepository, .exists, .notEncrypted, .noSnapshot, .ambiguousStore: return .usage
        case .damaged: return .invalidInput
        }
    }

    public var explanation: Message {
        switch self {
        case .storage(let location, let message): return "the repository \(location): \(message)"
        case .notARepository(let location): return "\(location) is not a ckport repository (it has no config)"
        case .exists(let location): return "\(location) is a ckport repository already"
        case .needsPassphrase(let location):
            return "the repository \(location) is encrypted: give its passphrase\(Wording.passphraseSource)"
        case .wrongPassphrase(let location):
            return "the passphrase does not open the repository \(location)"
        case .notEncrypted(let location):
            return
                "the repository \(location) is not encrypted, though a passphrase was given: it may not be the repository that was encrypted with it; \(Wording.allowUnencrypted)"
        case .damaged(let location, let object, let problem):
            return "the repository \(location): \(object) \(problem)"
        case .locked(let location, let holder):
            return "the repository \(location) is in use: \(holder); try again when it is done"
        case .noSnapshot(let location, let what): return "the repository \(location) holds no snapshot \(what)"
        case .lockLost(let location, let lock):
            return
                "the repository \(location): this process's lock \(lock) is gone (another process took it for stale: was this one stopped for half an hour?), so the snapshot was not made visible; run the backup again"
        case .cannotDelete(let location, let object):
            return
                "the repository \(location) refused to delete \(object): these credentials may write but not delete (an append-only key?). Forgetting and pruning need a key that may delete; backups can go on with this one"
        case .ambiguousStore(let location, let stores):
            return
                "the repository \(location) holds snapshots of \(stores.count) stores (\(stores.joined(separator: ", "))): name one\(Wording.sourceChoice)"
        }
    }

    public var description: String { explanation.description }
}
