import Crypto
import CryptoExtras
import Foundation

/// Encrypted bundles: the whole compressed bundle sealed with AES-256-GCM in authenticated
/// chunks, under a key derived from a passphrase with scrypt and a random salt.
///
/// Layout: the line `CKPORT-ENCRYPTED-BUNDLE`, a clear-text JSON header line (format, cipher,
/// KDF and its parameters, salt, chunk size, nonce prefix), then chunks, each a 4-byte
/// big-endian length (the top bit marks the final chunk) and the sealed bytes with their
/// 16-byte tag. A chunk's nonce is the prefix and its index; its authenticated data is the
/// header, its index and whether it is final — so chunks cannot be changed, dropped,
/// reordered or cut off after a chunk without the reader noticing.
public enum BundleEncryption {
    public static let magic = Array("CKPORT-ENCRYPTED-BUNDLE\n".utf8)
    static let finalFlag: UInt32 = 0x8000_0000

    public struct Header: Codable, Sendable {
        public var format = 1
        public var cipher = "AES-256-GCM"
        public var kdf = "scrypt"
        public var n: Int
        public var r: Int
        public var p: Int
        public var salt: String
        public var chunkSize: Int
        public var noncePrefix: String
    }

    /// scrypt with N = 2^15, r = 8, p = 1: 32 MB and about a tenth of a second per derivation.
    public static func newHeader(chunkSize: Int = 1 << 20) -> Header {
        Header(
            n: 1 << 15, r: 8, p: 1, salt: Data(randomBytes(16)).base64EncodedString(), chunkSize: chunkSize,
            noncePrefix: Data(randomBytes(4)).base64EncodedString())
    }

    /// The largest scrypt cost a reader accepts: N = 2^17 with r = 8 needs 128 MB, within the
    /// memory ckport promises; ckport writes N = 2^15.
    public static let maximumCost = 1 << 17
    /// The largest chunk a reader accepts; ckport writes 1 MB chunks.
    public static let maximumChunkSize = 4 << 20

    /// What is wrong with a header's parameters, nil when a reader may use them. As age does,
    /// r and p are fixed and N is capped, so a crafted header cannot make a reader allocate
    /// gigabytes or spin for minutes before the passphrase is even checked.
    static func checkLimits(_ header: Header) -> String? {
        if header.r != 8 || header.p != 1 {
            return "scrypt with r = \(header.r) and p = \(header.p) (only r = 8, p = 1 are read)"
        }
        if header.n < 1 << 10 || header.n > maximumCost || header.n & (header.n - 1) != 0 {
            return "scrypt with N = \(header.n) (N must be a power of two from 2^10 to 2^17)"
        }
        if header.chunkSize < 1 || header.chunkSize > maximumChunkSize {
            return "chunks of \(header.chunkSize) bytes (at most \(maximumChunkSize))"
        }
        return nil
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    static func key(_ passphrase: String, _ header: Header) throws -> SymmetricKey {
        guard let salt = Data(base64Encoded: header.salt) else {
            throw ArchiveError(file: "", message: "the encryption header's salt is not Base64")
        }
        return try KDF.Scrypt.deriveKey(
            from: Array(passphrase.utf8), salt: salt, outputByteCount: 32, rounds: header.n, blockSize: header.r,
            parallelism: header.p)
    }

    static func nonce(_ header: Header, _ index: UInt64) throws -> AES.GCM.Nonce {
        let prefix = [UInt8](Data(base64Encoded: header.noncePrefix) ?? Data())
        guard prefix.count == 4 else {
            throw ArchiveError(file: "", message: "the encryption header's nonce prefix is not 4 bytes")
        }
        return try AES.GCM.Nonce(data: prefix + withUnsafeBytes(of: index.bigEndian) { Array($0) })
    }

    static func associatedData(_ headerBytes: [UInt8], _ index: UInt64, final: Bool) -> [UInt8] {
        headerBytes + withUnsafeBytes(of: index.bigEndian) { Array($0) } + [final ? 1 : 0]
    }

    /// Whether a file starts like an encrypted bundle.
    public static func isEncrypted(path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        return (try? handle.read(upToCount: magic.count)).map { [UInt8]($0) == magic } ?? false
    }
}

/// Encrypts a byte stream into an encrypted bundle, chunk by chunk.
public final class BundleEncryptor {
    private let write: ([UInt8]) throws -> Void
    private let header: BundleEncryption.Header
    private let headerBytes: [UInt8]
    private let key: SymmetricKey
    private var pending: [UInt8] = []
    private var index: UInt64 = 0

    public init(
        passphrase: String, header: BundleEncryption.Header = BundleEncryption.newHeader(),
        write: @escaping ([UInt8]) throws -> Void
    ) throws {
        self.write = write
        self.header = header
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        headerBytes = BundleEncryption.magic + Array(try encoder.encode(header)) + [0x0A]
        key = try BundleEncryption.key(passphrase, header)
        try write(headerBytes)
    }

    public func write(_ bytes: [UInt8]) throws {
        pending += bytes
        while pending.count > header.chunkSize {
            try seal(Array(pending[..<header.chunkSize]), final: false)
            pending.removeFirst(header.chunkSize)
        }
    }

    public func finish() throws {
        try seal(pending, final: true)
        pending = []
    }

    private func seal(_ plain: [UInt8], final: Bool) throws {
        let box = try AES.GCM.seal(
            plain, using: key, nonce: try BundleEncryption.nonce(header, index),
            authenticating: BundleEncryption.associatedData(headerBytes, index, final: final))
        let sealed = Array(box.ciphertext) + Array(box.tag)
        var length = UInt32(sealed.count).bigEndian
        if final { length = (UInt32(sealed.count) | BundleEncryption.finalFlag).bigEndian }
        try write(withUnsafeBytes(of: length) { Array($0) } + sealed)
        index += 1
    }
}

/// Reads an encrypted bundle and hands out the compressed bundle inside, checking every chunk.
public final class BundleDecryptor {
    private let path: String
    private let handle: FileHandle
    private let header: BundleEncryption.Header
    private let headerBytes: [UInt8]
    private let key: SymmetricKey
    private var plain: [UInt8] = []
    private var offset = 0
    private var index: UInt64 = 0
    private var sawFinal = false

    public init(path: String, passphrase: String) throws {
        self.path = path
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw ArchiveError(file: path, message: "cannot open the file")
        }
        self.handle = handle
        let start = [UInt8](try handle.read(upToCount: 4096) ?? Data())
        guard start.starts(with: BundleEncryption.magic),
            let newline = start[BundleEncryption.magic.count...].firstIndex(of: 0x0A)
        else {
            throw ArchiveError(file: path, message: "not an encrypted bundle (its header is missing or damaged)")
        }
        headerBytes = Array(start[...newline])
        do {
            header = try JSONDecoder().decode(
                BundleEncryption.Header.self, from: Data(start[BundleEncryption.magic.count..<newline]))
        } catch {
            throw ArchiveError(file: path, message: "the encryption header cannot be read: \(error)")
        }
        guard header.format == 1, header.cipher == "AES-256-GCM", header.kdf == "scrypt" else {
            throw ArchiveError(
                file: path,
                message: "the encryption header names a format, cipher or key derivation this ckport does not use")
        }
        if let problem = BundleEncryption.checkLimits(header) {
            throw ArchiveError(
                file: path,
                message:
                    "the encryption header asks for \(problem); refused before any work, since a bundle ckport wrote never does"
            )
        }
        key = try BundleEncryption.key(passphrase, header)
        try handle.seek(toOffset: UInt64(headerBytes.count))
    }

    deinit { try? handle.close() }

    /// The source for a `GzipReader`.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        if offset == plain.count {
            guard try nextChunk() else { return 0 }
        }
        let n = min(buffer.count, plain.count - offset)
        plain.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + n)])) }
        offset += n
        return n
    }

    private func nextChunk() throws -> Bool {
        plain = []
        offset = 0
        let prefix = [UInt8](try handle.read(upToCount: 4) ?? Data())
        if prefix.isEmpty {
            guard sawFinal else {
                throw ArchiveError(file: path, message: "the encrypted bundle is cut short (after chunk \(index))")
            }
            return false
        }
        guard !sawFinal else { throw ArchiveError(file: path, message: "bytes follow the final encrypted chunk") }
        guard prefix.count == 4 else {
            throw ArchiveError(file: path, message: "the encrypted bundle is cut short (inside chunk \(index))")
        }
        let raw = prefix.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self).bigEndian }
        let final = raw & BundleEncryption.finalFlag != 0
        let length = Int(raw & ~BundleEncryption.finalFlag)
        guard length >= 16, length <= header.chunkSize + 16 else {
            throw ArchiveError(
                file: path,
                message: "encrypted chunk \(index) has an impossible length: the bundle was changed or damaged")
        }
        let sealed = [UInt8](try handle.read(upToCount: length) ?? Data())
        guard sealed.count == length else {
            throw ArchiveError(file: path, message: "the encrypted bundle is cut short (inside chunk \(index))")
        }
        do {
            let box = try AES.GCM.SealedBox(
                nonce: try BundleEncryption.nonce(header, index), ciphertext: sealed[..<(length - 16)],
                tag: sealed[(length - 16)...])
            plain = Array(
                try AES.GCM.open(
                    box, using: key, authenticating: BundleEncryption.associatedData(headerBytes, index, final: final)))
        } catch {
            throw ArchiveError(
                file: path,
                message: index == 0
                    ? "cannot decrypt: the passphrase is wrong, or the bundle was changed"
                    : "encrypted chunk \(index) fails authentication: the bundle was changed or damaged")
        }
        sawFinal = final
        index += 1
        return true
    }
}
