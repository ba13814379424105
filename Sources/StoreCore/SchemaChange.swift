import Records

/// What changes between two schemas, type by type and field by field.
public struct SchemaChange: Sendable {
    public var addedTypes: [RecordTypeDefinition] = []
    public var removedTypes: [String] = []
    public var addedFields: [(type: String, field: FieldDefinition)] = []
    public var removedFields: [(type: String, field: FieldDefinition)] = []
    /// Fields whose storage changes (another primitive type, or LIST added or removed).
    public var retypedFields: [(type: String, old: FieldDefinition, new: FieldDefinition)] = []
    /// Fields whose storage stays but whose options, encryption or number preference change.
    public var reindexedFields: [(type: String, old: FieldDefinition, new: FieldDefinition)] = []
    public var addedRoles: [String] = []
    public var removedRoles: [String] = []
    /// Record types whose grants changed.
    public var regrantedTypes: [String] = []

    public init(from old: Schema, to new: Schema) {
        for type in new.recordTypes {
            guard let previous = old.recordType(named: type.name) else {
                addedTypes.append(type)
                continue
            }
            for field in type.userFields {
                guard let before = previous.field(named: field.name) else {
                    addedFields.append((type.name, field))
                    continue
                }
                if before.type.primitive != field.type.primitive || before.type.isList != field.type.isList {
                    retypedFields.append((type.name, before, field))
                } else if before != field {
                    reindexedFields.append((type.name, before, field))
                }
            }
            for field in previous.userFields where type.field(named: field.name) == nil {
                removedFields.append((type.name, field))
            }
            if Set(previous.grants.map { "\($0)" }) != Set(type.grants.map { "\($0)" }) {
                regrantedTypes.append(type.name)
            }
        }
        removedTypes = old.recordTypes.map(\.name).filter { new.recordType(named: $0) == nil }
        addedRoles = new.roles.filter { !old.roles.contains($0) }
        removedRoles = old.roles.filter { !new.roles.contains($0) }
    }

    public var changesSchema: Bool {
        !addedTypes.isEmpty || !removedTypes.isEmpty || !addedFields.isEmpty || !removedFields.isEmpty
            || !retypedFields.isEmpty || !reindexedFields.isEmpty || !addedRoles.isEmpty || !removedRoles.isEmpty
            || !regrantedTypes.isEmpty
    }

    /// One line per change, for people.
    public var summary: [String] {
        var lines: [String] = []
        for type in addedTypes { lines.append("+ record type \(type.name) (\(type.userFields.count) fields)") }
        for name in removedTypes { lines.append("- record type \(name)") }
        for (type, field) in addedFields { lines.append("+ \(type).\(field.name) \(field.type)") }
        for (type, field) in removedFields { lines.append("- \(type).\(field.name) \(field.type)") }
        for (type, old, new) in retypedFields { lines.append("~ \(type).\(old.name) \(old.type) -> \(new.type)") }
        for (type, old, new) in reindexedFields {
            lines.append(
                "~ \(type).\(old.name) \(old.type) \(old.options.names.joined(separator: " ")) -> \(new.type) \(new.options.names.joined(separator: " "))"
            )
        }
        for role in addedRoles { lines.append("+ role \(role)") }
        for role in removedRoles { lines.append("- role \(role)") }
        for type in regrantedTypes { lines.append("~ \(type) grants") }
        return lines
    }
}

extension SchemaChange {
    /// Why this change cannot be made without losing stored data: a record type that goes away
    /// while `records(type)` of it are stored, a field that goes away or changes type while
    /// `values(type, field)` records hold a value for it. Empty when nothing stands in the way.
    /// Every store refuses the same changes in the same words.
    public func dataLossRefusals(
        records: (_ type: String) throws -> Int, values: (_ type: String, _ field: String) throws -> Int
    ) rethrows -> [String] {
        var refusals: [String] = []
        for typeName in removedTypes {
            let count = try records(typeName)
            if count > 0 {
                refusals.append(
                    "record type \(typeName) would go away, but \(count) record\(count == 1 ? "" : "s") of it are stored (delete them first, or keep the type)"
                )
            }
        }
        for (typeName, field) in removedFields + retypedFields.map({ ($0.type, $0.old) }) {
            let count = try values(typeName, field.name)
            guard count > 0 else { continue }
            if let retyped = retypedFields.first(where: { $0.type == typeName && $0.old.name == field.name }) {
                refusals.append(
                    "field \(typeName).\(field.name) would change from \(retyped.old.type) to \(retyped.new.type), but \(count) stored record\(count == 1 ? " holds" : "s hold") a value for it (convert them with a migration instead)"
                )
            } else {
                refusals.append(
                    "field \(typeName).\(field.name) would go away, but \(count) stored record\(count == 1 ? " holds" : "s hold") a value for it (CloudKit never removes a field from a production schema either)"
                )
            }
        }
        return refusals
    }
}
