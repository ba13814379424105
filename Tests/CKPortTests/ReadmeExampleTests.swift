import CKPort
import Foundation
import TestSupport
import Testing

@Suite("README")
struct ReadmeExampleTests {
    @Test("the library example in README is this code, and it runs")
    func libraryExample() throws {
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        // The lines below appear in README as they are here (paths aside).
        for line in [
            #"let (schema, _) = try InputFiles.readSchema("samples/family-todo/schema.ckdb")"#,
            #"let summary = try Imports.run(ImportRequest(inputs: [.file("samples/family-todo/records.jsonl")], schema: schema),"#,
            #"var open = RecordQuery(recordTypes: ["Task"])"#,
            #"open.predicate = try RecordPredicate.parse("status != 'done'")"#,
            #"_ = try Backups.write(store, to: "open-tasks.ckbundle", options: BackupOptions(query: open))"#,
            #"let check = try Backups.verify("open-tasks.ckbundle")      // throws if anything is off"#,
        ] {
            #expect(readme.contains(line), "README no longer holds: \(line)")
        }
        let scratch = Scratch()
        let store = try RecordStore(path: scratch.path("family.sqlite"))
        let (schema, _) = try InputFiles.readSchema(sample("family-todo", "schema.ckdb"))
        var fractions: [Double] = []
        let summary = try Imports.run(
            ImportRequest(inputs: [.file(sample("family-todo", "records.jsonl"))], schema: schema),
            into: store
        ) { step in fractions.append(step.fraction ?? 0) }
        #expect(summary.totals.inserted == 80 && summary.token != nil)
        #expect(fractions.allSatisfy { $0 <= 1 })

        var open = RecordQuery(recordTypes: ["Task"])
        open.predicate = try RecordPredicate.parse("status != 'done'")
        _ = try Backups.write(store, to: scratch.path("open-tasks.ckbundle"), options: BackupOptions(query: open))
        let check = try Backups.verify(scratch.path("open-tasks.ckbundle"))
        let openCount = try store.read { try $0.count(open) }
        #expect(check.records == openCount && openCount > 0 && check.recordsByType == ["Task": openCount])
    }
}
