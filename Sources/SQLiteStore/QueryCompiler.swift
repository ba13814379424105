import Foundation
import Records
import StoreCore

// GRDB by name, so that its `Record` class stays out of the way of ckport's `Record`.
import class GRDB.Database
import struct GRDB.DatabaseError
import struct GRDB.DatabaseValue
import class GRDB.Row

/// One SQL statement of a query: a record type, an optional zone, its SQL and arguments.
struct CompiledQuery {
    let layout: TableLayout
    let zone: ZoneID?
    /// The zone's row, bound as the first argument when the query reads one zone.
    var zoneRow: Int64? = nil
    let sql: String
    let arguments: [SQLArgument]

    /// The statement as `--explain` shows it: with the zone's row written in.
    var shownSQL: String {
        guard let zoneRow, let range = sql.range(of: "___zone = ?") else { return sql }
        return sql.replacingCharacters(in: range, with: "___zone = \(zoneRow)")
    }
}

/// Prepares each distinct statement of a compiled query once: a query over many zones runs
/// one statement per zone, the same but for the zone bound to it (a store of 1,000 zones
/// spent 0.1 s preparing them when each had its zone written in).
struct QueryStatements {
    private var prepared: [String: PreparedStatement] = [:]

    /// `sql` prepared (or reset) with `arguments` bound.
    mutating func statement(_ db: Database, _ sql: String, _ arguments: [SQLArgument]) throws -> PreparedStatement {
        let statement: PreparedStatement
        if let cached = prepared[sql] {
            statement = cached
            statement.reset()
        } else {
            statement = try PreparedStatement(db, sql)
            prepared[sql] = statement
        }
        for (index, argument) in arguments.enumerated() { argument.bind(to: statement, at: Int32(index + 1)) }
        return statement
    }
}

enum SQLArgument {
    case int(Int64)
    case double(Double)
    case text(String)

    func bind(to statement: PreparedStatement, at index: Int32) {
        switch self {
        case .int(let i): statement.bind(index, i)
        case .double(let d): statement.bind(index, d)
        case .text(let t): statement.bind(index, t)
        }
    }
}

extension StoreSession {
    /// Calls `body` with every record the query selects, streaming: one record in memory at a time.
    public func forEach(_ query: RecordQuery, _ body: (Record) throws -> Void) throws {
        var remaining = query.limit ?? Int.max
        var statements = QueryStatements()
        for compiled in try compile(query) {
            guard remaining > 0 else { return }
            let statement = try statements.statement(db, compiled.sql, compiled.arguments)
            while remaining > 0, try statement.step(db) {
                let zone = try compiled.zone ?? self.zone(row: statement.int64(0))
                try body(try compiled.layout.decode(statement, zone: zone))
                remaining -= 1
            }
        }
    }

    /// How many records the query selects.
    public func count(_ query: RecordQuery) throws -> Int {
        var total = 0
        var statements = QueryStatements()
        if query.predicate == nil && query.sortField == nil && query.after == nil {
            // Each type's table holds its live records (a deleted one leaves only its
            // tombstone in _ck_record): one count per type, over an index.
            var zoneClause = ""
            if query.narrowsZones {
                let rows = try zones.filter(query.reads).compactMap { try zoneRow($0, create: false) }
                if rows.isEmpty { return 0 }
                zoneClause = " WHERE ___zone IN (\(rows.map(String.init).joined(separator: ", ")))"
            }
            for layout in try queryTypes(query) {
                let statement = try statements.statement(db, "SELECT count(*) FROM \(layout.table)" + zoneClause, [])
                if try statement.step(db) { total += Int(statement.int64(0)) }
            }
            if let limit = query.limit { total = min(total, limit) }
            return total
        }
        for compiled in try compile(query) {
            let statement = try statements.statement(db, "SELECT count(*) FROM (\(compiled.sql))", compiled.arguments)
            if try statement.step(db) { total += Int(statement.int64(0)) }
        }
        if let limit = query.limit { total = min(total, limit) }
        return total
    }

    /// SQLite's plan for each statement of the query (`EXPLAIN QUERY PLAN`), to see which
    /// indexes it uses.
    public func queryPlan(_ query: RecordQuery) throws -> [(sql: String, plan: [String])] {
        var statements = QueryStatements()
        return try compile(query).map { compiled in
            let statement = try statements.statement(db, "EXPLAIN QUERY PLAN " + compiled.sql, compiled.arguments)
            var lines: [String] = []
            while try statement.step(db) { lines.append(statement.text(3)) }
            return (compiled.shownSQL, lines)
        }
    }

    /// The record types a query reads, checked against the schema.
    func queryTypes(_ query: RecordQuery) throws -> [TableLayout] {
        if query.recordTypes.isEmpty {
            return schema.recordTypes.map(\.name).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.map {
                layouts[$0]!
            }
        }
        return try query.recordTypes.map { try layout($0) }
    }

    func compile(_ query: RecordQuery) throws -> [CompiledQuery] {
        let zones = self.zones.filter(query.reads)
        var compiled: [CompiledQuery] = []
        for layout in try queryTypes(query) {
            var clauses: [String] = []
            var arguments: [SQLArgument] = []
            if let predicate = query.predicate {
                for condition in predicate.conditions {
                    let (sql, args) = try compile(condition, layout: layout, text: query.predicateText)
                    clauses.append(sql)
                    arguments.append(contentsOf: args)
                }
            }
            if let sortField = query.sortField {
                let column = try sortColumn(sortField, layout: layout)
                var conditions = clauses
                if query.narrowsZones {
                    let rows = try zones.map { try zoneRow($0, create: false)! }
                    conditions.insert("___zone IN (\(rows.map(String.init).joined(separator: ", ")))", at: 0)
                }
                var keyArguments: [SQLArgument] = []
                if let key = query.after {
                    let (sql, args) = try RecordKey.clause(
                        key, field: sortField, column: column, descending: query.descending
                    ) { condition in
                        try compile(condition, layout: layout, text: nil)
                    }
                    conditions.append(sql)
                    keyArguments = args
                }
                let direction = query.descending ? " DESC" : ""
                let sql =
                    layout.selectSQL + (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND "))
                    + " ORDER BY \(column)\(direction), ___recordID\(direction), ___zone"
                compiled.append(CompiledQuery(layout: layout, zone: nil, sql: sql, arguments: arguments + keyArguments))
            } else {
                for zone in zones {
                    let row = try zoneRow(zone, create: false)!
                    let sql =
                        layout.selectSQL + " WHERE " + (["___zone = ?"] + clauses).joined(separator: " AND ")
                        + " ORDER BY ___recordID"
                    compiled.append(
                        CompiledQuery(
                            layout: layout, zone: zone, zoneRow: row, sql: sql, arguments: [.int(row)] + arguments))
                }
            }
        }
        return compiled
    }

    private func queryError(_ message: String, column: Int, text: String?) -> StoreError {
        RecordQuery.predicateError(message, column: column, text: text)
    }

    private func sortColumn(_ name: String, layout: TableLayout) throws -> String {
        if let system = RecordQuery.systemField(name, typeHasField: { layout.fieldsByName[$0] != nil }) {
            return system.column
        }
        guard let field = layout.fieldsByName[name].map({ layout.fields[$0] }) else {
            throw StoreError.badQuery(
                "\(Wording.sortField(name)): record type \(layout.typeName) has no field '\(name)'")
        }
        guard !field.type.isList, ![.asset, .location, .bytes].contains(field.type.primitive) else {
            throw StoreError.badQuery("\(Wording.sortField(name)): \(field.type) fields cannot be sorted")
        }
        return field.column
    }

    private func compile(_ condition: Condition, layout: TableLayout, text: String?) throws -> (String, [SQLArgument]) {
        let column: String
        let type: FieldType
        if let system = RecordQuery.systemField(condition.field, typeHasField: { layout.fieldsByName[$0] != nil }) {
            (column, type) = system
        } else if let index = layout.fieldsByName[condition.field] {
            column = layout.fields[index].column
            type = layout.fields[index].type
        } else {
            let known = layout.fields.map(\.name).joined(separator: ", ")
            throw queryError(
                "record type \(layout.typeName) has no field '\(condition.field)' (its fields: \(known); also recordName, parent, share, ___createTime, ___modTime)",
                column: condition.fieldColumn, text: text)
        }
        func value(_ literal: PredicateValue, as type: FieldType) throws -> SQLArgument {
            if let argument = StoreSession.argument(literal, as: type) { return argument }
            throw queryError(
                "field '\(condition.field)' is \(type); \(literal) is not a \(RecordQuery.literalForm(type))",
                column: condition.valueColumn, text: text)
        }
        if type.isList || [.asset, .location, .bytes].contains(type.primitive) {
            guard condition.op == .contains, type.isList, ![.asset, .location].contains(type.primitive) else {
                let hint = type.isList ? " (use CONTAINS to test list membership)" : ""
                throw queryError(
                    "field '\(condition.field)' is \(type) and cannot be compared with \(condition.op.rawValue)\(hint)",
                    column: condition.fieldColumn, text: text)
            }
            let element =
                type.primitive == .reference ? "json_extract(json_each.value, '$.recordName')" : "json_each.value"
            return (
                "EXISTS (SELECT 1 FROM json_each(\(column)) WHERE \(element) = ?)",
                [try value(condition.value, as: type.element)]
            )
        }
        switch condition.op {
        case .equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual:
            let sqlOp = condition.op == .equal ? "=" : condition.op.rawValue
            return ("\(column) \(sqlOp) ?", [try value(condition.value, as: type)])
        case .in:
            guard case .list(let values) = condition.value else {
                throw queryError("IN needs a list", column: condition.valueColumn, text: text)
            }
            if values.isEmpty { return ("0", []) }
            return (
                "\(column) IN (\(values.map { _ in "?" }.joined(separator: ", ")))",
                try values.map { try value($0, as: type) }
            )
        case .beginsWith:
            guard type.primitive == .string || type.primitive == .reference, case .string(let prefix) = condition.value
            else {
                throw queryError("BEGINSWITH needs a text field and 'text'", column: condition.fieldColumn, text: text)
            }
            // A range on the index rather than LIKE, which ignores case and cannot use one.
            return ("(\(column) >= ? AND \(column) < ?)", [.text(prefix), .text(prefix + "\u{10FFFF}")])
        case .contains:
            throw queryError(
                "CONTAINS tests list membership, and field '\(condition.field)' is \(type), not a LIST",
                column: condition.fieldColumn, text: text)
        }
    }

    static func argument(_ literal: PredicateValue, as type: FieldType) -> SQLArgument? {
        // Bytes are compared as their Base64 text, as lists keep them.
        if type.primitive == .bytes, case .string(let s) = literal { return .text(s) }
        switch literal.fieldValue(as: type) {
        case .string(let s)?: return .text(s)
        case .reference(let r)?: return .text(r.recordName)
        case .int64(let i)?, .timestamp(let i)?: return .int(i)
        case .double(let d)?: return .double(d)
        default: return nil
        }
    }
}
