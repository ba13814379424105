import Foundation
import Records
import SQLiteStore
import SampleApps
import StoreCore
import Testing

@testable import Formats

/// What a calendar view shows, checked against what a calendar app would show for the
/// iCalendar export: Python's icalendar and dateutil expand the exported file
/// (`Fixtures/calendar-view/occurrences.py`), and ckport's occurrences must be the same.
@Suite("calendar occurrences")
struct CalendarOccurrencesTests {
    static let script = packageRoot.appendingPathComponent("Tests/FormatsTests/Fixtures/calendar-view/occurrences.py")
        .path

    /// Each occurrence as "UID<TAB>start ms", sorted.
    static func ours(_ store: RecordStore, _ app: SampleApp, from: Int64, to: Int64, zone: TimeZone) throws -> [String]
    {
        let mapping = try CalendarMapping.parse(app.calendarMappingText!, file: "mapping", schema: store.schema)
        let found = try store.read {
            try CalendarOccurrences.find(in: $0, mapping: mapping, from: from, to: to, zone: zone, limit: 100_000)
        }
        #expect(!found.more)
        return found.occurrences.map { "\($0.record.recordName)\t\($0.start)" }.sorted()
    }

    static func theirs(
        _ store: RecordStore, _ app: SampleApp, from: Int64, to: Int64, zone: TimeZone, in scratch: Scratch
    ) throws -> [String] {
        let python = try Conformance.requirePython()
        let file = scratch.path("\(app.rawValue)-\(from).ics")
        _ = try export(store, app, to: file, options: ICalExportOptions(timeZone: zone, dtstamp: 1_767_225_600_000))
        let (status, output) = try Conformance.run(
            python,
            [script, file, ISO8601.format(milliseconds: from), ISO8601.format(milliseconds: to), zone.identifier])
        #expect(status == 0, "\(output)")
        return output.split(separator: "\n").map(String.init).sorted()
    }

    @Test(
        "a month of each calendar sample, in two zones, across a change of daylight saving time: the same occurrences, recurring chores expanded, as dateutil finds in the export",
        arguments: [
            (SampleApp.familyTodo, "2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z", "Europe/Berlin"),
            (SampleApp.familyTodo, "2026-10-15T00:00:00Z", "2026-11-15T00:00:00Z", "America/New_York"),
            (SampleApp.familyCalendar, "2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z", "Europe/Berlin"),
            (SampleApp.familyCalendar, "2026-05-01T00:00:00Z", "2026-06-01T00:00:00Z", "Asia/Tokyo"),
            (SampleApp.relationshipCheckin, "2026-01-01T00:00:00Z", "2026-01-15T00:00:00Z", "Europe/Berlin"),
        ])
    func agreesWithDateutil(_ app: SampleApp, _ fromText: String, _ toText: String, _ zoneName: String) throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(app)
        let from = try #require(ISO8601.parse(fromText))
        let to = try #require(ISO8601.parse(toText))
        let zone = try #require(TimeZone(identifier: zoneName))
        let ours = try Self.ours(store, app, from: from, to: to, zone: zone)
        let theirs = try Self.theirs(store, app, from: from, to: to, zone: zone, in: scratch)
        #expect(!theirs.isEmpty, "the window holds nothing: the comparison would prove nothing")
        #expect(
            ours == theirs,
            "only ckport: \(Set(ours).subtracting(theirs).sorted().prefix(10)); only dateutil: \(Set(theirs).subtracting(ours).sorted().prefix(10))"
        )
    }

    @Test(
        "events without an end, with an end before their start, and one that began the month before and ends in this one: each shown once, as dateutil shows the export"
    )
    func edges() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyCalendar)
        let zone = ZoneID(
            scope: .shared, zoneName: "family-1-zone", ownerRecordName: "_4f00e3e229b648635c6f63dca8da05ef")
        try store.write { session in
            for (name, start, end) in [
                ("no-end", Int64(1_772_700_000_000), Int64?.none),
                ("ends-before", 1_772_800_000_000, 1_772_700_000_000),
                ("from-february", 1_772_150_400_000, 1_772_409_600_000),
            ] {
                var record = Record(id: RecordID(recordName: name, zone: zone), recordType: "Event")
                record["title"] = .string(name)
                record["startDate"] = .timestamp(start)
                if let end { record["endDate"] = .timestamp(end) }
                _ = try session.save(record, mode: .insert)
            }
        }
        let from = try #require(ISO8601.parse("2026-03-01T00:00:00Z"))
        let to = try #require(ISO8601.parse("2026-04-01T00:00:00Z"))
        let berlin = try #require(TimeZone(identifier: "Europe/Berlin"))
        let ours = try Self.ours(store, .familyCalendar, from: from, to: to, zone: berlin)
        let theirs = try Self.theirs(store, .familyCalendar, from: from, to: to, zone: berlin, in: scratch)
        for name in ["no-end", "ends-before", "from-february"] {
            #expect(ours.filter { $0.hasPrefix(name + "\t") }.count == 1, "\(name): \(ours)")
        }
        #expect(
            ours == theirs,
            "only ckport: \(Set(ours).subtracting(theirs).sorted()); only dateutil: \(Set(theirs).subtracting(ours).sorted())"
        )
    }

    @Test(
        "a weekly chore keeps its wall-clock time across the change to summer time, and a limit keeps the earliest and says there are more"
    )
    func wallClockAndLimit() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyTodo)
        let mapping = try CalendarMapping.parse(
            SampleApp.familyTodo.calendarMappingText!, file: "mapping", schema: store.schema)
        let berlin = try #require(TimeZone(identifier: "Europe/Berlin"))
        let from = try #require(ISO8601.parse("2026-03-01T00:00:00Z"))
        let to = try #require(ISO8601.parse("2026-05-01T00:00:00Z"))
        let all = try store.read {
            try CalendarOccurrences.find(in: $0, mapping: mapping, from: from, to: to, zone: berlin, limit: 100_000)
        }
        let weekly = Dictionary(grouping: all.occurrences.filter(\.recurring), by: \.record.recordName).values.first {
            list in
            list.count >= 6 && list.contains { $0.start < 1_774_746_000_000 }
                && list.contains { $0.start > 1_774_746_000_000 }
        }
        let chore = try #require(weekly, "no chore recurs across 29 March 2026")
        let clocks = Set(
            chore.map { occurrence -> Int64 in
                let seconds = occurrence.start / 1000
                return (seconds + Int64(berlin.secondsFromGMT(for: Date(timeIntervalSince1970: Double(seconds)))))
                    % 86_400
            })
        #expect(clocks.count == 1, "\(chore.map { ISO8601.format(milliseconds: $0.start) })")
        let few = try store.read {
            try CalendarOccurrences.find(in: $0, mapping: mapping, from: from, to: to, zone: berlin, limit: 5)
        }
        #expect(few.more && few.occurrences.map(\.start) == all.occurrences.prefix(5).map(\.start))
    }
}
