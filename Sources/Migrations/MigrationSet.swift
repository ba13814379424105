import Crypto
import Foundation
import Records
import Yams

/// A folder of migration files, `NNNN_description.yaml`, applied in version order, and an
/// optional `set.yaml` that declares append-only record types:
///
/// ```yaml
/// # set.yaml
/// appendOnly: [PointsLedgerEntry, AuditEntry]
/// ```
public struct MigrationSet: Sendable {
    /// The set's name in the store's history: the folder's name.
    public var name: String
    public var directory: String
    /// In version order; versions run 1, 2, 3, … without gaps.
    public var migrations: [Migration]
    /// Types whose existing records no step may change without `force`.
    public var appendOnly: Set<String>

    public init(name: String, directory: String = "", migrations: [Migration], appendOnly: Set<String> = []) {
        self.name = name
        self.directory = directory
        self.migrations = migrations
        self.appendOnly = appendOnly
    }

    /// The newest version the set knows.
    public var latestVersion: Int { migrations.last?.version ?? 0 }

    /// Reads every migration file in `directory`. Custom steps named by the files must be
    /// among `customSteps`.
    public static func load(directory: String, customSteps: [CustomStep] = []) throws -> MigrationSet {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw MigrationError(file: directory, "no such folder of migrations")
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        var migrations: [Migration] = []
        var appendOnly: Set<String> = []
        let custom = Dictionary(customSteps.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for name in names where name.hasSuffix(".yaml") || name.hasSuffix(".yml") {
            let path = (directory as NSString).appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: path) else {
                throw MigrationError(file: path, "cannot be read")
            }
            if name == "set.yaml" || name == "set.yml" {
                appendOnly = try MigrationFileReader(file: path, custom: custom).readSet(
                    String(decoding: data, as: UTF8.self))
                continue
            }
            let digits = name.prefix { $0.isNumber }
            guard !digits.isEmpty, name.dropFirst(digits.count).first == "_" else {
                throw MigrationError(
                    file: path, "a migration file is named NNNN_description.yaml (e.g. 0002_rename_body.yaml)")
            }
            var migration = try MigrationFileReader(file: path, custom: custom).readMigration(
                String(decoding: data, as: UTF8.self))
            guard migration.version == Int(digits) else {
                throw MigrationError(
                    file: path,
                    "says version \(migration.version), but its name says \(Int(digits) ?? -1); make them agree")
            }
            migration.checksum = SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
            migrations.append(migration)
        }
        migrations.sort { $0.version < $1.version }
        for (previous, next) in zip(migrations, migrations.dropFirst()) {
            if next.version == previous.version {
                throw MigrationError(
                    file: next.file, "has version \(next.version), as \(previous.file) does; each version is one file")
            }
            if next.version != previous.version + 1 {
                let missing = (previous.version + 1..<next.version).map { String(format: "%04d", $0) }.joined(
                    separator: ", ")
                throw MigrationError(
                    file: next.file,
                    "follows version \(previous.version): \(missing) is missing (add it, or renumber the files after it)"
                )
            }
        }
        if let first = migrations.first, first.version != 1 {
            throw MigrationError(
                file: first.file, "the first migration must be version 1 (0001_…), found \(first.version)")
        }
        let name = URL(fileURLWithPath: directory).standardized.lastPathComponent
        return MigrationSet(name: name, directory: directory, migrations: migrations, appendOnly: appendOnly)
    }
}

/// Reads one migration file (YAML) into steps, naming the file and line of every problem.
struct MigrationFileReader {
    let file: String
    let custom: [String: CustomStep]

    func fail(_ node: Node?, _ message: Message) -> MigrationError {
        MigrationError(file: file, line: node?.mark?.line, message)
    }

    func root(_ text: String) throws -> Node.Mapping {
        let node: Node?
        do { node = try Yams.compose(yaml: text) } catch {
            throw MigrationError(file: file, "is not valid YAML: \(error)")
        }
        guard let node else { throw MigrationError(file: file, "is empty") }
        guard let mapping = node.mapping else {
            throw fail(node, "must be a mapping with version, description and steps")
        }
        return mapping
    }

    func readSet(_ text: String) throws -> Set<String> {
        let top = try root(text)
        try keys(top, ["appendOnly"], "set.yaml")
        guard let list = top["appendOnly"] else { return [] }
        return Set(try strings(list, "appendOnly"))
    }

    func readMigration(_ text: String) throws -> Migration {
        let top = try root(text)
        try keys(top, ["version", "description", "steps"], "a migration")
        guard let versionNode = top["version"], let version = versionNode.int, versionNode.scalar?.style == .plain,
            version > 0
        else {
            throw fail(top["version"], "needs version: a whole number above 0")
        }
        let description = try top["description"].map { try string($0, "description") } ?? ""
        var steps: [MigrationStep] = []
        var lines: [Int] = []
        if let stepsNode = top["steps"], stepsNode.scalar?.string != "" || stepsNode.sequence != nil {
            guard let list = stepsNode.sequence else {
                throw fail(stepsNode, "steps must be a list (- renameField: {…})")
            }
            for node in list {
                steps.append(try step(node))
                lines.append(node.mark?.line ?? 0)
            }
        }
        return Migration(version: version, description: description, steps: steps, file: file, stepLines: lines)
    }

    // MARK: Steps

    func step(_ node: Node) throws -> MigrationStep {
        guard let mapping = node.mapping, mapping.count == 1, let (kindNode, body) = mapping.first,
            let kind = kindNode.string
        else {
            throw fail(
                node, "a step is one kind with its settings, e.g. - renameField: {type: Note, from: body, to: content}")
        }
        let kinds = [
            "addField", "renameField", "changeType", "removeField", "migrateRecordType", "setField", "deleteRecords",
            "custom",
        ]
        guard kinds.contains(kind) else {
            throw fail(kindNode, "unknown step '\(kind)' (steps: \(kinds.joined(separator: ", ")))")
        }
        guard let settings = body.mapping else { throw fail(body, "\(kind) needs its settings as a mapping") }
        func text(_ key: String) throws -> String {
            guard let value = settings[key] else { throw fail(body, "\(kind) needs '\(key)'") }
            return try string(value, key)
        }
        func optionalText(_ key: String) throws -> String? { try settings[key].map { try string($0, key) } }
        func flag(_ key: String) throws -> Bool? {
            guard let value = settings[key] else { return nil }
            guard let bool = value.bool else { throw fail(value, "\(key) is true or false") }
            return bool
        }
        switch kind {
        case "addField":
            try keys(settings, ["type", "field", "fieldType", "default"], kind)
            let field = try fieldDefinition(try text("field"), try text("fieldType"), settings["fieldType"])
            let defaultValue = try settings["default"].map { try value($0, as: field.type) }
            return .addField(type: try text("type"), field: field, defaultValue: defaultValue)
        case "renameField":
            try keys(settings, ["type", "from", "to"], kind)
            return .renameField(type: try text("type"), from: try text("from"), to: try text("to"))
        case "changeType":
            try keys(settings, ["type", "field", "to", "map", "into", "default", "onError"], kind)
            let target = try fieldDefinition("x", try text("to"), settings["to"]).type
            return .changeType(
                type: try text("type"), field: try text("field"), conversion: try conversion(settings, to: target),
                into: try optionalText("into"))
        case "removeField":
            try keys(settings, ["type", "field", "purge"], kind)
            return .removeField(type: try text("type"), field: try text("field"), purge: try flag("purge") ?? false)
        case "migrateRecordType":
            try keys(settings, ["from", "to", "fields", "drop", "name", "keepSource"], kind)
            var fields: [String: RecordTypeFieldMapping] = [:]
            if let node = settings["fields"] {
                guard let map = node.mapping else {
                    throw fail(node, "fields maps old names to new ones: {body: content}")
                }
                for (key, target) in map {
                    guard let from = key.string else { throw fail(key, "a field name") }
                    if let name = target.string, target.scalar != nil {
                        fields[from] = RecordTypeFieldMapping(to: name)
                    } else if let spec = target.mapping {
                        try keys(spec, ["to", "type", "map", "default", "onError"], "a field of migrateRecordType")
                        guard let toNode = spec["to"] else { throw fail(target, "needs 'to': the new field's name") }
                        var conversion: Conversion?
                        if let typeNode = spec["type"] {
                            conversion = try self.conversion(
                                spec, to: try fieldDefinition("x", try string(typeNode, "type"), typeNode).type)
                        }
                        fields[from] = RecordTypeFieldMapping(to: try string(toNode, "to"), conversion: conversion)
                    } else {
                        throw fail(target, "a field maps to a name, or to {to: name, type: TYPE, map: {…}}")
                    }
                }
            }
            let drop = Set(try settings["drop"].map { try strings($0, "drop") } ?? [])
            let template = try optionalText("name")
            if let template, !template.contains("{recordName}") {
                throw fail(settings["name"], "name is a template holding {recordName}, e.g. v2-{recordName}")
            }
            return .migrateRecordType(
                from: try text("from"), to: try text("to"), fields: fields, drop: drop,
                nameTemplate: template, keepSource: try flag("keepSource") ?? false)
        case "setField":
            try keys(settings, ["type", "field", "value", "expression", "fieldType", "where"], kind)
            let value: SetValue
            switch (settings["value"], settings["expression"]) {
            case (let constant?, nil): value = .constant(try json(constant))
            case (nil, let expression?):
                do { value = .expression(try Expression.parse(try string(expression, "expression"))) } catch let error
                    as ExpressionError
                {
                    throw fail(expression, "expression: \(error)")
                }
            default: throw fail(body, "setField needs either value or expression")
            }
            let fieldType = try optionalText("fieldType").map {
                try fieldDefinition("x", $0, settings["fieldType"]).type
            }
            return .setField(
                type: try text("type"), field: try text("field"), value: value, fieldType: fieldType,
                where: try predicate(settings["where"]))
        case "deleteRecords":
            try keys(settings, ["type", "where"], kind)
            return .deleteRecords(type: try text("type"), where: try predicate(settings["where"]))
        default:
            try keys(settings, ["name"], kind)
            let name = try text("name")
            guard let step = custom[name] else {
                throw fail(
                    settings["name"],
                    "no custom step '\(name)' is registered (register it through the library: MigrationSet.load(directory:customSteps:))"
                )
            }
            return .custom(step)
        }
    }

    func conversion(_ settings: Node.Mapping, to target: FieldType) throws -> Conversion {
        var result = Conversion(to: target)
        if let mapNode = settings["map"] {
            guard let map = mapNode.mapping else {
                throw fail(mapNode, "map is a mapping of old values to new ones: {0: low, 1: medium}")
            }
            var values: [String: FieldValue] = [:]
            for (key, value) in map {
                guard let keyText = key.string else { throw fail(key, "map keys are values such as 0 or low") }
                values[keyText] = try self.value(value, as: target)
            }
            result.map = values
        }
        if let node = settings["default"] { result.defaultValue = try value(node, as: target) }
        if let node = settings["onError"] {
            switch node.string {
            case "fail": result.onError = .fail
            case "null": result.onError = .null
            case "default":
                guard result.defaultValue != nil else { throw fail(node, "onError: default needs a default") }
                result.onError = .useDefault
            default: throw fail(node, "onError is fail, null or default")
            }
        }
        return result
    }

    // MARK: Values

    func keys(_ mapping: Node.Mapping, _ allowed: [String], _ what: String) throws {
        for (key, _) in mapping where !allowed.contains(key.string ?? "") {
            throw fail(
                key, "\(what) has no setting '\(key.string ?? "")' (it takes \(allowed.joined(separator: ", ")))")
        }
    }

    func string(_ node: Node, _ what: String) throws -> String {
        guard let scalar = node.scalar else { throw fail(node, "\(what) must be text") }
        return scalar.string
    }

    func strings(_ node: Node, _ what: String) throws -> [String] {
        guard let list = node.sequence else { throw fail(node, "\(what) is a list: [A, B]") }
        return try list.map { try string($0, what) }
    }

    func predicate(_ node: Node?) throws -> RecordPredicate? {
        guard let node else { return nil }
        do { return try RecordPredicate.parse(try string(node, "where")) } catch let error as Records.PredicateError {
            throw fail(node, "where: \(error)")
        }
    }

    /// A field type (and options) in the schema language: `STRING`, `LIST<STRING>`, `INT64 QUERYABLE`.
    func fieldDefinition(_ name: String, _ typeText: String, _ node: Node?) throws -> FieldDefinition {
        let quotedName = "\"" + name + "\""
        guard let schema = try? SchemaParser.parse("DEFINE SCHEMA RECORD TYPE T (\(quotedName) \(typeText));"),
            let field = schema.recordTypes.first?.field(named: name)
        else {
            throw fail(
                node,
                "'\(typeText)' is not a field type (STRING, INT64, DOUBLE, TIMESTAMP, BYTES, REFERENCE, ASSET, LOCATION, LIST<…>, with QUERYABLE, SORTABLE, SEARCHABLE)"
            )
        }
        return field
    }

    func json(_ node: Node) throws -> JSONValue {
        switch node {
        case .scalar(let scalar):
            if scalar.style == .plain {
                if node.null != nil { return .null }
                if let bool = node.bool { return .number(bool ? "1" : "0") }
                if node.int != nil || node.float != nil { return .number(scalar.string) }
            }
            return .string(scalar.string)
        case .sequence(let list): return .array(try list.map { try json($0) })
        case .mapping(let mapping):
            var members: [JSONObject.Member] = []
            for (key, value) in mapping {
                members.append(JSONObject.Member(key: try string(key, "a key"), value: try json(value)))
            }
            return .object(JSONObject(members))
        case .alias: throw fail(node, "aliases are not used in migration files")
        }
    }

    func value(_ node: Node, as type: FieldType) throws -> FieldValue {
        do { return try FieldValueJSON.read(try json(node), as: type) } catch let error as ValueError {
            throw fail(node, "not a \(type) value: \(error.message)")
        }
    }
}
