import Foundation
import Records

/// How CSV files are read, beyond what every reader is told (schema, default type and zone,
/// time zone).
public struct CSVReadSettings: Sendable {
    /// The cell delimiter; nil: sniffed from the header (a tab for TSV).
    public var delimiter: UInt8?
    /// Take off the `'` a spreadsheet-safe export put before formula-like text.
    public var spreadsheetSafe: Bool
    /// Header → field, for columns named otherwise than their fields.
    public var columnMap: [String: String]
    /// Let columns that are not fields pass instead of refusing the file.
    public var ignoreUnknownColumns: Bool
    /// Record names made from fields, for rows without recordName.
    public var nameTemplate: NameTemplate?

    public init(
        delimiter: UInt8? = nil, spreadsheetSafe: Bool = false, columnMap: [String: String] = [:],
        ignoreUnknownColumns: Bool = false, nameTemplate: NameTemplate? = nil
    ) {
        self.delimiter = delimiter
        self.spreadsheetSafe = spreadsheetSafe
        self.columnMap = columnMap
        self.ignoreUnknownColumns = ignoreUnknownColumns
        self.nameTemplate = nameTemplate
    }
}

extension RecordFormat {
    /// Comma-separated values, one record type per file, RFC 4180.
    public static let csv = CSVFormatSupport.format(tab: false)
    /// Tab-separated values.
    public static let tsv = CSVFormatSupport.format(tab: true)
}

enum CSVFormatSupport {
    static func format(tab: Bool) -> RecordFormat {
        RecordFormat(
            names: [tab ? "tsv" : "csv"], extensions: [tab ? "tsv" : "csv"],
            title: tab ? "TSV" : "CSV",
            summary: tab ? "tab-separated values, a record type per file" : "a record type per file", noun: "CSV",
            oneRecordTypePerFile: true,
            sniff: { head in
                let line = Sniffing.firstLine(head)
                guard let first = Sniffing.firstSignificantByte(Array(line)), first != UInt8(ascii: "{"),
                    first != UInt8(ascii: "["),
                    !line.starts(with: Array("BEGIN:".utf8))
                else { return false }
                let tabs = line.filter { $0 == 0x09 }.count
                let commas = line.filter { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: ";") }.count
                return tab ? tabs > 0 && tabs >= commas : commas > 0 && commas > tabs
            },
            makeReader: { input, context in
                let settings = context.settings.get(CSVReadSettings.self, default: CSVReadSettings())
                let options = CSVReadOptions(
                    delimiter: settings.delimiter ?? (tab ? 0x09 : nil), spreadsheetSafe: settings.spreadsheetSafe,
                    values: CSVValues(timeZone: context.timeZone), defaultRecordType: context.defaultRecordType,
                    defaultZone: context.defaultZone, columnMap: settings.columnMap,
                    ignoreUnknownColumns: settings.ignoreUnknownColumns, allowNewFields: context.allowNewFields,
                    nameTemplate: settings.nameTemplate)
                return CSVRecordReader(input: try input.open(), schema: context.schema, options: options)
            },
            makeWriter: { output, context in
                guard let type = context.recordType else {
                    throw ValueError("a CSV file holds one record type: name it")
                }
                var options = context.settings[CSVWriteOptions.self] ?? CSVWriteOptions(dialect: tab ? .tsv : .csv)
                if context.settings[CSVWriteOptions.self] == nil {
                    options.values = CSVValues(timeZone: context.timeZone)
                }
                return try CSVRecordWriter(output: output, type: type, options: options)
            })
    }
}
