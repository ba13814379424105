import Foundation
import Records
import StoreCore

/// What a CSV export writes.
public struct CSVWriteOptions: Sendable {
    public var dialect: CSVDialect
    public var values: CSVValues
    /// The fields to write, in this order; nil writes every field in schema order.
    public var fields: [String]?
    /// Add the system columns (scope, zone, owner, change tag, created and modified, parent, share
    /// and a share's details).
    public var includeSystem: Bool

    public init(
        dialect: CSVDialect = .csv, values: CSVValues = CSVValues(), fields: [String]? = nil,
        includeSystem: Bool = false
    ) {
        self.dialect = dialect
        self.values = values
        self.fields = fields
        self.includeSystem = includeSystem
    }
}

/// Writes the records of one type as CSV, streaming: a header row, then a row per record.
/// A missing value is an empty unquoted cell and an empty string is `""`, as PostgreSQL's
/// CSV COPY keeps them apart.
public final class CSVRecordWriter: RecordSink, RowWriting {
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
            throw OutputError(
                path: output.path,
                message:
                    "a CSV file holds one record type (\(recordType)); record '\(record.recordName)' is a \(record.recordType)"
            )
        }
        if record.isDeleted {
            throw OutputError(
                path: output.path,
                message: "CSV has no place for deleted records ('\(record.recordName)'); export changes as JSON")
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
            case .parentRecordName: return record.parent
            case .shareRecordName: return record.share
            case .shareDetails: return record.shareDetails
            }
        case .ignored: return nil
        }
    }

    /// Writes the rows `query` selects (records of this writer's type) straight from the
    /// store's tables: the bytes ``write(_:)`` writes for the same records, without building
    /// them (``RowReading/canReadRows(_:)`` must have said yes). `written` hears the count
    /// after each row. Returns how many rows were written.
    public func writeRows(of session: any RowReading, _ query: RecordQuery, written: ((Int) -> Void)? = nil) throws
        -> Int
    {
        if !headerWritten { writeHeader() }
        // The buffer is worked on as a local: a class's stored property is checked for
        // exclusive access at every append.
        var out: [UInt8] = []
        swap(&out, &buffer)
        defer { swap(&out, &buffer) }
        var sources: [CellSource]?
        var scratch: [UInt8] = []
        var count = 0
        try session.forEachRow(query) { row in
            if sources == nil {
                sources = columns.map { CellSource($0, in: row) }
            }
            for (index, source) in sources!.enumerated() {
                appendCell(source, of: row, first: index == 0, scratch: &scratch, to: &out)
            }
            rows.endRow(&out)
            count += 1
            if out.count >= 1 << 18 {
                try output.write(out)
                out.removeAll(keepingCapacity: true)
            }
            written?(count)
        }
        recordsWritten += count
        return count
    }

    /// Where a column's cell comes from in a row, worked out once per export.
    private enum CellSource {
        case recordName, recordType
        case field(position: Int, isText: Bool)
        case action(position: Int)
        case system(CSVSystemColumn)
        case none

        init(_ column: CSVColumn, in row: any StoredRow) {
            switch column {
            case .recordName: self = .recordName
            case .recordType: self = .recordType
            case .field(let name, let type):
                self =
                    row.position(ofField: name).map { .field(position: $0, isText: CSVColumn.field(name, type).isText) }
                    ?? .none
            case .referenceAction(let name): self = row.position(ofField: name).map { .action(position: $0) } ?? .none
            case .system(let system), .escapedSystem(let system): self = .system(system)
            case .assetSize, .ignored: self = .none
            }
        }
    }

    private func appendCell(
        _ source: CellSource, of row: any StoredRow, first: Bool, scratch: inout [UInt8], to out: inout [UInt8]
    ) {
        switch source {
        case .recordName: appendText(row.recordName, text: true, first: first, to: &out)
        case .recordType: rows.appendCell(recordType, text: true, first: first, to: &out)
        case .field(let position, let isText):
            switch row.value(at: position) {
            case nil: rows.appendCell(nil, text: isText, first: first, to: &out)
            case .text(let utf8)?: appendText(utf8, text: isText, first: first, to: &out)
            case .reference(let utf8, _)?: appendText(utf8, text: isText, first: first, to: &out)
            case .int64(let value)?: rows.appendCell(String(value), text: isText, first: first, to: &out)
            case .double(let value)?:
                rows.appendCell(options.values.cell(.double(value)), text: isText, first: first, to: &out)
            case .timestamp(let ms)?: appendTimestamp(ms, first: first, scratch: &scratch, to: &out)
            case .bytes(let raw)?:
                scratch.removeAll(keepingCapacity: true)
                Base64.append(Array(raw), to: &scratch)
                scratch.withUnsafeBufferPointer { rows.appendCell(utf8: $0, text: isText, first: first, to: &out) }
            }
        case .action(let position):
            if case .reference(_, let action)? = row.value(at: position) {
                rows.appendCell(action.rawValue, text: false, first: first, to: &out)
            } else {
                rows.appendCell(nil, text: false, first: first, to: &out)
            }
        case .system(let system):
            switch system {
            case .scope: rows.appendCell(row.zone.scope.rawValue, text: true, first: first, to: &out)
            case .zoneName: rows.appendCell(row.zone.zoneName, text: true, first: first, to: &out)
            case .ownerRecordName: rows.appendCell(row.zone.ownerRecordName, text: true, first: first, to: &out)
            case .recordChangeTag: appendText(row.changeTag, text: true, first: first, to: &out)
            case .created, .modified:
                if let stamp = row.stamp(modified: system == .modified) {
                    appendTimestamp(stamp.timestamp, first: first, scratch: &scratch, to: &out)
                } else {
                    rows.appendCell(nil, text: false, first: first, to: &out)
                }
            case .createdBy, .modifiedBy:
                appendText(row.stamp(modified: system == .modifiedBy)?.user, text: true, first: first, to: &out)
            case .createdDevice, .modifiedDevice:
                appendText(row.stamp(modified: system == .modifiedDevice)?.device, text: true, first: first, to: &out)
            case .parentRecordName: appendText(row.parent, text: true, first: first, to: &out)
            case .shareRecordName: appendText(row.share, text: true, first: first, to: &out)
            case .shareDetails: appendText(row.shareDetails, text: true, first: first, to: &out)
            }
        case .none:
            rows.appendCell(nil, text: false, first: first, to: &out)
        }
    }

    /// A text column's cell: its bytes as they are when they are UTF-8 (what ckport stores),
    /// else through a String, which repairs them as the record path does.
    private func appendText(_ utf8: UnsafeBufferPointer<UInt8>?, text: Bool, first: Bool, to out: inout [UInt8]) {
        guard let utf8 else { return rows.appendCell(nil, text: text, first: first, to: &out) }
        if UTF8Validation.firstInvalidOffset(utf8) == nil {
            rows.appendCell(utf8: utf8, text: text, first: first, to: &out)
        } else {
            rows.appendCell(String(decoding: utf8, as: UTF8.self), text: text, first: first, to: &out)
        }
    }

    private func appendTimestamp(_ ms: Int64, first: Bool, scratch: inout [UInt8], to out: inout [UInt8]) {
        scratch.removeAll(keepingCapacity: true)
        let offset =
            options.values.timeZone.map { $0.secondsFromGMT(for: Date(timeIntervalSince1970: Double(ms) / 1000)) } ?? 0
        ISO8601.append(milliseconds: ms, offsetSeconds: offset, to: &scratch)
        scratch.withUnsafeBufferPointer { rows.appendCell(utf8: $0, text: false, first: first, to: &out) }
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
