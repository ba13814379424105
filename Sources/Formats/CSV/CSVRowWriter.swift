/// Writes CSV rows (RFC 4180): a cell is quoted when it holds the delimiter, a quote, CR or LF,
/// starts or ends with a space, or is the empty string (an unquoted empty cell means "no
/// value"); quotes inside are doubled.
public struct CSVRowWriter: Sendable {
    public var dialect: CSVDialect

    public init(dialect: CSVDialect) {
        self.dialect = dialect
    }

    /// Appends one cell; nil is a missing value. `text` says whether the cell holds text that
    /// a spreadsheet could take for a formula (numbers and dates are left alone).
    public func appendCell(_ value: String?, text: Bool, first: Bool, to out: inout [UInt8]) {
        guard var value else {
            if !first { out.append(dialect.delimiter) }
            return
        }
        value.withUTF8 { appendCell(utf8: $0, text: text, first: first, to: &out) }
    }

    /// Appends one cell holding the text of `utf8` (valid UTF-8).
    public func appendCell(utf8: UnsafeBufferPointer<UInt8>, text: Bool, first: Bool, to out: inout [UInt8]) {
        if !first { out.append(dialect.delimiter) }
        guard let firstByte = utf8.first else {
            out.append(0x22)
            out.append(0x22)
            return
        }
        let guardFormula = dialect.spreadsheetSafe && text && CSVDialect.startsFormula(firstByte)
        var needsQuotes = firstByte == 0x20 || utf8[utf8.count - 1] == 0x20
        if !needsQuotes {
            let delimiter = dialect.delimiter
            needsQuotes = utf8.contains { $0 == delimiter || $0 == 0x22 || $0 == 0x0A || $0 == 0x0D }
        }
        if !needsQuotes {
            if guardFormula { out.append(UInt8(ascii: "'")) }
            out.append(contentsOf: utf8)
            return
        }
        out.append(0x22)
        if guardFormula { out.append(UInt8(ascii: "'")) }
        for b in utf8 {
            if b == 0x22 { out.append(0x22) }
            out.append(b)
        }
        out.append(0x22)
    }

    public func endRow(_ out: inout [UInt8]) {
        if dialect.crlf { out.append(0x0D) }
        out.append(0x0A)
    }
}
