import CPlatform
import Foundation
import Records

/// An output file written through a buffer, put in place only when complete.
///
/// A file is written beside its final path under a temporary name and renamed over it by
/// `commit()`, so a failed or interrupted export never leaves a half-written file (nor
/// clobbers an older complete one). `-` writes to standard output as it goes, and so does a path
/// that is not a regular file — a FIFO, a device such as `/dev/null`, `/dev/stdout`, `/dev/fd/N` —
/// which is written to, never replaced. A symbolic link to a regular file has the file it
/// names replaced, and stays a link.
public final class OutputFile {
    public let path: String
    private let fd: Int32
    private let temporaryPath: String?
    /// Where the finished file goes: `path`, or the file a symbolic link at `path` names.
    private let finalPath: String
    /// A descriptor of ours on something that is not a regular file, closed when done.
    private let ownsDescriptor: Bool
    private var buffer: [UInt8] = []
    private let flushSize = 1 << 20
    private var finished = false
    private let ownerOnly: Bool
    private let privateIfNew: Bool
    /// Bytes written so far.
    public private(set) var bytesWritten: Int64 = 0
    /// Write-behind for a large file: what has been handed to the disk, and what of that has
    /// been waited for and let go of the page cache (see ``writeBehind()``).
    private var handedToDisk: Int64 = 0
    private var released: Int64 = 0
    private static let writeBehindStep: Int64 = 32 << 20

    /// `ownerOnly`: a file for secrets (a token), readable and writable by its owner alone,
    /// whatever mode an earlier file of that name had. `privateIfNew`: a new file is its
    /// owner's alone (a backup); one that replaces a file keeps that file's mode, so a mode the
    /// user gave on purpose stays.
    public init(path: String, ownerOnly: Bool = false, privateIfNew: Bool = false) throws {
        self.path = path
        self.ownerOnly = ownerOnly
        self.privateIfNew = privateIfNew
        if path == "-" {
            fd = 1
            temporaryPath = nil
            finalPath = path
            ownsDescriptor = false
        } else if let direct = try OutputFile.openDirect(path) {
            fd = direct
            temporaryPath = nil
            finalPath = path
            ownsDescriptor = true
        } else {
            // A link to a regular file: the file is replaced, the link stays.
            var link = stat()
            var target = path
            if lstat(path, &link) == 0, (link.st_mode & S_IFMT) == S_IFLNK, let resolved = realpath(path, nil) {
                target = String(cString: resolved)
                free(resolved)
            }
            finalPath = target
            ownsDescriptor = false
            let url = URL(fileURLWithPath: target)
            let directory = url.deletingLastPathComponent().path
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                throw OutputError(path: path, message: "is a directory")
            }
            guard FileManager.default.fileExists(atPath: directory.isEmpty ? "." : directory) else {
                throw OutputError(path: path, message: "its folder \(directory) does not exist")
            }
            OutputFile.removeStale(in: directory.isEmpty ? "." : directory)
            let temporary =
                (directory.isEmpty ? "." : directory) + "/." + url.lastPathComponent
                + ".ckport-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).tmp"
            // Readable by the owner only until it is complete; commit() gives it its final mode.
            fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                throw OutputError(path: path, message: "cannot create: \(String(cString: strerror(errno)))")
            }
            temporaryPath = temporary
        }
        buffer.reserveCapacity(flushSize + 65536)
    }

    deinit {
        if !finished { discard() }
    }

    /// A descriptor to write to in place, for a path that is not (and must not become) a
    /// regular file: standard output or error by name, a descriptor by `/dev/fd/N`, or an
    /// existing FIFO, device or socket. Nil for a path to write as a file.
    static func openDirect(_ path: String) throws -> Int32? {
        let named: [String: Int32] = ["/dev/stdout": 1, "/dev/stderr": 2, "/proc/self/fd/1": 1, "/proc/self/fd/2": 2]
        var number = named[path]
        for prefix in ["/dev/fd/", "/proc/self/fd/"] where path.hasPrefix(prefix) {
            number = number ?? Int32(path.dropFirst(prefix.count))
        }
        if let number {
            let copy = dup(number)
            guard copy >= 0 else {
                throw OutputError(path: path, message: "cannot write: \(String(cString: strerror(errno)))")
            }
            return copy
        }
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let kind = info.st_mode & S_IFMT
        guard kind != S_IFREG && kind != S_IFDIR else { return nil }
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw OutputError(path: path, message: "cannot write: \(String(cString: strerror(errno)))")
        }
        return fd
    }

    /// Removes the temporary files that a ckport killed while writing left in `directory`
    /// (see ``PrivateFiles/removeStale(in:)``: only regular files and ckport's own folders this
    /// user owns, whose process no longer runs).
    public static func removeStale(in directory: String) {
        PrivateFiles.removeStale(in: directory)
    }

    /// The process that made a temporary file of ckport's, from its name; nil for other names.
    static func temporaryFileOwner(_ name: String) -> Int32? {
        PrivateFiles.temporaryFileOwner(name)
    }

    /// Appends bytes; they reach the file in large writes. A large chunk goes straight to the
    /// file rather than through the buffer.
    @inline(__always) public func write(_ bytes: [UInt8]) throws {
        if buffer.isEmpty && bytes.count >= flushSize / 4 {
            try bytes.withUnsafeBytes { try writeAll($0) }
            bytesWritten += Int64(bytes.count)
            return
        }
        buffer.append(contentsOf: bytes)
        if buffer.count >= flushSize { try flush() }
    }

    public func write(_ text: String) throws {
        try write(Array(text.utf8))
    }

    public func flush() throws {
        guard !buffer.isEmpty else { return }
        try buffer.withUnsafeBytes { try writeAll($0) }
        bytesWritten += Int64(buffer.count)
        buffer.removeAll(keepingCapacity: true)
    }

    private func writeAll(_ raw: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < raw.count {
            let n = Foundation.write(fd, raw.baseAddress! + offset, raw.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                throw OutputError(path: path, message: "write failed: \(String(cString: strerror(errno)))")
            }
            offset += n
        }
        if temporaryPath != nil && bytesWritten + Int64(raw.count) - handedToDisk >= OutputFile.writeBehindStep {
            writeBehind(through: bytesWritten + Int64(raw.count))
        }
    }

    /// Every 32 MB, the file's new bytes go to the disk while the next are made, and the
    /// 32 MB before them, waited for, leave the page cache. The commit's sync then finds little
    /// left to write, and an export of many gigabytes neither fills memory with dirty pages
    /// (which the kernel makes the writer wait for, and reclaims at the cost of other files'
    /// cached pages) nor leaves the user's other files pushed out of the cache. Advisory: a
    /// file system that does not take the hints is written as before.
    private func writeBehind(through end: Int64) {
        if handedToDisk > released {
            _ = ckport_finish_writeback(fd, released, handedToDisk - released)
            released = handedToDisk
        }
        _ = ckport_start_writeback(fd, handedToDisk, end - handedToDisk)
        handedToDisk = end
    }

    /// Flushes, syncs and moves the file into place.
    public func commit() throws {
        try flush()
        finished = true
        guard let temporaryPath else {
            if ownsDescriptor { close(fd) }
            return
        }
        if fsync(fd) != 0 && errno != EINVAL {
            let message = String(cString: strerror(errno))
            close(fd)
            unlink(temporaryPath)
            throw OutputError(path: path, message: "sync failed: \(message)")
        }
        var existing = stat()
        let mode: mode_t =
            stat(finalPath, &existing) == 0
            ? existing.st_mode & 0o7777 : privateIfNew ? 0o600 : 0o666 & ~OutputFile.umask
        fchmod(fd, ownerOnly ? 0o600 : mode)
        close(fd)
        guard rename(temporaryPath, finalPath) == 0 else {
            let message = String(cString: strerror(errno))
            unlink(temporaryPath)
            throw OutputError(path: path, message: "cannot move into place: \(message)")
        }
    }

    /// The process's file creation mask (read once: reading it means setting it).
    static let umask: mode_t = {
        let mask = Foundation.umask(0o022)
        _ = Foundation.umask(mask)
        return mask
    }()

    /// Removes what was written; the path is left as it was.
    public func discard() {
        guard !finished else { return }
        finished = true
        if let temporaryPath {
            close(fd)
            unlink(temporaryPath)
        } else if ownsDescriptor {
            close(fd)
        }
    }
}

public struct OutputError: CKPortError, Sendable {
    public var category: ErrorCategory { .environment }

    public var path: String
    public var message: String

    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { "\(path): \(message)" }
}
