import Formats
import Foundation
import Records
import SQLiteStore
import StoreCore
import TestSupport
import Testing

/// A stream of scheduling messages (RFC 5546, iTIP) in one file, as a scheduling server's test
/// data and mail archives hold them: a calendar per message, each with its METHOD, the same
/// event's UID in several of them, SEQUENCE counting the organizer's revisions.
let schedulingStream = """
    BEGIN:VCALENDAR
    PRODID:-//Example School//Scheduling 2.1//EN
    VERSION:2.0
    METHOD:REQUEST
    BEGIN:VEVENT
    UID:parents-evening@example.org
    SEQUENCE:0
    ORGANIZER;CN=Ms Rivera:mailto:rivera@example.org
    ATTENDEE;CN=Sam Parker:mailto:sam@example.org
    DTSTAMP:20260301T090000Z
    DTSTART:20260310T150000Z
    DTEND:20260310T160000Z
    SUMMARY:Parents' evening
    LOCATION:Room 4
    END:VEVENT
    END:VCALENDAR
    BEGIN:VCALENDAR
    PRODID:-//Example Mail//Calendar 5//EN
    VERSION:2.0
    METHOD:REQUEST
    BEGIN:VEVENT
    UID:parents-evening@example.org
    SEQUENCE:2
    ORGANIZER;CN=Ms Rivera:mailto:rivera@example.org
    ATTENDEE;CN=Sam Parker:mailto:sam@example.org
    DTSTAMP:20260303T090000Z
    DTSTART:20260312T170000Z
    DURATION:PT30M
    SUMMARY:Parents' evening (moved)
    END:VEVENT
    END:VCALENDAR
    BEGIN:VCALENDAR
    PRODID:-//Example Phone//Calendar 9//EN
    VERSION:2.0
    METHOD:COUNTER
    BEGIN:VEVENT
    UID:parents-evening@example.org
    SEQUENCE:1
    ORGANIZER;CN=Ms Rivera:mailto:rivera@example.org
    ATTENDEE;CN=Sam Parker:mailto:sam@example.org
    DTSTAMP:20260302T090000Z
    DTSTART:20260311T180000Z
    DTEND:20260311T183000Z
    SUMMARY:Parents' evening
    END:VEVENT
    END:VCALENDAR

    """

@Suite("scheduling messages: several calendars in one file")
struct SchedulingStreamTests {
    @Test(
        "on the archive route each calendar is kept whole: its METHOD and PRODID come back with its own event, in the file's order"
    )
    func archiveKeepsEachCalendar() throws {
        let calendar = try CalendarImport()
        let path = try calendar.file(schedulingStream, name: "invites.ics")
        let store = try RecordStore(path: calendar.scratch.path("archive.sqlite"))
        let importer = RecordImporter(store: store, options: ImportOptions())
        importer.addingTypes = CalendarArchive.schema.recordTypes
        let summary = try importer.run([CalendarArchiveReader(input: try ByteInput(path: path))])
        #expect(
            summary.notes.contains { $0.contains("archived 3 VEVENT whole, every property kept") }, "\(summary.notes)")
        let output = try OutputFile(path: calendar.scratch.path("back.ics"))
        let exported = try store.read { try CalendarArchiveExporter(session: $0).export(to: output) }
        try output.commit()
        #expect(exported.calendars == ["invites", "invites (2)", "invites (3)"])
        let back = try String(contentsOfFile: calendar.scratch.path("back.ics"), encoding: .utf8)
        // Byte for byte what was read (the stream's lines are all under 75 octets).
        #expect(back == schedulingStream.replacingOccurrences(of: "\n", with: "\r\n"), "\(back)")
        if let (status, report) = try Conformance.check(calendar.scratch.path("back.ics")) {
            #expect(status == 0, "\(report)")
        }
    }

    @Test(
        "on an app mapping the message with the highest SEQUENCE is kept whole, never blended with older ones, and the others are named as not kept"
    )
    func appMappingKeepsTheLatest() throws {
        let calendar = try CalendarImport()
        let summary = try calendar.run(try calendar.file(schedulingStream))
        let event = try #require(try calendar.event("parents-evening@example.org"))
        #expect(event["title"] == .string("Parents' evening (moved)"))
        #expect(event["startDate"] == at("2026-03-12T17:00:00Z"))
        // Its end is its own (DTSTART + DURATION), not the first message's DTEND of the 10th.
        #expect(event["endDate"] == at("2026-03-12T17:30:00Z"))
        #expect(event["location"] == nil)
        let note = try #require(summary.notes.first { $0.hasPrefix("not kept") })
        #expect(
            note.contains(
                "2 VEVENTs superseded by a later message for the same event (the one with the highest SEQUENCE, the last of equals, kept whole)"
            ), "\(note)")
        #expect(note.contains("3 METHOD of the calendar"), "\(note)")
    }

    @Test("lines between one calendar's END and the next one's BEGIN are named as not kept on both routes")
    func linesBetweenCalendars() throws {
        let calendar = try CalendarImport()
        let stray = schedulingStream.replacingOccurrences(
            of: "END:VCALENDAR\nBEGIN:VCALENDAR\nPRODID:-//Example Phone",
            with:
                "END:VCALENDAR\nBEGIN:VEVENT\nUID:lost@example.org\nSUMMARY:Between\nEND:VEVENT\nBEGIN:VCALENDAR\nPRODID:-//Example Phone"
        )
        #expect(stray != schedulingStream)
        let path = try calendar.file(stray, name: "stray.ics")
        let reader = CalendarArchiveReader(input: try ByteInput(path: path))
        while try reader.next() != nil {}
        #expect(reader.notKeptItems == ["4 lines outside any VCALENDAR"], "\(reader.notKeptItems)")
        let mapped = try calendar.run(path)
        #expect(
            mapped.notes.contains { $0.hasPrefix("not kept") && $0.contains("4 lines outside any VCALENDAR") },
            "\(mapped.notes)")
    }
}
