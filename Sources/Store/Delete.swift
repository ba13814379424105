import Records

import class GRDB.Database

/// One record a delete removed, and why.
public struct DeletedRecord: Sendable, Hashable {
    public var id: RecordID
    public var recordType: String
    /// nil for a record asked for; otherwise what cascaded: the deleted record pointed with
    /// DELETE_SELF at `cause` through `field`, or (`field` "share") it was the share whose
    /// root `cause` was.
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
            guard let entry = try registryEntry(id), !entry.deleted else {
                missing.append(id)
                continue
            }
            planned.insert(id)
            plan.append(DeletedRecord(id: id, recordType: entry.recordType, cause: nil, field: nil))
        }
        if !missing.isEmpty { throw StoreError.missingRecords(missing) }
        plan = try DeletePlan.expand(
            plan, referrers: referrers(of:),
            share: { id, type in
                guard let layout = layouts[type], let zone = try zoneRow(id.zone, create: false) else { return nil }
                let select = try statement(
                    "SELECT ___share FROM \(layout.table) WHERE ___zone = ?1 AND ___recordID = ?2")
                select.reset()
                defer { select.reset() }
                select.bind(1, zone)
                select.bind(2, id.recordName)
                guard try select.step(db), let name = select.optionalText(0) else { return nil }
                // Only a share the store holds goes along (a link may name one that is not here).
                guard let entry = try registryEntry(RecordID(recordName: name, zone: id.zone)), !entry.deleted,
                    entry.recordType == Record.shareType
                else { return nil }
                return name
            })
        for entry in plan {
            try removeRow(
                zone: try zoneRow(entry.id.zone, create: false)!, name: entry.id.recordName, type: entry.recordType)
        }
        try DeletePlan.unlinkRoots(of: plan, in: self)
        return plan
    }

    /// Records in the target's zone holding a reference to it, single or in a list.
    func referrers(of target: RecordID) throws -> [(
        id: RecordID, recordType: String, field: String, action: ReferenceAction
    )] {
        guard let zone = try zoneRow(target.zone, create: false) else { return [] }
        var found: [(RecordID, String, String, ReferenceAction)] = []
        for type in schema.recordTypes {
            let layout = layouts[type.name]!
            for field in layout.fields where field.type.primitive == .reference {
                if field.type.isList {
                    let select = try statement(
                        """
                        SELECT ___recordID, json_extract(json_each.value, '$.action') FROM \(layout.table), json_each(\(field.column))
                        WHERE ___zone = ?1 AND json_extract(json_each.value, '$.recordName') = ?2
                        """)
                    select.reset()
                    select.bind(1, zone)
                    select.bind(2, target.recordName)
                    while try select.step(db) {
                        let action = ReferenceAction(rawValue: select.optionalText(1) ?? "NONE") ?? .none
                        found.append(
                            (RecordID(recordName: select.text(0), zone: target.zone), type.name, field.name, action))
                    }
                    select.reset()
                } else {
                    let select = try statement(
                        "SELECT ___recordID, \(field.actionColumn!) FROM \(layout.table) WHERE \(field.column) = ?2 AND ___zone = ?1"
                    )
                    select.reset()
                    select.bind(1, zone)
                    select.bind(2, target.recordName)
                    while try select.step(db) {
                        let action = ReferenceAction(code: select.optionalInt64(1) ?? 0) ?? .none
                        found.append(
                            (RecordID(recordName: select.text(0), zone: target.zone), type.name, field.name, action))
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
        .deleteRefused(
            "nothing was deleted: no record named \(missing.prefix(5).map { "'\($0.recordName)' in \($0.zone)" }.joined(separator: ", "))\(missing.count > 5 ? " and \(missing.count - 5) more" : "")"
        )
    }

    /// A delete that VALIDATE references from records that stay refuse.
    public static func validateReferences(
        _ standing: [(source: RecordID, sourceType: String, field: String, target: RecordID)]
    ) -> StoreError {
        let lines = standing.prefix(5).map {
            "\($0.sourceType) '\($0.source.recordName)' points at '\($0.target.recordName)' through \($0.field) (VALIDATE)"
        }
        return .deleteRefused(
            "nothing was deleted: \(standing.count) VALIDATE reference\(standing.count == 1 ? "" : "s") still point\(standing.count == 1 ? "s" : "") at the records to delete:\n  "
                + lines.joined(separator: "\n  ") + (standing.count > 5 ? "\n  …and \(standing.count - 5) more" : "")
                + "\ndelete those records first, or change their references")
    }
}

/// How a delete spreads through references and shares; every store walks it the same way.
///
/// As CloudKit does it: deleting a share's root record deletes the share (the `cloudkit.share`
/// record its `share` names); deleting a share leaves its records, and its root no longer names
/// it. A `parent` link never cascades (CloudKit keeps it at the action NONE): the records under
/// a deleted record stay, as CloudKit keeps them.
public enum DeletePlan {
    /// The records asked for and, transitively, every record that points at one of them with a
    /// DELETE_SELF reference (`referrers` lists who points at a record, and how) and the share
    /// each deleted root record roots (`share` gives the share a record's `share` link names,
    /// when the store holds it); refused while
    /// a VALIDATE reference from a record that stays points at one of them.
    public static func expand(
        _ asked: [DeletedRecord],
        referrers: (RecordID) throws -> [(id: RecordID, recordType: String, field: String, action: ReferenceAction)],
        share: (RecordID, String) throws -> String? = { _, _ in nil }
    ) throws -> [DeletedRecord] {
        var plan = asked
        var planned = Set(asked.map(\.id))
        var blockers: [(source: RecordID, sourceType: String, field: String, target: RecordID)] = []
        var next = 0
        while next < plan.count {
            let target = plan[next].id
            let targetType = plan[next].recordType
            next += 1
            // A share's own `share` names itself; a root's names the share it roots.
            if targetType != Record.shareType, let name = try share(target, targetType), name != target.recordName {
                let shareID = RecordID(recordName: name, zone: target.zone)
                if planned.insert(shareID).inserted {
                    plan.append(DeletedRecord(id: shareID, recordType: Record.shareType, cause: target, field: "share"))
                }
            }
            for referrer in try referrers(target) {
                switch referrer.action {
                case .deleteSelf:
                    if planned.insert(referrer.id).inserted {
                        plan.append(
                            DeletedRecord(
                                id: referrer.id, recordType: referrer.recordType, cause: target, field: referrer.field))
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

    /// After deleting `plan`: the records that stay and were roots of a deleted share no longer
    /// name it (CloudKit clears a root's `share` when its share is deleted). Each is saved as a
    /// change.
    public static func unlinkRoots(of plan: [DeletedRecord], in session: any RecordSession) throws {
        let shares = plan.filter { $0.recordType == Record.shareType }
        guard !shares.isEmpty else { return }
        let gone = Set(plan.map(\.id))
        var roots: [Record] = []
        for share in shares {
            let predicate = RecordPredicate([
                Condition(field: "___share", op: .equal, value: .string(share.id.recordName))
            ])
            let query = RecordQuery(
                recordTypes: session.schema.recordTypes.map(\.name).filter { $0 != Record.shareType },
                scope: share.id.zone.scope, zoneName: share.id.zone.zoneName, predicate: predicate)
            try session.forEach(query) { record in
                if record.zone == share.id.zone && !gone.contains(record.id) { roots.append(record) }
            }
        }
        for var root in roots {
            root.share = nil
            _ = try session.save(root, mode: .replace)
        }
    }
}
