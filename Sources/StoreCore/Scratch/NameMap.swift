import Foundation
import Records
import Synchronization

/// Record names and the names they change to, per zone, that may grow to millions while memory
/// stays flat: held in memory up to `memoryLimit` entries, then moved into a SQLite table in a
/// temporary file of its own (in this process's private folder, ``PrivateFiles``), removed with
/// the map. A migration that gives records new names keeps here where each one went, so that
/// references to it follow.
///
/// Safe to share between threads: every call takes the map's lock.
public final class NameMap: Sendable {
    /// Entries held in memory before the map moves to disk (about 150 bytes each).
    public let memoryLimit: Int
    private let state = Mutex(State())

    private struct State {
        /// Names compared byte for byte, as the disk copy and the stores compare them (Swift's
        /// `String` equality would take "é" and "e" + U+0301 for one name; CloudKit does not).
        var memory: [ZoneID: [ExactText: String]] = [:]
        var disk: ScratchDatabase?
        /// Entries on their way to disk, written a batch at a time.
        var pending: [(zone: ZoneID, old: String, new: String)] = []
        var entries = 0

        mutating func moveToDisk() throws {
            disk = try ScratchDatabase(
                prefix: "renamed-",
                schema: """
                    CREATE TABLE names (scope TEXT, zone TEXT, owner TEXT, old TEXT, new TEXT NOT NULL, PRIMARY KEY (scope, zone, owner, old)) WITHOUT ROWID
                    """)
            for (zone, names) in memory {
                for (old, new) in names { pending.append((zone, old.text, new)) }
            }
            memory = [:]
            try flush()
        }

        /// Writes what is pending in one transaction; later entries for a name replace earlier
        /// ones.
        mutating func flush() throws {
            guard let disk else { return }
            let batch = pending
            var added = 0
            try disk.transaction {
                for entry in batch {
                    let key = [entry.zone.scope.rawValue, entry.zone.zoneName, entry.zone.ownerRecordName, entry.old]
                    if try disk.text("SELECT 1 FROM names WHERE scope = ? AND zone = ? AND owner = ? AND old = ?", key)
                        == nil
                    {
                        added += 1
                    }
                    try disk.text("INSERT OR REPLACE INTO names VALUES (?, ?, ?, ?, ?)", key + [entry.new])
                }
            }
            pending = []
            // Entries were counted as they came; names set twice count once.
            entries -= batch.count - added
        }
    }

    public init(memoryLimit: Int = 100_000) {
        self.memoryLimit = max(0, memoryLimit)
    }

    /// How many names the map holds (names set twice counted once).
    public func count() throws -> Int {
        try state.withLock { state in
            if !state.pending.isEmpty { try state.flush() }
            return state.entries
        }
    }

    /// Whether no name has been set (a name set is never taken back).
    public var isEmpty: Bool { state.withLock { $0.entries == 0 } }
    /// The folder of the disk copy, once the map has moved there.
    var diskFolder: String? { state.withLock { $0.disk?.folder } }
    /// Whether the map has moved to disk.
    public var isOnDisk: Bool { state.withLock { $0.disk != nil } }

    /// Notes that `old` in `zone` becomes `new` (a later call for the same name wins).
    public func set(_ old: String, to new: String, in zone: ZoneID) throws {
        let memoryLimit = self.memoryLimit
        try state.withLock { state in
            if state.disk == nil {
                if state.memory[zone, default: [:]].updateValue(new, forKey: ExactText(old)) == nil {
                    state.entries += 1
                }
                if state.entries > memoryLimit { try state.moveToDisk() }
                return
            }
            state.pending.append((zone, old, new))
            state.entries += 1
            if state.pending.count >= 8192 { try state.flush() }
        }
    }

    /// The name `old` in `zone` changes to, or nil when it keeps its name.
    public func newName(of old: String, in zone: ZoneID) throws -> String? {
        try state.withLock { state in
            guard let disk = state.disk else { return state.memory[zone]?[ExactText(old)] }
            if !state.pending.isEmpty { try state.flush() }
            return try disk.text(
                "SELECT new FROM names WHERE scope = ? AND zone = ? AND owner = ? AND old = ?",
                [zone.scope.rawValue, zone.zoneName, zone.ownerRecordName, old])
        }
    }
}
