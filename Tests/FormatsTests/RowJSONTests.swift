import Foundation
import Testing
@testable import Formats
import Records
import SampleApps
@testable import Store

/// The export's row path (canonical JSON straight from SQLite's rows) against the general path
/// (each row decoded into a record, the record encoded): the same bytes, or it is not used.
@Suite("JSON from rows")
struct RowJSONTests {
    /// What the general path writes for `query`: one canonical object a line.
    private func generalPath(_ store: RecordStore, _ query: RecordQuery) throws -> [UInt8] {
        let codec = JSONRecordCodec(schema: store.schema)
        var out = JSONWriter()
        try store.read { session in
            try session.forEach(query) { record in
                codec.encode(record, style: .canonical, to: &out)
                out.byte(0x0A)
            }
        }
        return out.bytes
    }

    private func rowPath(_ store: RecordStore, _ query: RecordQuery) throws -> [UInt8]? {
        try store.read { session -> [UInt8]? in
            guard session.canWriteJSONFromRows(query) else { return nil }
            var out = JSONWriter()
            try session.forEachCanonicalJSON(query, into: &out) { $0.byte(0x0A) }
            return out.bytes
        }
    }

    static let scalars = """
        DEFINE SCHEMA
            RECORD TYPE Scalar (
                text STRING, count INT64, ratio DOUBLE, when TIMESTAMP, blob BYTES, ref REFERENCE,
                legacy NUMBER, secret ENCRYPTED STRING, secretCount ENCRYPTED INT64, secretRatio ENCRYPTED DOUBLE
            );
            RECORD TYPE Other ( name STRING );
        """

    @Test("every scalar type, system fields present and absent, zones of every scope: the general path's bytes")
    func scalars() throws {
        let scratch = Scratch()
        let zones = [ZoneID.defaultZone, ZoneID(scope: .shared, zoneName: "Kitchen-Zone", ownerRecordName: "_0123abcd"),
                     ZoneID(scope: .public, zoneName: "_defaultZone", ownerRecordName: "_x\"y")]
        var records: [Record] = []
        for (z, zone) in zones.enumerated() {
            var full = Record(id: RecordID(recordName: "s-\(z)-full", zone: zone), recordType: "Scalar", changeTag: "tag\\\"\(z)",
                              created: RecordStamp(timestamp: -236_131_200_000, userRecordName: "_0123abcd", deviceID: "iPhone 1"),
                              modified: RecordStamp(timestamp: 1_768_208_400_123))
            full.fields = [
                "text": .string("Größe \"quoted\" \\ back\nslash\t😀 \u{01}\u{1F}"),
                "count": .int64(Int64.min), "ratio": .double(-0.0), "when": .timestamp(-1),
                "blob": .bytes([0, 1, 2, 254, 255]), "ref": .reference(Reference(recordName: "other", action: .deleteSelf)),
                "legacy": .double(3.0), "secret": .string(""), "secretCount": .int64(7), "secretRatio": .double(1e-5),
            ]
            var sparse = Record(id: RecordID(recordName: "s-\(z)-sparse", zone: zone), recordType: "Scalar")
            sparse.fields = ["legacy": .int64(-7), "ref": .reference(Reference(recordName: "a")), "blob": .bytes([]), "ratio": .double(Double.leastNonzeroMagnitude)]
            var validate = Record(id: RecordID(recordName: "s-\(z)-validate", zone: zone), recordType: "Scalar")
            validate.fields = ["ref": .reference(Reference(recordName: "_userRecord", action: .validate)), "ratio": .double(1.7976931348623157e308)]
            records += [full, sparse, validate, Record(id: RecordID(recordName: "o-\(z)", zone: zone), recordType: "Other", fields: ["name": .string("n")])]
        }
        let store = try scratch.store(schema: RowJSONTests.scalars, records: records)
        for query in [RecordQuery(), RecordQuery(recordTypes: ["Scalar"]), RecordQuery(recordTypes: ["Other", "Scalar"]),
                      RecordQuery(recordTypes: ["Scalar"], predicate: try RecordPredicate.parse("count == -9223372036854775808")),
                      RecordQuery(recordTypes: ["Scalar"], scope: .shared), RecordQuery(limit: 5)] {
            let rows = try #require(try rowPath(store, query))
            let general = try generalPath(store, query)
            #expect(general.count > 0 || query.predicate != nil)
            #expect(rows == general, "\(String(decoding: rows, as: UTF8.self))\n---\n\(String(decoding: general, as: UTF8.self))")
        }
        // Sorting goes through the general path.
        #expect(try rowPath(store, RecordQuery(recordTypes: ["Scalar"], sortField: "count")) == nil)
    }

    @Test("every sample app: the row path writes what the general path writes, and declines types with lists, assets or locations",
          arguments: SampleApp.allCases)
    func sampleApps(_ app: SampleApp) throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(app)
        var used = 0
        for type in store.schema.recordTypes {
            let query = RecordQuery(recordTypes: [type.name])
            let scalar = type.userFields.allSatisfy { !$0.type.isList && ![.asset, .location].contains($0.type.primitive) }
            guard let rows = try rowPath(store, query) else {
                #expect(!scalar, "\(type.name) has only scalar fields but took the general path")
                continue
            }
            used += 1
            #expect(scalar)
            #expect(rows == (try generalPath(store, query)), "\(app) \(type.name)")
        }
        #expect(used > 0)
    }
}
