import Foundation
import PropertyBased
import SampleApps
import Testing
import TestSupport
@testable import Formats
import Records
@testable import Store

/// The calendar formats on generated data: each calendar app's records, from a random seed and
/// a random count, go out as iCalendar and as xCal through the app's mapping and come back into
/// the store they came from without a change (every record unchanged, nothing added); the RFC
/// 5545 checker beside the project passes every iCalendar file.
@Suite("calendars on random data")
struct CalendarProperties {
    @Test("random records of each calendar app go out as iCalendar and xCal and come back unchanged")
    func calendarsBack() async {
        await propertyCheck(count: 4, input: Gen.uint64(in: 0 ... UInt64.max)) { seed in
            for app in [SampleApp.familyCalendar, .familyTodo, .relationshipCheckin] {
                do {
                    let scratch = Scratch()
                    let store = try scratch.store(app.schemaText, name: "\(app.rawValue).sqlite")
                    var records: [Record] = []
                    try app.generate(records: 40 + Int(seed % 400), seed: seed) { records.append($0) }
                    _ = try RecordImporter(store: store, options: ImportOptions()).run([ArrayRecordSource(records)])
                    let before = try allRecords(store)
                    let mapping = try CalendarMapping.parse(app.calendarMappingText!, file: "mapping", schema: store.schema)
                    // Each record in its own zone (with --tz every time is written in that zone,
                    // and a record's zone field comes back as that zone: the instants only are kept).
                    let write = CalendarWriteSettings(mapping: mapping, options: ICalExportOptions(dtstamp: 0, includeCancelled: true))
                    for format in [RecordFormat.iCalendar, .xCal] {
                        let path = scratch.path("out.\(format.extensions[0])")
                        let written = try exportCalendar(format, from: store, to: path, settings: write)
                        #expect(written.written.values.reduce(0, +) > 0, "seed \(seed), \(app.rawValue), \(format.name): nothing written")
                        if format == .iCalendar, let (status, report) = try Conformance.check(path) {
                            #expect(status == 0, "seed \(seed), \(app.rawValue): the RFC 5545 checker: \(report)")
                        }
                        let (summary, _) = try importCalendar(path, into: store, settings: CalendarReadSettings(mapping: mapping))
                        #expect(summary.totals.inserted == 0 && summary.totals.updated == 0 && summary.issues.isEmpty,
                                "seed \(seed), \(app.rawValue), \(format.name): \(summary.totals) \(summary.issues.prefix(3))")
                        expectSameRecords(try allRecords(store), before)
                    }
                } catch {
                    Issue.record("seed \(seed), \(app.rawValue): \(error)")
                }
            }
        }
    }
}
