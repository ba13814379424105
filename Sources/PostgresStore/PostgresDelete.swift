import Foundation
import PostgresNIO
import Records
import StoreCore

extension PostgresSession {
    /// Deletes records and, transitively, every record that points at one of them with a
    /// DELETE_SELF reference; refused, with nothing deleted, while a VALIDATE reference from a
    /// record that stays points at one of them, or when a record is not there. Each deleted
    /// record leaves a tombstone in the change log. The same rules and words as the SQLite
    /// store.
    @discardableResult
    public func delete(_ ids: [RecordID]) throws -> [DeletedRecord] {
        precondition(writable, "delete needs a write transaction")
        let types = schema.recordTypes
        var plan: [DeletedRecord] = []
        var planned: Set<RecordID> = []
        var missing: [RecordID] = []
        var zones: [ZoneID: Int64] = [:]
        for id in ids where !planned.contains(id) {
            guard let zone = try zoneNumber(id.zone), let entry = try registryEntry(id), !entry.deleted else {
                missing.append(id)
                continue
            }
            zones[id.zone] = zone
            planned.insert(id)
            plan.append(DeletedRecord(id: id, recordType: entry.recordType, cause: nil, field: nil))
        }
        if !missing.isEmpty { throw StoreError.missingRecords(missing) }
        plan = try DeletePlan.expand(
            plan, referrers: { target in try referrers(of: target, zone: zones[target.zone]!, types: types) },
            share: { id, type in
                guard schema.recordType(named: type) != nil, let zone = zones[id.zone] else { return nil }
                let table = "\(namespace).\(PostgresLayout.identifier(type))"
                guard
                    let name = try link.rows(
                        """
                        SELECT "___share" FROM \(unescaped: table) WHERE "___zone" = \(zone) AND "___recordID" = \(id.recordName)
                        """
                    ).first?[0] ?? nil
                else { return nil }
                // Only a share the store holds goes along (a link may name one that is not here).
                guard let entry = try registryEntry(RecordID(recordName: name, zone: id.zone)), !entry.deleted,
                    entry.recordType == Record.shareType
                else { return nil }
                return name
            })
        for entry in plan where zones[entry.id.zone] == nil { zones[entry.id.zone] = try zoneNumber(entry.id.zone) }
        if !plan.isEmpty { changedRecords = true }
        for entry in plan {
            let zone = zones[entry.id.zone]!
            try link.execute(
                query: """
                    DELETE FROM \(unescaped: "\(namespace).\(PostgresLayout.identifier(entry.recordType))") WHERE "___zone" = \(zone) AND "___recordID" = \(entry.id.recordName)
                    """)
            try link.execute(
                query: """
                    UPDATE \(name: namespace)._ck_record SET deleted = true, seq = \(takeChangeNumbers(1)), xid = pg_current_xact_id()
                    WHERE zone = \(zone) AND "recordName" = \(entry.id.recordName)
                    """)
        }
        try DeletePlan.unlinkRoots(of: plan, in: self)
        return plan
    }

    /// Records in the target's zone holding a reference to it, single or in a list.
    private func referrers(of target: RecordID, zone: Int64, types: [RecordTypeDefinition]) throws
        -> [(id: RecordID, recordType: String, field: String, action: ReferenceAction)]
    {
        var found: [(RecordID, String, String, ReferenceAction)] = []
        for type in types {
            let table = "\(namespace).\(PostgresLayout.identifier(type.name))"
            for field in type.userFields where field.type.primitive == .reference {
                let column = PostgresLayout.identifier(field.name)
                let rows: [[String?]]
                if field.type.isList {
                    rows = try link.rows(
                        """
                        SELECT t."___recordID", e->>'action' FROM \(unescaped: table) t, jsonb_array_elements(t.\(unescaped: column)) e
                        WHERE t."___zone" = \(zone) AND e->>'recordName' = \(target.recordName)
                        """)
                } else {
                    rows = try link.rows(
                        """
                        SELECT "___recordID", \(unescaped: PostgresLayout.identifier(field.name + ":action"))::text FROM \(unescaped: table)
                        WHERE "___zone" = \(zone) AND \(unescaped: column) = \(target.recordName)
                        """)
                }
                for row in rows {
                    guard let name = row[0] else { continue }
                    let action: ReferenceAction
                    if field.type.isList {
                        action = ReferenceAction(rawValue: row[1] ?? "NONE") ?? .none
                    } else {
                        action = row[1].flatMap(Int64.init).flatMap(ReferenceAction.init(code:)) ?? .none
                    }
                    found.append((RecordID(recordName: name, zone: target.zone), type.name, field.name, action))
                }
            }
        }
        return found
    }
}

extension PostgresLink {
    /// Runs one statement with parameters, for its effect.
    func execute(query: PostgresQuery) throws {
        _ = try rows(query)
    }
}
