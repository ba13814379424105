import CloudKitWeb
import Foundation
import SQLiteStore
import StoreCore
import TestSupport
import Testing

@testable import CKPort

/// A status set on one thread and read on another.
final class StatusBox: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Int?
    func set(_ status: Int) { lock.withLock { value = status } }
    var status: Int? { lock.withLock { value } }
}

/// Several views of one store answering side by side.
@Suite("browsing with requests side by side")
struct BrowseSitesTests {
    static func request(_ path: String) -> CloudKitHTTPRequest {
        CloudKitHTTPRequest(method: "GET", url: URL(string: "http://127.0.0.1:1" + path)!, headers: [], body: Data())
    }

    /// Answers `path` on a thread of its own; the semaphore is signalled when the answer is in.
    static func answerAside(_ sites: BrowseSites, _ path: String) -> (done: DispatchSemaphore, status: StatusBox) {
        let done = DispatchSemaphore(value: 0)
        let status = StatusBox()
        Thread {
            let answer = sites.respond(request(path))
            status.set(answer.status)
            done.signal()
        }.start()
        return (done, status)
    }

    @Test("while one site is busy with a long request, another answers the next; with one site, the next waits for it")
    func sideBySide() throws {
        let scratch = Scratch()
        let path = try scratch.sampleStore(.familyCalendar).path
        let two = BrowseSites(
            try (0..<2).map { _ in BrowseSite(store: try RecordStore(path: path, create: false), backend: "SQLite") })
        let busy = two.take()
        let aside = BrowseSitesTests.answerAside(two, "/index.json")
        #expect(
            aside.done.wait(timeout: .now() + 30) == .success, "the free site did not answer while the other was busy")
        #expect(aside.status.status == 200)
        two.give(busy)

        let one = BrowseSites([BrowseSite(store: try RecordStore(path: path, create: false), backend: "SQLite")])
        let only = one.take()
        let waiting = BrowseSitesTests.answerAside(one, "/index.json")
        #expect(waiting.done.wait(timeout: .now() + 0.5) == .timedOut, "answered by a site that was busy")
        one.give(only)
        #expect(waiting.done.wait(timeout: .now() + 30) == .success)
        #expect(waiting.status.status == 200)
    }
}
