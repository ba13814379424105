import Foundation
import Records
import SampleApps
import Testing

@testable import Formats
@testable import SQLiteStore
@testable import StoreCore

private let xcalFixtures = packageRoot.appendingPathComponent("Tests/FormatsTests/Fixtures/xcal").path

/// Validates an xCal file with RFC 6321's RELAX NG schema through `xmllint --relaxng`, after
/// `xcal_extensions.py` has checked and set aside the extension properties and parameters
/// the schema has no place for.
private func validate(_ path: String) throws {
    let core = path + ".core.xml"
    let (stripped, report) = try ExternalTool.run("python3", [xcalFixtures + "/xcal_extensions.py", path, core])
    #expect(stripped == 0, "\(report)")
    let (status, output) = try ExternalTool.run(
        "xmllint", ["--noout", "--relaxng", xcalFixtures + "/icalendar-2.0.rng", core])
    #expect(status == 0 && output.contains("validates"), "\(path): \(output)")
}

/// Converts `xcal` into iCalendar with a reader that shares no code with ckport, and compares
/// it with `ics`, component by component, with Python's icalendar.
private func expectSameCalendar(xcal: String, ics: String) throws {
    let converted = xcal + ".py.ics"
    let (status, output) = try ExternalTool.run("python3", [xcalFixtures + "/xcal_to_ics.py", xcal, converted])
    #expect(status == 0, "\(output)")
    let python = try Conformance.requirePython()
    let compare = packageRoot.appendingPathComponent("Tests/FormatsTests/Fixtures/compare_calendars.py").path
    let (same, report) = try Conformance.run(python, [compare, "--xcal", ics, converted])
    #expect(same == 0 && report.contains(", 0 differences"), "\(report)")
}

func exportCalendar(_ format: RecordFormat, from store: RecordStore, to path: String, settings: CalendarWriteSettings)
    throws -> FormatExportSummary
{
    var formatSettings = FormatSettings()
    formatSettings[CalendarWriteSettings.self] = settings
    let output = try OutputFile(path: path)
    return try store.readSession { session in
        try format.exportFromStore!(
            session, RecordQuery(), output, RecordWriteContext(schema: session.schema, settings: formatSettings))
    }
}

func importCalendar(_ path: String, into store: RecordStore, settings: CalendarReadSettings, strict: Bool = false)
    throws -> (ImportSummary, RecordSource)
{
    var formatSettings = FormatSettings()
    formatSettings[CalendarReadSettings.self] = settings
    let format = RecordFormats.forPath(path)!
    let reader = try format.makeReader!(
        .file(path), RecordReadContext(schema: store.schema, store: store, settings: formatSettings))
    let importer = RecordImporter(store: store, options: ImportOptions())
    if settings.keepsCalendarsWhole { importer.addingTypes = CalendarArchive.schema.recordTypes }
    return (try importer.run([reader]), reader)
}

func allRecords(_ store: RecordStore) throws -> [Record] {
    var all: [Record] = []
    try store.read { session in try session.forEach(RecordQuery()) { all.append($0) } }
    return all
}

@Suite("xCal")
struct XCalTests {
    @Test(
        "a sample's calendar as xCal: valid by RFC 6321's schema, and the same calendar as its iCalendar export",
        arguments: [SampleApp.familyCalendar, .familyTodo, .relationshipCheckin])
    func samples(_ app: SampleApp) throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(app)
        let mapping = try CalendarMapping.parse(app.calendarMappingText!, file: "mapping", schema: store.schema)
        let settings = CalendarWriteSettings(
            mapping: mapping,
            options: ICalExportOptions(timeZone: TimeZone(identifier: "Europe/Berlin"), dtstamp: 1_767_225_600_000))
        let ics = scratch.path("\(app.rawValue).ics")
        let xcal = scratch.path("\(app.rawValue).xcal")
        let icsSummary = try exportCalendar(.iCalendar, from: store, to: ics, settings: settings)
        let xcalSummary = try exportCalendar(.xCal, from: store, to: xcal, settings: settings)
        #expect(xcalSummary.written == icsSummary.written && !xcalSummary.written.isEmpty)
        try validate(xcal)
        try expectSameCalendar(xcal: xcal, ics: ics)
    }

    @Test("importing the xCal export gives the records importing the iCalendar export gives")
    func importsAsICalendarDoes() throws {
        let scratch = Scratch()
        let source = try scratch.sampleStore(.familyCalendar)
        let mapping = try CalendarMapping.parse(
            SampleApp.familyCalendar.calendarMappingText!, file: "mapping", schema: source.schema)
        let write = CalendarWriteSettings(
            mapping: mapping, options: ICalExportOptions(timeZone: TimeZone(identifier: "America/New_York")))
        var results: [[Record]] = []
        for format in [RecordFormat.iCalendar, .xCal] {
            let path = scratch.path("family.\(format.extensions[0])")
            _ = try exportCalendar(format, from: source, to: path, settings: write)
            let store = try scratch.store(
                String(contentsOfFile: sample("family-calendar", "schema.ckdb"), encoding: .utf8),
                name: "\(format.name).sqlite")
            let (summary, _) = try importCalendar(
                path, into: store,
                settings: CalendarReadSettings(mapping: mapping, fixedFields: [("familyID", "family-1")]))
            #expect(summary.issues.isEmpty, "\(summary.issues)")
            #expect(summary.totals.inserted == 78)
            results.append(try allRecords(store))
        }
        expectSameRecords(results[1], results[0])
    }

    @Test("calendars other programs wrote go through xCal and back unchanged", arguments: calendarCorpus)
    func corpus(_ path: String) throws {
        let scratch = Scratch()
        let store = try RecordStore(path: scratch.path("archive.sqlite"))
        let (summary, _) = try importCalendar(
            path, into: store, settings: CalendarReadSettings(keepsCalendarsWhole: true))
        #expect(summary.issues.isEmpty, "\(summary.issues)")
        let whole = CalendarWriteSettings(keepsCalendarsWhole: true)
        let ics = scratch.path("archive.ics")
        let xcal = scratch.path("archive.xcal")
        _ = try exportCalendar(.iCalendar, from: store, to: ics, settings: whole)
        _ = try exportCalendar(.xCal, from: store, to: xcal, settings: whole)
        try validate(xcal)
        try expectSameCalendar(xcal: xcal, ics: ics)
        // ckport's own xCal reader: the archive it makes exports the same calendar.
        let again = try RecordStore(path: scratch.path("again.sqlite"))
        let (second, _) = try importCalendar(
            xcal, into: again, settings: CalendarReadSettings(keepsCalendarsWhole: true))
        #expect(second.issues.isEmpty && second.totals.inserted == summary.totals.inserted, "\(second.issues)")
        let back = scratch.path("back.ics")
        _ = try exportCalendar(.iCalendar, from: again, to: back, settings: whole)
        let python = try Conformance.requirePython()
        let (status, report) = try Conformance.run(
            python,
            [
                packageRoot.appendingPathComponent("Tests/FormatsTests/Fixtures/compare_calendars.py").path, "--xcal",
                ics, back,
            ])
        #expect(status == 0 && report.contains(", 0 differences"), "\(report)")
    }

    /// A calendar in xCal that uses each of its notations, as RFC 6321's examples do.
    static let everyNotation = """
        <?xml version="1.0" encoding="UTF-8"?>
        <icalendar xmlns="urn:ietf:params:xml:ns:icalendar-2.0" xmlns:other="urn:example:other">
          <vcalendar>
            <properties>
              <prodid><text>-//Example//Family planner//EN</text></prodid>
              <version><text>2.0</text></version>
              <x-wr-calname><unknown>The Okafors</unknown></x-wr-calname>
            </properties>
            <components>
              <vtimezone>
                <properties><tzid><text>America/Chicago</text></tzid></properties>
                <components>
                  <standard>
                    <properties>
                      <dtstart><date-time>1970-11-01T02:00:00</date-time></dtstart>
                      <rrule><recur><freq>YEARLY</freq><byday>1SU</byday><bymonth>11</bymonth></recur></rrule>
                      <tzoffsetfrom><utc-offset>-05:00</utc-offset></tzoffsetfrom>
                      <tzoffsetto><utc-offset>-06:00</utc-offset></tzoffsetto>
                    </properties>
                  </standard>
                </components>
              </vtimezone>
              <vevent>
                <properties>
                  <uid><text>swim-okafor@example.com</text></uid>
                  <dtstamp><date-time>2026-02-01T10:00:00Z</date-time></dtstamp>
                  <dtstart><parameters><tzid><text>America/Chicago</text></tzid></parameters><date-time>2026-03-02T17:00:00</date-time></dtstart>
                  <duration><duration>PT1H30M</duration></duration>
                  <rrule><recur><freq>WEEKLY</freq><until>2026-06-01T00:00:00Z</until><interval>2</interval><byday>MO</byday><byday>WE</byday></recur></rrule>
                  <rdate><parameters><tzid><text>America/Chicago</text></tzid></parameters><period><start>2026-03-07T09:00:00</start><duration>PT2H</duration></period></rdate>
                  <exdate><date>2026-03-16</date><date>2026-03-18</date></exdate>
                  <summary><text>Swimming; then snacks, at Nana's</text></summary>
                  <description><text>Bring towels.
        Goggles are in the car.</text></description>
                  <categories><text>kids</text><text>sport, water</text></categories>
                  <geo><latitude>41.878</latitude><longitude>-87.63</longitude></geo>
                  <attendee>
                    <parameters>
                      <cn><text>Ada Okafor</text></cn>
                      <rsvp><boolean>true</boolean></rsvp>
                      <delegated-from><cal-address>mailto:chidi@example.com</cal-address></delegated-from>
                      <x-family-role><text>parent</text></x-family-role>
                    </parameters>
                    <cal-address>mailto:ada@example.com</cal-address>
                  </attendee>
                  <request-status><code>2.0</code><description>Success; noted</description></request-status>
                  <other:note>not xCal</other:note>
                </properties>
                <components>
                  <valarm>
                    <properties>
                      <action><text>DISPLAY</text></action>
                      <description><text>Swimming</text></description>
                      <trigger><parameters><related><text>END</text></related></parameters><duration>-PT15M</duration></trigger>
                    </properties>
                  </valarm>
                </components>
              </vevent>
            </components>
          </vcalendar>
        </icalendar>
        """

    @Test("every notation of RFC 6321 becomes the iCalendar it stands for")
    func notations() throws {
        let scratch = Scratch()
        let path = scratch.path("okafor.xcal")
        try XCalTests.everyNotation.write(toFile: path, atomically: true, encoding: .utf8)
        try validate(path)
        let store = try RecordStore(path: scratch.path("archive.sqlite"))
        let (summary, reader) = try importCalendar(
            path, into: store, settings: CalendarReadSettings(keepsCalendarsWhole: true))
        #expect(summary.issues.isEmpty, "\(summary.issues)")
        var content = ""
        var calendar: FieldValue?
        try store.read { session in
            try session.forEach(RecordQuery(recordTypes: [CalendarArchive.componentType])) { record in
                if record["uid"] == .string("swim-okafor@example.com"), case .string(let text)? = record["content"] {
                    content = text
                    calendar = record["calendar"]
                }
            }
        }
        #expect(calendar == .string("The Okafors"))
        for line in [
            "DTSTART;TZID=America/Chicago:20260302T170000",
            "DURATION:PT1H30M",
            "RRULE:FREQ=WEEKLY;UNTIL=20260601T000000Z;INTERVAL=2;BYDAY=MO,WE",
            "RDATE;TZID=America/Chicago;VALUE=PERIOD:20260307T090000/PT2H",
            "EXDATE;VALUE=DATE:20260316,20260318",
            "SUMMARY:Swimming\\; then snacks\\, at Nana's",
            "DESCRIPTION:Bring towels.\\nGoggles are in the car.",
            "CATEGORIES:kids,sport\\, water",
            "GEO:41.878;-87.63",
            "ATTENDEE;CN=Ada Okafor;RSVP=TRUE;DELEGATED-FROM=\"mailto:chidi@example.com\";X-FAMILY-ROLE=parent:mailto:ada@example.com",
            "REQUEST-STATUS:2.0;Success\\; noted",
            "TRIGGER;RELATED=END:-PT15M",
        ] {
            #expect(content.contains(line), "\(line) is not in:\n\(content)")
        }
        // The element of another namespace is left out, and said so (a strict import refuses).
        let lossy = try #require(reader as? LossReportingSource)
        #expect(lossy.notKeptItems == ["<note> (urn:example:other), an element of another namespace"])
    }

    @Test("errors point into the xCal file: its line, whether XML, xCal or the mapping finds them")
    func errorPositions() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyCalendar)
        let mapping = try CalendarMapping.parse(
            SampleApp.familyCalendar.calendarMappingText!, file: "mapping", schema: store.schema)
        func attempt(_ body: String) throws -> Error? {
            let path = scratch.path("broken.xcal")
            let text = """
                <?xml version="1.0" encoding="UTF-8"?>
                <icalendar xmlns="urn:ietf:params:xml:ns:icalendar-2.0">
                  <vcalendar>
                    <properties><prodid><text>-//t//t//EN</text></prodid><version><text>2.0</text></version></properties>
                    <components>
                \(body)
                    </components>
                  </vcalendar>
                </icalendar>
                """
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            do {
                let (summary, _) = try importCalendar(
                    path, into: store,
                    settings: CalendarReadSettings(mapping: mapping, fixedFields: [("familyID", "family-1")]))
                return summary.issues.first
            } catch {
                return error
            }
        }
        let badDate = try attempt(
            """
              <vevent>
                <properties>
                  <uid><text>e-1</text></uid>
                  <dtstart><date-time>2026-13-45</date-time></dtstart>
                </properties>
              </vevent>
            """)
        #expect(
            "\(badDate.map { "\($0)" } ?? "no error")".hasPrefix("\(scratch.path("broken.xcal")):9:"),
            "\(String(describing: badDate))")
        #expect(
            "\(badDate.map { "\($0)" } ?? "")".contains("<date-time>2026-13-45</date-time> is not a valid date-time"))
        let unknownValue = try attempt(
            """
              <vevent>
                <properties>
                  <uid><text>e-1</text></uid>
                  <summary><string>Lunch</string></summary>
                </properties>
              </vevent>
            """)
        #expect("\(unknownValue.map { "\($0)" } ?? "no error")".contains(":9:"), "\(String(describing: unknownValue))")
        #expect("\(unknownValue.map { "\($0)" } ?? "")".contains("<string> is not an xCal value type"))
        // The mapping's own complaints name the xCal line of the property, or of the
        // component when no property is to blame.
        let unknownZone = try attempt(
            """


              <vevent>
                <properties>
                  <uid><text>e-2</text></uid>
                  <dtstamp><date-time>2026-01-01T00:00:00Z</date-time></dtstamp>
                  <dtstart><parameters><tzid><text>Mars/Olympus_Mons</text></tzid></parameters><date-time>2026-01-01T10:00:00</date-time></dtstart>
                </properties>
              </vevent>
            """)
        let zoneText = unknownZone.map { "\($0)" } ?? "no error"
        #expect(
            zoneText.hasPrefix(
                "\(scratch.path("broken.xcal")):12: record 'e-2' (Event): DTSTART names TZID \"Mars/Olympus_Mons\""),
            "\(zoneText)")
        let noUID = try attempt(
            """

              <vevent>
                <properties>
                  <dtstart><date-time>2026-01-01T10:00:00Z</date-time></dtstart>
                </properties>
              </vevent>
            """)
        let uidText = noUID.map { "\($0)" } ?? "no error"
        #expect(
            uidText.hasPrefix("\(scratch.path("broken.xcal")):7: ") && uidText.contains("without UID"), "\(uidText)")
    }

    @Test("the iCalendar text made from xCal is held a read at a time, however long the file")
    func bounded() throws {
        var body = ""
        for e in 0..<4000 {
            body +=
                "<vevent><properties><uid><text>e-\(e)</text></uid><dtstamp><date-time>2026-01-01T00:00:00Z</date-time></dtstamp>"
                + "<dtstart><date-time>2026-03-02T17:00:00Z</date-time></dtstart><summary><text>Event \(e) with a summary long enough to matter</text></summary>"
                + "</properties></vevent>\n"
        }
        let text =
            "<?xml version=\"1.0\"?>\n<icalendar xmlns=\"urn:ietf:params:xml:ns:icalendar-2.0\"><vcalendar><properties>"
            + "<prodid><text>-//t//t//EN</text></prodid><version><text>2.0</text></version></properties><components>\n"
            + body + "</components></vcalendar></icalendar>\n"
        let converter = try XCalToICalendar(
            input: ByteInput(name: "long.xcal", bytes: Array(text.utf8)), lines: XCalLineMap())
        var chunk = [UInt8](repeating: 0, count: 4096)
        var total = 0
        var largest = 0
        while true {
            let n = try chunk.withUnsafeMutableBytes { try converter.read(into: $0) }
            if n == 0 { break }
            total += n
            largest = max(largest, converter.bufferedBytes)
        }
        #expect(total > 500_000)
        #expect(largest < 8192, "the converter held \(largest) bytes")
    }

    @Test("hostile xCal: a DOCTYPE with entities is refused before anything is read")
    func hostile() throws {
        let scratch = Scratch()
        let path = scratch.path("evil.xcal")
        try """
        <?xml version="1.0"?>
        <!DOCTYPE icalendar [ <!ENTITY a "aaaaaaaaaa"> <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"> ]>
        <icalendar xmlns="urn:ietf:params:xml:ns:icalendar-2.0"><vcalendar><properties><prodid><text>&b;</text></prodid></properties></vcalendar></icalendar>
        """.write(toFile: path, atomically: true, encoding: .utf8)
        let store = try RecordStore(path: scratch.path("archive.sqlite"))
        do {
            _ = try importCalendar(path, into: store, settings: CalendarReadSettings(keepsCalendarsWhole: true))
            Issue.record("a document declaring entities was read")
        } catch let error as XMLInputError {
            #expect(error.message.description.contains("declares entities"), "\(error)")
        }
        #expect(try allRecords(store).isEmpty)
    }
}
