import Foundation
import Records
import Testing

@testable import Formats
@testable import SQLiteStore
@testable import StoreCore

/// Calendars written to look like what Apple Calendar, Google Calendar, Outlook, Thunderbird,
/// Zimbra and Lotus Notes, and a web app export (their quirks: X- properties everywhere,
/// Windows zone names, RDATE periods, RFC 7529 RSCALE and SKIP, RFC 7986 properties, overrides
/// with RANGE, every alarm action, non-ASCII text folded across lines, LF line ends, TAB folds).
let calendarCorpus: [String] = {
    let folder = packageRoot.appendingPathComponent("Tests/FormatsTests/Fixtures/calendars").path
    return ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".ics") }
        .sorted().map { folder + "/" + $0 }
}()

func archive(_ paths: [String], into store: RecordStore) throws -> ImportSummary {
    let importer = RecordImporter(store: store, options: ImportOptions())
    importer.addingTypes = CalendarArchive.schema.recordTypes
    return try importer.run(try paths.map { CalendarArchiveReader(input: try ByteInput(path: $0)) })
}

func exportArchive(_ store: RecordStore, to path: String, where text: String? = nil) throws -> CalendarArchiveSummary {
    let output = try OutputFile(path: path)
    let predicate = try text.map { try RecordPredicate.parse($0) }
    let summary = try store.read {
        try CalendarArchiveExporter(session: $0).export(predicate: predicate, predicateText: text, to: output)
    }
    try output.commit()
    return summary
}

@Suite("the archive mapping")
struct CalendarArchiveTests {
    @Test("the corpus is there")
    func corpusPresent() {
        #expect(calendarCorpus.count >= 7)
    }

    @Test(
        "every calendar of the corpus comes back the same, component by component, as Python's icalendar reads it",
        arguments: calendarCorpus)
    func roundTrip(_ path: String) throws {
        let scratch = Scratch()
        let store = try RecordStore(path: scratch.path("archive.sqlite"))
        let summary = try archive([path], into: store)
        #expect(summary.issues.isEmpty, "\(summary.issues)")
        let out = scratch.path("out.ics")
        _ = try exportArchive(store, to: out)
        // Importing the same file again changes nothing.
        let again = try archive([path], into: store)
        #expect(again.totals.unchanged == summary.totals.inserted && again.totals.inserted == 0)
        if let (status, report) = try Conformance.check(out) {
            #expect(status == 0, "\(path): \(report)")
        }
        let python = try Conformance.requirePython()
        let compare = packageRoot.appendingPathComponent("Tests/FormatsTests/Fixtures/compare_calendars.py").path
        let (status, report) = try Conformance.run(python, [compare, path, out])
        #expect(status == 0, "\(report)")
        #expect(report.contains(", 0 differences"), "\(report)")
    }

    @Test(
        "the fields for queries: UID, overrides tied to their master, DTSTART as an instant, the original forms kept in content"
    )
    func fields() throws {
        let scratch = Scratch()
        let store = try RecordStore(path: scratch.path("archive.sqlite"))
        _ = try archive(calendarCorpus, into: store)
        var byUID: [String: [Record]] = [:]
        try store.read { session in
            try session.forEach(RecordQuery(recordTypes: [CalendarArchive.componentType])) { record in
                if case .string(let uid)? = record["uid"] { byUID[uid, default: []].append(record) }
            }
        }
        let swimming = try #require(byUID["7kukuqrfedlm2f9t0vu7qkt6r3@google.com"])
        #expect(swimming.count == 2)
        let override = try #require(swimming.first { $0["recurrenceId"] != nil })
        #expect(override["recurrenceId"] == .string(";TZID=America/New_York:20260114T170000"))
        // 17:00 in New York in January is 22:00 UTC.
        let master = try #require(swimming.first { $0["recurrenceId"] == nil })
        #expect(master["start"] == .timestamp(ISO8601.parse("2026-01-05T22:00:00Z")!))
        #expect(master["calendar"] == .string("The Parkers"))
        guard case .string(let content)? = master["content"] else {
            Issue.record("no content")
            return
        }
        #expect(
            content.contains(
                "ATTENDEE;CUTYPE=INDIVIDUAL;ROLE=CHAIR;PARTSTAT=TENTATIVE;CN=\"Parker, Jo\":mailto:jo@example.com"))
        #expect(content.contains("BEGIN:VALARM\nACTION:EMAIL"))
        let hebrew = try #require(byUID["hebrew-birthday@example.com"]?.first)
        guard case .string(let rule)? = hebrew["content"] else {
            Issue.record("no content")
            return
        }
        #expect(rule.contains("RRULE:RSCALE=HEBREW;FREQ=YEARLY;BYMONTH=5L;BYMONTHDAY=8;SKIP=FORWARD"))
        let text = try #require(byUID["long-text@example.com"]?.first)
        #expect(text["summary"] == .string("日本語のとても長い件名がここにあります。折り返しが UTF-8 の文字の途中で起きないことを確かめるための文章です 🎌🎌🎌"))
        let override2 = try #require(byUID["chore-42@chores.example"]?.first { $0["recurrenceId"] != nil })
        #expect(override2["recurrenceId"] == .string(";RANGE=THISANDFUTURE:20260316T160000Z"))
    }

    @Test("a calendar with no components: each route says so at import, not only the export that refuses it")
    func emptyCalendar() throws {
        let scratch = Scratch()
        let path = scratch.path("empty.ics")
        try Data(
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//x//y//EN\r\nX-WR-CALNAME:Nothing yet\r\nEND:VCALENDAR\r\n".utf8
        ).write(to: URL(fileURLWithPath: path))
        let store = try RecordStore(path: scratch.path("archive.sqlite"))
        let archived = try archive([path], into: store)
        #expect(
            archived.notes.contains {
                $0.contains("empty.ics holds a calendar with no components")
                    && $0.contains("an iCalendar export of it alone is refused")
            }, "\(archived.notes)")
        // A calendar with something in it says nothing of the kind.
        let full = try archive([calendarCorpus[0]], into: store)
        #expect(!full.notes.contains { $0.contains("no components") } && full.totals.inserted > 1, "\(full.notes)")
        // Through an app's mapping.
        let calendar = try CalendarImport()
        let mapped = try calendar.run(path)
        #expect(
            mapped.totals.inserted == 0
                && mapped.notes.contains {
                    $0.contains("empty.ics holds a calendar with no components")
                        && $0.contains("nothing in it to import")
                }, "\(mapped.notes)")
    }

    @Test("several calendars share a store; a selection exports alone; an empty one is an error, not an empty calendar")
    func selections() throws {
        let scratch = Scratch()
        let store = try RecordStore(path: scratch.path("archive.sqlite"))
        _ = try archive(calendarCorpus, into: store)
        let summary = try exportArchive(store, to: scratch.path("parkers.ics"), where: "calendar == 'The Parkers'")
        #expect(summary.calendars == ["The Parkers"])
        #expect(summary.components == ["VEVENT": 4, "VTIMEZONE": 1])
        let text = try String(contentsOfFile: scratch.path("parkers.ics"), encoding: .utf8)
        #expect(text.hasPrefix("BEGIN:VCALENDAR\r\nPRODID:-//Google Inc//Google Calendar 70.9054//EN\r\n"))
        do {
            _ = try exportArchive(store, to: scratch.path("none.ics"), where: "calendar == 'nobody'")
            Issue.record("an empty selection was exported")
        } catch {
            #expect("\(error)".contains("nothing to export"))
        }
        #expect(!FileManager.default.fileExists(atPath: scratch.path("none.ics")))
        let all = try exportArchive(store, to: scratch.path("all.ics"))
        #expect(all.calendars.count == calendarCorpus.count)
        if let (status, report) = try Conformance.check(scratch.path("all.ics")) {
            #expect(status == 0, "\(report)")
        }
    }

    @Test("many calendars of one event each are read once, not once per calendar, and come back in their order")
    func manyCalendars() throws {
        let scratch = Scratch()
        let count = 300
        var text = ""
        for number in 1...count {
            text += """
                BEGIN:VCALENDAR\r
                VERSION:2.0\r
                PRODID:-//ckport tests//EN\r
                X-WR-CALNAME:Calendar \(number)\r
                BEGIN:VEVENT\r
                UID:event-\(number)@example.com\r
                DTSTAMP:20260101T000000Z\r
                DTSTART:20260301T\(String(format: "%02d", number % 24))0000Z\r
                SUMMARY:Event \(number)\r
                END:VEVENT\r
                END:VCALENDAR\r

                """
        }
        try text.write(toFile: scratch.path("many.ics"), atomically: true, encoding: .utf8)
        let store = try RecordStore(path: scratch.path("archive.sqlite"))
        _ = try archive([scratch.path("many.ics")], into: store)
        let output = try OutputFile(path: scratch.path("out.ics"))
        let counted = try store.read { session in
            let counting = CountingReader(session)
            let summary = try CalendarArchiveExporter(session: counting).export(to: output)
            #expect(summary.calendars.count == count)
            #expect(summary.calendars.first == "Calendar 1" && summary.calendars.last == "Calendar \(count)")
            return counting.records
        }
        try output.commit()
        // The calendars' names once, then each calendar's components: twice the components
        // and the calendars' own records, where reading every calendar's selection in full
        // for each calendar hands over count × count.
        #expect(counted > 0 && counted <= 3 * count, "the store handed over \(counted) records for \(count) components")
        #expect(try String(contentsOfFile: scratch.path("out.ics"), encoding: .utf8) == text)
        if let (status, report) = try Conformance.check(scratch.path("out.ics")) {
            #expect(status == 0, "\(report)")
        }
        // A second file's calendar, whose components' positions are those of the first one's:
        // each calendar read on its own now, still without reading the selection per calendar.
        let extra = [
            "BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//ckport tests//EN", "X-WR-CALNAME:Extra", "BEGIN:VEVENT",
            "UID:extra@example.com", "DTSTAMP:20260101T000000Z", "DTSTART:20260301T000000Z", "SUMMARY:Extra",
            "END:VEVENT", "END:VCALENDAR", "",
        ]
        try extra.joined(separator: "\r\n").write(toFile: scratch.path("extra.ics"), atomically: true, encoding: .utf8)
        _ = try archive([scratch.path("extra.ics")], into: store)
        let second = try OutputFile(path: scratch.path("second.ics"))
        let recounted = try store.read { session in
            let counting = CountingReader(session)
            let summary = try CalendarArchiveExporter(session: counting).export(to: second)
            #expect(summary.calendars.count == count + 1 && summary.calendars.prefix(2) == ["Calendar 1", "Extra"])
            return counting.records
        }
        try second.commit()
        #expect(recounted > 0 && recounted <= 3 * (count + 1), "\(recounted) records for \(count + 1) components")
        // And the store finds one calendar's components through the index on its name.
        var query = RecordQuery(recordTypes: [CalendarArchive.componentType])
        query.sortField = "position"
        let plan = try store.read { try $0.queryPlan(CalendarArchiveExporter.components(of: "Calendar 7", in: query)) }
        let steps = plan.flatMap(\.plan).joined(separator: "; ")
        #expect(steps.contains("USING INDEX") && steps.contains("calendar"), "\(steps)")
    }
}

/// A reading session that counts the records it hands over.
final class CountingReader: RecordReading {
    let inner: any RecordReading
    var records = 0

    init(_ inner: any RecordReading) { self.inner = inner }

    var schema: Schema { inner.schema }
    var storeID: String { inner.storeID }
    var currentToken: ChangeToken { inner.currentToken }
    var zones: [ZoneID] { inner.zones }
    func record(_ id: RecordID) throws -> Record? { try inner.record(id) }
    func forEach(_ query: RecordQuery, _ body: (Record) throws -> Void) throws {
        try inner.forEach(query) { record in
            records += 1
            try body(record)
        }
    }
    func count(_ query: RecordQuery) throws -> Int { try inner.count(query) }
    func queryPlan(_ query: RecordQuery) throws -> [(sql: String, plan: [String])] { try inner.queryPlan(query) }
    func forEachChange(
        since token: ChangeToken, recordTypes: [String], scope: DatabaseScope?, zoneName: String?,
        _ body: (Record) throws -> Void
    ) throws {
        try inner.forEachChange(since: token, recordTypes: recordTypes, scope: scope, zoneName: zoneName, body)
    }
    func stats() throws -> StoreStats { try inner.stats() }
    func record(named name: String, ofType type: String) throws -> Record? {
        try inner.record(named: name, ofType: type)
    }
    func records(ofType type: String, whose field: String, pointsAt target: RecordID) throws -> [Record] {
        try inner.records(ofType: type, whose: field, pointsAt: target)
    }
    func shareHierarchies(in zone: ZoneID) throws -> [ShareHierarchy] { try inner.shareHierarchies(in: zone) }
    func bounds(_ query: RecordQuery, fields: [String]) throws -> (Int64, Int64)? {
        try inner.bounds(query, fields: fields)
    }
}
