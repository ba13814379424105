import Crypto
import Foundation
import Records

/// A bundle kept as parts rather than as one file, as a backup repository keeps it: the
/// records members' compressed bytes back to back (the body, written while the records are
/// read), this description (written last: the manifest, the schema, the migration history and
/// where each records member's bytes lie in the body) and the asset files, kept apart (each
/// once, by SHA-256). ``BundleAssembly`` makes the bundle's bytes from them again: the bundle
/// `ckport backup -o` would have written at that moment, member for member.
public struct BundleParts: Codable, Sendable, Equatable {
    /// A records member's compressed bytes in the body: their length, and the CRC-32 of the
    /// bytes they inflate to.
    public struct Span: Codable, Sendable, Equatable {
        public var compressedBytes: Int64
        public var crc: UInt32

        public init(compressedBytes: Int64, crc: UInt32) {
            self.compressedBytes = compressedBytes
            self.crc = crc
        }
    }

    public var manifest: BundleManifest
    /// `schema.ckdb`.
    public var schema: String
    /// `migrations.json`, when the store has had migrations.
    public var migrations: String?
    /// One for each records (or changes) member of the manifest, in its order.
    public var records: [Span]
    /// The body's length.
    public var bodyBytes: Int64

    public init(manifest: BundleManifest, schema: String, migrations: String?, records: [Span], bodyBytes: Int64) {
        self.manifest = manifest
        self.schema = schema
        self.migrations = migrations
        self.records = records
        self.bodyBytes = bodyBytes
    }

    /// The asset members, in the bundle's order.
    public var assets: [BundleManifest.Member] { manifest.members.filter { $0.kind == "asset" } }

    /// What is wrong with the parts for assembling a bundle, nil when nothing is: the small
    /// members must match the manifest, and each records member have its span.
    public func problem() -> String? {
        let recordMembers = manifest.members.filter { $0.kind == "records" || $0.kind == "changes" }
        guard recordMembers.count == records.count else {
            return "names \(recordMembers.count) records members but the spans of \(records.count)"
        }
        guard records.reduce(Int64(0), { $0 + $1.compressedBytes }) == bodyBytes else {
            return "its records members' spans do not add up to the body's \(bodyBytes) bytes"
        }
        for (path, text) in [("schema.ckdb", Optional(schema)), (BundleWriter.migrationsPath, migrations)] {
            let member = manifest.members.first { $0.path == path }
            guard let text else {
                if member != nil { return "lacks \(path), which its manifest names" }
                continue
            }
            guard let member, member.sha256 == BundleReader.hex(SHA256.hash(data: Array(text.utf8))) else {
                return "holds a \(path) that does not match its manifest"
            }
        }
        return nil
    }
}

/// Where pass 1 of a bundle puts the records members' compressed chunks.
protocol CompressedChunkSink: AnyObject {
    /// How many chunks it has taken.
    var count: Int { get }
    func append(_ bytes: [UInt8]) throws
}

extension BundleSpool: CompressedChunkSink {}

/// Hands each chunk on at once, keeping only its length.
final class StreamingSink: CompressedChunkSink {
    private let body: ([UInt8]) throws -> Void
    private(set) var lengths: [Int64] = []
    private(set) var total: Int64 = 0

    init(_ body: @escaping ([UInt8]) throws -> Void) { self.body = body }

    var count: Int { lengths.count }

    func append(_ bytes: [UInt8]) throws {
        try body(bytes)
        lengths.append(Int64(bytes.count))
        total += Int64(bytes.count)
    }
}

/// Makes a bundle's bytes from its parts (see ``BundleParts``): `body` hands out the body's
/// bytes in order (as `read(2)` does: how many it put in the buffer, 0 at the end; it is read
/// no further than the parts say the body goes, so it may go on with the asset files), and
/// `asset` writes an asset file's bytes, in the order of ``BundleParts/assets``, through the
/// function it is given. The bundle goes to `emit` a piece at a time; memory stays flat.
public enum BundleAssembly {
    public static func assemble(
        _ parts: BundleParts, level: Int32 = 6,
        body: (UnsafeMutableRawBufferPointer) throws -> Int,
        asset: (BundleManifest.Member, _ put: ([UInt8]) throws -> Void) throws -> Void,
        emit: @escaping ([UInt8]) throws -> Void
    ) throws {
        if let problem = parts.problem() {
            throw ArchiveError(file: "", message: "the bundle's description \(problem)")
        }
        let created = ISO8601.parse(parts.manifest.created).map { $0 / 1000 } ?? 0
        let archive = ArchiveStream(level: level, modified: created, emit: emit)
        var small: [(path: String, kind: String, bytes: [UInt8])] = [
            ("schema.ckdb", "schema", Array(parts.schema.utf8))
        ]
        if let migrations = parts.migrations {
            small.append((BundleWriter.migrationsPath, "migrations", Array(migrations.utf8)))
        }
        try archive.head(parts.manifest, small)
        var buffer = [UInt8](repeating: 0, count: 1 << 18)
        var spans = parts.records.makeIterator()
        for member in parts.manifest.members where member.kind == "records" || member.kind == "changes" {
            let span = spans.next()!
            try archive.compressedMember(member.path, size: member.bytes, crc: span.crc) { emit in
                var left = span.compressedBytes
                while left > 0 {
                    let want = Int(min(left, Int64(buffer.count)))
                    let got = try buffer.withUnsafeMutableBytes {
                        try body(UnsafeMutableRawBufferPointer(rebasing: $0[0..<want]))
                    }
                    guard got > 0 else {
                        throw ArchiveError(
                            file: "", message: "the bundle's body ended \(left) bytes early, in \(member.path)")
                    }
                    try emit(Array(buffer[0..<got]))
                    left -= Int64(got)
                }
            }
        }
        for member in parts.assets {
            try archive.member(member.path, size: member.bytes) { put in
                var hasher = SHA256()
                var written: Int64 = 0
                try withoutActuallyEscaping(put) { put in
                    try asset(member) { bytes in
                        hasher.update(data: bytes)
                        written += Int64(bytes.count)
                        try put(bytes)
                    }
                }
                guard written == member.bytes, BundleReader.hex(hasher.finalize()) == member.sha256 else {
                    throw ArchiveError(
                        file: "", message: "the asset file \(member.sha256) does not hold the bytes its SHA-256 names")
                }
            }
        }
        try archive.finish()
    }
}
