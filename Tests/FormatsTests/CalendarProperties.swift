import Foundation
import PropertyBased
import Records
import SampleApps
import TestSupport
import Testing

@testable import Formats
@testable import SQLiteStore
@testable import StoreCore

/// The calendar formats on generated data: each calendar app's records, from a random seed and
/// a random count, go out as iCalendar and as xCal through the app's mapping and come back into
/// the store they came from without a change (every record unchanged, nothing added); the RFC
/// 5545 checker beside the project passes every iCalendar file.
@Suite("calendars on random data")
struct CalendarProperties {
    @Test("random records of each calendar app go out as iCalendar and xCal and come back unchanged")
    func calendarsBack() async {
        await propertyCheck(count: 4, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            for app in [SampleApp.familyCalendar, .familyTodo, .relationshipCheckin] {
                do {
                    let scratch = Scratch()
                    let store = try scratch.store(app.schemaText, name: "\(app.rawValue).sqlite")
                    var records: [Record] = []
                    try app.generate(records: 40 + Int(seed % 400), seed: seed) { records.append($0) }
                    _ = try RecordImporter(store: store, options: ImportOptions()).run([ArrayRecordSource(records)])
                    let before = try allRecords(store)
                    let mapping = try CalendarMapping.parse(
                        app.calendarMappingText!, file: "mapping", schema: store.schema)
                    // Each record in its own zone (with --tz every time is written in that zone,
                    // and a record's zone field comes back as that zone: the instants only are kept).
                    let write = CalendarWriteSettings(
                        mapping: mapping, options: ICalExportOptions(dtstamp: 0, includeCancelled: true))
                    for format in [RecordFormat.iCalendar, .xCal] {
                        let path = scratch.path("out.\(format.extensions[0])")
                        let written = try exportCalendar(format, from: store, to: path, settings: write)
                        #expect(
                            written.written.values.reduce(0, +) > 0,
                            "seed \(seed), \(app.rawValue), \(format.name): nothing written")
                        if format == .iCalendar, let (status, report) = try Conformance.check(path) {
                            #expect(status == 0, "seed \(seed), \(app.rawValue): the RFC 5545 checker: \(report)")
                        }
                        let (summary, _) = try importCalendar(
                            path, into: store, settings: CalendarReadSettings(mapping: mapping))
                        #expect(
                            summary.totals.inserted == 0 && summary.totals.updated == 0 && summary.issues.isEmpty,
                            "seed \(seed), \(app.rawValue), \(format.name): \(summary.totals) \(summary.issues.prefix(3))"
                        )
                        expectSameRecords(try allRecords(store), before)
                    }
                } catch {
                    Issue.record("seed \(seed), \(app.rawValue): \(error)")
                }
            }
        }
    }

    /// A random calendar as another program might write it: events, to-dos and journal entries
    /// with text that needs escaping and folding (quotes, commas, semicolons, backslashes, line
    /// breaks, letters beyond ASCII), dates, UTC and floating times, rules, attendees with quoted
    /// parameters, extension properties, categories and alarms.
    static func randomCalendar(_ dice: inout SeededRandom, index: Int) -> String {
        let pieces = [
            "Rake", " the ", "leaves", ",", ";", "\\", "\n", "Zoë", "日本語", "🥑", "\"", ":", "x", "Ω", "—", "tab\there",
            "a\\,b",
        ]
        func text(_ count: Int) -> String {
            (0..<count).map { _ in dice.pick(pieces) }.joined().replacingOccurrences(of: "\\", with: "\\\\")
                .replacingOccurrences(of: ";", with: "\\;").replacingOccurrences(of: ",", with: "\\,")
                .replacingOccurrences(of: "\n", with: "\\n")
        }
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        func when(_ day: Int, _ hour: Int) -> String {
            "202601\(two(1 + day % 28))T\(two(hour % 24))\(two(dice.pick([0, 15, 30])))00"
        }
        var lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//ckport properties//random \(index)//EN"]
        if dice.roll(0.5) { lines.append("X-WR-CALNAME:" + text(3)) }
        for n in 0..<(1 + dice.below(5)) {
            let kind = dice.pick(["VEVENT", "VEVENT", "VTODO", "VJOURNAL"])
            let day = dice.below(26)
            let hour = dice.below(22)
            lines.append("BEGIN:\(kind)")
            lines.append("UID:\(index)-\(n)-\(dice.below(1_000_000))@properties.example")
            lines.append("DTSTAMP:20260101T000000Z")
            switch dice.below(3) {
            case 0: lines.append("DTSTART;VALUE=DATE:202601\(two(1 + day))")
            case 1: lines.append("DTSTART:\(when(day, hour))Z")
            default: lines.append("DTSTART:\(when(day, hour))")
            }
            let isDate = lines.last!.contains("VALUE=DATE")
            if kind == "VEVENT" {
                if dice.roll(0.5) { lines.append(isDate ? "DURATION:P1D" : "DURATION:PT\(1 + dice.below(3))H") }
            }
            if kind == "VTODO" && dice.roll(0.5) && !isDate {
                lines.append(
                    "DUE:\(when(day + 1, hour))"
                        + (lines.contains { $0.hasPrefix("DTSTART:") && $0.hasSuffix("Z") } ? "Z" : ""))
            }
            lines.append("SUMMARY:" + text(1 + dice.below(30)))
            if dice.roll(0.5) { lines.append("DESCRIPTION:" + text(dice.below(60))) }
            if dice.roll(0.4) {
                lines.append(
                    "CATEGORIES:"
                        + (0..<(1 + dice.below(3))).map { _ in
                            dice.pick(["Chores", "School", "Family\\, extended", "日本"])
                        }.joined(separator: ","))
            }
            if dice.roll(0.3) {
                lines.append("RRULE:FREQ=\(dice.pick(["DAILY", "WEEKLY", "MONTHLY"]));COUNT=\(1 + dice.below(9))")
            }
            if kind != "VJOURNAL" && dice.roll(0.3) {
                lines.append(
                    "ATTENDEE;CN=\"Okafor, Ada\";ROLE=REQ-PARTICIPANT;PARTSTAT=NEEDS-ACTION:mailto:ada\(n)@example.com")
            }
            if dice.roll(0.4) { lines.append("X-CKPORT-TEST;X-NOTE=\"a;b:c\":" + text(1 + dice.below(8))) }
            if dice.roll(0.3) { lines.append("SEQUENCE:\(dice.below(5))") }
            if kind != "VJOURNAL" && dice.roll(0.3) {
                lines += [
                    "BEGIN:VALARM", "ACTION:DISPLAY", "TRIGGER:-PT\(5 * (1 + dice.below(6)))M",
                    "DESCRIPTION:" + text(2), "END:VALARM",
                ]
            }
            lines.append("END:\(kind)")
        }
        lines.append("END:VCALENDAR")
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    @Test(
        "random calendars other programs might write come back the same through the archive route, as Python's icalendar reads them, and pass the RFC 5545 checker"
    )
    func archiveBack() throws {
        let python = try Conformance.requirePython()
        let compare = packageRoot.appendingPathComponent("Tests/FormatsTests/Fixtures/compare_calendars.py").path
        // A new seed each run (CKPORT_PROPERTY_SEED replays one a failure names).
        let seed =
            ProcessInfo.processInfo.environment["CKPORT_PROPERTY_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 0...UInt64.max)
        var dice = SeededRandom(state: seed)
        for index in 0..<12 {
            let scratch = Scratch()
            let input = scratch.path("random-\(index).ics")
            let text = Self.randomCalendar(&dice, index: index)
            try text.write(toFile: input, atomically: true, encoding: .utf8)
            let store = try RecordStore(path: scratch.path("archive.sqlite"))
            let summary = try archive([input], into: store)
            #expect(
                summary.issues.isEmpty && summary.totals.inserted > 0,
                "seed \(seed) #\(index): \(summary.totals) \(summary.issues.prefix(3))\n\(text)")
            let out = scratch.path("out.ics")
            _ = try exportArchive(store, to: out)
            if let (status, report) = try Conformance.check(out) {
                #expect(status == 0, "seed \(seed) #\(index): the RFC 5545 checker: \(report)\n\(text)")
            }
            let (status, report) = try Conformance.run(python, [compare, input, out])
            #expect(status == 0 && report.contains(", 0 differences"), "seed \(seed) #\(index): \(report)\n\(text)")
        }
    }
}
