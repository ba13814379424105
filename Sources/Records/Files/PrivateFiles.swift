import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Temporary files that nobody but this process can reach.
///
/// Everything ckport sets aside for a while (an asset on its way from a bundle into a store, a
/// calendar spooled between two formats, the names a pull has seen) goes into one folder per
/// process, made by `mkdtemp` under `$TMPDIR`: mode 0700 from the moment it exists, with a name
/// nobody can guess. Files in it are created with `O_CREAT | O_EXCL | O_NOFOLLOW` and mode 0600,
/// so no other user can open one, plant one, or point its name elsewhere; a file read back only
/// through its descriptor is unlinked at once, and so leaves nothing behind however the process
/// ends.
public enum PrivateFiles {
    /// The prefix of each process's folder: `ckport-PID-XXXXXX`.
    static let folderPrefix = "ckport-"

    private static let made = LockedValue<String?>(nil)

    /// This process's own folder, made on first use.
    public static func folder() throws -> String {
        try made.withLock { folder in
            if let folder, access(folder, W_OK) == 0 { return folder }
            let base = temporaryDirectory()
            removeStale(in: base)
            var template = Array((base + "/" + folderPrefix + "\(getpid())-XXXXXX").utf8CString)
            guard let result = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
                throw PrivateFileError(
                    path: base,
                    reason:
                        "cannot make a private folder there (\(String(cString: strerror(errno)))); set TMPDIR to a folder you can write to"
                )
            }
            folder = String(cString: result)
            // Gone with the process when it exits normally; a later run removes one a killed
            // process left (``removeStale(in:)``).
            atexit { PrivateFiles.removeAtExit() }
            return folder!
        }
    }

    /// Removes this process's folder and what is left in it.
    static func removeAtExit() {
        if let folder = made.withLock({ $0 }) { removeOwned(folder, depth: 0) }
    }

    /// `$TMPDIR` (or `/tmp`), without a trailing slash.
    static func temporaryDirectory() -> String {
        var base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
        return base
    }

    /// A new file in `directory` (this process's folder by default), for this process alone:
    /// its descriptor (read and write) and path. The caller closes the descriptor and removes
    /// the file.
    public static func create(_ prefix: String, in directory: String? = nil) throws -> (fd: Int32, path: String) {
        let folder = try directory ?? self.folder()
        var random = SystemRandomNumberGenerator()
        for _ in 0..<8 {
            let path = folder + "/" + prefix + "\(getpid())-" + String(random.next() as UInt64, radix: 36)
            let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 {
                // 0600 whatever the umask made of it.
                fchmod(fd, 0o600)
                return (fd, path)
            }
            if errno != EEXIST { break }
        }
        throw PrivateFileError(
            path: folder, reason: "cannot create a temporary file there: \(String(cString: strerror(errno)))")
    }

    /// A new file that no name reaches: made as ``create(_:in:)`` does and unlinked at once. Its
    /// bytes go when the descriptor closes, however the process ends.
    public static func anonymous(_ prefix: String, in directory: String? = nil) throws -> Int32 {
        let (fd, path) = try create(prefix, in: directory)
        unlink(path)
        return fd
    }

    /// A new folder of its own inside this process's folder, mode 0700.
    public static func makeFolder(_ prefix: String) throws -> String {
        let parent = try folder()
        var template = Array((parent + "/" + prefix + "XXXXXX").utf8CString)
        guard let result = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw PrivateFileError(
                path: parent, reason: "cannot make a folder there: \(String(cString: strerror(errno)))")
        }
        return String(cString: result)
    }

    /// Removes the folder `path` and the regular files in it (and in folders within it) that
    /// this user owns; a link inside is removed, never followed.
    public static func removeFolder(_ path: String) {
        removeOwned(path, depth: 0)
    }

    /// Removes what a ckport killed while working left in `directory`: entries named as
    /// ckport names its temporaries, whose process no longer runs, owned by this user; regular
    /// files are unlinked, ckport's own private folders emptied of what this user owns and
    /// removed. Links are never followed and nothing another user owns is touched, even as root.
    public static func removeStale(in directory: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for name in names {
            guard let pid = temporaryFileOwner(name), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else {
                continue
            }
            let path = directory + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0, info.st_uid == getuid() else { continue }
            switch info.st_mode & S_IFMT {
            case S_IFREG: unlink(path)
            case S_IFDIR where name.hasPrefix(folderPrefix): removeOwned(path, depth: 0)
            default: break
            }
        }
    }

    /// How the names of files on their way end: the file, and the journal, log and log index
    /// SQLite keeps beside a store built under such a name.
    static let sideSuffixes = [".tmp", ".tmp-journal", ".tmp-wal", ".tmp-shm"]

    /// The process that made a temporary file or folder of ckport's, from its name; nil for
    /// other names: `.NAME.ckport-PID-N.tmp` (an output file or a store on its way, and its
    /// `-journal`, `-wal`, `-shm`), `ckport-PID-XXXXXX`
    /// (a private folder), `.ckport-spool-PID-…`, `ckport-asset-PID-…`, `ckport-stdin-PID-…`
    /// (what earlier versions left).
    public static func temporaryFileOwner(_ name: String) -> Int32? {
        var rest: Substring
        if name.hasPrefix("."), PrivateFiles.sideSuffixes.contains(where: { name.hasSuffix($0) }),
            let marker = name.range(of: ".ckport-", options: .backwards)
        {
            rest = name[marker.upperBound...]
        } else if let kind = ["ckport-asset-", "ckport-stdin-", ".ckport-spool-", folderPrefix].first(where: {
            name.hasPrefix($0)
        }) {
            rest = name.dropFirst(kind.count)
        } else {
            return nil
        }
        let digits = rest.prefix { $0.isASCII && $0.isNumber }
        rest = rest.dropFirst(digits.count)
        guard !digits.isEmpty, rest.hasPrefix("-"), let pid = Int32(digits), pid > 0 else { return nil }
        return pid
    }

    /// Unlinks the regular files and links this user owns under `path` (folders to a few
    /// levels), then the folder itself if it is empty.
    private static func removeOwned(_ path: String, depth: Int) {
        if let names = try? FileManager.default.contentsOfDirectory(atPath: path) {
            for name in names {
                let inner = path + "/" + name
                var info = stat()
                guard lstat(inner, &info) == 0, info.st_uid == getuid() else { continue }
                switch info.st_mode & S_IFMT {
                case S_IFREG, S_IFLNK: unlink(inner)
                case S_IFDIR where depth < 4: removeOwned(inner, depth: depth + 1)
                default: break
                }
            }
        }
        rmdir(path)
    }
}

/// A temporary file or folder that could not be made.
public struct PrivateFileError: CKPortError, Sendable {
    public var category: ErrorCategory { .environment }
    public var path: String
    public var reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "\(path): \(reason)" }
}
