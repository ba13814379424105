/// A reason a record cannot be stored, naming the field when one is at fault.
public struct ValidationIssue: Hashable, Sendable, CustomStringConvertible {
    public var field: String?
    public var message: String

    public init(field: String? = nil, message: String) {
        self.field = field
        self.message = message
    }

    public var description: String {
        field.map { "field '\($0)': \(message)" } ?? message
    }
}

/// Checks records against a schema and against the limits CloudKit enforces.
public struct RecordValidator: Sendable {
    /// CloudKit's record size limit, assets excluded.
    public static let maxRecordSize = 1_048_576

    public var schema: Schema {
        didSet { index = RecordValidator.index(schema) }
    }

    /// The schema's types and fields by name: every record is checked field by field.
    private var index: [String: (type: RecordTypeDefinition, fields: [String: FieldDefinition])]

    public init(schema: Schema) {
        self.schema = schema
        index = RecordValidator.index(schema)
    }

    private static func index(_ schema: Schema) -> [String: (type: RecordTypeDefinition, fields: [String: FieldDefinition])] {
        var index: [String: (type: RecordTypeDefinition, fields: [String: FieldDefinition])] = [:]
        for type in schema.recordTypes where index[type.name] == nil {
            index[type.name] = (type, Dictionary(type.fields.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first }))
        }
        return index
    }

    /// Every problem with `record`, or an empty array when it can be stored.
    ///
    /// - Parameter allowNewFields: fields and types the schema does not know are not problems
    ///   (the caller adds them to the schema, as CloudKit's development environment does).
    public func issues(in record: Record, allowNewFields: Bool = false) -> [ValidationIssue] {
        var issues: [ValidationIssue] = []
        if let problem = Names.recordNameProblem(record.recordName) {
            issues.append(ValidationIssue(message: "bad recordName '\(record.recordName)': \(problem)"))
        }
        if record.isDeleted { return issues }
        guard let (type, fields) = index[record.recordType] else {
            if !allowNewFields {
                let known = schema.recordTypes.map(\.name).sorted()
                issues.append(ValidationIssue(message: "unknown record type '\(record.recordType)' (the schema has \(known.isEmpty ? "no record types; import one with 'ckport schema import'" : known.joined(separator: ", ")))"))
            } else if let problem = Names.recordTypeNameProblem(record.recordType) {
                issues.append(ValidationIssue(message: problem))
            }
            if allowNewFields {
                for name in record.fields.names {
                    if let problem = Names.fieldNameProblem(name) { issues.append(ValidationIssue(field: name, message: problem)) }
                }
            }
            return issues
        }
        for (name, value) in record.fields {
            guard let field = fields[name], !field.isSystem else {
                if Names.isSystemField(name) {
                    issues.append(ValidationIssue(field: name, message: "system fields are set through the record's system keys, not its fields"))
                } else if !allowNewFields {
                    issues.append(ValidationIssue(field: name, message: "record type '\(type.name)' has no field '\(name)' (use --allow-new-fields to add it to the schema)"))
                } else if let problem = Names.fieldNameProblem(name) {
                    issues.append(ValidationIssue(field: name, message: problem))
                }
                continue
            }
            if !field.type.accepts(value.type) {
                issues.append(ValidationIssue(field: name, message: "expected \(field.type), found a \(value.type) value"))
            }
        }
        let size = record.encodedSize
        if size > RecordValidator.maxRecordSize {
            let largest = record.fields.max { $0.value.encodedSize < $1.value.encodedSize }
            issues.append(ValidationIssue(field: largest?.name, message: "the record is \(size) bytes, over CloudKit's limit of \(RecordValidator.maxRecordSize) bytes (assets excluded); keep large data in an ASSET field"))
        }
        return issues
    }
}
