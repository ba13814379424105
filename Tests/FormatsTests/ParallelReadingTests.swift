import Crypto
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
            case 41:
                text += "{\"recordName\":\"t\(k)\",\"recordType\":\"Task\",\"fields\":{\"n\":{\"value\":\"many\"}}}\n"
            case 77: text += "{not json\n"
            default:
                text +=
                    "{\"recordName\":\"t\(k)\",\"recordType\":\"Task\",\"fields\":{\"title\":{\"value\":\"task \(k)\",\"type\":\"STRING\"},\"n\":{\"value\":\(k),\"type\":\"INT64\"}}}\n"
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
                case .record(let sourced):
                    out.append(
                        "record \(sourced.position) \(sourced.record.recordName) \(sourced.record.fields) \(sourced.raw?.count ?? -1)"
                    )
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
        let one = ParallelReadingTests.transcript(
            JSONRecordReader(input: ByteInput(name: "t.jsonl", bytes: bytes), layout: .lines, codec: codec))
        let two = ParallelReadingTests.transcript(
            JSONRecordReader(
                input: ByteInput(name: "t.jsonl", bytes: bytes), layout: .lines, codec: codec, twoThreads: true))
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
        let two = ParallelReadingTests.transcript(
            JSONRecordReader(input: failingInput(), layout: .lines, codec: codec, twoThreads: true))
        #expect(one.last == "error the disk went away")
        #expect(one.count > 300)
        #expect(two == one)
    }

    /// A tar stream of members whose sizes sit on every edge of a 4 KiB run and of tar's
    /// 512-byte blocks, one with a name long enough for a pax header.
    static func tarStream() -> (bytes: [UInt8], members: [(String, [UInt8])]) {
        var generator = SeededRandom(state: 11)
        let long = "records/shared/" + String(repeating: "zone-with-a-long-name-", count: 12) + "/Task.jsonl"
        let sizes = [0, 1, 511, 512, 513, 4095, 4096, 4097, 8192, 100_000, 0, 70_001]
        var members: [(String, [UInt8])] = []
        var bytes: [UInt8] = []
        for (k, size) in sizes.enumerated() {
            let path = k == 9 ? long : "records/m\(k).jsonl"
            let content = (0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            members.append((path, content))
            bytes += Tar.header(path: path, size: Int64(size)) + content + Tar.padding(Int64(size))
        }
        return (bytes + Tar.end, members)
    }

    /// A source of `bytes` that gives uneven reads, as a decompressor does, and fails at
    /// `failAt`.
    static func unevenSource(_ bytes: [UInt8], failAt: Int?, seed: UInt64) -> (UnsafeMutableRawBufferPointer) throws ->
        Int
    {
        var offset = 0
        var sizes = SeededRandom(state: seed)
        return { buffer in
            if let failAt, offset >= failAt { throw Broken() }
            let limit = failAt ?? bytes.count
            let n = min(buffer.count, Int(sizes.next() % 9_000) + 1, limit - offset)
            bytes.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + offset, byteCount: n) }
            offset += n
            return n
        }
    }

    /// Members, content digests and the ending, read with `next` and `read`; every member's
    /// content read in pieces of uneven sizes unless `skipOdd` (then odd members are passed over).
    static func tarTranscript(
        next: () throws -> TarEntry?, read: (UnsafeMutableRawBufferPointer) throws -> Int,
        digest: () -> SHA256.Digest?, skipOdd: Bool = false
    ) -> [String] {
        var out: [String] = []
        var sizes = SeededRandom(state: 3)
        var buffer = [UInt8](repeating: 0, count: 10_007)
        var k = 0
        // What was read of the member an error cut short is in the transcript too.
        var content: [UInt8] = []
        do {
            while let entry = try next() {
                out.append("member \(entry.path) \(entry.size) at \(entry.offset)")
                if digest() != nil { out.append("digest before the end") }
                defer { k += 1 }
                if skipOdd && k % 2 == 1 { continue }
                content = []
                while true {
                    let want = Int(sizes.next() % 10_007) + 1
                    let n = try buffer.withUnsafeMutableBytes {
                        try read(UnsafeMutableRawBufferPointer(rebasing: $0[0..<want]))
                    }
                    if n == 0 { break }
                    content += buffer[0..<n]
                    // A digest only once the member has been read to its end.
                    if digest() != nil { out.append("digest before the end") }
                }
                let sha = Array(SHA256.hash(data: content))
                out.append("content \(content.count) \(sha.prefix(6).map { String($0, radix: 16) }.joined())")
                if let given = digest() { out.append(Array(given) == sha ? "digest matches" : "digest differs") }
                content = []
            }
            out.append("end")
        } catch {
            out.append(
                "cut short after \(content.count) bytes \(Array(SHA256.hash(data: content)).prefix(6).map { String($0, radix: 16) }.joined())"
            )
            out.append("error \(error)")
        }
        return out
    }

    @Test(
        "a tar read ahead on another thread gives the members, bytes and SHA-256s read here give, then the source's error after them"
    )
    func tarReadAheadMatchesTarReader() throws {
        let (bytes, members) = ParallelReadingTests.tarStream()
        let total = members.reduce(0) { $0 + $1.1.count }
        #expect(total > 190_000)
        var cutMidMember = 0
        for failAt in [nil, 0, 1, 700, 2_100, 5_000, 12_000, 40_000, bytes.count / 2, bytes.count - 1] as [Int?] {
            for skipOdd in [false, true] {
                let plain = TarReader(
                    name: "t.tar", read: ParallelReadingTests.unevenSource(bytes, failAt: failAt, seed: 5))
                let here = ParallelReadingTests.tarTranscript(
                    next: { try plain.next() }, read: { try plain.readContent(into: $0) },
                    digest: { nil }, skipOdd: skipOdd)
                let ahead = TarReadAhead(
                    name: "t.tar", chunkSize: 1 << 12, depth: 3,
                    source: ParallelReadingTests.unevenSource(bytes, failAt: failAt, seed: 9))
                let there = ParallelReadingTests.tarTranscript(
                    next: { try ahead.next() }, read: { try ahead.readContent(into: $0) },
                    digest: { ahead.digest }, skipOdd: skipOdd)
                // The read-ahead's transcript is the plain one with a digest after each member read whole.
                #expect(
                    there.filter { !$0.hasPrefix("digest") } == here,
                    "fail at \(String(describing: failAt)), skip \(skipOdd)")
                #expect(!there.contains("digest differs") && !there.contains("digest before the end"))
                // Every member read whole has its digest, however the stream ended.
                #expect(there.filter { $0 == "digest matches" }.count == here.filter { $0.hasPrefix("content") }.count)
                #expect((here.last == "end") == (failAt == nil))
                if let cut = here.first(where: { $0.hasPrefix("cut short after ") }),
                    !cut.hasPrefix("cut short after 0 ")
                {
                    cutMidMember += 1
                }
                if failAt == nil {
                    #expect(here.filter { $0.hasPrefix("member") }.count == members.count)
                    #expect(
                        there.filter { $0 == "digest matches" }.count
                            == (skipOdd ? (members.count + 1) / 2 : members.count))
                } else {
                    #expect(here.last == "error the disk went away")
                }
            }
        }
        // Some errors came in the middle of a member, after some of its bytes.
        #expect(cutMidMember >= 4)
        // Whole members, as the bundle's header members are read.
        let ahead = TarReadAhead(
            name: "t.tar", chunkSize: 1 << 12, source: ParallelReadingTests.unevenSource(bytes, failAt: nil, seed: 1))
        for (path, content) in members {
            #expect(try ahead.next()?.path == path)
            #expect(try ahead.readAll(limit: content.count) == content)
            #expect(ahead.digest.map(Array.init) == Array(SHA256.hash(data: content)))
        }
        #expect(try ahead.next() == nil)
        // The last member's digest does not outlive it.
        #expect(ahead.digest == nil)
        // Members left unhashed give the same bytes and no digest; the others keep theirs.
        let unhashed = Set(members.enumerated().filter { $0.offset % 3 == 0 }.map(\.element.0))
        let partly = TarReadAhead(
            name: "t.tar", chunkSize: 1 << 12, hashes: { !unhashed.contains($0) },
            source: ParallelReadingTests.unevenSource(bytes, failAt: nil, seed: 2))
        var hashed = 0
        for (path, content) in members {
            #expect(try partly.next()?.path == path)
            #expect(try partly.readAll(limit: content.count) == content)
            if unhashed.contains(path) {
                #expect(partly.digest == nil, "\(path)")
            } else {
                #expect(partly.digest.map(Array.init) == Array(SHA256.hash(data: content)), "\(path)")
                hashed += 1
            }
        }
        #expect(try partly.next() == nil)
        #expect(unhashed.count >= 4 && hashed == members.count - unhashed.count)
    }

    @Test("a reader that stops early lets the read-ahead thread end")
    func readAheadStopsEarly() throws {
        final class Token: @unchecked Sendable {}
        weak var weakToken: Token?
        do {
            let token = Token()
            weakToken = token
            // One member of 4 GB, endless as far as this test goes.
            var header = Tar.header(path: "records/big.jsonl", size: 4 << 30)
            let ahead = TarReadAhead(name: "t.tar", chunkSize: 1 << 12, depth: 2) { buffer in
                // The thread owns the token for as long as it runs.
                withExtendedLifetime(token) {}
                if !header.isEmpty {
                    let n = min(buffer.count, header.count)
                    header.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: n) }
                    header.removeFirst(n)
                    return n
                }
                buffer.initializeMemory(as: UInt8.self, repeating: 7)
                return buffer.count
            }
            #expect(try ahead.next()?.size == 4 << 30)
            var byte = [UInt8](repeating: 0, count: 1)
            _ = try byte.withUnsafeMutableBytes { try ahead.readContent(into: $0) }
            #expect(byte == [7])
        }
        for _ in 0..<50 where weakToken != nil { Thread.sleep(forTimeInterval: 0.02) }
        #expect(weakToken == nil)
    }
}
