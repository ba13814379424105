import Foundation
import Formats
import Records
@testable import Store

let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// A folder of its own for one test, removed when the value goes away.
final class Scratch {
    let url: URL

    init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-tests-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    func write(_ name: String, _ text: String) -> String {
        let path = self.path(name)
        try! text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func store(_ schemaText: String, name: String = "store.sqlite") throws -> RecordStore {
        let store = try RecordStore(path: path(name))
        try store.importSchema(try SchemaParser.parse(schemaText))
        return store
    }

    func sampleStore(_ app: String) throws -> RecordStore {
        let schema = try String(contentsOf: packageRoot.appendingPathComponent("samples/\(app)/schema.ckdb"), encoding: .utf8)
        let store = try self.store(schema, name: "\(app).sqlite")
        _ = try importFile(packageRoot.appendingPathComponent("samples/\(app)/records.jsonl").path, into: store)
        return store
    }
}

func importText(_ text: String, name: String = "input.jsonl", into store: RecordStore, options: ImportOptions = ImportOptions(), rejects: RejectSink? = nil) throws -> ImportSummary {
    let codec = JSONRecordCodec(schema: store.schema)
    let reader = JSONRecordReader(input: ByteInput(name: name, bytes: Array(text.utf8)), layout: .lines, codec: codec)
    let importer = RecordImporter(store: store, options: options)
    importer.rejects = rejects
    return try importer.run([reader])
}

func importFile(_ path: String, into store: RecordStore, options: ImportOptions = ImportOptions()) throws -> ImportSummary {
    let reader = JSONRecordReader(input: try ByteInput(path: path), layout: JSONRecordReader.layout(forPath: path), codec: JSONRecordCodec(schema: store.schema))
    return try RecordImporter(store: store, options: options).run([reader])
}

func allRecords(_ store: RecordStore, _ query: RecordQuery = RecordQuery()) throws -> [Record] {
    try store.read { session in
        var records: [Record] = []
        try session.forEach(query) { records.append($0) }
        return records
    }
}

/// A store's bytes on disk: the file and its write-ahead log.
func fileBytes(_ path: String) -> Data {
    ((try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data()) + ((try? Data(contentsOf: URL(fileURLWithPath: path + "-wal"))) ?? Data())
}

final class CollectingRejects: RejectSink {
    var rejected: [(InputIssue, [UInt8]?)] = []
    func reject(_ issue: InputIssue, raw: [UInt8]?) throws { rejected.append((issue, raw)) }
}

let taskSchema = """
    DEFINE SCHEMA
        RECORD TYPE Task (title STRING QUERYABLE, status STRING QUERYABLE, priority INT64, due TIMESTAMP SORTABLE, tags LIST<STRING> QUERYABLE, notes STRING);
    """

func task(_ name: String, _ fields: String, modified: Int64? = nil) -> String {
    let stamp = modified.map { ",\"modified\":{\"timestamp\":\($0)}" } ?? ""
    return "{\"recordName\":\"\(name)\",\"recordType\":\"Task\"\(stamp),\"fields\":{\(fields)}}"
}
