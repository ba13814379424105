import CZlib
import Foundation
import Records

#if canImport(CISAL)
    import CISAL
#endif

/// A problem with compressed input: where it is and what is wrong.
public struct ArchiveError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var file: String
    public var message: String

    public init(file: String, message: String) {
        self.file = file
        self.message = message
    }

    public var description: String { "\(file): \(message)" }
}

/// Compresses a byte stream into gzip (RFC 1952) through the system's zlib, one chunk at a time.
/// Each `GzipCompressor` makes one gzip member; members written one after another form a valid
/// gzip file, which `gzip -d` and `tar -z` read as one stream.
public final class GzipCompressor {
    private var stream = z_stream()
    private var finished = false
    private var output: [UInt8] = []

    /// `level` as gzip's: 1 (fastest) … 9 (smallest); 6 is gzip's default.
    public init(level: Int32 = 6) {
        let status = deflateInit2_(
            &stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY,
            zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        precondition(status == Z_OK, "zlib's deflateInit2 failed (\(status))")
    }

    deinit { deflateEnd(&stream) }

    /// Compresses `bytes` and returns what zlib has ready (often nothing for small inputs).
    public func compress(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        run(bytes, flush: Z_NO_FLUSH)
    }

    public func compress(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { compress($0) }
    }

    /// Ends the member: the rest of the compressed data and the gzip trailer (CRC-32, size).
    public func finish() -> [UInt8] {
        precondition(!finished, "finish() called twice")
        finished = true
        return run(UnsafeRawBufferPointer(start: nil, count: 0), flush: Z_FINISH)
    }

    private func run(_ bytes: UnsafeRawBufferPointer, flush: Int32) -> [UInt8] {
        output.removeAll(keepingCapacity: true)
        let chunk = 1 << 16
        var scratch = [UInt8](repeating: 0, count: chunk)
        stream.next_in = UnsafeMutablePointer(mutating: bytes.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(bytes.count)
        while true {
            let produced: Int = scratch.withUnsafeMutableBufferPointer { buffer in
                stream.next_out = buffer.baseAddress
                stream.avail_out = uInt(chunk)
                let status = deflate(&stream, flush)
                precondition(status != Z_STREAM_ERROR, "zlib's deflate state is broken")
                return chunk - Int(stream.avail_out)
            }
            output.append(contentsOf: scratch[0..<produced])
            if flush == Z_FINISH {
                if produced < chunk && stream.avail_in == 0 { break }
            } else if stream.avail_in == 0 && produced < chunk {
                break
            }
        }
        return output
    }

    /// `bytes` as one whole gzip member.
    public static func member(_ bytes: [UInt8], level: Int32 = 6) -> [UInt8] {
        let compressor = GzipCompressor(level: level)
        return compressor.compress(bytes) + compressor.finish()
    }
}

/// Limits that keep a hostile archive from filling the disk or memory: a "decompression bomb"
/// expands a few kilobytes into gigabytes.
public struct DecompressionLimits: Sendable {
    /// The most bytes the whole stream may expand to.
    public var maxTotalBytes: Int64
    /// The most the stream may expand relative to its compressed size: over the whole stream
    /// once it has produced more than `ratioGrace` bytes (small files of zeros compress
    /// extremely well), and over every stretch of `ratioGrace` bytes it produces, so that
    /// incompressible padding elsewhere in the file cannot buy room for a bomb.
    public var maxRatio: Int64
    public var ratioGrace: Int64

    public init(maxTotalBytes: Int64 = 64 << 30, maxRatio: Int64 = 200, ratioGrace: Int64 = 16 << 20) {
        self.maxTotalBytes = maxTotalBytes
        self.maxRatio = maxRatio
        self.ratioGrace = ratioGrace
    }
}

/// Reads a gzip file (one or several members) and hands out its decompressed bytes in chunks,
/// checking each member's CRC-32 and length and the limits.
public final class GzipReader {
    /// What inflates the data. ISA-L (Intel's Intelligent Storage Acceleration Library) does
    /// it in about half the time zlib takes; ckport uses it when it was built with it.
    public enum Engine: String, Sendable, CaseIterable {
        case zlib
        case isal

        /// The engines this build has, the fastest last.
        public static var available: [Engine] {
            #if canImport(CISAL)
                [.zlib, .isal]
            #else
                [.zlib]
            #endif
        }

        /// The engine a reader uses unless told otherwise.
        public static var fastest: Engine { available.last! }
    }

    public let name: String
    public let engine: Engine
    private let source: (UnsafeMutableRawBufferPointer) throws -> Int
    private let inflater: MemberInflater
    private let input: UnsafeMutablePointer<UInt8>
    private let inputCapacity = 1 << 16
    /// The compressed bytes read and not yet inflated: `input[pendingStart..<pendingEnd]`.
    private var pendingStart = 0
    private var pendingEnd = 0
    private var sourceDone = false
    private var streamEnded = false
    private var inMember = false
    private var members = 0
    private let limits: DecompressionLimits
    /// Compressed bytes read so far, and decompressed bytes produced.
    public private(set) var compressedBytes: Int64 = 0
    public private(set) var decompressedBytes: Int64 = 0

    /// - Parameter source: fills the buffer with the next compressed bytes and returns how many
    ///   (0 at the end).
    public init(
        name: String, limits: DecompressionLimits = DecompressionLimits(), engine: Engine = .fastest,
        source: @escaping (UnsafeMutableRawBufferPointer) throws -> Int
    ) {
        self.name = name
        self.source = source
        self.limits = limits
        input = .allocate(capacity: inputCapacity)
        #if canImport(CISAL)
            self.engine = engine
            inflater = engine == .isal ? ISALInflater() : ZlibInflater()
        #else
            self.engine = .zlib
            inflater = ZlibInflater()
        #endif
    }

    /// Reads a file.
    public convenience init(
        path: String, limits: DecompressionLimits = DecompressionLimits(), engine: Engine = .fastest
    ) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw ArchiveError(file: path, message: "cannot open the file")
        }
        self.init(name: path, limits: limits, engine: engine) { buffer in
            while true {
                let n = Foundation.read(handle.fileDescriptor, buffer.baseAddress, buffer.count)
                if n >= 0 { return n }
                if errno != EINTR {
                    throw ArchiveError(file: path, message: "cannot read: \(String(cString: strerror(errno)))")
                }
            }
        }
    }

    /// Reads from bytes in memory.
    public convenience init(
        name: String, bytes: [UInt8], limits: DecompressionLimits = DecompressionLimits(), engine: Engine = .fastest
    ) {
        var offset = 0
        self.init(name: name, limits: limits, engine: engine) { buffer in
            let n = min(buffer.count, bytes.count - offset)
            if n > 0 {
                bytes.withUnsafeBytes {
                    buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + n)]))
                }
            }
            offset += n
            return n
        }
    }

    deinit {
        input.deallocate()
    }

    private func fail(_ message: String) -> ArchiveError {
        ArchiveError(file: name, message: message)
    }

    /// Fills `buffer` with decompressed bytes; returns how many, 0 at the end of the stream.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard buffer.count > 0 else { return 0 }
        while !streamEnded {
            if pendingStart == pendingEnd && !sourceDone {
                let n = try source(UnsafeMutableRawBufferPointer(start: input, count: inputCapacity))
                compressedBytes += Int64(n)
                (pendingStart, pendingEnd) = (0, n)
                if n == 0 { sourceDone = true }
                continue
            }
            if !inMember {
                if pendingStart == pendingEnd {
                    if members == 0 { throw fail("the file is empty, not gzip data") }
                    streamEnded = true
                    return 0
                }
                // A new member starts here; anything but the gzip magic after a member is refused.
                if members > 0 && input[pendingStart] != 0x1F {
                    throw fail(
                        "unexpected bytes after the end of the gzip data (at compressed byte \(compressedBytes - Int64(pendingEnd - pendingStart)))"
                    )
                }
                inMember = true
            }
            // With the input used up, the inflater may still hold output; it says when it has none.
            let step = inflater.step(input + pendingStart, pendingEnd - pendingStart, into: buffer)
            pendingStart += step.consumed
            decompressedBytes += Int64(step.produced)
            try checkLimits()
            if let problem = step.problem {
                switch problem {
                case .damaged(let detail):
                    throw fail(
                        "the gzip data is damaged near compressed byte \(compressedBytes - Int64(pendingEnd - pendingStart)): \(detail)"
                    )
                case .failed(let message):
                    throw fail(message)
                }
            }
            if step.memberEnded {
                inMember = false
                members += 1
                inflater.nextMember()
            } else if step.consumed == 0 && step.produced == 0 && (pendingStart < pendingEnd || sourceDone) {
                // Nothing moved with input at hand (or none left to come): the member is cut short.
                guard sourceDone && pendingStart == pendingEnd else {
                    throw fail(
                        "the gzip data is damaged near compressed byte \(compressedBytes - Int64(pendingEnd - pendingStart)): nothing more could be inflated from it"
                    )
                }
                throw fail("the gzip data ends early (truncated after \(compressedBytes) compressed bytes)")
            }
            if step.produced > 0 { return step.produced }
        }
        return 0
    }

    private func checkLimits() throws {
        if decompressedBytes > limits.maxTotalBytes {
            throw fail(
                "expands past the limit of \(limits.maxTotalBytes) bytes; refused as a possible decompression bomb")
        }
        if decompressedBytes > limits.ratioGrace, decompressedBytes / max(compressedBytes, 1) > limits.maxRatio {
            throw fail(
                "expands more than \(limits.maxRatio)× (\(decompressedBytes) bytes from \(compressedBytes)); refused as a possible decompression bomb"
            )
        }
        // The same ratio over each stretch of output: the compressed bytes inflate consumed for it.
        let consumed = compressedBytes - Int64(pendingEnd - pendingStart)
        let stretch = decompressedBytes - window.decompressed
        if stretch >= limits.ratioGrace {
            let used = consumed - window.compressed
            if stretch / max(used, 1) > limits.maxRatio {
                throw fail(
                    "\(stretch) bytes from byte \(window.decompressed) on expand from \(used) compressed bytes, more than \(limits.maxRatio)×; refused as a possible decompression bomb"
                )
            }
            window = (consumed, decompressedBytes)
        }
    }

    /// Where the current stretch of output began, compressed and decompressed.
    private var window: (compressed: Int64, decompressed: Int64) = (0, 0)
}

/// What one call of an inflater did.
struct InflateStep {
    enum Problem {
        /// The data is not valid deflate or gzip, or its check values do not match.
        case damaged(String)
        case failed(String)
    }

    var consumed: Int
    var produced: Int
    /// The member's trailer was read and its CRC-32 and length match.
    var memberEnded: Bool
    var problem: Problem?
}

/// Inflates gzip members one after another.
protocol MemberInflater: AnyObject {
    /// Inflates what it can of `count` bytes at `input` into `output`.
    func step(_ input: UnsafePointer<UInt8>, _ count: Int, into output: UnsafeMutableRawBufferPointer) -> InflateStep
    /// Makes ready for the next member, after one ended.
    func nextMember()
}

/// zlib's inflate, with gzip framing.
final class ZlibInflater: MemberInflater {
    private var stream = z_stream()

    init() {
        let status = inflateInit2_(&stream, 15 + 16, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        precondition(status == Z_OK, "zlib's inflateInit2 failed (\(status))")
    }

    deinit { inflateEnd(&stream) }

    func step(_ input: UnsafePointer<UInt8>, _ count: Int, into output: UnsafeMutableRawBufferPointer) -> InflateStep {
        stream.next_in = UnsafeMutablePointer(mutating: input)
        stream.avail_in = uInt(count)
        stream.next_out = output.baseAddress!.assumingMemoryBound(to: Bytef.self)
        stream.avail_out = uInt(output.count)
        let status = inflate(&stream, Z_NO_FLUSH)
        var step = InflateStep(
            consumed: count - Int(stream.avail_in), produced: output.count - Int(stream.avail_out), memberEnded: false)
        switch status {
        case Z_OK, Z_BUF_ERROR:
            break
        case Z_STREAM_END:
            step.memberEnded = true
        case Z_DATA_ERROR:
            step.problem = .damaged(stream.msg.map { String(cString: $0) } ?? "corrupt data")
        case Z_MEM_ERROR:
            step.problem = .failed("zlib ran out of memory")
        default:
            step.problem = .failed("zlib reported error \(status)")
        }
        return step
    }

    func nextMember() { inflateReset(&stream) }
}

#if canImport(CISAL)
    /// ISA-L's inflate, with gzip framing (its header, and the trailer's CRC-32 and length checked).
    final class ISALInflater: MemberInflater {
        private let state: UnsafeMutableRawPointer

        init() {
            guard let state = ckport_isal_gzip_new() else { fatalError("out of memory for ISA-L's inflate state") }
            self.state = state
        }

        deinit { ckport_isal_free(state) }

        func step(_ input: UnsafePointer<UInt8>, _ count: Int, into output: UnsafeMutableRawBufferPointer)
            -> InflateStep
        {
            var consumed: UInt32 = 0
            var produced: UInt32 = 0
            var ended: Int32 = 0
            // ISA-L counts in 32 bits; a reader's buffers are far smaller.
            let status = ckport_isal_inflate(
                state, input, UInt32(min(count, Int(UInt32.max))),
                output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                UInt32(min(output.count, Int(UInt32.max))), &consumed, &produced, &ended)
            var step = InflateStep(consumed: Int(consumed), produced: Int(produced), memberEnded: ended != 0)
            switch status {
            case ISAL_DECOMP_OK, ISAL_END_INPUT, ISAL_OUT_OVERFLOW:
                break
            case ISAL_INVALID_BLOCK:
                step.problem = .damaged("invalid block")
            case ISAL_INVALID_SYMBOL:
                step.problem = .damaged("invalid code")
            case ISAL_INVALID_LOOKBACK:
                step.problem = .damaged("invalid distance too far back")
            case ISAL_INVALID_WRAPPER, CKPORT_ISAL_HEADER_CHECKSUM:
                step.problem = .damaged("incorrect header check")
            case ISAL_UNSUPPORTED_METHOD:
                step.problem = .damaged("unknown compression method")
            case ISAL_INCORRECT_CHECKSUM:
                step.problem = .damaged("incorrect data check (CRC-32 or length)")
            default:
                step.problem = .failed("ISA-L reported error \(status)")
            }
            if step.problem != nil { step.memberEnded = false }
            return step
        }

        func nextMember() { ckport_isal_gzip_reset(state) }
    }
#endif
