/// Predicates over records in memory, with the meaning the store gives them in SQL.
extension PredicateValue {
    /// The literal as a value of `type`: `'text'` for STRING and REFERENCE, numbers, dates and
    /// `true`/`false` (1/0) for INT64. Nil when the literal cannot be one.
    public func fieldValue(as type: FieldType) -> FieldValue? {
        switch (type.primitive, self) {
        case (.string, .string(let s)), (.bytes, .string(let s)):
            return .string(s)
        case (.reference, .string(let s)):
            return .reference(Reference(recordName: s))
        case (.int64, .number(let n)):
            return Int64(n).map(FieldValue.int64)
        case (.int64, .bool(let b)), (.number, .bool(let b)):
            return .int64(b ? 1 : 0)
        case (.double, .number(let n)):
            return Double(n).map(FieldValue.double)
        case (.number, .number(let n)):
            return Int64(n).map(FieldValue.int64) ?? Double(n).map(FieldValue.double)
        case (.timestamp, .date(let text)), (.timestamp, .string(let text)):
            return ISO8601.parse(text).map(FieldValue.timestamp)
        case (.timestamp, .number(let n)):
            return Int64(n).map(FieldValue.timestamp)
        default:
            return nil
        }
    }
}

/// A scalar a predicate compares: text, integer or double.
enum Comparable3: Comparable {
    case text(String)
    case integer(Int64)
    case real(Double)

    init?(_ value: FieldValue) {
        switch value {
        case .string(let s): self = .text(s)
        case .reference(let r): self = .text(r.recordName)
        case .int64(let i), .timestamp(let i): self = .integer(i)
        case .double(let d): self = .real(d)
        case .bytes(let b): self = .text(Base64.encode(b))
        default: return nil
        }
    }

    static func < (a: Comparable3, b: Comparable3) -> Bool {
        switch (a, b) {
        case (.text(let x), .text(let y)): return x.utf8.lexicographicallyPrecedes(y.utf8)
        case (.integer(let x), .integer(let y)): return x < y
        case (.real(let x), .real(let y)): return x < y
        case (.integer(let x), .real(let y)): return Double(x) < y
        case (.real(let x), .integer(let y)): return x < Double(y)
        default: return false
        }
    }

    static func == (a: Comparable3, b: Comparable3) -> Bool {
        switch (a, b) {
        // Text is equal byte for byte, as the stores compare it (Swift's == would also take
        // "é" written as one scalar and as e + U+0301 for the same text).
        case (.text(let x), .text(let y)): return x.utf8.elementsEqual(y.utf8)
        case (.integer(let x), .integer(let y)): return x == y
        case (.real(let x), .real(let y)): return x == y
        case (.integer(let x), .real(let y)), (.real(let y), .integer(let x)): return Double(x) == y
        default: return false
        }
    }
}

extension RecordPredicate {
    /// Whether a record of `type` satisfies the predicate. A missing field satisfies no
    /// condition, as a NULL column matches nothing in SQL.
    ///
    /// - Throws: `PredicateError` for a field the type lacks or a literal of the wrong type.
    public func matches(_ record: Record, type: RecordTypeDefinition) throws(PredicateError) -> Bool {
        for condition in conditions {
            if try !condition.matches(record, type: type) { return false }
        }
        return true
    }

    /// Fields the predicate names.
    public var fieldNames: [String] { conditions.map(\.field) }
}

extension Condition {
    func matches(_ record: Record, type: RecordTypeDefinition) throws(PredicateError) -> Bool {
        let fieldType: FieldType
        let value: FieldValue?
        switch field {
        case "recordName", "___recordID": (fieldType, value) = (.string, .string(record.recordName))
        case "___createTime", "createdTimestamp":
            (fieldType, value) = (.timestamp, record.created.map { .timestamp($0.timestamp) })
        case "___modTime", "modifiedTimestamp":
            (fieldType, value) = (.timestamp, record.modified.map { .timestamp($0.timestamp) })
        case "___parent": (fieldType, value) = (.string, record.parent.map(FieldValue.string))
        case "___share": (fieldType, value) = (.string, record.share.map(FieldValue.string))
        case "parent" where type.field(named: "parent") == nil:
            (fieldType, value) = (.string, record.parent.map(FieldValue.string))
        case "share" where type.field(named: "share") == nil:
            (fieldType, value) = (.string, record.share.map(FieldValue.string))
        default:
            guard let definition = type.field(named: field), !definition.isSystem else {
                throw PredicateError(column: fieldColumn, message: "record type \(type.name) has no field '\(field)'")
            }
            (fieldType, value) = (definition.type, record.fields[field])
        }
        func literal(_ v: PredicateValue, as t: FieldType) throws(PredicateError) -> Comparable3 {
            guard let typed = v.fieldValue(as: t), let c = Comparable3(typed) else {
                throw PredicateError(
                    column: valueColumn, message: "field '\(field)' is \(t); \(v) is not a value of that type")
            }
            return c
        }
        guard let value else { return false }
        if op == .contains {
            guard case .list(_, let elements) = value else {
                throw PredicateError(
                    column: fieldColumn,
                    message: "CONTAINS tests list membership, and field '\(field)' is \(fieldType), not a LIST")
            }
            let wanted = try literal(self.value, as: fieldType.element)
            return elements.contains { Comparable3($0) == wanted }
        }
        guard let actual = Comparable3(value) else {
            throw PredicateError(
                column: fieldColumn, message: "field '\(field)' is \(fieldType) and cannot be compared")
        }
        switch op {
        case .equal: return actual == (try literal(self.value, as: fieldType))
        case .notEqual: return actual != (try literal(self.value, as: fieldType))
        case .less: return actual < (try literal(self.value, as: fieldType))
        case .lessOrEqual: return actual <= (try literal(self.value, as: fieldType))
        case .greater: return actual > (try literal(self.value, as: fieldType))
        case .greaterOrEqual: return actual >= (try literal(self.value, as: fieldType))
        case .in:
            guard case .list(let values) = self.value else { return false }
            for candidate in values where actual == (try literal(candidate, as: fieldType)) { return true }
            return false
        case .beginsWith:
            guard case .string(let prefix) = self.value, case .text(let text) = actual else { return false }
            return text.utf8.starts(with: prefix.utf8)
        case .contains:
            return false
        }
    }
}
