import Formats
import Foundation
import Records
@_exported import TestSupport

@testable import SQLiteStore
@testable import StoreCore

func importText(
    _ text: String, name: String = "input.jsonl", into store: RecordStore, options: ImportOptions = ImportOptions(),
    rejects: RejectSink? = nil
) throws -> ImportSummary {
    let codec = JSONRecordCodec(schema: store.schema)
    let reader = JSONRecordReader(input: ByteInput(name: name, bytes: Array(text.utf8)), layout: .lines, codec: codec)
    let importer = RecordImporter(store: store, options: options)
    importer.rejects = rejects
    return try importer.run([reader])
}

func importFile(_ path: String, into store: RecordStore, options: ImportOptions = ImportOptions()) throws
    -> ImportSummary
{
    let reader = JSONRecordReader(
        input: try ByteInput(path: path), layout: JSONRecordReader.layout(forPath: path),
        codec: JSONRecordCodec(schema: store.schema))
    return try RecordImporter(store: store, options: options).run([reader])
}

func allRecords(_ store: RecordStore, _ query: RecordQuery = RecordQuery()) throws -> [Record] {
    try store.read { session in
        var records: [Record] = []
        try session.forEach(query) { records.append($0) }
        return records
    }
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
