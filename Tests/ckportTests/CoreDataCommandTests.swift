import Foundation
import Testing

@Suite("ckport schema from-coredata, lint-coredata and diff with models")
struct CoreDataCommandTests {
    let model = packageRoot.appendingPathComponent("samples/coredata/FamilyTodo.xcdatamodeld").path

    @Test("from-coredata writes a schema ckport reads back; the notes come first as comments")
    func fromCoreData() throws {
        let folder = Scratch()
        let run = try ckport(["schema", "from-coredata", model, "-o", "derived.ckdb"], in: folder.url)
        #expect(run.status == 0, "\(run.stderr)")
        let text = try String(contentsOfFile: folder.path("derived.ckdb"), encoding: .utf8)
        #expect(text.hasPrefix("// ckport: Decimal attributes") && text.contains("RECORD TYPE CD_Task ("), "\(text.prefix(300))")
        let check = try ckport(["schema", "check", "derived.ckdb"], in: folder.url)
        // cktool's own layout for Core Data types indexes BYTES fields, which ckport's check warns about.
        #expect(check.status == 0 && (check.stdout + check.stderr).contains("ok — 5 record types"), "\(check.stdout)\(check.stderr)")
        // The schema goes into a store like any other.
        #expect(try ckport(["schema", "import", "derived.ckdb", "--store", "cd.sqlite", "-q"], in: folder.url).status == 0)
        let first = try ckport(["schema", "from-coredata", model, "--version", "FamilyTodo 1"], in: folder.url)
        #expect(first.status == 0 && !first.stdout.contains("CD_Member") && first.stdout.contains("CD_household"))
        let unknown = try ckport(["schema", "from-coredata", model, "--version", "FamilyTodo 7"], in: folder.url)
        #expect(unknown.status == 2 && unknown.stderr.contains("its versions: FamilyTodo 1, FamilyTodo 2"), "\(unknown.stderr)")
    }

    @Test("lint-coredata: the sample passes; a model breaking the rules lists each problem at its line and exits 2")
    func lint() throws {
        let folder = Scratch()
        let clean = try ckport(["schema", "lint-coredata", model], in: folder.url)
        #expect(clean.status == 0 && clean.stdout.contains("4 entities, nothing CloudKit refuses"), "\(clean.stdout)\(clean.stderr)")
        try FileManager.default.createDirectory(atPath: folder.path("Bad.xcdatamodel"), withIntermediateDirectories: true)
        try """
            <?xml version="1.0" encoding="UTF-8"?>
            <model>
                <entity name="Chore">
                    <relationship name="owner" maxCount="1" deletionRule="Deny" destinationEntity="Member"/>
                </entity>
                <entity name="Member"/>
            </model>
            """.write(toFile: folder.path("Bad.xcdatamodel/contents"), atomically: true, encoding: .utf8)
        let bad = try ckport(["schema", "lint-coredata", "Bad.xcdatamodel"], in: folder.url)
        #expect(bad.status == 2, "\(bad.stderr)")
        let lines = bad.stdout.split(separator: "\n")
        #expect(lines.count == 3 && lines.allSatisfy { $0.hasPrefix("Bad.xcdatamodel/contents:4: relationship Chore.owner") }, "\(bad.stdout)")
        #expect(bad.stderr.contains("3 problems with CloudKit"), "\(bad.stderr)")
    }

    @Test("schema diff of a production .ckdb and a model version says what would not deploy")
    func diff() throws {
        let folder = Scratch()
        #expect(try ckport(["schema", "from-coredata", model, "-o", "production.ckdb"], in: folder.url).status == 0)
        let same = try ckport(["schema", "diff", "production.ckdb", model, "--check"], in: folder.url)
        #expect(same.status == 0 && same.stdout.contains("the schemas say the same thing"), "\(same.stdout)\(same.stderr)")
        // A model version without a field: its container never removes one, so production keeps it.
        let back = try ckport(["schema", "diff", "production.ckdb", model, "--version", "FamilyTodo 1", "--check"], in: folder.url)
        #expect(back.status == 0 && back.stdout.contains("- CD_Task.CD_priority INT64 QUERYABLE SORTABLE") && back.stdout.contains("deployable (kept: "),
                "\(back.stdout)\(back.stderr)")
        #expect(!back.stdout.contains("NOT deployable"), "\(back.stdout)")
        // Read as two schema files, the same removal could not deploy.
        #expect(try ckport(["schema", "from-coredata", model, "--version", "FamilyTodo 1", "-o", "older.ckdb"], in: folder.url).status == 0)
        let files = try ckport(["schema", "diff", "production.ckdb", "older.ckdb", "--check"], in: folder.url)
        #expect(files.status == 2 && files.stdout.contains("- CD_Task.CD_priority INT64 QUERYABLE SORTABLE") && files.stdout.contains("NOT deployable: production never removes a field"),
                "\(files.stdout)\(files.stderr)")
        // A field the model retypes still cannot deploy, whatever the model.
        let production = try String(contentsOfFile: folder.path("production.ckdb"), encoding: .utf8)
        let retypedText = production.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.contains("CD_priority ") ? $0.replacingOccurrences(of: "INT64", with: "STRING") : String($0) }.joined(separator: "\n")
        #expect(retypedText != production)
        try retypedText.write(toFile: folder.path("retyped.ckdb"), atomically: true, encoding: .utf8)
        let retyped = try ckport(["schema", "diff", "retyped.ckdb", model, "--check"], in: folder.url)
        #expect(retyped.status == 2 && retyped.stdout.contains("~ CD_Task.CD_priority STRING → INT64") && retyped.stdout.contains("NOT deployable"), "\(retyped.stdout)\(retyped.stderr)")
    }

    @Test("schema diff of a real production export and the model of its app: what the model dropped is kept, the rest deploys, --check passes")
    func diffRealExport() throws {
        let folder = Scratch()
        let corpora = packageRoot.appendingPathComponent("Tests/Fixtures/corpora").path
        let run = try ckport(["schema", "diff", corpora + "/cloudkit-schemas/chenchungwan__lotusplannerv3__cloudkit-production.ckdb",
                              corpora + "/coredata/lotusplannerv3/LotusPlannerV3.xcdatamodel", "--check"], in: folder.url)
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        let lines = run.stdout.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("- record type CD_GoalEntity ") && $0.hasSuffix("deployable (kept: the container of a Core Data model only adds to the schema)") }, "\(run.stdout)")
        #expect(lines.contains { $0.hasPrefix("+ CD_TaskTimeWindow.CD_moveReceipt BYTES QUERYABLE SORTABLE ") }, "\(run.stdout)")
        // The eight types the model initialized say the same thing as production, but the one made just in time.
        #expect(lines.count == 17 && !run.stdout.contains("NOT deployable") && !run.stdout.contains("CD_Goal."), "\(run.stdout)")
    }

    @Test("a model file that declares entities is refused with its file and line, and nothing it names is read")
    func hostile() throws {
        let folder = Scratch()
        try FileManager.default.createDirectory(atPath: folder.path("Evil.xcdatamodel"), withIntermediateDirectories: true)
        try """
            <?xml version="1.0"?>
            <!DOCTYPE model [ <!ENTITY leak SYSTEM "file:///etc/passwd"> ]>
            <model><entity name="&leak;"/></model>
            """.write(toFile: folder.path("Evil.xcdatamodel/contents"), atomically: true, encoding: .utf8)
        let run = try ckport(["schema", "from-coredata", "Evil.xcdatamodel"], in: folder.url)
        #expect(run.status == 2 && run.stderr.contains("Evil.xcdatamodel/contents:2") && run.stderr.contains("declares entities"), "\(run.stderr)")
        #expect(!run.stdout.contains("root:"))
    }
}
