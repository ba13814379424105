import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A web auth token file rewritten with each new token (give ``keep(_:)`` to a
/// ``CloudKitClient`` as its `onWebAuthToken`): a new file for the owner alone, renamed over
/// the old one, so that a reader (or a process killed half way) sees one token or the other,
/// never a torn one. Not synced to disk each time: a killed process loses nothing the kernel
/// has. Sync the last token at the end.
public final class WebAuthTokenFile: @unchecked Sendable {
    public let path: String
    private let lock = NSLock()

    public init(path: String) { self.path = path }

    /// Replaces the file's token with `token`; a failure leaves the old file as it was.
    public func keep(_ token: String) {
        lock.lock()
        defer { lock.unlock() }
        // Named as ckport names its temporary output files, so that a later ckport removes
        // one a killed process left.
        let url = URL(fileURLWithPath: path)
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).ckport-\(getpid())-0.tmp").path
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        let bytes = Array((token + "\n").utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        if written == bytes.count { rename(temporary, path) } else { unlink(temporary) }
    }
}
