// Imports the family-todo sample into a new store, asks it for the tasks still open, writes
// a backup bundle of them and checks the bundle — the steps a nightly backup job takes.
//
//   swift run --package-path Examples FamilyBackup [SAMPLES_DIR] [WORK_DIR]
import CKPort
import Foundation

let arguments = CommandLine.arguments
let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
let samples =
    arguments.count > 1 ? arguments[1] : here.appendingPathComponent("../../../samples/family-todo").standardized.path
let work =
    arguments.count > 2
    ? arguments[2] : FileManager.default.temporaryDirectory.appendingPathComponent("family-backup-\(getpid())").path

do {
    try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
    let store = try RecordStore(path: work + "/family.sqlite")

    // 1. A schema file and the records, in one transaction: all of them or none.
    let (schema, warnings) = try InputFiles.readSchema(samples + "/schema.ckdb")
    for warning in warnings { print("schema advice: \(warning)") }
    let imported = try Imports.run(
        ImportRequest(inputs: [.file(samples + "/records.jsonl")], schema: schema), into: store)
    print("imported \(imported.totals.inserted) records; the store is at \(imported.token?.description ?? "?")")

    // 2. A query in CloudKit's predicate language, answered from the store's indexes.
    var open = RecordQuery(recordTypes: ["Task"])
    open.predicate = try RecordPredicate.parse("status != 'done'")
    open.predicateText = "status != 'done'"
    let titles = try store.read { session -> [String] in
        var titles: [String] = []
        try session.forEach(open) { task in
            if case .string(let title)? = task.fields["title"] { titles.append(title) }
        }
        return titles
    }
    print("\(titles.count) open tasks, e.g. \(titles.prefix(3).joined(separator: "; "))")

    // 3. A bundle of those tasks, then a complete check of it, with progress.
    let bundle = work + "/open-tasks.ckbundle"
    let backup = try Backups.write(store, to: bundle, options: BackupOptions(query: open))
    let check = try Backups.verify(bundle) { step in
        if let fraction = step.fraction { print(String(format: "verifying… %.0f%%", fraction * 100)) }
    }
    guard check.records == titles.count, backup.manifest.recordCount == titles.count else {
        print("the bundle holds \(check.records) records, the query found \(titles.count)")
        exit(1)
    }
    print("wrote \(bundle): \(check.records) tasks, \(backup.bytesWritten) bytes, every checksum sound")
} catch let error as any CKPortError {
    // Every library error says what kind of failure it is.
    print("error (\(error.category)): \(error)")
    exit(error.category == .invalidInput ? 2 : 3)
}
