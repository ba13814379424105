import Foundation
import Synchronization
import Testing

@testable import Records

@Suite("bridges between tasks and threads")
struct TaskBridgeTests {
    @Test("room() waits until the thread has taken what waits, and is false once the thread has gone")
    func room() async throws {
        let bridge = TaskToThread<Int>(depth: 1)
        #expect(await bridge.room())
        #expect(await bridge.send(1))
        let resumed = Mutex(false)
        let waiting = Task {
            let answer = await bridge.room()
            resumed.withLock { $0 = true }
            return answer
        }
        // Nothing has been taken: the waiter stays suspended however long it is given.
        try await Task.sleep(for: .milliseconds(100))
        #expect(resumed.withLock { $0 } == false)
        let taken = try await onOwnThread("take") { try bridge.take() }
        #expect(taken == 1)
        #expect(await waiting.value)
        // Room again; then the thread goes, and a waiter learns it.
        #expect(await bridge.send(2))
        let afterCancel = Task { await bridge.room() }
        try await Task.sleep(for: .milliseconds(50))
        bridge.cancel()
        #expect(await afterCancel.value == false)
        #expect(await bridge.room() == false)
    }
}
