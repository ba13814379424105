import Records
import StoreCore

/// A migration's steps for one record type, worked out once against the type's fields in the
/// store's working shape, so that a migration done in place can take each record's values
/// where they are instead of building a record and looking its fields up by name at every
/// step: renames cost nothing per record (a value keeps its place and only its name changes),
/// and each step reads and writes places found when the plan was made.
///
/// It does what ``CompiledMigration/migrate(_:)`` does to a record of the type, with the same
/// outcomes and failures, for migrations whose steps on the type add, rename, convert into a
/// new field and set fields without a `where`; anything else has no plan, and records are
/// built as before.
struct ValuesPlan {
    enum Outcome {
        case unchanged
        case future(Int64)
        case changed
    }

    private enum Operation {
        case add(Int, FieldValue)
        case convert(source: Int, target: Int, Conversion, field: String, step: Int)
        case set(Int, FieldValue?)
        case compute(Int, Expression, FieldType, places: [String: Int], field: String, step: Int)
    }

    private let type: String
    private let operations: [Operation]
    /// Places whose values a step may change, compared with what they held at the start.
    private let touched: [Int]
    /// Places whose fields end under another name: a record with a value there changes.
    private let renamed: [Int]
    /// Where the version a record carries is read (its place at the start) and stamped (at the end).
    private let versionRead: Int?
    private let versionPlace: Int?
    private let version: Int64
    private let latestVersion: Int64
    private let stamps: Bool
    private let refusesChanges: Bool
    private let places: [String]
    private let firstPlace: String

    /// Nil when a step needs more than the type's field values.
    init?(_ migration: CompiledMigration, type: String, fields: [String]) {
        guard !migration.repoints else { return nil }
        var place: [String: Int] = [:]
        for (index, name) in fields.enumerated() { place[name] = index }
        var operations: [Operation] = []
        var touched: Set<Int> = []
        for entry in migration.steps {
            switch entry.step {
            case .addField(let stepType, let field, let value):
                guard stepType == type else { continue }
                guard let value else { continue }
                guard let slot = place[field.name] else { return nil }
                operations.append(.add(slot, value))
                touched.insert(slot)
            case .renameField(let stepType, let from, let to):
                guard stepType == type else { continue }
                guard let slot = place[from], place[to] == nil else { return nil }
                place[from] = nil
                place[to] = slot
            case .changeType(let stepType, let field, let conversion, let into):
                guard stepType == type else { continue }
                guard let into, let source = place[field], let target = place[into] else { return nil }
                operations.append(.convert(source: source, target: target, conversion, field: field, step: entry.index))
                touched.insert(target)
            case .setField(let stepType, let field, let value, _, let predicate):
                guard stepType == type else { continue }
                guard predicate == nil, let slot = place[field] else { return nil }
                switch value {
                case .constant: operations.append(.set(slot, entry.setValue))
                case .expression(let expression):
                    guard let fieldType = entry.setType else { return nil }
                    operations.append(
                        .compute(slot, expression, fieldType, places: place, field: field, step: entry.index))
                }
                touched.insert(slot)
            case .removeField(let stepType, _, _):
                if stepType == type { return nil }
            case .migrateRecordType(let from, _, _, _, _, _):
                if from == type { return nil }
            case .deleteRecords(let stepType, _):
                if stepType == type { return nil }
            case .custom(let custom):
                if custom.recordTypes.contains(type) { return nil }
            }
        }
        // A place's name at the end against its name at the start.
        var finalName: [Int: String] = [:]
        for (name, slot) in place { finalName[slot] = name }
        renamed = fields.indices.filter { finalName[$0] != fields[$0] }
        self.type = type
        self.operations = operations
        self.touched = touched.sorted()
        versionRead = fields.firstIndex(of: CompiledMigration.versionField)
        versionPlace = place[CompiledMigration.versionField]
        stamps = migration.stampedTypes.contains(type)
        guard !stamps || versionPlace != nil else { return nil }
        version = Int64(migration.migration.version)
        latestVersion = Int64(migration.latestVersion)
        refusesChanges = migration.appendOnly.contains(type) && !migration.force
        places = migration.places
        firstPlace = migration.places.first ?? migration.migration.file
    }

    /// Takes one record's values through the steps.
    func run(_ recordName: String, _ values: inout [FieldValue?]) throws(RecordFailure) -> Outcome {
        if let versionRead, case .int64(let stored)? = values[versionRead] {
            if stored > latestVersion { return .future(stored) }
            if stored >= version { return .unchanged }
        }
        func failure(_ field: String?, _ step: Int, _ message: Message) -> RecordFailure {
            RecordFailure(recordName: recordName, recordType: type, field: field, step: places[step], message: message)
        }
        let before = touched.map { values[$0] }
        for operation in operations {
            switch operation {
            case .add(let slot, let value):
                if values[slot] == nil { values[slot] = value }
            case .convert(let source, let target, let conversion, let field, let step):
                // Converting into a field that already holds a value keeps that value.
                if values[target] != nil { continue }
                switch conversion.apply(values[source]) {
                case .success(let value): values[target] = value
                case .failure(let problem): throw failure(field, step, Message(problem.message))
                }
            case .set(let slot, let value):
                values[slot] = value
            case .compute(let slot, let expression, let fieldType, let places, let field, let step):
                let value: FieldValue?
                do {
                    value = try expression.evaluate { name in places[name].flatMap { values[$0] } }.fieldValue(
                        as: fieldType)
                } catch {
                    throw failure(field, step, "\(expression): \(error.message)")
                }
                values[slot] = value
            }
        }
        var changed = renamed.contains { values[$0] != nil }
        if !changed {
            for (index, slot) in touched.enumerated() where values[slot] != before[index] {
                changed = true
                break
            }
        }
        guard changed else { return .unchanged }
        if refusesChanges {
            throw RecordFailure(
                recordName: recordName, recordType: type, field: nil, step: firstPlace,
                message:
                    "\(type) is append-only in this migration set: existing records are not changed (\(Wording.forceAppendOnly))"
            )
        }
        if stamps, let versionPlace { values[versionPlace] = .int64(version) }
        return .changed
    }
}
