import Foundation
import Records
import Testing

@testable import Formats

struct RecurrenceCase: Decodable, Sendable, CustomStringConvertible {
    var start: String
    var rule: String
    var exdate: String?
    var occurrences: [String]
    var description: String { rule }
}

struct RecurrenceFixture: Decodable {
    var timeZone: String
    var cases: [RecurrenceCase]
}

let recurrenceFixture: RecurrenceFixture = {
    let url = packageRoot.appendingPathComponent("Tests/FormatsTests/Fixtures/recurrence-cases.json")
    return try! JSONDecoder().decode(RecurrenceFixture.self, from: Data(contentsOf: url))
}()

@Suite("Recurrence rules")
struct RecurrenceTests {
    static var resolver: ZoneResolver { ZoneResolver() }

    func expand(
        _ start: String, _ rule: String, exdate: String? = nil, tzid: String = "America/New_York",
        to: Int64 = 4_102_444_800
    ) throws -> [String] {
        let (wall, _) = try #require(CalendarTime.parseDateTime(start))
        let resolver = RecurrenceTests.resolver
        let set = RecurrenceSet(
            start: wall, isDate: false, rules: [try RecurrenceRule(parsing: rule)],
            exceptions: exdate.map { [CalendarTime.zoned(CalendarTime.parseDateTime($0)!.0, tzid: tzid)] } ?? [],
            instant: { try! resolver.instant(wall: $0, tzid: tzid) },
            instantOf: { try! resolver.milliseconds($0) / 1000 })
        return try set.occurrences(from: Int64.min / 2, to: to).map { CalendarTime.basic($0, date: false) }
    }

    @Test("RFC 5545's examples and ckport's own cases give the known occurrences", arguments: recurrenceFixture.cases)
    func knownOccurrences(_ example: RecurrenceCase) throws {
        let found = try expand(example.start, example.rule, exdate: example.exdate)
        #expect(Array(found.prefix(example.occurrences.count)) == example.occurrences)
        if example.occurrences.count < 60 { #expect(found.count == example.occurrences.count) }
    }

    @Test(
        "a rule that started long ago is expanded over a short window by visiting the window's periods, not every one since its start"
    )
    func earlyStartVisitsTheWindowOnly() throws {
        // Every two seconds since 1970, over one hour of 2026: 1,800 occurrences.
        let set = RecurrenceSet(
            start: LocalDateTime(year: 1970, month: 1, day: 1), isDate: false, rules: [],
            instant: { $0.wallSeconds }, instantOf: { $0.local.wallSeconds })
        let from = LocalDateTime(year: 2026, month: 3, day: 1, hour: 10).wallSeconds
        let (occurrences, periods) = try set.expandCountingPeriods(
            try RecurrenceRule(parsing: "FREQ=SECONDLY;INTERVAL=2"), from: from, until: from + 3600)
        #expect(
            occurrences.count == 1_800 && occurrences.first == LocalDateTime(year: 2026, month: 3, day: 1, hour: 10))
        // The window's 1,800 periods, two of margin before it and the one that ends the walk:
        // not the 880 million since 1970.
        #expect(periods <= 1_800 + 4, "\(periods) periods visited")
    }

    @Test("UNTIL in UTC against a zoned DTSTART, and the window")
    func untilAndWindow() throws {
        // 09:00 New York on 1997-10-06 is 13:00Z, so UNTIL 13:00Z keeps it and 12:59:59Z does not.
        #expect(try expand("19971001T090000", "FREQ=DAILY;UNTIL=19971006T130000Z").last == "19971006T090000")
        #expect(try expand("19971001T090000", "FREQ=DAILY;UNTIL=19971006T125959Z").last == "19971005T090000")
        // A window keeps only what starts inside it.
        let resolver = RecurrenceTests.resolver
        let set = RecurrenceSet(
            start: LocalDateTime(year: 2026, month: 1, day: 1, hour: 8), isDate: false,
            rules: [try RecurrenceRule(parsing: "FREQ=DAILY")],
            instant: { try! resolver.instant(wall: $0, tzid: "Europe/Berlin") },
            instantOf: { try! resolver.milliseconds($0) / 1000 })
        let from = try resolver.instant(wall: LocalDateTime(year: 2026, month: 3, day: 1), tzid: "Europe/Berlin")
        let to = try resolver.instant(wall: LocalDateTime(year: 2026, month: 4, day: 1), tzid: "Europe/Berlin")
        let march = try set.occurrences(from: from, to: to)
        #expect(march.count == 31)
        #expect(march.allSatisfy { $0.hour == 8 })
        // Across the DST change on 29 March the wall time stays 08:00 and the instant moves by an hour.
        let before = try resolver.instant(wall: march[27], tzid: "Europe/Berlin")
        let after = try resolver.instant(wall: march[28], tzid: "Europe/Berlin")
        #expect(after - before == 23 * 3600)
    }

    @Test("RDATE adds and EXDATE removes occurrences; DATE exceptions remove a whole day")
    func datesAndExceptions() throws {
        let resolver = RecurrenceTests.resolver
        let set = RecurrenceSet(
            start: LocalDateTime(year: 2026, month: 1, day: 5, hour: 18), isDate: false,
            rules: [try RecurrenceRule(parsing: "FREQ=WEEKLY;COUNT=4")],
            dates: [.utc(LocalDateTime(year: 2026, month: 1, day: 7, hour: 17))],
            exceptions: [
                .utc(LocalDateTime(year: 2026, month: 1, day: 12, hour: 17)),
                .date(LocalDateTime(year: 2026, month: 1, day: 19)),
            ],
            instant: { try! resolver.instant(wall: $0, tzid: "Europe/Berlin") },
            instantOf: { try! resolver.milliseconds($0) / 1000 })
        let found = try set.occurrences(from: 0, to: 4_102_444_800).map { CalendarTime.basic($0, date: false) }
        #expect(found == ["20260105T180000", "20260107T170000", "20260126T180000"])
    }

    @Test("rules print back as they were read; bad rules are refused")
    func parsing() throws {
        let rule = try RecurrenceRule(parsing: "freq=monthly;byday=2mo,-1fr;bymonthday=-1;bysetpos=1;wkst=su;count=3")
        #expect(rule.text == "FREQ=MONTHLY;COUNT=3;BYDAY=2MO,-1FR;BYMONTHDAY=-1;BYSETPOS=1;WKST=SU")
        #expect(try RecurrenceRule(parsing: rule.text) == rule)
        for bad in [
            "COUNT=3", "FREQ=FORTNIGHTLY", "FREQ=DAILY;COUNT=0", "FREQ=DAILY;BYMONTHDAY=0", "FREQ=DAILY;BYDAY=XX",
            "FREQ=DAILY;COUNT=2;UNTIL=20260101", "FREQ=DAILY;FREQ=WEEKLY", "FREQ=DAILY;BYHOUR=24",
            "FREQ=DAILY;INTERVAL=-1",
        ] {
            #expect(throws: RecurrenceError.self, "\(bad)") { try RecurrenceRule(parsing: bad) }
        }
    }

    @Test("a rule that can never match ends instead of looping")
    func impossible() throws {
        #expect(try expand("20260101T090000", "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30;COUNT=3").count == 1)
    }
}
