import Foundation
import Records
import SQLiteStore
import SampleApps
import StoreCore
import Testing

@testable import Formats

/// The format registry: one description per format, which the operations, the command line
/// and the fuzz targets take formats from.
@Suite("format registry")
struct RegistryTests {
    @Test("names and extensions belong to one format each, and resolve regardless of case")
    func namesAndExtensions() {
        let names = RecordFormats.all.flatMap(\.names)
        let extensions = RecordFormats.all.flatMap(\.extensions)
        #expect(Set(names).count == names.count && Set(extensions).count == extensions.count)
        #expect(names == ["json", "jsonl", "ndjson", "csv", "tsv", "ics", "xcal", "plist"])
        for format in RecordFormats.all {
            for name in format.names { #expect(RecordFormats.named(name.uppercased()) == format) }
            for ext in format.extensions {
                #expect(RecordFormats.forPath("dir.v2/Family Export.\(ext.uppercased())") == format)
            }
        }
        #expect(RecordFormats.forPath("notes.txt") == nil && RecordFormats.forPath("jsonl") == nil)
        #expect(RecordFormats.named("xml") == nil)
        #expect(RecordFormats.forPath("a.ndjson") == .jsonLines)
    }

    @Test("sniffing tells each format from its first bytes, in files other tools wrote too")
    func sniffing() throws {
        func head(_ path: String) -> [UInt8] {
            Array((FileManager.default.contents(atPath: path) ?? Data()).prefix(4096))
        }
        #expect(RecordFormats.sniff(head(sample("notes", "records.jsonl"))) == .jsonLines)
        for calendar in ["google-calendar.ics", "outlook.ics", "thunderbird.ics", "zimbra-lotus.ics"] {
            #expect(
                RecordFormats.sniff(
                    head(packageRoot.appendingPathComponent("Tests/FormatsTests/Fixtures/calendars/\(calendar)").path))
                    == .iCalendar, "\(calendar)")
        }
        #expect(RecordFormats.sniff(Array("\u{FEFF}[\n  {\"recordName\": \"a\"}\n]".utf8)) == .json)
        #expect(RecordFormats.sniff(Array("{\n  \"records\": [\n".utf8)) == .json)
        #expect(
            RecordFormats.sniff(Array("{\"recordName\":\"a\",\"fields\":{}}\n{\"recordName\":\"b\"}\n".utf8))
                == .jsonLines)
        #expect(RecordFormats.sniff(Array("recordName,title,pinned\r\nn-1,Milk,1\r\n".utf8)) == .csv)
        #expect(RecordFormats.sniff(Array("recordName\ttitle\tnote, with a comma\nn-1\tMilk\tx\n".utf8)) == .tsv)
        #expect(RecordFormats.sniff(Array("begin:vcalendar\r\nVERSION:2.0\r\n".utf8)) == .iCalendar)
        #expect(
            RecordFormats.sniff(
                Array(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n<plist version=\"1.0\">\n"
                        .utf8)) == .propertyList)
        #expect(
            RecordFormats.sniff(
                Array("<?xml version=\"1.0\"?>\n<icalendar xmlns=\"urn:ietf:params:xml:ns:icalendar-2.0\">\n".utf8))
                == .xCal)
        #expect(RecordFormats.sniff(Array("<?xml version=\"1.0\"?>\n<html>".utf8)) == nil)
        #expect(RecordFormats.sniff(Array("hello".utf8)) == nil && RecordFormats.sniff([]) == nil)
    }

    @Test(
        "every format that ckport reads and writes gives back the records it wrote",
        arguments: RecordFormats.all.filter { $0.makeReader != nil && $0.makeWriter != nil })
    func roundTrip(format: RecordFormat) throws {
        let scratch = Scratch()
        let app = SampleApp.notes
        var generated: [Record] = []
        try app.generate(records: 300, seed: 11, emit: { generated.append($0) })
        var total = 0
        let types: [RecordTypeDefinition?] = format.oneRecordTypePerFile ? app.schema.recordTypes : [nil]
        for type in types {
            let expected = generated.filter { type == nil || $0.recordType == type!.name }
            let path = scratch.path("out.\(format.extensions[0])")
            let writer = try format.makeWriter!(
                try OutputFile(path: path), RecordWriteContext(schema: app.schema, recordType: type))
            for record in expected { try writer.write(record) }
            try writer.finish()
            var context = RecordReadContext(schema: app.schema, defaultRecordType: type?.name)
            context.defaultZone = expected.first?.zone ?? .defaultZone
            let reader = try format.makeReader!(.file(path), context)
            var read: [Record] = []
            while let item = try reader.next() {
                guard case .record(let sourced) = item else {
                    Issue.record("\(format) \(type?.name ?? ""): \(item)")
                    continue
                }
                read.append(sourced.record)
            }
            #expect(read.map(\.recordName) == expected.map(\.recordName), "\(format) \(type?.name ?? "")")
            #expect(read.map(\.fields) == expected.map(\.fields), "\(format) \(type?.name ?? "")")
            total += read.count
        }
        #expect(total == 300)
    }
}
