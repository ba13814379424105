import Crypto
import Foundation
import Records

/// A bundle file read for its decompressor, with the SHA-256 of every byte read: a second
/// reading whose bytes hash the same read the same file.
final class HashingFileReader: @unchecked Sendable {
    let path: String
    private let handle: FileHandle
    private var sha = SHA256()
    /// Bytes read so far.
    private(set) var bytes: Int64 = 0
    /// The SHA-256 of the whole file, once its end has been read.
    private(set) var digest: SHA256.Digest?
    /// Whether the path is a regular file, which can be read a second time.
    let isRegularFile: Bool

    init(path: String) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw ArchiveError(file: path, message: "cannot open the file")
        }
        self.path = path
        self.handle = handle
        var status = stat()
        isRegularFile = fstat(handle.fileDescriptor, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        while true {
            let n = Foundation.read(handle.fileDescriptor, buffer.baseAddress, buffer.count)
            if n > 0 {
                sha.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                bytes += Int64(n)
                return n
            }
            if n == 0 {
                if digest == nil { digest = sha.finalize() }
                return 0
            }
            if errno != EINTR { throw ArchiveError(file: path, message: "cannot read: \(String(cString: strerror(errno)))") }
        }
    }
}

/// Reads a plain bundle a second time, on a thread of its own, to check the SHA-256 of the
/// members its first reading left unhashed — while the reader's consumer finishes its own work
/// (a restore builds its indexes then, on one core). The file's bytes must hash as they did the
/// first time, so the members checked are the very bytes the first reading gave out; a file
/// that changed in between is refused as such.
final class SecondReading: @unchecked Sendable {
    private let condition = NSCondition()
    private var outcome: Error??
    private var cancelled = false

    /// - Parameters:
    ///   - expected: the members to check, by path, with the manifest's SHA-256 (hex).
    ///   - first: what the first reading read: the file's SHA-256 and length.
    init(path: String, limits: DecompressionLimits, engine: GzipReader.Engine, expected: [String: String],
         first: (digest: SHA256.Digest, bytes: Int64)) {
        // The thread holds the object until it has said how the check went.
        let thread = Thread { [self] in
            let result: Error?
            do {
                try SecondReading.check(path: path, limits: limits, engine: engine, expected: expected, first: first) { [self] in
                    condition.withLock { cancelled }
                }
                result = nil
            } catch {
                result = error
            }
            condition.withLock {
                outcome = .some(result)
                condition.broadcast()
            }
        }
        thread.name = "ckport second reading"
        thread.start()
    }

    /// Waits for the check and throws what it found.
    func wait() throws {
        let result = condition.withLock {
            while outcome == nil { condition.wait() }
            return outcome!
        }
        if let result { throw result }
    }

    /// Stops the reading at its next chunk (the reader was let go of).
    func cancel() {
        condition.withLock { cancelled = true }
    }

    private struct Cancelled: Error {}

    private static func check(path: String, limits: DecompressionLimits, engine: GzipReader.Engine, expected: [String: String],
                              first: (digest: SHA256.Digest, bytes: Int64), isCancelled: @escaping () -> Bool) throws {
        func fail(_ member: String?, _ message: String) -> BundleError { BundleError(file: path, member: member, message: message) }
        var damaged: String?
        var checked = 0
        let file: HashingFileReader
        do {
            file = try HashingFileReader(path: path)
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
            throw fail(nil, "could not be read a second time, to check its records members' SHA-256: \(error)")
        }
        guard file.digest == first.digest, file.bytes == first.bytes, checked == expected.count else {
            throw fail(nil, "changed while it was being read: a second reading, which checks its records members' SHA-256, did not find the bytes of the first")
        }
        if let damaged {
            throw fail(damaged, "its SHA-256 does not match the manifest: the member is damaged")
        }
    }
}
