import Foundation
import Records
@_exported import TestSupport
import Testing

@testable import Formats

/// A schema with a field of every type, and records that push each type to its edges.
enum EveryType {
    static let schema = try! SchemaParser.parse(
        """
        DEFINE SCHEMA
            RECORD TYPE Thing (
                text STRING, count INT64, ratio DOUBLE, when TIMESTAMP, blob BYTES, ref REFERENCE,
                file ASSET, place LOCATION, legacy NUMBER, score NUMBER PREFERRED AS INT64,
                secret ENCRYPTED STRING, secretPlace ENCRYPTED LOCATION,
                texts LIST<STRING>, counts LIST<INT64>, ratios LIST<DOUBLE>, whens LIST<TIMESTAMP>,
                blobs LIST<BYTES>, refs LIST<REFERENCE>, places LIST<LOCATION>, files LIST<ASSET>,
                secrets LIST<ENCRYPTED STRING>
            );
        """)

    static let zone = ZoneID(scope: .shared, zoneName: "Kitchen-Zone", ownerRecordName: "_0123abcd")

    static var records: [Record] {
        var full = Record(
            id: RecordID(recordName: "thing-full", zone: zone), recordType: "Thing", changeTag: "k9",
            created: RecordStamp(timestamp: -236_131_200_000, userRecordName: "_0123abcd", deviceID: "iPhone-1"),
            modified: RecordStamp(timestamp: 1_768_208_400_123))
        full.fields = [
            "text": .string("Größe \"quoted\" \\ back\nslash\t😀 \u{01}"),
            "count": .int64(Int64.min),
            "ratio": .double(0.1),
            "when": .timestamp(-1),
            "blob": .bytes([0, 1, 2, 254, 255]),
            "ref": .reference(Reference(recordName: "other", action: .deleteSelf)),
            "file": .asset(
                Asset(
                    fileChecksum: "AXyz+/==", size: 1_234_567, referenceChecksum: "r", wrappingKey: "w", receipt: "rc",
                    downloadURL: "https://example.com/a", localPath: "assets/ab")),
            "place": .location(
                Location(
                    latitude: -33.8688, longitude: 151.2093, horizontalAccuracy: 5, verticalAccuracy: 3.5,
                    altitude: -12.25, speed: 0, course: 359.9, timestamp: 1_768_208_400_000)),
            "legacy": .double(3.0),
            "score": .int64(42),
            "secret": .string(""),
            "secretPlace": .location(Location(latitude: 0, longitude: -0.0)),
            "texts": .list(.string, [.string(""), .string("ünï"), .string("🏳️‍🌈")]),
            "counts": .list(.int64, [.int64(Int64.max), .int64(0), .int64(-1)]),
            "ratios": .list(
                .double,
                [
                    .double(Double.leastNonzeroMagnitude), .double(1.7976931348623157e308), .double(-0.0),
                    .double(1e-5), .double(123456789.125),
                ]),
            "whens": .list(.timestamp, [.timestamp(Int64.min), .timestamp(Int64.max), .timestamp(0)]),
            "blobs": .list(.bytes, [.bytes([]), .bytes([7])]),
            "refs": .list(
                .reference,
                [
                    .reference(Reference(recordName: "a")),
                    .reference(Reference(recordName: "_userRecord", action: .validate)),
                ]),
            "places": .list(.location, [.location(Location(latitude: 90, longitude: 180))]),
            "files": .list(.asset, []),
            "secrets": .list(.string, [.string("s")]),
        ]
        let empty = Record(id: RecordID(recordName: "thing-empty", zone: zone), recordType: "Thing")
        var lists = Record(id: RecordID(recordName: "thing-lists"), recordType: "Thing")
        lists.fields = [
            "texts": .list(.string, []), "counts": .list(.int64, []), "whens": .list(.timestamp, []),
            "refs": .list(.reference, []),
            "legacy": .int64(-7), "ratio": .double(-0.0), "count": .int64(Int64.max),
        ]
        return [full, empty, lists]
    }
}

func encode(_ records: [Record], style: ValueStyle, schema: Schema = EveryType.schema) -> [UInt8] {
    let codec = JSONRecordCodec(schema: schema)
    var out = JSONWriter()
    for record in records {
        codec.encode(record, style: style, to: &out)
        out.byte(0x0A)
    }
    return out.bytes
}

func readAll(
    _ bytes: [UInt8], name: String = "test.jsonl", layout: JSONRecordReader.Layout? = nil, codec: JSONRecordCodec
) throws -> [SourceItem] {
    let reader = JSONRecordReader(input: ByteInput(name: name, bytes: bytes), layout: layout, codec: codec)
    var items: [SourceItem] = []
    while let item = try reader.next() { items.append(item) }
    return items
}

func records(_ items: [SourceItem]) -> [Record] {
    items.compactMap { if case .record(let sourced) = $0 { return sourced.record } else { return nil } }
}

func issues(_ items: [SourceItem]) -> [InputIssue] {
    items.compactMap { if case .invalid(let issue, _) = $0 { return issue } else { return nil } }
}

/// Compares records and reports each difference by record and field, not as one wall of text.
func expectSameRecords(
    _ actual: [Record], _ expected: [Record], sourceLocation: Testing.SourceLocation = #_sourceLocation
) {
    #expect(actual.map(\.recordName) == expected.map(\.recordName), sourceLocation: sourceLocation)
    for (a, e) in zip(actual, expected) {
        #expect(a.id == e.id, "\(e.recordName): id", sourceLocation: sourceLocation)
        #expect(
            a.changeTag == e.changeTag && a.created == e.created && a.modified == e.modified,
            "\(e.recordName): system fields \(a.created.map { "\($0)" } ?? "-") vs \(e.created.map { "\($0)" } ?? "-")",
            sourceLocation: sourceLocation)
        for name in Set(a.fields.names + e.fields.names).sorted() where a.fields[name] != e.fields[name] {
            Issue.record(
                "\(e.recordName).\(name): \(a.fields[name].map { "\($0)" } ?? "nil") vs expected \(e.fields[name].map { "\($0)" } ?? "nil")",
                sourceLocation: sourceLocation)
        }
    }
}
