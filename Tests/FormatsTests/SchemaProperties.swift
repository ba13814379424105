import Foundation
import PropertyBased
import Records
import SampleApps
import Testing

/// Random schemas in the schema language: every construct the model holds (roles with names
/// that need quotes, types and fields named like keywords, every type as a list and encrypted,
/// NUMBER with its preference, index options, system fields with indexes, grants to every kind
/// of role) prints to text that parses back to the same schema and prints the same again.
private enum SchemaData {
    static let typeNames = ["Note", "Household", "grant", "Record", "CD_Item", "T_2", "x", "Type", "list", "ENCRYPTED"]
    static let fieldNames = [
        "title", "grant", "type", "list", "string", "record", "CD_title", "_schemaVersion", "a1", "z", "Title",
        "sortable", "QUERYABLE", "x_y",
    ]
    static let roleNames = ["Editor", "test role", "grant", "R2", "family-admin"]
    static let systemFields: [(String, FieldType, FieldOptions)] = [
        ("___recordID", .reference, [.queryable]), ("___createTime", .timestamp, [.sortable]),
        ("___modTime", .timestamp, [.queryable, .sortable]),
        ("___createdBy", .reference, [.queryable]), ("___modifiedBy", .reference, []), ("___etag", .string, []),
    ]
}

extension SeededRandom {
    fileprivate mutating func field(named name: String) -> FieldDefinition {
        let primitive = pick(PrimitiveType.allCases)
        let list = primitive != .location && roll(0.3)
        let encrypted = primitive.canBeEncrypted && roll(0.2)
        let preference: NumberPreference? = primitive == .number && roll(0.6) ? pick([.int64, .double]) : nil
        var options: FieldOptions = []
        if roll(0.4) { options.insert(.queryable) }
        if roll(0.3) { options.insert(.sortable) }
        if roll(0.2) { options.insert(.searchable) }
        var field = FieldDefinition(
            name: name, type: FieldType(primitive, list: list, encrypted: encrypted, numberPreference: preference),
            options: options)
        // Only the options the language allows on the type (it refuses the rest).
        if (try? SchemaParser.parse(
            SchemaPrinter.print(Schema(recordTypes: [RecordTypeDefinition(name: "X", fields: [field])])))) == nil
        {
            field.options = []
        }
        return field
    }

    fileprivate mutating func languageSchema() -> Schema {
        let roles = SchemaData.roleNames.filter { _ in roll(0.4) }
        var typeNames = SchemaData.typeNames.filter { _ in roll(0.35) }
        if typeNames.isEmpty { typeNames = [pick(SchemaData.typeNames)] }
        let types = typeNames.map { typeName -> RecordTypeDefinition in
            var fields = SchemaData.systemFields.filter { _ in roll(0.5) }.map {
                FieldDefinition(name: $0.0, type: $0.1, options: $0.2)
            }
            fields += SchemaData.fieldNames.filter { _ in roll(0.3) }.map { field(named: $0) }
            var grants: [Grant] = []
            for role in ["_creator", "_icloud", "_world"] + roles where roll(0.4) {
                let permissions = Permission.allCases.filter { _ in roll(0.6) }
                if !permissions.isEmpty { grants.append(Grant(permissions, to: role)) }
            }
            return RecordTypeDefinition(name: typeName, fields: fields, grants: grants)
        }
        return Schema(roles: roles, recordTypes: types)
    }
}

@Suite("the schema language on random schemas")
struct SchemaProperties {
    @Test("a random schema prints to text that parses back to the same schema, and printing that is a fixed point")
    func printParseFixedPoint() async {
        await propertyCheck(count: 200, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            var dice = SeededRandom(state: seed)
            let schema = dice.languageSchema()
            let printed = SchemaPrinter.print(schema)
            do {
                let parsed = try SchemaParser.parse(printed, file: "random.ckdb")
                #expect(parsed.isEquivalent(to: schema), "seed \(seed): parsed back as another schema:\n\(printed)")
                #expect(
                    parsed.recordTypes.map(\.name) == schema.recordTypes.map(\.name)
                        || Set(parsed.recordTypes.map(\.name)) == Set(schema.recordTypes.map(\.name)),
                    "seed \(seed): types \(parsed.recordTypes.map(\.name)) against \(schema.recordTypes.map(\.name))")
                #expect(parsed.roles == schema.roles, "seed \(seed): roles \(parsed.roles) against \(schema.roles)")
                for type in schema.recordTypes {
                    let back = parsed.recordType(named: type.name)
                    #expect(back.map { Set($0.fields) } == Set(type.fields), "seed \(seed): \(type.name)'s fields")
                    #expect(back.map { Set($0.grants) } == Set(type.grants), "seed \(seed): \(type.name)'s grants")
                }
                #expect(SchemaPrinter.print(parsed) == printed, "seed \(seed): printing again changed the text")
            } catch {
                Issue.record("seed \(seed): the printed schema does not parse: \(error)\n\(printed)")
            }
        }
    }
}
