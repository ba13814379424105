import Foundation
import GRDBSQLite
import Records
import SampleApps
import Testing

@testable import Formats
@testable import SQLiteStore
@testable import StoreCore

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

    /// What the row path writes for `query`, on two threads (``StoreSession/writeCanonicalJSONLines(_:progress:write:)``,
    /// what an export runs) and on one (``StoreSession/forEachCanonicalJSON(_:into:starting:_:)``,
    /// what a backup runs), which must agree.
    private func rowPath(_ store: RecordStore, _ query: RecordQuery) throws -> [UInt8]? {
        try store.read { session -> [UInt8]? in
            guard session.canWriteJSONFromRows(query) else { return nil }
            var lines: [UInt8] = []
            let count = try session.writeCanonicalJSONLines(query) { lines += $0 }
            #expect(count == lines.count { $0 == 0x0A })
            var out = JSONWriter()
            try session.forEachCanonicalJSON(query, into: &out) { $0.byte(0x0A) }
            let same = lines == out.bytes
            #expect(
                same, "two threads and one wrote different bytes: \(RowJSONTests.firstDifference(lines, out.bytes))")
            return lines
        }
    }

    @Test("on two threads: a table of many numeric fields makes pieces no larger than long texts do")
    func wideTables() throws {
        let scratch = Scratch()
        let fields = (0..<400).map { "measurement_number_\($0) INT64" }.joined(separator: ", ")
        var records: [Record] = []
        for index in 0..<3000 {
            var record = Record(id: RecordID(recordName: "w-\(index)"), recordType: "Wide")
            for field in 0..<400 { record.fields["measurement_number_\(field)"] = .int64(Int64(index * field)) }
            records.append(record)
        }
        let store = try scratch.store(schema: "DEFINE SCHEMA RECORD TYPE Wide ( \(fields) );", records: records)
        try store.read { session in
            var sizes: [Int] = []
            let count = try session.writeCanonicalJSONLines(RecordQuery()) { sizes.append($0.count) }
            #expect(count == 3000)
            #expect(sizes.reduce(0, +) > 30_000_000)
            #expect(sizes.max()! < 1 << 20, "pieces of \(sizes.max()!) bytes")
        }
    }

    @Test("on two threads: both failing at once end the export with an error, and an interrupted reading with its own")
    func bothFail() throws {
        let scratch = Scratch()
        let records = (0..<6000).map {
            Record(
                id: RecordID(recordName: String(format: "o-%05d", $0)), recordType: "Other",
                fields: ["name": .string("n")])
        }
        let store = try scratch.store(schema: RowJSONTests.scalars, records: records)
        // The writing thread fails its first piece and interrupts the reading meanwhile. Which
        // of the two errors comes back depends on how far the reading got (it may be waiting
        // for the piece already); the writing thread's, from earlier rows, when both happen.
        struct Refused: Error {}
        #expect(throws: (any Error).self) {
            try store.read { session in
                let connection = session.db.sqliteConnection
                _ = try session.writeCanonicalJSONLines(RecordQuery()) { _ in
                    sqlite3_interrupt(connection)
                    usleep(200_000)
                    throw Refused()
                }
            }
        }
        // Interrupted alone, the reading's error is thrown.
        let interrupted = #expect(throws: StoreError.self) {
            try store.read { session in
                let connection = session.db.sqliteConnection
                _ = try session.writeCanonicalJSONLines(RecordQuery()) { _ in sqlite3_interrupt(connection) }
            }
        }
        #expect("\(interrupted.map { "\($0)" } ?? "")".hasSuffix("interrupted"))
    }

    /// Where two outputs part, in words (comparing large arrays with `==` inside `#expect` would
    /// have the test library diff them byte by byte).
    static func firstDifference(_ a: [UInt8], _ b: [UInt8]) -> String {
        let index = zip(a, b).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(a.count, b.count)
        let line = a[..<min(index, a.count)].count { $0 == 0x0A } + 1
        return "\(a.count) and \(b.count) bytes, first different at byte \(index), line \(line)"
    }

    @Test(
        "on two threads: batches of rows across zones and types, long texts, progress, and an error of the writing thread"
    )
    func batches() throws {
        let scratch = Scratch()
        let zones =
            (0..<7).map { ZoneID(scope: .private, zoneName: "zone-\($0)", ownerRecordName: "_owner") } + [.defaultZone]
        var records: [Record] = []
        for index in 0..<9000 {
            let zone = zones[index % 97 % zones.count]
            if index % 5 == 0 {
                records.append(
                    Record(
                        id: RecordID(recordName: "o-\(index)", zone: zone), recordType: "Other",
                        fields: ["name": .string("n\(index)")]))
                continue
            }
            var record = Record(id: RecordID(recordName: "s-\(index)", zone: zone), recordType: "Scalar")
            // Every 500th record's text is long enough to fill a batch by bytes before by rows.
            let text = index % 500 == 1 ? String(repeating: "ä\(index) ", count: 40_000) : "text \(index) \"q\""
            record.fields = [
                "text": .string(text), "count": .int64(Int64(index) - 3000), "ratio": .double(Double(index) / 7),
                "legacy": index % 2 == 0 ? .int64(Int64(index)) : .double(Double(index) + 0.5),
                "blob": .bytes(Array((0..<UInt8(index % 50)))),
                "ref": .reference(Reference(recordName: "o-\(index - 1)")),
            ]
            records.append(record)
        }
        let store = try scratch.store(schema: RowJSONTests.scalars, records: records)
        for query in [RecordQuery(), RecordQuery(recordTypes: ["Scalar"]), RecordQuery(zoneName: "zone-3")] {
            let rows = try #require(try rowPath(store, query))
            let general = try generalPath(store, query)
            #expect(general.count > 100_000)
            let same = rows == general
            #expect(same, "\(RowJSONTests.firstDifference(rows, general))")
        }
        // Pieces are whole lines, in order; progress is heard on the way.
        let everything = try generalPath(store, RecordQuery())
        try store.read { session in
            var pieces: [[UInt8]] = []
            var heard: [Int] = []
            let count = try session.writeCanonicalJSONLines(RecordQuery(), progress: { heard.append($0) }) {
                pieces.append($0)
            }
            #expect(count == 9000)
            #expect(pieces.count >= 4)
            #expect(pieces.allSatisfy { $0.last == 0x0A })
            #expect(heard == [8192])
            let joined = Array(pieces.joined())
            let same = joined == everything
            #expect(same, "\(RowJSONTests.firstDifference(joined, everything))")
        }
        // The writing thread's error ends the export, with that error, however far the reading got.
        struct Refused: Error {}
        for failing in [1, 2, 3] {
            var calls = 0
            #expect(throws: Refused.self) {
                try store.read { session in
                    _ = try session.writeCanonicalJSONLines(RecordQuery()) { _ in
                        calls += 1
                        if calls == failing { throw Refused() }
                    }
                }
            }
            #expect(calls == failing)
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
        let zones = [
            ZoneID.defaultZone, ZoneID(scope: .shared, zoneName: "Kitchen-Zone", ownerRecordName: "_0123abcd"),
            ZoneID(scope: .public, zoneName: "_defaultZone", ownerRecordName: "_x\"y"),
        ]
        var records: [Record] = []
        for (z, zone) in zones.enumerated() {
            var full = Record(
                id: RecordID(recordName: "s-\(z)-full", zone: zone), recordType: "Scalar", changeTag: "tag\\\"\(z)",
                created: RecordStamp(timestamp: -236_131_200_000, userRecordName: "_0123abcd", deviceID: "iPhone 1"),
                modified: RecordStamp(timestamp: 1_768_208_400_123))
            full.fields = [
                "text": .string("Größe \"quoted\" \\ back\nslash\t😀 \u{01}\u{1F}"),
                "count": .int64(Int64.min), "ratio": .double(-0.0), "when": .timestamp(-1),
                "blob": .bytes([0, 1, 2, 254, 255]),
                "ref": .reference(Reference(recordName: "other", action: .deleteSelf)),
                "legacy": .double(3.0), "secret": .string(""), "secretCount": .int64(7), "secretRatio": .double(1e-5),
            ]
            var sparse = Record(id: RecordID(recordName: "s-\(z)-sparse", zone: zone), recordType: "Scalar")
            sparse.fields = [
                "legacy": .int64(-7), "ref": .reference(Reference(recordName: "a")), "blob": .bytes([]),
                "ratio": .double(Double.leastNonzeroMagnitude),
            ]
            var validate = Record(id: RecordID(recordName: "s-\(z)-validate", zone: zone), recordType: "Scalar")
            validate.fields = [
                "ref": .reference(Reference(recordName: "_userRecord", action: .validate)),
                "ratio": .double(1.7976931348623157e308),
            ]
            records += [
                full, sparse, validate,
                Record(
                    id: RecordID(recordName: "o-\(z)", zone: zone), recordType: "Other", fields: ["name": .string("n")]),
            ]
        }
        let store = try scratch.store(schema: RowJSONTests.scalars, records: records)
        for query in [
            RecordQuery(), RecordQuery(recordTypes: ["Scalar"]), RecordQuery(recordTypes: ["Other", "Scalar"]),
            RecordQuery(recordTypes: ["Scalar"], predicate: try RecordPredicate.parse("count == -9223372036854775808")),
            RecordQuery(recordTypes: ["Scalar"], scope: .shared), RecordQuery(limit: 5),
        ] {
            let rows = try #require(try rowPath(store, query))
            let general = try generalPath(store, query)
            #expect(general.count > 0 || query.predicate != nil)
            #expect(
                rows == general,
                "\(String(decoding: rows, as: UTF8.self))\n---\n\(String(decoding: general, as: UTF8.self))")
        }
        // Sorting goes through the general path.
        #expect(try rowPath(store, RecordQuery(recordTypes: ["Scalar"], sortField: "count")) == nil)
    }

    static let structured = """
        DEFINE SCHEMA
            RECORD TYPE Rich (
                strings LIST<STRING>, counts LIST<INT64>, ratios LIST<DOUBLE>, times LIST<TIMESTAMP>, blobs LIST<BYTES>,
                refs LIST<REFERENCE>, numbers LIST<NUMBER>, places LIST<LOCATION>, files LIST<ASSET>,
                secrets LIST<ENCRYPTED STRING>, file ASSET, place LOCATION, hidden ENCRYPTED LOCATION, title STRING
            );
        """

    @Test("lists of every type, assets and locations, encrypted ones, empty lists: the general path's bytes")
    func structured() throws {
        let scratch = Scratch()
        let asset = Asset(
            fileChecksum: "AbC+/=", size: 2_500_000, referenceChecksum: "ref", wrappingKey: "key\"1", receipt: "r",
            downloadURL: "https://example.com/a?b=c&d=${f}", sha256: String(repeating: "ab", count: 32))
        let place = Location(
            latitude: 59.3293, longitude: -0.0, horizontalAccuracy: 5, verticalAccuracy: nil, altitude: -12.5,
            speed: 0, course: 359.999, timestamp: 1_768_208_400_123)
        var full = Record(
            id: RecordID(recordName: "full", zone: ZoneID(scope: .shared, zoneName: "Z", ownerRecordName: "_o")),
            recordType: "Rich")
        full.fields = [
            "strings": .list(.string, [.string("a \"b\"\n😀"), .string("")]),
            "counts": .list(.int64, [.int64(Int64.min), .int64(0), .int64(Int64.max)]),
            "ratios": .list(.double, [.double(-0.0), .double(1e-300), .double(0.1)]),
            "times": .list(.timestamp, [.timestamp(-1), .timestamp(1_768_208_400_123)]),
            "blobs": .list(.bytes, [.bytes([]), .bytes([0, 255, 7])]),
            "refs": .list(
                .reference,
                [.reference(Reference(recordName: "x", action: .deleteSelf)), .reference(Reference(recordName: "y"))]),
            "numbers": .list(.double, [.double(3.0), .double(-2.5)]),
            "places": .list(.location, [.location(place), .location(Location(latitude: 0, longitude: 0))]),
            "files": .list(.asset, [.asset(asset), .asset(Asset(fileChecksum: "x", size: 0))]),
            "secrets": .list(.string, [.string("s")]),
            "file": .asset(asset), "place": .location(place), "hidden": .location(place), "title": .string("t"),
        ]
        var empty = Record(id: RecordID(recordName: "empty"), recordType: "Rich")
        empty.fields = ["strings": .list(.string, []), "refs": .list(.reference, []), "title": .string("")]
        let bare = Record(id: RecordID(recordName: "bare"), recordType: "Rich")
        let store = try scratch.store(schema: RowJSONTests.structured, records: [full, empty, bare])
        for query in [
            RecordQuery(), RecordQuery(scope: .shared),
            RecordQuery(predicate: try RecordPredicate.parse("title == ''")),
        ] {
            let rows = try #require(try rowPath(store, query))
            let general = try generalPath(store, query)
            #expect(general.count > 0)
            #expect(
                rows == general,
                "\(String(decoding: rows, as: UTF8.self))\n---\n\(String(decoding: general, as: UTF8.self))")
        }
        // A list's JSON damaged in the store: both paths refuse it with the same words.
        try store.write { session in
            try session.db.execute(sql: "UPDATE \"Rich\" SET \"counts\" = '[1,' WHERE ___recordID = 'full'")
        }
        func failure(_ body: () throws -> Void) -> String? {
            do { try body() } catch { return "\(error)" }
            return nil
        }
        let rowsError = failure { _ = try rowPath(store, RecordQuery()) }
        #expect(rowsError?.contains("Rich.counts") == true)
        #expect(rowsError == failure { _ = try generalPath(store, RecordQuery()) })
    }

    @Test(
        "every sample app: the row path writes what the general path writes, for every record type",
        arguments: SampleApp.allCases)
    func sampleApps(_ app: SampleApp) throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(app)
        var structured = 0
        for type in store.schema.recordTypes {
            let query = RecordQuery(recordTypes: [type.name])
            let rows = try #require(try rowPath(store, query), "\(type.name) took the general path")
            #expect(rows == (try generalPath(store, query)), "\(app) \(type.name)")
            let count = try store.read { try $0.count(query) }
            if count > 0
                && type.userFields.contains(where: {
                    $0.type.isList || [.asset, .location].contains($0.type.primitive)
                })
            {
                structured += 1
            }
        }
        #expect(try rowPath(store, RecordQuery()) == (try generalPath(store, RecordQuery())))
        // The apps with lists, assets or locations have records of such types.
        #expect((structured > 0) == [.notes, .screenTimeRewards].contains(app))
    }
}

/// CSV's row path (cells straight from SQLite's rows) against its general path (each row
/// decoded into a record, the record's values turned into cells): the same bytes.
@Suite("CSV from rows")
struct RowCSVTests {
    /// The file a CSV writer leaves for `type`, through the rows or through records.
    private func export(_ store: RecordStore, type: String, options: CSVWriteOptions, rows: Bool, in scratch: Scratch)
        throws -> [UInt8]
    {
        let path = scratch.path("\(type)-\(rows ? "rows" : "records")-\(UUID().uuidString).csv")
        let writer = try CSVRecordWriter(
            output: try OutputFile(path: path), type: try #require(store.schema.recordType(named: type)),
            options: options)
        let query = RecordQuery(recordTypes: [type])
        let written = try store.read { session -> Int in
            if rows {
                #expect(session.canReadRows(query))
                return try writer.writeRows(of: session, query)
            }
            var count = 0
            try session.forEach(query) {
                try writer.write($0)
                count += 1
            }
            return count
        }
        try writer.finish()
        #expect(writer.recordsWritten == written)
        return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    static let dialects: [CSVWriteOptions] = [
        CSVWriteOptions(),
        CSVWriteOptions(
            dialect: CSVDialect(delimiter: 0x09, crlf: false, byteOrderMark: true, spreadsheetSafe: true),
            includeSystem: true),
        CSVWriteOptions(
            dialect: CSVDialect(delimiter: UInt8(ascii: ";"), spreadsheetSafe: true),
            values: CSVValues(timeZone: TimeZone(identifier: "America/St_Johns")), includeSystem: true),
    ]

    @Test(
        "every scalar type, quoting, formulas, empty and missing values, zones of every scope, system columns, a zone's offsets: the general path's bytes",
        arguments: 0..<dialects.count)
    func scalars(dialect: Int) throws {
        let scratch = Scratch()
        let zones = [
            ZoneID.defaultZone, ZoneID(scope: .shared, zoneName: "Kitchen;Zone", ownerRecordName: "_0123abcd"),
            ZoneID(scope: .public, zoneName: "_defaultZone", ownerRecordName: "_x\"y"),
        ]
        var records: [Record] = []
        let texts = [
            "Größe \"quoted\", back\nslash\t😀", " leading", "trailing ", "=SUM(A1)", "+1", "", "a;b", "-", "@x", "\r",
        ]
        for (z, zone) in zones.enumerated() {
            for (t, text) in texts.enumerated() {
                var full = Record(
                    id: RecordID(recordName: "s-\(z)-\(t)", zone: zone), recordType: "Scalar",
                    changeTag: t % 2 == 0 ? "tag,\(z)" : nil,
                    created: t % 3 == 0
                        ? nil
                        : RecordStamp(
                            timestamp: -236_131_200_000 + Int64(t), userRecordName: "_0123abcd",
                            deviceID: t % 2 == 0 ? "iPhone \"1\"" : nil),
                    modified: RecordStamp(timestamp: 1_768_208_400_123 + Int64(t) * 86_400_000 * 40))
                full.fields = [
                    "text": .string(text), "count": .int64(t == 0 ? Int64.min : Int64(t) - 5),
                    "ratio": .double(t == 1 ? -0.0 : Double(t) / 3),
                    "when": .timestamp(t == 2 ? -62_135_596_800_001 : Int64(t) * 15_778_800_000),
                    "blob": .bytes(Array(UInt8(0)..<UInt8(t))),
                    "ref": .reference(Reference(recordName: "other-\(t)", action: t % 2 == 0 ? .deleteSelf : .none)),
                    "legacy": t % 2 == 0 ? .double(3.5) : .int64(-7), "secret": .string(text),
                ]
                if t == 3 { full.fields = ["text": .string("only text")] }
                records.append(full)
            }
            records.append(
                Record(
                    id: RecordID(recordName: "o-\(z)", zone: zone), recordType: "Other", fields: ["name": .string("n")])
            )
        }
        let store = try scratch.store(schema: RowJSONTests.scalars, records: records)
        let options = RowCSVTests.dialects[dialect]
        for type in ["Scalar", "Other"] {
            let rows = try export(store, type: type, options: options, rows: true, in: scratch)
            let general = try export(store, type: type, options: options, rows: false, in: scratch)
            #expect(rows.count > 100 || type == "Other")
            #expect(
                rows == general,
                "\(String(decoding: rows, as: UTF8.self))\n---\n\(String(decoding: general, as: UTF8.self))")
        }
        // Chosen fields, in another order and with a reference's action.
        var chosen = options
        chosen.fields = ["when", "ref", "text"]
        #expect(
            try export(store, type: "Scalar", options: chosen, rows: true, in: scratch)
                == (try export(store, type: "Scalar", options: chosen, rows: false, in: scratch)))
    }

    @Test(
        "every sample app's types of scalar fields: the row path writes what the general path writes",
        arguments: SampleApp.allCases)
    func sampleApps(_ app: SampleApp) throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(app)
        var used = 0
        for type in store.schema.recordTypes {
            guard try store.read({ $0.canReadRows(RecordQuery(recordTypes: [type.name])) }) else { continue }
            used += 1
            for options in RowCSVTests.dialects {
                #expect(
                    try export(store, type: type.name, options: options, rows: true, in: scratch)
                        == (try export(store, type: type.name, options: options, rows: false, in: scratch)),
                    "\(app) \(type.name)")
            }
        }
        #expect(used > 0)
    }
}
