import Foundation
import PropertyBased
import SampleApps
import Testing
import Records
@testable import Store

/// The `--where` language on random predicates over random records: printed text parses back
/// to the same conditions, and the SQLite store selects exactly the records the in-memory
/// evaluation (`RecordPredicate.matches`, written apart from the SQL) keeps.
private enum PredicateData {
    static let schemaText = """
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
    static let texts = ["", "a", "ab", "abc", "b", "A", "%", "a%", "_", "a_c", "'", "it's", "\\", "é", "e\u{301}", "e", "日本", "🥑", "z"]
    static let integers: [Int64] = [Int64.min, -2, -1, 0, 1, 2, 3, Int64.max]
    static let doubles = ["-1.5", "-0.0", "0", "0.5", "1", "2", "1e300", "-1e-300"]
    static let instants: [Int64] = [-86_400_000, 0, 1_000, 1_700_000_000_000, 1_700_000_000_123, 4_102_444_800_000]
    static let names = (0..<12).map { "r-\($0)" }
    static let comparisons: [ComparisonOperator] = [.equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual]
}

extension SeededRandom {
    mutating func predicateRecords() -> [Record] {
        PredicateData.names.filter { _ in roll(0.9) }.map { name in
            var record = Record(id: RecordID(recordName: name, zone: .defaultZone), recordType: "P")
            if roll(0.8) { record["s"] = .string(pick(PredicateData.texts)) }
            if roll(0.8) { record["i"] = .int64(pick(PredicateData.integers)) }
            if roll(0.8) { record["d"] = .double(Double(pick(PredicateData.doubles))!) }
            if roll(0.8) { record["t"] = .timestamp(pick(PredicateData.instants)) }
            if roll(0.8) { record["r"] = .reference(Reference(recordName: pick(PredicateData.names))) }
            if roll(0.8) { record["ls"] = .list(.string, (0..<below(4)).map { _ in .string(pick(PredicateData.texts)) }) }
            if roll(0.8) { record["li"] = .list(.int64, (0..<below(4)).map { _ in .int64(pick(PredicateData.integers)) }) }
            return record
        }
    }

    mutating func predicateCondition() -> Condition {
        func list(_ make: (inout SeededRandom) -> PredicateValue) -> PredicateValue {
            .list((0..<below(4)).map { _ in make(&self) })
        }
        switch below(8) {
        case 0:
            let op = pick(PredicateData.comparisons + [.in, .beginsWith])
            let value: PredicateValue = op == .in ? list { .string($0.pick(PredicateData.texts)) } : .string(pick(PredicateData.texts))
            return Condition(field: "s", op: op, value: value)
        case 1:
            let op = pick(PredicateData.comparisons + [.in])
            let one: (inout SeededRandom) -> PredicateValue = { dice in dice.roll(0.1) ? .bool(dice.roll(0.5)) : .number(String(dice.pick(PredicateData.integers))) }
            return Condition(field: "i", op: op, value: op == .in ? list(one) : one(&self))
        case 2:
            let op = pick(PredicateData.comparisons + [.in])
            return Condition(field: "d", op: op, value: op == .in ? list { .number($0.pick(PredicateData.doubles)) } : .number(pick(PredicateData.doubles)))
        case 3:
            let op = pick(PredicateData.comparisons + [.in])
            let one: (inout SeededRandom) -> PredicateValue = { .date(ISO8601.format(milliseconds: $0.pick(PredicateData.instants))) }
            return Condition(field: "t", op: op, value: op == .in ? list(one) : one(&self))
        case 4:
            let op = pick([ComparisonOperator.equal, .notEqual, .in])
            return Condition(field: "r", op: op, value: op == .in ? list { .string($0.pick(PredicateData.names)) } : .string(pick(PredicateData.names)))
        case 5:
            return Condition(field: "ls", op: .contains, value: .string(pick(PredicateData.texts)))
        case 6:
            return Condition(field: "li", op: .contains, value: .number(String(pick(PredicateData.integers))))
        default:
            let op = pick(PredicateData.comparisons + [.in, .beginsWith])
            let value: PredicateValue = op == .in ? list { .string($0.pick(PredicateData.names)) }
                : .string(op == .beginsWith ? pick(["r-", "r-1", "r", "", "s"]) : pick(PredicateData.names))
            return Condition(field: "recordName", op: op, value: value)
        }
    }
}

@Suite("the predicate language on random input")
struct PredicateProperties {
    @Test("a predicate printed parses back to the same conditions; the SQLite store selects exactly what the in-memory evaluation keeps")
    func storeAgreesWithEvaluation() async {
        await propertyCheck(count: 30, input: Gen.uint64(in: 0 ... UInt64.max)) { seed in
            do {
                var dice = SeededRandom(state: seed)
                let records = dice.predicateRecords()
                let scratch = Scratch()
                let store = try RecordStore(path: scratch.path("p.sqlite"))
                let schema = try SchemaParser.parse(PredicateData.schemaText)
                try store.importSchema(schema)
                _ = try RecordImporter(store: store, options: ImportOptions()).run([ArrayRecordSource(records)])
                let type = try #require(schema.recordType(named: "P"))
                var selectedSome = false
                for _ in 0..<25 {
                    let predicate = RecordPredicate((0..<(1 + dice.below(2))).map { _ in dice.predicateCondition() })
                    let text = predicate.description
                    let reparsed = try RecordPredicate.parse(text)
                    #expect(reparsed.conditions.map(\.description) == predicate.conditions.map(\.description)
                            && zip(reparsed.conditions, predicate.conditions).allSatisfy { $0.field == $1.field && $0.op == $1.op && $0.value == $1.value },
                            "seed \(seed): \(text) parsed as \(reparsed)")
                    let expected = try records.filter { try predicate.matches($0, type: type) }.map(\.recordName).sorted()
                    var found: [String] = []
                    try store.read { session in
                        try session.forEach(RecordQuery(recordTypes: ["P"], predicate: reparsed, predicateText: text)) { found.append($0.recordName) }
                    }
                    #expect(found.sorted() == expected, "seed \(seed): \(text): the store selects \(found.sorted()), the evaluation \(expected)")
                    if !expected.isEmpty { selectedSome = true }
                }
                // Not a property of empty answers: most runs' predicates keep something.
                #expect(records.isEmpty || selectedSome, "seed \(seed): no predicate of the run selected a record")
            } catch {
                Issue.record("seed \(seed): \(error)")
            }
        }
    }
}
