import Crypto
import Foundation
import Records
import StoreCore

/// A bundle file read for its decompressor, with (when `hashing`) the SHA-256 of every byte
/// read: a second reading whose bytes hash the same read the same bytes.
final class HashingFileReader {
    let path: String
    private let descriptor: Int32
    private let ownsDescriptor: Bool
    /// Reads at `bytes` with `pread` (a second reading, through a descriptor of its own that
    /// shares the first one's file), rather than from the descriptor's position.
    private let positional: Bool
    private var sha: SHA256?
    /// Bytes read so far.
    private(set) var bytes: Int64 = 0
    /// The SHA-256 of the whole file, once its end has been read (when hashing).
    private(set) var digest: SHA256.Digest?
    /// Whether the file is a regular file, which can be read a second time.
    let isRegularFile: Bool

    init(path: String, hashing: Bool) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw ArchiveError(file: path, message: "cannot open the file: \(String(cString: strerror(errno)))")
        }
        self.path = path
        self.descriptor = descriptor
        ownsDescriptor = true
        positional = false
        sha = hashing ? SHA256() : nil
        var status = stat()
        isRegularFile = fstat(descriptor, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG
    }

    /// The same file again, from its first byte, hashed: through a duplicate of the first
    /// reading's descriptor, so that the file read is the one opened, whatever has become of
    /// its path since (renamed, replaced, removed).
    init(secondReadingOf first: HashingFileReader) throws {
        let descriptor = dup(first.descriptor)
        guard descriptor >= 0 else {
            throw ArchiveError(
                file: first.path, message: "cannot read the file again: \(String(cString: strerror(errno)))")
        }
        path = first.path
        self.descriptor = descriptor
        ownsDescriptor = true
        positional = true
        sha = SHA256()
        isRegularFile = first.isRegularFile
    }

    deinit {
        if ownsDescriptor { close(descriptor) }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        while true {
            let n =
                positional
                ? pread(descriptor, buffer.baseAddress, buffer.count, off_t(bytes))
                : Foundation.read(descriptor, buffer.baseAddress, buffer.count)
            if n > 0 {
                sha?.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                bytes += Int64(n)
                return n
            }
            if n == 0 {
                if digest == nil, let sha { digest = sha.finalize() }
                return 0
            }
            if errno != EINTR {
                throw ArchiveError(file: path, message: "cannot read: \(String(cString: strerror(errno)))")
            }
        }
    }
}

/// Reads a plain bundle a second time, on a thread of its own, to check the SHA-256 of the
/// members its first reading left unhashed — while the reader's consumer finishes its own work
/// (a restore builds its indexes then, on one core). It reads the file the first reading
/// opened (not whatever is at its path now), and its bytes must hash as they did the first
/// time, so the members checked are the very bytes the first reading gave out; a file changed
/// in place in between is refused as such.
final class SecondReading: Sendable {
    /// How the check went (set once it has ended), and whether it was asked to stop.
    private let state = Monitor<(outcome: Error??, cancelled: Bool)>((nil, false))

    /// - Parameters:
    ///   - file: the second reading's file (``HashingFileReader/init(secondReadingOf:)``).
    ///   - expected: the members to check, by path, with the manifest's SHA-256 (hex).
    ///   - first: what the first reading read: the file's SHA-256 and length.
    init(
        file: HashingFileReader, limits: DecompressionLimits, engine: GzipReader.Engine, expected: [String: String],
        first: (digest: SHA256.Digest, bytes: Int64)
    ) {
        // The thread holds the object until it has said how the check went.
        let state = self.state
        WorkerThread.start(name: "ckport second reading", handing: file) { file in
            let result: Error?
            do {
                try SecondReading.check(file: file, limits: limits, engine: engine, expected: expected, first: first) {
                    state.withLock { $0.cancelled }
                }
                result = nil
            } catch {
                result = error
            }
            state.withLock { $0.outcome = .some(result) }
        }
    }

    /// Waits for the check and throws what it found; Ctrl-C ends the wait.
    func wait() throws {
        while true {
            let result: Error?? =
                state.withLock(
                    when: { $0.outcome != nil }, before: Date(timeIntervalSinceNow: 0.2), then: { $0.outcome })
                ?? nil
            if let result {
                if let result { throw result }
                return
            }
            try Interruption.check()
        }
    }

    /// Stops the reading at its next chunk (the reader was let go of).
    func cancel() {
        state.withLock { $0.cancelled = true }
    }

    private struct Cancelled: Error {}

    private static func check(
        file: HashingFileReader, limits: DecompressionLimits, engine: GzipReader.Engine, expected: [String: String],
        first: (digest: SHA256.Digest, bytes: Int64), isCancelled: @escaping () -> Bool
    ) throws {
        let path = file.path
        func fail(_ member: String?, _ message: Message) -> BundleError {
            BundleError(file: path, member: member, message: message)
        }
        var damaged: String?
        var checked = 0
        do {
            let gzip = GzipReader(name: path, limits: limits, engine: engine) { buffer in
                if isCancelled() { throw Cancelled() }
                return try file.read(into: buffer)
            }
            let tar = TarReader(gzip: gzip)
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 18, alignment: 16)
            defer { buffer.deallocate() }
            while let entry = try tar.next() {
                guard let want = expected[entry.path] else { continue }
                var sha = SHA256()
                while true {
                    let n = try tar.readContent(into: buffer)
                    if n == 0 { break }
                    sha.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                }
                checked += 1
                if damaged == nil && BundleReader.hex(sha.finalize()) != want { damaged = entry.path }
            }
        } catch is Cancelled {
            return
        } catch {
            // The first reading read these bytes whole: the file changed, or the disk failed.
            throw fail(
                nil,
                "changed while it was being read, or could not be read again: a second reading, which checks its records members' SHA-256, failed (\(error))"
            )
        }
        guard file.digest == first.digest, file.bytes == first.bytes, checked == expected.count else {
            throw fail(
                nil,
                "changed while it was being read: a second reading, which checks its records members' SHA-256, did not find the bytes of the first"
            )
        }
        if let damaged {
            throw fail(damaged, "its SHA-256 does not match the manifest: the member is damaged")
        }
    }
}
