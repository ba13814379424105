import CKPort
import Foundation
import ObjectStorage
import Records
import SQLiteStore
import SampleApps
import TestSupport
import Testing

/// A repository in SeaweedFS reached through a fault injector (`Tests/Fixtures/s3-faults.py`):
/// every request goes to the real server with ckport's own signature, except those the plan
/// answers with a dropped connection, a 503 SlowDown or a 500 InternalError.
@Suite("backup repositories under faults", .enabled(if: S3TestServer.enabled))
struct RepositoryFaultTests {
    /// The injector: a Python process on a free port of 127.0.0.1, its plan and its log.
    final class FaultInjector {
        let process = Process()
        let url: URL
        let plan: String
        let log: String

        init(upstream: URL, scratch: Scratch) async throws {
            plan = scratch.path("faults-plan.json")
            log = scratch.path("faults-log.jsonl")
            try Data("[]".utf8).write(to: URL(fileURLWithPath: plan))
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                "python3", packageRoot.appendingPathComponent("Tests/Fixtures/s3-faults.py").path,
                upstream.absoluteString, plan, log,
            ]
            let output = Pipe()
            process.standardOutput = output
            // Not the runner's own output: a child that outlived the test would hold it open.
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try process.run()
            // The port, read on a thread of its own: a test's task does not hold a thread of
            // the pool (which other tests wait for) while Python starts.
            let port = try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<String, any Error>) in
                Thread {
                    var line = Data()
                    while !line.contains(0x0A) {
                        let more = output.fileHandleForReading.availableData
                        guard !more.isEmpty else {
                            continuation.resume(throwing: FaultInjectorFailed())
                            return
                        }
                        line.append(more)
                    }
                    continuation.resume(
                        returning: String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                    )
                }.start()
            }
            url = URL(string: "http://127.0.0.1:\(port)")!
        }

        /// Replaces the plan: rules of method, text the request's path and query contain, fault
        /// and how many times.
        func set(_ rules: [(method: String, contains: String, fault: String, times: Int)]) throws {
            let json = rules.map {
                ["method": $0.method, "contains": $0.contains, "fault": $0.fault, "times": $0.times]
            }
            let data = try JSONSerialization.data(withJSONObject: json)
            try data.write(to: URL(fileURLWithPath: plan + ".new"))
            _ = rename(plan + ".new", plan)
        }

        /// The faults given so far, in order.
        func given() -> [String] {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["fault"] as? String
            }
        }

        deinit {
            // SIGKILL (a child of the test runner may inherit a mask that blocks SIGTERM), and
            // no wait: Foundation reaps it, and waiting spins the run loop of a test's thread.
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
    }

    struct FaultInjectorFailed: Error {}

    func client(_ url: URL, bucket: String, clock: @escaping @Sendable () -> Date = { Date() }) throws -> S3Client {
        let keys = try S3TestServer.keys()
        return S3Client(
            endpoint: S3Endpoint(url: url, region: "us-east-1", bucket: bucket, pathStyle: true),
            credentials: AWSCredentials(accessKeyID: keys.id, secretAccessKey: keys.secret), attempts: 4,
            firstWait: 0.01, clock: clock)
    }

    func todoStore(_ scratch: Scratch, count: Int) throws -> RecordStore {
        try RepositoryTests().todoStore(scratch, count: count, seed: 11)
    }

    /// A family-todo store and the name of one of its tasks.
    func todoStoreAndTask(_ scratch: Scratch, count: Int) throws -> (store: RecordStore, task: String) {
        let store = try todoStore(scratch, count: count)
        var task: String?
        try store.read { session in
            try session.forEach(RecordQuery(recordTypes: ["Task"], limit: 1)) { task = $0.recordName }
        }
        return (store, try #require(task))
    }

    func exported(_ store: RecordStore, _ scratch: Scratch) throws -> String {
        try RepositoryTests().exported(store, scratch)
    }

    @Test("a connection dropped in the middle of a part, SlowDown and InternalError are tried again")
    func transient() async throws {
        let scratch = Scratch()
        let upstream = try #require(S3TestServer.endpoint, "CKPORT_TEST_S3 names SeaweedFS")
        let injector = try await FaultInjector(upstream: upstream, scratch: scratch)
        let bucket = S3TestServer.bucket("faults")
        let s3 = try client(injector.url, bucket: bucket)
        try await s3.createBucket()
        let repository = try await BackupRepository.create(S3Storage(client: s3, prefix: "ckport"), passphrase: "p")

        // A body of two parts: the first part's connection dropped halfway, the second part
        // answered SlowDown twice, the completion InternalError once.
        try injector.set([
            ("PUT", "partNumber=1", "reset", 1), ("PUT", "partNumber=2", "503", 2), ("POST", "uploadId=", "500", 1),
        ])
        let name = repository.newDataObject()
        let object = try await repository.startObject(name)
        var expected: [UInt8] = []
        for byte: UInt8 in [3, 4] {
            let part = (0..<(RepositoryUploadLimits.partSize + 1_000)).map { UInt8(truncatingIfNeeded: $0 * 7) ^ byte }
            expected += part
            try await object.add(part)
        }
        try await object.finish()
        #expect(injector.given() == ["reset", "503", "503", "500"], "\(injector.given())")
        let reader = repository.objectReader(name, storedSize: object.storedBytes)
        var read: [UInt8] = []
        while let chunk = try await reader.next() { read += chunk }
        #expect(read == expected, "the object read back differs from what was written")

        // A whole backup while the server slows down, fails and drops connections now and then.
        let store = try todoStore(scratch, count: 600)
        try injector.set([
            ("PUT", "/snapshots/", "503", 2), ("PUT", "/data/", "reset", 1), ("GET", "list-type=2", "500", 1),
            ("GET", "/data/", "reset", 1),
        ])
        let before = injector.given().count
        let snapshot = try await Backups.backup(store, to: repository).snapshot
        let restored = try RecordStore(path: scratch.path("restored.sqlite"))
        _ = try await Backups.restore(from: repository, snapshot: snapshot, into: restored)
        #expect(try exported(restored, scratch) == exported(store, scratch))
        #expect(
            injector.given().dropFirst(before).sorted() == ["500", "503", "503", "reset", "reset"],
            "\(injector.given().dropFirst(before))")
    }

    @Test("a server that keeps failing: a clear error and no snapshot; the next backup builds on the last whole one")
    func persistent() async throws {
        let scratch = Scratch()
        let upstream = try #require(S3TestServer.endpoint, "CKPORT_TEST_S3 names SeaweedFS")
        let injector = try await FaultInjector(upstream: upstream, scratch: scratch)
        let s3 = try client(injector.url, bucket: S3TestServer.bucket("failing"))
        try await s3.createBucket()
        let repository = try await BackupRepository.create(S3Storage(client: s3, prefix: "ckport"), passphrase: nil)
        let (store, task) = try todoStoreAndTask(scratch, count: 400)
        let first = try await Backups.backup(store, to: repository).snapshot
        #expect(try Deletes.records(named: [task], in: store).count == 1)

        // Every description refused with SlowDown: the body is written, the snapshot never shows.
        try injector.set([("PUT", "/snapshots/", "503", 1_000)])
        do {
            _ = try await Backups.backup(store, to: repository)
            Issue.record("a backup succeeded while every snapshot write failed")
        } catch {
            let text = "\(error)"
            #expect(text.contains("did not answer") && text.contains("after 4 tries"), "\(text)")
            #expect(!text.contains(try S3TestServer.keys().secret))
        }
        #expect(injector.given().filter { $0 == "503" }.count == 4)
        try injector.set([])
        #expect(try await repository.snapshots().map(\.id) == [first.id])
        let next = try await Backups.backup(store, to: repository).snapshot
        #expect(next.parent == first.id)
        let check = try await Backups.verify(repository, readFraction: 1)
        #expect(check.problems.isEmpty && check.snapshots == 2, "\(check.problems)")
    }

    @Test("a clock the server calls skewed is named, and nothing is written")
    func skewedClock() async throws {
        let scratch = Scratch()
        let upstream = try #require(S3TestServer.endpoint, "CKPORT_TEST_S3 names SeaweedFS")
        let bucket = S3TestServer.bucket("skew")
        let good = try client(upstream, bucket: bucket)
        try await good.createBucket()
        _ = try await BackupRepository.create(S3Storage(client: good, prefix: "ckport"), passphrase: nil)
        let store = try todoStore(scratch, count: 50)
        // This machine's clock an hour ahead of the server's (SeaweedFS allows 15 minutes).
        let skewed = try client(upstream, bucket: bucket, clock: { Date() + 3_600 })
        do {
            let repository = try await BackupRepository.open(
                S3Storage(client: skewed, prefix: "ckport"), passphrase: nil)
            _ = try await Backups.backup(store, to: repository)
            Issue.record("a request signed an hour ahead was taken")
        } catch {
            let text = "\(error)"
            #expect(text.contains("clock") && text.contains("RequestTimeTooSkewed"), "\(text)")
        }
        #expect(try await good.list(prefix: "ckport/snapshots/").isEmpty)
        #expect(try await good.list(prefix: "ckport/data/").isEmpty)
    }
}
