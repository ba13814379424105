/// The index options of a field.
public struct FieldOptions: OptionSet, Hashable, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    public static let queryable = FieldOptions(rawValue: 1)
    public static let searchable = FieldOptions(rawValue: 2)
    public static let sortable = FieldOptions(rawValue: 4)

    /// The options in cktool's printing order.
    public var names: [String] {
        var names: [String] = []
        if contains(.queryable) { names.append("QUERYABLE") }
        if contains(.searchable) { names.append("SEARCHABLE") }
        if contains(.sortable) { names.append("SORTABLE") }
        return names
    }

    /// Whether the field gets a database index (QUERYABLE or SORTABLE; SEARCHABLE is a
    /// full-text index CloudKit keeps and ckport's queries do not use).
    public var needsIndex: Bool { contains(.queryable) || contains(.sortable) }
}

/// One field of a record type.
public struct FieldDefinition: Hashable, Sendable {
    public var name: String
    public var type: FieldType
    public var options: FieldOptions

    public init(name: String, type: FieldType, options: FieldOptions = []) {
        self.name = name
        self.type = type
        self.options = options
    }

    public var isSystem: Bool { Names.isSystemField(name) }
}

/// A permission a role may be granted on a record type.
public enum Permission: String, Hashable, Sendable, CaseIterable {
    case read = "READ"
    case create = "CREATE"
    case write = "WRITE"
}

/// `GRANT READ, WRITE TO role`.
public struct Grant: Hashable, Sendable {
    public var permissions: [Permission]
    public var role: String

    public init(_ permissions: [Permission], to role: String) {
        self.permissions = permissions
        self.role = role
    }
}

/// A record type: its fields (system fields included, first) and its grants.
public struct RecordTypeDefinition: Hashable, Sendable {
    public var name: String
    /// The fields in declaration order, the six implicit system fields first.
    public var fields: [FieldDefinition]
    public var grants: [Grant]

    /// A record type with the implicit system fields and no others.
    public init(name: String, fields: [FieldDefinition] = [], grants: [Grant] = []) {
        self.name = name
        self.fields = Names.systemFields.map { FieldDefinition(name: $0.name, type: FieldType($0.type)) }
        self.grants = grants
        for field in fields {
            if let index = self.fields.firstIndex(where: { $0.name == field.name }) {
                self.fields[index] = field
            } else {
                self.fields.append(field)
            }
        }
    }

    /// CloudKit's record type of shares, as cktool exports it: its three fields, written by the
    /// share's creator, created by any iCloud user, read by the world.
    public static let share = RecordTypeDefinition(
        name: Names.shareType,
        fields: Names.shareFields.map { FieldDefinition(name: $0.name, type: FieldType($0.type)) },
        grants: [Grant([.write], to: "_creator"), Grant([.create], to: "_icloud"), Grant([.read], to: "_world")])

    /// The fields records carry (system fields excluded), in declaration order.
    public var userFields: [FieldDefinition] { fields.filter { !$0.isSystem } }

    public func field(named name: String) -> FieldDefinition? {
        fields.first { $0.name == name }
    }
}

/// A CloudKit schema: roles and record types, as the schema language describes them.
public struct Schema: Hashable, Sendable {
    /// Roles declared with `CREATE ROLE` (the implicit `_world`, `_icloud`, `_creator` are not listed).
    public var roles: [String]
    /// Record types in declaration order.
    public var recordTypes: [RecordTypeDefinition]

    public init(roles: [String] = [], recordTypes: [RecordTypeDefinition] = []) {
        self.roles = roles
        self.recordTypes = recordTypes
    }

    public func recordType(named name: String) -> RecordTypeDefinition? {
        recordTypes.first { $0.name == name }
    }

    public subscript(type name: String) -> RecordTypeDefinition? { recordType(named: name) }

    /// Whether two schemas say the same thing, whatever the order of their declarations.
    public func isEquivalent(to other: Schema) -> Bool {
        SchemaPrinter.print(self) == SchemaPrinter.print(other)
    }

    /// Adds a field to a type, creating the type when it does not exist yet (as CloudKit's
    /// development environment does when a record brings a new field).
    public mutating func addField(_ field: FieldDefinition, toType typeName: String) {
        if let index = recordTypes.firstIndex(where: { $0.name == typeName }) {
            recordTypes[index].fields.append(field)
        } else {
            recordTypes.append(RecordTypeDefinition(name: typeName, fields: [field]))
        }
    }
}

/// Two schema files that say different things of one field.
public struct SchemaConflict: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }
    public var recordType: String
    public var field: String
    public var first: (file: String, definition: String)
    public var second: (file: String, definition: String)

    public var description: String {
        "\(second.file): \(recordType).\(field) is \(second.definition), but \(first.file) has it as \(first.definition): one store holds one definition of a field"
    }
}

extension Schema {
    /// The schemas of several files as one (several apps' records in one store): every role and
    /// record type of each, in the order first declared; a type declared in several files gets
    /// every field and grant any of them gives it. A field two files define differently is
    /// refused.
    public static func merged(_ schemas: [(file: String, schema: Schema)]) throws -> Schema {
        var merged = Schema()
        var origin: [String: String] = [:]
        for (file, schema) in schemas {
            for role in schema.roles where !merged.roles.contains(role) { merged.roles.append(role) }
            for type in schema.recordTypes {
                guard let index = merged.recordTypes.firstIndex(where: { $0.name == type.name }) else {
                    merged.recordTypes.append(type)
                    for field in type.fields { origin[type.name + "." + field.name] = file }
                    continue
                }
                for field in type.fields {
                    if let known = merged.recordTypes[index].field(named: field.name) {
                        guard known == field else {
                            throw SchemaConflict(
                                recordType: type.name, field: field.name,
                                first: (origin[type.name + "." + field.name] ?? "?", SchemaPrinter.describe(known)),
                                second: (file, SchemaPrinter.describe(field)))
                        }
                        continue
                    }
                    merged.recordTypes[index].fields.append(field)
                    origin[type.name + "." + field.name] = file
                }
                for grant in type.grants where !merged.recordTypes[index].grants.contains(grant) {
                    merged.recordTypes[index].grants.append(grant)
                }
            }
        }
        return merged
    }
}
