import Foundation
import Records

/// Where a backup repository keeps its objects: a folder, or a bucket (and a prefix in it) of
/// S3-compatible object storage. Names are paths inside the repository (`config`,
/// `snapshots/…`, `data/ab/…`). An object is written whole or not at all: a reader never sees
/// half of one.
public protocol RepositoryStorage: Sendable {
    /// The repository's address as the user gave it, for messages (never a secret).
    var location: String { get }
    /// The object `name`, nil when there is none; larger than `limit` is an error.
    func read(_ name: String, limit: Int) async throws -> [UInt8]?
    /// `count` bytes of `name` from `offset` (fewer at its end).
    func read(_ name: String, from offset: Int64, count: Int) async throws -> [UInt8]
    /// The object's size, nil when there is none.
    func size(of name: String) async throws -> Int64?
    /// Writes a small object whole, replacing what is there.
    func write(_ name: String, _ bytes: [UInt8]) async throws
    /// The objects whose names start with `prefix`, with names relative to the repository.
    func list(_ prefix: String) async throws -> [StoredObject]
    /// Deletes an object; one that is not there is fine.
    func delete(_ name: String) async throws
    /// Begins an object written a part at a time; it appears only when ``RepositoryUpload/finish()``
    /// has returned.
    func startUpload(_ name: String) async throws -> any RepositoryUpload
    /// Removes what writers that ended without finishing left behind (a part-written object)
    /// and that began before `before`; how many pieces went.
    func removeUnfinished(before: Date) async throws -> Int
}

extension RepositoryStorage {
    /// Writes a small object whole through an upload of its own (which it gives up on failure):
    /// for storages whose uploads appear only when finished.
    func writeByUpload(_ name: String, _ bytes: [UInt8]) async throws {
        let upload = try await startUpload(name)
        do {
            try await upload.add(bytes)
            try await upload.finish()
        } catch {
            await upload.abort()
            throw error
        }
    }
}

/// An object on its way: parts in order (each but the last at least ``RepositoryUploadLimits/partSize``).
public protocol RepositoryUpload: AnyObject, Sendable {
    func add(_ part: [UInt8]) async throws
    func finish() async throws
    /// Gives the object up; what was sent is removed (as far as the storage answers).
    func abort() async
}

public enum RepositoryUploadLimits {
    /// The size of each part but the last: above S3's 5 MiB minimum, and 10,000 parts of it
    /// (S3's maximum) hold 160 GiB.
    public static let partSize = 16 << 20
}

// MARK: - A folder

/// A repository in a folder (a disk, a NAS mount). Objects are files; one is written under a
/// temporary name in `.partial/`, flushed to the disk and renamed into place, so that it
/// appears whole. The folders are the owner's alone.
public struct FolderStorage: RepositoryStorage {
    public let root: String
    public var location: String { root }

    public init(root: String) {
        self.root = root.hasSuffix("/") && root.count > 1 ? String(root.dropLast()) : root
    }

    static let partial = ".partial"

    private func path(_ name: String) -> String { root + "/" + name }

    private func failure(_ what: String, _ name: String) -> RepositoryError {
        RepositoryError.storage(location: root, message: "cannot \(what) \(name): \(String(cString: strerror(errno)))")
    }

    public func read(_ name: String, limit: Int) async throws -> [UInt8]? {
        let fd = open(path(name), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw failure("read", name)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure("read", name) }
        guard Int64(info.st_size) <= Int64(limit) else {
            throw RepositoryError.storage(
                location: root, message: "\(name) is \(info.st_size) bytes, more than the \(limit) expected")
        }
        return try readFully(fd, from: 0, count: Int(info.st_size), name: name)
    }

    public func read(_ name: String, from offset: Int64, count: Int) async throws -> [UInt8] {
        let fd = open(path(name), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure("read", name) }
        defer { close(fd) }
        return try readFully(fd, from: offset, count: count, name: name)
    }

    private func readFully(_ fd: Int32, from offset: Int64, count: Int, name: String) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = bytes.withUnsafeMutableBytes {
                pread(fd, $0.baseAddress! + got, count - got, off_t(offset) + off_t(got))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw failure("read", name)
            }
            if n == 0 { break }
            got += n
        }
        return got == count ? bytes : Array(bytes[0..<got])
    }

    public func size(of name: String) async throws -> Int64? {
        var info = stat()
        guard stat(path(name), &info) == 0 else {
            if errno == ENOENT { return nil }
            throw failure("look at", name)
        }
        return Int64(info.st_size)
    }

    public func write(_ name: String, _ bytes: [UInt8]) async throws {
        try await writeByUpload(name, bytes)
    }

    public func list(_ prefix: String) async throws -> [StoredObject] {
        // The prefix's folder part is where to look; the rest filters the names found there.
        // A folder that cannot be read is an error, never an empty listing (a prune that saw no
        // snapshots would remove every object). Names that start with a dot (.partial/, and
        // what Finder, editors or a NAS leave: .DS_Store, ._x) are not the repository's.
        let folder = prefix.contains("/") ? String(prefix[..<prefix.lastIndex(of: "/")!]) : ""
        var found: [StoredObject] = []
        func walk(_ relative: String) throws {
            let directory = relative.isEmpty ? root : path(relative)
            let names: [String]
            do {
                names = try FileManager.default.contentsOfDirectory(atPath: directory)
            } catch let error as CocoaError where error.code == .fileReadNoSuchFile {
                return
            } catch {
                throw RepositoryError.storage(
                    location: root, message: "cannot list \(directory): \(error.localizedDescription)")
            }
            for entry in names where !entry.hasPrefix(".") {
                let name = relative.isEmpty ? entry : relative + "/" + entry
                var info = stat()
                guard lstat(path(name), &info) == 0 else {
                    if errno == ENOENT { continue }
                    throw failure("look at", name)
                }
                if (info.st_mode & S_IFMT) == S_IFDIR {
                    if name.hasPrefix(prefix) || prefix.hasPrefix(name + "/") { try walk(name) }
                } else if (info.st_mode & S_IFMT) == S_IFREG && name.hasPrefix(prefix) {
                    found.append(
                        StoredObject(
                            key: name, size: Int64(info.st_size),
                            modified: Date(timeIntervalSince1970: FolderStorage.modified(info))))
                }
            }
        }
        try walk(folder)
        return found.sorted { $0.key < $1.key }
    }

    /// A file's modification time, in seconds since 1970.
    static func modified(_ info: stat) -> Double {
        #if canImport(Darwin)
            return Double(info.st_mtimespec.tv_sec)
        #else
            return Double(info.st_mtim.tv_sec)
        #endif
    }

    public func delete(_ name: String) async throws {
        if unlink(path(name)) != 0 && errno != ENOENT { throw failure("delete", name) }
    }

    public func startUpload(_ name: String) async throws -> any RepositoryUpload {
        try FolderUpload(storage: self, name: name)
    }

    public func removeUnfinished(before: Date) async throws -> Int {
        let folder = path(FolderStorage.partial)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return 0 }
        var removed = 0
        for name in names {
            var info = stat()
            guard lstat(folder + "/" + name, &info) == 0 else { continue }
            if FolderStorage.modified(info) < before.timeIntervalSince1970, unlink(folder + "/" + name) == 0 {
                removed += 1
            }
        }
        return removed
    }

    /// Makes the folder (and `name`'s folders) the owner's alone.
    func makeFolders(for name: String) throws {
        var folder = root
        let parts = name.split(separator: "/").dropLast()
        for part in [""] + parts.map(String.init) {
            if !part.isEmpty { folder += "/" + part }
            if mkdir(folder, 0o700) != 0 && errno != EEXIST {
                throw RepositoryError.storage(
                    location: root, message: "cannot make the folder \(folder): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Flushes a folder's entries (a rename into it) to the disk.
    func syncFolder(_ folder: String) {
        let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }
}

/// A file in `.partial/` until it is finished, then renamed into place.
final class FolderUpload: RepositoryUpload, @unchecked Sendable {
    // One writer uses an upload at a time (its parts are sent in order).
    private let storage: FolderStorage
    private let name: String
    private let temporary: String
    private var fd: Int32
    private var written: Int64 = 0

    init(storage: FolderStorage, name: String) throws {
        self.storage = storage
        self.name = name
        try storage.makeFolders(for: FolderStorage.partial + "/x")
        var random = SystemRandomNumberGenerator()
        temporary =
            storage.root + "/" + FolderStorage.partial + "/"
            + String(format: "%016llx%016llx", random.next() as UInt64, random.next() as UInt64)
        fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw RepositoryError.storage(
                location: storage.root, message: "cannot write in \(storage.root): \(String(cString: strerror(errno)))")
        }
    }

    deinit { if fd >= 0 { close(fd) } }

    func add(_ part: [UInt8]) async throws {
        var done = 0
        while done < part.count {
            let n = part.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, part.count - done, off_t(written)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw RepositoryError.storage(
                    location: storage.root, message: "cannot write \(name): \(String(cString: strerror(errno)))")
            }
            done += n
            written += Int64(n)
        }
    }

    func finish() async throws {
        guard fsync(fd) == 0 else {
            throw RepositoryError.storage(
                location: storage.root, message: "cannot write \(name): \(String(cString: strerror(errno)))")
        }
        close(fd)
        fd = -1
        try storage.makeFolders(for: name)
        let target = storage.root + "/" + name
        guard rename(temporary, target) == 0 else {
            throw RepositoryError.storage(
                location: storage.root, message: "cannot put \(name) in place: \(String(cString: strerror(errno)))")
        }
        storage.syncFolder((target as NSString).deletingLastPathComponent)
    }

    func abort() async {
        if fd >= 0 {
            close(fd)
            fd = -1
        }
        unlink(temporary)
    }
}

// MARK: - S3-compatible object storage

/// A repository in a bucket, under a prefix (`s3://BUCKET/PREFIX`).
public struct S3Storage: RepositoryStorage {
    public let client: S3Client
    /// Ends in `/` unless empty.
    public let prefix: String
    public var location: String { "s3://\(client.endpoint.bucket)/\(prefix)" }

    public init(client: S3Client, prefix: String) {
        self.client = client
        let trimmed = prefix.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        self.prefix = trimmed.isEmpty ? "" : trimmed + "/"
    }

    public func read(_ name: String, limit: Int) async throws -> [UInt8]? {
        try await client.get(prefix + name, limit: limit)
    }

    public func read(_ name: String, from offset: Int64, count: Int) async throws -> [UInt8] {
        try await client.get(prefix + name, from: offset, count: count)
    }

    public func size(of name: String) async throws -> Int64? { try await client.size(of: prefix + name) }

    public func write(_ name: String, _ bytes: [UInt8]) async throws { try await client.put(prefix + name, bytes) }

    public func list(_ listed: String) async throws -> [StoredObject] {
        try await client.list(prefix: prefix + listed).map {
            var object = $0
            object.key = String($0.key.dropFirst(prefix.count))
            return object
        }
    }

    public func delete(_ name: String) async throws { try await client.delete(prefix + name) }

    public func startUpload(_ name: String) async throws -> any RepositoryUpload {
        S3Upload(client: client, key: prefix + name)
    }

    public func removeUnfinished(before: Date) async throws -> Int {
        // Only this repository's own uploads: those of its data objects (data/XX/NAME, NAME in
        // hex), never another repository's in the same bucket or one whose start is unknown.
        var removed = 0
        for upload in try await client.uploads(prefix: prefix + "data/") {
            let name = upload.key.dropFirst(prefix.count + "data/".count)
            let parts = name.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0].count == 2, parts[1].hasPrefix(parts[0]),
                parts[1].count >= 32, parts[1].allSatisfy(\.isHexDigit)
            else { continue }
            guard let started = upload.started, started < before else { continue }
            try await client.abortUpload(upload.key, uploadID: upload.uploadID)
            removed += 1
        }
        return removed
    }
}

/// One object in parts: a plain PUT when it is one part, a multipart upload otherwise (begun
/// with the second part).
final class S3Upload: RepositoryUpload, @unchecked Sendable {
    // One writer uses an upload at a time (its parts are sent in order).
    private let client: S3Client
    private let key: String
    private var first: [UInt8]?
    private var uploadID: String?
    private var parts: [(number: Int, etag: String)] = []

    init(client: S3Client, key: String) {
        self.client = client
        self.key = key
    }

    func add(_ part: [UInt8]) async throws {
        guard let held = first else {
            if uploadID == nil && parts.isEmpty {
                first = part
                return
            }
            try await send(part)
            return
        }
        first = nil
        uploadID = try await client.startUpload(key)
        try await send(held)
        try await send(part)
    }

    private func send(_ part: [UInt8]) async throws {
        let number = parts.count + 1
        let etag = try await client.uploadPart(key, uploadID: uploadID!, number: number, part)
        parts.append((number, etag))
    }

    func finish() async throws {
        if let uploadID {
            try await client.completeUpload(key, uploadID: uploadID, parts: parts)
        } else {
            try await client.put(key, first ?? [])
        }
        first = nil
    }

    func abort() async {
        first = nil
        if let uploadID { try? await client.abortUpload(key, uploadID: uploadID) }
    }
}
