import Records
import StoreCore

import class GRDB.Database

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
