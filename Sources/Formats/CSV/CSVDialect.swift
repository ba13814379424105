/// How a CSV file is laid out: RFC 4180 by default (comma, CRLF, double quotes).
public struct CSVDialect: Sendable, Hashable {
    /// The cell separator: `,` by default, `;` for many European spreadsheets, tab for TSV.
    public var delimiter: UInt8
    /// Row ends written: CRLF (RFC 4180) or LF. Reading accepts CRLF, LF and CR alike.
    public var crlf: Bool
    /// Start the file with a UTF-8 byte order mark, which Excel needs to read UTF-8.
    public var byteOrderMark: Bool
    /// Guard against spreadsheet formulas: text cells starting with `=`, `+`, `-`, `@`, tab or
    /// CR are written with a leading `'`, and read back without it.
    public var spreadsheetSafe: Bool

    public init(
        delimiter: UInt8 = UInt8(ascii: ","), crlf: Bool = true, byteOrderMark: Bool = false,
        spreadsheetSafe: Bool = false
    ) {
        self.delimiter = delimiter
        self.crlf = crlf
        self.byteOrderMark = byteOrderMark
        self.spreadsheetSafe = spreadsheetSafe
    }

    public static let csv = CSVDialect()
    public static let tsv = CSVDialect(delimiter: 0x09)

    /// The delimiters sniffing chooses among, most likely first.
    static let candidates: [UInt8] = [UInt8(ascii: ","), UInt8(ascii: ";"), 0x09, UInt8(ascii: "|")]

    /// The first characters that make a spreadsheet run a cell as a formula.
    static func startsFormula(_ first: UInt8) -> Bool {
        first == UInt8(ascii: "=") || first == UInt8(ascii: "+") || first == UInt8(ascii: "-")
            || first == UInt8(ascii: "@")
            || first == 0x09 || first == 0x0D
    }
}
