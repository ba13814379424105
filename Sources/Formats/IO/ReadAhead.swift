import Foundation
import Records

/// Runs a byte source — a decompressor, a decryptor — on a thread of its own, a few chunks
/// ahead of whoever reads it, so that inflating a bundle overlaps with parsing its records.
///
/// The reader sees exactly the bytes the source gives, in order, and then the source's error
/// (after the bytes that came before it) or its end. At most `depth` chunks wait at a time, so
/// memory stays bounded; a reader that stops early stops the thread too.
final class ReadAhead: @unchecked Sendable {
    private struct Chunk {
        var bytes: [UInt8]
        var failure: Error?
        var isLast: Bool
        /// The source's progress (compressed bytes read) when the chunk was filled.
        var progress: Int64
    }

    private let handoff: BoundedHandoff<Chunk>
    private let source: (UnsafeMutableRawBufferPointer) throws -> Int
    private let progress: () -> Int64
    private let chunkSize: Int
    private var started = false
    private var current = Chunk(bytes: [], failure: nil, isLast: false, progress: 0)
    private var offset = 0

    /// - Parameters:
    ///   - source: fills a buffer and returns how many bytes it wrote, 0 at the end. Called only
    ///     on the read-ahead thread once reading has begun.
    ///   - progress: read on the same thread after each chunk, for ``bytesRead``.
    init(chunkSize: Int = 1 << 18, depth: Int = 6, progress: @escaping () -> Int64 = { 0 },
         source: @escaping (UnsafeMutableRawBufferPointer) throws -> Int) {
        self.source = source
        self.progress = progress
        self.chunkSize = chunkSize
        handoff = BoundedHandoff(depth: depth)
    }

    deinit {
        handoff.cancel()
    }

    /// The source's progress as of the chunk being read now.
    var bytesRead: Int64 { current.progress }

    /// Fills `buffer` with the next bytes; returns how many, 0 at the end.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard buffer.count > 0 else { return 0 }
        while offset == current.bytes.count {
            if let failure = current.failure { throw failure }
            if current.isLast { return 0 }
            if !started { start() }
            current = handoff.take()
            offset = 0
        }
        let n = min(buffer.count, current.bytes.count - offset)
        current.bytes.withUnsafeBytes { bytes in
            buffer.baseAddress!.copyMemory(from: bytes.baseAddress! + offset, byteCount: n)
        }
        offset += n
        return n
    }

    private func start() {
        started = true
        let handoff = self.handoff
        // Only the read-ahead thread touches the source from here on.
        nonisolated(unsafe) let source = self.source
        nonisolated(unsafe) let progress = self.progress
        let chunkSize = self.chunkSize
        let thread = Thread {
            while true {
                var failure: Error?
                var reachedEnd = false
                let bytes = [UInt8](unsafeUninitializedCapacity: chunkSize) { buffer, filled in
                    filled = 0
                    do {
                        while filled < chunkSize {
                            let n = try source(UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[filled...])))
                            if n == 0 { reachedEnd = true; break }
                            filled += n
                        }
                    } catch {
                        failure = error
                    }
                }
                let chunk = Chunk(bytes: bytes, failure: failure, isLast: reachedEnd, progress: progress())
                if !handoff.put(chunk) || failure != nil || reachedEnd { return }
            }
        }
        thread.name = "ckport read-ahead"
        thread.start()
    }
}
