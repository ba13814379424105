import Foundation
import Records
import SampleApps
import Testing

@testable import Formats

/// Generated recurrence rules (every frequency from yearly to daily, INTERVAL, COUNT and UNTIL,
/// BYMONTH, BYMONTHDAY, BYDAY with and without ordinals, BYSETPOS, BYYEARDAY, BYWEEKNO, BYHOUR,
/// WKST) expanded by ckport and by python-dateutil's rrule, which is not ckport's code
/// (`Fixtures/recurrence-properties/rrules.py`, the version the conformance venv pins).
///
/// dateutil differs from RFC 5545 in one documented way: a DTSTART that does not fit the rule is
/// not an occurrence for it, where RFC 5545 makes DTSTART the first occurrence always and counts
/// it in COUNT (§3.3.10; libical's rule iterator does as dateutil). The comparison takes that
/// into account and nothing else.
@Suite("recurrence rules against python-dateutil")
struct RecurrenceProperties {
    struct Case: Codable {
        var start: String
        var rule: String
    }

    static let weekdays = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]

    static func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }

    static func basic(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> String {
        "\(year)\(two(month))\(two(day))T\(two(hour))\(two(minute))\(two(second))"
    }

    static func makeCase(_ dice: inout SeededRandom) -> Case {
        let year = 2020 + dice.below(8)
        let month = 1 + dice.below(12)
        let day = dice.roll(0.15) ? 29 + dice.below(3) : 1 + dice.below(28)
        let lastDay = [31, (year % 4 == 0 ? 29 : 28), 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        let start = basic(
            year: year, month: month, day: min(day, lastDay), hour: dice.below(24), minute: dice.pick([0, 15, 30, 45]),
            second: 0)
        let frequency = dice.pick(["YEARLY", "MONTHLY", "WEEKLY", "DAILY"])
        var parts = ["FREQ=\(frequency)"]
        if dice.roll(0.4) { parts.append("INTERVAL=\(1 + dice.below(4))") }
        if dice.roll(0.55) {
            parts.append("COUNT=\(1 + dice.below(25))")
        } else {
            // UNTIL as floating as DTSTART, up to about five years on.
            let untilYear = year + dice.below(6)
            parts.append(
                "UNTIL="
                    + basic(
                        year: untilYear, month: 1 + dice.below(12), day: 1 + dice.below(28), hour: dice.below(24),
                        minute: 0, second: 0))
        }
        var hasBy = false
        if dice.roll(frequency == "YEARLY" ? 0.5 : 0.2) {
            let months = Set((0..<(1 + dice.below(3))).map { _ in 1 + dice.below(12) }).sorted()
            parts.append("BYMONTH=" + months.map(String.init).joined(separator: ","))
            hasBy = true
        }
        if frequency != "WEEKLY" && dice.roll(0.3) {
            let days = Set((0..<(1 + dice.below(3))).map { _ in dice.pick([1, 2, 15, 28, 29, 30, 31, -1, -2, -31]) })
                .sorted()
            parts.append("BYMONTHDAY=" + days.map(String.init).joined(separator: ","))
            hasBy = true
        }
        if dice.roll(0.45) {
            let ordinals = (frequency == "MONTHLY" || frequency == "YEARLY") && dice.roll(0.5)
            let days = Set(
                (0..<(1 + dice.below(3))).map { _ in
                    (ordinals ? String(dice.pick([1, 2, 3, -1, -2, 5])) : "") + dice.pick(weekdays)
                })
            parts.append("BYDAY=" + days.sorted().joined(separator: ","))
            hasBy = true
        }
        if frequency == "YEARLY" && dice.roll(0.12) {
            parts.append(
                "BYYEARDAY="
                    + Set((0..<(1 + dice.below(2))).map { _ in dice.pick([1, 60, 100, 365, 366, -1, -366]) }).sorted()
                    .map(String.init).joined(separator: ","))
            hasBy = true
        }
        if frequency == "YEARLY" && dice.roll(0.12) {
            parts.append(
                "BYWEEKNO="
                    + Set((0..<(1 + dice.below(2))).map { _ in dice.pick([1, 2, 20, 52, 53, -1]) }).sorted().map(
                        String.init
                    ).joined(separator: ","))
            hasBy = true
        }
        if (frequency == "DAILY" || frequency == "WEEKLY") && dice.roll(0.15) {
            parts.append(
                "BYHOUR="
                    + Set((0..<(1 + dice.below(2))).map { _ in dice.below(24) }).sorted().map(String.init).joined(
                        separator: ","))
            hasBy = true
        }
        if hasBy && dice.roll(0.2) {
            parts.append("BYSETPOS=" + dice.pick(["1", "-1", "2", "1,-1"]))
        }
        if dice.roll(0.25) { parts.append("WKST=" + dice.pick(["MO", "SU", "TH"])) }
        return Case(start: start, rule: parts.joined(separator: ";"))
    }

    /// ckport's occurrences up to 2100, for a floating DTSTART (wall time read as UTC).
    static func ours(_ item: Case) throws -> [String] {
        let (wall, _) = try #require(CalendarTime.parseDateTime(item.start))
        let set = RecurrenceSet(
            start: wall, isDate: false, rules: [try RecurrenceRule(parsing: item.rule)],
            instant: { $0.wallSeconds }, instantOf: { $0.local.wallSeconds })
        return try set.occurrences(from: Int64.min / 2, to: 4_102_444_800).map { CalendarTime.basic($0, date: false) }
    }

    @Test("400 generated rules: the occurrences dateutil finds, with DTSTART first as RFC 5545 has it")
    func againstDateutil() throws {
        let python = try Conformance.requirePython()
        var dice = SeededRandom(state: 0x5EED_2026_1127)
        let cases = (0..<400).map { _ in Self.makeCase(&dice) }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-rrules-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let input = folder.appendingPathComponent("cases.json")
        try JSONEncoder().encode(cases).write(to: input)
        let script = packageRoot.appendingPathComponent("Tests/FormatsTests/Fixtures/recurrence-properties/rrules.py")
            .path
        let (status, output) = try Conformance.run(python, [script, input.path])
        try #require(status == 0, "rrules.py: \(output)")
        let lines = output.split(separator: "\n")
        try #require(lines.count == cases.count, "dateutil answered \(lines.count) of \(cases.count) cases")
        var mismatches: [String] = []
        var occurrences = 0
        var startFits = 0
        for (item, line) in zip(cases, lines) {
            let theirs = try JSONDecoder().decode([String].self, from: Data(line.utf8))
            let ours = try Self.ours(item)
            // RFC 5545: DTSTART is the first occurrence, and counts toward COUNT.
            var expected = theirs
            if theirs.first == item.start {
                startFits += 1
            } else if let count = item.rule.split(separator: ";").first(where: { $0.hasPrefix("COUNT=") }).flatMap({
                Int($0.dropFirst(6))
            }) {
                expected = [item.start] + theirs.prefix(count - 1)
            } else {
                expected = [item.start] + theirs
            }
            occurrences += expected.count
            if ours != expected {
                let onlyOurs = Set(ours).subtracting(expected).sorted().prefix(4)
                let onlyTheirs = Set(expected).subtracting(ours).sorted().prefix(4)
                mismatches.append(
                    "DTSTART:\(item.start) RRULE:\(item.rule): ckport \(ours.count), dateutil \(expected.count); only ckport \(Array(onlyOurs)), only dateutil \(Array(onlyTheirs))"
                )
            }
        }
        #expect(
            mismatches.isEmpty,
            "\(mismatches.count) of \(cases.count) rules differ:\n\(mismatches.prefix(8).joined(separator: "\n"))")
        // Not a comparison of empty lists: the rules produce occurrences, most starting where
        // the rule does.
        #expect(
            occurrences > 4000 && startFits > 100, "\(occurrences) occurrences, \(startFits) rules whose DTSTART fits")
    }
}
