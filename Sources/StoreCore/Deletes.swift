import Foundation
import Records

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
