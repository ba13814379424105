import Foundation
import Records

/// A file or standard input read in large chunks, with line and column tracking.
///
/// Readers take lines (JSON Lines, CSV) or balanced JSON values from it without ever holding
/// more than the current chunk and the item being read, so memory stays flat at any file size.
public final class ByteInput {
    public let name: String
    private let fd: Int32
    private let ownsDescriptor: Bool
    /// The bytes read and not yet dropped, in memory this object owns. A raw buffer rather
    /// than an array: readers index it byte by byte, and an array would be retained and
    /// checked for exclusive access on every byte.
    private(set) var buffer: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    /// Bytes before `position` are consumed.
    var position = 0
    /// Bytes from `end` on are not read yet.
    var end = 0
    private(set) var atEOF = false
    /// Absolute offset of `buffer[0]` in the input.
    private(set) var bufferOffset: Int64 = 0
    public let totalBytes: Int64?
    private let chunkSize: Int
    /// Where the bytes come from when not a file descriptor (a member of an archive).
    private let reader: ((UnsafeMutableRawBufferPointer) throws -> Int)?

    /// Opens a file, or standard input for `-`.
    public init(path: String, chunkSize: Int = 1 << 20) throws {
        self.chunkSize = chunkSize
        reader = nil
        capacity = chunkSize
        buffer = .allocate(capacity: capacity)
        if path == "-" {
            name = "<stdin>"
            fd = 0
            ownsDescriptor = false
            totalBytes = nil
        } else {
            name = path
            fd = open(path, O_RDONLY)
            guard fd >= 0 else {
                buffer.deallocate()
                throw InputIssue(
                    position: SourcePosition(file: path), message: "cannot open: \(String(cString: strerror(errno)))")
            }
            ownsDescriptor = true
            var info = stat()
            if fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR {
                close(fd)
                buffer.deallocate()
                throw InputIssue(position: SourcePosition(file: path), message: "is a directory, not a file")
            }
            totalBytes = (info.st_mode & S_IFMT) == S_IFREG ? Int64(info.st_size) : nil
        }
    }

    /// Reads from bytes in memory (for tests and small inputs).
    public init(name: String, bytes: [UInt8]) {
        self.name = name
        reader = nil
        fd = -1
        ownsDescriptor = false
        capacity = max(bytes.count, 1)
        buffer = .allocate(capacity: capacity)
        buffer.initialize(from: bytes, count: bytes.count)
        end = bytes.count
        atEOF = true
        totalBytes = Int64(bytes.count)
        chunkSize = capacity
    }

    /// Reads from a stream: `read` fills the buffer and returns how many bytes it gave, 0 at the end.
    public init(
        name: String, totalBytes: Int64?, chunkSize: Int = 1 << 20,
        read: @escaping (UnsafeMutableRawBufferPointer) throws -> Int
    ) {
        self.name = name
        self.chunkSize = chunkSize
        capacity = chunkSize
        buffer = .allocate(capacity: capacity)
        fd = -1
        ownsDescriptor = false
        self.totalBytes = totalBytes
        reader = read
    }

    deinit {
        if ownsDescriptor { close(fd) }
        buffer.deallocate()
    }

    /// Bytes consumed so far.
    public var bytesRead: Int64 { bufferOffset + Int64(position) }

    @inline(__always) subscript(index: Int) -> UInt8 { buffer[index] }

    /// A view of `start..<stop`, valid until the next `fill()`.
    @inline(__always) func bytes(_ start: Int, _ stop: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: buffer + start, count: stop - start)
    }

    /// A copy of `start..<stop`.
    func copy(_ start: Int, _ stop: Int) -> [UInt8] {
        Array(UnsafeBufferPointer(start: buffer + start, count: stop - start))
    }

    /// Reads more input after `end`, first moving the unconsumed bytes to the front.
    /// Returns false at the end of the input.
    func fill() throws -> Bool {
        guard !atEOF else { return false }
        if position > 0 {
            let remaining = end - position
            if remaining > 0 { (buffer).update(from: buffer + position, count: remaining) }
            bufferOffset += Int64(position)
            end = remaining
            position = 0
        }
        if capacity - end < chunkSize / 2 {
            // An item larger than the buffer: grow it.
            let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity * 2)
            grown.update(from: buffer, count: end)
            buffer.deallocate()
            buffer = grown
            capacity *= 2
        }
        var count: Int
        if let reader {
            count = try reader(UnsafeMutableRawBufferPointer(start: buffer + end, count: capacity - end))
        } else {
            repeat {
                count = read(fd, buffer + end, capacity - end)
            } while count < 0 && errno == EINTR
        }
        if count < 0 {
            throw InputIssue(
                position: SourcePosition(file: name), message: "read failed: \(String(cString: strerror(errno)))")
        }
        if count == 0 {
            atEOF = true
            return false
        }
        end += count
        return true
    }

    /// The longest line ``nextLine()`` hands out: no record under CloudKit's 1 MB limit needs
    /// more, even with every character escaped.
    public static let maximumLineBytes = 8 << 20

    /// The length of the last line ``nextLine()`` passed over because it was longer than
    /// ``maximumLineBytes`` (it then returned an empty line); nil after a line it returned.
    public private(set) var overlongLine: Int64?

    /// The next line without its line ending (LF or CRLF), or nil at the end of the input.
    /// The bytes stay valid until the next call. A line longer than ``maximumLineBytes`` is
    /// skipped as it is read, never held whole: the result is then empty and ``overlongLine``
    /// says how long the line was.
    public func nextLine() throws -> UnsafeRawBufferPointer? {
        overlongLine = nil
        var searchFrom = position
        var skipped: Int64 = 0
        while true {
            if searchFrom < end, let hit = memchr(buffer + searchFrom, 0x0A, end - searchFrom) {
                let newline = UnsafeMutableRawPointer(buffer).distance(to: hit)
                let start = position
                position = newline + 1
                if skipped > 0 {
                    overlongLine = skipped + Int64(newline - start)
                    return bytes(newline, newline)
                }
                var stop = newline
                if stop > start && buffer[stop - 1] == 0x0D { stop -= 1 }
                return bytes(start, stop)
            }
            if end - position > ByteInput.maximumLineBytes {
                // Drop what is buffered and keep looking for the line's end.
                skipped += Int64(end - position)
                position = end
            }
            let scanned = end - position
            if try !fill() {
                if skipped > 0 {
                    overlongLine = skipped + Int64(end - position)
                    position = end
                    return bytes(end, end)
                }
                guard position < end else { return nil }
                let start = position
                position = end
                var stop = end
                if stop > start && buffer[stop - 1] == 0x0D { stop -= 1 }
                return bytes(start, stop)
            }
            searchFrom = position + scanned
        }
    }
}

extension UnsafeRawBufferPointer {
    /// Line and column (1-based, columns counted in characters) of a byte offset, counting
    /// from a starting line and column.
    func position(of offset: Int, startLine: Int, startColumn: Int) -> (line: Int, column: Int) {
        var line = startLine
        var column = startColumn
        var i = 0
        while i < Swift.min(offset, count) {
            let b = self[i]
            if b == 0x0A {
                line += 1
                column = 1
            } else if b & 0xC0 != 0x80 {
                column += 1
            }
            i += 1
        }
        return (line, column)
    }
}
