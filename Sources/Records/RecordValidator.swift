/// A reason a record cannot be stored, naming the field when one is at fault.
public struct ValidationIssue: Hashable, Sendable, CustomStringConvertible {
    public var field: String?
    public var message: Message

    public init(field: String? = nil, message: Message) {
        self.field = field
        self.message = message
    }

    public var explanation: Message {
        field.map { "field '\($0)': \(message)" } ?? message
    }

    public var description: String { explanation.description }
}

/// What a reader found while it read a record: every field is one of `names`, with a value
/// its type in `types` accepts (the type's user fields, sorted by the names' bytes), and the
/// record counts `size` bytes toward CloudKit's limit — what ``RecordValidator`` would work
/// out again. The validator relies on it only when its own type has exactly these fields.
public struct CheckedFields: Sendable {
    public let names: [String]
    public let types: [FieldType]
    public let size: Int

    public init(names: [String], types: [FieldType], size: Int) {
        self.names = names
        self.types = types
        self.size = size
    }
}

/// Checks records against a schema and against the limits CloudKit enforces.
public struct RecordValidator: Sendable {
    /// CloudKit's record size limit, assets excluded.
    public static let maxRecordSize = 1_048_576

    public var schema: Schema {
        didSet { index = RecordValidator.index(schema) }
    }

    /// The schema's types by name: every record is checked field by field.
    private var index: [String: TypeCheck]

    /// One record type's user fields sorted by name, the order records keep their fields in, so
    /// that a record is checked in one walk down both lists.
    private final class TypeCheck: Sendable {
        let type: RecordTypeDefinition
        let fields: [String: FieldDefinition]
        let names: [String]
        let types: [FieldType]

        init(_ type: RecordTypeDefinition) {
            self.type = type
            fields = Dictionary(type.fields.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
            var seen = Set<String>()
            let user = type.fields.filter { !$0.isSystem && seen.insert($0.name).inserted }
                .sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
            names = user.map(\.name)
            types = user.map(\.type)
        }
    }

    public init(schema: Schema) {
        self.schema = schema
        index = RecordValidator.index(schema)
    }

    private static func index(_ schema: Schema) -> [String: TypeCheck] {
        var index: [String: TypeCheck] = [:]
        for type in schema.recordTypes where index[type.name] == nil {
            index[type.name] = TypeCheck(type)
        }
        return index
    }

    /// Whether every field of `record` is a field of `check` with a value its type accepts, and
    /// the record's size counted on the way — the common case, without building anything.
    private static func quickCheck(_ record: Record, _ check: TypeCheck) -> (sound: Bool, size: Int) {
        var size = record.recordName.utf8.count + record.recordType.utf8.count
        let sound = record.fields.entries.withUnsafeBufferPointer { entries in
            check.names.withUnsafeBufferPointer { names in
                check.types.withUnsafeBufferPointer { types in
                    var next = 0
                    for k in 0..<entries.count {
                        // Usually the next name matches at once; otherwise skip the fields the
                        // record does not have.
                        while next < names.count, names[next] != entries[k].name {
                            guard RecordFields.precedes(names[next], entries[k].name) else { return false }
                            next += 1
                        }
                        guard next < names.count, types[next].accepts(FieldValue.type(of: entries[k].value)) else {
                            return false
                        }
                        size += entries[k].name.utf8.count + FieldValue.size(of: entries[k].value)
                        next += 1
                    }
                    return true
                }
            }
        }
        return (sound, size)
    }

    /// Every problem with `record`, or an empty array when it can be stored.
    ///
    /// - Parameters:
    ///   - checked: what the reader already found (``CheckedFields``), used when it was found
    ///     against this validator's own fields for the record's type.
    ///   - allowNewFields: fields and types the schema does not know are not problems
    ///     (the caller adds them to the schema, as CloudKit's development environment does).
    public func issues(in record: Record, checked: CheckedFields? = nil, allowNewFields: Bool = false)
        -> [ValidationIssue]
    {
        var issues: [ValidationIssue] = []
        if let problem = Names.recordNameProblem(record.recordName) {
            issues.append(ValidationIssue(message: "bad recordName '\(record.recordName)': \(problem)"))
        }
        if record.isDeleted { return issues }
        guard let check = index[record.recordType] else {
            if !allowNewFields {
                let known = schema.recordTypes.map(\.name).sorted()
                issues.append(
                    ValidationIssue(
                        message:
                            "unknown record type '\(record.recordType)' (the schema has \(known.isEmpty ? "no record types; import one with 'ckport schema import'" : known.joined(separator: ", ")))"
                    ))
            } else if let problem = Names.recordTypeNameProblem(record.recordType) {
                issues.append(ValidationIssue(message: Message(problem)))
            }
            if allowNewFields {
                for name in record.fields.names {
                    if let problem = Names.fieldNameProblem(name, recordType: record.recordType) {
                        issues.append(ValidationIssue(field: name, message: Message(problem)))
                    }
                }
            }
            return issues
        }
        let (sound, quickSize) =
            if let checked, checked.types == check.types, checked.names == check.names {
                (true, checked.size)
            } else {
                RecordValidator.quickCheck(record, check)
            }
        if sound && quickSize <= RecordValidator.maxRecordSize { return issues }
        // Something is wrong: look again, field by field, to say what.
        let size = sound ? quickSize : record.encodedSize
        let type = check.type
        let fields = check.fields
        for (name, value) in record.fields {
            guard let field = fields[name], !field.isSystem else {
                if Names.isSystemField(name) {
                    issues.append(
                        ValidationIssue(
                            field: name,
                            message: "system fields are set through the record's system keys, not its fields"))
                } else if !allowNewFields {
                    issues.append(
                        ValidationIssue(
                            field: name,
                            message:
                                "record type '\(type.name)' has no field '\(name)' (\(Wording.allowNewFields))"))
                } else if let problem = Names.fieldNameProblem(name, recordType: type.name) {
                    issues.append(ValidationIssue(field: name, message: Message(problem)))
                }
                continue
            }
            if !field.type.accepts(value.type) {
                // NUMBER names a field's type; a value's numbers are INT64 or DOUBLE, so a list
                // built with NUMBER elements matches no field, LIST<NUMBER> included.
                let found =
                    value.type.isList && value.type.primitive == .number
                    ? "a list whose elements are typed NUMBER (a value's numbers are INT64 or DOUBLE)"
                    : "a \(value.type) value"
                issues.append(ValidationIssue(field: name, message: "expected \(field.type), found \(found)"))
            }
        }
        if size > RecordValidator.maxRecordSize {
            let largest = record.fields.max { $0.value.encodedSize < $1.value.encodedSize }
            issues.append(
                ValidationIssue(
                    field: largest?.name,
                    message:
                        "the record is \(size) bytes, over CloudKit's limit of \(RecordValidator.maxRecordSize) bytes (assets excluded); keep large data in an ASSET field"
                ))
        }
        return issues
    }
}
