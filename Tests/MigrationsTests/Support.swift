import Foundation
import Formats
import Migrations
import Records
import SampleApps
import Store

let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// A folder that goes away with the test.
final class Scratch {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-migrate-\(UUID().uuidString)")
    init() { try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) }
    deinit { try? FileManager.default.removeItem(at: url) }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    /// Writes migration files into a folder of their own and returns its path.
    func migrations(_ name: String, _ files: [String: String]) -> String {
        let directory = path(name)
        try? FileManager.default.removeItem(atPath: directory)
        try! FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (file, text) in files { try! text.write(toFile: directory + "/" + file, atomically: true, encoding: .utf8) }
        return directory
    }

    func store(_ name: String = "store.sqlite", schema: String, records: [Record]) throws -> RecordStore {
        let store = try RecordStore(path: path(name))
        try store.importSchema(SchemaParser.parse(schema))
        _ = try RecordImporter(store: store, options: ImportOptions()).run([ArrayRecordSource(records)])
        return store
    }

    func sampleStore(_ app: String) throws -> RecordStore {
        let store = try RecordStore(path: path("\(app).sqlite"))
        try store.importSchema(SchemaParser.parse(String(contentsOf: packageRoot.appendingPathComponent("samples/\(app)/schema.ckdb"), encoding: .utf8)))
        let reader = JSONRecordReader(input: try ByteInput(path: packageRoot.appendingPathComponent("samples/\(app)/records.jsonl").path),
                                      layout: .lines, codec: JSONRecordCodec(schema: store.schema))
        _ = try RecordImporter(store: store, options: ImportOptions()).run([reader])
        return store
    }
}

func record(_ name: String, _ type: String, _ fields: RecordFields) -> Record {
    Record(id: RecordID(recordName: name), recordType: type, fields: fields)
}

func everything(_ store: RecordStore) throws -> [Record] {
    try store.read { session in
        var all: [Record] = []
        try session.forEach(RecordQuery()) { all.append($0) }
        return all
    }
}

func stored(_ store: RecordStore, _ name: String, zone: ZoneID = .defaultZone) throws -> Record? {
    try store.read { try $0.record(RecordID(recordName: name, zone: zone)) }
}

/// The store's records as canonical JSON Lines, as `ckport export` writes them.
func exportText(_ store: RecordStore) throws -> String {
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

/// A store's bytes on disk: the file and its write-ahead log.
func fileBytes(_ path: String) -> Data {
    (FileManager.default.contents(atPath: path) ?? Data()) + (FileManager.default.contents(atPath: path + "-wal") ?? Data())
}
