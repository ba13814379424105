import Crypto
import Foundation
import Records

/// Reads a tar stream on a thread of its own, a few chunks ahead of whoever reads it: the
/// decompressor (and decryptor) behind it, the tar framing, and the SHA-256 of every member's
/// content all run there, so that the reading thread — which parses records, and which a
/// restore's writer waits on — has only the members' bytes to take.
///
/// It reads as ``TarReader`` does and refuses what it refuses: the reader sees exactly the
/// members and bytes a ``TarReader`` over the same stream gives, in order, then the stream's
/// error (after everything that came before it) or its end. At most `depth` chunks wait at a
/// time, so memory stays bounded; a reader that stops early stops the thread too.
final class TarReadAhead {
    /// What the thread hands over: a member's header, a run of its content (the last run of a
    /// member says so, and carries the member's SHA-256 unless the member was left unhashed),
    /// the end of the archive, or the error that ended reading.
    private enum Piece {
        case member(TarEntry)
        case content([UInt8], ends: Bool, digest: SHA256.Digest?)
        case end
        case failure(Error)
    }

    private struct Chunk {
        var piece: Piece
        /// The source's progress (compressed bytes read) when the piece was made.
        var progress: Int64
    }

    let name: String
    private let handoff: BoundedHandoff<Chunk>
    private let source: (UnsafeMutableRawBufferPointer) throws -> Int
    private let progress: () -> Int64
    private let chunkSize: Int
    private var started = false
    /// The content being handed out, and how much of it has been.
    private var bytes: [UInt8] = []
    private var offset = 0
    /// Whether the run being handed out ends the current member, and the member's SHA-256.
    private var runEnds = false
    private var runDigest: SHA256.Digest?
    private var inMember = false
    /// Which members the thread hashes, by path.
    private let hashes: @Sendable (String) -> Bool
    private var finished = false
    private var failure: Error?
    private var lastProgress: Int64 = 0

    /// The SHA-256 of the current member's content, once ``readContent(into:)`` has returned 0
    /// for it; nil before, and for a member `hashes` leaves unhashed.
    private(set) var digest: SHA256.Digest?

    /// - Parameters:
    ///   - source: fills a buffer with the next bytes of the tar stream and returns how many, 0
    ///     at the end. Called only on the read-ahead thread once reading has begun.
    ///   - progress: read on the same thread after each piece, for ``bytesRead``.
    ///   - hashes: whether a member, by its path, is hashed (for a reader that checks the
    ///     others in another way).
    init(
        name: String, chunkSize: Int = 1 << 18, depth: Int = 6, progress: @escaping () -> Int64 = { 0 },
        hashes: @escaping @Sendable (String) -> Bool = { _ in true },
        source: @escaping (UnsafeMutableRawBufferPointer) throws -> Int
    ) {
        self.name = name
        self.hashes = hashes
        self.source = source
        self.progress = progress
        self.chunkSize = chunkSize
        handoff = BoundedHandoff(depth: depth)
    }

    deinit {
        handoff.cancel()
    }

    /// The source's progress as of the piece being read now.
    var bytesRead: Int64 { lastProgress }

    /// The next member, or nil after the end of the archive. What is left of the current
    /// member's content is passed over.
    func next() throws -> TarEntry? {
        while inMember { try advance() }
        digest = nil
        guard !finished else { return nil }
        let piece = try take()
        if case .end = piece { return nil }
        guard case .member(let entry) = piece else {
            preconditionFailure("the read-ahead thread sent content outside a member")
        }
        inMember = true
        return entry
    }

    /// Reads up to `target.count` bytes of the current member's content; 0 at its end (and then
    /// ``digest`` is its SHA-256).
    func readContent(into target: UnsafeMutableRawBufferPointer) throws -> Int {
        guard target.count > 0 else { return 0 }
        while inMember && offset == bytes.count { try advance() }
        guard inMember else { return 0 }
        let n = min(target.count, bytes.count - offset)
        bytes.withUnsafeBytes { target.baseAddress!.copyMemory(from: $0.baseAddress! + offset, byteCount: n) }
        offset += n
        return n
    }

    /// The rest of the current member, which must be at most `limit` bytes.
    func readAll(limit: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        while true {
            while inMember && offset == bytes.count { try advance() }
            guard inMember else { return out }
            out += bytes[offset...]
            offset = bytes.count
            if out.count > limit { throw ArchiveError(file: name, message: "a member is larger than \(limit) bytes") }
        }
    }

    /// Moves past the content run handed out, to the next one of the member, or ends the
    /// member when the run just finished was its last (its digest becomes ``digest``).
    private func advance() throws {
        if runEnds {
            digest = runDigest
            runEnds = false
            runDigest = nil
            inMember = false
            bytes = []
            offset = 0
            return
        }
        guard case .content(let run, let ends, let digest) = try take() else {
            preconditionFailure("the read-ahead thread sent a header inside a member")
        }
        bytes = run
        offset = 0
        runEnds = ends
        runDigest = digest
    }

    /// The next piece; the stream's error, again and again, once it has come.
    private func take() throws -> Piece {
        if let failure { throw failure }
        if !started { start() }
        let chunk = handoff.take()
        lastProgress = chunk.progress
        switch chunk.piece {
        case .failure(let error):
            failure = error
            throw error
        case .end:
            finished = true
            return .end
        case let piece:
            return piece
        }
    }

    private func start() {
        started = true
        let handoff = self.handoff
        let chunkSize = self.chunkSize
        let name = self.name
        let hashes = self.hashes
        // Only the read-ahead thread touches the source from here on.
        WorkerThread.start(name: "ckport read-ahead", handing: (source, progress)) { source, progress in
            let tar = TarReader(name: name, read: source)
            func send(_ piece: Piece) -> Bool { handoff.put(Chunk(piece: piece, progress: progress())) }
            do {
                while let entry = try tar.next() {
                    guard send(.member(entry)) else { return }
                    var sha: SHA256? = hashes(entry.path) ? SHA256() : nil
                    while true {
                        var failure: Error?
                        var ended = false
                        // A member shorter than a chunk is read, and its end seen, in one run.
                        let capacity = entry.size < Int64(chunkSize) ? Int(entry.size) + 1 : chunkSize
                        let run = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, filled in
                            filled = 0
                            do {
                                while filled < buffer.count {
                                    let n = try tar.readContent(
                                        into: UnsafeMutableRawBufferPointer(
                                            UnsafeMutableBufferPointer(rebasing: buffer[filled...])))
                                    if n == 0 {
                                        ended = true
                                        break
                                    }
                                    filled += n
                                }
                            } catch {
                                failure = error
                            }
                        }
                        // What was read before an error is handed over before it, as a member
                        // that goes on (no digest).
                        if let failure {
                            if !run.isEmpty { guard send(.content(run, ends: false, digest: nil)) else { return } }
                            _ = send(.failure(failure))
                            return
                        }
                        if sha != nil { run.withUnsafeBytes { sha!.update(bufferPointer: $0) } }
                        guard send(.content(run, ends: ended, digest: ended ? sha?.finalize() : nil)) else { return }
                        if ended { break }
                    }
                }
                _ = send(.end)
            } catch {
                _ = send(.failure(error))
            }
        }
    }
}
