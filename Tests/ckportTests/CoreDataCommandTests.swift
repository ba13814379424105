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
        #expect(
            text.hasPrefix("// ckport: Decimal attributes") && text.contains("RECORD TYPE CD_Task ("),
            "\(text.prefix(300))")
        let check = try ckport(["schema", "check", "derived.ckdb"], in: folder.url)
        // cktool's own layout for Core Data types indexes BYTES fields, which ckport's check warns about.
        #expect(
            check.status == 0 && (check.stdout + check.stderr).contains("ok — 5 record types"),
            "\(check.stdout)\(check.stderr)")
        // The schema goes into a store like any other.
        #expect(
            try ckport(["schema", "import", "derived.ckdb", "--store", "cd.sqlite", "-q"], in: folder.url).status == 0)
        let first = try ckport(["schema", "from-coredata", model, "--version", "FamilyTodo 1"], in: folder.url)
        #expect(first.status == 0 && !first.stdout.contains("CD_Member") && first.stdout.contains("CD_household"))
        let unknown = try ckport(["schema", "from-coredata", model, "--version", "FamilyTodo 7"], in: folder.url)
        #expect(
            unknown.status == 2 && unknown.stderr.contains("its versions: FamilyTodo 1, FamilyTodo 2"),
            "\(unknown.stderr)")
    }

    @Test("lint-coredata: the sample passes; a model breaking the rules lists each problem at its line and exits 2")
    func lint() throws {
        let folder = Scratch()
        let clean = try ckport(["schema", "lint-coredata", model], in: folder.url)
        #expect(
            clean.status == 0 && clean.stdout.contains("4 entities, nothing CloudKit refuses"),
            "\(clean.stdout)\(clean.stderr)")
        try FileManager.default.createDirectory(
            atPath: folder.path("Bad.xcdatamodel"), withIntermediateDirectories: true)
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
        #expect(
            lines.count == 3
                && lines.allSatisfy { $0.hasPrefix("Bad.xcdatamodel/contents:4: relationship Chore.owner") },
            "\(bad.stdout)")
        #expect(bad.stderr.contains("3 problems with CloudKit"), "\(bad.stderr)")
    }

    @Test("schema diff of a production .ckdb and a model version says what would not deploy")
    func diff() throws {
        let folder = Scratch()
        #expect(try ckport(["schema", "from-coredata", model, "-o", "production.ckdb"], in: folder.url).status == 0)
        let same = try ckport(["schema", "diff", "production.ckdb", model, "--check"], in: folder.url)
        #expect(
            same.status == 0 && same.stdout.contains("the schemas say the same thing"), "\(same.stdout)\(same.stderr)")
        // A model version without a field: its container never removes one, so production keeps it.
        let back = try ckport(
            ["schema", "diff", "production.ckdb", model, "--version", "FamilyTodo 1", "--check"], in: folder.url)
        #expect(
            back.status == 0 && back.stdout.contains("- CD_Task.CD_priority INT64 QUERYABLE SORTABLE")
                && back.stdout.contains("deployable (kept: "),
            "\(back.stdout)\(back.stderr)")
        #expect(!back.stdout.contains("NOT deployable"), "\(back.stdout)")
        // Read as two schema files, the same removal could not deploy.
        #expect(
            try ckport(
                ["schema", "from-coredata", model, "--version", "FamilyTodo 1", "-o", "older.ckdb"], in: folder.url
            ).status == 0)
        let files = try ckport(["schema", "diff", "production.ckdb", "older.ckdb", "--check"], in: folder.url)
        #expect(
            files.status == 2 && files.stdout.contains("- CD_Task.CD_priority INT64 QUERYABLE SORTABLE")
                && files.stdout.contains("NOT deployable: production never removes a field"),
            "\(files.stdout)\(files.stderr)")
        // A field the model retypes still cannot deploy, whatever the model.
        let production = try String(contentsOfFile: folder.path("production.ckdb"), encoding: .utf8)
        let retypedText = production.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.contains("CD_priority ") ? $0.replacingOccurrences(of: "INT64", with: "STRING") : String($0) }
            .joined(separator: "\n")
        #expect(retypedText != production)
        try retypedText.write(toFile: folder.path("retyped.ckdb"), atomically: true, encoding: .utf8)
        let retyped = try ckport(["schema", "diff", "retyped.ckdb", model, "--check"], in: folder.url)
        #expect(
            retyped.status == 2 && retyped.stdout.contains("~ CD_Task.CD_priority STRING → INT64")
                && retyped.stdout.contains("NOT deployable"), "\(retyped.stdout)\(retyped.stderr)")
    }

    @Test(
        "schema diff of a production schema and the model that initialized it: what the model dropped is kept, a console's index is no change, --check passes"
    )
    func diffProduction() throws {
        let folder = Scratch()
        let initialized = packageRoot.appendingPathComponent("Tests/Fixtures/corpora/coredata/initialized").path
        // Production as years of deploys leave it: the initialized types, an entity the model
        // has since dropped, and an index added in the console.
        var production = try String(contentsOfFile: initialized + "/initialized.ckdb", encoding: .utf8)
        production = production.replacingOccurrences(
            of: "    RECORD TYPE Users (",
            with: """
                    RECORD TYPE CD_Reminder (
                        CD_entityName          STRING QUERYABLE SEARCHABLE SORTABLE,
                        CD_when                TIMESTAMP QUERYABLE SORTABLE,
                        "___createTime"        TIMESTAMP,
                        "___createdBy"         REFERENCE,
                        "___etag"              STRING,
                        "___modTime"           TIMESTAMP,
                        "___modifiedBy"        REFERENCE,
                        "___recordID"          REFERENCE QUERYABLE,
                        GRANT WRITE TO "_creator",
                        GRANT CREATE TO "_icloud",
                        GRANT READ TO "_world"
                    );

                    RECORD TYPE Users (
                """)
        folder.write("production.ckdb", production)
        let run = try ckport(
            ["schema", "diff", "production.ckdb", initialized + "/Chores.xcdatamodel", "--check"], in: folder.url)
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(
            run.stdout.split(separator: "\n").map { String($0) }.contains {
                $0.hasPrefix("- record type CD_Reminder ")
                    && $0.hasSuffix("deployable (kept: the container of a Core Data model only adds to the schema)")
            }, "\(run.stdout)")
        #expect(!run.stdout.contains("NOT deployable") && run.stdout.split(separator: "\n").count == 1, "\(run.stdout)")
        // Read as two schema files, the same removal could not deploy.
        #expect(
            try ckport(
                ["schema", "from-coredata", initialized + "/Chores.xcdatamodel", "-o", "model.ckdb"], in: folder.url
            ).status == 0)
        let files = try ckport(["schema", "diff", "production.ckdb", "model.ckdb", "--check"], in: folder.url)
        #expect(
            files.status == 2 && files.stdout.contains("- record type CD_Reminder")
                && files.stdout.contains("NOT deployable: production never removes a record type"), "\(files.stdout)")
    }

    @Test("a model file that declares entities is refused with its file and line, and nothing it names is read")
    func hostile() throws {
        let folder = Scratch()
        try FileManager.default.createDirectory(
            atPath: folder.path("Evil.xcdatamodel"), withIntermediateDirectories: true)
        try """
        <?xml version="1.0"?>
        <!DOCTYPE model [ <!ENTITY leak SYSTEM "file:///etc/passwd"> ]>
        <model><entity name="&leak;"/></model>
        """.write(toFile: folder.path("Evil.xcdatamodel/contents"), atomically: true, encoding: .utf8)
        let run = try ckport(["schema", "from-coredata", "Evil.xcdatamodel"], in: folder.url)
        #expect(
            run.status == 2 && run.stderr.contains("Evil.xcdatamodel/contents:2")
                && run.stderr.contains("declares entities"), "\(run.stderr)")
        #expect(!run.stdout.contains("root:"))
    }
}
