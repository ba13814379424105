import Foundation

/// POSIX tar (ustar, with pax extended headers for long names): enough to write a bundle that
/// `tar` lists, and to read one back while refusing anything a bundle never holds.
public enum Tar {
    public static let blockSize = 512

    /// The header block(s) of a regular file: a pax header first when the name does not fit
    /// ustar's 100 + 155 bytes.
    public static func header(path: String, size: Int64, modified: Int64 = 0, mode: Int = 0o644) -> [UInt8] {
        var out: [UInt8] = []
        let name: String
        let prefix: String
        if let (p, n) = split(path) {
            prefix = p
            name = n
        } else {
            // pax: "<length> path=<path>\n", the length counting itself.
            let body = " path=\(path)\n"
            var length = body.utf8.count + 1
            while String(length).utf8.count + body.utf8.count != length {
                length = String(length).utf8.count + body.utf8.count
            }
            let record = Array((String(length) + body).utf8)
            out += block(
                name: "PaxHeaders/"
                    + String(decoding: path.utf8.suffix(80), as: UTF8.self).replacingOccurrences(of: "/", with: "_"),
                prefix: "", size: Int64(record.count), modified: modified, mode: mode, type: UInt8(ascii: "x"))
            out += record + padding(Int64(record.count))
            prefix = ""
            name = String(decoding: path.utf8.suffix(99), as: UTF8.self)
        }
        out += block(name: name, prefix: prefix, size: size, modified: modified, mode: mode, type: UInt8(ascii: "0"))
        return out
    }

    /// Zeros that fill a member of `size` bytes up to the next block.
    public static func padding(_ size: Int64) -> [UInt8] {
        let rest = Int(size % Int64(blockSize))
        return rest == 0 ? [] : [UInt8](repeating: 0, count: blockSize - rest)
    }

    /// The two zero blocks that end an archive.
    public static let end = [UInt8](repeating: 0, count: 2 * blockSize)

    /// ustar's name/prefix split, or nil when the path does not fit.
    static func split(_ path: String) -> (String, String)? {
        let bytes = Array(path.utf8)
        if bytes.count <= 100 { return ("", path) }
        for index in bytes.indices.reversed() where bytes[index] == UInt8(ascii: "/") {
            let prefix = bytes[..<index]
            let name = bytes[(index + 1)...]
            if prefix.count <= 155 && name.count <= 100 && !name.isEmpty {
                return (String(decoding: prefix, as: UTF8.self), String(decoding: name, as: UTF8.self))
            }
        }
        return nil
    }

    static func block(name: String, prefix: String, size: Int64, modified: Int64, mode: Int, type: UInt8) -> [UInt8] {
        var header = [UInt8](repeating: 0, count: blockSize)
        func put(_ text: String, at offset: Int, width: Int) {
            for (i, byte) in text.utf8.prefix(width).enumerated() { header[offset + i] = byte }
        }
        func octal(_ value: Int64, at offset: Int, width: Int) {
            let digits = String(value, radix: 8)
            put(String(repeating: "0", count: max(0, width - 1 - digits.count)) + digits, at: offset, width: width - 1)
        }
        put(name, at: 0, width: 100)
        octal(Int64(mode), at: 100, width: 8)
        octal(0, at: 108, width: 8)
        octal(0, at: 116, width: 8)
        octal(size, at: 124, width: 12)
        octal(modified, at: 136, width: 12)
        for i in 148..<156 { header[i] = 0x20 }
        header[156] = type
        put("ustar", at: 257, width: 6)
        put("00", at: 263, width: 2)
        put(prefix, at: 345, width: 155)
        let sum = header.reduce(0) { $0 + Int64($1) }
        let digits = String(sum, radix: 8)
        put(String(repeating: "0", count: max(0, 6 - digits.count)) + digits, at: 148, width: 6)
        header[154] = 0
        header[155] = 0x20
        return header
    }
}

/// One member of a tar archive being read.
public struct TarEntry: Sendable, Equatable {
    public var path: String
    public var size: Int64
    /// Where its header starts in the uncompressed archive, for messages.
    public var offset: Int64
}

/// Reads a tar stream member by member, refusing what a ckport bundle never holds: links,
/// devices, paths that are absolute or climb out with `..`, a member named twice, a header
/// whose checksum is wrong, and an archive that ends early.
public final class TarReader {
    public let name: String
    private let read: (UnsafeMutableRawBufferPointer) throws -> Int
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)
    private var start = 0
    private var end = 0
    private var offset: Int64 = 0
    private var remaining: Int64 = 0
    private var paddingLeft = 0
    private var seen: Set<String> = []
    private var finished = false

    /// - Parameter read: fills the buffer with the next uncompressed bytes (0 at the end).
    public init(name: String, read: @escaping (UnsafeMutableRawBufferPointer) throws -> Int) {
        self.name = name
        self.read = read
    }

    public convenience init(gzip: GzipReader) {
        self.init(name: gzip.name) { try gzip.read(into: $0) }
    }

    private func fail(_ message: String) -> ArchiveError {
        ArchiveError(file: name, message: message)
    }

    /// Ensures at least `count` bytes are buffered; false at the end of the input.
    private func fill(_ count: Int) throws -> Bool {
        if end - start >= count { return true }
        if start > 0 {
            buffer.replaceSubrange(0..<(end - start), with: buffer[start..<end])
            end -= start
            start = 0
        }
        if buffer.count < count { buffer += [UInt8](repeating: 0, count: count - buffer.count) }
        while end - start < count {
            let n = try buffer.withUnsafeMutableBytes { try read(UnsafeMutableRawBufferPointer(rebasing: $0[end...])) }
            if n == 0 { return false }
            end += n
        }
        return true
    }

    private func take(_ count: Int) -> ArraySlice<UInt8> {
        defer {
            start += count
            offset += Int64(count)
        }
        return buffer[start..<(start + count)]
    }

    /// Reads of a member's content at least this large skip the reader's own buffer.
    static let straightRead = 4096

    /// The largest pax header (extended or global) read: ckport writes a few hundred bytes.
    static let maxPaxHeader: Int64 = 1 << 20

    /// The next member, or nil after the end-of-archive blocks. Its content must be read with
    /// `readContent` (or is skipped by the next call).
    public func next() throws -> TarEntry? {
        guard !finished else { return nil }
        try skipRest()
        var paxPath: String?
        while true {
            let headerOffset = offset
            guard try fill(Tar.blockSize) else {
                throw fail("the archive ends early, without its end-of-archive blocks (at byte \(offset))")
            }
            let header = Array(take(Tar.blockSize))
            if header.allSatisfy({ $0 == 0 }) {
                finished = true
                try drain()
                return nil
            }
            try checkSum(header, at: headerOffset)
            let type = header[156]
            let size = try octal(header[124..<136], field: "size", at: headerOffset)
            let shortName = text(header[0..<100]) ?? ""
            let prefix = header[257..<262].elementsEqual("ustar".utf8) ? text(header[345..<500]) ?? "" : ""
            let path = paxPath ?? (prefix.isEmpty ? shortName : prefix + "/" + shortName)
            switch type {
            case UInt8(ascii: "x"), UInt8(ascii: "g"):
                // A header's claimed size is checked before anything is read or set aside for it.
                guard size <= TarReader.maxPaxHeader else {
                    throw fail(
                        "a pax \(type == UInt8(ascii: "g") ? "global " : "")header of \(size) bytes at byte \(headerOffset) is larger than the \(TarReader.maxPaxHeader) a bundle's headers ever need"
                    )
                }
                let record = try content(size)
                if type == UInt8(ascii: "x") { paxPath = try paxPathValue(record, at: headerOffset) }
                continue
            case UInt8(ascii: "0"), 0:
                break
            case UInt8(ascii: "1"), UInt8(ascii: "2"):
                throw fail("member '\(path)' is a link; a bundle holds only regular files")
            case UInt8(ascii: "3"), UInt8(ascii: "4"), UInt8(ascii: "6"):
                throw fail("member '\(path)' is a device or FIFO; a bundle holds only regular files")
            case UInt8(ascii: "5"):
                throw fail("member '\(path)' is a directory; a bundle holds only regular files")
            default:
                throw fail(
                    "member '\(path)' has tar type '\(Character(Unicode.Scalar(type)))', which a bundle never holds")
            }
            try Tar.checkPath(path, archive: name)
            guard seen.insert(path).inserted else { throw fail("member '\(path)' appears twice") }
            remaining = size
            paddingLeft = Tar.padding(size).count
            return TarEntry(path: path, size: size, offset: headerOffset)
        }
    }

    /// Reads up to `buffer.count` bytes of the current member's content; 0 at its end.
    public func readContent(into target: UnsafeMutableRawBufferPointer) throws -> Int {
        guard remaining > 0 else { return 0 }
        let left = Int(min(remaining, Int64(Int.max)))
        if start == end {
            // Nothing buffered and a large read: straight into the caller's buffer, no further
            // than the member's end, saving a copy of every byte.
            if target.count >= TarReader.straightRead {
                let n = try read(UnsafeMutableRawBufferPointer(rebasing: target[0..<min(target.count, left)]))
                guard n > 0 else { throw fail("the archive ends inside a member (\(remaining) bytes missing)") }
                offset += Int64(n)
                remaining -= Int64(n)
                return n
            }
            guard try fill(1) else { throw fail("the archive ends inside a member (\(remaining) bytes missing)") }
        }
        let n = min(target.count, end - start, left)
        buffer.withUnsafeBytes { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[start..<(start + n)])) }
        start += n
        offset += Int64(n)
        remaining -= Int64(n)
        return n
    }

    /// Reads what follows the end of the archive, so that the compressed stream is checked to
    /// its last byte (gzip's CRC and length come at the very end). tar pads archives with
    /// zero blocks; anything else there is refused.
    private func drain() throws {
        while true {
            if start == end {
                guard try fill(1) else { return }
            }
            if buffer[start..<end].contains(where: { $0 != 0 }) {
                throw fail("data after the end of the archive (at byte \(offset))")
            }
            offset += Int64(end - start)
            start = end
        }
    }

    private func skipRest() throws {
        var scratch = [UInt8](repeating: 0, count: 1 << 16)
        while remaining > 0 {
            _ = try scratch.withUnsafeMutableBytes { try readContent(into: $0) }
        }
        if paddingLeft > 0 {
            guard try fill(paddingLeft) else { throw fail("the archive ends inside a member's padding") }
            _ = take(paddingLeft)
            paddingLeft = 0
        }
    }

    private func content(_ size: Int64) throws -> [UInt8] {
        let count = Int(size)
        guard try fill(count) else { throw fail("the archive ends inside a header") }
        let bytes = Array(take(count))
        let pad = Tar.padding(size).count
        if pad > 0 {
            guard try fill(pad) else { throw fail("the archive ends inside a header's padding") }
            _ = take(pad)
        }
        return bytes
    }

    private func text(_ bytes: ArraySlice<UInt8>) -> String? {
        let trimmed = bytes.prefix { $0 != 0 }
        return String(validating: Array(trimmed), as: UTF8.self)
    }

    private func octal(_ bytes: ArraySlice<UInt8>, field: String, at headerOffset: Int64) throws -> Int64 {
        var value: Int64 = 0
        var any = false
        for byte in bytes {
            if byte == 0 || byte == 0x20 { if any { break } else { continue } }
            guard byte >= 0x30 && byte <= 0x37, value < Int64.max >> 3 else {
                throw fail("the tar header at byte \(headerOffset) has a malformed \(field)")
            }
            value = value << 3 | Int64(byte - 0x30)
            any = true
        }
        return value
    }

    private func checkSum(_ header: [UInt8], at headerOffset: Int64) throws {
        let stored = try octal(header[148..<156], field: "checksum", at: headerOffset)
        var sum: Int64 = 0
        for (i, byte) in header.enumerated() { sum += (148..<156).contains(i) ? 0x20 : Int64(byte) }
        guard sum == stored else {
            throw fail("the tar header at byte \(headerOffset) is damaged (its checksum does not match)")
        }
    }

    private func paxPathValue(_ record: [UInt8], at headerOffset: Int64) throws -> String? {
        guard let text = String(validating: record, as: UTF8.self) else {
            throw fail("the pax header at byte \(headerOffset) is not UTF-8")
        }
        var path: String?
        for line in text.split(separator: "\n") {
            guard let space = line.firstIndex(of: " "), let equals = line.firstIndex(of: "=") else { continue }
            let key = line[line.index(after: space)..<equals]
            if key == "path" { path = String(line[line.index(after: equals)...]) }
            if key == "linkpath" { throw fail("the pax header at byte \(headerOffset) names a link") }
        }
        return path
    }
}

extension Tar {
    /// Refuses member paths that could land outside a folder they were extracted into.
    public static func checkPath(_ path: String, archive: String) throws {
        if path.isEmpty { throw ArchiveError(file: archive, message: "a member has an empty name") }
        if path.hasPrefix("/") { throw ArchiveError(file: archive, message: "member '\(path)' has an absolute path") }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        if parts.contains("..") {
            throw ArchiveError(file: archive, message: "member '\(path)' climbs out of the bundle with '..'")
        }
        if parts.contains(where: { $0.isEmpty || $0 == "." }) || path.contains("\\") || path.utf8.contains(0) {
            throw ArchiveError(file: archive, message: "member '\(path)' has an irregular path")
        }
    }
}
