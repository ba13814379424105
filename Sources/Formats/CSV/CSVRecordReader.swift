import Foundation
import Records

/// How a CSV import reads its file.
public struct CSVReadOptions: Sendable {
    /// The delimiter; nil sniffs it from the header.
    public var delimiter: UInt8?
    /// Take a leading `'` off text cells that start with `'=`, `'+`, `'-`, `'@`: the guard a
    /// `--spreadsheet-safe` export adds.
    public var spreadsheetSafe: Bool
    public var values: CSVValues
    /// Type for rows when there is no `recordType` column (or its cell is empty).
    public var defaultRecordType: String?
    /// Zone and scope for rows without system columns.
    public var defaultZone: ZoneID
    /// Header renames: `"Due date": "dueDate"`.
    public var columnMap: [String: String]
    /// Let columns the schema does not know pass, instead of refusing the file.
    public var ignoreUnknownColumns: Bool
    /// Take unknown columns as new STRING fields (with the import's `--allow-new-fields`).
    public var allowNewFields: Bool
    /// Names for rows without a `recordName`; nil gives them random UUIDs.
    public var nameTemplate: NameTemplate?

    public init(
        delimiter: UInt8? = nil, spreadsheetSafe: Bool = false, values: CSVValues = CSVValues(),
        defaultRecordType: String? = nil,
        defaultZone: ZoneID = .defaultZone, columnMap: [String: String] = [:], ignoreUnknownColumns: Bool = false,
        allowNewFields: Bool = false, nameTemplate: NameTemplate? = nil
    ) {
        self.delimiter = delimiter
        self.spreadsheetSafe = spreadsheetSafe
        self.values = values
        self.defaultRecordType = defaultRecordType
        self.defaultZone = defaultZone
        self.columnMap = columnMap
        self.ignoreUnknownColumns = ignoreUnknownColumns
        self.allowNewFields = allowNewFields
        self.nameTemplate = nameTemplate
    }
}

/// Reads records from CSV, typed by the schema, streaming.
///
/// The header names the columns: `recordName`, `recordType`, the system columns, fields, and
/// the `field:action` / `field:size` companions. A row whose cells do not parse comes back as
/// an invalid item naming the line, the column, the field, the expected type and the value.
public final class CSVRecordReader: RecordSource {
    private let rows: CSVRowReader
    private let schema: Schema
    private let options: CSVReadOptions
    private var header: [CSVCell]?
    private var headerNames: [String] = []
    private var layouts: [String: [CSVColumn?]] = [:]
    private var lastLayout: (type: String, columns: [CSVColumn?])?
    private var typeColumn: Int?
    /// No zone columns (zoneName, scope and ownerRecordName): every row is given the zone, or
    /// the part of it, that records naming none get.
    private var namesNoZone = true
    /// Companion cells of the current row, kept between rows so their storage is reused.
    private var actions: [(field: String, action: ReferenceAction)] = []
    private var sizes: [(field: String, text: String, cell: CSVCell)] = []

    public init(input: ByteInput, schema: Schema, options: CSVReadOptions) {
        rows = CSVRowReader(input: input, delimiter: options.delimiter ?? UInt8(ascii: ","))
        self.schema = schema
        self.options = options
    }

    public var name: String { rows.name }
    public var bytesRead: Int64 { rows.input.bytesRead }
    public var totalBytes: Int64? { rows.input.totalBytes }

    private func readHeader() throws -> [CSVCell]? {
        if options.delimiter == nil { rows.delimiter = try rows.sniffDelimiter() }
        guard let cells = try rows.nextRow() else { return nil }
        var seen: [String: CSVCell] = [:]
        for cell in cells {
            let name = options.columnMap[cell.text] ?? cell.text
            if let first = seen[name] {
                throw InputIssue(
                    position: SourcePosition(file: rows.name, line: cell.line, column: cell.column),
                    message: "the header names column '\(name)' twice (first at column \(first.column))")
            }
            seen[name] = cell
            headerNames.append(name)
        }
        // A column the map renames must be in the header: a misspelt name would map nothing.
        let present = Set(cells.map(\.text))
        for source in options.columnMap.keys.sorted() where !present.contains(source) {
            throw InputIssue(
                position: SourcePosition(file: rows.name, line: cells.first?.line ?? 1, column: 1),
                message:
                    "the column map renames column '\(source)', which the header does not have (its columns: \(cells.map(\.text).joined(separator: ", ")))"
            )
        }
        typeColumn = headerNames.firstIndex(of: "recordType")
        // A zone is its scope, name and owner: a row that says fewer is given the rest.
        namesNoZone =
            !(headerNames.contains("zoneName") && headerNames.contains("scope")
            && headerNames.contains("ownerRecordName"))
        if typeColumn == nil && options.defaultRecordType == nil {
            throw InputIssue(
                position: SourcePosition(file: rows.name, line: cells.first?.line ?? 1, column: 1),
                message: "the rows' record type is unknown: \(Wording.giveRecordType), or add a recordType column")
        }
        if typeColumn == nil, let type = options.defaultRecordType {
            // One type for the whole file: check the header now, before any row.
            _ = try layout(for: type, header: cells)
        }
        return cells
    }

    /// The columns for records of `type`, or an error naming the first unknown column.
    private func layout(for typeName: String, header: [CSVCell]) throws -> [CSVColumn?] {
        if let known = layouts[typeName] { return known }
        let type = schema.recordType(named: typeName)
        if type == nil && !options.allowNewFields {
            // A type the schema lacks has no fields: say that, not that the first column is not one.
            let near =
                schema.recordTypes.first { $0.name.lowercased() == typeName.lowercased() }.map {
                    " (did you mean '\($0.name)'?)"
                } ?? ""
            let types = schema.recordTypes.map(\.name).filter { !$0.hasPrefix("cloudkit.") }.sorted().joined(
                separator: ", ")
            throw InputIssue(
                position: SourcePosition(file: rows.name, line: header.first?.line ?? 1, column: 1),
                recordType: typeName,
                message: "the schema has no record type '\(typeName)'\(near)"
                    + (types.isEmpty ? "" : "; its types: \(types)"))
        }
        var columns: [CSVColumn?] = []
        for (index, name) in headerNames.enumerated() {
            if let column = CSVLayout.resolve(name, in: type) {
                columns.append(column)
            } else if options.allowNewFields, Names.fieldNameProblem(name, recordType: typeName) == nil {
                columns.append(.field(name, .string))
            } else if options.ignoreUnknownColumns && options.columnMap[header[index].text] == nil {
                // Left out unless the column map sent it to a field: that field must exist.
                columns.append(.ignored)
            } else {
                let cell = header[index]
                let mapped = options.columnMap[cell.text] != nil
                let known = type.map { " (its fields: \($0.userFields.map(\.name).joined(separator: ", ")))" } ?? ""
                let remedy =
                    mapped
                    ? Wording.remapColumn(header: header[index].text) : Wording.mapColumn(header: header[index].text)
                throw InputIssue(
                    position: SourcePosition(file: rows.name, line: cell.line, column: cell.column),
                    recordType: typeName,
                    message:
                        "column '\(header[index].text)'\(mapped ? " (mapped to '\(name)')" : "") is not a field of \(typeName)\(known); \(remedy)"
                )
            }
        }
        layouts[typeName] = columns
        return columns
    }

    public func next() throws -> SourceItem? {
        if header == nil {
            guard let cells = try readHeader() else { return nil }
            header = cells
        }
        guard let cells = try rows.nextRow() else { return nil }
        let raw = rows.lastRowBytes
        let file = rows.name
        let rowLine = cells.first?.line ?? 0
        func issue(_ cell: CSVCell?, field: String?, name: String?, type: String?, _ message: Message) -> SourceItem {
            .invalid(
                InputIssue(
                    position: SourcePosition(file: file, line: cell?.line ?? rowLine, column: cell?.column ?? 1),
                    recordName: name, recordType: type, field: field, message: message), raw: raw)
        }
        guard cells.count == headerNames.count else {
            return issue(
                nil, field: nil, name: nil, type: nil,
                "line \(rowLine) has \(cells.count) cell\(cells.count == 1 ? "" : "s"), the header has \(headerNames.count)"
            )
        }
        let typeName: String
        if let typeColumn, !cells[typeColumn].text.isEmpty {
            typeName = cells[typeColumn].text
        } else if let fallback = options.defaultRecordType {
            typeName = fallback
        } else {
            return issue(typeColumn.map { cells[$0] }, field: nil, name: nil, type: nil, "the row names no record type")
        }
        let columns: [CSVColumn?]
        if let lastLayout, lastLayout.type == typeName {
            columns = lastLayout.columns
        } else {
            do {
                columns = try layout(for: typeName, header: header!)
            } catch let problem as InputIssue {
                // A row's own type the schema lacks is the row's problem, at its cell.
                var position = problem.position
                if let typeColumn, schema.recordType(named: typeName) == nil {
                    position = SourcePosition(
                        file: rows.name, line: cells[typeColumn].line, column: cells[typeColumn].column)
                }
                return .invalid(
                    InputIssue(position: position, recordType: typeName, message: problem.message), raw: raw)
            }
            lastLayout = (typeName, columns)
        }
        var record = Record(id: RecordID(recordName: "", zone: options.defaultZone), recordType: typeName)
        var recordName: String?
        actions.removeAll(keepingCapacity: true)
        sizes.removeAll(keepingCapacity: true)
        var createdStamp = RecordStamp(timestamp: 0)
        var modifiedStamp = RecordStamp(timestamp: 0)
        var hasCreated = false
        var hasModified = false
        var fields = RecordFields(minimumCapacity: columns.count)
        for (index, column) in columns.enumerated() {
            guard let column else { continue }
            let cell = cells[index]
            if cell.isNull { continue }
            var text = cell.text
            if options.spreadsheetSafe && column.isText, text.utf8.count >= 2, text.utf8.first == UInt8(ascii: "'"),
                CSVDialect.startsFormula(text.utf8.dropFirst().first!)
            {
                text.removeFirst()
            }
            switch column {
            case .recordName: recordName = text
            case .recordType, .ignored: break
            case .field(let name, let type):
                do {
                    if let value = try options.values.value(text, as: type) { _ = fields.insertNew(name, value) }
                } catch {
                    return issue(cell, field: name, name: recordName, type: typeName, error.message)
                }
            case .referenceAction(let name):
                guard let action = ReferenceAction(rawValue: text) ?? ReferenceAction(rawValue: text.uppercased())
                else {
                    return issue(
                        cell, field: name, name: recordName, type: typeName,
                        "expected a reference action (NONE, DELETE_SELF or VALIDATE), found \"\(text)\"")
                }
                actions.append((name, action))
            case .assetSize(let name):
                sizes.append((name, text, cell))
            case .system(let system), .escapedSystem(let system):
                switch system {
                case .scope:
                    guard let scope = DatabaseScope(text: text) else {
                        return issue(
                            cell, field: nil, name: recordName, type: typeName,
                            "scope is private, shared or public, found \"\(text)\"")
                    }
                    record.id.zone.scope = scope
                case .zoneName: record.id.zone.zoneName = text
                case .ownerRecordName: record.id.zone.ownerRecordName = text
                case .recordChangeTag: record.changeTag = text
                case .created, .modified:
                    guard case .timestamp(let ms)? = try? options.values.value(text, as: .timestamp) else {
                        return issue(
                            cell, field: nil, name: recordName, type: typeName,
                            "\(system.rawValue) is a time such as 2026-01-12T09:00:00.000Z, found \"\(text)\"")
                    }
                    if system == .created {
                        createdStamp.timestamp = ms
                        hasCreated = true
                    } else {
                        modifiedStamp.timestamp = ms
                        hasModified = true
                    }
                case .createdBy: createdStamp.userRecordName = text
                case .createdDevice: createdStamp.deviceID = text
                case .modifiedBy: modifiedStamp.userRecordName = text
                case .modifiedDevice: modifiedStamp.deviceID = text
                case .parentRecordName, .shareRecordName:
                    if let problem = Names.referenceTargetProblem(text) {
                        return issue(
                            cell, field: nil, name: recordName, type: typeName,
                            "\(system.rawValue) '\(text)' \(problem)")
                    }
                    if system == .parentRecordName { record.parent = text } else { record.share = text }
                case .shareDetails:
                    guard let details = ShareDetails(json: text),
                        !details.object.members.contains(where: { JSONRecordCodec.canonicalRecordKeys.contains($0.key) }
                        )
                    else {
                        return issue(
                            cell, field: nil, name: recordName, type: typeName,
                            "shareDetails is a JSON object of what CloudKit says of a share (publicPermission, participants, …), found \"\(text.prefix(60))\""
                        )
                    }
                    if case .object(let kept) = ShareDetails.withoutKeyMaterial(.object(details.object)),
                        !kept.members.isEmpty
                    {
                        record.shareDetails = ShareDetails(kept).text
                    }
                }
            }
        }
        // Companions complete their fields.
        for entry in fields.entries {
            switch entry.value {
            case .reference(var reference):
                if let companion = actions.first(where: { $0.field == entry.name }) {
                    reference.action = companion.action
                    fields[entry.name] = .reference(reference)
                }
            case .asset(var asset) where asset.size < 0:
                guard let (_, text, cell) = sizes.first(where: { $0.field == entry.name }) else {
                    let fieldCell = columns.firstIndex {
                        if case .field(let name, _)? = $0 { return name == entry.name } else { return false }
                    }.map { cells[$0] }
                    return issue(
                        fieldCell, field: entry.name, name: recordName, type: typeName,
                        "an ASSET cell holds its checksum and needs its size in column \(entry.name):size")
                }
                guard let size = Int64(text), size >= 0 else {
                    return issue(
                        cell, field: entry.name, name: recordName, type: typeName,
                        "expected the asset's size in bytes, found \"\(text)\"")
                }
                asset.size = size
                fields[entry.name] = .asset(asset)
            default:
                break
            }
        }
        record.fields = fields
        if hasCreated { record.created = createdStamp }
        if hasModified { record.modified = modifiedStamp }
        if let recordName {
            record.id.recordName = recordName
        } else if let template = options.nameTemplate {
            do {
                record.id.recordName = try template.render(record, timeZone: options.values.timeZone)
            } catch {
                return issue(nil, field: nil, name: nil, type: typeName, error.message)
            }
        } else {
            record.id.recordName = UUID().uuidString
        }
        let start = SourcePosition(file: file, line: rowLine, column: 1)
        let locate: @Sendable (String) -> SourcePosition = { field in
            for (index, column) in columns.enumerated() {
                if case .field(let name, _)? = column, name == field {
                    return SourcePosition(file: file, line: cells[index].line, column: cells[index].column)
                }
            }
            return start
        }
        var sourced = SourcedRecord(record: record, position: start, raw: raw, locateField: locate)
        sourced.namesNoZone = namesNoZone
        return .record(sourced)
    }
}
