import Records

/// What a `changeType` or `migrateRecordType` conversion does with a value it cannot convert.
public enum ConversionFailure: Sendable, Hashable {
    /// The record fails, and with it the migration (a plan counts it as "would fail").
    case fail
    /// The field is left without a value.
    case null
    /// The field gets the step's `default`.
    case useDefault
}

/// How one field's values become another's: a built-in conversion between types, a map of
/// values, and what to do with values that do not convert.
public struct Conversion: Sendable, Hashable {
    public var to: FieldType
    /// Source value (as text: `0`, `low`) → target value.
    public var map: [String: FieldValue]?
    /// For records without a value, and with `onError: default` for values that do not convert.
    public var defaultValue: FieldValue?
    public var onError: ConversionFailure

    public init(
        to: FieldType, map: [String: FieldValue]? = nil, defaultValue: FieldValue? = nil,
        onError: ConversionFailure = .fail
    ) {
        self.to = to
        self.map = map
        self.defaultValue = defaultValue
        self.onError = onError
    }
}

/// A closure step, for what the declarative steps cannot say (as Django's RunPython).
///
/// ```swift
/// let titleCase = CustomStep(name: "titleCaseTitles", recordTypes: ["Note"]) { record in
///     var record = record
///     if case .string(let title)? = record["title"] { record["title"] = .string(title.capitalized) }
///     return record
/// }
/// let set = try MigrationSet.load(directory: "migrations/notes", customSteps: [titleCase])
/// ```
/// A migration file names it with `- custom: {name: titleCaseTitles}`.
public struct CustomStep: Sendable {
    public var name: String
    /// The types whose records the closure sees.
    public var recordTypes: [String]
    /// Changes the schema may need (new fields the closure writes).
    public var schema: @Sendable (inout Schema) throws -> Void
    /// The record as it should be, or nil to delete it.
    public var transform: @Sendable (Record) throws -> Record?

    public init(
        name: String, recordTypes: [String], schema: @escaping @Sendable (inout Schema) throws -> Void = { _ in },
        transform: @escaping @Sendable (Record) throws -> Record?
    ) {
        self.name = name
        self.recordTypes = recordTypes
        self.schema = schema
        self.transform = transform
    }
}

/// One step of a migration.
public enum MigrationStep: Sendable {
    case addField(type: String, field: FieldDefinition, defaultValue: FieldValue?)
    case renameField(type: String, from: String, to: String)
    /// In place (`into` nil: the field's type changes) or into a new field, keeping the old one.
    case changeType(type: String, field: String, conversion: Conversion, into: String?)
    case removeField(type: String, field: String, purge: Bool)
    /// Records of `from` become records of `to`: fields renamed (and converted) by `fields`,
    /// the others copied under their own names unless listed in `drop`.
    case migrateRecordType(
        from: String, to: String, fields: [String: RecordTypeFieldMapping], drop: Set<String>,
        nameTemplate: String?, keepSource: Bool)
    case setField(type: String, field: String, value: SetValue, fieldType: FieldType?, where: RecordPredicate?)
    case deleteRecords(type: String, where: RecordPredicate?)
    case custom(CustomStep)

    /// The step's kind as migration files spell it.
    public var kind: String {
        switch self {
        case .addField: return "addField"
        case .renameField: return "renameField"
        case .changeType: return "changeType"
        case .removeField: return "removeField"
        case .migrateRecordType: return "migrateRecordType"
        case .setField: return "setField"
        case .deleteRecords: return "deleteRecords"
        case .custom: return "custom"
        }
    }

    /// The record types whose records the step reads.
    public var sourceTypes: [String] {
        switch self {
        case .addField(let type, _, _), .renameField(let type, _, _), .changeType(let type, _, _, _),
            .removeField(let type, _, _),
            .setField(let type, _, _, _, _), .deleteRecords(let type, _):
            return [type]
        case .migrateRecordType(let from, _, _, _, _, _): return [from]
        case .custom(let step): return step.recordTypes
        }
    }
}

/// Where a migrated field goes.
public struct RecordTypeFieldMapping: Sendable, Hashable {
    public var to: String
    public var conversion: Conversion?

    public init(to: String, conversion: Conversion? = nil) {
        self.to = to
        self.conversion = conversion
    }
}

/// What `setField` writes.
public enum SetValue: Sendable {
    /// A constant as the file gives it; it becomes a value of the field's type when the
    /// migration is compiled against the schema.
    case constant(JSONValue)
    case expression(Expression)
}

/// One migration file: a version, a description and its steps.
public struct Migration: Sendable {
    public var version: Int
    public var description: String
    public var steps: [MigrationStep]
    /// The file it came from, and the line of each step (for messages).
    public var file: String
    public var stepLines: [Int]
    /// SHA-256 (hex) of the file's bytes.
    public var checksum: String

    public init(
        version: Int, description: String, steps: [MigrationStep], file: String = "", stepLines: [Int] = [],
        checksum: String = ""
    ) {
        self.version = version
        self.description = description
        self.steps = steps
        self.file = file
        self.stepLines = stepLines.isEmpty ? Array(repeating: 0, count: steps.count) : stepLines
        self.checksum = checksum
    }

    /// Where step `index` is, for messages: `0002_priority.yaml:7 (changeType)`.
    public func place(ofStep index: Int) -> String {
        let name = file.split(separator: "/").last.map(String.init) ?? file
        let line = stepLines.indices.contains(index) && stepLines[index] > 0 ? ":\(stepLines[index])" : ""
        return "\(name)\(line) (\(steps[index].kind))"
    }
}

/// A problem with a migration set, a file or a step.
public struct MigrationError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var file: String?
    public var line: Int?
    public var message: Message

    public init(file: String? = nil, line: Int? = nil, _ message: Message) {
        self.file = file
        self.line = line
        self.message = message
    }

    public var description: String { explanation.description }

    public var explanation: Message {
        guard let file else { return message }
        return "\(file)\(line.map { ":\($0)" } ?? ""): \(message)"
    }
}
