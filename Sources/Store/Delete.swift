import GRDB
import Records

/// One record a delete removed, and why.
public struct DeletedRecord: Sendable, Hashable {
    public var id: RecordID
    public var recordType: String
    /// nil for a record asked for; otherwise the reference that cascaded: the deleted record
    /// pointed with DELETE_SELF at `cause` through `field`.
    public var cause: RecordID?
    public var field: String?

    public init(id: RecordID, recordType: String, cause: RecordID?, field: String?) {
        self.id = id
        self.recordType = recordType
        self.cause = cause
        self.field = field
    }
}

extension StoreSession {
    /// Deletes records and, transitively, every record that points at one of them with a
    /// DELETE_SELF reference. Refused, with nothing deleted, while a VALIDATE reference from a
    /// record that stays points at one of them. Each deleted record leaves a tombstone.
    ///
    /// - Throws: ``StoreError/deleteRefused(_:)`` for a missing record or a VALIDATE reference.
    @discardableResult
    public func delete(_ ids: [RecordID]) throws -> [DeletedRecord] {
        precondition(writable, "delete needs a write transaction")
        var plan: [DeletedRecord] = []
        var planned: Set<RecordID> = []
        var missing: [RecordID] = []
        for id in ids where !planned.contains(id) {
            guard let entry = try registryEntry(id), !entry.deleted else { missing.append(id); continue }
            planned.insert(id)
            plan.append(DeletedRecord(id: id, recordType: entry.recordType, cause: nil, field: nil))
        }
        if !missing.isEmpty { throw StoreError.missingRecords(missing) }
        plan = try DeletePlan.expand(plan, referrers: referrers(of:))
        for entry in plan {
            try removeRow(zone: try zoneRow(entry.id.zone, create: false)!, name: entry.id.recordName, type: entry.recordType)
        }
        return plan
    }

    /// Records in the target's zone holding a reference to it, single or in a list.
    func referrers(of target: RecordID) throws -> [(id: RecordID, recordType: String, field: String, action: ReferenceAction)] {
        guard let zone = try zoneRow(target.zone, create: false) else { return [] }
        var found: [(RecordID, String, String, ReferenceAction)] = []
        for type in schema.recordTypes {
            let layout = layouts[type.name]!
            for field in layout.fields where field.type.primitive == .reference {
                if field.type.isList {
                    let select = try statement("""
                        SELECT ___recordID, json_extract(json_each.value, '$.action') FROM \(layout.table), json_each(\(field.column))
                        WHERE ___zone = ?1 AND json_extract(json_each.value, '$.recordName') = ?2
                        """)
                    select.reset()
                    select.bind(1, zone)
                    select.bind(2, target.recordName)
                    while try select.step(db) {
                        let action = ReferenceAction(rawValue: select.optionalText(1) ?? "NONE") ?? .none
                        found.append((RecordID(recordName: select.text(0), zone: target.zone), type.name, field.name, action))
                    }
                    select.reset()
                } else {
                    let select = try statement("SELECT ___recordID, \(field.actionColumn!) FROM \(layout.table) WHERE \(field.column) = ?2 AND ___zone = ?1")
                    select.reset()
                    select.bind(1, zone)
                    select.bind(2, target.recordName)
                    while try select.step(db) {
                        let action = ReferenceAction(code: select.optionalInt64(1) ?? 0) ?? .none
                        found.append((RecordID(recordName: select.text(0), zone: target.zone), type.name, field.name, action))
                    }
                    select.reset()
                }
            }
        }
        return found
    }
}

extension StoreError {
    /// A delete of records that are not there (every store says it in these words).
    public static func missingRecords(_ missing: [RecordID]) -> StoreError {
        .deleteRefused("nothing was deleted: no record named \(missing.prefix(5).map { "'\($0.recordName)' in \($0.zone)" }.joined(separator: ", "))\(missing.count > 5 ? " and \(missing.count - 5) more" : "")")
    }

    /// A delete that VALIDATE references from records that stay refuse.
    public static func validateReferences(_ standing: [(source: RecordID, sourceType: String, field: String, target: RecordID)]) -> StoreError {
        let lines = standing.prefix(5).map { "\($0.sourceType) '\($0.source.recordName)' points at '\($0.target.recordName)' through \($0.field) (VALIDATE)" }
        return .deleteRefused("nothing was deleted: \(standing.count) VALIDATE reference\(standing.count == 1 ? "" : "s") still point\(standing.count == 1 ? "s" : "") at the records to delete:\n  " + lines.joined(separator: "\n  ") + (standing.count > 5 ? "\n  …and \(standing.count - 5) more" : "") + "\ndelete those records first, or change their references")
    }
}

/// How a delete spreads through references; every store walks it the same way.
public enum DeletePlan {
    /// The records asked for and, transitively, every record that points at one of them with a
    /// DELETE_SELF reference (`referrers` lists who points at a record, and how); refused while
    /// a VALIDATE reference from a record that stays points at one of them.
    public static func expand(_ asked: [DeletedRecord],
                              referrers: (RecordID) throws -> [(id: RecordID, recordType: String, field: String, action: ReferenceAction)]) throws -> [DeletedRecord] {
        var plan = asked
        var planned = Set(asked.map(\.id))
        var blockers: [(source: RecordID, sourceType: String, field: String, target: RecordID)] = []
        var next = 0
        while next < plan.count {
            let target = plan[next].id
            next += 1
            for referrer in try referrers(target) {
                switch referrer.action {
                case .deleteSelf:
                    if planned.insert(referrer.id).inserted {
                        plan.append(DeletedRecord(id: referrer.id, recordType: referrer.recordType, cause: target, field: referrer.field))
                    }
                case .validate:
                    blockers.append((referrer.id, referrer.recordType, referrer.field, target))
                case .none:
                    break
                }
            }
        }
        let standing = blockers.filter { !planned.contains($0.source) }
        if !standing.isEmpty { throw StoreError.validateReferences(standing) }
        return plan
    }
}
