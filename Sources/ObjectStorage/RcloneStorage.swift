import Foundation
import Records

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A repository anywhere rclone reaches (SFTP, WebDAV, Google Drive, a NAS, …), written
/// `rclone:REMOTE:PATH` as restic writes it: every object is read, listed, written and deleted
/// by the user's own `rclone` (`$CKPORT_RCLONE`, else the first on the `PATH`), with the remote
/// set up as rclone sets it up (its config file, or `RCLONE_CONFIG_…` in the environment).
/// ckport never sees the remote's credentials, and puts none on a command line.
///
/// An object being written goes to `partial/` under a name of its own and is moved into place
/// once rclone has all of it, so that one whose writer was killed (rclone would store what it
/// had been given) never appears under its name; what is left in `partial/` is removed later
/// (``removeUnfinished(before:)``). For S3-compatible storage, `s3://` is the better road:
/// there the move is a copy.
public struct RcloneStorage: RepositoryStorage {
    /// `REMOTE:PATH`, as the user gave it.
    public let remote: String
    public let executable: String
    /// rclone's environment (its remotes may be set up there).
    let environment: [String: String]
    public var location: String { "rclone:" + remote }

    static let partial = "partial/"

    public init(remote: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        guard let colon = remote.firstIndex(of: ":"), colon != remote.startIndex else {
            throw RepositoryError.storage(
                location: "rclone:" + remote, message: "names no rclone remote: write rclone:REMOTE:PATH")
        }
        // A connection string (`nas,pass=…:path`) would put the remote's settings — a password,
        // perhaps — on rclone's command line and in every message that names the repository.
        guard !remote[..<colon].contains(",") else {
            throw RepositoryError.storage(
                location: "rclone:" + String(remote[..<colon].prefix { $0 != "," }),
                message:
                    "has settings in its address: give them to rclone's config (rclone config) or its environment (RCLONE_CONFIG_…), and name the remote alone"
            )
        }
        self.remote = remote
        guard let found = RcloneStorage.executable(environment) else {
            throw RepositoryError.storage(
                location: "rclone:" + remote,
                message:
                    "needs rclone (https://rclone.org/install/) on the PATH, or CKPORT_RCLONE naming the program")
        }
        executable = found
        self.environment = environment
    }

    /// `$CKPORT_RCLONE`, else `rclone` on the `PATH`.
    static func executable(_ environment: [String: String]) -> String? {
        if let given = environment["CKPORT_RCLONE"], !given.isEmpty {
            return FileManager.default.isExecutableFile(atPath: given) ? given : nil
        }
        for folder in (environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") {
            let candidate = String(folder) + "/rclone"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// The remote path of an object.
    func target(_ name: String) -> String {
        remote.hasSuffix(":") || remote.hasSuffix("/") ? remote + name : remote + "/" + name
    }

    /// What every run is given: no prompts, no notices, and one try of each whole command
    /// (rclone still retries each request; a write from a pipe cannot be tried again).
    static let common = ["--ask-password=false", "--quiet", "--retries", "1"]

    /// rclone's answers for a path that is not there: "directory not found" and "file not found"
    /// (statuses it exits with, not signals that ended it).
    private static func isMissing(_ run: RcloneRun.Outcome) -> Bool {
        !run.signalled && (run.status == 3 || run.status == 4)
    }

    /// Runs one rclone command.
    private func run(_ arguments: [String], limit: Int) async throws -> RcloneRun.Outcome {
        try await RcloneRun.run(executable, RcloneStorage.common + arguments, environment: environment, limit: limit)
    }

    private func failure(_ what: String, _ run: RcloneRun.Outcome) -> RepositoryError {
        RepositoryError.storage(location: location, message: "rclone could not \(what): \(run.problem)")
    }

    public func read(_ name: String, limit: Int) async throws -> [UInt8]? {
        let run = try await run(["cat", target(name)], limit: limit)
        if RcloneStorage.isMissing(run) { return nil }
        guard run.status == 0 else { throw failure("read \(name)", run) }
        guard !run.overflowed else {
            throw RepositoryError.storage(location: location, message: "\(name) is larger than \(limit) bytes")
        }
        // rclone's cat of a name that is not there may end well and say nothing.
        if run.output.isEmpty, try await size(of: name) == nil { return nil }
        return run.output
    }

    public func read(_ name: String, from offset: Int64, count: Int) async throws -> [UInt8] {
        let run = try await run(
            ["cat", "--offset", String(offset), "--count", String(count), target(name)], limit: count)
        guard run.status == 0 else {
            throw RcloneStorage.isMissing(run)
                ? RepositoryError.storage(location: location, message: "\(name) is missing")
                : failure("read \(name)", run)
        }
        return run.output
    }

    public func size(of name: String) async throws -> Int64? {
        // rclone lists a file's path as that one file.
        let leaf = (name as NSString).lastPathComponent
        return try await entries(in: name, recursive: false).first { $0.key == leaf }?.size
    }

    public func write(_ name: String, _ bytes: [UInt8]) async throws {
        try await writeByUpload(name, bytes)
    }

    public func list(_ prefix: String) async throws -> [StoredObject] {
        // A listing of the folder the prefix ends in, filtered.
        let folder = prefix.hasSuffix("/") ? String(prefix.dropLast()) : (prefix as NSString).deletingLastPathComponent
        let found = try await entries(in: folder, recursive: true)
        return found.map { object in
            var named = object
            named.key = folder.isEmpty ? object.key : folder + "/" + object.key
            return named
        }
        .filter { $0.key.hasPrefix(prefix) && !$0.key.hasPrefix(RcloneStorage.partial) }
        .sorted { $0.key < $1.key }
    }

    /// The files in `folder` (relative to the repository), named relative to it.
    private func entries(in folder: String, recursive: Bool) async throws -> [StoredObject] {
        let path = folder.isEmpty ? remote : target(folder)
        let run = try await run(
            ["lsjson", "--files-only", "--no-mimetype"] + (recursive ? ["--recursive"] : []) + [path],
            limit: 256 << 20)
        if RcloneStorage.isMissing(run) { return [] }
        guard run.status == 0, !run.overflowed else { throw failure("list \(folder.isEmpty ? "/" : folder)", run) }
        struct Entry: Decodable {
            var path: String
            var size: Int64
            var modTime: String?
            var isDir: Bool?

            enum CodingKeys: String, CodingKey {
                case path = "Path"
                case size = "Size"
                case modTime = "ModTime"
                case isDir = "IsDir"
            }
        }
        let decoded: [Entry]
        do {
            decoded = try JSONDecoder().decode([Entry].self, from: Data(run.output))
        } catch {
            throw RepositoryError.storage(
                location: location, message: "rclone's listing of \(folder.isEmpty ? "/" : folder) cannot be read")
        }
        return decoded.filter { $0.isDir != true }.map { entry in
            StoredObject(
                key: entry.path, size: entry.size,
                modified: entry.modTime.flatMap(RcloneStorage.time).map {
                    Date(timeIntervalSince1970: Double($0) / 1000)
                })
        }
    }

    /// rclone's time of a file (`2026-12-07T13:14:18.087285009Z`, nanoseconds and all) in
    /// milliseconds since 1970.
    static func time(_ text: String) -> Int64? {
        guard let dot = text.firstIndex(of: "."), text[..<dot].contains("T") else { return ISO8601.parse(text) }
        let digits = text[text.index(after: dot)...].prefix { $0.isNumber }
        let rest = text[text.index(after: dot)...].dropFirst(digits.count)
        return ISO8601.parse(String(text[..<dot]) + "." + String((digits + "000").prefix(3)) + rest)
    }

    public func delete(_ name: String) async throws {
        let run = try await run(["deletefile", target(name)], limit: 1 << 16)
        guard run.status == 0 || RcloneStorage.isMissing(run) else { throw failure("delete \(name)", run) }
    }

    public func startUpload(_ name: String) async throws -> any RepositoryUpload {
        let temporary = RcloneStorage.partial + RepositoryNames.random(16)
        return try RcloneUpload(storage: self, name: name, temporary: temporary)
    }

    /// Moves a finished object into place.
    func move(_ temporary: String, to name: String) async throws {
        // --ignore-times: where a remote keeps neither times nor hashes, rclone would take an
        // object of the same size for the same one and leave the old in place.
        let run = try await run(["moveto", "--ignore-times", target(temporary), target(name)], limit: 1 << 16)
        guard run.status == 0 else { throw failure("move \(temporary) to \(name)", run) }
    }

    public func removeUnfinished(before: Date) async throws -> Int {
        var removed = 0
        for object in try await entries(in: String(RcloneStorage.partial.dropLast()), recursive: false)
        where (object.modified ?? .distantFuture) < before {
            try await delete(RcloneStorage.partial + object.key)
            removed += 1
        }
        return removed
    }
}

/// An object on its way through `rclone rcat`, to a name in `partial/`, moved into place when
/// finished. Its bytes go to rclone over a socket (a writer that finds rclone gone gets an
/// error, not SIGPIPE).
final class RcloneUpload: RepositoryUpload, @unchecked Sendable {
    // One writer uses an upload at a time (its parts are sent in order).
    private let storage: RcloneStorage
    private let name: String
    private let temporary: String
    private let process = Process()
    private var socket: Int32
    private let errors: RcloneRun.Collector
    private var done = false

    init(storage: RcloneStorage, name: String, temporary: String) throws {
        self.storage = storage
        self.name = name
        self.temporary = temporary
        var ends: [Int32] = [0, 0]
        #if canImport(Glibc)
            let kind = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        #else
            let kind = SOCK_STREAM
        #endif
        guard socketpair(AF_UNIX, kind, 0, &ends) == 0 else {
            throw RepositoryError.storage(location: storage.location, message: "cannot start rclone: no socket")
        }
        socket = ends[0]
        shutdown(ends[1], Int32(SHUT_WR))
        process.executableURL = URL(fileURLWithPath: storage.executable)
        process.arguments = RcloneStorage.common + ["rcat", storage.target(temporary)]
        process.environment = storage.environment
        process.standardInput = FileHandle(fileDescriptor: ends[1], closeOnDealloc: false)
        process.standardOutput = FileHandle.nullDevice
        errors = RcloneRun.Collector()
        process.standardError = errors.pipe
        do {
            try process.run()
        } catch {
            close(socket)
            close(ends[1])
            throw RepositoryError.storage(location: storage.location, message: "cannot start rclone: \(error)")
        }
        // rclone has its end: this process keeps none of it, so a rclone that dies is an error
        // on the next send, not a send that waits for ever.
        close(ends[1])
        errors.start()
    }

    deinit {
        if socket >= 0 { close(socket) }
        if process.isRunning { process.terminate() }
    }

    func add(_ part: [UInt8]) async throws {
        let socket = self.socket
        let location = storage.location
        let name = self.name
        try await onOwnThread("ckport rclone") {
            var sent = 0
            while sent < part.count {
                let n = part.withUnsafeBytes {
                    send(socket, $0.baseAddress! + sent, part.count - sent, Int32(MSG_NOSIGNAL))
                }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw RepositoryError.storage(location: location, message: "rclone stopped taking \(name)")
                }
                sent += n
            }
        }
    }

    func finish() async throws {
        close(socket)
        socket = -1
        let process = self.process
        try await onOwnThread("ckport rclone") { process.waitUntilExit() }
        let problem = errors.finish()
        guard process.terminationStatus == 0, process.terminationReason == .exit else {
            _ = try? await storage.delete(temporary)
            throw RepositoryError.storage(
                location: storage.location, message: "rclone could not write \(name): \(problem)")
        }
        try await storage.move(temporary, to: name)
        done = true
    }

    func abort() async {
        // Stopped before its input ends: rclone would store what it had been given.
        if process.isRunning { process.terminate() }
        if socket >= 0 {
            close(socket)
            socket = -1
        }
        let process = self.process
        _ = try? await onOwnThread("ckport rclone") { process.waitUntilExit() }
        _ = errors.finish()
        if !done { try? await storage.delete(temporary) }
    }
}

/// Runs rclone once: its status, what it wrote (up to a limit) and what it said went wrong.
enum RcloneRun {
    struct Outcome: Sendable {
        var status: Int32
        /// Ended by a signal (then `status` is the signal's number).
        var signalled = false
        var output: [UInt8]
        var overflowed: Bool
        var said: String
        /// rclone's last words on what failed, or its status.
        var problem: String {
            let line = said.split(separator: "\n").last.map { String($0.prefix(300)) } ?? ""
            return line.isEmpty ? "it ended with status \(status)" : line
        }
    }

    /// Gathers what a process writes to a pipe, on a thread of its own, keeping the last 16 KB.
    final class Collector: @unchecked Sendable {
        let pipe = Pipe()
        private let lock = NSLock()
        private var bytes: [UInt8] = []
        private let ended = DispatchSemaphore(value: 0)

        func start() {
            let handle = pipe.fileHandleForReading
            let thread = Thread { [self] in
                while true {
                    let data = handle.availableData
                    if data.isEmpty { break }
                    lock.lock()
                    bytes.append(contentsOf: data)
                    if bytes.count > 16 << 10 { bytes.removeFirst(bytes.count - (16 << 10)) }
                    lock.unlock()
                }
                ended.signal()
            }
            thread.name = "ckport rclone stderr"
            thread.start()
        }

        /// Waits for the pipe's end and gives what came.
        func finish() -> String {
            ended.wait()
            ended.signal()
            lock.lock()
            defer { lock.unlock() }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    static func run(_ executable: String, _ arguments: [String], environment: [String: String], limit: Int)
        async throws -> Outcome
    {
        try await onOwnThread("ckport rclone") {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            process.environment = environment
            process.standardInput = FileHandle.nullDevice
            let output = Pipe()
            process.standardOutput = output
            let errors = Collector()
            process.standardError = errors.pipe
            do {
                try process.run()
            } catch {
                throw RepositoryError.storage(location: "rclone", message: "cannot start \(executable): \(error)")
            }
            errors.start()
            var bytes: [UInt8] = []
            var overflowed = false
            let handle = output.fileHandleForReading
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                if bytes.count + data.count > limit {
                    overflowed = true
                    process.terminate()
                    break
                }
                bytes.append(contentsOf: data)
            }
            process.waitUntilExit()
            return Outcome(
                status: process.terminationStatus, signalled: process.terminationReason == .uncaughtSignal,
                output: bytes, overflowed: overflowed, said: errors.finish())
        }
    }
}
