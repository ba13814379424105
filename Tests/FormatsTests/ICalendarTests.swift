import Foundation
import Records
import SampleApps
import Testing

@testable import Formats
@testable import SQLiteStore
@testable import StoreCore

/// The independent RFC 5545 checker beside the project, with its Python, when set up
/// (`../shared/conformance/setup.sh`; CI does it).

func export(
    _ store: RecordStore, _ app: SampleApp, to path: String, query: RecordQuery = RecordQuery(),
    options: ICalExportOptions = ICalExportOptions(dtstamp: 1_767_225_600_000)
) throws -> ICalExportSummary {
    let mapping = try CalendarMapping.parse(app.calendarMappingText!, file: "mapping", schema: store.schema)
    return try store.read { session in
        try ICalendarExporter(session: session, mapping: mapping, options: options).export(
            query, to: try OutputFile(path: path))
    }
}

@Suite("iCalendar text")
struct ICalendarTextTests {
    @Test("lines fold at 75 octets and never inside a UTF-8 sequence")
    func folding() throws {
        for prefix in 0..<8 {
            var writer = ICalLineWriter()
            let text = String(repeating: "x", count: prefix) + String(repeating: "Größe 😀 ", count: 30)
            writer.line("SUMMARY", ICalText.escape(text))
            let bytes = writer.take()
            let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: true)
            for line in lines {
                #expect(line.last == 0x0D)
                #expect(line.count - 1 <= 75)
                #expect(String(validating: Array(line), as: UTF8.self) != nil, "a fold split a character")
            }
            let parser = ICalParser(
                input: ByteInput(
                    name: "t.ics",
                    bytes: Array("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\n".utf8) + bytes
                        + Array("END:VEVENT\r\nEND:VCALENDAR\r\n".utf8)))
            let component = try #require(try parser.next())
            #expect(ICalText.unescape(component.property("SUMMARY")!.value) == text)
        }
    }

    @Test("words compared in any case as upper-casing compares them, Unicode's mappings included")
    func anyCase() {
        for (text, expected) in [
            ("cancelled", true), ("CANCELLED", true), ("CanCelled", true), ("CANCELLE", false), ("CANCELLED ", false),
            ("", false), ("cancelléd", false), ("CANCELLED\u{0}", false),
        ] {
            #expect(ICalText.equalsIgnoringCase(text, "CANCELLED") == expected, "\(text)")
        }
        // Dotless ı upper-cases to I and the long s ſ to S, as String.uppercased() says.
        #expect(ICalText.equalsIgnoringCase("ındıvıdual", "INDIVIDUAL"))
        #expect(ICalText.equalsIgnoringCase("falſe", "FALSE"))
        #expect(!ICalText.equalsIgnoringCase("ündividual", "INDIVIDUAL"))
    }

    @Test("names in any case, common or not, and times with spaces around them read the same")
    func namesAndTimes() throws {
        let long = "X-A-PROPERTY-NAME-LONGER-THAN-SIXTEEN"
        let text =
            "BEGIN:VCALENDAR\nbegin:vevent\nuid:a\nDtStart;tzid=Europe/Zurich: 20260301T090000 \nDTEND;VALUE=date:20260302\nRECURRENCE-ID;Value=DATE:\t20260303\n\(long.lowercased());X-P=1:v\nX-:empty\nEND:VEVENT\nEND:VCALENDAR\n"
        let parser = ICalParser(input: ByteInput(name: "t.ics", bytes: Array(text.utf8)))
        let event = try #require(try parser.next())
        #expect(event.name == "VEVENT")
        #expect(event.properties.map(\.name) == ["UID", "DTSTART", "DTEND", "RECURRENCE-ID", long, "X-"])
        let start = try #require(event.property("DTSTART"))
        #expect(start.parameter("TZID") == "Europe/Zurich")
        #expect(
            CalendarTime.parse(start)
                == .zoned(LocalDateTime(year: 2026, month: 3, day: 1, hour: 9), tzid: "Europe/Zurich"))
        #expect(
            CalendarTime.parse(try #require(event.property("DTEND")))
                == .date(LocalDateTime(year: 2026, month: 3, day: 2)))
        #expect(
            CalendarTime.parse(try #require(event.property("RECURRENCE-ID")))
                == .date(LocalDateTime(year: 2026, month: 3, day: 3)))
        #expect(event.property(long)?.parameter("X-P") == "1")
        for bad in ["2026030", "20260230", "20260301T250000Z", "20260301T0900", "20260301X090000", " "] {
            #expect(CalendarTime.parse(ContentLine(name: "DTSTART", value: bad)) == nil, "\(bad)")
        }
        #expect(
            CalendarTime.parse(ContentLine(name: "DTSTART", value: "20260301t090000z"))
                == .utc(LocalDateTime(year: 2026, month: 3, day: 1, hour: 9)))
    }

    @Test(
        "a UTF-8 byte-order mark before BEGIN:VCALENDAR is skipped, lines still counted from it; one anywhere else is refused at its line"
    )
    func byteOrderMark() throws {
        let body = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:bom-1\r\nSUMMARY:Piano\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
        let parser = ICalParser(input: ByteInput(name: "t.ics", bytes: [0xEF, 0xBB, 0xBF] + Array(body.utf8)))
        let event = try #require(try parser.next())
        #expect(event.name == "VEVENT" && event.property("UID")?.value == "bom-1" && event.line == 2)
        #expect(try parser.next() == nil)
        let late = ICalParser(
            input: ByteInput(
                name: "t.ics",
                bytes: Array("BEGIN:VCALENDAR\r\n".utf8) + [0xEF, 0xBB, 0xBF]
                    + Array("BEGIN:VEVENT\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n".utf8)))
        do {
            _ = try late.next()
            Issue.record("a byte-order mark on line 2 was read")
        } catch {
            #expect("\(error)".contains("t.ics:2"), "\(error)")
        }
    }

    @Test("TEXT escaping of backslash, semicolon, comma and newlines")
    func escaping() {
        let text = "a\\b;c,d\ne\r\nf"
        #expect(ICalText.escape(text) == "a\\\\b\\;c\\,d\\ne\\nf")
        #expect(ICalText.unescape(ICalText.escape(text)) == "a\\b;c,d\ne\nf")
        #expect(ICalText.splitList("family,school\\, sports,x\\\\") == ["family", "school, sports", "x\\"])
    }

    @Test("content lines: quoted and listed parameters, LF files, tab continuations, several calendars")
    func parsing() throws {
        let text =
            "BEGIN:VCALENDAR\nVERSION:2.0\nBEGIN:VEVENT\nUID:a\nATTENDEE;CN=\"Coach, Bob\";MEMBER=\"mailto:x@y\",\"mailto:z@w\";PARTSTAT=ACCEPTED:mailto:coach@\n\texample.com\nEND:VEVENT\nEND:VCALENDAR\nBEGIN:VCALENDAR\nBEGIN:VTODO\nUID:b\nEND:VTODO\nEND:VCALENDAR\n"
        let parser = ICalParser(input: ByteInput(name: "t.ics", bytes: Array(text.utf8)))
        let event = try #require(try parser.next())
        let attendee = try #require(event.property("ATTENDEE"))
        #expect(attendee.parameter("CN") == "Coach, Bob")
        #expect(attendee.parameterValues("MEMBER") == ["mailto:x@y", "mailto:z@w"])
        #expect(attendee.value == "mailto:coach@example.com")
        #expect(attendee.line == 5)
        #expect(try parser.next()?.name == "VTODO")
        #expect(try parser.next() == nil)
        #expect(parser.calendarCount == 2)
    }

    @Test("times: UTC, system zones, a calendar's own VTIMEZONE across DST, floating, dates, durations")
    func times() throws {
        let zones = ZoneResolver(defaultZone: TimeZone(identifier: "America/New_York"))
        func ms(_ value: String, _ parameters: [(name: String, values: [String])] = []) throws -> Int64 {
            try zones.milliseconds(
                try #require(CalendarTime.parse(ContentLine(name: "DTSTART", parameters: parameters, value: value))))
        }
        #expect(try ms("20260112T090000Z") == 1_768_208_400_000)
        #expect(try ms("20260112T100000", [("TZID", ["Europe/Berlin"])]) == 1_768_208_400_000)
        #expect(try ms("20260712T110000", [("TZID", ["Europe/Berlin"])]) == ISO8601.parse("2026-07-12T09:00:00Z"))
        #expect(try ms("20260112T040000") == 1_768_208_400_000)
        #expect(try ms("20260112", [("VALUE", ["DATE"])]) == ISO8601.parse("2026-01-12T05:00:00Z"))
        // Outlook's Windows zone name, defined by the calendar itself.
        let outlook = ICalParser(
            input: try ByteInput(
                path: packageRoot.appendingPathComponent("Tests/FormatsTests/Fixtures/outlook.ics").path))
        let vtimezone = try #require(try outlook.next())
        try zones.add(vtimezone)
        #expect(
            try ms("20260327T180000", [("TZID", ["W. Europe Standard Time"])]) == ISO8601.parse("2026-03-27T17:00:00Z"))
        #expect(
            try ms("20260330T180000", [("TZID", ["W. Europe Standard Time"])]) == ISO8601.parse("2026-03-30T16:00:00Z"))
        #expect(
            try ms("20261030T180000", [("TZID", ["W. Europe Standard Time"])]) == ISO8601.parse("2026-10-30T17:00:00Z"))
        #expect(throws: RecurrenceError.self) { try ms("20260112T090000", [("TZID", ["Mars/Olympus_Mons"])]) }
        #expect(CalendarTime.parse(ContentLine(name: "DTSTART", value: "20260230T090000")) == nil)
        #expect(CalendarDuration.parse("-PT15M") == -900)
        #expect(CalendarDuration.parse("P1DT2H") == 93_600)
        #expect(CalendarDuration.parse("P2W") == 1_209_600)
        #expect(CalendarDuration.parse("PT") == nil)
        #expect(CalendarDuration.format(seconds: -900) == "-PT15M")
        #expect(CalendarDuration.format(seconds: 93_601) == "P1DT2H1S")
        #expect(UTCOffset.parse("-0530") == -19_800)
        #expect(UTCOffset.format(3600) == "+0100")
    }

    @Test("a VTIMEZONE built from the system database covers the exported dates, DST included")
    func vtimezone() throws {
        let zone = TimeZone(identifier: "Europe/Berlin")!
        let lines = VTimeZoneBuilder.lines(
            for: zone, from: ISO8601.parse("2026-01-10T00:00:00Z")!, to: ISO8601.parse("2026-12-01T00:00:00Z")!)
        let text = lines.map { "\($0.name):\($0.value)" }
        #expect(text.contains("DTSTART:20260329T020000"))
        #expect(text.contains("DTSTART:20261025T030000"))
        #expect(text.filter { $0 == "BEGIN:DAYLIGHT" }.count == 1)
        #expect(text.filter { $0 == "BEGIN:STANDARD" }.count == 2)
        // TZNAME is the zone database's abbreviation, never Foundation's "GMT+1".
        #expect(Set(text.filter { $0.hasPrefix("TZNAME:") }) == ["TZNAME:CET", "TZNAME:CEST"], "\(text)")
        for (identifier, names) in [
            ("America/New_York", ["EST", "EDT"]), ("Australia/Sydney", ["AEST", "AEDT"]), ("Asia/Kolkata", ["IST"]),
        ] {
            let other = VTimeZoneBuilder.lines(
                for: TimeZone(identifier: identifier)!, from: ISO8601.parse("2026-01-10T00:00:00Z")!,
                to: ISO8601.parse("2026-12-01T00:00:00Z")!)
            #expect(Set(other.filter { $0.name == "TZNAME" }.map(\.value)) == Set(names), "\(identifier)")
        }
        // The definition read back gives the system's offsets on both sides of each change.
        let component = ICalComponent(
            name: "VTIMEZONE", properties: [ContentLine(name: "TZID", value: "X")],
            components: stride(from: 2, to: lines.count - 1, by: 6).map { start in
                ICalComponent(
                    name: lines[start].value,
                    properties: lines[(start + 1)..<(start + 5)].map { ContentLine(name: $0.name, value: $0.value) })
            })
        let defined = try DefinedZone(component)
        for instant in [
            "2026-03-29T00:59:59Z", "2026-03-29T01:00:00Z", "2026-10-25T00:59:59Z", "2026-10-25T01:00:00Z",
            "2026-06-01T12:00:00Z",
        ] {
            let seconds = ISO8601.parse(instant)! / 1000
            #expect(
                defined.offset(at: seconds)
                    == Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(seconds)))), "\(instant)")
        }
    }
}

@Suite("iCalendar export")
struct ICalendarExportTests {
    @Test(
        "every sample's calendar passes the independent checker, and its peers count what we wrote",
        arguments: [SampleApp.familyCalendar, .familyTodo, .relationshipCheckin])
    func samplesPassIndependentParsers(app: SampleApp) throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(app)
        let path = scratch.path("\(app.rawValue).ics")
        let summary = try export(store, app, to: path)
        let written = summary.written.values.reduce(0, +)
        #expect(written > 0)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        // Deterministic: the same store gives the same bytes.
        let again = scratch.path("again.ics")
        _ = try export(store, app, to: again)
        #expect(try Data(contentsOf: URL(fileURLWithPath: again)) == bytes)
        if let (status, report) = try Conformance.check(path) {
            #expect(status == 0, "\(report)")
        }
        let python = try Conformance.requirePython()
        let script = """
            import json, sys, icalendar
            cal = icalendar.Calendar.from_ical(open(sys.argv[1], 'rb').read())
            out = []
            for c in cal.walk():
                if c.name in ('VEVENT', 'VTODO', 'VJOURNAL'):
                    start = c.get('DTSTART')
                    end = c.get('DTEND') if c.get('DTEND') is not None else c.get('DUE')
                    attendees = c.get('ATTENDEE')
                    attendees = [] if attendees is None else (attendees if isinstance(attendees, list) else [attendees])
                    out.append([c.name, str(c.get('UID')), start.to_ical().decode() if start is not None else None,
                                end.to_ical().decode() if end is not None else None, len(attendees)])
            print(json.dumps(out))
            """
        let (status, output) = try Conformance.run(python, ["-c", script, path])
        #expect(status == 0, "\(output)")
        let theirs = try JSONDecoder().decode([[JSONScalar]].self, from: Data(output.utf8))
        // Our own reading of the same file.
        let parser = ICalParser(input: try ByteInput(path: path))
        var ours: [[JSONScalar]] = []
        while let component = try parser.next() {
            if component.name == "VTIMEZONE" { continue }
            ours.append([
                .text(component.name), .text(ICalText.unescape(component.property("UID")!.value)),
                component.property("DTSTART").map { .text($0.value) } ?? .null,
                (component.property("DTEND") ?? component.property("DUE")).map { .text($0.value) } ?? .null,
                .number(component.all("ATTENDEE").count),
            ])
        }
        #expect(theirs == ours)
        #expect(ours.count == written)
        // And what the store holds: every record the mapping exports, under its own name.
        let expected = try store.read { session -> [(name: String, start: Int64?)] in
            var records: [(name: String, start: Int64?)] = []
            let mapping = try CalendarMapping.parse(app.calendarMappingText!, file: "mapping", schema: store.schema)
            for (component, query) in try ICalendarExporter(
                session: session, mapping: mapping, options: ICalExportOptions()
            ).queries(RecordQuery()) {
                let type = session.schema.recordType(named: component.recordType)!
                let startField = component.property("DTSTART")?.sourceField
                try session.forEach(query) { record in
                    guard try !(component.cancelled?.matches(record, type: type) ?? false) else { return }
                    var start: Int64?
                    if let startField, case .timestamp(let ms)? = record.fields[startField] { start = ms }
                    records.append((record.recordName, start))
                }
            }
            return records
        }
        #expect(ours.map { $0[1] } == expected.map { JSONScalar.text($0.name) })
        // The times are the records' own: to the second, or to the day for DATE values.
        let resolver = ZoneResolver()
        let parser2 = ICalParser(input: try ByteInput(path: path))
        var index = 0
        while let component = try parser2.next() {
            if component.name == "VTIMEZONE" { continue }
            defer { index += 1 }
            guard index < expected.count, let stored = expected[index].start else {
                #expect(component.property("DTSTART") == nil)
                continue
            }
            let property = try #require(component.property("DTSTART"))
            let time = try #require(CalendarTime.parse(property))
            let written = try resolver.milliseconds(time)
            let day: Int64 = 86_400_000
            #expect(
                written == (time.isDate ? ISO8601.floorDiv(stored, day) * day : ISO8601.floorDiv(stored, 1000) * 1000),
                "\(expected[index].name)")
        }
    }

    @Test("family-calendar: a family's month, attendees, alarms, all-day events and cancelled events")
    func familyCalendar() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyCalendar)
        let query = RecordQuery(
            predicate: try RecordPredicate.parse(
                "familyID == 'family-1' AND startDate >= 2026-03-01 AND startDate < 2026-04-01"))
        let path = scratch.path("march.ics")
        let summary = try export(store, .familyCalendar, to: path, query: query)
        #expect(summary.calendarName == "The Müllers")
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(
            text.hasPrefix(
                "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//ckport//ckport \(CKPortVersion.current)//EN\r\nCALSCALE:GREGORIAN\r\nX-WR-CALNAME:The Müllers\r\n"
            ))
        #expect(!text.contains("METHOD:"))
        let events = try store.read { session -> [Record] in
            var found: [Record] = []
            try session.forEach(RecordQuery(recordTypes: ["Event"], predicate: query.predicate)) { found.append($0) }
            return found
        }
        let live = events.filter { $0.fields["isDeleted"] != .int64(1) }
        #expect(summary.written["Event"] == live.count)
        #expect(summary.cancelledLeftOut == events.count - live.count)
        for event in live {
            #expect(text.contains("UID:\(event.recordName)\r\n"))
        }
        // With --include-deleted the soft-deleted ones come too, as cancelled.
        let all = try export(
            store, .familyCalendar, to: scratch.path("all.ics"),
            options: ICalExportOptions(dtstamp: 0, includeCancelled: true))
        #expect(
            try String(contentsOfFile: scratch.path("all.ics"), encoding: .utf8).components(
                separatedBy: "STATUS:CANCELLED"
            ).count - 1 == all.written["Event"]!
                - (try store.read {
                    try $0.count(
                        RecordQuery(recordTypes: ["Event"], predicate: try RecordPredicate.parse("isDeleted == false")))
                }))
        // Alarms: one VALARM per event with a reminder, triggered relative to the start.
        let reminders = live.filter { $0.fields["reminderTime"] != nil }
        #expect(text.components(separatedBy: "BEGIN:VALARM\r\nACTION:DISPLAY\r\n").count - 1 == reminders.count)
    }

    @Test(
        "an empty selection fails, or, where empty calendars are allowed (a feed), is a calendar of one VTIMEZONE that RFC 5545 readers take"
    )
    func emptySelection() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyCalendar)
        let nobody = RecordQuery(predicate: try RecordPredicate.parse("familyID == 'nobody'"))
        #expect(throws: StoreError.self) {
            _ = try export(store, .familyCalendar, to: scratch.path("no.ics"), query: nobody)
        }
        #expect(!FileManager.default.fileExists(atPath: scratch.path("no.ics")))
        for zone in [nil, "Europe/Berlin"] {
            let path = scratch.path("empty-\(zone?.replacingOccurrences(of: "/", with: "-") ?? "utc").ics")
            let summary = try export(
                store, .familyCalendar, to: path, query: nobody,
                options: ICalExportOptions(
                    timeZone: zone.flatMap(TimeZone.init(identifier:)), dtstamp: 1_767_225_600_000, allowsEmpty: true))
            #expect(summary.written.isEmpty)
            let text = try String(contentsOfFile: path, encoding: .utf8)
            #expect(text.hasPrefix("BEGIN:VCALENDAR\r\nVERSION:2.0\r\n") && text.hasSuffix("END:VCALENDAR\r\n"))
            #expect(
                text.contains("BEGIN:VTIMEZONE\r\nTZID:\(zone ?? "GMT")\r\n") && !text.contains("VEVENT"), "\(text)")
            if let (status, report) = try Conformance.check(path) { #expect(status == 0, "\(report)") }
        }
    }

    @Test("--tz writes local times with TZID and a VTIMEZONE; reading them back gives the same instants")
    func timeZoneRoundTrip() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyCalendar)
        let path = scratch.path("berlin.ics")
        _ = try export(
            store, .familyCalendar, to: path,
            options: ICalExportOptions(
                timeZone: TimeZone(identifier: "Europe/Berlin"), dtstamp: 0, includeCancelled: true))
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains("BEGIN:VTIMEZONE\r\nTZID:Europe/Berlin\r\n"))
        #expect(text.contains("DTSTART;TZID=Europe/Berlin:"))
        if let (status, report) = try Conformance.check(path) { #expect(status == 0, "\(report)") }
        let copy = try RecordStore(path: scratch.path("copy.sqlite"))
        try copy.importSchema(store.schema)
        let mapping = try CalendarMapping.parse(
            SampleApp.familyCalendar.calendarMappingText!, file: "m", schema: store.schema)
        let reader = ICalendarRecordReader(
            input: try ByteInput(path: path), mapping: mapping, schema: store.schema, options: ICalImportOptions())
        _ = try RecordImporter(store: copy, options: ImportOptions()).run([reader])
        let originals = try allEvents(store)
        let copies = try allEvents(copy)
        #expect(copies.count == originals.count)
        for (original, copy) in zip(originals, copies) {
            #expect(copy.recordName == original.recordName)
            for field in [
                "startDate", "endDate", "title", "reminderTime", "isDeleted", "createdAt", "updatedAt", "location",
                "category",
            ] {
                #expect(copy.fields[field] == original.fields[field], "\(original.recordName).\(field)")
            }
        }
    }

    @Test(
        "an event that does not say how its times were written, from local midnight to midnight, is an all-day event, in UTC and under --tz"
    )
    func allDayEvents() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyCalendar)
        let name = try #require(try allEvents(store).first { $0.fields["isDeleted"] != .int64(1) }?.recordName)
        func setTimes(_ start: String, _ end: String) throws {
            try store.write { session in
                var record = try #require(try session.record(named: name, ofType: "Event"))
                record.fields["startDate"] = .timestamp(ISO8601.parse(start)!)
                record.fields["endDate"] = .timestamp(ISO8601.parse(end)!)
                record.fields["timeZone"] = nil
                try session.save(record, mode: .replace)
            }
        }
        func event(_ path: String) throws -> ICalComponent {
            let parser = ICalParser(input: try ByteInput(path: path))
            while let component = try parser.next() {
                if component.property("UID")?.value == name { return component }
            }
            throw CalendarTestFailure.missing(name)
        }
        // Midnight to midnight UTC, two days: DATE values, DTEND exclusive.
        try setTimes("2026-04-05T00:00:00Z", "2026-04-07T00:00:00Z")
        _ = try export(store, .familyCalendar, to: scratch.path("utc.ics"))
        var component = try event(scratch.path("utc.ics"))
        #expect(component.property("DTSTART")?.parameter("VALUE") == "DATE")
        #expect(component.property("DTSTART")?.value == "20260405")
        #expect(component.property("DTEND")?.value == "20260407")
        // The same instants are not midnight in Berlin, so there they stay timed.
        _ = try export(
            store, .familyCalendar, to: scratch.path("berlin.ics"),
            options: ICalExportOptions(timeZone: TimeZone(identifier: "Europe/Berlin"), dtstamp: 0))
        component = try event(scratch.path("berlin.ics"))
        #expect(component.property("DTSTART")?.value == "20260405T020000")
        #expect(component.property("DTSTART")?.parameter("TZID") == "Europe/Berlin")
        // Berlin's midnights across the spring change (a 23-hour day) are an all-day event there.
        try setTimes("2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z")
        _ = try export(
            store, .familyCalendar, to: scratch.path("dst.ics"),
            options: ICalExportOptions(timeZone: TimeZone(identifier: "Europe/Berlin"), dtstamp: 0))
        component = try event(scratch.path("dst.ics"))
        #expect(component.property("DTSTART")?.value == "20260329")
        #expect(component.property("DTEND")?.value == "20260330")
        if let (status, report) = try Conformance.check(scratch.path("dst.ics")) { #expect(status == 0, "\(report)") }
        // Reading it back under the same zone, through a mapping without a timeZone field, gives
        // the same instants; through the app's mapping, which keeps the form, too: the export
        // said the record keeps none, with the zone whose midnights its dates are
        // (X-CKPORT-TIMEZONE;TZID=Europe/Berlin:none), so it comes back as it was.
        #expect(
            component.property("X-CKPORT-TIMEZONE")?.value == "none"
                && component.property("X-CKPORT-TIMEZONE")?.parameter("TZID") == "Europe/Berlin")
        for keepsForm in [false, true] {
            let copy = try RecordStore(path: scratch.path("copy-\(keepsForm).sqlite"))
            try copy.importSchema(store.schema)
            var text = SampleApp.familyCalendar.calendarMappingText!
            if !keepsForm { text = text.replacingOccurrences(of: "    timeZone: timeZone\n", with: "") }
            let mapping = try CalendarMapping.parse(text, file: "m", schema: store.schema)
            #expect((mapping.components[0].timeZone != nil) == keepsForm)
            let reader = ICalendarRecordReader(
                input: try ByteInput(path: scratch.path("dst.ics")), mapping: mapping, schema: store.schema,
                options: ICalImportOptions(timeZone: TimeZone(identifier: "Europe/Berlin")))
            _ = try RecordImporter(store: copy, options: ImportOptions()).run([reader])
            let back = try #require(try copy.read { try $0.record(named: name, ofType: "Event") })
            #expect(back.fields["startDate"] == .timestamp(ISO8601.parse("2026-03-28T23:00:00Z")!))
            #expect(back.fields["endDate"] == .timestamp(ISO8601.parse("2026-03-29T22:00:00Z")!))
            #expect(back.fields["timeZone"] == nil)
        }
    }

    @Test("an event's timeZone field decides its form, and --tz never moves a date or a floating time")
    func keptFormsUnderTZ() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyCalendar)
        let names = try allEvents(store).filter { $0.fields["isDeleted"] != .int64(1) }.prefix(4).map(\.recordName)
        try #require(names.count == 4)
        // (kept form, start, end) for four events.
        let forms: [(String, String, String)] = [
            ("date", "2026-04-05T00:00:00Z", "2026-04-07T00:00:00Z"),
            ("floating", "2026-04-05T00:00:00Z", "2026-04-06T00:00:00Z"),
            ("Europe/Zurich", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"),
            ("UTC", "2026-04-05T00:00:00Z", "2026-04-06T00:00:00Z"),
        ]
        try store.write { session in
            for (name, form) in zip(names, forms) {
                var record = try #require(try session.record(named: name, ofType: "Event"))
                record.fields["timeZone"] = .string(form.0)
                record.fields["startDate"] = .timestamp(ISO8601.parse(form.1)!)
                record.fields["endDate"] = .timestamp(ISO8601.parse(form.2)!)
                try session.save(record, mode: .upsert)
            }
        }
        func starts(_ path: String) throws -> [String: String] {
            let parser = ICalParser(input: try ByteInput(path: path))
            var found: [String: String] = [:]
            while let component = try parser.next() {
                guard let uid = component.property("UID")?.value, names.contains(uid),
                    let start = component.property("DTSTART"),
                    let end = component.property("DTEND")
                else { continue }
                let parameters = start.parameters.map { "\($0.name)=\($0.values.joined(separator: ","))" }.joined(
                    separator: ";")
                found[uid] = "\(parameters)|\(start.value)|\(end.value)"
            }
            return found
        }
        _ = try export(store, .familyCalendar, to: scratch.path("kept.ics"))
        // Midnight to midnight, but each says its form: no all-day guess for the zone, floating or UTC.
        #expect(
            try starts(scratch.path("kept.ics")) == [
                names[0]: "VALUE=DATE|20260405|20260407", names[1]: "|20260405T000000|20260406T000000",
                names[2]: "TZID=Europe/Zurich|20260329T000000|20260330T000000",
                names[3]: "|20260405T000000Z|20260406T000000Z",
            ])
        if let (status, report) = try Conformance.check(scratch.path("kept.ics")) { #expect(status == 0, "\(report)") }
        // West of UTC the date stays the date; the floating time gets --tz's TZID with its wall clock.
        _ = try export(
            store, .familyCalendar, to: scratch.path("la.ics"),
            options: ICalExportOptions(timeZone: TimeZone(identifier: "America/Los_Angeles"), dtstamp: 0))
        #expect(
            try starts(scratch.path("la.ics")) == [
                names[0]: "VALUE=DATE|20260405|20260407",
                names[1]: "TZID=America/Los_Angeles|20260405T000000|20260406T000000",
                names[2]: "TZID=America/Los_Angeles|20260328T160000|20260329T150000",
                names[3]: "TZID=America/Los_Angeles|20260404T170000|20260405T170000",
            ])
        if let (status, report) = try Conformance.check(scratch.path("la.ics")) { #expect(status == 0, "\(report)") }
        // Imported again under yet another zone, every event is what it was.
        let copy = try RecordStore(path: scratch.path("copy.sqlite"))
        try copy.importSchema(store.schema)
        let mapping = try CalendarMapping.parse(
            SampleApp.familyCalendar.calendarMappingText!, file: "m", schema: store.schema)
        let reader = ICalendarRecordReader(
            input: try ByteInput(path: scratch.path("kept.ics")), mapping: mapping, schema: store.schema,
            options: ICalImportOptions(timeZone: TimeZone(identifier: "Pacific/Honolulu")))
        _ = try RecordImporter(store: copy, options: ImportOptions()).run([reader])
        let originals = try allEvents(store).filter { names.contains($0.recordName) }
        let copies = try allEvents(copy).filter { names.contains($0.recordName) }
        #expect(copies.map { $0.fields["timeZone"] } == originals.map { $0.fields["timeZone"] })
        #expect(copies.map { $0.fields["startDate"] } == originals.map { $0.fields["startDate"] })
        #expect(copies.map { $0.fields["endDate"] } == originals.map { $0.fields["endDate"] })
    }

    func allEvents(_ store: RecordStore) throws -> [Record] {
        try store.read { session in
            var events: [Record] = []
            try session.forEach(RecordQuery(recordTypes: ["Event"])) { events.append($0) }
            return events.sorted { $0.recordName < $1.recordName }
        }
    }

    @Test("family-todo: statuses, area categories and chore rules, days 29–31 on the month's last day")
    func familyTodo() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyTodo)
        let path = scratch.path("todo.ics")
        let summary = try export(store, .familyTodo, to: path)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let activeChores = try store.read {
            try $0.count(
                RecordQuery(recordTypes: ["RecurringChore"], predicate: try RecordPredicate.parse("isActive == 1")))
        }
        #expect(summary.written["RecurringChore"] == activeChores)
        #expect(summary.written["Task"] == 46)
        #expect(text.contains("STATUS:IN-PROCESS\r\n"))
        #expect(text.contains("STATUS:COMPLETED\r\n"))
        #expect(text.contains("CATEGORIES:Kitchen\r\n"))
        // Every chore's DTSTART is one of its rule's own occurrences (RFC 5545 3.8.5.3 asks for it).
        let parser = ICalParser(input: try ByteInput(path: path))
        var rules = 0
        while let todo = try parser.next() {
            guard let rrule = todo.property("RRULE"), let start = todo.property("DTSTART") else { continue }
            rules += 1
            let rule = try RecurrenceRule(parsing: rrule.value)
            let date = try #require(CalendarTime.parse(start)).local
            if let weekday = rule.byDay.first?.weekday {
                #expect(Int((date.dayNumber + 3) % 7) == weekday, "\(rrule.value) from \(start.value)")
            }
            if let monthDay = rule.byMonthDay.max() {
                #expect(
                    date.day == min(Int64(monthDay), ISO8601.daysInMonth(year: date.year, month: date.month)),
                    "\(rrule.value) from \(start.value)")
            }
        }
        #expect(rules == activeChores)
        // Under --tz, the zone's changes are written for years ahead, since the chores repeat.
        let berlin = scratch.path("berlin.ics")
        _ = try export(
            store, .familyTodo, to: berlin,
            options: ICalExportOptions(timeZone: TimeZone(identifier: "Europe/Berlin"), dtstamp: 0))
        let zoned = try String(contentsOfFile: berlin, encoding: .utf8)
        #expect(
            zoned.components(separatedBy: "BEGIN:DAYLIGHT\r\n").count - 1 >= ICalendarExporter.recurrenceHorizonYears)
        if let (status, report) = try Conformance.check(berlin) { #expect(status == 0, "\(report)") }
        // A record type the mapping does not name is refused, not silently left out.
        #expect(throws: StoreError.self) {
            try store.read { session in
                try ICalendarExporter(
                    session: session,
                    mapping: try CalendarMapping.parse(
                        SampleApp.familyTodo.calendarMappingText!, file: "m", schema: store.schema),
                    options: ICalExportOptions()
                )
                .queries(RecordQuery(recordTypes: ["Household"]))
            }
        }
        let exporter = try store.read { session in
            ICalendarExporter(
                session: session,
                mapping: try CalendarMapping.parse(
                    SampleApp.familyTodo.calendarMappingText!, file: "m", schema: store.schema),
                options: ICalExportOptions())
        }
        func chore(_ fields: RecordFields) -> String? {
            exporter.rule(
                .chore(type: "recurrenceType", weekday: "recurrenceDay", monthDay: "recurrenceDayOfMonth"),
                Record(id: RecordID(recordName: "c"), recordType: "RecurringChore", fields: fields))
        }
        #expect(chore(["recurrenceType": .string("daily")]) == "FREQ=DAILY")
        #expect(chore(["recurrenceType": .string("weekly"), "recurrenceDay": .int64(1)]) == "FREQ=WEEKLY;BYDAY=MO")
        #expect(
            chore(["recurrenceType": .string("biweekly"), "recurrenceDay": .int64(7)])
                == "FREQ=WEEKLY;INTERVAL=2;BYDAY=SU")
        #expect(
            chore(["recurrenceType": .string("monthly"), "recurrenceDayOfMonth": .int64(15)])
                == "FREQ=MONTHLY;BYMONTHDAY=15")
        let lastDay = try #require(chore(["recurrenceType": .string("monthly"), "recurrenceDayOfMonth": .int64(31)]))
        #expect(lastDay == "FREQ=MONTHLY;BYMONTHDAY=28,29,30,31;BYSETPOS=-1")
        let resolver = ZoneResolver()
        let set = RecurrenceSet(
            start: LocalDateTime(year: 2026, month: 1, day: 31, hour: 9), isDate: false,
            rules: [try RecurrenceRule(parsing: lastDay)],
            instant: { $0.wallSeconds }, instantOf: { try! resolver.milliseconds($0) / 1000 })
        let days = try set.occurrences(from: 0, to: ISO8601.parse("2026-06-01")! / 1000).map(\.day)
        #expect(days == [31, 28, 31, 30, 31])
    }
}

enum CalendarTestFailure: Error { case missing(String) }

/// A JSON scalar for comparing what Python printed with what we read.
enum JSONScalar: Decodable, Equatable, CustomStringConvertible {
    case text(String)
    case number(Int)
    case null

    init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let n = try? container.decode(Int.self) {
            self = .number(n)
        } else {
            self = .text(try container.decode(String.self))
        }
    }

    var description: String {
        switch self {
        case .text(let s): return s
        case .number(let n): return String(n)
        case .null: return "null"
        }
    }
}
