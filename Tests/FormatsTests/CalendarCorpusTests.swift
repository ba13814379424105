import Formats
import Foundation
import Records
import SQLiteStore
import StoreCore
import TestSupport
import Testing

/// iCalendar files from other projects' test suites (icalendar, ical.js, libical, khal, vobject,
/// sabre/vobject, Calendar Server), each row of the corpus's SOURCES.tsv: file, repository,
/// commit, path, expected, detail, note.
let realCalendars: [[String]] = corpusRows("calendars")

/// A calendar's logical lines: without a byte-order mark, split at CRLF, LF or CR, empty lines
/// dropped, folded lines joined.
private func logicalLines(_ bytes: [UInt8]) -> [[UInt8]] {
    var bytes = bytes[...]
    if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
    var lines: [[UInt8]] = []
    var current: [UInt8] = []
    var index = bytes.startIndex
    func finish() {
        defer { current = [] }
        guard !current.isEmpty else { return }
        if current[0] == 0x20 || current[0] == 0x09, !lines.isEmpty {
            lines[lines.count - 1] += current.dropFirst()
        } else {
            lines.append(current)
        }
    }
    while index < bytes.endIndex {
        let byte = bytes[index]
        if byte == 0x0A || byte == 0x0D {
            finish()
            if byte == 0x0D, index + 1 < bytes.endIndex, bytes[index + 1] == 0x0A { index += 1 }
        } else {
            current.append(byte)
        }
        index += 1
    }
    finish()
    return lines
}

@Suite("calendars from other projects' test suites")
struct CalendarCorpusTests {
    @Test("the corpus is there, each file with its source and its expected outcome")
    func present() {
        #expect(realCalendars.count >= 60)
        for row in realCalendars {
            #expect(
                row.count == 7 && FileManager.default.fileExists(atPath: row[0]) && row[1].contains("/")
                    && row[2].count == 40, "\(row)")
            #expect(["identical", "unfolded", "completed", "not-kept", "empty", "refused"].contains(row[4]), "\(row)")
        }
        for outcome in ["identical", "unfolded", "completed", "not-kept", "empty", "refused"] {
            #expect(realCalendars.contains { $0[4] == outcome }, "no file expects \(outcome)")
        }
    }

    @Test(
        "each archives and exports as its row expects: whole, said to be partial, or refused with its reason and nothing written",
        arguments: realCalendars.map { [$0[0], $0[4], $0[5]] })
    func archive(_ row: [String]) throws {
        let (path, expected, detail) = (row[0], row[1], row[2])
        let scratch = Scratch()
        let store = try RecordStore(path: scratch.path("archive.sqlite"))
        let importer = RecordImporter(store: store, options: ImportOptions())
        importer.addingTypes = CalendarArchive.schema.recordTypes
        let reader = CalendarArchiveReader(input: try ByteInput(path: path))
        if expected == "refused" {
            do {
                _ = try importer.run([reader])
                Issue.record("\(path) was imported")
            } catch {
                #expect("\(error)".contains(detail), "\(error)")
            }
            // Nothing written: the store has not even the archive's types.
            #expect(!CalendarArchive.fits(try RecordStore(path: scratch.path("archive.sqlite")).loadSchema()))
            return
        }
        let summary = try importer.run([reader])
        #expect(
            reader.notKeptItems.joined(separator: ", ") == (expected == "not-kept" ? detail : ""),
            "\(reader.notKeptItems)")
        let output = try OutputFile(path: scratch.path("back.ics"))
        if expected == "empty" {
            #expect(summary.notes.contains { $0.contains("holds a calendar with no components") }, "\(summary.notes)")
            #expect(throws: (any Error).self) {
                try store.read { try CalendarArchiveExporter(session: $0).export(to: output) }
            }
            return
        }
        _ = try store.read { try CalendarArchiveExporter(session: $0).export(to: output) }
        try output.commit()
        let original = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        let back = Array(try Data(contentsOf: URL(fileURLWithPath: scratch.path("back.ics"))))
        // What RFC 5545 requires of a calendar that the file lacks, and the export adds.
        let required = [Array("PRODID:-//ckport//archive//EN".utf8), Array("VERSION:2.0".utf8)]
        let added = Set(required.filter { !logicalLines(original).contains($0) })
        let backAsRead = logicalLines(back).filter { !added.contains($0) }
        switch expected {
        case "identical":
            #expect(back == original)
        case "unfolded":
            #expect(back != original && logicalLines(back) == logicalLines(original))
        case "completed":
            #expect(!added.isEmpty && backAsRead == logicalLines(original))
        default:
            // Every line that came back was in the file, in its order; the rest were named.
            var remaining = logicalLines(original)[...]
            for line in backAsRead {
                guard let found = remaining.firstIndex(of: line) else {
                    Issue.record(
                        "\(path): a line came back that the file did not hold: \(String(decoding: line, as: UTF8.self))"
                    )
                    break
                }
                remaining = remaining[(found + 1)...]
            }
            #expect(backAsRead.count < logicalLines(original).count)
        }
    }
}
