import Foundation
import Records
import SQLiteStore
import SampleApps
import StoreCore

/// Random predicates over random records of one record type, for property tests of the
/// `--where` language on every store: the same texts, numbers, instants and names recur, so
/// that conditions meet stored values often.
public enum PredicateData {
    public static let schemaText = """
        DEFINE SCHEMA

        RECORD TYPE P (
            "___recordID" REFERENCE QUERYABLE,
            s             STRING QUERYABLE SORTABLE,
            i             INT64 QUERYABLE SORTABLE,
            d             DOUBLE QUERYABLE SORTABLE,
            t             TIMESTAMP QUERYABLE SORTABLE,
            r             REFERENCE QUERYABLE,
            ls            LIST<STRING> QUERYABLE,
            li            LIST<INT64> QUERYABLE,
            GRANT WRITE TO "_creator",
            GRANT CREATE TO "_icloud",
            GRANT READ TO "_world"
        );
        """
    /// Few values, so that conditions meet stored values often; texts a LIKE or a byte
    /// comparison could get wrong (wildcards, quotes, a backslash, case, accents written two
    /// ways, letters beyond ASCII).
    public static let texts = [
        "", "a", "ab", "abc", "b", "A", "%", "a%", "_", "a_c", "'", "it's", "\\", "é", "e\u{301}", "e", "日本", "🥑", "z",
    ]
    public static let integers: [Int64] = [Int64.min, -2, -1, 0, 1, 2, 3, Int64.max]
    public static let doubles = ["-1.5", "-0.0", "0", "0.5", "1", "2", "1e300", "-1e-300"]
    public static let instants: [Int64] = [
        -86_400_000, 0, 1_000, 1_700_000_000_000, 1_700_000_000_123, 4_102_444_800_000,
    ]
    public static let names = (0..<12).map { "r-\($0)" }
    public static let comparisons: [ComparisonOperator] = [
        .equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual,
    ]
}

extension SeededRandom {
    /// Records of type P with random values (each field missing at times).
    public mutating func predicateRecords() -> [Record] {
        PredicateData.names.filter { _ in roll(0.9) }.map { name in
            var record = Record(id: RecordID(recordName: name, zone: .defaultZone), recordType: "P")
            if roll(0.8) { record["s"] = .string(pick(PredicateData.texts)) }
            if roll(0.8) { record["i"] = .int64(pick(PredicateData.integers)) }
            if roll(0.8) { record["d"] = .double(Double(pick(PredicateData.doubles))!) }
            if roll(0.8) { record["t"] = .timestamp(pick(PredicateData.instants)) }
            if roll(0.8) { record["r"] = .reference(Reference(recordName: pick(PredicateData.names))) }
            if roll(0.8) {
                record["ls"] = .list(.string, (0..<below(4)).map { _ in .string(pick(PredicateData.texts)) })
            }
            if roll(0.8) {
                record["li"] = .list(.int64, (0..<below(4)).map { _ in .int64(pick(PredicateData.integers)) })
            }
            return record
        }
    }

    /// A condition of the right type for one of P's fields or the record name.
    public mutating func predicateCondition() -> Condition {
        func list(_ make: (inout SeededRandom) -> PredicateValue) -> PredicateValue {
            .list((0..<below(4)).map { _ in make(&self) })
        }
        switch below(8) {
        case 0:
            let op = pick(PredicateData.comparisons + [.in, .beginsWith])
            let value: PredicateValue =
                op == .in ? list { .string($0.pick(PredicateData.texts)) } : .string(pick(PredicateData.texts))
            return Condition(field: "s", op: op, value: value)
        case 1:
            let op = pick(PredicateData.comparisons + [.in])
            let one: (inout SeededRandom) -> PredicateValue = { dice in
                dice.roll(0.1) ? .bool(dice.roll(0.5)) : .number(String(dice.pick(PredicateData.integers)))
            }
            return Condition(field: "i", op: op, value: op == .in ? list(one) : one(&self))
        case 2:
            let op = pick(PredicateData.comparisons + [.in])
            return Condition(
                field: "d", op: op,
                value: op == .in
                    ? list { .number($0.pick(PredicateData.doubles)) } : .number(pick(PredicateData.doubles)))
        case 3:
            let op = pick(PredicateData.comparisons + [.in])
            let one: (inout SeededRandom) -> PredicateValue = {
                .date(ISO8601.format(milliseconds: $0.pick(PredicateData.instants)))
            }
            return Condition(field: "t", op: op, value: op == .in ? list(one) : one(&self))
        case 4:
            let op = pick([ComparisonOperator.equal, .notEqual, .in])
            return Condition(
                field: "r", op: op,
                value: op == .in ? list { .string($0.pick(PredicateData.names)) } : .string(pick(PredicateData.names)))
        case 5:
            return Condition(field: "ls", op: .contains, value: .string(pick(PredicateData.texts)))
        case 6:
            return Condition(field: "li", op: .contains, value: .number(String(pick(PredicateData.integers))))
        default:
            let op = pick(PredicateData.comparisons + [.in, .beginsWith])
            let value: PredicateValue =
                op == .in
                ? list { .string($0.pick(PredicateData.names)) }
                : .string(op == .beginsWith ? pick(["r-", "r-1", "r", "", "s"]) : pick(PredicateData.names))
            return Condition(field: "recordName", op: op, value: value)
        }
    }
}

extension PredicateData {
    /// Runs `count` random predicates on `store`, which holds `records`: each printed predicate
    /// must parse back to the same conditions, and the store must select exactly the records
    /// the in-memory evaluation keeps. Returns what went wrong, and how many predicates kept a
    /// record (so that a run of empty answers is seen).
    public static func check<S: RecordStoring>(_ store: S, records: [Record], dice: inout SeededRandom, count: Int)
        throws -> (problems: [String], selecting: Int)
    {
        let type = try SchemaParser.parse(schemaText).recordType(named: "P")!
        var problems: [String] = []
        var selecting = 0
        for _ in 0..<count {
            let predicate = RecordPredicate((0..<(1 + dice.below(2))).map { _ in dice.predicateCondition() })
            let text = predicate.description
            let reparsed = try RecordPredicate.parse(text)
            if reparsed.conditions.count != predicate.conditions.count
                || !zip(reparsed.conditions, predicate.conditions).allSatisfy({
                    $0.field == $1.field && $0.op == $1.op && $0.value == $1.value
                })
            {
                problems.append("\(text) parsed as \(reparsed)")
            }
            let expected = try records.filter { try predicate.matches($0, type: type) }.map(\.recordName).sorted()
            var found: [String] = []
            try store.read { session in
                try session.forEach(RecordQuery(recordTypes: ["P"], predicate: reparsed, predicateText: text)) {
                    found.append($0.recordName)
                }
            }
            if found.sorted() != expected {
                problems.append("\(text): the store selects \(found.sorted()), the evaluation \(expected)")
            }
            if !expected.isEmpty { selecting += 1 }
        }
        return (problems, selecting)
    }
}
