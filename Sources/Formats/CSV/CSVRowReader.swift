import Records

/// One cell of a CSV row, with where it starts.
public struct CSVCell: Sendable, Hashable {
    public var text: String
    /// Quoted cells can hold the empty string; an unquoted empty cell is a missing value.
    public var quoted: Bool
    public var line: Int
    /// 1-based character column of the cell's first character on its line.
    public var column: Int

    public var isNull: Bool { text.isEmpty && !quoted }
}

/// Splits CSV text into rows of cells (RFC 4180), streaming.
///
/// Quoted cells may hold delimiters, doubled quotes and line breaks; rows end with CRLF, LF or
/// CR; a byte order mark at the start and a missing final line end are fine; blank lines are
/// skipped. A stray character after a closing quote, an unclosed quote or text that is not
/// UTF-8 is an error naming the line and column.
public final class CSVRowReader {
    let input: ByteInput
    public var delimiter: UInt8
    private var line = 1
    private var startedFile = false
    /// The bytes of the last row read, for a rejects file.
    public private(set) var lastRowBytes: [UInt8] = []

    public init(input: ByteInput, delimiter: UInt8) {
        self.input = input
        self.delimiter = delimiter
    }

    public var name: String { input.name }

    private func fail(_ message: Message, line: Int, column: Int) -> InputIssue {
        InputIssue(position: SourcePosition(file: input.name, line: line, column: column), message: message)
    }

    /// Makes `input[input.position + offset]` readable; false at the end of the input.
    @inline(__always) private func ensure(_ offset: Int) throws -> Bool {
        while input.position + offset >= input.end {
            if try !input.fill() { return false }
        }
        return true
    }

    @inline(__always) private func byte(_ offset: Int) -> UInt8 {
        input[input.position + offset]
    }

    /// Looks at the start of the input to choose a delimiter: the candidate appearing most often
    /// outside quotes on the first line (a comma when none does).
    public func sniffDelimiter() throws -> UInt8 {
        try skipByteOrderMark()
        var counts: [UInt8: Int] = [:]
        var offset = 0
        var inQuotes = false
        while try ensure(offset) {
            let b = byte(offset)
            if b == UInt8(ascii: "\"") { inQuotes.toggle() }
            if !inQuotes && (b == 0x0A || b == 0x0D) { break }
            if !inQuotes && CSVDialect.candidates.contains(b) { counts[b, default: 0] += 1 }
            offset += 1
            if offset > 1 << 20 { break }
        }
        return CSVDialect.candidates.max { (counts[$0] ?? 0) < (counts[$1] ?? 0) }.flatMap {
            counts[$0] == nil ? nil : $0
        } ?? UInt8(ascii: ",")
    }

    private func skipByteOrderMark() throws {
        guard !startedFile else { return }
        startedFile = true
        if try ensure(2), byte(0) == 0xEF, byte(1) == 0xBB, byte(2) == 0xBF { input.position += 3 }
    }

    /// The next row, or nil at the end of the input.
    public func nextRow() throws -> [CSVCell]? {
        try skipByteOrderMark()
        // Skip blank lines.
        while true {
            guard try ensure(0) else { return nil }
            let b = byte(0)
            if b == 0x0A {
                input.position += 1
                line += 1
            } else if b == 0x0D {
                input.position += 1
                if try ensure(0), byte(0) == 0x0A { input.position += 1 }
                line += 1
            } else {
                break
            }
        }
        // The scan works on locals: properties of a class are checked for exclusive access on
        // every read, which would cost more than the scan itself.
        var scan = Scan(base: input.buffer, start: input.position, end: input.end)
        let delimiter = self.delimiter
        var cells: [CSVCell] = []
        cells.reserveCapacity(16)
        var column = 1
        var currentLine = line
        while true {
            let cellLine = currentLine
            let cellColumn = column
            var text: String
            var quoted = false
            if try scan.has(0, refill: refill), scan[0] == UInt8(ascii: "\"") {
                quoted = true
                scan.offset += 1
                column += 1
                var content: [UInt8] = []
                while true {
                    guard try scan.has(0, refill: refill) else {
                        throw fail(
                            "a quoted cell is not closed: expected '\"' before the end of the file", line: cellLine,
                            column: cellColumn)
                    }
                    let b = scan[0]
                    if b == UInt8(ascii: "\"") {
                        if try scan.has(1, refill: refill), scan[1] == UInt8(ascii: "\"") {
                            content.append(b)
                            scan.offset += 2
                            column += 2
                            continue
                        }
                        scan.offset += 1
                        column += 1
                        break
                    }
                    content.append(b)
                    scan.offset += 1
                    if b == 0x0A {
                        currentLine += 1
                        column = 1
                    } else if b == 0x0D {
                        if !(try scan.has(0, refill: refill) && scan[0] == 0x0A) {
                            currentLine += 1
                            column = 1
                        }
                    } else if b & 0xC0 != 0x80 {
                        column += 1
                    }
                }
                guard let decoded = content.withUnsafeBytes({ UTF8Validation.string($0) }) else {
                    throw fail("a cell is not valid UTF-8", line: cellLine, column: cellColumn)
                }
                text = decoded
                if try scan.has(0, refill: refill) {
                    let next = scan[0]
                    if next != delimiter && next != 0x0A && next != 0x0D {
                        throw fail(
                            "unexpected '\(Character(UnicodeScalar(next)))' after a closing quote (a quote inside a quoted cell is written twice: \"\")",
                            line: currentLine, column: column)
                    }
                }
            } else {
                let start = scan.offset
                while try scan.has(0, refill: refill) {
                    let b = scan[0]
                    if b == delimiter || b == 0x0A || b == 0x0D { break }
                    if b & 0xC0 != 0x80 { column += 1 }
                    scan.offset += 1
                }
                guard
                    let decoded = UTF8Validation.string(
                        UnsafeRawBufferPointer(start: scan.base + scan.start + start, count: scan.offset - start))
                else {
                    throw fail("a cell is not valid UTF-8", line: cellLine, column: cellColumn)
                }
                text = decoded
            }
            cells.append(CSVCell(text: text, quoted: quoted, line: cellLine, column: cellColumn))
            guard try scan.has(0, refill: refill) else { break }
            let b = scan[0]
            if b == delimiter {
                scan.offset += 1
                column += 1
                continue
            }
            if b == 0x0D {
                scan.offset += 1
                if try scan.has(0, refill: refill), scan[0] == 0x0A { scan.offset += 1 }
            } else if b == 0x0A {
                scan.offset += 1
            }
            currentLine += 1
            break
        }
        lastRowBytes = Array(UnsafeBufferPointer(start: scan.base + scan.start, count: scan.offset))
        input.position = scan.start + scan.offset
        line = currentLine
        return cells
    }

    /// Reads more input; the scan's view moves with the buffer.
    private func refill(_ scan: inout Scan) throws -> Bool {
        input.position = scan.start
        let more = try input.fill()
        scan.base = input.buffer
        scan.start = input.position
        scan.end = input.end
        return more
    }

    /// A row being scanned: bytes `start + offset` of `base`, readable up to `end`.
    struct Scan {
        var base: UnsafeMutablePointer<UInt8>
        var start: Int
        var end: Int
        var offset = 0

        init(base: UnsafeMutablePointer<UInt8>, start: Int, end: Int) {
            self.base = base
            self.start = start
            self.end = end
        }

        @inline(__always) subscript(ahead: Int) -> UInt8 { base[start + offset + ahead] }

        /// Whether the byte `ahead` of the offset can be read, reading more input when needed.
        @inline(__always) mutating func has(_ ahead: Int, refill: (inout Scan) throws -> Bool) throws -> Bool {
            while start + offset + ahead >= end {
                if try !refill(&self) { return false }
            }
            return true
        }
    }
}
