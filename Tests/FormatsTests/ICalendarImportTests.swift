import Foundation
import Records
import SampleApps
import Testing

@testable import Formats
@testable import SQLiteStore
@testable import StoreCore

/// Imports calendar files into a family-calendar store through the sample mapping.
final class CalendarImport {
    let scratch = Scratch()
    let store: RecordStore
    let mapping: CalendarMapping
    /// The sample family's addresses → user record names, as `ckport import` looks them up.
    let people: [String: String]

    /// The family calendar's store and mapping; `keepingTimes: false` leaves out the mapping's
    /// `timeZone` line, as a mapping without a place for how times were written.
    init(keepingTimes: Bool = true) throws {
        store = try scratch.sampleStore(.familyCalendar)
        var text = SampleApp.familyCalendar.calendarMappingText!
        if !keepingTimes {
            let line = "    timeZone: timeZone\n"
            #expect(text.contains(line))
            text = text.replacingOccurrences(of: line, with: "")
        }
        let mapping = try CalendarMapping.parse(text, file: "calendar.yaml", schema: store.schema)
        self.mapping = mapping
        people = try store.read { try ICalendarRecordReader.people(mapping, in: $0) }
    }

    func fixture(_ name: String) -> String {
        packageRoot.appendingPathComponent("Tests/FormatsTests/Fixtures/\(name)").path
    }

    /// Writes `text` to a scratch file and returns its path: LF line ends become CRLF, and
    /// U+FFFD becomes the lone byte E9 (Latin-1 é), which is not UTF-8.
    func file(_ text: String, name: String = "input.ics") throws -> String {
        let path = scratch.path(name)
        var bytes: [UInt8] = []
        for scalar in text.replacingOccurrences(of: "\n", with: "\r\n").unicodeScalars {
            if scalar == "\u{FFFD}" { bytes.append(0xE9) } else { bytes.append(contentsOf: Array(String(scalar).utf8)) }
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @discardableResult
    func run(
        _ path: String, expand: ClosedRange<String>? = nil, timeZone: TimeZone? = nil, skipInvalid: Bool = false,
        fixed: [(field: String, text: String)] = [("familyID", "family-1")], reopens: Bool = true
    ) throws -> ImportSummary {
        var options = ICalImportOptions(timeZone: timeZone, fixedFields: fixed, people: people)
        if let expand { options.expand = (ISO8601.parse(expand.lowerBound)!, ISO8601.parse(expand.upperBound)!) }
        // The first pass `ckport import` makes: overrides, and messages a later one supersedes.
        let found = try ICalendarRecordReader.firstPass(
            in: try ByteInput(path: path), timeZone: timeZone, overrides: expand != nil)
        options.overrides = found.overrides
        options.superseded = found.superseded
        options.nameOnExport = try ICalendarRecordReader.nameOnExport(
            mapping, fixedFields: fixed, zone: .defaultZone, store: store)
        let reader = ICalendarRecordReader(
            input: try ByteInput(path: path), mapping: mapping, schema: store.schema, options: options)
        if reopens { reader.reopen = { try ByteInput(path: path) } }
        return try RecordImporter(store: store, options: ImportOptions(skipInvalid: skipInvalid)).run([reader])
    }

    func event(_ name: String) throws -> Record? {
        try store.read { try $0.record(named: name, ofType: "Event") }
    }

    func records(_ type: String, _ predicate: String) throws -> [Record] {
        try store.read { session in
            var found: [Record] = []
            try session.forEach(RecordQuery(recordTypes: [type], predicate: try RecordPredicate.parse(predicate))) {
                found.append($0)
            }
            return found.sorted { $0.recordName < $1.recordName }
        }
    }

    var storeBytes: Data {
        (try? Data(contentsOf: URL(fileURLWithPath: scratch.path("family-calendar.sqlite")))) ?? Data()
    }
}

func at(_ text: String) -> FieldValue { .timestamp(ISO8601.parse(text)!) }

@Suite("iCalendar import")
struct ICalendarImportTests {
    @Test(
        "a Google Calendar file: a weekly rule with EXDATE and an override across DST, all-day, floating, DURATION, cancelled"
    )
    func googleCalendar() throws {
        let calendar = try CalendarImport()
        let summary = try calendar.run(calendar.fixture("google.ics"), expand: "2026-01-01"..."2027-01-01")
        // Mondays and Wednesdays in March, less the EXDATE (4th), the 18th replaced by its override.
        let swims = try calendar.records("Event", "title BEGINSWITH 'Swim training'")
        #expect(
            swims.map { $0.fields["startDate"] } == [
                at("2026-03-02T16:00:00Z"), at("2026-03-09T16:00:00Z"), at("2026-03-11T16:00:00Z"),
                at("2026-03-16T16:00:00Z"),
                at("2026-03-18T17:00:00Z"), at("2026-03-23T16:00:00Z"), at("2026-03-25T16:00:00Z"),
                // Berlin is on summer time from the 29th: 17:00 local is 15:00 UTC.
                at("2026-03-30T15:00:00Z"),
            ])
        #expect(swims.map(\.recordName).first == "swim-training@google.com_20260302T160000Z")
        let override = swims[4]
        #expect(override.recordName == "swim-training@google.com_20260318T160000Z")
        #expect(override.fields["title"] == .string("Swim training (late start)"))
        #expect(override.fields["endDate"] == at("2026-03-18T18:30:00Z"))
        let last = swims[7]
        #expect(last.fields["endDate"] == at("2026-03-30T16:30:00Z"))
        #expect(last.fields["reminderTime"] == at("2026-03-30T14:00:00Z"))
        #expect(last.fields["description"] == .string("Bring goggles, towel and a snack\nPool B"))
        #expect(last.fields["location"] == .string("Aquatic Centre, Pool B"))
        #expect(last.fields["creatorID"] == .string("user-1-4"))
        #expect(last.fields["familyID"] == .reference(Reference(recordName: "family-1", action: .deleteSelf)))
        #expect(last.fields["isDeleted"] == .int64(0))
        #expect(last.created?.timestamp == ISO8601.parse("2026-01-01T12:00:00Z"))
        #expect(last.modified?.timestamp == ISO8601.parse("2026-01-15T12:00:00Z"))
        // Attendees: one participant per ATTENDEE of each occurrence; known addresses become users.
        let participants = try calendar.records(
            "EventParticipant", "eventID == 'swim-training@google.com_20260330T150000Z'")
        #expect(
            participants.map(\.recordName) == [
                "swim-training@google.com_20260330T150000Z_coach@example.com",
                "swim-training@google.com_20260330T150000Z_user-1-1",
            ])
        #expect(participants.map { $0.fields["userID"] } == [.string("coach@example.com"), .string("user-1-1")])
        #expect(participants.map { $0.fields["status"] } == [.string("pending"), .string("accepted")])
        #expect(
            participants[0].fields["eventID"]
                == .reference(Reference(recordName: "swim-training@google.com_20260330T150000Z", action: .deleteSelf)))
        // An all-day event: DATE values are midnights (UTC here), DTEND exclusive.
        let easter = try #require(try calendar.event("easter-2026"))
        #expect(easter.fields["startDate"] == at("2026-04-04T00:00:00Z"))
        #expect(easter.fields["endDate"] == at("2026-04-06T00:00:00Z"))
        // Floating time, DURATION instead of DTEND, and STATUS:CANCELLED as the soft delete.
        let dentist = try #require(try calendar.event("dentist-floating"))
        #expect(dentist.fields["startDate"] == at("2026-03-10T09:00:00Z"))
        #expect(dentist.fields["endDate"] == at("2026-03-10T09:45:00Z"))
        #expect(dentist.fields["isDeleted"] == .int64(1))
        #expect(summary.counts["Event"]?.inserted == 10)
        #expect(summary.counts["EventParticipant"]?.inserted == 14)
        #expect(
            summary.notes.map(\.description).contains(
                "not kept (the mapping has no place for them): 1 VFREEBUSY, 1 X-WR-CALNAME of the calendar (\"Family\"), which the records' calendar calls \"The Müllers\", 2 SEQUENCE other than 0 in 2 events, 1 STATUS:CONFIRMED in 1 event, 1 X-GOOGLE-CONFERENCE in 1 event (the archive mapping keeps a calendar whole; a strict import refuses what the mapping would not keep)"
            ), "\(summary.notes)")
        // The mapping's timeZone field keeps how each start was written.
        #expect(swims.allSatisfy { $0.fields["timeZone"] == .string("Europe/Berlin") })
        #expect(easter.fields["timeZone"] == .string("date"))
        #expect(dentist.fields["timeZone"] == .string("floating"))
    }

    @Test("floating times and dates take the zone given, unless the mapping keeps them as wall clocks")
    func floatingInAZone() throws {
        let newYork = TimeZone(identifier: "America/New_York")
        let calendar = try CalendarImport(keepingTimes: false)
        try calendar.run(calendar.fixture("google.ics"), expand: "2026-01-01"..."2027-01-01", timeZone: newYork)
        #expect(try calendar.event("dentist-floating")?.fields["startDate"] == at("2026-03-10T13:00:00Z"))
        #expect(try calendar.event("easter-2026")?.fields["startDate"] == at("2026-04-04T04:00:00Z"))
        // Zoned times keep their own zone.
        #expect(try calendar.event("swim-training@google.com_20260302T160000Z") != nil)
        // With a timeZone field the wall clock is kept (as if UTC) and the field says which
        // form it was, so that no --tz on import or export moves a date to another day.
        let keeping = try CalendarImport()
        try keeping.run(keeping.fixture("google.ics"), expand: "2026-01-01"..."2027-01-01", timeZone: newYork)
        #expect(try keeping.event("dentist-floating")?.fields["startDate"] == at("2026-03-10T09:00:00Z"))
        #expect(try keeping.event("easter-2026")?.fields["startDate"] == at("2026-04-04T00:00:00Z"))
        #expect(
            try keeping.event("swim-training@google.com_20260302T160000Z")?.fields["startDate"]
                == at("2026-03-02T16:00:00Z"))
    }

    @Test("a floating recurrence's override replaces its occurrence whatever --tz says")
    func floatingOverride() throws {
        let text = [
            "BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:x",
            "BEGIN:VEVENT", "UID:yoga", "DTSTAMP:20260101T000000Z", "DTSTART:20260302T070000", "DTEND:20260302T080000",
            "RRULE:FREQ=DAILY;COUNT=3", "SUMMARY:Yoga", "END:VEVENT",
            "BEGIN:VEVENT", "UID:yoga", "DTSTAMP:20260101T000000Z", "RECURRENCE-ID:20260303T070000",
            "DTSTART:20260303T090000",
            "DTEND:20260303T100000", "SUMMARY:Yoga (late)", "END:VEVENT",
            "END:VCALENDAR", "",
        ].joined(separator: "\n")
        for keepingTimes in [true, false] {
            let calendar = try CalendarImport(keepingTimes: keepingTimes)
            let path = try calendar.file(text)
            try calendar.run(path, expand: "2026-03-01"..."2026-03-10", timeZone: TimeZone(identifier: "Asia/Tokyo"))
            let titles = try calendar.records("Event", "title BEGINSWITH 'Yoga'").map { $0.fields["title"] }
            #expect(
                titles == [.string("Yoga"), .string("Yoga (late)"), .string("Yoga")], "keeping times: \(keepingTimes)")
        }
    }

    @Test("importing the same file twice changes nothing; a changed SEQUENCE or LAST-MODIFIED updates")
    func idempotentReimport() throws {
        let calendar = try CalendarImport()
        let first = try calendar.run(calendar.fixture("google.ics"), expand: "2026-01-01"..."2027-01-01")
        let token = first.token
        let again = try calendar.run(calendar.fixture("google.ics"), expand: "2026-01-01"..."2027-01-01")
        #expect(again.totals.inserted == 0)
        #expect(again.totals.updated == 0)
        #expect(again.totals.unchanged == first.totals.inserted)
        #expect(again.token == token)
        // The organiser moved the late start and said so.
        var text = try String(contentsOfFile: calendar.fixture("google.ics"), encoding: .utf8)
        text = text.replacingOccurrences(
            of: "SUMMARY:Swim training (late start)\r\nSEQUENCE:3", with: "SUMMARY:Swim training (moved)\r\nSEQUENCE:4")
        let changed = calendar.scratch.path("changed.ics")
        try Data(text.utf8).write(to: URL(fileURLWithPath: changed))
        let update = try calendar.run(changed, expand: "2026-01-01"..."2027-01-01")
        #expect(update.counts["Event"]?.updated == 1)
        #expect(update.counts["Event"]?.unchanged == 9)
        #expect(
            try calendar.event("swim-training@google.com_20260318T160000Z")?.fields["title"]
                == .string("Swim training (moved)"))
    }

    @Test(
        "importing ckport's own export back changes nothing: records keep their names, zones and types",
        arguments: [SampleApp.familyCalendar, .familyTodo, .relationshipCheckin])
    func ownExportBack(app: SampleApp) throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(app)
        let path = scratch.path("own.ics")
        let exported = try export(store, app, to: path, options: ICalExportOptions(dtstamp: 0, includeCancelled: true))
        func everything() throws -> [Record] {
            try store.read { session in
                var all: [Record] = []
                try session.forEach(RecordQuery()) { all.append($0) }
                return all
            }
        }
        let before = try everything()
        let mapping = try CalendarMapping.parse(app.calendarMappingText!, file: "m", schema: store.schema)
        let people = try store.read { try ICalendarRecordReader.people(mapping, in: $0) }
        let reader = ICalendarRecordReader(
            input: try ByteInput(path: path), mapping: mapping, schema: store.schema,
            options: ICalImportOptions(people: people))
        let summary = try RecordImporter(store: store, options: ImportOptions()).run([reader])
        #expect(summary.totals.inserted == 0)
        #expect(summary.totals.updated == 0)
        #expect(summary.totals.unchanged >= exported.written.values.reduce(0, +))
        #expect(try everything() == before)
    }

    @Test("an Outlook file: a Windows zone name defined in the file, quoted TZID, folded UID, RELATED=START alarm")
    func outlook() throws {
        let calendar = try CalendarImport()
        let summary = try calendar.run(calendar.fixture("outlook.ics"))
        let uid =
            "040000008200E00074C5B7101A82E0080000000010F3B6FDA28FDC010000000000000000100000005D1B2A9AC1E44D4E8F0F8D12D6C1B4F5"
        let evening = try #require(try calendar.event(uid))
        #expect(evening.fields["startDate"] == at("2026-03-27T17:00:00Z"))
        #expect(evening.fields["endDate"] == at("2026-03-27T18:30:00Z"))
        #expect(evening.fields["reminderTime"] == at("2026-03-27T16:45:00Z"))
        #expect(evening.fields["title"] == .string("Parent evening"))
        #expect(evening.fields["description"] == .string("Parents, please bring\n a dish to share."))
        #expect(try calendar.event("after-dst-change")?.fields["startDate"] == at("2026-10-30T17:00:00Z"))
        let notKept = summary.notes.first { $0.hasPrefix("not kept (the mapping has no place for them): ") } ?? ""
        for item in [
            "1 CLASS in 1 event", "1 PRIORITY in 1 event", "1 TRANSP in 1 event",
            "1 X-MICROSOFT-CDO-BUSYSTATUS in 1 event",
        ] {
            #expect(notKept.contains(item), "\(item): \(summary.notes)")
        }
    }

    @Test(
        "a VTIMEZONE after the events that name it (RFC 5545 puts no order on components): found by a second reading of the file"
    )
    func zoneDefinedLast() throws {
        let calendar = try CalendarImport()
        let zone = """
            BEGIN:VTIMEZONE
            TZID:Custom Zurich
            BEGIN:STANDARD
            DTSTART:19701025T030000
            RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU
            TZOFFSETFROM:+0200
            TZOFFSETTO:+0100
            END:STANDARD
            BEGIN:DAYLIGHT
            DTSTART:19700329T020000
            RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU
            TZOFFSETFROM:+0100
            TZOFFSETTO:+0200
            END:DAYLIGHT
            END:VTIMEZONE

            """
        let events = """
            BEGIN:VEVENT
            UID:late-zone-winter
            DTSTAMP:20260101T000000Z
            DTSTART;TZID=Custom Zurich:20260301T090000
            SUMMARY:Choir
            END:VEVENT
            BEGIN:VEVENT
            UID:late-zone-summer
            DTSTAMP:20260101T000000Z
            DTSTART;TZID=Custom Zurich:20260701T090000
            SUMMARY:Choir
            END:VEVENT

            """
        let path = try calendar.file(
            "BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:x\n" + events + zone + "END:VCALENDAR\n", name: "late.ics")
        let summary = try calendar.run(path)
        #expect(summary.totals.inserted == 2, "\(summary.issues)")
        #expect(try calendar.event("late-zone-winter")?.fields["startDate"] == at("2026-03-01T08:00:00Z"))
        #expect(try calendar.event("late-zone-summer")?.fields["startDate"] == at("2026-07-01T07:00:00Z"))
        // An input read once (standard input without a copy) cannot look ahead: the error names the TZID.
        let once = try CalendarImport()
        do {
            _ = try once.run(
                try once.file(
                    "BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:x\n" + events + zone + "END:VCALENDAR\n", name: "once.ics"),
                reopens: false)
            Issue.record("an unknown TZID was read")
        } catch {
            #expect(
                "\(error)".contains("names TZID \"Custom Zurich\", which has no VTIMEZONE in the calendar"), "\(error)")
        }
    }

    @Test("without --expand a recurring event comes in once and is reported")
    func recurringWithoutWindow() throws {
        let calendar = try CalendarImport()
        let summary = try calendar.run(calendar.fixture("google.ics"))
        let swims = try calendar.records("Event", "title BEGINSWITH 'Swim training'")
        #expect(swims.map(\.recordName) == ["swim-training@google.com", "swim-training@google.com_20260318T160000Z"])
        #expect(swims[0].fields["startDate"] == at("2026-03-02T16:00:00Z"))
        #expect(summary.notes.contains { $0.hasPrefix("1 recurring component was imported once, without the rule") })
    }

    @Test("an RRULE kept in a field when the mapping names one")
    func ruleKeptInAField() throws {
        let scratch = Scratch()
        let store = try RecordStore(path: scratch.path("s.sqlite"))
        try store.importSchema(
            try SchemaParser.parse(
                """
                DEFINE SCHEMA
                    RECORD TYPE Appointment (
                        "___recordID" REFERENCE QUERYABLE,
                        title STRING,
                        startsAt TIMESTAMP,
                        rule STRING
                    );
                """))
        let mapping = try CalendarMapping.parse(
            """
            components:
              - recordType: Appointment
                component: VEVENT
                properties: { SUMMARY: title, DTSTART: startsAt }
                recurrence: { rule: rule }
            """, file: "m.yaml", schema: store.schema)
        let reader = ICalendarRecordReader(
            input: try ByteInput(
                path: packageRoot.appendingPathComponent("Tests/FormatsTests/Fixtures/google.ics").path),
            mapping: mapping, schema: store.schema, options: ICalImportOptions())
        _ = try RecordImporter(store: store, options: ImportOptions()).run([reader])
        let swim = try #require(
            try store.read { try $0.record(named: "swim-training@google.com", ofType: "Appointment") })
        #expect(swim.fields["rule"] == .string("FREQ=WEEKLY;UNTIL=20260401T000000Z;BYDAY=MO,WE"))
    }

    static let good = """
        BEGIN:VCALENDAR
        VERSION:2.0
        PRODID:-//test//EN
        BEGIN:VEVENT
        UID:good-1
        DTSTAMP:20260101T000000Z
        DTSTART:20260105T090000Z
        DTEND:20260105T100000Z
        SUMMARY:Fine
        END:VEVENT

        """

    /// Bad input: (what is wrong, the rest of the calendar, the line reported, words of the message).
    static let badComponents: [(String, String, Int, String)] = [
        (
            "impossible date",
            "BEGIN:VEVENT\nUID:bad\nDTSTAMP:20260101T000000Z\nDTSTART:20260230T090000Z\nEND:VEVENT\n", 14,
            "DTSTART is not a date or date-time: \"20260230T090000Z\""
        ),
        (
            "undefined TZID",
            "BEGIN:VEVENT\nUID:bad\nDTSTAMP:20260101T000000Z\nDTSTART;TZID=Mars/Olympus:20260106T090000\nEND:VEVENT\n",
            14, "TZID \"Mars/Olympus\""
        ),
        (
            "bad DURATION",
            "BEGIN:VEVENT\nUID:bad\nDTSTAMP:20260101T000000Z\nDTSTART:20260106T090000Z\nDURATION:soon\nEND:VEVENT\n",
            15, "DURATION is not a duration"
        ),
        (
            "bad RRULE",
            "BEGIN:VEVENT\nUID:bad\nDTSTAMP:20260101T000000Z\nDTSTART:20260106T090000Z\nRRULE:FREQ=SOMETIMES\nEND:VEVENT\n",
            15, "FREQ"
        ),
        ("no UID", "BEGIN:VEVENT\nDTSTAMP:20260101T000000Z\nDTSTART:20260106T090000Z\nEND:VEVENT\n", 11, "without UID"),
        (
            "not UTF-8", "BEGIN:VEVENT\nUID:bad\nDTSTAMP:20260101T000000Z\nSUMMARY:caf\u{FFFD}\nEND:VEVENT\n", 14,
            "the line is not valid UTF-8"
        ),
        (
            "bad TRIGGER",
            "BEGIN:VEVENT\nUID:bad\nDTSTAMP:20260101T000000Z\nDTSTART:20260106T090000Z\nBEGIN:VALARM\nACTION:DISPLAY\nTRIGGER:later\nEND:VALARM\nEND:VEVENT\n",
            17, "TRIGGER"
        ),
    ]

    @Test(
        "a bad component fails the import with its line, and the store stays byte for byte as it was",
        arguments: 0..<badComponents.count)
    func badComponent(index: Int) throws {
        let (what, bad, line, words) = ICalendarImportTests.badComponents[index]
        let calendar = try CalendarImport()
        let path = try calendar.file(ICalendarImportTests.good + bad + "END:VCALENDAR\n")
        let before = calendar.storeBytes
        do {
            try calendar.run(path, expand: "2026-01-01"..."2027-01-01")
            Issue.record("\(what): the import succeeded")
        } catch let failure as ImportFailure {
            let issue = try #require(failure.summary.issues.first)
            #expect(failure.summary.issues.count == 1, "\(what)")
            #expect(issue.position.line == line, "\(what): \(issue)")
            #expect(issue.position.file == path)
            #expect(issue.description.contains(words), "\(what): \(issue)")
        }
        #expect(calendar.storeBytes == before, "\(what)")
        #expect(try calendar.event("good-1") == nil)
        // --skip-invalid leaves out the bad component only.
        let summary = try calendar.run(path, expand: "2026-01-01"..."2027-01-01", skipInvalid: true)
        #expect(summary.counts["Event"]?.inserted == 1, "\(what)")
        #expect(summary.issues.count == 1, "\(what)")
        #expect(try calendar.event("good-1") != nil)
        #expect(try calendar.event("bad") == nil)
    }

    @Test(
        "a --set value the field cannot take names the field, whether the file gives the field a value (isDeleted, from STATUS) or not"
    )
    func badFixedField() throws {
        let calendar = try CalendarImport()
        let path = try calendar.file(ICalendarImportTests.good + "END:VCALENDAR\n")
        let before = calendar.storeBytes
        for (field, type) in [("isDeleted", "INT64"), ("reminderTime", "TIMESTAMP")] {
            #expect { try calendar.run(path, fixed: [(field, "maybe")]) } throws: { error in
                let text = "\(error)"
                return text.contains(
                    "\(path):4: record 'good-1' (Event), field '\(field)': the value \(field)=maybe given to every record: expected \(type)"
                )
            }
        }
        #expect(calendar.storeBytes == before)
    }

    /// Broken structure: nothing can be trusted after it, so the whole file fails, even with --skip-invalid.
    static let brokenFiles: [(String, String, Int, String)] = [
        (
            "unterminated component",
            "BEGIN:VCALENDAR\nVERSION:2.0\nBEGIN:VEVENT\nUID:a\nDTSTART:20260105T090000Z\nEND:VCALENDAR\n", 6,
            "END:VCALENDAR closes BEGIN:VEVENT of line 3"
        ),
        (
            "file ends inside a component", "BEGIN:VCALENDAR\nVERSION:2.0\nBEGIN:VEVENT\nUID:a\n", 3,
            "BEGIN:VEVENT is never closed"
        ),
        ("file ends inside the calendar", "BEGIN:VCALENDAR\nVERSION:2.0\n", 2, "the file ends inside BEGIN:VCALENDAR"),
        ("no calendar", "BEGIN:VEVENT\nUID:a\nEND:VEVENT\n", 1, "expected BEGIN:VCALENDAR"),
        ("stray END", "BEGIN:VCALENDAR\nEND:VEVENT\nEND:VCALENDAR\n", 2, "END:VEVENT without a matching BEGIN"),
        ("continuation first", " folded\nBEGIN:VCALENDAR\nEND:VCALENDAR\n", 1, "a folded continuation line"),
        (
            "calendar line not UTF-8", "BEGIN:VCALENDAR\nX-WR-CALNAME:caf\u{FFFD}\nEND:VCALENDAR\n", 2,
            "the line is not valid UTF-8"
        ),
    ]

    @Test(
        "broken structure fails the whole file with its line, whatever --skip-invalid says",
        arguments: 0..<brokenFiles.count)
    func brokenFile(index: Int) throws {
        let (what, text, line, words) = ICalendarImportTests.brokenFiles[index]
        let calendar = try CalendarImport()
        let path = try calendar.file(text)
        let before = calendar.storeBytes
        for skip in [false, true] {
            #expect(throws: (any Error).self, "\(what)") { try calendar.run(path, skipInvalid: skip) }
            do { try calendar.run(path, skipInvalid: skip) } catch {
                #expect("\(error)".contains("\(path):\(line): \(words)"), "\(what): \(error)")
            }
        }
        #expect(calendar.storeBytes == before)
    }

    @Test("--expand: an RDATE period lasts its own length, start/end or start/duration")
    func rdatePeriods() throws {
        let calendar = try CalendarImport()
        let summary = try calendar.run(
            calendar.fixture("calendars/zimbra-lotus.ics"), expand: "2026-04-01T00:00:00Z"..."2026-06-01T00:00:00Z")
        #expect(summary.totals.inserted == 5)
        let events = try calendar.records("Event", "title == 'Gartenarbeit'").sorted {
            $0["startDate"].map { "\($0)" } ?? "" < $1["startDate"].map { "\($0)" } ?? ""
        }
        func hours(_ record: Record) -> Int64? {
            guard case .timestamp(let start)? = record["startDate"], case .timestamp(let end)? = record["endDate"]
            else { return nil }
            return (end - start) / 3_600_000
        }
        let byStart = Dictionary(
            uniqueKeysWithValues: events.compactMap { record -> (String, Int64)? in
                guard case .timestamp(let start)? = record["startDate"], let length = hours(record) else { return nil }
                return (ISO8601.format(milliseconds: start), length)
            })
        #expect(byStart["2026-04-04T08:00:00.000Z"] == 3)  // DTSTART with DURATION:PT3H
        #expect(byStart["2026-04-11T08:00:00.000Z"] == 2)  // RDATE period start/PT2H
        #expect(byStart["2026-04-18T09:00:00.000Z"] == 3)  // RDATE period start/end
        #expect(byStart["2026-05-02T08:00:00.000Z"] == 3)  // a plain RDATE keeps the event's length
    }

    @Test(
        "--expand refuses a rule it cannot expand (RFC 7529 RSCALE and SKIP) and names the RFC; without --expand it comes in once"
    )
    func rscale() throws {
        let calendar = try CalendarImport()
        let path = calendar.fixture("calendars/rfc7529-and-text.ics")
        do {
            try calendar.run(path, expand: "2026-01-01T00:00:00Z"..."2027-01-01T00:00:00Z")
            Issue.record("RSCALE was expanded")
        } catch {
            #expect("\(error)".contains("uses RSCALE or SKIP (RFC 7529"), "\(error)")
            #expect("\(error)".contains("rfc7529-and-text.ics:8"), "\(error)")
        }
        let once = try calendar.run(path)
        #expect(once.totals.inserted == 3)
    }

    @Test(
        "lenient reading: LF line ends, TAB folds, an unknown escape and a stray line after the calendar are read, with counted warnings"
    )
    func lenient() throws {
        let calendar = try CalendarImport()
        let path = calendar.scratch.path("lenient.ics")
        let text =
            "BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:x\nBEGIN:VEVENT\nUID:lenient-1\nDTSTAMP:20260101T000000Z\nDTSTART:20260301T100000Z\n"
            + "SUMMARY:Say \\\"hi\\\" to\n\tgrandma\nEND:VEVENT\nEND:VCALENDAR\nthis line is stray\n"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        let reader = ICalendarRecordReader(
            input: try ByteInput(path: path), mapping: calendar.mapping, schema: calendar.store.schema,
            options: ICalImportOptions(fixedFields: [("familyID", "family-1")], people: calendar.people))
        let summary = try RecordImporter(store: calendar.store, options: ImportOptions()).run([reader])
        #expect(summary.totals.inserted == 1)
        #expect(summary.notes.contains("warning: a line after END:VCALENDAR was ignored (1×)"), "\(summary.notes)")
        #expect(
            summary.notes.contains { $0.contains("an escape TEXT does not know") && $0.contains("(2×)") },
            "\(summary.notes)")
        let event = try #require(try calendar.records("Event", "title BEGINSWITH 'Say'").first)
        #expect(event["title"] == .string("Say \"hi\" tograndma"))
        // Broken structure is still an error with its line.
        for (broken, expected) in [
            ("BEGIN:VEVENT\nUID:x\nEND:VEVENT\n", "input.ics:1: expected BEGIN:VCALENDAR"),
            (
                "BEGIN:VCALENDAR\nBEGIN:VEVENT\nUID:x\nEND:VCALENDAR\n",
                "input.ics:4: END:VCALENDAR closes BEGIN:VEVENT of line 2"
            ),
        ] {
            do {
                try calendar.run(try calendar.file(broken))
                Issue.record("accepted \(broken)")
            } catch {
                #expect("\(error)".contains(expected), "\(error)")
            }
        }
    }

    @Test(
        "the calendar's own properties an app's records have no place for (METHOD, X-WR-CALDESC, X-WR-TIMEZONE, REFRESH-INTERVAL) are named as not kept; VERSION, PRODID, CALSCALE and a name the records' calendar already has are not"
    )
    func calendarProperties() throws {
        let calendar = try CalendarImport()
        #expect(calendar.mapping.calendarName != nil)
        let text = """
            BEGIN:VCALENDAR
            VERSION:2.0
            PRODID:-//Example//Scheduler//EN
            CALSCALE:GREGORIAN
            METHOD:REQUEST
            X-WR-CALNAME:The Parkers
            X-WR-CALDESC:School and sports
            X-WR-TIMEZONE:Europe/Zurich
            REFRESH-INTERVAL;VALUE=DURATION:PT1H
            BEGIN:VEVENT
            UID:calendar-level
            DTSTAMP:20260101T000000Z
            DTSTART:20260106T090000Z
            SUMMARY:Swim
            END:VEVENT
            END:VCALENDAR

            """
        let summary = try calendar.run(try calendar.file(text))
        #expect(summary.totals.inserted == 1)
        let notKept = summary.notes.first { $0.hasPrefix("not kept") } ?? ""
        for item in [
            "1 METHOD of the calendar", "1 REFRESH-INTERVAL of the calendar", "1 X-WR-CALDESC of the calendar",
            "1 X-WR-TIMEZONE of the calendar",
        ] {
            #expect(notKept.contains(item), "\(item): \(summary.notes)")
        }
        for kept in ["VERSION", "PRODID", "CALSCALE"] {
            #expect(!notKept.contains(kept + " of"), "\(kept): \(notKept)")
        }
        // The records belong to family-1, whose calendar an export calls "The Müllers": this
        // file's name for it is not kept, and said to be.
        #expect(
            notKept.contains(
                "1 X-WR-CALNAME of the calendar (\"The Parkers\"), which the records' calendar calls \"The Müllers\""),
            "\(notKept)")
        // The family's own name is kept by the family's record.
        let same = try calendar.run(
            try calendar.file(text.replacingOccurrences(of: "The Parkers", with: "The Müllers"), name: "same.ics"))
        #expect(!(same.notes.first { $0.hasPrefix("not kept") } ?? "").contains("X-WR-CALNAME"), "\(same.notes)")
    }

    @Test(
        "lines that are not properties (a fold that lost its space, a property without ':') are left out as Python's icalendar leaves them, counted, named as not kept, and the rest of the component read"
    )
    func unreadableLines() throws {
        let calendar = try CalendarImport()
        let text = """
            BEGIN:VCALENDAR
            VERSION:2.0
            PRODID:x
            BEGIN:VEVENT
            UID:broken-lines
            DTSTAMP:20260101T000000Z
            DTSTART:20260106T090000Z
            SUMMARY Missing colon
            DESCRIPTION:Bring the
            big tent and the stove.
            X-APPLE-STRUCTURED-LOCATION;VALUE=URI;X-ADDRESS=Main Street 1;
            X-APPLE-RADIUS=49.91305923461914;X-TITLE=Home:geo:47.37,8.54
            ORGANIZER;CN=Coach
            LOCATION:Field 2
            END:VEVENT
            END:VCALENDAR

            """
        let summary = try calendar.run(try calendar.file(text))
        #expect(summary.totals.inserted == 1, "\(summary.issues)")
        let event = try #require(try calendar.event("broken-lines"))
        #expect(
            event["description"] == .string("Bring the") && event["location"] == .string("Field 2")
                && event["title"] == nil, "\(event)")
        let notKept = summary.notes.first { $0.hasPrefix("not kept") } ?? ""
        for item in [
            "1 unreadable ORGANIZER line", "1 unreadable SUMMARY line", "1 unreadable X-APPLE-RADIUS line",
            "1 unreadable X-APPLE-STRUCTURED-LOCATION line", "1 unreadable BIG line",
        ] {
            #expect(notKept.contains(item), "\(item): \(summary.notes)")
        }
        #expect(
            summary.notes.contains { $0.contains("a line that is not a property") && $0.contains("(5×)") },
            "\(summary.notes)")
        // The archive keeps every other line of the component and says which it could not.
        let store = try RecordStore(path: calendar.scratch.path("archive.sqlite"))
        let importer = RecordImporter(store: store, options: ImportOptions())
        importer.addingTypes = CalendarArchive.schema.recordTypes
        let archived = try importer.run([
            CalendarArchiveReader(input: try ByteInput(path: calendar.scratch.path("input.ics")))
        ])
        #expect(
            archived.notes.contains {
                $0.contains("every property kept but 1 unreadable BIG line, 1 unreadable ORGANIZER line")
            }, "\(archived.notes)")
    }

    @Test(
        "an app mapping says everything it does not keep: extra alarms, other alarm actions, attendees' roles, a second category, RDATE and EXDATE"
    )
    func notKept() throws {
        let calendar = try CalendarImport()
        let summary = try calendar.run(calendar.fixture("calendars/google-calendar.ics"))
        let note = try #require(summary.notes.first { $0.hasPrefix("not kept") })
        for item in [
            "1 ATTENDEE ROLE=CHAIR in 1 event", "1 ATTENDEE CUTYPE=RESOURCE in 1 event",
            "1 ATTENDEE RSVP=TRUE in 1 event",
            "1 VALARM in 1 event", "1 VALARM ACTION:EMAIL in 1 event", "1 RRULE in 1 event", "3 TRANSP in 3 events",
            "1 GEO in 1 event",
        ] {
            #expect(note.contains(item), "\(item): \(note)")
        }
        let apple = try calendar.run(calendar.fixture("calendars/apple-calendar.ics"))
        let appleNote = try #require(apple.notes.first { $0.hasPrefix("not kept") })
        for item in [
            "1 CATEGORIES value in 1 event", "1 EXDATE in 1 event", "1 VALARM ACTION:AUDIO in 1 event",
            "1 X-APPLE-STRUCTURED-LOCATION in 1 event",
        ] {
            #expect(appleNote.contains(item), "\(item): \(appleNote)")
        }
        // The escaped comma is part of the second category, not a third one.
        #expect(!appleNote.contains("2 CATEGORIES value"))
    }

    @Test(
        "a mapping's timeZone field keeps TZID, floating and DATE times: a weekly 09:00 Zurich meeting is still at 09:00 after the clocks change"
    )
    func timesKeepTheirForm() throws {
        let scratch = Scratch()
        let schema = try SchemaParser.parse(
            "DEFINE SCHEMA RECORD TYPE Meeting (endDate TIMESTAMP, rule STRING, startDate TIMESTAMP, title STRING, zone STRING);"
        )
        let store = try RecordStore(path: scratch.path("meetings.sqlite"))
        try store.importSchema(schema)
        let mapping = try CalendarMapping.parse(
            """
            components:
              - recordType: Meeting
                component: VEVENT
                timeZone: zone
                recurrence: { rule: rule }
                properties: { SUMMARY: title, DTSTART: startDate, DTEND: endDate }
            """, file: "meetings.yaml", schema: schema)
        let input = scratch.path("in.ics")
        let lines: [String] = [
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\n",
            "BEGIN:VEVENT\r\nUID:weekly\r\nDTSTAMP:20260101T000000Z\r\nDTSTART;TZID=Europe/Zurich:20260302T090000\r\nDTEND;TZID=Europe/Zurich:20260302T100000\r\nRRULE:FREQ=WEEKLY\r\nSUMMARY:Team\r\nEND:VEVENT\r\n",
            "BEGIN:VEVENT\r\nUID:floating\r\nDTSTAMP:20260101T000000Z\r\nDTSTART:20260305T070000\r\nDTEND:20260305T080000\r\nSUMMARY:Run\r\nEND:VEVENT\r\n",
            "BEGIN:VEVENT\r\nUID:utc\r\nDTSTAMP:20260101T000000Z\r\nDTSTART:20260306T120000Z\r\nDTEND:20260306T130000Z\r\nSUMMARY:Call\r\nEND:VEVENT\r\n",
            "BEGIN:VEVENT\r\nUID:day\r\nDTSTAMP:20260101T000000Z\r\nDTSTART;VALUE=DATE:20260314\r\nSUMMARY:Birthday\r\nEND:VEVENT\r\n",
            "END:VCALENDAR\r\n",
        ]
        try Data(lines.joined().utf8).write(to: URL(fileURLWithPath: input))
        let reader = ICalendarRecordReader(
            input: try ByteInput(path: input), mapping: mapping, schema: schema, options: ICalImportOptions())
        let summary = try RecordImporter(store: store, options: ImportOptions()).run([reader])
        #expect(summary.totals.inserted == 4)
        #expect(!summary.notes.contains { $0.contains("DTSTART") }, "\(summary.notes)")
        let out = scratch.path("out.ics")
        let file = try OutputFile(path: out)
        _ = try store.read {
            try ICalendarExporter(session: $0, mapping: mapping, options: ICalExportOptions()).export(
                RecordQuery(), to: file)
        }
        let text = try String(contentsOfFile: out, encoding: .utf8)
        #expect(text.contains("DTSTART;TZID=Europe/Zurich:20260302T090000\r\n"), "\(text)")
        #expect(text.contains("TZID:Europe/Zurich\r\n") && text.contains("TZNAME:CEST"), "\(text)")
        #expect(text.contains("DTSTART:20260305T070000\r\n"), "\(text)")
        #expect(text.contains("DTSTART:20260306T120000Z\r\n"), "\(text)")
        // A DATE without an end stays a DATE, never a midnight UTC time.
        #expect(text.contains("DTSTART;VALUE=DATE:20260314\r\n") && !text.contains("20260314T000000Z"), "\(text)")
        // Read back with the rule expanded (through the family calendar's mapping): after the
        // change to summer time the meeting is at 07:00 UTC, 09:00 in Zurich.
        let family = try CalendarImport()
        try family.run(out, expand: "2026-04-01T00:00:00Z"..."2026-04-10T00:00:00Z")
        let starts = try family.records("Event", "title == 'Team'").compactMap { $0["startDate"] }
        #expect(starts == [at("2026-04-06T07:00:00Z")], "\(starts)")
        if let (status, report) = try Conformance.check(out) { #expect(status == 0, "\(report)") }
    }

    @Test(
        "a SEQUENCE above 0, a STATUS and a second DTSTART or SUMMARY the mapping has no place for are named, so that a strict import refuses them"
    )
    func sequenceStatusAndRepeats() throws {
        let calendar = try CalendarImport()
        let path = try calendar.file(
            """
            BEGIN:VCALENDAR
            VERSION:2.0
            BEGIN:VEVENT
            UID:revised
            DTSTAMP:20260201T000000Z
            DTSTART:20260301T090000Z
            DTSTART:20260302T090000Z
            DTEND:20260301T100000Z
            SUMMARY:First
            SUMMARY:Second
            SEQUENCE:9
            STATUS:TENTATIVE
            END:VEVENT
            BEGIN:VEVENT
            UID:as-exported
            DTSTAMP:20260201T000000Z
            DTSTART:20260303T090000Z
            SUMMARY:Plain
            SEQUENCE:0
            STATUS:CANCELLED
            END:VEVENT
            END:VCALENDAR

            """)
        let summary = try calendar.run(path)
        let note = try #require(summary.notes.map(\.description).first { $0.hasPrefix("not kept") })
        #expect(
            note.hasPrefix(
                "not kept (the mapping has no place for them): 1 SEQUENCE other than 0 in 1 event, 1 STATUS:TENTATIVE in 1 event, 1 repeated DTSTART in 1 event, 1 repeated SUMMARY in 1 event ("
            ), "\(note)")
        // The first of each is the one kept; SEQUENCE:0 (what an export writes) and a
        // cancellation (the mapping's cancelled field) are kept.
        let revised = try #require(try calendar.event("revised"))
        #expect(revised.fields["title"] == .string("First"))
        #expect(revised.fields["startDate"] == at("2026-03-01T09:00:00Z"))
        #expect(try calendar.event("as-exported")?.fields["isDeleted"] == .int64(1))
    }

    @Test("without a timeZone field, a TZID or floating time is said not kept")
    func zoneNotKept() throws {
        let calendar = try CalendarImport(keepingTimes: false)
        let summary = try calendar.run(calendar.fixture("calendars/google-calendar.ics"))
        #expect(summary.notes.contains { $0.contains("DTSTART TZID=America/New_York in 2 events") }, "\(summary.notes)")
    }

    @Test(
        "names, addresses and words in any case: lower-case property names, MAILTO: and an address in capitals find the person, status:cancelled cancels, partstat=accepted is renamed"
    )
    func anyCase() throws {
        let calendar = try CalendarImport()
        let (address, user) = try #require(calendar.people.sorted { $0.key < $1.key }.first)
        #expect(address != address.uppercased(), "the sample's addresses are written in lower case")
        let path = try calendar.file(
            """
            BEGIN:VCALENDAR
            VERSION:2.0
            BEGIN:VEVENT
            uid:any-case
            dtstart:20260301T090000Z
            DtEnd:20260301T100000Z
            summary:Case\\, and more
            status:cancelled
            organizer:MAILTO:\(address.uppercased())
            attendee;partstat=accepted;role=REQ-PARTICIPANT:MAILTO:\(address.uppercased())
            ATTENDEE;PARTSTAT=Declined;ROLE=chair:mailto:Someone@Example.com
            END:VEVENT
            END:VCALENDAR

            """)
        let summary = try calendar.run(path)
        let event = try #require(try calendar.event("any-case"))
        #expect(event.fields["title"] == .string("Case, and more"))
        #expect(event.fields["startDate"] == at("2026-03-01T09:00:00Z"))
        #expect(event.fields["endDate"] == at("2026-03-01T10:00:00Z"))
        #expect(event.fields["isDeleted"] == .int64(1))
        #expect(event.fields["creatorID"] == .string(user))
        let participants = try calendar.records("EventParticipant", "eventID == 'any-case'")
        #expect(
            Set(participants.compactMap { $0.fields["userID"] }) == [.string(user), .string("Someone@Example.com")])
        #expect(Set(participants.compactMap { $0.fields["status"] }) == [.string("accepted"), .string("declined")])
        // REQ-PARTICIPANT is the default role whatever its case; CHAIR is not kept.
        let note = try #require(summary.notes.first { $0.hasPrefix("not kept") })
        #expect(note.contains("1 ATTENDEE ROLE=chair in 1 event"), "\(note)")
        #expect(!note.contains("REQ-PARTICIPANT"), "\(note)")
    }
}
