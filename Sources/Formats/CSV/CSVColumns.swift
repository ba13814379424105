import Records

/// What a CSV column holds.
public enum CSVColumn: Hashable, Sendable {
    case recordName
    case recordType
    case system(CSVSystemColumn)
    /// A system column whose plain name a field of the type already has (AppRule's own
    /// `modifiedBy`): written and read as `___modifiedBy`.
    case escapedSystem(CSVSystemColumn)
    case field(String, FieldType)
    /// `field:action`: the action of a REFERENCE field, which its own cell (the target's record
    /// name) cannot carry.
    case referenceAction(String)
    /// `field:size`: the size of an ASSET field, whose own cell is its checksum.
    case assetSize(String)
    /// A column `--ignore-columns` lets pass.
    case ignored

    public var header: String {
        switch self {
        case .recordName: return "recordName"
        case .recordType: return "recordType"
        case .system(let column): return column.rawValue
        case .escapedSystem(let column): return "___" + column.rawValue
        case .field(let name, _): return name
        case .referenceAction(let name): return name + ":action"
        case .assetSize(let name): return name + ":size"
        case .ignored: return ""
        }
    }

    /// Whether the cells are text a spreadsheet could run as a formula.
    var isText: Bool {
        switch self {
        case .recordName, .recordType: return true
        case .system(let column), .escapedSystem(let column): return column.isText
        case .field(_, let type): return !type.isList && (type.primitive == .string || type.primitive == .reference)
        case .referenceAction, .assetSize, .ignored: return false
        }
    }
}

/// The system columns `--system` adds, in the order they are written.
public enum CSVSystemColumn: String, CaseIterable, Sendable {
    case scope, zoneName, ownerRecordName, recordChangeTag
    case created, createdBy, createdDevice, modified, modifiedBy, modifiedDevice
    /// The record's `parent` and `share` (record names), and a share's details (JSON).
    case parentRecordName, shareRecordName, shareDetails

    var isText: Bool { self != .created && self != .modified }
}

enum CSVLayout {
    /// The columns written for a record type: `recordName`, the fields (or the chosen ones)
    /// with their companions, then the system columns.
    static func columns(for type: RecordTypeDefinition, fields chosen: [String]?, system: Bool) throws(ValueError)
        -> [CSVColumn]
    {
        var columns: [CSVColumn] = [.recordName]
        let fields: [FieldDefinition]
        if let chosen {
            fields = try chosen.map { name throws(ValueError) in
                guard let field = type.field(named: name), !field.isSystem else {
                    throw ValueError(
                        "\(Wording.fieldList): record type \(type.name) has no field '\(name)' (its fields: \(type.userFields.map(\.name).joined(separator: ", ")))"
                    )
                }
                return field
            }
        } else {
            fields = type.userFields
        }
        for field in fields {
            columns.append(.field(field.name, field.type))
            if field.type == .reference { columns.append(.referenceAction(field.name)) }
            if field.type == .asset { columns.append(.assetSize(field.name)) }
        }
        if system {
            columns += CSVSystemColumn.allCases.map {
                type.field(named: $0.rawValue) == nil ? .system($0) : .escapedSystem($0)
            }
        }
        return columns
    }

    /// What a header cell names for records of `type`; nil when it names nothing known.
    static func resolve(_ header: String, in type: RecordTypeDefinition?) -> CSVColumn? {
        switch header {
        case "recordName": return .recordName
        case "recordType": return .recordType
        default: break
        }
        if header.hasPrefix("___"), let system = CSVSystemColumn(rawValue: String(header.dropFirst(3))) {
            return .escapedSystem(system)
        }
        // A field of the type wins over a system column of the same name.
        if let field = type?.field(named: header), !field.isSystem { return .field(field.name, field.type) }
        if let system = CSVSystemColumn(rawValue: header) { return .system(system) }
        guard let type else { return nil }
        if header.hasSuffix(":action"), let field = type.field(named: String(header.dropLast(7))),
            field.type == .reference
        {
            return .referenceAction(field.name)
        }
        if header.hasSuffix(":size"), let field = type.field(named: String(header.dropLast(5))), field.type == .asset {
            return .assetSize(field.name)
        }
        return nil
    }
}
