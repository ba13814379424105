import Foundation
import Records

/// Which records to read, in which order.
///
/// Without a sort, records come in export order: scope, zone, record type, record name — so two
/// exports of one store are byte-identical.
public struct RecordQuery: Sendable {
    /// Record types to read; empty means every type.
    public var recordTypes: [String]
    public var scope: DatabaseScope?
    public var zoneName: String?
    /// The owner of the zones to read (zones of several owners can share a name, as every
    /// Core Data container's zone does); nil for every owner.
    public var ownerRecordName: String?
    public var predicate: RecordPredicate?
    /// The text the predicate was parsed from, for error messages.
    public var predicateText: String?
    public var sortField: String?
    public var descending: Bool
    public var limit: Int?
    /// Keyset paging: with a ``sortField``, only the records that come after this one in the
    /// query's order — its sort field's value (nil when it has none; nil values come first
    /// going up, last going down) and its record name. For a query of one zone.
    public var after: RecordKey?

    public init(
        recordTypes: [String] = [], scope: DatabaseScope? = nil, zoneName: String? = nil,
        ownerRecordName: String? = nil,
        predicate: RecordPredicate? = nil, predicateText: String? = nil, sortField: String? = nil,
        descending: Bool = false, limit: Int? = nil
    ) {
        self.recordTypes = recordTypes
        self.scope = scope
        self.zoneName = zoneName
        self.ownerRecordName = ownerRecordName
        self.predicate = predicate
        self.predicateText = predicateText
        self.sortField = sortField
        self.descending = descending
        self.limit = limit
    }
}

/// Where a keyset page starts: the sort field's value of the last record shown, as a
/// predicate writes it, and that record's name.
public struct RecordKey: Sendable, Equatable {
    public var value: PredicateValue?
    public var recordName: String

    public init(value: PredicateValue?, recordName: String) {
        self.value = value
        self.recordName = recordName
    }

    /// The SQL that keeps the rows after the key, from the store's own pieces: `column` the
    /// sort column, and a compiler of one condition into SQL (and, in that order, its
    /// arguments) for the value's and the name's comparisons.
    public static func clause<Argument>(
        _ key: RecordKey, field: String, column: String, descending: Bool,
        compile: (Condition) throws -> (String, [Argument])
    ) throws -> (String, [Argument]) {
        let (name, nameArguments) = try compile(
            Condition(
                field: "recordName", op: descending ? .less : .greater, value: .string(key.recordName), fieldColumn: 0,
                valueColumn: 0))
        guard let value = key.value else {
            // After a record without a value: the others without one, then (going up) all with one.
            return descending
                ? ("(\(column) IS NULL AND \(name))", nameArguments)
                : ("(\(column) IS NOT NULL OR \(name))", nameArguments)
        }
        let (beyond, beyondArguments) = try compile(
            Condition(field: field, op: descending ? .less : .greater, value: value, fieldColumn: 0, valueColumn: 0))
        let (same, sameArguments) = try compile(
            Condition(field: field, op: .equal, value: value, fieldColumn: 0, valueColumn: 0))
        let sql = "(\(beyond) OR (\(same) AND \(name))" + (descending ? " OR \(column) IS NULL)" : ")")
        return (sql, beyondArguments + sameArguments + nameArguments)
    }
}

extension RecordQuery {
    /// Whether the query reads the records of `zone` (names compared by their bytes, as
    /// ``ZoneID`` compares them).
    public func reads(_ zone: ZoneID) -> Bool {
        (scope == nil || zone.scope == scope) && (zoneName.map(zone.zoneName.hasSameBytes(as:)) ?? true)
            && (ownerRecordName.map(zone.ownerRecordName.hasSameBytes(as:)) ?? true)
    }

    /// Whether the query reads some zones only.
    public var narrowsZones: Bool { scope != nil || zoneName != nil || ownerRecordName != nil }

    /// System fields a predicate or sort may name, with the column and type behind them.
    public static let systemFields: [String: (column: String, type: FieldType)] = [
        "recordName": ("___recordID", .string), "___recordID": ("___recordID", .string),
        "___createTime": ("___createTime", .timestamp), "createdTimestamp": ("___createTime", .timestamp),
        "___modTime": ("___modTime", .timestamp), "modifiedTimestamp": ("___modTime", .timestamp),
        "___createdBy": ("___createdBy", .string), "___modifiedBy": ("___modifiedBy", .string),
        "___parent": ("___parent", .string), "parent": ("___parent", .string),
        "___share": ("___share", .string), "share": ("___share", .string),
    ]

    /// The system field a predicate or sort names by `name`, unless the record type has a field
    /// of its own by that name (`parent`, say), which wins over the short system names.
    public static func systemField(_ name: String, typeHasField: (String) -> Bool) -> (column: String, type: FieldType)?
    {
        guard let system = systemFields[name] else { return nil }
        if !name.hasPrefix("___") && name != "recordName" && typeHasField(name) { return nil }
        return system
    }

    /// The message for a problem with the predicate, placed at `column` of its text.
    public static func predicateError(_ message: String, column: Int, text: String?) -> StoreError {
        guard let text else { return .badQuery(Message(message)) }
        return .badQuery("\(Wording.predicate(text))\n  at column \(column): \(message)")
    }

    /// How a predicate writes a value of `type`, for messages.
    public static func literalForm(_ type: FieldType) -> String {
        switch type.primitive {
        case .string, .reference: return "'text'"
        case .int64: return "whole number (or true/false)"
        case .double, .number: return "number"
        case .timestamp: return "date such as 2026-03-01 or 2026-03-01T09:00:00Z"
        default: return "value of that type"
        }
    }
}
