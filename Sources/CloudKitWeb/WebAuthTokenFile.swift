import Foundation
import Records
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A web auth token file: the token on its first line, then what ckport knows of the sign-in
/// it came from, as comment lines that a reader of the first line alone ignores:
///
/// ```
/// 158__54__AZ3nTESs…__eyJYLUFQUExF…ifQ==
/// # signed in: 2026-11-26T10:51:33Z
/// # last answer: 2026-11-26T11:40:02Z
/// ```
///
/// CloudKit turns the token over with every answer (`X-Apple-CloudKit-Web-Auth-Token`), and
/// all of them belong to the sign-in: by the reference it ends 30 minutes after it began, or
/// two weeks after when the person ticked "Keep me signed in". The file keeps when the sign-in
/// began and when CloudKit last answered a request made with it, so that `ckport cloud status`
/// can say where the token stands.
///
/// Give ``keep(_:)`` to a ``CloudKitClient`` as its `onWebAuthToken`: each new token replaces
/// the file whole — a new file with a random name, created for the owner alone (`O_EXCL`,
/// `O_NOFOLLOW`, mode 0600, so nobody else can have it open or have planted it), synced and
/// renamed over the old one — so that a reader, or a process killed half way, sees one token
/// or the other, never a torn one.
public final class WebAuthTokenFile: Sendable {
    /// What the file holds.
    public struct Contents: Sendable, Equatable {
        public var token: String
        /// When the person signed in (`ckport cloud login`); nil for a token written by hand.
        public var signedIn: Date?
        /// When CloudKit last answered a request made with the sign-in's tokens.
        public var lastAnswer: Date?

        public init(token: String, signedIn: Date? = nil, lastAnswer: Date? = nil) {
            self.token = token
            self.signedIn = signedIn
            self.lastAnswer = lastAnswer
        }

        /// The file's text.
        public var text: String {
            var lines = [token]
            if let signedIn { lines.append("# signed in: \(WebAuthTokenFile.format(signedIn))") }
            if let lastAnswer { lines.append("# last answer: \(WebAuthTokenFile.format(lastAnswer))") }
            return lines.joined(separator: "\n") + "\n"
        }

        /// Reads a file's text; nil when its first line holds no token.
        public init?(text: String) {
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            guard let first = lines.first, !first.isEmpty, !first.hasPrefix("#") else { return nil }
            token = first
            for line in lines.dropFirst() where line.hasPrefix("#") {
                let body = line.dropFirst().trimmingCharacters(in: .whitespaces)
                if body.hasPrefix("signed in:") {
                    signedIn = WebAuthTokenFile.parse(String(body.dropFirst("signed in:".count)))
                }
                if body.hasPrefix("last answer:") {
                    lastAnswer = WebAuthTokenFile.parse(String(body.dropFirst("last answer:".count)))
                }
            }
        }
    }

    public let path: String
    private let clock: @Sendable () -> Date
    private struct State {
        var failure: Error?
        /// The token this file held when last read or written here: a file that holds another
        /// one now was written by someone else meanwhile (`ckport cloud login`), and is left
        /// alone.
        var expected: String?
        var cleaned = false
        var replacedElsewhere = false
    }
    /// Held while the file is written: one token at a time.
    private let state: Mutex<State>

    public init(path: String, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.path = path
        self.clock = clock
        let current = (try? String(contentsOfFile: path, encoding: .utf8)).flatMap(Contents.init(text:))
        state = Mutex(State(expected: current?.token))
    }

    /// Whether the file was rewritten by another process since this one read or wrote it (a new
    /// sign-in): tokens this one receives then belong to the old sign-in and are not kept.
    public var replacedElsewhere: Bool { state.withLock { $0.replacedElsewhere } }

    /// The file's contents; nil when it cannot be read or holds no token.
    public func read() -> Contents? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return Contents(text: text)
    }

    /// Keeps `token`, the one CloudKit's last answer gave, in place of the file's: the sign-in
    /// time stays, the time of the last answer is now. A failure to write is kept, for
    /// ``checkKept()`` to report (a client's callback cannot throw); the old file is left as it
    /// was.
    public func keep(_ token: String) {
        state.withLock { state in
            var contents = read() ?? Contents(token: token)
            if let expected = state.expected, contents.token != expected {
                state.replacedElsewhere = true
                return
            }
            contents.token = token
            contents.lastAnswer = clock()
            do {
                if !state.cleaned {
                    WebAuthTokenFile.removeStale(beside: URL(fileURLWithPath: WebAuthTokenFile.target(of: path)))
                    state.cleaned = true
                }
                try WebAuthTokenFile.write(contents, to: path, cleanUp: false)
                state.expected = token
            } catch {
                if state.failure == nil { state.failure = error }
            }
        }
    }

    /// Throws the first failure to keep a token since the last call, if there was one.
    public func checkKept() throws {
        let failure = state.withLock { state in
            defer { state.failure = nil }
            return state.failure
        }
        if let failure { throw failure }
    }

    /// Writes `contents` to `path` as a new file (see the type's description) and syncs it.
    /// A symbolic link at `path` is followed (the file it names is replaced, the link stays).
    public static func write(_ contents: Contents, to path: String, cleanUp: Bool = true) throws {
        let url = URL(fileURLWithPath: target(of: path))
        let folder = url.deletingLastPathComponent().path
        if cleanUp { removeStale(beside: url) }
        var random = SystemRandomNumberGenerator()
        let temporary =
            (folder.isEmpty ? "." : folder) + "/." + url.lastPathComponent
            + ".ckport-\(getpid())-\(random.next() as UInt64).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw TokenFileError(
                path: path, reason: "cannot create a file beside it: \(String(cString: strerror(errno)))")
        }
        let bytes = Array(contents.text.utf8)
        var written = 0
        while written < bytes.count {
            #if canImport(Glibc)
                let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, bytes.count - written) }
            #else
                let n = bytes.withUnsafeBytes { Darwin.write(fd, $0.baseAddress! + written, bytes.count - written) }
            #endif
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let reason = String(cString: strerror(errno))
                close(fd)
                unlink(temporary)
                throw TokenFileError(path: path, reason: "cannot write: \(reason)")
            }
            written += n
        }
        // Mode 0600 whatever the umask made of it, before the token has a name anyone uses.
        guard fchmod(fd, 0o600) == 0, fsync(fd) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            unlink(temporary)
            throw TokenFileError(path: path, reason: "cannot sync: \(reason)")
        }
        close(fd)
        guard rename(temporary, url.path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw TokenFileError(path: path, reason: "cannot move into place: \(reason)")
        }
    }

    /// The file a path names: itself, or what the symbolic link there points to.
    static func target(of path: String) -> String {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFLNK else { return path }
        return URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    }

    /// Removes the temporary files of this token file that a killed ckport left
    /// (`.NAME.ckport-PID-N.tmp`, PID no longer running).
    static func removeStale(beside url: URL) {
        let folder = url.deletingLastPathComponent().path
        let prefix = "." + url.lastPathComponent + ".ckport-"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.isEmpty ? "." : folder) else {
            return
        }
        for name in names where name.hasPrefix(prefix) && name.hasSuffix(".tmp") {
            let digits = name.dropFirst(prefix.count).prefix { $0.isASCII && $0.isNumber }
            guard let pid = Int32(digits), pid > 0, pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else { continue }
            // This user's regular files only: never another user's, never through a link.
            let stale = (folder.isEmpty ? "." : folder) + "/" + name
            var info = stat()
            guard lstat(stale, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == getuid() else { continue }
            unlink(stale)
        }
    }

    static func format(_ date: Date) -> String {
        ServerToServerKey.dateString(date)
    }

    static func parse(_ text: String) -> Date? {
        ISO8601DateFormatter().date(from: text.trimmingCharacters(in: .whitespaces))
    }
}

/// A web auth token file that could not be written.
public struct TokenFileError: CKPortError, Sendable {
    public var category: ErrorCategory { .environment }
    public var path: String
    public var reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "\(path): the web auth token could not be kept: \(reason)" }
}
