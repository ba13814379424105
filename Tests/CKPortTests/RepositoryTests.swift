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
        case folder, s3, moto
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
        }
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
        "forget keeps what the policy keeps; a kept snapshot built on one that goes is made full; prune frees the rest; another store is not touched",
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
        let program = try #require(
            ProcessInfo.processInfo.environment["CKPORT_TEST_RCLONE"],
            "CKPORT_TEST_RCLONE names rclone (the README's test command installs it)")
        let keys = try S3TestServer.keys()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["RCLONE_CONFIG_SW_TYPE"] = "s3"
        environment["RCLONE_CONFIG_SW_PROVIDER"] = "SeaweedFS"
        environment["RCLONE_CONFIG_SW_ENDPOINT"] = S3TestServer.endpoint?.absoluteString
        environment["RCLONE_CONFIG_SW_ACCESS_KEY_ID"] = keys.id
        environment["RCLONE_CONFIG_SW_SECRET_ACCESS_KEY"] = keys.secret
        environment["RCLONE_CONFIG_SW_FORCE_PATH_STYLE"] = "true"
        environment["RCLONE_CONFIG"] = "/dev/null"
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
