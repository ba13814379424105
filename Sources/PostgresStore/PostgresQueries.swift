import Foundation
import PostgresNIO
import Records
import StoreCore

/// One SQL statement of a query on the PostgreSQL store: a record type's reader, the WHERE
/// clause over its table `t` (empty for none), the ORDER BY, and the parameters.
struct PostgresCompiledQuery {
    let reader: PostgresReader
    let table: String
    let filter: String
    let order: String
    let bindings: PostgresBindings

    /// The records, in order.
    var query: PostgresQuery { PostgresQuery(unsafeSQL: reader.sql + filter + order, binds: bindings) }

    /// `selection` over the same rows, without an order.
    func selecting(_ selection: String) -> PostgresQuery {
        PostgresQuery(unsafeSQL: "SELECT \(selection) FROM \(table) t" + filter, binds: bindings)
    }
}

extension PostgresSession {
    /// Calls `body` with every record the query selects, in the SQLite store's order (scope,
    /// zone, type, name unless sorted), through cursors: memory holds a batch of rows.
    public func forEach(_ query: RecordQuery, _ body: (Record) throws -> Void) throws {
        var remaining = query.limit ?? Int.max
        for compiled in try compile(query) {
            guard remaining > 0 else { return }
            var limited = compiled.query
            if query.limit != nil { limited.sql += " LIMIT \(remaining)" }
            try forEachRow(limited) { row in
                try body(try compiled.reader.decode(row))
                remaining -= 1
            }
        }
    }

    /// How many records the query selects.
    public func count(_ query: RecordQuery) throws -> Int {
        var total = 0
        for compiled in try compile(query) {
            total += Int(try link.rows(compiled.selecting("count(*)::text")).first?[0] ?? "0") ?? 0
        }
        if let limit = query.limit { total = min(total, limit) }
        return total
    }

    /// PostgreSQL's plan for each statement of the query (`EXPLAIN`), to see which indexes it
    /// uses.
    public func queryPlan(_ query: RecordQuery) throws -> [(sql: String, plan: [String])] {
        try compile(query).map { compiled in
            var explain = compiled.query
            explain.sql = "EXPLAIN " + explain.sql
            return (compiled.query.sql, try link.rows(explain).compactMap { $0[0] })
        }
    }

    /// The earliest and latest value of TIMESTAMP `fields` among the records a query selects.
    public func bounds(_ query: RecordQuery, fields: [String]) throws -> (Int64, Int64)? {
        var low: Int64?
        var high: Int64?
        for compiled in try compile(query) {
            for field in fields {
                guard let definition = compiled.reader.definition.field(named: field), definition.type == .timestamp
                else { continue }
                let column = PostgresLayout.identifier(field)
                let range = compiled.selecting(
                    "\(PostgresLoad.milliseconds("min(t.\(column))")), \(PostgresLoad.milliseconds("max(t.\(column))"))"
                )
                guard let row = try link.rows(range).first, let min = row[0].flatMap(Int64.init),
                    let max = row[1].flatMap(Int64.init)
                else { continue }
                low = Swift.min(low ?? min, min)
                high = Swift.max(high ?? max, max)
            }
        }
        guard let low, let high else { return nil }
        return (low, high)
    }

    /// A record of `type` named `name`, in whichever zone holds it (the first zone in export
    /// order when several do).
    public func record(named name: String, ofType type: String) throws -> Record? {
        guard let definition = schema.recordType(named: type) else { return nil }
        let reader = PostgresReader(
            definition, table: PostgresLayout(type: definition, schema: namespace).table, session: self)
        var bindings = PostgresBindings()
        bindings.append(name)
        let found = try link.rows(
            PostgresQuery(unsafeSQL: reader.sql + " WHERE t.\"___recordID\" = $1", binds: bindings)
        ).map { try reader.decode($0) }
        return found.min { $0.zone < $1.zone }
    }

    /// Records of `type` whose REFERENCE field `field` points at `target`, by record name.
    public func records(ofType type: String, whose field: String, pointsAt target: RecordID) throws -> [Record] {
        guard let definition = schema.recordType(named: type) else {
            throw StoreError.badQuery(
                "unknown record type '\(type)' (the schema has \(schema.recordTypes.map(\.name).sorted().joined(separator: ", ")))"
            )
        }
        guard definition.field(named: field)?.type == .reference, let zone = try zoneNumber(target.zone) else {
            return []
        }
        let reader = PostgresReader(
            definition, table: PostgresLayout(type: definition, schema: namespace).table, session: self)
        var bindings = PostgresBindings()
        bindings.append(target.recordName)
        return try link.rows(
            PostgresQuery(
                unsafeSQL: reader.sql
                    + " WHERE t.\(PostgresLayout.identifier(field)) = $1 AND t.\"___zone\" = \(zone) ORDER BY t.\"___recordID\"",
                binds: bindings)
        ).map { try reader.decode($0) }
    }

    /// The statements of a query: without a sort, one per type and zone (zones in export
    /// order, names by their bytes); with one, one per type.
    func compile(_ query: RecordQuery) throws -> [PostgresCompiledQuery] {
        let zones = self.zones.filter(query.reads)
        let definitions: [RecordTypeDefinition]
        if query.recordTypes.isEmpty {
            definitions = schema.recordTypes.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        } else {
            definitions = try query.recordTypes.map { name in
                guard let definition = schema.recordType(named: name) else {
                    throw StoreError.badQuery(
                        "unknown record type '\(name)' (the schema has \(schema.recordTypes.map(\.name).sorted().joined(separator: ", ")))"
                    )
                }
                return definition
            }
        }
        var compiled: [PostgresCompiledQuery] = []
        for definition in definitions {
            let table = PostgresLayout(type: definition, schema: namespace).table
            let reader = PostgresReader(definition, table: table, session: self)
            var clauses: [String] = []
            var bindings = PostgresBindings()
            if let predicate = query.predicate {
                for condition in predicate.conditions {
                    clauses.append(
                        try compile(condition, type: definition, text: query.predicateText, bindings: &bindings))
                }
            }
            let numbers = try zones.map { try zoneNumber($0)! }
            if let sortField = query.sortField {
                let column = try sortColumn(sortField, type: definition)
                var filters = clauses
                if query.narrowsZones {
                    filters.insert(
                        numbers.isEmpty
                            ? "false" : "t.\"___zone\" IN (\(numbers.map(String.init).joined(separator: ", ")))", at: 0)
                }
                if let key = query.after {
                    let (sql, _) = try RecordKey.clause(
                        key, field: sortField, column: column, descending: query.descending
                    ) { condition -> (String, [Never]) in
                        (try compile(condition, type: definition, text: nil, bindings: &bindings), [])
                    }
                    filters.append(sql)
                }
                // NULLs first going up and last going down, as SQLite sorts them.
                let direction = query.descending ? " DESC NULLS LAST" : " NULLS FIRST"
                let filter = filters.isEmpty ? "" : " WHERE " + filters.joined(separator: " AND ")
                let order =
                    " ORDER BY \(column)\(direction), t.\"___recordID\"\(query.descending ? " DESC" : ""), t.\"___zone\""
                compiled.append(
                    PostgresCompiledQuery(
                        reader: reader, table: table, filter: filter, order: order, bindings: bindings))
            } else {
                for number in numbers {
                    let filter = " WHERE " + (["t.\"___zone\" = \(number)"] + clauses).joined(separator: " AND ")
                    compiled.append(
                        PostgresCompiledQuery(
                            reader: reader, table: table, filter: filter, order: " ORDER BY t.\"___recordID\"",
                            bindings: bindings))
                }
            }
        }
        return compiled
    }

    private func sortColumn(_ name: String, type: RecordTypeDefinition) throws -> String {
        if let system = RecordQuery.systemField(
            name, typeHasField: { type.field(named: $0).map { !$0.isSystem } ?? false })
        {
            return "t.\(PostgresLayout.identifier(system.column))"
        }
        guard let field = type.field(named: name), !field.isSystem else {
            throw StoreError.badQuery(
                "\(Wording.sortField(name)): record type \(type.name) has no field '\(name)'")
        }
        guard !field.type.isList, ![.asset, .location, .bytes].contains(field.type.primitive) else {
            throw StoreError.badQuery("\(Wording.sortField(name)): \(field.type) fields cannot be sorted")
        }
        return "t.\(PostgresLayout.identifier(name))"
    }

    /// One condition as SQL over the reader's table `t`, its values appended to `bindings`.
    private func compile(
        _ condition: Condition, type definition: RecordTypeDefinition, text: String?, bindings: inout PostgresBindings
    ) throws -> String {
        let column: String
        let type: FieldType
        if let system = RecordQuery.systemField(
            condition.field, typeHasField: { definition.field(named: $0).map { !$0.isSystem } ?? false })
        {
            column = "t.\(PostgresLayout.identifier(system.column))"
            type = system.type
        } else if let field = definition.field(named: condition.field), !field.isSystem {
            column = "t.\(PostgresLayout.identifier(field.name))"
            type = field.type
        } else {
            let known = definition.userFields.map(\.name).joined(separator: ", ")
            throw RecordQuery.predicateError(
                "record type \(definition.name) has no field '\(condition.field)' (its fields: \(known); also recordName, parent, share, ___createTime, ___modTime)",
                column: condition.fieldColumn, text: text)
        }
        /// A literal as a parameter of the column's type: its placeholder.
        func parameter(_ literal: PredicateValue, as type: FieldType) throws -> String {
            let value: FieldValue? =
                type.primitive == .bytes
                ? { if case .string(let s) = literal { return .string(s) } else { return nil } }()
                : literal.fieldValue(as: type)
            let placeholder = "$\(bindings.count + 1)"
            switch value {
            case .string(let s)?:
                bindings.append(s)
                return placeholder
            case .reference(let r)?:
                bindings.append(r.recordName)
                return placeholder
            case .int64(let i)?:
                bindings.append(i)
                return type.primitive == .number ? "\(placeholder)::numeric" : placeholder
            case .timestamp(let t)?:
                bindings.append(t)
                return "(timestamptz 'epoch' + \(placeholder)::bigint * interval '1 millisecond')"
            case .double(let d)?:
                bindings.append(d)
                return type.primitive == .number ? "\(placeholder)::numeric" : placeholder
            default:
                throw RecordQuery.predicateError(
                    "field '\(condition.field)' is \(type); \(literal) is not a \(RecordQuery.literalForm(type))",
                    column: condition.valueColumn, text: text)
            }
        }
        if type.isList || [.asset, .location, .bytes].contains(type.primitive) {
            guard condition.op == .contains, type.isList, ![.asset, .location].contains(type.primitive) else {
                let hint = type.isList ? " (use CONTAINS to test list membership)" : ""
                throw RecordQuery.predicateError(
                    "field '\(condition.field)' is \(type) and cannot be compared with \(condition.op.rawValue)\(hint)",
                    column: condition.fieldColumn, text: text)
            }
            // Containment on the jsonb list (the GIN index answers it): a one-element list of
            // the value, or of an object with the reference's record name.
            let element: FieldValue?
            if type.primitive == .bytes, case .string(let s) = condition.value {
                element = .string(s)
            } else {
                element = condition.value.fieldValue(as: type.element)
            }
            let json: String
            switch element {
            case .reference(let reference)?:
                json = "[{\"recordName\":\(FieldValueJSON.canonicalText(.string(reference.recordName)))}]"
            case let value?
            where [.string, .int64, .double, .timestamp, .number].contains(value.type.primitive) && !value.type.isList:
                json = "[\(FieldValueJSON.canonicalText(value))]"
            default:
                throw RecordQuery.predicateError(
                    "field '\(condition.field)' is \(type); \(condition.value) is not a \(RecordQuery.literalForm(type.element))",
                    column: condition.valueColumn, text: text)
            }
            bindings.append(json)
            // A zero of a list of doubles may be stored as the string "-0.0" (see
            // PostgresLoad.keepingNegativeZero); CONTAINS 0 finds it as SQLite's does.
            if case .double(let d)? = element, d == 0 {
                bindings.append("[\"-0.0\"]")
                return "(\(column) @> $\(bindings.count - 1)::jsonb OR \(column) @> $\(bindings.count)::jsonb)"
            }
            return "\(column) @> $\(bindings.count)::jsonb"
        }
        switch condition.op {
        case .equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual:
            let sqlOp = condition.op == .equal ? "=" : condition.op.rawValue
            return "\(column) \(sqlOp) \(try parameter(condition.value, as: type))"
        case .in:
            guard case .list(let values) = condition.value else {
                throw RecordQuery.predicateError("IN needs a list", column: condition.valueColumn, text: text)
            }
            if values.isEmpty { return "false" }
            return "\(column) IN (\(try values.map { try parameter($0, as: type) }.joined(separator: ", ")))"
        case .beginsWith:
            guard type.primitive == .string || type.primitive == .reference, case .string(let prefix) = condition.value
            else {
                throw RecordQuery.predicateError(
                    "BEGINSWITH needs a text field and 'text'", column: condition.fieldColumn, text: text)
            }
            // A range on the index (bytes order, collation "C"), as the SQLite store does.
            bindings.append(prefix)
            bindings.append(prefix + "\u{10FFFF}")
            return "(\(column) >= $\(bindings.count - 1) AND \(column) < $\(bindings.count))"
        case .contains:
            throw RecordQuery.predicateError(
                "CONTAINS tests list membership, and field '\(condition.field)' is \(type), not a LIST",
                column: condition.fieldColumn, text: text)
        }
    }
}
