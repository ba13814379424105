import Foundation
import Records
import StoreCore

extension RecordFormat {
    /// xCal (RFC 6321): iCalendar in XML, read and written through the same calendar mappings
    /// as iCalendar. An export is the iCalendar export's calendar, element for element; an
    /// import reads the calendar as the iCalendar import would.
    public static let xCal = RecordFormat(
        names: ["xcal"], extensions: ["xcal", "xcs"], title: "xCal",
        summary: "calendars in XML (RFC 6321), through a mapping", noun: "an xCal file", kind: .calendar,
        sniff: { head in
            let prefix = String(decoding: head.prefix(1024), as: UTF8.self)
            return prefix.contains("<icalendar") && prefix.contains("urn:ietf:params:xml:ns:icalendar-2.0")
        },
        makeReader: { input, context in
            let lines = XCalLineMap()
            let latest = XCalConverterBox()
            let converted = RecordInput.converted(name: input.name, isReopenable: input.isReopenable) {
                let converter = try XCalToICalendar(input: try input.open(), lines: lines)
                latest.converter = converter
                return ByteInput(name: input.name, totalBytes: nil) { buffer in try converter.read(into: buffer) }
            }
            let inner = try RecordFormat.iCalendar.makeReader!(converted, context)
            return XCalRecordSource(inner: inner, lines: lines, converter: { latest.converter })
        },
        makeWriter: nil,
        exportFromStore: { session, query, output, context in
            // The iCalendar export goes to a temporary file, which is then written as xCal:
            // both formats say exactly the same, and memory stays flat.
            // In this process's private folder, for the owner alone.
            let (fd, spoolPath) = try PrivateFiles.create("calendar-")
            close(fd)
            defer { unlink(spoolPath) }
            let spool = try OutputFile(path: spoolPath, ownerOnly: true)
            let summary = try RecordFormat.iCalendar.exportFromStore!(session, query, spool, context)
            let parser = ICalParser(input: try ByteInput(path: spoolPath))
            do {
                try XCalWriter(output: output).write(from: parser)
                try output.commit()
            } catch {
                output.discard()
                throw error
            }
            return summary
        })
}

/// The converter an xCal reader made last (a reader that reads twice makes two).
final class XCalConverterBox {
    var converter: XCalToICalendar?
}
