import Foundation
import Records
import StoreCore

/// A step that CloudKit's production environment would refuse if the same change were
/// deployed there, with the way that it accepts.
public struct LintFinding: Sendable, Hashable, Codable, CustomStringConvertible {
    public var file: String
    public var line: Int?
    public var version: Int
    public var step: String
    public var problem: String
    public var alternative: String

    public var description: String {
        "\(file)\(line.map { ":\($0)" } ?? ""): \(step): \(problem)\n  instead: \(alternative)"
    }
}

/// Checks migration steps against what a CloudKit production schema allows: types and fields
/// are only ever added; none is removed, renamed or changes type.
public enum MigrationLint {
    public static func lint(_ set: MigrationSet) -> [LintFinding] {
        var findings: [LintFinding] = []
        for migration in set.migrations {
            for (index, step) in migration.steps.enumerated() {
                func add(_ problem: String, _ alternative: String) {
                    findings.append(
                        LintFinding(
                            file: (migration.file as NSString).lastPathComponent,
                            line: migration.stepLines.indices.contains(index) && migration.stepLines[index] > 0
                                ? migration.stepLines[index] : nil,
                            version: migration.version, step: step.kind, problem: problem, alternative: alternative))
                }
                switch step {
                case .renameField(let type, let from, let to):
                    add(
                        "renames \(type).\(from) to \(to); a production schema cannot rename a field, and apps already installed keep reading and writing '\(from)'",
                        "addField \(to) and setField \(to) with expression: \(from), keeping \(from) in the schema (apps stop writing it)"
                    )
                case .changeType(let type, let field, let conversion, nil):
                    add(
                        "changes \(type).\(field) to \(conversion.to) in place; a production schema never changes a field's type",
                        "changeType with into: a new field (e.g. \(field)\(conversion.to.primitive.rawValue.capitalized)), keeping \(field) as it is"
                    )
                case .removeField(let type, let field, _):
                    add(
                        "removes \(type).\(field); a production schema never removes a field",
                        "keep \(field) in the schema and stop writing it (deleteRecords or setField can clear data without a schema change)"
                    )
                case .migrateRecordType(let from, let to, _, _, _, let keepSource):
                    if !keepSource {
                        findings.append(
                            LintFinding(
                                file: (migration.file as NSString).lastPathComponent,
                                line: migration.stepLines.indices.contains(index) && migration.stepLines[index] > 0
                                    ? migration.stepLines[index] : nil,
                                version: migration.version, step: step.kind,
                                problem:
                                    "moves \(from) records to \(to) and deletes them; the \(from) type itself stays in a production schema for ever, and apps that only know \(from) will see their records disappear",
                                alternative:
                                    "ship the apps that read \(to) first, or keepSource: true with a name template so both live on for a while"
                            ))
                    }
                default:
                    break
                }
            }
        }
        return findings
    }
}

/// One difference between two schemas, and whether CloudKit's production environment would
/// accept it.
public struct SchemaDifference: Sendable, Hashable, Codable {
    public var change: String
    public var deployable: Bool
    public var reason: String?
}

public enum SchemaDiff {
    /// The changes from `old` to `new`. With `newOnlyAdds` (`new` is what a Core Data model's
    /// container would initialize, which only ever adds types and fields), a type or field of
    /// `old` that `new` lacks stays where it is, and is no obstacle to deploying.
    public static func differences(from old: Schema, to new: Schema, newOnlyAdds: Bool = false) -> [SchemaDifference] {
        let change = SchemaChange(from: old, to: new)
        let kept = "kept: the container of a Core Data model only adds to the schema"
        var result: [SchemaDifference] = []
        for type in change.addedTypes {
            result.append(
                SchemaDifference(
                    change:
                        "+ record type \(type.name) (\(type.userFields.map { "\($0.name) \($0.type)" }.joined(separator: ", ")))",
                    deployable: true))
        }
        for name in change.removedTypes {
            result.append(
                newOnlyAdds
                    ? SchemaDifference(change: "- record type \(name)", deployable: true, reason: kept)
                    : SchemaDifference(
                        change: "- record type \(name)", deployable: false,
                        reason: "production never removes a record type"))
        }
        for (type, field) in change.addedFields {
            result.append(SchemaDifference(change: "+ \(type).\(field.name) \(describe(field))", deployable: true))
        }
        for (type, field) in change.removedFields {
            result.append(
                newOnlyAdds
                    ? SchemaDifference(
                        change: "- \(type).\(field.name) \(describe(field))", deployable: true, reason: kept)
                    : SchemaDifference(
                        change: "- \(type).\(field.name) \(describe(field))", deployable: false,
                        reason: "production never removes a field"))
        }
        for (type, old, new) in change.retypedFields {
            result.append(
                SchemaDifference(
                    change: "~ \(type).\(old.name) \(old.type) → \(new.type)", deployable: false,
                    reason: "production never changes a field's type"))
        }
        for (type, old, new) in change.reindexedFields {
            if old.type != new.type {
                result.append(
                    SchemaDifference(
                        change: "~ \(type).\(old.name) \(old.type) → \(new.type)", deployable: false,
                        reason: "encryption and number preference are part of a field's type"))
            }
            let added = new.options.subtracting(old.options)
            let removed = old.options.subtracting(new.options)
            if !added.isEmpty {
                result.append(
                    SchemaDifference(
                        change: "+ \(type).\(old.name) index \(added.names.joined(separator: " "))", deployable: true))
            }
            if !removed.isEmpty {
                result.append(
                    SchemaDifference(
                        change: "- \(type).\(old.name) index \(removed.names.joined(separator: " "))", deployable: true)
                )
            }
        }
        for role in change.addedRoles { result.append(SchemaDifference(change: "+ role \(role)", deployable: true)) }
        for role in change.removedRoles {
            result.append(
                SchemaDifference(
                    change: "- role \(role)", deployable: false,
                    reason: "a role that grants point at cannot simply go; remove its grants first"))
        }
        for type in change.regrantedTypes {
            func text(_ grant: Grant) -> String {
                "GRANT \(grant.permissions.map(\.rawValue).joined(separator: ", ")) TO \"\(grant.role)\""
            }
            let before = Set(old.recordType(named: type)?.grants.map(text) ?? [])
            let after = Set(new.recordType(named: type)?.grants.map(text) ?? [])
            for grant in after.subtracting(before).sorted() {
                result.append(SchemaDifference(change: "+ \(type) \(grant)", deployable: true))
            }
            for grant in before.subtracting(after).sorted() {
                result.append(SchemaDifference(change: "- \(type) \(grant)", deployable: true))
            }
        }
        return result
    }

    static func describe(_ field: FieldDefinition) -> String {
        ([field.type.description] + field.options.names).joined(separator: " ")
    }
}
