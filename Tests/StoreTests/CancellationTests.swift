import Foundation
import Records
import Synchronization
import Testing

@testable import SQLiteStore
@testable import StoreCore

/// Cancellation is per operation: cancelling one task's store work stops that work, rolls it
/// back, and leaves the work beside it alone.
@Suite("Cancellation")
struct CancellationTests {
    /// How far the writer has come, read by the test's other tasks.
    final class Saved: Sendable {
        private let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        func set(_ number: Int) { count.withLock { $0 = number } }
    }

    static func note(_ number: Int) -> Record {
        var record = Record(
            id: RecordID(recordName: "t-\(number)", zone: ZoneID(scope: .private, zoneName: ZoneID.defaultZoneName)),
            recordType: "Task", created: RecordStamp(timestamp: 1_700_000_000_000),
            modified: RecordStamp(timestamp: 1_700_000_000_000))
        record["title"] = .string("Task \(number)")
        return record
    }

    @Test(
        "cancelling the task of an asynchronous write stops it at its next record and rolls it back; a read beside it on the same handle goes on"
    )
    func cancelledTask() async throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema)
        try store.write { _ = try $0.save(Self.note(0), mode: .insert) }
        let saving = Saved()
        let cancelled = Saved()
        let writer = Task {
            try await store.writeSession { session in
                for number in 1...1_000_000 {
                    _ = try session.save(Self.note(number), mode: .insert)
                    saving.set(number)
                    // The writer runs on a thread of its own: it waits here until the test's
                    // task (which may wait for a thread of the pool while other tests run) has
                    // cancelled it, so the cancellation always arrives mid-write.
                    if number == 60 {
                        while cancelled.value == 0 { usleep(1_000) }
                    }
                }
            }
        }
        let reader = Task {
            // Waits until the writer is well under way, then reads on the same handle.
            while saving.value < 50 { try await Task.sleep(for: .milliseconds(2)) }
            return try await store.readSession { try $0.count(RecordQuery()) }
        }
        while saving.value < 50 { try await Task.sleep(for: .milliseconds(2)) }
        writer.cancel()
        cancelled.set(1)
        await #expect(throws: InterruptedError(signal: Cancellation.cancelledTask)) { try await writer.value }
        let stoppedAt = saving.value
        #expect(stoppedAt >= 50 && stoppedAt < 1_000_000)
        // The read beside it saw the one committed record (it reads the last committed state).
        #expect(try await reader.value == 1)
        #expect(try allRecords(store).map(\.recordName) == ["t-0"])
    }

    @Test("a thread started inside an operation works for it: cancelling the operation reaches the thread, and only it")
    func workerThreads() throws {
        let operation = Cancellation(inside: nil)
        operation.cancel()
        let seen = Mutex<[String: Bool]>([:])
        let done = DispatchGroup()
        done.enter()
        done.enter()
        Cancellation.$current.withValue(operation) {
            WorkerThread.start(name: "inside") {
                seen.withLock { $0["inside"] = Interruption.requested }
                done.leave()
            }
        }
        WorkerThread.start(name: "beside") {
            seen.withLock { $0["beside"] = Interruption.requested }
            done.leave()
        }
        done.wait()
        #expect(seen.withLock { $0 } == ["inside": true, "beside": false])
        #expect(throws: InterruptedError(signal: Cancellation.cancelledTask)) {
            try Cancellation.$current.withValue(operation) { try Interruption.check() }
        }
        #expect(throws: Never.self) { try Interruption.check() }
    }
}

@Suite("One handle, many threads")
struct SharedHandleTests {
    @Test(
        "a new store's failed write never takes another thread's committed write with it: what a write says it saved is in the store"
    )
    func failedWriteBesideACommit() throws {
        for round in 0..<20 {
            let scratch = Scratch()
            let path = scratch.path("new-\(round).sqlite")
            let store = try RecordStore(path: path, buildAside: true)
            struct Refused: Error {}
            let saved = Mutex(false)
            DispatchQueue.concurrentPerform(iterations: 2) { thread in
                if thread == 0 {
                    // Fails: the new store would be removed, were it still only this write's.
                    _ = try? store.write { session in
                        _ = try session.apply(schema: try SchemaParser.parse(taskSchema))
                        throw Refused()
                    }
                } else {
                    let committed =
                        (try? store.write { session in
                            _ = try session.apply(schema: try SchemaParser.parse(taskSchema))
                            _ = try session.save(CancellationTests.note(1), mode: .insert)
                            return true
                        }) ?? false
                    saved.withLock { $0 = committed }
                }
            }
            if saved.withLock({ $0 }) {
                let reopened = try RecordStore(path: path, create: false)
                #expect(try allRecords(reopened).map(\.recordName) == ["t-1"], "round \(round)")
            }
        }
    }
}
