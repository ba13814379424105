import Foundation
import Testing

@testable import Formats

/// Runs a system tool; (status, what it printed).
private func tool(_ path: String, _ arguments: [String]) throws -> (Int32, String) {
    try Conformance.run(path, arguments)
}

/// Bytes that compress like records do: the same shape line after line, the values changing.
private func sampleBytes(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
    var state = seed
    var out: [UInt8] = []
    out.reserveCapacity(count + 200)
    let titles = ["Take out the trash", "Water the plants", "Pay the rent", "Fold the laundry", "Feed the cat"]
    var n = 0
    while out.count < count {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        n += 1
        out += Array(
            "{\"recordName\":\"task-\(seed)-\(n)\",\"fields\":{\"title\":\"\(titles[Int(state >> 61) % titles.count])\",\"due\":\(1_767_225_600_000 + Int64(state >> 40))}}\n"
                .utf8)
    }
    return Array(out.prefix(count))
}

private func decompressAll(_ reader: GzipReader, chunk size: Int = 1 << 15) throws -> [UInt8] {
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: size)
    while true {
        let n = try chunk.withUnsafeMutableBytes { try reader.read(into: $0) }
        if n == 0 { return out }
        out += chunk[0..<n]
    }
}

/// A reader of `bytes` whose source hands out 1 to 8 bytes at a time, as a pipe or a decrypting
/// source may: every header, block and trailer arrives in pieces.
private func trickling(_ bytes: [UInt8], engine: GzipReader.Engine, seed: UInt64 = 5) -> GzipReader {
    var offset = 0
    var state = seed
    return GzipReader(name: "trickle.gz", engine: engine) { buffer in
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        let n = min(buffer.count, bytes.count - offset, Int(state >> 61) + 1)
        if n > 0 {
            bytes.withUnsafeBytes {
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + n)]))
            }
        }
        offset += n
        return n
    }
}

/// One gzip member of `data` with the header's optional parts (RFC 1952, 2.3.1): an extra
/// field, a file name, a comment and the header's own CRC-16, and reserved flag bits when asked.
private func memberWithHeader(_ data: [UInt8], name: String = "chores.jsonl", reserved: UInt8 = 0) -> [UInt8] {
    let plain = GzipCompressor.member(data)
    let flags: UInt8 = 0x02 | 0x04 | 0x08 | 0x10 | reserved
    var header: [UInt8] = [0x1F, 0x8B, 0x08, flags, 0x80, 0x55, 0x5F, 0x69, 0x00, 0x03]
    let extra: [UInt8] = [0x43, 0x4B, 0x04, 0x00, 0x01, 0x02, 0x03, 0x04]  // subfield "CK", 4 bytes
    header += [UInt8(extra.count), 0] + extra
    header += Array(name.utf8) + [0] + Array("written by hand, with every optional part".utf8) + [0]
    let crc = header.withUnsafeBytes { GzipFraming.crc($0) }
    header += [UInt8(truncatingIfNeeded: crc), UInt8(truncatingIfNeeded: crc >> 8)]
    return header + plain[10...]
}

/// A tar.gz built from (path, content) members, with the writer's own headers.
private func archive(_ members: [(String, [UInt8])], end: Bool = true) -> [UInt8] {
    var tar: [UInt8] = []
    for (path, content) in members {
        tar += Tar.header(path: path, size: Int64(content.count), modified: 1_767_225_600)
        tar += content + Tar.padding(Int64(content.count))
    }
    if end { tar += Tar.end }
    return GzipCompressor.member(tar)
}

private func readAll(
    _ bytes: [UInt8], name: String = "bundle.tar.gz", limits: DecompressionLimits = DecompressionLimits(),
    engine: GzipReader.Engine = .fastest
) throws -> [(String, [UInt8])] {
    let reader = TarReader(gzip: GzipReader(name: name, bytes: bytes, limits: limits, engine: engine))
    var members: [(String, [UInt8])] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while let entry = try reader.next() {
        var content: [UInt8] = []
        while true {
            let n = try chunk.withUnsafeMutableBytes { try reader.readContent(into: $0) }
            if n == 0 { break }
            content += chunk[0..<n]
        }
        #expect(Int64(content.count) == entry.size)
        members.append((entry.path, content))
    }
    return members
}

private func errorText(_ body: () throws -> Void) -> String? {
    do { try body() } catch { return "\(error)" }
    return nil
}

@Suite("gzip and tar")
struct ArchiveTests {
    @Test(
        "gzip: chunked and multi-member streams round trip, and gzip itself agrees",
        arguments: GzipReader.Engine.available)
    func gzipRoundTrip(engine: GzipReader.Engine) throws {
        let data = sampleBytes(3_000_000)
        // Two members, each compressed in uneven chunks, one after the other in one file.
        var file: [UInt8] = []
        for half in [data[..<1_234_567], data[1_234_567...]] {
            let compressor = GzipCompressor(level: 6)
            var offset = half.startIndex
            while offset < half.endIndex {
                let next = min(offset + 77_777, half.endIndex)
                file += Array(half[offset..<next]).withUnsafeBytes { compressor.compress($0) }
                offset = next
            }
            file += compressor.finish()
        }
        #expect(file.count < data.count / 3)
        #expect(try decompressAll(GzipReader(name: "x.gz", bytes: file, engine: engine)) == data)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-\(UUID().uuidString).gz").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(file).write(to: URL(fileURLWithPath: path))
        #expect(try tool("/bin/gzip", ["-t", path]).0 == 0)
        #expect(try decompressAll(try GzipReader(path: path, engine: engine)) == data)
    }

    @Test(
        "ISA-L and zlib read the same bytes from files other tools wrote: gzip -9, gzip -1 with a name, pigz's independent blocks, igzip"
    )
    func enginesAgree() throws {
        let data = sampleBytes(1_500_000, seed: 9)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let plain = folder + "/records.jsonl"
        try Data(data).write(to: URL(fileURLWithPath: plain))
        // Each tool writes its own header (a name, a time, extra flags) and its own blocks.
        let writers: [(String, String)] = [
            ("gzip -9", "gzip -9 -c"), ("gzip -1 -N", "gzip -1 -N -c"), ("pigz -i", "pigz -i -c -b 128"),
            ("igzip -3", "igzip -3 -c"),
        ]
        for (what, command) in writers {
            let file = folder + "/out.gz"
            let (status, printed) = try tool("/bin/sh", ["-c", "\(command) '\(plain)' > '\(file)'"])
            #expect(status == 0, "\(what): \(printed)")
            let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: file)))
            #expect(bytes.count > 1_000 && bytes.count < data.count / 3, "\(what): \(bytes.count) bytes")
            for engine in GzipReader.Engine.available {
                #expect(
                    try decompressAll(GzipReader(name: "out.gz", bytes: bytes, engine: engine)) == data,
                    "\(what) read by \(engine)")
            }
        }
    }

    @Test(
        "headers with every optional part, several members, input in pieces of 1 to 8 bytes, output in odd sizes: both engines read them; gzip and zlib agree the file is sound",
        arguments: GzipReader.Engine.available)
    func headersInPieces(engine: GzipReader.Engine) throws {
        let parts = [sampleBytes(70_000, seed: 21), sampleBytes(1, seed: 22), sampleBytes(200_000, seed: 23)]
        let file = memberWithHeader(parts[0]) + memberWithHeader(parts[1], name: "x") + GzipCompressor.member(parts[2])
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-\(UUID().uuidString).gz").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(file).write(to: URL(fileURLWithPath: path))
        #expect(try tool("/bin/gzip", ["-t", path]).0 == 0)
        let whole = parts.flatMap { $0 }
        for (seed, chunk) in [(5, 1), (6, 7), (7, 4093), (8, 1 << 16)] {
            #expect(
                try decompressAll(trickling(file, engine: engine, seed: UInt64(seed)), chunk: chunk) == whole,
                "output in \(chunk)-byte pieces")
        }
        // The header's CRC-16 is checked, and reserved flags are refused, as zlib does.
        var badHeader = file
        badHeader[10 + 2 + 8 + 13 + 42] ^= 0x01
        let header = errorText { _ = try decompressAll(trickling(badHeader, engine: engine)) }
        #expect(header?.contains("header") == true, "\(header ?? "accepted")")
        let reserved = errorText {
            _ = try decompressAll(
                GzipReader(name: "r.gz", bytes: memberWithHeader(parts[0], reserved: 0x20), engine: engine))
        }
        #expect(reserved != nil)
    }

    @Test(
        "every byte of each member's trailer is checked, and a cut at any point of it is an error",
        arguments: GzipReader.Engine.available)
    func trailers(engine: GzipReader.Engine) throws {
        let first = GzipCompressor.member(sampleBytes(50_000, seed: 31))
        let second = GzipCompressor.member(sampleBytes(60_000, seed: 32))
        let file = first + second
        #expect(try decompressAll(GzipReader(name: "t.gz", bytes: file, engine: engine)).count == 110_000)
        for end in [first.count, file.count] {
            for position in (end - 8)..<end {
                var damaged = file
                damaged[position] ^= 0x10
                let message = errorText {
                    _ = try decompressAll(GzipReader(name: "t.gz", bytes: damaged, engine: engine))
                }
                #expect(
                    message?.contains("t.gz: ") == true,
                    "trailer byte \(position - end + 8) of the member ending at \(end): \(message ?? "accepted")")
            }
        }
        for cut in [first.count - 8, first.count - 4, first.count - 1, file.count - 8, file.count - 4, file.count - 1] {
            let message = errorText {
                _ = try decompressAll(GzipReader(name: "t.gz", bytes: Array(file[..<cut]), engine: engine))
            }
            #expect(message?.contains("ends early") == true, "cut at \(cut): \(message ?? "accepted")")
        }
        // A cut exactly between members is a whole file of one member.
        #expect(try decompressAll(GzipReader(name: "t.gz", bytes: first, engine: engine)).count == 50_000)
    }

    @Test("this build inflates with ISA-L where CI asks for it")
    func isalBuilt() {
        // CI installs libisal-dev and sets CKPORT_EXPECT_ISAL=1, so a build that lost it fails here.
        if ProcessInfo.processInfo.environment["CKPORT_EXPECT_ISAL"] == "1" {
            #expect(GzipReader.Engine.available == [.zlib, .isal])
            #expect(GzipReader.Engine.fastest == .isal)
        } else {
            #expect(GzipReader.Engine.available.first == .zlib)
        }
    }

    /// `data` cut into `cuts`, compressed on `workers` threads as runs that start at `runStarts`
    /// (chunk numbers that refer to nothing before them), framed as one gzip member.
    private func segmented(_ data: [UInt8], cuts: [Int], runStarts: Set<Int>, workers: Int) throws -> [UInt8] {
        var out = GzipFraming.header
        var crc: UInt32 = 0
        var expected = 0
        let deflater = ParallelDeflater(level: 6, workers: workers) { segment in
            #expect(segment.index == expected)
            expected += 1
            out += segment.compressed
            crc = GzipFraming.combine(crc, segment.crc, secondLength: Int64(segment.length))
        }
        var start = 0
        for (number, end) in (cuts + [data.count]).enumerated() {
            try deflater.add(Array(data[start..<end]), continuing: !runStarts.contains(number))
            start = end
        }
        try deflater.finish()
        out += DeflateSegmenter(level: 6).segment([], last: true)
        return out + GzipFraming.trailer(crc: crc, length: Int64(data.count))
    }

    @Test(
        "deflate segments compressed on several threads join into one gzip member that gzip, zlib and ISA-L read back")
    func parallelSegments() throws {
        let data =
            sampleBytes(2_500_000, seed: 3) + [UInt8](repeating: 0x41, count: 70_000) + sampleBytes(400_000, seed: 4)
        // Uneven chunks: tiny ones, ones under the 32 KiB window (so a chunk's priming reaches
        // back over several chunks), and large ones; runs that start anew in the middle.
        let cuts = [
            1, 7, 20_000, 30_000, 31_000, 300_000, 700_000, 1_000_000, 1_000_001, 2_400_000, 2_600_000, 2_900_000,
        ]
        let runStarts: Set<Int> = [0, 5, 9]
        let one = try segmented(data, cuts: cuts, runStarts: runStarts, workers: 1)
        let three = try segmented(data, cuts: cuts, runStarts: runStarts, workers: 3)
        // The bytes depend on where the chunks are cut, not on how many threads compress them.
        #expect(one == three)
        for engine in GzipReader.Engine.available {
            #expect(
                try decompressAll(GzipReader(name: "segments.gz", bytes: three, engine: engine)) == data, "\(engine)")
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-\(UUID().uuidString).gz").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(three).write(to: URL(fileURLWithPath: path))
        // gzip checks the CRC-32 and length of the trailer against what it decompressed.
        #expect(try tool("/bin/gzip", ["-t", path]).0 == 0)
        // Python's gzip module (zlib underneath) reads the same bytes back.
        let back = path + ".out"
        defer { try? FileManager.default.removeItem(atPath: back) }
        let (status, printed) = try tool(
            "/usr/bin/python3",
            ["-c", "import gzip, sys; open(sys.argv[2], 'wb').write(gzip.open(sys.argv[1]).read())", path, back])
        #expect(status == 0, "\(printed)")
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: back))) == data)
        // Priming with the bytes before a chunk keeps the ratio of one stream: within 1 % of
        // zlib compressing the whole in one go, and clearly better than every chunk alone.
        let whole = GzipCompressor.member(data)
        #expect(Double(three.count) < Double(whole.count) * 1.01)
        let alone = try segmented(data, cuts: cuts, runStarts: Set(0...cuts.count), workers: 2)
        #expect(try decompressAll(GzipReader(name: "alone.gz", bytes: alone)) == data)
        #expect(alone.count > three.count + 1_000)
    }

    @Test("tar: short, prefixed and pax-long names, empty members; tar lists exactly them")
    func tarRoundTrip() throws {
        let long = "records/shared/" + String(repeating: "a-very-long-zone-name-", count: 14) + "/Task.jsonl"
        let prefixed =
            "records/shared/" + String(repeating: "z", count: 90) + "/EventParticipant-with-a-long-name.jsonl"
        let members: [(String, [UInt8])] = [
            ("manifest.json", Array("{\"format\":1}\n".utf8)),
            ("schema.ckdb", []),
            (prefixed, sampleBytes(10_000, seed: 2)),
            (long, sampleBytes(70_000, seed: 3)),
            ("assets/e3b0c442", [1, 2, 3]),
        ]
        #expect(long.utf8.count > 255)
        #expect(Tar.split(prefixed) != nil && prefixed.utf8.count > 100)
        let bytes = archive(members)
        let back = try readAll(bytes)
        #expect(back.map(\.0) == members.map(\.0))
        #expect(back.map(\.1) == members.map(\.1))
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-\(UUID().uuidString).tar.gz")
            .path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let (status, listing) = try tool("/bin/tar", ["-tzf", path])
        #expect(status == 0)
        #expect(listing.split(separator: "\n").map(String.init) == members.map(\.0))
    }

    @Test(
        "truncation anywhere and a flipped byte anywhere are errors, never silent",
        arguments: GzipReader.Engine.available)
    func damage(engine: GzipReader.Engine) throws {
        let bytes = archive([
            ("manifest.json", Array("{}".utf8)), ("records/private/_defaultZone/Task.jsonl", sampleBytes(200_000)),
        ])
        for cut in [1, 10, 18, bytes.count / 3, bytes.count / 2, bytes.count - 9, bytes.count - 1] {
            let message = errorText { _ = try readAll(Array(bytes[..<cut]), engine: engine) }
            #expect(message != nil, "cut at \(cut)")
            #expect(message?.hasPrefix("bundle.tar.gz: ") == true, "\(message ?? "")")
        }
        for position in stride(from: 12, to: bytes.count - 4, by: max(1, bytes.count / 23)) {
            var damaged = bytes
            damaged[position] ^= 0x40
            #expect(errorText { _ = try readAll(damaged, engine: engine) } != nil, "flipped byte \(position)")
        }
        // Junk after the last member, and bytes that are not gzip at all.
        #expect(
            errorText { _ = try readAll(bytes + [0x00, 0x01], engine: engine) }?.contains(
                "unexpected bytes after the end") == true)
        #expect(errorText { _ = try readAll(Array("not gzip".utf8), engine: engine) } != nil)
        #expect(errorText { _ = try readAll([], engine: engine) }?.contains("empty") == true)
    }

    /// Hand-built hostile archives: (what, tar bytes, words of the refusal).
    static func hostile() -> [(String, [UInt8], String)] {
        func member(_ path: String, type: UInt8 = UInt8(ascii: "0"), content: [UInt8] = [0x41]) -> [UInt8] {
            Tar.block(name: path, prefix: "", size: Int64(content.count), modified: 0, mode: 0o644, type: type)
                + content + Tar.padding(Int64(content.count))
        }
        var badSum = member("manifest.json")
        badSum[0] = UInt8(ascii: "M")
        let paxRecord = Array("30 path=../../etc/cron.d/evil\n".utf8)
        return [
            ("parent directory", member("../outside.jsonl") + Tar.end, "climbs out of the bundle"),
            ("nested parent", member("records/../../x") + Tar.end, "climbs out of the bundle"),
            ("absolute path", member("/etc/passwd") + Tar.end, "absolute path"),
            (
                "pax path escaping",
                Tar.block(
                    name: "PaxHeaders/x", prefix: "", size: Int64(paxRecord.count), modified: 0, mode: 0o644,
                    type: UInt8(ascii: "x"))
                    + paxRecord + Tar.padding(Int64(paxRecord.count)) + member("innocent") + Tar.end,
                "climbs out of the bundle"
            ),
            ("symbolic link", member("schema.ckdb", type: UInt8(ascii: "2"), content: []) + Tar.end, "is a link"),
            ("hard link", member("schema.ckdb", type: UInt8(ascii: "1"), content: []) + Tar.end, "is a link"),
            ("character device", member("records/dev", type: UInt8(ascii: "3"), content: []) + Tar.end, "device"),
            ("directory", member("records/", type: UInt8(ascii: "5"), content: []) + Tar.end, "directory"),
            ("duplicate member", member("manifest.json") + member("manifest.json") + Tar.end, "appears twice"),
            ("damaged header", badSum + Tar.end, "checksum does not match"),
            ("no end blocks", member("manifest.json"), "ends early"),
            (
                "member cut short",
                Array(member("records/a.jsonl", content: [UInt8](repeating: 0x41, count: 5000)).prefix(1500)),
                "ends inside a member"
            ),
        ]
    }

    @Test("hostile archives are refused with a message naming the member", arguments: 0..<12)
    func hostileArchives(index: Int) throws {
        let (what, tar, words) = ArchiveTests.hostile()[index]
        let message = errorText { _ = try readAll(GzipCompressor.member(tar)) }
        #expect(message?.contains(words) == true, "\(what): \(message ?? "accepted")")
    }

    @Test("a decompression bomb is refused by ratio and by total size", arguments: GzipReader.Engine.available)
    func bomb(engine: GzipReader.Engine) throws {
        let zeros = [UInt8](repeating: 0, count: 64 << 20)
        let bomb = GzipCompressor.member(zeros, level: 9)
        #expect(bomb.count < 100_000)
        let byRatio = errorText { _ = try decompressAll(GzipReader(name: "bomb.gz", bytes: bomb, engine: engine)) }
        #expect(byRatio?.contains("possible decompression bomb") == true, "\(byRatio ?? "accepted")")
        let bySize = errorText {
            _ = try decompressAll(
                GzipReader(
                    name: "bomb.gz", bytes: GzipCompressor.member(sampleBytes(3_000_000)),
                    limits: DecompressionLimits(maxTotalBytes: 1_000_000), engine: engine))
        }
        #expect(bySize?.contains("limit of 1000000 bytes") == true, "\(bySize ?? "accepted")")
        // The limits can be raised for a file known to be good.
        let allowed = try decompressAll(
            GzipReader(name: "zeros.gz", bytes: bomb, limits: DecompressionLimits(maxRatio: 10_000), engine: engine))
        #expect(allowed.count == zeros.count)
    }

    @Test(
        "random padding does not buy room for a bomb: each stretch of output is held to the ratio, not only the whole",
        arguments: GzipReader.Engine.available)
    func paddedBomb(engine: GzipReader.Engine) throws {
        // 16 MB of incompressible bytes, then 256 MB of zeros: 272 MB from ~16.3 MB, 17× overall.
        var state: UInt64 = 7
        let padding = (0..<(16 << 20)).map { _ -> UInt8 in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 56)
        }
        let stream =
            GzipCompressor.member(padding, level: 1)
            + GzipCompressor.member([UInt8](repeating: 0, count: 256 << 20), level: 9)
        #expect(Int64(256 + 16) * (1 << 20) / Int64(stream.count) < DecompressionLimits().maxRatio)
        let reader = GzipReader(name: "padded.gz", bytes: stream, engine: engine)
        var produced: Int64 = 0
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        let message = errorText {
            while true {
                let n = try chunk.withUnsafeMutableBytes { try reader.read(into: $0) }
                if n == 0 { break }
                produced += Int64(n)
            }
        }
        #expect(
            message?.contains("possible decompression bomb") == true && message?.contains("expand from") == true,
            "\(message ?? "accepted")")
        // Refused within the first stretch of zeros, long before the 256 MB.
        #expect(produced < 40 << 20, "\(produced)")
    }

    @Test(
        "a pax global header claiming gigabytes is refused from its header, before anything is read or set aside for it"
    )
    func paxGlobalHeader() throws {
        // 512 bytes of header, no content: the claim alone.
        let claim = Tar.block(
            name: "pax_global_header", prefix: "", size: 4 << 30, modified: 0, mode: 0o644, type: UInt8(ascii: "g"))
        let stream = GzipCompressor.member(claim)
        #expect(stream.count < 200)
        let message = errorText { _ = try readAll(stream) }
        #expect(
            message?.contains("pax global header of 4294967296 bytes") == true
                && message?.contains("larger than") == true, "\(message ?? "accepted")")
        // A small global header (as GNU tar writes) is still read past.
        let record = Array("20 comment=hello\n".utf8)
        let small =
            Tar.block(
                name: "pax_global_header", prefix: "", size: Int64(record.count), modified: 0, mode: 0o644,
                type: UInt8(ascii: "g"))
            + record + Tar.padding(Int64(record.count))
        let members = try readAll(
            GzipCompressor.member(
                small + Tar.header(path: "a.txt", size: 2, modified: 0) + Array("hi".utf8) + Tar.padding(2) + Tar.end))
        #expect(members.map(\.0) == ["a.txt"])
    }
}
