import Foundation
import Records

/// What a CSV export writes.
public struct CSVWriteOptions: Sendable {
    public var dialect: CSVDialect
    public var values: CSVValues
    /// The fields to write, in this order; nil writes every field in schema order.
    public var fields: [String]?
    /// Add the system columns (scope, zone, owner, change tag, created and modified).
    public var includeSystem: Bool

    public init(dialect: CSVDialect = .csv, values: CSVValues = CSVValues(), fields: [String]? = nil, includeSystem: Bool = false) {
        self.dialect = dialect
        self.values = values
        self.fields = fields
        self.includeSystem = includeSystem
    }
}

/// Writes the records of one type as CSV, streaming: a header row, then a row per record.
/// A missing value is an empty unquoted cell and an empty string is `""`, as PostgreSQL's
/// CSV COPY keeps them apart.
public final class CSVRecordWriter: RecordSink {
    private let output: OutputFile
    private let recordType: String
    private let columns: [CSVColumn]
    private let options: CSVWriteOptions
    private let rows: CSVRowWriter
    private var buffer: [UInt8] = []
    private var headerWritten = false
    public private(set) var recordsWritten = 0

    public init(output: OutputFile, type: RecordTypeDefinition, options: CSVWriteOptions) throws(ValueError) {
        self.output = output
        recordType = type.name
        self.options = options
        columns = try CSVLayout.columns(for: type, fields: options.fields, system: options.includeSystem)
        rows = CSVRowWriter(dialect: options.dialect)
        buffer.reserveCapacity(1 << 16)
    }

    private func writeHeader() {
        headerWritten = true
        if options.dialect.byteOrderMark { buffer += [0xEF, 0xBB, 0xBF] }
        for (index, column) in columns.enumerated() {
            rows.appendCell(column.header, text: false, first: index == 0, to: &buffer)
        }
        rows.endRow(&buffer)
    }

    public func write(_ record: Record) throws {
        guard record.recordType == recordType else {
            throw OutputError(path: output.path, message: "a CSV file holds one record type (\(recordType)); record '\(record.recordName)' is a \(record.recordType)")
        }
        if record.isDeleted {
            throw OutputError(path: output.path, message: "CSV has no place for deleted records ('\(record.recordName)'); export changes as JSON")
        }
        if !headerWritten { writeHeader() }
        for (index, column) in columns.enumerated() {
            rows.appendCell(cell(column, of: record), text: column.isText, first: index == 0, to: &buffer)
        }
        rows.endRow(&buffer)
        recordsWritten += 1
        if buffer.count >= 1 << 18 {
            try output.write(buffer)
            buffer.removeAll(keepingCapacity: true)
        }
    }

    private func cell(_ column: CSVColumn, of record: Record) -> String? {
        switch column {
        case .recordName: return record.recordName
        case .recordType: return record.recordType
        case .field(let name, _): return record.fields[name].map(options.values.cell)
        case .referenceAction(let name):
            if case .reference(let r)? = record.fields[name] { return r.action.rawValue }
            return nil
        case .assetSize(let name):
            if case .asset(let a)? = record.fields[name], options.values.isPlainAsset(a) { return String(a.size) }
            return nil
        case .system(let system), .escapedSystem(let system):
            switch system {
            case .scope: return record.zone.scope.rawValue
            case .zoneName: return record.zone.zoneName
            case .ownerRecordName: return record.zone.ownerRecordName
            case .recordChangeTag: return record.changeTag
            case .created: return record.created.map { options.values.cell(.timestamp($0.timestamp)) }
            case .createdBy: return record.created?.userRecordName
            case .createdDevice: return record.created?.deviceID
            case .modified: return record.modified.map { options.values.cell(.timestamp($0.timestamp)) }
            case .modifiedBy: return record.modified?.userRecordName
            case .modifiedDevice: return record.modified?.deviceID
            }
        case .ignored: return nil
        }
    }

    public func finish() throws {
        if !headerWritten { writeHeader() }
        try output.write(buffer)
        buffer.removeAll()
        try output.commit()
    }

    public func discard() {
        output.discard()
    }
}
