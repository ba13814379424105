import Formats
import Foundation
import Records
import SQLiteStore
import SampleApps
import StoreCore

/// The package's root folder, for samples, migrations and fixtures.
public let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// A sample app's file: `sample("notes", "schema.ckdb")`.
/// The rows of a corpus's SOURCES.tsv under Tests/Fixtures/corpora (`#` lines and the header
/// row left out), each row's first column made the file's full path.
public func corpusRows(_ folder: String) -> [[String]] {
    let directory = packageRoot.appendingPathComponent("Tests/Fixtures/corpora").appendingPathComponent(folder)
    let table = (try? String(contentsOf: directory.appendingPathComponent("SOURCES.tsv"), encoding: .utf8)) ?? ""
    let lines = table.split(separator: "\n").filter { !$0.hasPrefix("#") }.dropFirst()
    return lines.map { line in
        var row = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        row[0] = directory.appendingPathComponent(row[0]).path
        return row
    }
}

public func sample(_ app: String, _ file: String) -> String {
    packageRoot.appendingPathComponent("samples/\(app)/\(file)").path
}

/// A folder of its own for one test, removed when the value goes away.
public final class Scratch: @unchecked Sendable {
    public let url: URL

    public init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-tests-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    public func path(_ name: String) -> String { url.appendingPathComponent(name).path }
    public func data(_ name: String) -> Data { (try? Data(contentsOf: url.appendingPathComponent(name))) ?? Data() }
    public func text(_ name: String) -> String { String(decoding: data(name), as: UTF8.self) }

    /// Writes a text file and returns its path.
    @discardableResult
    public func write(_ name: String, _ text: String) -> String {
        let path = self.path(name)
        try! text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Writes migration files into a folder of their own and returns its path.
    public func migrations(_ name: String, _ files: [String: String]) -> String {
        let directory = path(name)
        try? FileManager.default.removeItem(atPath: directory)
        try! FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (file, text) in files { try! text.write(toFile: directory + "/" + file, atomically: true, encoding: .utf8) }
        return directory
    }

    /// A new store with the schema given.
    public func store(_ schemaText: String, name: String = "store.sqlite") throws -> RecordStore {
        let store = try RecordStore(path: path(name))
        try store.importSchema(try SchemaParser.parse(schemaText))
        return store
    }

    /// A new store with the schema and records given.
    public func store(_ name: String = "store.sqlite", schema: String, records: [Record]) throws -> RecordStore {
        let store = try self.store(schema, name: name)
        _ = try RecordImporter(store: store, options: ImportOptions()).run([ArrayRecordSource(records)])
        return store
    }

    /// A store holding a sample app's committed schema and records (`samples/APP`).
    public func sampleStore(_ app: String) throws -> RecordStore {
        let schema = try String(
            contentsOf: packageRoot.appendingPathComponent("samples/\(app)/schema.ckdb"), encoding: .utf8)
        let store = try self.store(schema, name: "\(app).sqlite")
        let reader = JSONRecordReader(
            input: try ByteInput(path: sample(app, "records.jsonl")), layout: .lines,
            codec: JSONRecordCodec(schema: store.schema))
        _ = try RecordImporter(store: store, options: ImportOptions()).run([reader])
        return store
    }

    public func sampleStore(_ app: SampleApp) throws -> RecordStore {
        try sampleStore(app.rawValue)
    }
}

/// A store's bytes on disk: the file and its write-ahead log.
public func fileBytes(_ path: String) -> Data {
    (FileManager.default.contents(atPath: path) ?? Data())
        + (FileManager.default.contents(atPath: path + "-wal") ?? Data())
}
