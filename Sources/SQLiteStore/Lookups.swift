import Records
import StoreCore

// GRDB by name, so that its `Record` class stays out of the way of ckport's `Record`.
import class GRDB.Database
import struct GRDB.DatabaseError
import struct GRDB.DatabaseValue
import class GRDB.Row

extension StoreSession {
    /// A record of `type` named `name`, in whichever zone holds it (the first zone in export
    /// order when several do). For lookups through fields that hold a record name as text.
    public func record(named name: String, ofType type: String) throws -> Record? {
        guard let layout = layouts[type] else { return nil }
        // SQLite walks the primary key zone by zone (a skip-scan): cheap while zones are few.
        let select = try statement(layout.selectSQL + " WHERE ___recordID = ?1 ORDER BY ___zone LIMIT 1")
        select.reset()
        select.bind(1, name)
        defer { select.reset() }
        guard try select.step(db) else { return nil }
        return try layout.decode(select, zone: try zone(row: select.int64(0)))
    }

    /// Records of `type` whose REFERENCE field `field` points at `target`, by record name.
    public func records(ofType type: String, whose field: String, pointsAt target: RecordID) throws -> [Record] {
        let layout = try self.layout(type)
        guard let index = layout.fieldsByName[field], layout.fields[index].type == .reference,
            let zone = try zoneRow(target.zone, create: false)
        else { return [] }
        let select = try statement(
            layout.selectSQL + " WHERE \(layout.fields[index].column) = ?2 AND ___zone = ?1 ORDER BY ___recordID")
        select.reset()
        select.bind(1, zone)
        select.bind(2, target.recordName)
        defer { select.reset() }
        var found: [Record] = []
        while try select.step(db) { found.append(try layout.decode(select, zone: target.zone)) }
        return found
    }

    /// The earliest and latest value of TIMESTAMP `fields` among the records a query selects.
    public func bounds(_ query: RecordQuery, fields: [String]) throws -> (Int64, Int64)? {
        var low: Int64?
        var high: Int64?
        var statements = QueryStatements()
        for compiled in try compile(query) {
            for field in fields {
                guard let index = compiled.layout.fieldsByName[field], compiled.layout.fields[index].type == .timestamp
                else { continue }
                let column = compiled.layout.fields[index].column
                let statement = try statements.statement(
                    db, "SELECT min(\(column)), max(\(column)) FROM (\(compiled.sql))", compiled.arguments)
                guard try statement.step(db), let min = statement.optionalInt64(0), let max = statement.optionalInt64(1)
                else { continue }
                low = Swift.min(low ?? min, min)
                high = Swift.max(high ?? max, max)
            }
        }
        guard let low, let high else { return nil }
        return (low, high)
    }
}
