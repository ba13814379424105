import Records
import StoreCore

/// What a migration does to one record.
public enum RecordOutcome: Sendable {
    /// No step changes it (or it is already at the migration's version).
    case unchanged
    /// Its `_schemaVersion` is above every migration the set knows: left alone and reported.
    case future(Int64)
    /// The records it becomes (none: it is deleted).
    case changed([Record])
    case failed(RecordFailure)
}

/// Why a record cannot be migrated.
public struct RecordFailure: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var recordName: String
    public var recordType: String
    public var field: String?
    /// Where the step is: `0002_priority.yaml:9 (changeType)`.
    public var step: String
    public var message: Message

    public init(recordName: String, recordType: String, field: String?, step: String, message: Message) {
        self.recordName = recordName
        self.recordType = recordType
        self.field = field
        self.step = step
        self.message = message
    }

    public var description: String { explanation.description }

    public var explanation: Message {
        "record '\(recordName)' (\(recordType))\(field.map { ", field '\($0)'" } ?? ""): \(message) [\(step)]"
    }
}

/// A migration checked against the schema it starts from: the schema it leaves, and the
/// function that takes each record from one to the other.
public struct CompiledMigration: Sendable {
    public let migration: Migration
    public let schemaBefore: Schema
    public let schemaAfter: Schema
    /// The types whose records the migration reads.
    public let sourceTypes: Set<String>
    /// The types it writes records into (its sources and their targets).
    public let touchedTypes: Set<String>
    let steps: [CompiledStep]
    /// Types that carry `_schemaVersion` after the migration.
    let stampedTypes: Set<String>
    /// Where each step is, for messages (worked out once, not per record).
    let places: [String]
    let latestVersion: Int
    let appendOnly: Set<String>
    let force: Bool
    /// Names of records whose names change (`migrateRecordType` with a template), by zone,
    /// for repointing references; filled in by the runner before the records flow.
    var renamed = NameMap() { didSet { repoints = !renamed.isEmpty } }
    /// Whether some record changes its name, so that references are repointed: read once
    /// when the runner fills ``renamed`` (complete before records flow), not per record.
    private(set) var repoints = false

    public static let versionField = "_schemaVersion"
    public static let migratedFromField = "_migratedFrom"

    /// A class, so that taking each record through the steps hands each step over with one
    /// reference count, not a copy of everything it holds.
    final class CompiledStep: Sendable {
        let index: Int
        let step: MigrationStep
        /// The source type's definition as the step sees it.
        let type: RecordTypeDefinition?
        let setValue: FieldValue?
        let setType: FieldType?

        init(index: Int, step: MigrationStep, type: RecordTypeDefinition?, setValue: FieldValue?, setType: FieldType?) {
            self.index = index
            self.step = step
            self.type = type
            self.setValue = setValue
            self.setType = setType
        }
    }

    /// Checks `migration` against `schema` and works out the schema it leaves.
    public init(
        _ migration: Migration, schema: Schema, latestVersion: Int, appendOnly: Set<String> = [], force: Bool = false
    ) throws {
        self.migration = migration
        self.latestVersion = latestVersion
        self.appendOnly = appendOnly
        self.force = force
        schemaBefore = schema
        var schema = schema
        var compiled: [CompiledStep] = []
        var sources: Set<String> = []
        var touched: Set<String> = []
        func fail(_ index: Int, _ message: Message) -> MigrationError {
            MigrationError(
                file: migration.file,
                line: migration.stepLines.indices.contains(index) && migration.stepLines[index] > 0
                    ? migration.stepLines[index] : nil,
                "\(migration.steps[index].kind): \(message)")
        }
        func typeIndex(_ name: String, _ index: Int) throws -> Int {
            guard let found = schema.recordTypes.firstIndex(where: { $0.name == name }) else {
                throw fail(
                    index,
                    "the schema has no record type '\(name)' here (it has \(schema.recordTypes.map(\.name).sorted().joined(separator: ", ")))"
                )
            }
            return found
        }
        func fieldIndex(_ name: String, in type: Int, _ index: Int) throws -> Int {
            guard let found = schema.recordTypes[type].fields.firstIndex(where: { $0.name == name && !$0.isSystem })
            else {
                throw fail(
                    index,
                    "record type \(schema.recordTypes[type].name) has no field '\(name)' here (it has \(schema.recordTypes[type].userFields.map(\.name).joined(separator: ", ")))"
                )
            }
            return found
        }
        func addField(_ field: FieldDefinition, to type: Int, _ index: Int) throws {
            if let existing = schema.recordTypes[type].field(named: field.name) {
                guard existing.type == field.type else {
                    throw fail(
                        index,
                        "\(schema.recordTypes[type].name).\(field.name) already exists as \(existing.type), not \(field.type)"
                    )
                }
                return
            }
            if let problem = Names.fieldNameProblem(field.name) { throw fail(index, Message(problem)) }
            schema.recordTypes[type].fields.append(field)
        }
        func stampable(_ type: Int, _ index: Int) throws {
            try addField(
                FieldDefinition(name: CompiledMigration.versionField, type: .int64, options: .queryable), to: type,
                index)
        }
        for (index, step) in migration.steps.enumerated() {
            var stepType: RecordTypeDefinition?
            var setValue: FieldValue?
            var setType: FieldType?
            switch step {
            case .addField(let typeName, let field, _):
                let t = try typeIndex(typeName, index)
                try addField(field, to: t, index)
                stepType = schema.recordTypes[t]
                try stampable(t, index)
            case .renameField(let typeName, let from, let to):
                let t = try typeIndex(typeName, index)
                let f = try fieldIndex(from, in: t, index)
                if schema.recordTypes[t].field(named: to) != nil {
                    throw fail(index, "\(typeName) already has a field '\(to)'")
                }
                if let problem = Names.fieldNameProblem(to) { throw fail(index, Message(problem)) }
                schema.recordTypes[t].fields[f].name = to
                stepType = schema.recordTypes[t]
                try stampable(t, index)
            case .changeType(let typeName, let field, let conversion, let into):
                let t = try typeIndex(typeName, index)
                let f = try fieldIndex(field, in: t, index)
                let source = schema.recordTypes[t].fields[f]
                if let into {
                    var target = source
                    target.name = into
                    target.type = conversion.to
                    try addField(target, to: t, index)
                } else {
                    schema.recordTypes[t].fields[f].type = conversion.to
                }
                stepType = schema.recordTypes[t]
                try stampable(t, index)
            case .removeField(let typeName, let field, _):
                let t = try typeIndex(typeName, index)
                let f = try fieldIndex(field, in: t, index)
                schema.recordTypes[t].fields.remove(at: f)
                stepType = schema.recordTypes[t]
            case .migrateRecordType(let from, let to, let fields, let drop, let template, let keepSource):
                let s = try typeIndex(from, index)
                let source = schema.recordTypes[s]
                if keepSource && template == nil {
                    throw fail(
                        index,
                        "keepSource: true needs a name template, since both records live on (name: v2-{recordName})")
                }
                for name in fields.keys.sorted() + drop.sorted() where source.field(named: name) == nil {
                    throw fail(
                        index,
                        "record type \(from) has no field '\(name)' (it has \(source.userFields.map(\.name).joined(separator: ", ")))"
                    )
                }
                if schema.recordType(named: to) == nil {
                    schema.recordTypes.append(
                        RecordTypeDefinition(name: to, fields: source.fields.filter(\.isSystem), grants: source.grants))
                }
                let t = try typeIndex(to, index)
                for field in source.userFields where !drop.contains(field.name) {
                    var target = field
                    if let mapping = fields[field.name] {
                        target.name = mapping.to
                        if let conversion = mapping.conversion { target.type = conversion.to }
                    }
                    try addField(target, to: t, index)
                }
                try addField(FieldDefinition(name: CompiledMigration.migratedFromField, type: .string), to: t, index)
                try stampable(t, index)
                stepType = source
                touched.insert(to)
            case .setField(let typeName, let field, let value, let fieldType, let predicate):
                let t = try typeIndex(typeName, index)
                var type = fieldType
                if case .constant(let json) = value, type == nil, schema.recordTypes[t].field(named: field) == nil {
                    type = FieldValueJSON.inferType(of: json)
                }
                if schema.recordTypes[t].field(named: field) == nil {
                    guard let type else {
                        throw fail(index, "\(typeName) has no field '\(field)'; give its fieldType to add it")
                    }
                    try addField(FieldDefinition(name: field, type: type), to: t, index)
                }
                let definition = schema.recordTypes[t].field(named: field)!
                setType = definition.type
                switch value {
                case .constant(let json):
                    do { setValue = try FieldValueJSON.read(json, as: definition.type) } catch {
                        throw fail(index, "value is not a \(definition.type): \(error.message)")
                    }
                case .expression(let expression):
                    for name in expression.fieldNames where schema.recordTypes[t].field(named: name) == nil {
                        throw fail(index, "the expression reads '\(name)', which \(typeName) does not have")
                    }
                }
                if let predicate {
                    for name in predicate.fieldNames
                    where !["recordName", "___createTime", "___modTime"].contains(name)
                        && schema.recordTypes[t].field(named: name) == nil
                    {
                        throw fail(index, "where names '\(name)', which \(typeName) does not have")
                    }
                }
                stepType = schema.recordTypes[t]
                try stampable(t, index)
            case .deleteRecords(let typeName, _):
                let t = try typeIndex(typeName, index)
                stepType = schema.recordTypes[t]
            case .custom(let custom):
                do { try custom.schema(&schema) } catch { throw fail(index, "\(custom.name): \(error)") }
                for name in custom.recordTypes {
                    let t = try typeIndex(name, index)
                    try stampable(t, index)
                }
            }
            sources.formUnion(step.sourceTypes)
            touched.formUnion(step.sourceTypes)
            compiled.append(
                CompiledStep(index: index, step: step, type: stepType, setValue: setValue, setType: setType))
        }
        do {
            _ = try SchemaParser.parse(
                SchemaPrinter.print(schema), file: "the schema after version \(migration.version)")
        } catch {
            throw MigrationError(file: migration.file, "leaves a schema CloudKit would not accept: \(error)")
        }
        steps = compiled
        places = migration.steps.indices.map { migration.place(ofStep: $0) }
        stampedTypes = Set(
            schema.recordTypes.filter { $0.field(named: CompiledMigration.versionField) != nil }.map(\.name))
        schemaAfter = schema
        sourceTypes = sources
        touchedTypes = touched
    }

    /// Whether every step only adds, renames, sets or deletes, so that the store can migrate
    /// each type in place instead of rebuilding its table.
    public var canRunInPlace: Bool {
        steps.allSatisfy { entry in
            switch entry.step {
            case .addField, .renameField, .setField, .deleteRecords: return true
            case .changeType(_, _, _, let into): return into != nil
            default: return false
            }
        }
    }

    /// For each type, its renamed fields: the name before the migration → the name after.
    public var renames: [String: [String: String]] {
        var result: [String: [String: String]] = [:]
        for entry in steps {
            guard case .renameField(let type, let from, let to) = entry.step else { continue }
            var map = result[type, default: [:]]
            let original = map.first(where: { $0.value == from })?.key ?? from
            map[original] = to
            result[type] = map
        }
        return result
    }

    /// For each type, the fields (by their names after the migration) whose values the steps
    /// may write; renamed fields keep their values under the new name without a write.
    public var writes: [String: Set<String>] {
        var result: [String: Set<String>] = [:]
        for entry in steps {
            switch entry.step {
            case .addField(let type, let field, _): result[type, default: []].insert(field.name)
            case .changeType(let type, let field, _, let into): result[type, default: []].insert(into ?? field)
            case .setField(let type, let field, _, _, _): result[type, default: []].insert(field)
            // A field written before a rename is written under the name it ends with.
            case .renameField(let type, let from, let to):
                if result[type]?.remove(from) != nil { result[type]!.insert(to) }
            default: break
            }
        }
        for type in Array(result.keys) + sourceTypes.map({ $0 }) where stampedTypes.contains(type) {
            result[type, default: []].insert(CompiledMigration.versionField)
        }
        return result
    }

    /// For each type, the fields whose values `migrate` reads, by their names before the
    /// migration (and, to be safe, under every name a rename gives them): with the record's
    /// name, zone and times, all it looks at when the migration runs in place. A store may
    /// hand the transform records that carry only these (see
    /// ``RecordSession/updateInPlace(type:into:renames:writes:reads:_:)``). Nil when a step
    /// reads whole records (`migrateRecordType`, `removeField`, custom steps) or a `where`
    /// names a record's links.
    public var reads: [String: Set<String>]? {
        var result: [String: Set<String>] = [:]
        // The name each field had before the migration, by the name it has at the current step.
        var originals: [String: [String: String]] = [:]
        func read(_ type: String, _ names: [String]) {
            for name in names {
                result[type, default: []].insert(name)
                if let original = originals[type]?[name] { result[type, default: []].insert(original) }
            }
        }
        for entry in steps {
            switch entry.step {
            case .addField(let type, let field, _):
                read(type, [field.name])
            case .renameField(let type, let from, let to):
                read(type, [from, to])
                let original = originals[type]?[from] ?? from
                originals[type, default: [:]][from] = nil
                originals[type, default: [:]][to] = original
            case .changeType(let type, let field, _, let into):
                read(type, [field, into ?? field])
            case .setField(let type, let field, let value, _, let predicate):
                if predicate?.fieldNames.contains(where: CompiledMigration.linkNames.contains) == true { return nil }
                read(type, [field] + (predicate?.fieldNames ?? []))
                if case .expression(let expression) = value { read(type, expression.fieldNames) }
            case .deleteRecords(let type, let predicate):
                if predicate?.fieldNames.contains(where: CompiledMigration.linkNames.contains) == true { return nil }
                read(type, predicate?.fieldNames ?? [])
            case .migrateRecordType, .removeField, .custom:
                return nil
            }
        }
        for type in Set(result.keys).union(sourceTypes) {
            read(type, [CompiledMigration.versionField])
        }
        return result
    }

    /// Names by which a predicate reads a record's parent or share, which records handed over
    /// with only some fields do not carry.
    private static let linkNames: Set<String> = ["___parent", "___share", "parent", "share"]

    /// The name templates of the migration's `migrateRecordType` steps, by source type.
    public var renamingTypes: [String: (template: String, keepSource: Bool)] {
        var result: [String: (String, Bool)] = [:]
        for entry in steps {
            if case .migrateRecordType(let from, _, _, _, let template?, let keep) = entry.step {
                result[from] = (template, keep)
            }
        }
        return result
    }

    static func name(_ template: String, _ recordName: String) -> String {
        template.replacingOccurrences(of: "{recordName}", with: recordName)
    }

    /// What one step did to a record.
    enum StepEffect {
        case same
        case changed
        /// The record became these (none: deleted; two: kept beside a copy).
        case replaced([Record])
    }

    /// Takes one record through every step.
    public func migrate(_ record: Record) -> RecordOutcome {
        if case .int64(let version)? = record.fields[CompiledMigration.versionField] {
            if version > Int64(latestVersion) { return .future(version) }
            if version >= Int64(migration.version) { return .unchanged }
        }
        // Most records stay one record through every step: that path allocates nothing extra.
        var single = record
        var many: [Record]?
        var changed = false
        for entry in steps {
            do {
                if many == nil {
                    switch try apply(entry, to: &single) {
                    case .same: break
                    case .changed: changed = true
                    case .replaced(let records):
                        many = records
                        changed = true
                    }
                } else {
                    var next: [Record] = []
                    for var item in many! {
                        switch try apply(entry, to: &item) {
                        case .same: next.append(item)
                        case .changed:
                            next.append(item)
                            changed = true
                        case .replaced(let records):
                            next += records
                            changed = true
                        }
                    }
                    many = next
                }
            } catch let failure as RecordFailure {
                return .failed(failure)
            } catch {
                return .failed(
                    RecordFailure(
                        recordName: record.recordName, recordType: record.recordType, field: nil,
                        step: places[entry.index], message: "\(error)"))
            }
        }
        // Which results are the record as it was, each compared once. One result, the usual
        // case, goes through without a list of them.
        func appendOnlyRefusal() -> RecordOutcome {
            .failed(
                RecordFailure(
                    recordName: record.recordName, recordType: record.recordType, field: nil,
                    step: places.first ?? migration.file,
                    message:
                        "\(record.recordType) is append-only in this migration set: existing records are not changed (\(Wording.forceAppendOnly))"
                ))
        }
        func repointFailure(_ error: any Error) -> RecordOutcome {
            .failed(
                RecordFailure(
                    recordName: record.recordName, recordType: record.recordType, field: nil,
                    step: places.first ?? migration.file,
                    message: "the names of renamed records could not be read: \(error)"))
        }
        let version = FieldValue.int64(Int64(migration.version))
        guard var current = many else {
            // References to records that moved to new names follow them.
            if repoints {
                do { if try repoint(&single, in: record.zone) { changed = true } } catch {
                    return repointFailure(error)
                }
            }
            guard changed, single != record else { return .unchanged }
            if !appendOnly.isEmpty && appendOnly.contains(record.recordType) && !force { return appendOnlyRefusal() }
            if stampedTypes.contains(single.recordType) { single.fields[CompiledMigration.versionField] = version }
            return .changed([single])
        }
        if repoints {
            do {
                for index in current.indices where try repoint(&current[index], in: record.zone) { changed = true }
            } catch {
                return repointFailure(error)
            }
        }
        guard changed else { return .unchanged }
        let same = current.map { $0 == record }
        if current.count == 1 && same[0] { return .unchanged }
        if appendOnly.contains(record.recordType) && !force && !same.contains(true) { return appendOnlyRefusal() }
        for index in current.indices where !same[index] && stampedTypes.contains(current[index].recordType) {
            current[index].fields[CompiledMigration.versionField] = version
        }
        return .changed(current)
    }

    /// Points references, and the `parent` and `share` links, at records' new names; true
    /// when something changed.
    private func repoint(_ record: inout Record, in zone: ZoneID) throws -> Bool {
        func newName(_ name: String) throws -> String? { try renamed.newName(of: name, in: zone) }
        var changed = false
        if let parent = record.parent, let moved = try newName(parent) {
            record.parent = moved
            changed = true
        }
        if let share = record.share, let moved = try newName(share) {
            record.share = moved
            changed = true
        }
        for (field, value) in record.fields {
            switch value {
            case .reference(var reference):
                if let moved = try newName(reference.recordName) {
                    reference.recordName = moved
                    record.fields[field] = .reference(reference)
                    changed = true
                }
            case .list(.reference, let items):
                let mapped = try items.map { item -> FieldValue in
                    if case .reference(var reference) = item, let moved = try newName(reference.recordName) {
                        reference.recordName = moved
                        return .reference(reference)
                    }
                    return item
                }
                if mapped != items {
                    record.fields[field] = .list(.reference, mapped)
                    changed = true
                }
            default: break
            }
        }
        return changed
    }

    private func apply(_ entry: CompiledStep, to record: inout Record) throws -> StepEffect {
        func failure(_ field: String?, _ message: Message) -> RecordFailure {
            RecordFailure(
                recordName: record.recordName, recordType: record.recordType, field: field, step: places[entry.index],
                message: message)
        }
        switch entry.step {
        case .addField(let type, let field, let defaultValue):
            guard record.recordType == type, let defaultValue, record.fields[field.name] == nil else { return .same }
            record.fields[field.name] = defaultValue
            return .changed
        case .renameField(let type, let from, let to):
            guard record.recordType == type, let value = record.fields[from] else { return .same }
            record.fields[from] = nil
            record.fields[to] = value
            return .changed
        case .changeType(let type, let field, let conversion, let into):
            guard record.recordType == type else { return .same }
            let target = into ?? field
            // Converting into a field that already holds a value keeps that value.
            if into != nil, record.fields[target] != nil { return .same }
            switch conversion.apply(record.fields[field]) {
            case .success(let value):
                if record.fields[target] == value { return .same }
                record.fields[target] = value
                return .changed
            case .failure(let problem):
                throw failure(field, Message(problem.message))
            }
        case .removeField(let type, let field, let purge):
            guard record.recordType == type, record.fields[field] != nil else { return .same }
            guard purge else {
                throw failure(
                    field, "holds a value, which removing the field would lose (purge: true removes the values too)")
            }
            record.fields[field] = nil
            return .changed
        case .migrateRecordType(let from, let to, let fields, let drop, let template, let keepSource):
            guard record.recordType == from else { return .same }
            var migrated = Record(
                id: record.id, recordType: to, changeTag: record.changeTag, created: record.created,
                modified: record.modified,
                parent: record.parent)
            // A share has one root: the new record takes it over, unless the old one stays.
            if !keepSource {
                migrated.share = record.share
                migrated.shareDetails = record.shareDetails
            }
            if let template { migrated.id.recordName = CompiledMigration.name(template, record.recordName) }
            for (name, value) in record.fields where !drop.contains(name) && name != CompiledMigration.versionField {
                guard let mapping = fields[name] else {
                    migrated.fields[name] = value
                    continue
                }
                if let conversion = mapping.conversion {
                    switch conversion.apply(value) {
                    case .success(let converted): migrated.fields[mapping.to] = converted
                    case .failure(let problem): throw failure(name, Message(problem.message))
                    }
                } else {
                    migrated.fields[mapping.to] = value
                }
            }
            migrated.fields[CompiledMigration.migratedFromField] = .string(record.recordName)
            return .replaced(keepSource ? [record, migrated] : [migrated])
        case .setField(let type, let field, let value, _, let predicate):
            guard record.recordType == type else { return .same }
            if let predicate, let definition = entry.type {
                do { guard try predicate.matches(record, type: definition) else { return .same } } catch {
                    throw failure(nil, "where: \(error)")
                }
            }
            let newValue: FieldValue?
            switch value {
            case .constant:
                newValue = entry.setValue
            case .expression(let expression):
                do {
                    newValue = try expression.evaluate(record).fieldValue(as: entry.setType!)
                } catch {
                    throw failure(field, "\(expression): \(error.message)")
                }
            }
            if record.fields[field] == newValue { return .same }
            record.fields[field] = newValue
            return .changed
        case .deleteRecords(let type, let predicate):
            guard record.recordType == type else { return .same }
            if let predicate, let definition = entry.type {
                do { guard try predicate.matches(record, type: definition) else { return .same } } catch {
                    throw failure(nil, "where: \(error)")
                }
            }
            return .replaced([])
        case .custom(let custom):
            guard custom.recordTypes.contains(record.recordType) else { return .same }
            let result: Record?
            do { result = try custom.transform(record) } catch {
                throw failure(nil, "\(custom.name): \(error)")
            }
            guard let result else { return .replaced([]) }
            if result == record { return .same }
            record = result
            return .changed
        }
    }
}
