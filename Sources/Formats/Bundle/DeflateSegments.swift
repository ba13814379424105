import CZlib
import Foundation
import Records

/// Raw deflate (RFC 1951) in segments that join into one stream.
///
/// Each segment ends on a byte boundary with an empty stored block (zlib's sync flush) and
/// without the final-block bit, so segments compressed apart — on different threads, in any
/// order — placed one after another are one valid deflate stream, as long as each segment's
/// back-references reach only into what precedes it in that stream. A segment that starts a
/// run of bytes refers to nothing before it; one that continues a run is primed with the up to
/// 32 KiB of the run just before it (``add(_:continuing:)``), which the decoder has just
/// produced, so that compression loses almost nothing at the seams. The stream's last segment
/// carries the final block.
///
/// This is how pigz compresses on every core while writing one ordinary gzip member; the
/// bundle writer wraps the segments in gzip's header and trailer (``GzipFraming``).
final class DeflateSegmenter {
    private var stream = z_stream()
    private var output: [UInt8] = []

    /// `level` as gzip's: 1 (fastest) … 9 (smallest).
    init(level: Int32) {
        let status = deflateInit2_(
            &stream, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY,
            zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        precondition(status == Z_OK, "zlib's deflateInit2 failed (\(status))")
    }

    deinit { deflateEnd(&stream) }

    /// `bytes` as one segment: primed with `dictionary` (the bytes just before them in the
    /// stream, at most the last 32 KiB are used), and carrying the stream's final block when
    /// `last`.
    func segment(_ bytes: UnsafeRawBufferPointer, dictionary: UnsafeRawBufferPointer? = nil, last: Bool = false)
        -> [UInt8]
    {
        deflateReset(&stream)
        if let dictionary, dictionary.count > 0 {
            let window = min(dictionary.count, 1 << 15)
            let start = dictionary.baseAddress!.advanced(by: dictionary.count - window).assumingMemoryBound(
                to: Bytef.self)
            let status = deflateSetDictionary(&stream, start, uInt(window))
            precondition(status == Z_OK, "zlib's deflateSetDictionary failed (\(status))")
        }
        // deflateBound covers the data and a final block; a sync flush adds at most 6 bytes.
        let bound = Int(deflateBound(&stream, uLong(bytes.count))) + 16
        if output.count < bound { output = [UInt8](repeating: 0, count: bound) }
        stream.next_in = UnsafeMutablePointer(mutating: bytes.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(bytes.count)
        var produced = 0
        let flush = last ? Z_FINISH : Z_SYNC_FLUSH
        while true {
            if produced == output.count {
                output.append(contentsOf: repeatElement(0, count: max(output.count, 1 << 12)))
            }
            let status: Int32 = output.withUnsafeMutableBufferPointer { buffer in
                stream.next_out = buffer.baseAddress! + produced
                stream.avail_out = uInt(buffer.count - produced)
                let status = deflate(&stream, flush)
                produced = buffer.count - Int(stream.avail_out)
                return status
            }
            precondition(
                status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR, "zlib's deflate failed (\(status))")
            // Done when every byte is in and zlib stopped short of the space it had.
            if last ? status == Z_STREAM_END : (stream.avail_in == 0 && produced < output.count) { break }
        }
        return Array(output[0..<produced])
    }

    func segment(_ bytes: [UInt8], last: Bool = false) -> [UInt8] {
        bytes.withUnsafeBytes { segment($0, last: last) }
    }
}

/// Gzip's frame (RFC 1952) around a deflate stream made of segments: the header zlib writes
/// for `deflateInit2` with gzip framing (no name, no time, Unix), and the trailer with the
/// CRC-32 and length of everything the segments hold, which ``DeflateSegmenter`` segments let
/// be combined piece by piece.
enum GzipFraming {
    static let header: [UInt8] = [0x1F, 0x8B, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x03]

    static func trailer(crc: UInt32, length: Int64) -> [UInt8] {
        let size = UInt32(truncatingIfNeeded: length)
        return [0, 8, 16, 24].map { UInt8(truncatingIfNeeded: crc >> $0) }
            + [0, 8, 16, 24].map { UInt8(truncatingIfNeeded: size >> $0) }
    }

    static func crc(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        UInt32(crc32_z(0, bytes.baseAddress?.assumingMemoryBound(to: Bytef.self), bytes.count))
    }

    /// The CRC-32 of A followed by B, from A's, B's and B's length.
    static func combine(_ first: UInt32, _ second: UInt32, secondLength: Int64) -> UInt32 {
        guard secondLength > 0 else { return first }
        return UInt32(crc32_combine(uLong(first), uLong(second), Int(secondLength)))
    }
}

/// Compresses a sequence of byte chunks into deflate segments on worker threads, one per core,
/// and hands the segments back in the order the chunks came (``DeflateSegmenter``).
///
/// The thread that adds chunks also receives the results, inside ``add(_:continuing:)`` and
/// ``finish()``, so whatever it does with them needs no lock. At most a few chunks per worker
/// are in flight, which bounds memory whatever the data's size. Each result carries its
/// chunk's CRC-32 and length for the gzip trailer.
final class ParallelDeflater {
    struct Segment {
        /// The number of the chunk, counted from 0 in the order they were added.
        var index: Int
        var compressed: [UInt8]
        var crc: UInt32
        var length: Int
    }

    private struct Shared {
        var waiting: [(index: Int, bytes: [UInt8], dictionary: [UInt8])] = []
        var waitingHead = 0
        var done: [Int: Segment] = [:]
        var stopped = false
    }

    private let shared = Monitor(Shared())
    private let level: Int32
    private let workers: Int
    private let window: Int
    private let deliver: (Segment) throws -> Void
    private var started = false
    private var added = 0
    private var delivered = 0
    /// The end of the last chunk added, which primes the next one when it continues it.
    private var tail: [UInt8] = []

    /// - Parameters:
    ///   - workers: threads that compress (default: one per core).
    ///   - deliver: receives each segment, in order, on the thread that adds the chunks.
    init(
        level: Int32, workers: Int = ProcessInfo.processInfo.activeProcessorCount,
        deliver: @escaping (Segment) throws -> Void
    ) {
        self.level = level
        self.workers = max(1, workers)
        window = 2 * max(1, workers) + 2
        self.deliver = deliver
    }

    deinit { stop() }

    /// Adds the next chunk. With `continuing`, it continues the chunk added before it in the
    /// stream (and is primed with its end); without, the bytes before it in the stream are not
    /// known yet, and it refers to none of them.
    func add(_ bytes: [UInt8], continuing: Bool) throws {
        if !started { launch() }
        let dictionary = continuing ? tail : []
        tail =
            bytes.count >= 1 << 15
            ? Array(bytes.suffix(1 << 15)) : (continuing ? Array((tail + bytes).suffix(1 << 15)) : bytes)
        var ready: [Segment] = []
        let index = added
        shared.withLock(
            when: { state in
                takeReady(&state, into: &ready)
                return added - delivered < window
            },
            then: { state in state.waiting.append((index, bytes, dictionary)) })
        added += 1
        for segment in ready { try deliver(segment) }
    }

    /// Waits for every chunk added so far and hands over their segments.
    func finish() throws {
        while delivered < added {
            var ready: [Segment] = []
            shared.withLock(
                when: { state in
                    takeReady(&state, into: &ready)
                    return !ready.isEmpty
                }, then: { _ in })
            for segment in ready { try deliver(segment) }
        }
    }

    /// Takes the segments that are next in order and done; with the lock held.
    private func takeReady(_ state: inout Shared, into ready: inout [Segment]) {
        while let segment = state.done.removeValue(forKey: delivered) {
            ready.append(segment)
            delivered += 1
        }
    }

    private func stop() {
        shared.withLock { $0.stopped = true }
    }

    private func launch() {
        started = true
        let shared = self.shared
        let level = self.level
        for number in 0..<workers {
            WorkerThread.start(name: "ckport deflate \(number + 1)") {
                let segmenter = DeflateSegmenter(level: level)
                while true {
                    let next = shared.withLock(
                        when: { $0.waitingHead < $0.waiting.count || $0.stopped },
                        then: {
                            state -> (index: Int, bytes: [UInt8], dictionary: [UInt8])? in
                            if state.stopped { return nil }
                            let job = state.waiting[state.waitingHead]
                            state.waiting[state.waitingHead] = (0, [], [])
                            state.waitingHead += 1
                            if state.waitingHead == state.waiting.count {
                                state.waiting.removeAll(keepingCapacity: true)
                                state.waitingHead = 0
                            }
                            return job
                        })
                    guard let job = next else { return }
                    let segment = job.bytes.withUnsafeBytes { bytes in
                        job.dictionary.withUnsafeBytes { dictionary in
                            Segment(
                                index: job.index, compressed: segmenter.segment(bytes, dictionary: dictionary),
                                crc: GzipFraming.crc(bytes), length: bytes.count)
                        }
                    }
                    shared.withLock { $0.done[job.index] = segment }
                }
            }
        }
    }
}
