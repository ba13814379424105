import CKPort
import Foundation
import ObjectStorage
import Records
import SQLiteStore
import SampleApps
import StoreCore
import TestSupport
import Testing

/// Backup repositories in a folder and in SeaweedFS (a real S3 gateway that checks every
/// signature, started by the README's test command).
@Suite("backup repositories")
struct RepositoryTests {
    enum Place: String, CaseIterable, CustomStringConvertible {
        case folder, s3, moto, rclone
        var description: String { rawValue }
    }

    /// Fresh storage of a kind: a folder of the scratch, or a bucket of its own under a prefix.
    func storage(_ place: Place, _ scratch: Scratch, _ tag: String) async throws -> any RepositoryStorage {
        switch place {
        case .folder:
            return FolderStorage(root: scratch.path("repo-\(tag)"))
        case .s3:
            guard let endpoint = S3TestServer.endpoint else { throw S3TestServerMissing() }
            return try await bucket(at: endpoint, keys: try S3TestServer.keys(), tag)
        case .moto:
            guard let endpoint = S3TestServer.motoEndpoint else { throw S3TestServerMissing() }
            return try await bucket(at: endpoint, keys: try S3TestServer.motoKeys(), tag)
        case .rclone:
            // SeaweedFS again, every object through the user's rclone (its remote `sw` set up
            // in rclone's environment, as `rclone config` would).
            guard let endpoint = S3TestServer.endpoint else { throw S3TestServerMissing() }
            let bucket = try await bucket(at: endpoint, keys: try S3TestServer.keys(), tag)
            return try RcloneStorage(
                remote: "sw:\(bucket.client.endpoint.bucket)/family/ckport", environment: try rcloneEnvironment())
        }
    }

    /// rclone's environment for the remote `sw` (SeaweedFS), and `CKPORT_RCLONE` naming it.
    func rcloneEnvironment() throws -> [String: String] {
        let program = try #require(
            ProcessInfo.processInfo.environment["CKPORT_TEST_RCLONE"],
            "CKPORT_TEST_RCLONE names rclone (the README's test command installs it)")
        let keys = try S3TestServer.keys()
        var environment = ProcessInfo.processInfo.environment
        environment["CKPORT_RCLONE"] = program
        environment["RCLONE_CONFIG_SW_TYPE"] = "s3"
        environment["RCLONE_CONFIG_SW_PROVIDER"] = "SeaweedFS"
        environment["RCLONE_CONFIG_SW_ENDPOINT"] = S3TestServer.endpoint?.absoluteString
        environment["RCLONE_CONFIG_SW_ACCESS_KEY_ID"] = keys.id
        environment["RCLONE_CONFIG_SW_SECRET_ACCESS_KEY"] = keys.secret
        environment["RCLONE_CONFIG_SW_FORCE_PATH_STYLE"] = "true"
        environment["RCLONE_CONFIG"] = "/dev/null"
        return environment
    }

    /// A new bucket of the server at `endpoint`, the repository under a prefix in it.
    func bucket(at endpoint: URL, keys: (id: String, secret: String), _ tag: String) async throws -> S3Storage {
        let client = S3Client(
            endpoint: S3Endpoint(url: endpoint, region: "us-east-1", bucket: S3TestServer.bucket(tag), pathStyle: true),
            credentials: AWSCredentials(accessKeyID: keys.id, secretAccessKey: keys.secret), attempts: 3,
            firstWait: 0.05)
        try await client.createBucket()
        return S3Storage(client: client, prefix: "family/ckport")
    }

    /// The folder always; SeaweedFS and moto where the README's test command started them (in
    /// CI always: a missing one fails).
    static var places: [Place] { S3TestServer.enabled ? Place.allCases : [.folder] }

    func todoStore(_ scratch: Scratch, count: Int, seed: UInt64 = 7, name: String = "store.sqlite") throws
        -> RecordStore
    {
        let store = try scratch.store(SampleApp.familyTodo.schemaText, name: name)
        var records: [Record] = []
        try SampleApp.familyTodo.generate(records: count, seed: seed) { records.append($0) }
        _ = try RecordImporter(store: store, options: ImportOptions()).run([ArrayRecordSource(records)])
        return store
    }

    func exported(_ store: RecordStore, _ scratch: Scratch) throws -> String {
        let name = "export-\(UUID().uuidString).jsonl"
        _ = try Exports.records(
            from: store, to: .file(scratch.path(name)), request: ExportRequest(format: .jsonLines))
        return scratch.text(name)
    }

    func restored(
        _ repository: BackupRepository, _ snapshot: RepositorySnapshot, _ scratch: Scratch,
        options: RestoreOptions = RestoreOptions()
    ) async throws -> RecordStore {
        let store = try RecordStore(path: scratch.path("restored-\(UUID().uuidString).sqlite"))
        _ = try await Backups.restore(from: repository, snapshot: snapshot, into: store, options: options)
        return store
    }

    @Test("a snapshot whose description lost its parent is refused as incremental, and the store stays empty")
    func lostParent() async throws {
        let scratch = Scratch()
        let repository = try await BackupRepository.create(
            try await storage(.folder, scratch, "lost-parent"), passphrase: nil)
        let store = try todoStore(scratch, count: 500)
        _ = try await Backups.backup(store, to: repository)
        _ = try Deletes.records(matching: RecordQuery(recordTypes: ["Task"], limit: 3), in: store)
        var increment = try await Backups.backup(store, to: repository).snapshot
        #expect(increment.parent != nil && increment.parts.manifest.baseToken != nil)
        increment.parent = nil
        try await repository.publish(increment)
        let target = try RecordStore(path: scratch.path("target.sqlite"))
        do {
            _ = try await Backups.restore(from: repository, snapshot: increment, into: target)
            Issue.record("an increment without its base was restored")
        } catch {
            #expect("\(error)".contains("is incremental"), "\(error)")
        }
        #expect(try await target.readSession { try $0.stats() }.totalRecords == 0)
    }

    @Test(
        "a full snapshot, then only the changes; each restores to the store as it was, by id and by time",
        arguments: places)
    func backupAndRestore(place: Place) async throws {
        let scratch = Scratch()
        let repository = try await BackupRepository.create(try await storage(place, scratch, "chain"), passphrase: nil)
        let store = try todoStore(scratch, count: 3_000)
        let monday = try exported(store, scratch)
        let first = try await Backups.backup(store, to: repository)
        #expect(first.snapshot.isFull && first.snapshot.records == 3_000 && first.fullBecause == nil)

        // Tuesday: a few deleted, one changed.
        let names = try store.read { session in
            var found: [String] = []
            try session.forEach(RecordQuery(recordTypes: ["Task"], limit: 5)) { found.append($0.recordName) }
            return found
        }
        _ = try Deletes.records(named: Array(names.prefix(3)), in: store)
        let tuesday = try exported(store, scratch)
        #expect(tuesday != monday)
        let second = try await Backups.backup(store, to: repository)
        #expect(second.snapshot.parent == first.snapshot.id)
        #expect(second.snapshot.records < 50 && second.snapshot.records > 0, "\(second.snapshot.records)")
        #expect(second.snapshot.bytes < first.snapshot.bytes / 10)

        let all = try await repository.snapshots()
        #expect(all.map(\.id) == [first.snapshot.id, second.snapshot.id])
        #expect(try exported(try await restored(repository, all[1], scratch), scratch) == tuesday)
        #expect(try exported(try await restored(repository, all[0], scratch), scratch) == monday)

        // By time: the newest at or before the moment; before the first, none.
        let between = (first.snapshot.milliseconds + second.snapshot.milliseconds) / 2
        let chosen = try Backups.choose(SnapshotChoice(at: second.snapshot.milliseconds), in: all, repository: "r")
        #expect(chosen.id == second.snapshot.id)
        #expect(
            try Backups.choose(SnapshotChoice(at: first.snapshot.milliseconds), in: all, repository: "r").id
                == first.snapshot.id)
        if between > first.snapshot.milliseconds {
            #expect(try Backups.choose(SnapshotChoice(at: between), in: all, repository: "r").id == first.snapshot.id)
        }
        #expect(throws: RepositoryError.self) {
            _ = try Backups.choose(SnapshotChoice(at: first.snapshot.milliseconds - 1), in: all, repository: "r")
        }
        #expect(
            try Backups.choose(SnapshotChoice(id: String(first.snapshot.id.prefix(8))), in: all, repository: "r")
                == all[0])

        // A selection on restore, as from bundles.
        let tasksOnly = try await restored(repository, all[1], scratch, options: RestoreOptions(recordTypes: ["Task"]))
        let held = try tasksOnly.read { try $0.stats() }.entries.filter { $0.records > 0 }.map(\.recordType)
        #expect(Set(held) == ["Task"])
    }

    @Test(
        "two stores in one repository: each builds on its own snapshots, and a choice that names neither is refused",
        arguments: places)
    func twoStores(place: Place) async throws {
        let scratch = Scratch()
        let repository = try await BackupRepository.create(try await storage(place, scratch, "two"), passphrase: nil)
        let family = try todoStore(scratch, count: 500, seed: 1, name: "family.sqlite")
        let grandparents = try todoStore(scratch, count: 700, seed: 2, name: "grandparents.sqlite")
        let a1 = try await Backups.backup(family, to: repository)
        let b1 = try await Backups.backup(grandparents, to: repository)
        let a2 = try await Backups.backup(family, to: repository)
        let b2 = try await Backups.backup(grandparents, to: repository)
        #expect(a1.snapshot.isFull && b1.snapshot.isFull)
        #expect(a2.snapshot.parent == a1.snapshot.id && b2.snapshot.parent == b1.snapshot.id)
        let all = try await repository.snapshots()
        #expect(
            throws: RepositoryError.ambiguousStore(
                location: "r", stores: [family.storeID, grandparents.storeID].sorted())
        ) {
            _ = try Backups.choose(SnapshotChoice(), in: all, repository: "r")
        }
        let newestOfB = try Backups.choose(
            SnapshotChoice(source: String(grandparents.storeID.prefix(6))), in: all, repository: "r")
        #expect(newestOfB.id == b2.snapshot.id)
        #expect(
            try exported(try await restored(repository, newestOfB, scratch), scratch) == exported(grandparents, scratch)
        )
        #expect(
            try Backups.chain(to: a2.snapshot, in: all, repository: "r").map(\.id) == [a1.snapshot.id, a2.snapshot.id])
    }

    @Test(
        "an encrypted repository: names and bytes tell nothing, the passphrase is checked and can change",
        arguments: places)
    func encrypted(place: Place) async throws {
        let scratch = Scratch()
        let storage = try await storage(place, scratch, "sealed")
        let repository = try await BackupRepository.create(storage, passphrase: "correct horse")
        let store = try todoStore(scratch, count: 800)
        let made = try await Backups.backup(store, to: repository)
        // Nothing stored shows a record type, a zone, a store path or a record's text.
        let objects = try await storage.list("")
        #expect(objects.count >= 4)
        let telling = ["Task", "Household", "FamilyZone", "store.sqlite", "recordName"]
        for object in objects where object.key != "config" {
            let bytes = try #require(try await storage.read(object.key, limit: 64 << 20))
            let text = String(decoding: bytes, as: UTF8.self)
            for word in telling {
                #expect(!object.key.contains(word) && !text.contains(word), "\(object.key) shows \(word)")
            }
        }
        await #expect(throws: RepositoryError.wrongPassphrase(location: storage.location)) {
            _ = try await BackupRepository.open(storage, passphrase: "wrong")
        }
        await #expect(throws: RepositoryError.needsPassphrase(location: storage.location)) {
            _ = try await BackupRepository.open(storage, passphrase: nil)
        }
        try await repository.changePassphrase(to: "battery staple")
        await #expect(throws: RepositoryError.wrongPassphrase(location: storage.location)) {
            _ = try await BackupRepository.open(storage, passphrase: "correct horse")
        }
        let reopened = try await BackupRepository.open(storage, passphrase: "battery staple")
        let snapshot = try #require(try await reopened.snapshots().first)
        #expect(snapshot == made.snapshot)
        #expect(try exported(try await restored(reopened, snapshot, scratch), scratch) == exported(store, scratch))
        // A plain repository where an encrypted one was expected is refused.
        let plain = try await BackupRepository.create(try await self.storage(place, scratch, "plain"), passphrase: nil)
        await #expect(throws: RepositoryError.self) {
            _ = try await BackupRepository.open(plain.storage, passphrase: "battery staple")
        }
    }

    @Test("a damaged body fails the restore naming the object, and the store gets nothing", arguments: places)
    func damage(place: Place) async throws {
        for sealed in [false, true] {
            let scratch = Scratch()
            let storage = try await storage(place, scratch, sealed ? "dmg-sealed" : "dmg")
            let repository = try await BackupRepository.create(storage, passphrase: sealed ? "pass" : nil)
            let store = try todoStore(scratch, count: 1_500)
            let made = try await Backups.backup(store, to: repository)
            let body = made.snapshot.body
            var bytes = try #require(try await storage.read(body, limit: 64 << 20))
            bytes[bytes.count / 2] ^= 0x5A
            try await storage.write(body, bytes)
            let path = scratch.path("target.sqlite")
            let target = try RecordStore(path: path)
            do {
                _ = try await Backups.restore(from: repository, snapshot: made.snapshot, into: target)
                Issue.record("a damaged snapshot restored (sealed: \(sealed))")
            } catch {
                let text = "\(error)"
                #expect(
                    text.contains(body) || text.contains("damaged") || text.contains("SHA-256")
                        || text.contains("snapshot"),
                    "\(text)")
            }
            // The store that was made for the restore is gone again, or empty.
            #expect(
                !FileManager.default.fileExists(atPath: path) || (try? target.read { try $0.count(RecordQuery()) }) == 0
            )
        }
    }

    @Test(
        "a chain whose later link lost its body or was cut short is refused before any of it is read, naming the object",
        arguments: places)
    func brokenLink(place: Place) async throws {
        let scratch = Scratch()
        let storage = try await storage(place, scratch, "broken-link")
        let repository = try await BackupRepository.create(storage, passphrase: nil)
        let store = try todoStore(scratch, count: 900)
        let full = try await Backups.backup(store, to: repository).snapshot
        try retitle(store, made: 900, from: 1, count: 4, mark: "one")
        let middle = try await Backups.backup(store, to: repository).snapshot
        try retitle(store, made: 900, from: 9, count: 4, mark: "two")
        let newest = try await Backups.backup(store, to: repository).snapshot
        #expect(newest.parent == middle.id && middle.parent == full.id)
        for damage in ["missing", "short"] {
            let bytes = try #require(try await storage.read(middle.body, limit: 64 << 20))
            if damage == "missing" {
                try await storage.delete(middle.body)
            } else {
                try await storage.write(middle.body, Array(bytes.dropLast(3)))
            }
            let path = scratch.path("target-\(damage).sqlite")
            let target = try RecordStore(path: path)
            await #expect {
                _ = try await Backups.restore(from: repository, snapshot: newest, into: target)
            } throws: { error in
                "\(error)".contains(middle.body) && "\(error)".contains(damage == "missing" ? "is missing" : "bytes")
            }
            #expect((try? target.read { try $0.count(RecordQuery()) }) ?? 0 == 0)
            try await storage.write(middle.body, bytes)
        }
        #expect(try exported(try await restored(repository, newest, scratch), scratch) == exported(store, scratch))
    }

    @Test("asset files are kept once, by their SHA-256, and come back with the records", arguments: places)
    func assets(place: Place) async throws {
        let scratch = Scratch()
        let repository = try await BackupRepository.create(try await storage(place, scratch, "assets"), passphrase: "p")
        let store = try RecordStore(path: scratch.path("photos.sqlite"))
        try store.importSchema(
            SchemaParser.parse("DEFINE SCHEMA RECORD TYPE Photo (title STRING, cover ASSET, pages LIST<ASSET>);"))
        var generator = SystemRandomNumberGenerator()
        let files: [String: [UInt8]] = [
            "big": (0..<2_500_000).map { _ in UInt8.random(in: 0...255, using: &generator) },
            "small": Array("a page of a family recipe book".utf8), "empty": [],
        ]
        for (name, bytes) in files { try Data(bytes).write(to: URL(fileURLWithPath: scratch.path(name))) }
        func asset(_ name: String) -> FieldValue {
            .asset(Asset(fileChecksum: "ck-\(name)", size: Int64(files[name]!.count), localPath: name))
        }
        var options = ImportOptions()
        options.assetDirectory = scratch.url.path
        _ = try RecordImporter(store: store, options: options).run([
            ArrayRecordSource([
                Record(
                    id: RecordID(recordName: "p1"), recordType: "Photo",
                    fields: RecordFields([
                        "cover": asset("big"), "pages": .list(.asset, [asset("small"), asset("empty")]),
                    ])),
                Record(
                    id: RecordID(recordName: "p2"), recordType: "Photo", fields: RecordFields(["cover": asset("small")])
                ),
            ])
        ])
        let first = try await Backups.backup(store, to: repository)
        #expect(first.newAssets == 3 && first.keptAssets == 0)
        let second = try await Backups.backup(store, to: repository, options: RepositoryBackupOptions(full: true))
        #expect(second.snapshot.isFull && second.newAssets == 0 && second.keptAssets == 3)
        #expect(second.snapshot.bytes < 100_000, "the big file is not stored again: \(second.snapshot.bytes)")
        let back = try await restored(repository, second.snapshot, scratch)
        let held = try back.read { session in
            var found: [String: Int] = [:]
            for sha in first.snapshot.parts.assets.map(\.sha256) {
                var count = 0
                _ = try session.readAsset(sha) { count += $0.count }
                found[sha] = count
            }
            return found
        }
        #expect(held.values.sorted() == [0, 30, 2_500_000])
    }

    @Test(
        "a snapshot is visible only when all of it is written; what a stopped backup left is cleared", arguments: places
    )
    func halfWritten(place: Place) async throws {
        let scratch = Scratch()
        let storage = try await storage(place, scratch, "half")
        let repository = try await BackupRepository.create(storage, passphrase: nil)
        // A backup stopped after sending some of its body: an upload never finished.
        let object = try await repository.startObject(repository.newDataObject())
        try await object.add([UInt8](repeating: 1, count: RepositoryUploadLimits.partSize + 10))
        try await object.add([UInt8](repeating: 2, count: RepositoryUploadLimits.partSize + 10))
        #expect(try await repository.snapshots().isEmpty)
        #expect(try await storage.list("data/").isEmpty, "a half object must not show")
        // Another program's upload in the same bucket, and one of a name ckport never makes,
        // are not the repository's to remove.
        var others: [(key: String, id: String)] = []
        if let s3 = storage as? S3Storage {
            for key in ["elsewhere/video.mp4", s3.prefix + "data/notes.txt"] {
                others.append((key, try await s3.client.startUpload(key)))
            }
        }
        if storage is RcloneStorage {
            // rclone stores what it was given when its writer dies: a killed backup leaves a
            // whole object under partial/, never under the name it was writing.
            try await storage.write("partial/killed-writer", [1, 2, 3])
            #expect(try await storage.list("").allSatisfy { !$0.key.hasPrefix("partial/") })
            await object.abort()
        }
        #expect(try await storage.removeUnfinished(before: Date() + 60) >= 1)
        #expect(try await storage.removeUnfinished(before: Date() + 60) == 0)
        if let s3 = storage as? S3Storage {
            let left = Set(try await s3.client.uploads(prefix: "").map(\.key))
            #expect(left == Set(others.map(\.key)), "\(left)")
            for other in others { try await s3.client.abortUpload(other.key, uploadID: other.id) }
        }
    }

    @Test("what other programs leave in a folder repository (.DS_Store, ._x) is not the repository's")
    func strayFiles() async throws {
        let scratch = Scratch()
        let storage = FolderStorage(root: scratch.path("repo"))
        let repository = try await BackupRepository.create(storage, passphrase: "p")
        let store = try todoStore(scratch, count: 100)
        _ = try await Backups.backup(store, to: repository)
        for stray in ["snapshots/.DS_Store", "keys/._0000", "data/.DS_Store", ".DS_Store"] {
            try Data("Finder was here".utf8).write(to: URL(fileURLWithPath: scratch.path("repo/" + stray)))
        }
        let reopened = try await BackupRepository.open(storage, passphrase: "p")
        #expect(try await reopened.snapshots().count == 1)
        #expect(try await storage.list("").allSatisfy { !$0.key.split(separator: "/").last!.hasPrefix(".") })
        // A folder that cannot be read is an error, not an empty repository.
        chmod(scratch.path("repo/snapshots"), 0)
        defer { chmod(scratch.path("repo/snapshots"), 0o700) }
        if getuid() != 0 {
            await #expect(throws: RepositoryError.self) { _ = try await reopened.snapshots() }
        }
    }

    @Test(
        "locks: an exclusive holder keeps a backup out, naming itself; a dead process's lock is stale",
        arguments: places)
    func locks(place: Place) async throws {
        let scratch = Scratch()
        let repository = try await BackupRepository.create(try await storage(place, scratch, "locks"), passphrase: nil)
        let store = try todoStore(scratch, count: 200)
        let exclusive = try await RepositoryLock.acquire(repository, exclusive: true, operation: "forget --prune")
        do {
            _ = try await Backups.backup(store, to: repository)
            Issue.record("a backup ran beside an exclusive lock")
        } catch let error as RepositoryError {
            guard case .locked(_, let holder) = error else { throw error }
            #expect(holder.contains("forget --prune") && holder.contains("process \(getpid())"))
        }
        // Two shared locks stand together; an exclusive one does not join them.
        await exclusive.release()
        let shared = try await RepositoryLock.acquire(repository, exclusive: false, operation: "backup")
        _ = try await Backups.backup(store, to: repository)
        await #expect(throws: RepositoryError.self) {
            _ = try await RepositoryLock.acquire(repository, exclusive: true, operation: "forget --prune")
        }
        await shared.release()
        // A lock of this host whose process is gone is stale.
        let dead = RepositoryLock.Holder(
            time: ISO8601.format(milliseconds: Int64(Date().timeIntervalSince1970 * 1000)), exclusive: true,
            host: ProcessInfo.processInfo.hostName, pid: 999_999, user: "someone", operation: "backup")
        try await repository.storage.write("locks/dead", Array(try JSONEncoder().encode(dead)))
        #expect(try await RepositoryLock.holders(repository).isEmpty)
        _ = try await Backups.backup(store, to: repository)
        #expect(try await RepositoryLock.removeStale(repository) == 1)
    }

    /// Gives the snapshots the times of consecutive days (a backup's time is its moment).
    func spreadOverDays(_ repository: BackupRepository, _ snapshots: [RepositorySnapshot], from start: String)
        async throws
    {
        let first = try #require(ISO8601.parse(start))
        for (index, snapshot) in snapshots.enumerated() {
            var moved = snapshot
            moved.time = ISO8601.format(milliseconds: first + Int64(index) * 86_400_000)
            try await repository.publish(moved)
        }
    }

    @Test(
        "forget keeps what the policy keeps; a kept snapshot built on one that goes is folded; prune frees the rest; another store is not touched",
        arguments: places)
    func forget(place: Place) async throws {
        let scratch = Scratch()
        let repository = try await BackupRepository.create(try await storage(place, scratch, "forget"), passphrase: "p")
        let store = try todoStore(scratch, count: 1_200)
        let other = try todoStore(scratch, count: 300, seed: 3, name: "other.sqlite")
        var states: [String] = []
        var made: [RepositorySnapshot] = []
        for day in 0..<5 {
            if day > 0 {
                let name = try store.read { session in
                    var found: [String] = []
                    try session.forEach(RecordQuery(recordTypes: ["Task"], limit: 1)) { found.append($0.recordName) }
                    return found
                }
                _ = try Deletes.records(named: name, in: store)
            }
            states.append(try exported(store, scratch))
            made.append(try await Backups.backup(store, to: repository).snapshot)
        }
        let otherSnapshot = try await Backups.backup(other, to: repository).snapshot
        try await spreadOverDays(repository, made, from: "2026-11-01T18:00:00Z")
        let before = try await repository.storage.list("")

        // A dry run decides and changes nothing.
        let dry = try await Backups.forget(
            repository, policy: RetentionPolicy(last: 2), source: String(store.storeID.prefix(6)), dryRun: true,
            timeZone: TimeZone(identifier: "UTC")!)
        #expect(dry.decisions.map(\.kept) == [false, false, false, true, true])
        #expect(dry.decisions.map(\.folded) == [false, false, false, true, false])
        #expect(try await repository.storage.list("").map(\.key) == before.map(\.key))

        let result = try await Backups.forget(
            repository, policy: RetentionPolicy(last: 2), source: String(store.storeID.prefix(6)), prune: true,
            pruneGrace: 0, timeZone: TimeZone(identifier: "UTC")!)
        #expect(result.prunedObjects >= 3, "\(result.prunedObjects)")
        let left = try await repository.snapshots()
        #expect(Set(left.map(\.id)) == [made[3].id, made[4].id, otherSnapshot.id])
        let fourth = try #require(left.first { $0.id == made[3].id })
        #expect(fourth.isFull && fourth.token == made[3].token && fourth.records > 1_000)
        let fifth = try #require(left.first { $0.id == made[4].id })
        #expect(fifth.parent == fourth.id)
        #expect(try exported(try await restored(repository, fourth, scratch), scratch) == states[3])
        #expect(try exported(try await restored(repository, fifth, scratch), scratch) == states[4])
        #expect(
            try exported(try await restored(repository, otherSnapshot, scratch), scratch) == exported(other, scratch))
        // The next backup still builds on the newest.
        let next = try await Backups.backup(store, to: repository)
        #expect(next.snapshot.parent == made[4].id)
        // The repository checks out, read whole.
        let check = try await Backups.verify(repository, readFraction: 1)
        #expect(check.problems.isEmpty, "\(check.problems)")
        #expect(check.read == 4 && check.snapshots == 4)
    }

    /// Changes the titles of `count` records of the family-todo store made with `seed` (those
    /// that have one), from the `from`th, to carry `mark`; returns how many changed.
    @discardableResult
    func retitle(_ store: RecordStore, made: Int, seed: UInt64 = 7, from: Int, count: Int, mark: String) throws -> Int {
        var records: [Record] = []
        try SampleApp.familyTodo.generate(records: made, seed: seed) { records.append($0) }
        var changed: [Record] = []
        for var record in records.dropFirst(from) where changed.count < count {
            guard case .string(let title)? = record.fields["title"] else { continue }
            record.fields["title"] = .string(title + " " + mark)
            changed.append(record)
        }
        _ = try RecordImporter(store: store, options: ImportOptions()).run([ArrayRecordSource(changed)])
        return changed.count
    }

    @Test(
        "forget folds the changes onto a snapshot that stays, onto the same base again, and writes the chain anew once its changes pass half the base",
        arguments: places)
    func folds(place: Place) async throws {
        let scratch = Scratch()
        let repository = try await BackupRepository.create(try await storage(place, scratch, "folds"), passphrase: "p")
        let store = try todoStore(scratch, count: 600)
        var states: [String] = []
        var made: [RepositorySnapshot] = []
        // Six nightly snapshots: a few titles changed each night, one record deleted on the third.
        for night in 0..<6 {
            if night > 0 { try retitle(store, made: 600, from: night * 7, count: 10, mark: "night \(night)") }
            if night == 3 {
                let name = try store.read { session in
                    var found: [String] = []
                    try session.forEach(RecordQuery(recordTypes: ["Task"], limit: 1)) { found.append($0.recordName) }
                    return found
                }
                _ = try Deletes.records(named: name, in: store)
            }
            states.append(try exported(store, scratch))
            made.append(try await Backups.backup(store, to: repository).snapshot)
        }
        let full = made[0]
        // The first night's in the year before, the others this year: keeping one of each year
        // keeps the full snapshot and the newest; the newest folds onto the full one.
        var moved = made
        for index in moved.indices {
            moved[index].time = index == 0 ? "2025-12-30T18:00:00.000Z" : "2026-01-0\(index)T18:00:00.000Z"
            try await repository.publish(moved[index])
        }
        let utc = TimeZone(identifier: "UTC")!
        _ = try await Backups.forget(
            repository, policy: RetentionPolicy(yearly: 2), prune: true, pruneGrace: 0, timeZone: utc)
        var left = try await repository.snapshots()
        #expect(left.map(\.id) == [made[0].id, made[5].id])
        let onFull = try #require(left.last)
        #expect(onFull.parent == full.id && onFull.base == nil && onFull.body != made[5].body)
        #expect(onFull.records > 10 && onFull.records <= 51, "\(onFull.records)")
        #expect(try exported(try await restored(repository, onFull, scratch), scratch) == states[5])

        // Two more nights, then only the newest stays: the full snapshot goes, and what stays
        // keeps its bundle as a base; its body holds the merged changes, not the store.
        // Night 6 also deletes a task, and night 7 makes its name again, as an area: the fold
        // must still delete it before the name comes back as another type.
        var reused: RecordID?
        for night in 6..<8 {
            try retitle(store, made: 600, from: night * 7, count: 10, mark: "night \(night)")
            if night == 6 {
                let task = try store.read { session in
                    var found: [Record] = []
                    try session.forEach(RecordQuery(recordTypes: ["Task"], limit: 1)) { found.append($0) }
                    return found[0]
                }
                reused = task.id
                _ = try Deletes.records(named: [task.recordName], in: store)
            } else if let reused {
                let area = Record(id: reused, recordType: "Area", fields: ["name": .string("made again as an area")])
                _ = try RecordImporter(store: store, options: ImportOptions()).run([ArrayRecordSource([area])])
            }
            states.append(try exported(store, scratch))
            made.append(try await Backups.backup(store, to: repository).snapshot)
        }
        // A repository of the first version: folding onto a base raises it, so that a ckport
        // that knows no bases refuses it.
        let configBytes = try #require(try await repository.storage.read("config", limit: 1 << 20))
        var first = try #require(try JSONSerialization.jsonObject(with: Data(configBytes)) as? [String: Any])
        first["version"] = 1
        try await repository.storage.write("config", Array(try JSONSerialization.data(withJSONObject: first)))
        _ = try await Backups.forget(
            repository, policy: RetentionPolicy(last: 1), prune: true, pruneGrace: 0, timeZone: utc)
        left = try await repository.snapshots()
        let folded = try #require(left.first)
        #expect(left.count == 1 && folded.id == made[7].id)
        #expect(folded.isFull && folded.base?.id == full.id && folded.base?.body == full.body)
        let raisedBytes = try #require(try await repository.storage.read("config", limit: 1 << 20))
        let raised = try JSONSerialization.jsonObject(with: Data(raisedBytes))
        #expect((raised as? [String: Any])?["version"] as? Int == RepositoryConfig.basesVersion)
        #expect(folded.parts.manifest.baseToken == full.token && folded.token == made[7].token)
        #expect(folded.records == (try store.read { try $0.count(RecordQuery()) }))
        #expect(folded.bodyStoredBytes < full.bodyStoredBytes / 2)
        #expect(try await repository.storage.size(of: full.body) == full.bodyStoredBytes)
        #expect(try exported(try await restored(repository, folded, scratch), scratch) == states[7])
        // The next backup builds on it, and the next fold keeps the same base.
        try retitle(store, made: 600, from: 70, count: 10, mark: "night 8")
        states.append(try exported(store, scratch))
        let ninth = try await Backups.backup(store, to: repository).snapshot
        #expect(ninth.parent == folded.id)
        try retitle(store, made: 600, from: 90, count: 10, mark: "night 9")
        states.append(try exported(store, scratch))
        let tenth = try await Backups.backup(store, to: repository).snapshot
        _ = try await Backups.forget(
            repository, policy: RetentionPolicy(last: 1), prune: true, pruneGrace: 0, timeZone: utc)
        let again = try #require(try await repository.snapshots().first)
        #expect(again.id == tenth.id && again.base?.id == full.id && again.parent == nil)
        #expect(try exported(try await restored(repository, again, scratch), scratch) == states[9])
        var check = try await Backups.verify(repository, readFraction: 1)
        #expect(check.problems.isEmpty && check.read == 1, "\(check.problems)")

        // Most of the records changed (the area made on night 7 goes first: its name is a
        // task's again): the chain is written again as one full bundle, and the base goes with
        // the prune.
        _ = try Deletes.records(named: [try #require(reused).recordName], in: store)
        // (Its own snapshot: an increment holds a name's last state only, and one that found
        // the area gone and the task back would hold the task alone, which cannot follow the
        // area; docs/backup-and-restore.md says so.)
        states.append(try exported(store, scratch))
        _ = try await Backups.backup(store, to: repository)
        let many = try retitle(store, made: 600, from: 0, count: 600, mark: "spring cleaning")
        #expect(many > 300)
        states.append(try exported(store, scratch))
        _ = try await Backups.backup(store, to: repository)
        try retitle(store, made: 600, from: 5, count: 3, mark: "after")
        states.append(try exported(store, scratch))
        let last = try await Backups.backup(store, to: repository).snapshot
        _ = try await Backups.forget(
            repository, policy: RetentionPolicy(last: 1), prune: true, pruneGrace: 0, timeZone: utc)
        let rewritten = try #require(try await repository.snapshots().first)
        #expect(rewritten.id == last.id && rewritten.base == nil && rewritten.parent == nil)
        #expect(rewritten.parts.manifest.baseToken == nil)
        #expect(try await repository.storage.size(of: full.body) == nil)
        #expect(try exported(try await restored(repository, rewritten, scratch), scratch) == states[12])
        check = try await Backups.verify(repository, readFraction: 1)
        #expect(check.problems.isEmpty && check.read == 1, "\(check.problems)")
    }

    /// moto with IAM checked (`Tests/Fixtures/moto-append-only.py`): its endpoint and the keys
    /// of `owner` (everything) and `appender` (may delete only under the prefix's locks/).
    final class AppendOnlyServer {
        let process = Process()
        let input = Pipe()
        let endpoint: URL
        let keys: [String: (id: String, secret: String)]

        init(bucket: String, prefix: String) async throws {
            let venv =
                ProcessInfo.processInfo.environment["CKPORT_TEST_VENV"] ?? NSHomeDirectory()
                + "/.cache/ckport-test-venv"
            process.executableURL = URL(fileURLWithPath: venv + "/bin/python")
            process.arguments = [
                packageRoot.appendingPathComponent("Tests/Fixtures/moto-append-only.py").path, bucket, prefix,
            ]
            let output = Pipe()
            process.standardOutput = output
            process.standardInput = input
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try process.run()
            // Read on a thread of its own: the pool's threads are not held while Python starts.
            let line = try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<Data, any Error>) in
                Thread {
                    var line = Data()
                    while !line.contains(0x0A) {
                        let more = output.fileHandleForReading.availableData
                        guard !more.isEmpty else {
                            continuation.resume(throwing: S3TestServerMissing())
                            return
                        }
                        line.append(more)
                    }
                    continuation.resume(returning: line)
                }.start()
            }
            let answer = try #require(try JSONSerialization.jsonObject(with: line) as? [String: Any])
            let address = try #require(answer["endpoint"] as? String)
            endpoint = try #require(URL(string: address))
            var keys: [String: (id: String, secret: String)] = [:]
            for (user, value) in try #require(answer["keys"] as? [String: [String: String]]) {
                keys[user] = (value["id"]!, value["secret"]!)
            }
            self.keys = keys
        }

        func storage(_ user: String, bucket: String, prefix: String) -> S3Storage {
            let key = keys[user]!
            let client = S3Client(
                endpoint: S3Endpoint(url: endpoint, region: "us-east-1", bucket: bucket, pathStyle: true),
                credentials: AWSCredentials(accessKeyID: key.id, secretAccessKey: key.secret), attempts: 2,
                firstWait: 0.05)
            return S3Storage(client: client, prefix: prefix)
        }

        deinit {
            try? input.fileHandleForWriting.close()
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
    }

    @Test(
        "an append-only key (it may delete only locks) backs up and restores; forget with it says why it cannot and removes nothing; the owner's key forgets and clears what a stopped backup left",
        .enabled(if: S3TestServer.enabled))
    func appendOnly() async throws {
        let scratch = Scratch()
        let bucket = S3TestServer.bucket("append")
        let server = try await AppendOnlyServer(bucket: bucket, prefix: "family/ckport")
        let owner = server.storage("owner", bucket: bucket, prefix: "family/ckport")
        let appender = server.storage("appender", bucket: bucket, prefix: "family/ckport")
        // The key is checked: the appender may not delete a snapshot's data.
        _ = try await BackupRepository.create(owner, passphrase: nil)
        try await owner.write("data/probe", [1])
        await #expect(throws: ObjectStorageError.self) { try await appender.delete("data/probe") }
        #expect(try await owner.size(of: "data/probe") == 1)
        try await owner.delete("data/probe")

        let repository = try await BackupRepository.open(appender, passphrase: nil, allowUnencrypted: true)
        let store = try todoStore(scratch, count: 800)
        let first = try await Backups.backup(store, to: repository).snapshot
        // A backup stopped halfway: its upload never finished, and this key cannot clear it.
        let stopped = try await repository.startObject(repository.newDataObject())
        try await stopped.add([UInt8](repeating: 7, count: RepositoryUploadLimits.partSize + 10))
        try await stopped.add([UInt8](repeating: 8, count: RepositoryUploadLimits.partSize + 10))
        try retitle(store, made: 800, from: 3, count: 5, mark: "later")
        let second = try await Backups.backup(store, to: repository).snapshot
        #expect(second.parent == first.id)
        let unfinished = try await owner.client.uploads(prefix: "")
        #expect(unfinished.count == 1, "\(unfinished)")
        #expect(try await owner.list("locks/").isEmpty, "the appender's locks went")
        #expect(try exported(try await restored(repository, second, scratch), scratch) == exported(store, scratch))

        let before = try await owner.list("snapshots/").map(\.key)
        await #expect {
            _ = try await Backups.forget(
                repository, policy: RetentionPolicy(last: 1), prune: true, pruneGrace: 0,
                timeZone: TimeZone(identifier: "UTC")!)
        } throws: { error in
            "\(error)".contains("refused to delete") && "\(error)".contains("append-only")
        }
        #expect(try await owner.list("snapshots/").map(\.key) == before)
        #expect(try await owner.list("locks/").isEmpty)
        let afterRefusal = try await repository.snapshots()
        #expect(
            try exported(try await restored(repository, afterRefusal.last!, scratch), scratch)
                == exported(store, scratch))

        // The owner's key forgets and prunes.
        let asOwner = try await BackupRepository.open(owner, passphrase: nil, allowUnencrypted: true)
        _ = try await Backups.forget(
            asOwner, policy: RetentionPolicy(last: 1), prune: true, pruneGrace: 0,
            timeZone: TimeZone(identifier: "UTC")!)
        #expect(try await asOwner.snapshots().map(\.id) == [second.id])
        // The stopped backup's upload waited for this prune.
        #expect(try await owner.client.uploads(prefix: "").isEmpty)
        let kept = try #require(try await asOwner.snapshots().first)
        #expect(try exported(try await restored(asOwner, kept, scratch), scratch) == exported(store, scratch))
    }

    @Test("verify names a missing object and a damaged one", arguments: places)
    func verify(place: Place) async throws {
        let scratch = Scratch()
        let repository = try await BackupRepository.create(try await storage(place, scratch, "verify"), passphrase: nil)
        let store = try todoStore(scratch, count: 900)
        let first = try await Backups.backup(store, to: repository).snapshot
        let second = try await Backups.backup(store, to: repository, options: RepositoryBackupOptions(full: true))
            .snapshot
        #expect(try await Backups.verify(repository, readFraction: 1).problems.isEmpty)
        var bytes = try #require(try await repository.storage.read(second.body, limit: 64 << 20))
        bytes[bytes.count / 3] ^= 0x01
        try await repository.storage.write(second.body, bytes)
        try await repository.storage.delete(first.body)
        let check = try await Backups.verify(repository, readFraction: 1)
        #expect(check.problems.contains { $0.contains(first.body) && $0.contains("missing") }, "\(check.problems)")
        #expect(check.problems.contains { $0.contains(second.shortID) }, "\(check.problems)")
        // Without reading data, the missing body is still found; the flipped byte is not.
        let quick = try await Backups.verify(repository)
        #expect(quick.problems.count == 1 && quick.read == 0)
    }

    /// Runs rclone with a remote `sw` for SeaweedFS given in its environment (never on its
    /// command line); its status and output.
    func rclone(_ arguments: [String], input: String? = nil) throws -> (status: Int32, output: String) {
        let environment = try rcloneEnvironment()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: environment["CKPORT_RCLONE"]!)
        process.arguments = arguments
        process.environment = environment
        let scratch = Scratch()
        let output = scratch.url.appendingPathComponent("rclone.out")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        process.waitUntilExit()
        try handle.close()
        return (process.terminationStatus, try String(contentsOf: output, encoding: .utf8))
    }

    @Test(
        "rclone, a client nobody here wrote, lists and reads what ckport wrote; an object it damages is found",
        .enabled(if: S3TestServer.enabled))
    func rcloneReadsTheRepository() async throws {
        let scratch = Scratch()
        let storage = try #require(try await storage(.s3, scratch, "rclone") as? S3Storage)
        let repository = try await BackupRepository.create(storage, passphrase: nil)
        let store = try todoStore(scratch, count: 1_000)
        let made = try await Backups.backup(store, to: repository).snapshot
        let root = "sw:\(storage.client.endpoint.bucket)/family/ckport"
        let listed = try rclone(["lsf", "-R", "--files-only", root])
        #expect(listed.status == 0, "\(listed.output)")
        let names = Set(listed.output.split(separator: "\n").map(String.init))
        let ours = Set(try await storage.list("").map(\.key))
        #expect(!ours.isEmpty && names == ours, "rclone: \(names.sorted()); ckport: \(ours.sorted())")
        let config = try rclone(["cat", root + "/config"])
        #expect(config.status == 0 && config.output.contains("\"ckport-repository\""), "\(config.output)")
        // rclone copies the body down; its bytes are what ckport reads.
        let copy = scratch.path("body")
        #expect(try rclone(["copyto", root + "/" + made.body, copy]).status == 0)
        let body = try #require(FileManager.default.contents(atPath: copy))
        #expect(body.count == made.bodyStoredBytes)
        #expect(try await storage.read(made.body, limit: 64 << 20) == [UInt8](body))
        // Damaged through rclone, and found by verify and by a restore.
        var damaged = [UInt8](body)
        damaged[damaged.count / 2] ^= 0x20
        try Data(damaged).write(to: URL(fileURLWithPath: copy))
        #expect(try rclone(["copyto", copy, root + "/" + made.body]).status == 0)
        let check = try await Backups.verify(repository, readFraction: 1)
        #expect(check.problems.contains { $0.contains(made.shortID) }, "\(check.problems)")
        let target = try RecordStore(path: scratch.path("target.sqlite"))
        await #expect(throws: (any Error).self) {
            _ = try await Backups.restore(from: repository, snapshot: made, into: target)
        }
    }
}
