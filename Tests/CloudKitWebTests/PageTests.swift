import Foundation
import Records
import SQLiteStore
import StoreCore
import TestSupport
import Testing

@testable import CKPort

@Suite("pulled pages: read from the answer's bytes, saved several to a transaction")
struct PageTests {
    static let zone = ZoneID(scope: .private, zoneName: "Notes")

    func page(_ json: String, number: Int = 1) throws -> CloudPage {
        var page = try CloudPage(Data(json.utf8), operation: "records/changes")
        page.decode(
            with: JSONRecordCodec(
                schema: try SchemaParser.parse(PullTests.schema), readStyle: .canonical, defaultZone: Self.zone),
            name: "CloudKit page \(number) of zone Notes", zone: Self.zone)
        return page
    }

    func note(_ name: String, _ title: String) -> String {
        #"{"recordName":"\#(name)","recordType":"Note","fields":{"title":{"value":"\#(title)","type":"STRING"}},"recordChangeTag":"t"}"#
    }

    @Test(
        "an answer's records, deletions and paging keys are found wherever its keys stand, with strings that hold quotes, braces and escapes"
    )
    func walk() throws {
        let tricky = #"{\"a\": [1, {\"b\": \"}]\"}], \\\" \u00e9"#
        let page = try page(
            #"""
            { "syncToken" : "tok-2", "records" : [
                {"fields":{"title":{"value":"\#(tricky)","type":"STRING"}},"recordType":"Note","recordName":"n-1"},
                {"recordName":"gone","deleted":true,"zoneID":{"zoneName":"Notes"}},
                {"recordName":"n-2","recordType":"Note","fields":{"title":{"value":"[{\"x\":1e-3}]","type":"STRING"},"pinned":{"value":-12,"type":"INT64"}}}
              ], "moreComing": true, "zoneID": {"zoneName": "Notes"}, "extra": [null, false, 2.5e+10, {"k": []}] }
            """#)
        #expect(page.syncToken == "tok-2" && page.moreComing && page.continuationMarker == nil)
        #expect(page.deletedNames == ["gone"])
        #expect(page.records.map(\.name) == ["n-1", "n-2"])
        let records = page.items.compactMap { item -> Record? in
            if case .record(let sourced) = item { return sourced.record }
            return nil
        }
        #expect(records.map(\.recordName) == ["n-1", "n-2"])
        #expect(records[0].fields["title"] == .string(#"{"a": [1, {"b": "}]"}], \" é"#))
        #expect(records[1].fields["title"] == .string(#"[{"x":1e-3}]"#) && records[1].fields["pinned"] == .int64(-12))
    }

    @Test(
        "an answer that is not whole JSON is refused with where it broke; a record that does not decode is an issue naming page, record and field"
    )
    func broken() throws {
        for (answer, expected) in [
            (#"{"records":[{"recordName":"a","fields":{"title":{"value":"x}}]}"#, "inside a string"),
            (#"{"records":[{"recordName":"a"} {"recordName":"b"}]}"#, "expected ',' or ']'"),
            (#"{"records":[],"records":[]}"#, "appears twice"),
            (#"{"records":[]} trailing"#, "after the answer's object"),
            (#"["records"]"#, "expected an object"),
            (
                String(repeating: #"{"records":[{"fields":"#, count: 1) + String(repeating: "[", count: 600)
                    + String(repeating: "]", count: 600) + "}]}", "deeper than 512"
            ),
        ] {
            #expect {
                _ = try page(answer)
            } throws: { error in
                "\(error)".contains("BAD_ANSWER") && "\(error)".contains(expected)
            }
        }
        let decoded = try page(
            #"{"records":[\#(note("ok", "fine")),{"recordName":"n-9","recordType":"Note","fields":{"pinned":{"value":"yes","type":"STRING"}}}]}"#,
            number: 3)
        guard case .invalid(let issue, _) = decoded.items[1] else {
            Issue.record("a STRING in an INT64 field decoded")
            return
        }
        #expect(
            issue.position.file == "CloudKit page 3 of zone Notes" && issue.position.line == 2
                && issue.recordName == "n-9" && issue.field == "pinned")
    }

    @Test(
        "pages saved together: a deletion a later page undoes is not applied, a record a later page deletes is deleted, and each zone keeps its newest token"
    )
    func batch() throws {
        let scratch = Scratch()
        let store = try scratch.store(PullTests.schema)
        let unit = PullUnit(zone: Self.zone, recordType: nil, startToken: nil)
        let first = try page(
            #"{"records":[\#(note("a", "A")),\#(note("c", "C")),\#(note("d", "D"))],"syncToken":"s-1","moreComing":true}"#
        )
        let options = ImportOptions(mode: .replace, skipInvalid: true)
        _ = try CloudSync.save(
            [PulledPage(unit: unit, page: first)], into: store, source: "src", options: options, rejects: nil,
            refetches: Refetches())
        // Page 2 deletes d and makes b; page 3 makes d again and deletes b and a.
        let second = try page(
            #"{"records":[\#(note("b", "B")),{"recordName":"d","deleted":true}],"syncToken":"s-2","moreComing":true}"#,
            number: 2)
        let third = try page(
            #"{"records":[\#(note("d", "D again")),{"recordName":"b","deleted":true},{"recordName":"a","deleted":true}],"syncToken":"s-3"}"#,
            number: 3)
        let counts = try CloudSync.save(
            [PulledPage(unit: unit, page: second), PulledPage(unit: unit, page: third)], into: store, source: "src",
            options: options, rejects: nil, refetches: Refetches()
        ).counts
        #expect(counts.map { $0.saved } == [1, 1] && counts.map { $0.deleted } == [0, 2])
        let held = try store.read { session in
            try ["a", "b", "c", "d"].map {
                try session.record(RecordID(recordName: $0, zone: Self.zone))?.fields["title"]
            }
        }
        #expect(held == [nil, nil, .string("C"), .string("D again")])
        #expect(try store.read { try $0.syncStates(source: "src") }.map(\.token) == ["s-3"])
    }
}
