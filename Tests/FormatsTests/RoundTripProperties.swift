import Foundation
import PropertyBased
import Records
import SampleApps
import Testing

@testable import Formats
@testable import SQLiteStore
@testable import StoreCore

private enum RandomData {
    static let textPieces = [
        "a", "Zoë", " ", "", "\"", "'", ",", ";", "\n", "\r\n", "\t", "\\", "=SUM(A1)", "-3", "🥑", "日本",
        "x\u{0}y".replacingOccurrences(of: "\u{0}", with: ""), "null", "true", "0042", "1e5", "\u{2028}",
    ]
    static let primitives: [PrimitiveType] = [
        .string, .int64, .double, .timestamp, .bytes, .reference, .asset, .location,
    ]
}

/// Random schemas and records, built from one seed so that a failure can be run again
/// (PropertyBased reports the seed; `.fixedSeed(…)` on the test replays it).
extension SeededRandom {

    mutating func text() -> String {
        (0..<below(6)).map { _ in pick(RandomData.textPieces) }.joined()
    }

    mutating func name(_ prefix: String) -> String { prefix + String(below(1_000_000)) }

    mutating func schema() -> Schema {
        var types: [RecordTypeDefinition] = []
        for t in 0..<(1 + below(3)) {
            var fields: [FieldDefinition] = []
            for f in 0..<(1 + below(8)) {
                let primitive = pick(RandomData.primitives)
                let list = primitive != .asset && primitive != .location && roll(0.25)
                let encrypted = !list && primitive.canBeEncrypted && roll(0.1)
                var options: FieldOptions = []
                if !encrypted && roll(0.3) { options.insert(.queryable) }
                if !encrypted && !list && roll(0.2) && primitive != .bytes && primitive != .location {
                    options.insert(.sortable)
                }
                var field = FieldDefinition(
                    name: "f\(f)_\(primitive.rawValue.lowercased())",
                    type: FieldType(primitive, list: list, encrypted: encrypted), options: options)
                // Only options CloudKit allows on the type (the schema language says which).
                if (try? SchemaParser.parse(
                    SchemaPrinter.print(Schema(recordTypes: [RecordTypeDefinition(name: "X", fields: [field])]))))
                    == nil
                {
                    field.options = []
                }
                fields.append(field)
            }
            types.append(
                RecordTypeDefinition(
                    name: "T\(t)", fields: fields, grants: [Grant([.read, .create, .write], to: "_creator")]))
        }
        return Schema(recordTypes: types)
    }

    mutating func value(_ type: FieldType, names: [String]) -> FieldValue {
        if type.isList {
            return .list(type.primitive, (0..<below(4)).map { _ in value(type.element, names: names) })
        }
        switch type.primitive {
        case .string: return .string(text())
        case .int64: return .int64(pick([Int64.min, Int64.max, 0, -1, 1, Int64(bitPattern: next())]))
        case .double:
            return .double(
                pick([
                    -0.0, 0.1, 1e308, -1e-300, Double.leastNonzeroMagnitude, 3.0,
                    Double(Int64(bitPattern: next() >> 11)) / 1024,
                ]))
        case .timestamp: return .timestamp(Int64(below(7_000_000_000_000)) - 3_000_000_000_000)
        case .bytes: return .bytes((0..<below(20)).map { _ in UInt8(truncatingIfNeeded: next()) })
        case .reference: return .reference(Reference(recordName: pick(names), action: pick(ReferenceAction.allCases)))
        case .asset:
            return .asset(
                Asset(
                    fileChecksum: name("ck"), size: Int64(below(5_000_000)),
                    downloadURL: roll(0.3) ? "https://example.com/\(below(99))" : nil))
        case .location:
            return .location(
                Location(
                    latitude: Double(below(180_000)) / 1000 - 90, longitude: Double(below(360_000)) / 1000 - 180,
                    horizontalAccuracy: roll(0.5) ? Double(below(100)) : nil, altitude: roll(0.3) ? -12.5 : nil,
                    timestamp: roll(0.3) ? Int64(below(2_000_000_000_000)) : nil))
        case .number: return .int64(Int64(below(1000)))
        }
    }

    mutating func records(for schema: Schema, count: Int) -> [Record] {
        // Records in several zones and scopes: the default zone, a zone of the private database,
        // and a shared zone of another owner.
        let zones = [
            ZoneID.defaultZone,
            ZoneID(scope: .private, zoneName: "Notes-\(below(9))", ownerRecordName: ZoneID.defaultOwnerName),
            ZoneID(scope: .shared, zoneName: "family-\(below(9))", ownerRecordName: "_" + String(next(), radix: 16)),
        ]
        var names = Set<String>()
        while names.count < count { names.insert(name("r-")) }
        let ordered = names.sorted()
        return ordered.map { recordName in
            let type = pick(schema.recordTypes)
            var fields = RecordFields()
            for field in type.userFields where roll(0.8) { fields[field.name] = value(field.type, names: ordered) }
            let stamp = RecordStamp(
                timestamp: Int64(below(2_000_000_000_000)), userRecordName: roll(0.7) ? "_u\(below(9))" : nil,
                deviceID: roll(0.5) ? "iPhone-\(below(99))" : nil)
            return Record(
                id: RecordID(recordName: recordName, zone: zones[below(zones.count)]), recordType: type.name,
                fields: fields,
                changeTag: roll(0.8) ? String(next() % 0xFFFF_FFFF, radix: 16) : nil, created: stamp,
                modified: roll(0.5) ? stamp : nil)
        }
    }
}

private func canonicalLines(_ store: RecordStore) throws -> String {
    var writer = JSONWriter()
    try store.read { session in
        let codec = JSONRecordCodec(schema: session.schema)
        try session.forEach(RecordQuery()) { record in
            codec.encode(record, style: .canonical, to: &writer)
            writer.byte(0x0A)
        }
    }
    return writer.text
}

private func newStore(_ path: String, _ schema: Schema) throws -> RecordStore {
    let store = try RecordStore(path: path)
    try store.importSchema(schema)
    return store
}

@Suite("round trips of random data")
struct RoundTripProperties {
    @Test(
        "random records of random schemas come back unchanged through JSON Lines (both shapes), CSV, a property list and a bundle"
    )
    func everyFormat() async {
        await propertyCheck(count: 25, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            do {
                var dice = SeededRandom(state: seed)
                let schema = dice.schema()
                let records = dice.records(for: schema, count: 1 + dice.below(40))
                let scratch = Scratch()
                let source = try newStore(scratch.path("source.sqlite"), schema)
                _ = try RecordImporter(store: source, options: ImportOptions()).run([ArrayRecordSource(records)])
                let expected = try canonicalLines(source)
                #expect(expected.split(separator: "\n").count == records.count)

                // JSON Lines, canonical and plain.
                for style in [ValueStyle.canonical, .plain] {
                    let path = scratch.path("out-\(style).jsonl")
                    let writer = JSONRecordWriter(
                        output: try OutputFile(path: path), layout: .lines, style: style, schema: schema)
                    try source.read { session in try session.forEach(RecordQuery()) { try writer.write($0) } }
                    try writer.finish()
                    let copy = try newStore(scratch.path("json-\(style).sqlite"), schema)
                    let reader = JSONRecordReader(
                        input: try ByteInput(path: path), layout: .lines, codec: JSONRecordCodec(schema: schema))
                    _ = try RecordImporter(store: copy, options: ImportOptions()).run([reader])
                    #expect(try canonicalLines(copy) == expected, "seed \(seed), \(style) JSON")
                }

                // CSV, one file per type, with the system columns.
                let csvCopy = try newStore(scratch.path("csv.sqlite"), schema)
                for type in schema.recordTypes {
                    let path = scratch.path("\(type.name).csv")
                    let writer = try CSVRecordWriter(
                        output: try OutputFile(path: path), type: type, options: CSVWriteOptions(includeSystem: true))
                    try source.read { session in
                        try session.forEach(RecordQuery(recordTypes: [type.name])) { try writer.write($0) }
                    }
                    try writer.finish()
                    let reader = CSVRecordReader(
                        input: try ByteInput(path: path), schema: schema,
                        options: CSVReadOptions(defaultRecordType: type.name))
                    _ = try RecordImporter(store: csvCopy, options: ImportOptions()).run([reader])
                }
                #expect(try canonicalLines(csvCopy) == expected, "seed \(seed), CSV")

                // A property list (the plain style: each value's type comes from the schema).
                let plistPath = scratch.path("all.plist")
                let plistWriter = PlistRecordWriter(output: try OutputFile(path: plistPath))
                try source.read { session in try session.forEach(RecordQuery()) { try plistWriter.write($0) } }
                try plistWriter.finish()
                let plistCopy = try newStore(scratch.path("plist.sqlite"), schema)
                let plistReader = try PlistRecordReader(
                    input: try ByteInput(path: plistPath), codec: JSONRecordCodec(schema: schema, readStyle: .plain))
                _ = try RecordImporter(store: plistCopy, options: ImportOptions()).run([plistReader])
                #expect(try canonicalLines(plistCopy) == expected, "seed \(seed), property list")

                // A bundle.
                let bundle = scratch.path("all.ckbundle")
                _ = try BundleWriter().write(source, to: bundle)
                let reader = try BundleReader(path: bundle)
                let restored = try RecordStore(path: scratch.path("restored.sqlite"))
                _ = try RecordImporter(store: restored, options: ImportOptions()).run([reader], schema: reader.schema)
                #expect(try canonicalLines(restored) == expected, "seed \(seed), bundle")
                #expect(SchemaPrinter.print(restored.schema) == SchemaPrinter.print(source.schema))
            } catch {
                Issue.record("seed \(seed): \(error)")
            }
        }
    }

    @Test("a random chain of changes, deletions and bundles restores to the same store")
    func bundleChains() async {
        await propertyCheck(count: 15, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            do {
                var dice = SeededRandom(state: seed)
                let schema = dice.schema()
                let scratch = Scratch()
                let source = try newStore(scratch.path("source.sqlite"), schema)
                _ = try RecordImporter(store: source, options: ImportOptions()).run([
                    ArrayRecordSource(dice.records(for: schema, count: 1 + dice.below(30)))
                ])
                var chain = [scratch.path("b0.ckbundle")]
                var summary = try BundleWriter().write(source, to: chain[0])
                for step in 1...(1 + dice.below(3)) {
                    // Change some records, add some, delete some.
                    let existing = try source.read { session -> [Record] in
                        var all: [Record] = []
                        try session.forEach(RecordQuery()) { all.append($0) }
                        return all
                    }
                    let changed = existing.filter { _ in dice.roll(0.3) }.map { record -> Record in
                        var record = record
                        if let field = schema.recordType(named: record.recordType)?.userFields.first {
                            record.fields[field.name] = dice.value(field.type, names: existing.map(\.recordName))
                        }
                        return record
                    }
                    _ = try RecordImporter(store: source, options: ImportOptions(mode: .replace)).run([
                        ArrayRecordSource(changed + dice.records(for: schema, count: dice.below(5)))
                    ])
                    let doomed = existing.filter { _ in dice.roll(0.2) }.map(\.id)
                    if !doomed.isEmpty {
                        do { _ = try source.write { try $0.delete(doomed) } } catch StoreError.deleteRefused {
                            // A VALIDATE reference points at one of them: CloudKit refuses too.
                        }
                    }
                    let path = scratch.path("b\(step).ckbundle")
                    summary = try BundleWriter().write(
                        source, since: try ChangeToken(parsing: summary.manifest.token), to: path)
                    chain.append(path)
                }
                let restored = try RecordStore(path: scratch.path("restored.sqlite"))
                let readers = try chain.map { try BundleReader(path: $0) }
                _ = try RecordImporter(store: restored, options: ImportOptions()).run(
                    readers, schema: readers.last!.schema)
                #expect(try canonicalLines(restored) == canonicalLines(source), "seed \(seed)")
            } catch {
                Issue.record("seed \(seed): \(error)")
            }
        }
    }
}

@Suite("bundles of stores with any zone and owner names")
struct ZoneNameProperties {
    static let pieces = [
        ".", "..", "/", "../", "@", "%", "%2E", "a", "Zoë", "日本", " ", "\\", "_", "-", "~", "🥑", "zone",
    ]

    @Test("every zone and owner name the store accepts backs up, verifies and restores")
    func anyZoneName() async {
        await propertyCheck(count: 20, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            do {
                var dice = SeededRandom(state: seed)
                let schema = try SchemaParser.parse("DEFINE SCHEMA RECORD TYPE Item (title STRING);")
                var records: [Record] = []
                for index in 0..<(2 + dice.below(10)) {
                    let zoneName = (0..<(1 + dice.below(3))).map { _ in dice.pick(ZoneNameProperties.pieces) }.joined()
                    let owner =
                        dice.roll(0.5)
                        ? ZoneID.defaultOwnerName
                        : (0..<(1 + dice.below(3))).map { _ in dice.pick(ZoneNameProperties.pieces) }.joined()
                    let zone = ZoneID(
                        scope: dice.pick([.private, .shared, .public]), zoneName: zoneName, ownerRecordName: owner)
                    var record = Record(id: RecordID(recordName: "item-\(index)", zone: zone), recordType: "Item")
                    record["title"] = .string("item \(index) in \(zoneName)")
                    records.append(record)
                }
                let scratch = Scratch()
                let source = try newStore(scratch.path("source.sqlite"), schema)
                _ = try RecordImporter(store: source, options: ImportOptions()).run([ArrayRecordSource(records)])
                let expected = try canonicalLines(source)
                #expect(expected.split(separator: "\n").count == records.count)
                let bundle = scratch.path("all.ckbundle")
                let summary = try BundleWriter().write(source, to: bundle)
                for member in summary.manifest.members {
                    let segments = member.path.split(separator: "/", omittingEmptySubsequences: false)
                    #expect(
                        !segments.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." || $0.hasPrefix(".") }),
                        "seed \(seed): \(member.path)")
                }
                let reader = try BundleReader(path: bundle)
                let restored = try RecordStore(path: scratch.path("restored.sqlite"))
                _ = try RecordImporter(store: restored, options: ImportOptions()).run([reader], schema: reader.schema)
                #expect(try canonicalLines(restored) == expected, "seed \(seed)")
            } catch {
                Issue.record("seed \(seed): \(error)")
            }
        }
    }
}
