import Records
import StoreCore

// GRDB by name, so that its `Record` class stays out of the way of ckport's `Record`.
import class GRDB.Database
import struct GRDB.DatabaseError
import struct GRDB.DatabaseValue
import class GRDB.Row

extension StoreSession {
    /// Calls `body` with every record changed or deleted after `token`, in the order the
    /// changes happened: live records as they are now, deleted ones as tombstones
    /// (`isDeleted`, no fields). A record changed twice is reported once.
    public func forEachChange(
        since token: ChangeToken, recordTypes: [String] = [], scope: DatabaseScope? = nil,
        zoneName: String? = nil, _ body: (Record) throws -> Void
    ) throws {
        guard token.storeID == storeID else {
            throw StoreError.badToken(
                "change token \(token) comes from another store (this store is \(storeID)); \(Wording.startNewChangeChain)"
            )
        }
        guard token.sequence <= changeSequence else {
            throw StoreError.badToken(
                "change token \(token) is ahead of this store, which is at \(currentToken); was the store restored from an older copy?"
            )
        }
        let types = Set(recordTypes)
        let statement = try PreparedStatement(
            db, "SELECT zone, recordName, recordType, deleted FROM _ck_record WHERE seq > ?1 ORDER BY seq")
        statement.bind(1, token.sequence)
        while try statement.step(db) {
            let zone = try self.zone(row: statement.int64(0))
            if let scope, zone.scope != scope { continue }
            if let zoneName, !zone.zoneName.hasSameBytes(as: zoneName) { continue }
            let type = statement.text(2)
            if !types.isEmpty && !types.contains(type) { continue }
            let id = RecordID(recordName: statement.text(1), zone: zone)
            if statement.int64(3) != 0 {
                try body(Record(id: id, recordType: type, isDeleted: true))
            } else if let layout = layouts[type], let record = try fetch(id, layout: layout) {
                try body(record)
            } else {
                throw StoreError.corrupt("change log names \(type) \(id), which has no row")
            }
        }
    }
}
