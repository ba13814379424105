import Foundation
import Records

/// The CloudKit schema `NSPersistentCloudKitContainer` derives from a Core Data model, and the
/// model's problems with CloudKit's rules, as Apple documents them ("Creating a Core Data Model
/// for CloudKit", "Reading CloudKit Records for Core Data") and as `cktool export-schema` shows
/// such containers. Where Apple is silent, ``Derived/notes`` says what ckport chose.
public enum CoreDataCloudKit {
    /// A derived schema and the choices made where Apple's documentation is silent.
    public struct Derived: Sendable {
        public var schema: Schema
        public var notes: [String]
    }

    /// One problem of a model with CloudKit: where it is and what is wrong.
    public struct Problem: Sendable, Equatable, CustomStringConvertible {
        public var file: String
        public var line: Int
        public var message: String
        public var description: String { "\(file):\(line): \(message)" }
    }

    /// Index options cktool shows on the fields of a Core Data record type.
    static let textIndexes: FieldOptions = [.queryable, .searchable, .sortable]
    static let valueIndexes: FieldOptions = [.queryable, .sortable]
    /// Grants of every Core Data record type, as cktool shows them.
    static let grants = [
        Grant([.write], to: "_creator"), Grant([.create], to: "_icloud"), Grant([.read], to: "_world"),
    ]

    /// The system fields of a Core Data record type. The container indexes none of them (an
    /// index on one, such as `"___recordID" QUERYABLE`, is added in the CloudKit console).
    static var systemFields: [FieldDefinition] {
        [
            FieldDefinition(name: "___createTime", type: .timestamp),
            FieldDefinition(name: "___createdBy", type: .reference),
            FieldDefinition(name: "___etag", type: .string),
            FieldDefinition(name: "___modTime", type: .timestamp),
            FieldDefinition(name: "___modifiedBy", type: .reference),
            FieldDefinition(name: "___recordID", type: .reference),
        ]
    }

    /// The fields the container adds to every entity's record type: the entity's name, and the
    /// receipt it writes when a record moves between zones (a share), with its asset companion.
    static var containerFields: [FieldDefinition] {
        [
            FieldDefinition(name: "CD_entityName", type: .string, options: textIndexes),
            FieldDefinition(name: "CD_moveReceipt", type: .bytes, options: valueIndexes),
            FieldDefinition(name: "CD_moveReceipt_ckAsset", type: .asset),
        ]
    }

    /// The fields one attribute becomes; nil for a type CloudKit does not take.
    static func fields(_ attribute: CoreDataModel.Attribute, notes: inout Set<String>) -> [FieldDefinition]? {
        let name = "CD_" + attribute.name
        let type: PrimitiveType
        var companionAsset = false
        switch attribute.type {
        case "String":
            type = .string
            companionAsset = true
        case "UUID", "URI":
            type = .string
            notes.insert(
                "UUID and URI attributes: STRING without a _ckAsset companion (their values are short); Apple does not document one"
            )
        case "Integer 16", "Integer 32", "Integer 64", "Boolean": type = .int64
        case "Date": type = .timestamp
        case "Double", "Float": type = .double
        case "Decimal":
            type = .string
            notes.insert("Decimal attributes: Apple does not document their field type; ckport writes STRING")
        case "Binary":
            type = .bytes
            companionAsset = true
        case "Transformable":
            type = .bytes
            notes.insert(
                "Transformable attributes: BYTES without a _ckAsset companion; Apple does not document whether the container adds one"
            )
        default:
            return nil
        }
        var fields: [FieldDefinition]
        if attribute.encrypted {
            fields = [FieldDefinition(name: name, type: FieldType(type, encrypted: true))]
        } else {
            fields = [
                FieldDefinition(
                    name: name, type: FieldType(type), options: type == .string ? textIndexes : valueIndexes)
            ]
        }
        // A string or data value too large for a record goes into an asset beside its field;
        // the container declares that field for every String and Binary attribute.
        if companionAsset { fields.append(FieldDefinition(name: name + "_ckAsset", type: .asset)) }
        return fields
    }

    /// The schema a model's CloudKit container holds once `initializeCloudKitSchema` ran for
    /// the entities of `configuration` (all entities when nil).
    public static func schema(for model: CoreDataModel, configuration: String? = nil) throws -> Derived {
        var members = Set(model.entities.map(\.name))
        if let configuration {
            guard let chosen = model.configurations.first(where: { $0.name == configuration }) else {
                throw XMLInputError(
                    file: model.file, line: 0, column: 0,
                    message:
                        "has no configuration \"\(configuration)\" (its configurations: \(model.configurations.map(\.name).joined(separator: ", ")))"
                )
            }
            members = Set(chosen.entities)
        }
        var notes: Set<String> = []
        if configuration == nil {
            // The container mirrors the stores given CloudKit options, each of one
            // configuration; the model marks those configurations "Used with CloudKit".
            let cloud = model.configurations.filter(\.usedWithCloudKit)
            if !cloud.isEmpty {
                members = Set(cloud.flatMap(\.entities))
                let localOnly = model.entities.map(\.name).filter { !members.contains($0) }
                notes.insert(
                    "the configuration\(cloud.count == 1 ? "" : "s") marked Used with CloudKit (\(cloud.map(\.name).joined(separator: ", "))) chose the entities"
                        + (localOnly.isEmpty ? "" : "; left out as local-only: \(localOnly.joined(separator: ", "))"))
            } else if !model.configurations.filter({ $0.name != "Default" }).isEmpty {
                notes.insert(
                    "no configuration is marked Used with CloudKit, so every entity was taken (the Default configuration's); name a configuration to take only its entities"
                )
            }
        }
        var types: [RecordTypeDefinition] = []
        var manyToMany = false
        let entities = model.entities.filter { members.contains($0.name) }
        for root in entities where root.parent == nil || model.entity(named: root.parent!) == nil {
            // Every entity of the hierarchy is stored in its root's record type.
            let family = entities.filter { model.root(of: $0).name == root.name }
            var byName = Dictionary(uniqueKeysWithValues: containerFields.map { ($0.name, $0) })
            for entity in family {
                for attribute in entity.attributes {
                    if attribute.transient {
                        notes.insert(
                            "attribute \(entity.name).\(attribute.name) is transient: never saved, so the container has nothing of it to mirror; left out"
                        )
                        continue
                    }
                    if attribute.derived {
                        notes.insert(
                            "attribute \(entity.name).\(attribute.name) is derived: each device computes it from the values it derives from; left out (Apple does not document whether the container mirrors derived attributes)"
                        )
                        continue
                    }
                    guard let fields = fields(attribute, notes: &notes) else {
                        notes.insert(
                            "attribute \(entity.name).\(attribute.name) is of type \(attribute.type), which CloudKit does not take; left out"
                        )
                        continue
                    }
                    for field in fields {
                        if let earlier = byName[field.name], earlier.type != field.type {
                            notes.insert(
                                "field \(field.name) of \(root.name)'s record type is \(earlier.type) in one entity and \(field.type) in another; the first is kept"
                            )
                            continue
                        }
                        byName[field.name] = field
                    }
                }
                for relationship in entity.relationships {
                    let inverse = model.entity(named: relationship.destination)?.relationships.first {
                        $0.name == relationship.inverse
                    }
                    if !relationship.toMany {
                        // A to-one relationship holds the related record's name.
                        byName["CD_" + relationship.name] = FieldDefinition(
                            name: "CD_" + relationship.name, type: .string, options: textIndexes)
                    } else if inverse?.toMany ?? false {
                        manyToMany = true
                    }
                }
            }
            let fields = byName.values.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
            types.append(RecordTypeDefinition(name: "CD_" + root.name, fields: systemFields + fields, grants: grants))
        }
        if manyToMany {
            // Many-to-many relationships are rows of their own.
            types.append(
                RecordTypeDefinition(
                    name: "CDMR",
                    fields: systemFields
                        + ["CD_entityNames", "CD_recordNames", "CD_relationships"].map {
                            FieldDefinition(name: $0, type: .string, options: textIndexes)
                        }, grants: grants))
        }
        // Every container has the Users type; cktool exports it too.
        types.append(
            RecordTypeDefinition(
                name: "Users",
                fields: [
                    FieldDefinition(name: "___createTime", type: .timestamp),
                    FieldDefinition(name: "___createdBy", type: .reference),
                    FieldDefinition(name: "___etag", type: .string),
                    FieldDefinition(name: "___modTime", type: .timestamp),
                    FieldDefinition(name: "___modifiedBy", type: .reference),
                    FieldDefinition(name: "___recordID", type: .reference),
                    FieldDefinition(name: "roles", type: .list(.int64)),
                ], grants: [Grant([.write], to: "_creator"), Grant([.read], to: "_world")]))
        types.sort { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        return Derived(schema: Schema(recordTypes: types), notes: model.notes + notes.sorted())
    }

    /// What in a model CloudKit does not accept, with the line of each element.
    public static func problems(in model: CoreDataModel) -> [Problem] {
        var problems: [Problem] = []
        func add(_ line: Int, _ message: String) {
            problems.append(Problem(file: model.file, line: line, message: message))
        }
        let configurationOf: [String: String] = Dictionary(
            model.configurations.filter { $0.name != "Default" }
                .flatMap { configuration in configuration.entities.map { ($0, configuration.name) } },
            uniquingKeysWith: { first, _ in first })
        for entity in model.entities {
            if !entity.uniquenessConstraints.isEmpty {
                add(
                    entity.line,
                    "entity \(entity.name) has a uniqueness constraint (\(entity.uniquenessConstraints.map { $0.joined(separator: ", ") }.joined(separator: "; "))); CloudKit does not support unique constraints"
                )
            }
            for attribute in entity.attributes {
                if attribute.type == "Undefined" || attribute.type == "ObjectID" {
                    add(
                        attribute.line,
                        "attribute \(entity.name).\(attribute.name) is of type \(attribute.type), which CloudKit does not support"
                    )
                }
                if !attribute.optional && attribute.defaultValue == nil {
                    add(
                        attribute.line,
                        "attribute \(entity.name).\(attribute.name) is required and has no default value; a record can arrive from CloudKit without it, so give it a default or make it optional"
                    )
                }
            }
            for relationship in entity.relationships {
                if !relationship.optional {
                    add(
                        relationship.line,
                        "relationship \(entity.name).\(relationship.name) is required; CloudKit needs every relationship optional (related records may arrive later)"
                    )
                }
                if relationship.inverse == nil {
                    add(
                        relationship.line,
                        "relationship \(entity.name).\(relationship.name) has no inverse; CloudKit needs one for every relationship"
                    )
                }
                if relationship.deletionRule == "Deny" {
                    add(
                        relationship.line,
                        "relationship \(entity.name).\(relationship.name) has the Deny delete rule, which CloudKit does not support"
                    )
                }
                if let here = configurationOf[entity.name], let there = configurationOf[relationship.destination],
                    here != there
                {
                    add(
                        relationship.line,
                        "relationship \(entity.name).\(relationship.name) reaches entity \(relationship.destination) of configuration \(there) from configuration \(here); entities in a configuration must not relate to another's"
                    )
                }
            }
        }
        return problems
    }
}
