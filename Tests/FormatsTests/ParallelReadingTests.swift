import Foundation
import SampleApps
import Testing
@testable import Formats
@testable import Records

/// The readers that split work across threads must give exactly what the one-thread readers
/// give, in the same order, errors included.
@Suite("Reading on more than one thread")
struct ParallelReadingTests {
    struct Broken: Error, CustomStringConvertible {
        var description: String { "the disk went away" }
    }

    static let schema = try! SchemaParser.parse("DEFINE SCHEMA RECORD TYPE Task (title STRING, n INT64);")

    /// 1,300 lines (five batches and a bit): records, blank lines and broken lines mixed.
    static func lines() -> [UInt8] {
        var text = ""
        for k in 0..<1_300 {
            switch k % 97 {
            case 13: text += "   \n"
            case 41: text += "{\"recordName\":\"t\(k)\",\"recordType\":\"Task\",\"fields\":{\"n\":{\"value\":\"many\"}}}\n"
            case 77: text += "{not json\n"
            default: text += "{\"recordName\":\"t\(k)\",\"recordType\":\"Task\",\"fields\":{\"title\":{\"value\":\"task \(k)\",\"type\":\"STRING\"},\"n\":{\"value\":\(k),\"type\":\"INT64\"}}}\n"
            }
        }
        return Array(text.utf8)
    }

    /// What a reader gives, as text that tells records, positions and issues apart.
    static func transcript(_ reader: JSONRecordReader) -> [String] {
        var out: [String] = []
        do {
            while let item = try reader.next() {
                switch item {
                case .record(let sourced): out.append("record \(sourced.position) \(sourced.record.recordName) \(sourced.record.fields) \(sourced.raw?.count ?? -1)")
                case .invalid(let issue, let raw): out.append("invalid \(issue) \(raw?.count ?? -1)")
                case .asset(let asset): out.append("asset \(asset.sha256)")
                }
            }
            out.append("end")
        } catch {
            out.append("error \(error)")
        }
        return out
    }

    @Test("JSON Lines decoded on two threads come out as on one: same records, positions and issues, in order")
    func twoThreadsMatchOne() {
        let bytes = ParallelReadingTests.lines()
        let codec = JSONRecordCodec(schema: ParallelReadingTests.schema)
        let one = ParallelReadingTests.transcript(JSONRecordReader(input: ByteInput(name: "t.jsonl", bytes: bytes), layout: .lines, codec: codec))
        let two = ParallelReadingTests.transcript(JSONRecordReader(input: ByteInput(name: "t.jsonl", bytes: bytes), layout: .lines, codec: codec, twoThreads: true))
        #expect(one.count == 1_300 - 14 + 1)
        #expect(one.filter { $0.hasPrefix("invalid") }.count == 26)
        #expect(two == one)
    }

    @Test("a read error part-way through comes after every record before it, on two threads as on one")
    func errorAfterRecords() {
        let bytes = ParallelReadingTests.lines()
        let codec = JSONRecordCodec(schema: ParallelReadingTests.schema)
        // The source fails after 60,000 bytes, in the third batch of lines.
        func failingInput() -> ByteInput {
            var offset = 0
            return ByteInput(name: "t.jsonl", totalBytes: nil, chunkSize: 4096) { buffer in
                if offset >= 60_000 { throw Broken() }
                let n = min(buffer.count, 60_000 - offset, bytes.count - offset)
                bytes.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + offset, byteCount: n) }
                offset += n
                return n
            }
        }
        let one = ParallelReadingTests.transcript(JSONRecordReader(input: failingInput(), layout: .lines, codec: codec))
        let two = ParallelReadingTests.transcript(JSONRecordReader(input: failingInput(), layout: .lines, codec: codec, twoThreads: true))
        #expect(one.last == "error the disk went away")
        #expect(one.count > 300)
        #expect(two == one)
    }

    @Test("reading ahead on another thread hands over the same bytes, then the source's error after them")
    func readAheadKeepsBytesAndErrors() throws {
        var generator = SeededRandom(state: 11)
        let data = (0..<3_000_000).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        for failAt in [nil, 0, 1, 777_777, 2_999_999] as [Int?] {
            var offset = 0
            var sizes = SeededRandom(state: 5)
            let ahead = ReadAhead(chunkSize: 1 << 16, depth: 3, progress: { Int64(offset) }) { buffer in
                if let failAt, offset >= failAt { throw Broken() }
                // Uneven reads, as a decompressor gives.
                let limit = failAt ?? data.count
                let n = min(buffer.count, Int(sizes.next() % 70_000) + 1, limit - offset)
                data.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + offset, byteCount: n) }
                offset += n
                return n
            }
            var received: [UInt8] = []
            var failure: Error?
            var chunk = [UInt8](repeating: 0, count: 10_007)
            do {
                while true {
                    let n = try chunk.withUnsafeMutableBytes { try ahead.read(into: $0) }
                    if n == 0 { break }
                    received += chunk[0..<n]
                }
            } catch {
                failure = error
            }
            #expect(received == Array(data[0..<(failAt ?? data.count)]), "fail at \(String(describing: failAt))")
            #expect((failure is Broken) == (failAt != nil))
        }
    }

    @Test("a reader that stops early lets the read-ahead thread end")
    func readAheadStopsEarly() throws {
        final class Token: @unchecked Sendable {}
        weak var weakToken: Token?
        do {
            let token = Token()
            weakToken = token
            let ahead = ReadAhead(chunkSize: 1 << 12, depth: 2) { buffer in
                // An endless source; the thread owns the token for as long as it runs.
                withExtendedLifetime(token) {}
                buffer.initializeMemory(as: UInt8.self, repeating: 7)
                return buffer.count
            }
            var byte = [UInt8](repeating: 0, count: 1)
            _ = try byte.withUnsafeMutableBytes { try ahead.read(into: $0) }
            #expect(byte == [7])
        }
        for _ in 0..<50 where weakToken != nil { Thread.sleep(forTimeInterval: 0.02) }
        #expect(weakToken == nil)
    }
}
