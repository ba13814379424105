import CloudKitWeb
import Foundation
import NIOConcurrencyHelpers
import SQLiteStore
import StoreCore
import TestSupport
import Testing

@testable import CKPort

/// Several views of one store answering side by side.
@Suite("browsing with requests side by side")
struct BrowseSitesTests {
    /// Answers the overview's JSON in a task of its own, whose value is the status (also left
    /// in `answered` once it is in).
    static func answerAside(_ sites: BrowseSites, answered: Answered = Answered()) -> Task<Int, Never> {
        Task {
            let status = await sites.answer { site in
                (try? site.overview().rendered(json: true)) ?? CloudKitHTTPResponse(status: 0, body: Data())
            }.status
            answered.set(status)
            return status
        }
    }

    /// A status set in one task and read in another.
    final class Answered: Sendable {
        private let box = NIOLockedValueBox<Int?>(nil)
        func set(_ status: Int) { box.withLockedValue { $0 = status } }
        var value: Int? { box.withLockedValue { $0 } }
    }

    @Test("while one site is busy with a long request, another answers the next; with one site, the next waits for it")
    func sideBySide() async throws {
        let scratch = Scratch()
        let path = try scratch.sampleStore(.familyCalendar).path
        let two = BrowseSites(
            try (0..<2).map { _ in BrowseSite(store: try RecordStore(path: path, create: false), backend: "SQLite") })
        let busy = try #require(await two.take())
        #expect(await BrowseSitesTests.answerAside(two).value == 200, "the free site did not answer")
        two.give(busy)

        let one = BrowseSites([BrowseSite(store: try RecordStore(path: path, create: false), backend: "SQLite")])
        let only = try #require(await one.take())
        let answered = Answered()
        let waiting = BrowseSitesTests.answerAside(one, answered: answered)
        // The request waits for the busy site: it has not been answered while the site is held.
        try await Task.sleep(for: .milliseconds(500))
        #expect(answered.value == nil, "answered by a site that was busy")
        one.give(only)
        #expect(await waiting.value == 200)
    }

    @Test("past the waiting limit a request is answered busy at once, not queued")
    func waitingLimit() async throws {
        let scratch = Scratch()
        let path = try scratch.sampleStore(.familyTodo).path
        let one = BrowseSites(
            [BrowseSite(store: try RecordStore(path: path, create: false), backend: "SQLite")], waitingLimit: 1)
        let only = try #require(await one.take())
        let queued = Answered()
        let first = BrowseSitesTests.answerAside(one, answered: queued)
        // Once the first waits, a second is one too many: busy at once, while the first still waits.
        for _ in 0..<6000 where one.waitingCount == 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(one.waitingCount == 1)
        let second = await one.answer({ _ in CloudKitHTTPResponse(status: 200, body: Data()) }).status
        #expect(second == 503 && queued.value == nil)
        one.give(only)
        #expect(await first.value == 200)
    }
}
