import Crypto
import Foundation
import Records
import Synchronization

/// Where a bundle's records wait while the manifest, which names every member's size and
/// SHA-256 and must come first, is made.
///
/// The file is removed from its folder as soon as it is opened: only this process's open
/// descriptor reaches it, so nothing is left behind however the process ends. For an
/// encrypted bundle every chunk is sealed with AES-256-GCM under a key that exists only in
/// this process's memory, so no record's text reaches the disk in the clear, not even for
/// the seconds the spool lives.
final class BundleSpool {
    private let fd: Int32
    private let key: SymmetricKey?
    /// Each chunk's offset and length in the file.
    private var chunks: [(offset: Int64, length: Int)] = []
    private var end: Int64 = 0
    let directory: String

    init(directory: String, sealed: Bool) throws {
        self.directory = directory
        do {
            fd = try PrivateFiles.anonymous(".ckport-spool-", in: directory)
        } catch let error as PrivateFileError {
            throw OutputError(path: directory, message: error.reason)
        }
        key = sealed ? SymmetricKey(size: .bits256) : nil
    }

    deinit { close(fd) }

    /// How many chunks the spool holds.
    var count: Int { chunks.count }

    /// Adds one chunk.
    func append(_ bytes: [UInt8]) throws {
        var stored = bytes
        if let key {
            let box = try AES.GCM.seal(bytes, using: key, nonce: try BundleSpool.nonce(chunks.count))
            stored = Array(box.ciphertext) + Array(box.tag)
        }
        try stored.withUnsafeBytes { raw in
            var written = 0
            while written < raw.count {
                let n = pwrite(fd, raw.baseAddress! + written, raw.count - written, off_t(end) + off_t(written))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw OutputError(
                        path: directory, message: "cannot write a temporary file: \(String(cString: strerror(errno)))")
                }
                written += n
            }
        }
        chunks.append((end, stored.count))
        end += Int64(stored.count)
    }

    /// Hands out the chunks in `range`, opened again when sealed.
    func read(_ range: Range<Int>, _ body: ([UInt8]) throws -> Void) throws {
        for index in range {
            let (offset, length) = chunks[index]
            var bytes = [UInt8](repeating: 0, count: length)
            let got = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, length, off_t(offset)) }
            guard got == length else { throw OutputError(path: directory, message: "a temporary file ended early") }
            if let key {
                let box = try AES.GCM.SealedBox(
                    nonce: try BundleSpool.nonce(index), ciphertext: bytes.dropLast(16), tag: bytes.suffix(16))
                bytes = Array(try AES.GCM.open(box, using: key))
            }
            try body(bytes)
        }
    }

    /// Chunk numbers as nonces: the key is new for every spool, so each nonce is used once.
    private static func nonce(_ index: Int) throws -> AES.GCM.Nonce {
        try AES.GCM.Nonce(
            data: [UInt8](repeating: 0, count: 4) + withUnsafeBytes(of: UInt64(index).bigEndian) { Array($0) })
    }
}

/// Staged bytes (an asset on its way into a store) in a file no name reaches, in this
/// process's private folder, sealed under a key that exists only in memory: whatever the bytes
/// were (an encrypted bundle's asset, say), their clear text never reaches the disk, and
/// nothing of them stays behind however the process ends.
public final class SealedBytes: StagedBytes, Sendable {
    /// The spool, and how many bytes it holds; every use holds the lock.
    private let spool: Mutex<(spool: BundleSpool, count: Int64)>

    public init() throws {
        spool = Mutex((try BundleSpool(directory: try PrivateFiles.folder(), sealed: true), 0))
    }

    public var count: Int64 { spool.withLock { $0.count } }

    /// Adds bytes at the end.
    public func append(_ bytes: UnsafeRawBufferPointer) throws {
        guard !bytes.isEmpty else { return }
        let piece = Array(bytes)
        try spool.withLock { held in
            try held.spool.append(piece)
            held.count += Int64(piece.count)
        }
    }

    public func read(_ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        try spool.withLock { held in
            try held.spool.read(0..<held.spool.count) { chunk in try chunk.withUnsafeBytes { try body($0) } }
        }
    }

    /// The file goes with the last reference; nothing else to do.
    public func discard() {}
}
