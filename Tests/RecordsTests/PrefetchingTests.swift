import Foundation
import Testing

@testable import Records

@Suite("Prefetching on a background thread")
struct PrefetchingTests {
    struct Broken: Error {}

    /// Numbered records, then optionally a failure, then (if read on) endless more.
    final class CountingSource: RecordSource, @unchecked Sendable {
        let count: Int
        let failAfter: Int?
        let lock = NSLock()
        private var produced = 0
        init(count: Int, failAfter: Int? = nil) {
            self.count = count
            self.failAfter = failAfter
        }
        var name: String { "counting" }
        var bytesRead: Int64 { lock.withLock { Int64(produced) } }
        var totalBytes: Int64? { nil }
        var producedSoFar: Int { lock.withLock { produced } }
        func next() throws -> SourceItem? {
            try lock.withLock {
                if let failAfter, produced == failAfter { throw Broken() }
                guard produced < count else { return nil }
                produced += 1
                let record = Record(id: RecordID(recordName: "r\(produced)"), recordType: "T")
                return .record(
                    SourcedRecord(record: record, position: SourcePosition(file: "counting", line: produced)))
            }
        }
    }

    static func names(_ source: RecordSource) -> (names: [String], failed: Bool) {
        var names: [String] = []
        do {
            while let item = try source.next() {
                if case .record(let sourced) = item { names.append(sourced.record.recordName) }
            }
            return (names, false)
        } catch {
            return (names, error is Broken)
        }
    }

    @Test("every item comes through once, in order, across many batches; progress follows the batches")
    func order() throws {
        let prefetching = PrefetchingSource(CountingSource(count: 5_000), batchSize: 64, depth: 3)
        let (names, failed) = PrefetchingTests.names(prefetching)
        #expect(!failed)
        #expect(names == (1...5_000).map { "r\($0)" })
        #expect(prefetching.bytesRead == 5_000)
        #expect(try prefetching.next() == nil)
    }

    @Test("a failure comes after the items read before it, and again on the next call")
    func failure() {
        let prefetching = PrefetchingSource(CountingSource(count: 5_000, failAfter: 1_000), batchSize: 64, depth: 3)
        let (names, failed) = PrefetchingTests.names(prefetching)
        #expect(failed)
        #expect(names == (1...1_000).map { "r\($0)" })
        #expect(throws: Broken.self) { try prefetching.next() }
    }

    @Test("a consumer that stops early lets the background thread end, after reading a bounded way ahead")
    func stopsEarly() throws {
        weak var weakSource: CountingSource?
        do {
            let source = CountingSource(count: Int.max)
            weakSource = source
            let prefetching = PrefetchingSource(source, batchSize: 10, depth: 2)
            _ = try prefetching.next()
            Thread.sleep(forTimeInterval: 0.1)
            // Two batches waiting, one in the consumer's hands, one being filled.
            #expect(source.producedSoFar <= 40)
        }
        // The thread holds the source until it ends; it ends only if told the consumer left.
        for _ in 0..<50 where weakSource != nil { Thread.sleep(forTimeInterval: 0.02) }
        #expect(weakSource == nil)
    }
}
