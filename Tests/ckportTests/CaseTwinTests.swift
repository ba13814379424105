import Foundation
import TestSupport
import Testing

/// Fields whose names differ only in case (`a` and `A`): CloudKit keeps them apart, and so does
/// the SQLite store, whose column names ignore case.
@Suite("fields whose names differ only in case")
struct CaseTwinTests {
    static let schema = """
        DEFINE SCHEMA
            RECORD TYPE Reading (
                "___recordID" REFERENCE QUERYABLE,
                A        INT64 QUERYABLE,
                a        STRING QUERYABLE,
                note     STRING,
                GRANT READ TO "_world"
            );
        """

    /// The rows sqlite3 prints for `sql` on the test's store, one string per row.
    func rows(_ sql: String, in folder: Scratch) throws -> [String] {
        try sqlite(folder.path("s.sqlite"), sql).split(separator: "\n").map(String.init)
    }

    func records(_ count: Int) -> String {
        (0..<count).map { n in
            "{\"recordName\":\"r-\(n)\",\"recordType\":\"Reading\",\"scope\":\"private\",\"zoneName\":\"Home\",\"A\":\(n),\"a\":\"text \(n)\",\"note\":\"n\(n)\"}"
        }.joined(separator: "\n") + "\n"
    }

    @Test("imported, queried, exported: each keeps its own values, on SQLite as on the schema")
    func keptApart() throws {
        let folder = Scratch()
        folder.write("schema.ckdb", Self.schema)
        folder.write("records.jsonl", records(5))
        let imported = try ckport(
            ["import", "schema.ckdb", "records.jsonl", "--store", "s.sqlite", "-q"], in: folder.url)
        #expect(imported.status == 0, "\(imported.stderr)")
        let exported = try ckport(["export", "--store", "s.sqlite", "--style", "plain", "-q"], in: folder.url)
        #expect(exported.stdout == records(5), "\(exported.stderr)")
        let upper = try ckport(
            ["export", "--store", "s.sqlite", "--type", "Reading", "--where", "A >= 3", "--style", "plain", "-q"],
            in: folder.url)
        #expect(
            upper.stdout.split(separator: "\n").map {
                $0.contains("\"recordName\":\"r-3\"") || $0.contains("\"recordName\":\"r-4\"")
            } == [true, true], "\(upper.stdout)\(upper.stderr)")
        let lower = try ckport(
            [
                "export", "--store", "s.sqlite", "--type", "Reading", "--where", "a == 'text 2'", "--style", "plain",
                "-q",
            ], in: folder.url)
        #expect(
            lower.stdout.split(separator: "\n").count == 1 && lower.stdout.contains("\"r-2\""),
            "\(lower.stdout)\(lower.stderr)")
        let schema = try ckport(["schema", "export", "--store", "s.sqlite"], in: folder.url)
        #expect(schema.stdout.contains("        A ") && schema.stdout.contains("        a "), "\(schema.stdout)")
        let columns = try rows(
            "SELECT name FROM pragma_table_info('Reading') WHERE name NOT LIKE '\\_\\_\\_%' ESCAPE '\\' ORDER BY name",
            in: folder)
        #expect(columns == ["A~0", "a~", "note"])
    }

    @Test(
        "record types whose names differ only in case: the SQLite store refuses them in words that name both and where to keep them, and stays as it was; PostgreSQL keeps them"
    )
    func typesDifferingInCase() throws {
        let folder = Scratch()
        folder.write("schema.ckdb", Self.schema)
        folder.write("records.jsonl", records(3))
        #expect(
            try ckport(["import", "schema.ckdb", "records.jsonl", "--store", "s.sqlite", "-q"], in: folder.url).status
                == 0)
        let twins = Self.schema + "\n    RECORD TYPE reading (title STRING);\n"
        folder.write("types.ckdb", twins)
        let refused = try ckport(["schema", "import", "types.ckdb", "--store", "s.sqlite"], in: folder.url)
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(
            refused.stderr.contains(
                "record types 'Reading' and 'reading' differ only in case, which CloudKit allows but a SQLite store's tables cannot keep apart; keep this schema in a PostgreSQL store"
            ), "\(refused.stderr)")
        #expect(
            try ckport(["export", "--store", "s.sqlite", "--style", "plain", "-q"], in: folder.url).stdout == records(3)
        )
        #expect(
            try ckport(["schema", "export", "--store", "s.sqlite", "-o", "-"], in: folder.url).stdout.contains(
                "RECORD TYPE reading") == false)
        if let pg = PostgresTestServer.store("casetypes") {
            let kept = try ckport(["import", "types.ckdb", "records.jsonl", "--store", pg, "-q"], in: folder.url)
            #expect(kept.status == 0, "\(kept.stderr)")
            folder.write(
                "lower.jsonl",
                "{\"recordName\":\"x\",\"recordType\":\"reading\",\"zoneName\":\"Home\",\"title\":\"lower\"}\n")
            #expect(try ckport(["import", "lower.jsonl", "--store", pg, "-q"], in: folder.url).status == 0)
            let exported = try ckport(["export", "--store", pg, "--style", "plain", "-q"], in: folder.url).stdout.split(
                separator: "\n")
            #expect(
                exported.count == 4 && exported.filter { $0.contains("\"recordType\":\"reading\"") }.count == 1,
                "\(exported)")
        }
    }

    @Test("a twin that comes or goes: the other keeps its values, its column renamed, its index with it")
    func twinsComeAndGo() throws {
        let folder = Scratch()
        // Without A, and a without its index: a's column changes name and gains (or loses) its
        // index in the same change.
        let single = Self.schema.replacingOccurrences(of: "        A        INT64 QUERYABLE,\n", with: "")
            .replacingOccurrences(of: "a        STRING QUERYABLE", with: "a        STRING")
        #expect(single != Self.schema)
        folder.write("single.ckdb", single)
        folder.write("twins.ckdb", Self.schema)
        folder.write(
            "lower.jsonl",
            (0..<3).map {
                "{\"recordName\":\"r-\($0)\",\"recordType\":\"Reading\",\"zoneName\":\"Home\",\"a\":\"text \($0)\"}"
            }.joined(separator: "\n") + "\n")
        #expect(
            try ckport(["import", "single.ckdb", "lower.jsonl", "--store", "s.sqlite", "-q"], in: folder.url).status
                == 0)
        #expect(
            try rows("SELECT name FROM pragma_index_list('Reading') WHERE origin = 'c' ORDER BY name", in: folder) == []
        )
        // A comes: a's column becomes a~, and A gets A~0.
        let added = try ckport(["schema", "import", "twins.ckdb", "--store", "s.sqlite", "-q"], in: folder.url)
        #expect(added.status == 0, "\(added.stderr)")
        #expect(
            try rows("SELECT name FROM pragma_index_list('Reading') WHERE origin = 'c' ORDER BY name", in: folder) == [
                "Reading.A~0", "Reading.a~",
            ])
        folder.write(
            "upper.jsonl",
            (0..<3).map {
                "{\"recordName\":\"r-\($0)\",\"recordType\":\"Reading\",\"zoneName\":\"Home\",\"A\":\($0 * 10)}"
            }.joined(separator: "\n") + "\n")
        #expect(
            try ckport(["import", "upper.jsonl", "--store", "s.sqlite", "--mode", "upsert", "-q"], in: folder.url)
                .status == 0)
        let both = try ckport(["export", "--store", "s.sqlite", "--style", "plain", "-q"], in: folder.url).stdout
        #expect(
            both.contains(
                "{\"recordName\":\"r-2\",\"recordType\":\"Reading\",\"scope\":\"private\",\"zoneName\":\"Home\",\"A\":20,\"a\":\"text 2\"}"
            ), "\(both)")
        // A goes again (its values first): a's column is a again, values and all.
        let cleared = try ckport(
            ["import", "lower.jsonl", "--store", "s.sqlite", "--mode", "replace", "-q"], in: folder.url)
        #expect(cleared.status == 0, "\(cleared.stderr)")
        let removed = try ckport(["schema", "import", "single.ckdb", "--store", "s.sqlite", "-q"], in: folder.url)
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(
            try rows(
                "SELECT name FROM pragma_table_info('Reading') WHERE name NOT LIKE '\\_\\_\\_%' ESCAPE '\\' ORDER BY name",
                in: folder) == ["a", "note"])
        #expect(
            try rows("SELECT name FROM pragma_index_list('Reading') WHERE origin = 'c' ORDER BY name", in: folder) == []
        )
        let back = try ckport(
            [
                "export", "--store", "s.sqlite", "--type", "Reading", "--where", "a == 'text 1'", "--style", "plain",
                "-q",
            ], in: folder.url)
        #expect(
            back.stdout
                == "{\"recordName\":\"r-1\",\"recordType\":\"Reading\",\"scope\":\"private\",\"zoneName\":\"Home\",\"a\":\"text 1\"}\n",
            "\(back.stdout)\(back.stderr)")
    }

    @Test("a migration of a type with twins (a new table for it) keeps both")
    func migrationAndCopy() throws {
        let folder = Scratch()
        folder.write("schema.ckdb", Self.schema)
        folder.write("records.jsonl", records(4))
        #expect(
            try ckport(["import", "schema.ckdb", "records.jsonl", "--store", "s.sqlite", "-q"], in: folder.url).status
                == 0)
        try FileManager.default.createDirectory(
            at: folder.url.appendingPathComponent("m"), withIntermediateDirectories: true)
        folder.write("m/0001_baseline.yaml", "version: 1\ndescription: as it is\nsteps: []\n")
        folder.write(
            "m/0002_rename.yaml",
            "version: 2\ndescription: note becomes remark\nsteps:\n  - renameField: {type: Reading, from: note, to: remark}\n"
        )
        let migrated = try ckport(
            ["migrate", "apply", "--dir", "m", "--store", "s.sqlite", "--no-backup", "-q"], in: folder.url)
        #expect(migrated.status == 0, "\(migrated.stderr)")
        let after = try ckport(["export", "--store", "s.sqlite", "--style", "plain", "-q"], in: folder.url).stdout
        #expect(
            after
                == records(4).replacingOccurrences(of: "\"a\":", with: "\"_schemaVersion\":2,\"a\":")
                .replacingOccurrences(of: "\"note\":", with: "\"remark\":"), "\(after)")
    }
}

extension CaseTwinTests {
    @Test("a migration that renames a to b and adds A (twins only while it runs) keeps every value")
    func twinsWhileMigrating() throws {
        let folder = Scratch()
        folder.write(
            "schema.ckdb",
            """
            DEFINE SCHEMA
                RECORD TYPE Reading (
                    "___recordID" REFERENCE QUERYABLE,
                    a        STRING,
                    GRANT READ TO "_world"
                );
            """)
        folder.write(
            "records.jsonl",
            (0..<3).map {
                "{\"recordName\":\"r-\($0)\",\"recordType\":\"Reading\",\"zoneName\":\"Home\",\"a\":\"text \($0)\"}"
            }.joined(separator: "\n") + "\n")
        #expect(
            try ckport(["import", "schema.ckdb", "records.jsonl", "--store", "s.sqlite", "-q"], in: folder.url).status
                == 0)
        try FileManager.default.createDirectory(
            at: folder.url.appendingPathComponent("m"), withIntermediateDirectories: true)
        folder.write("m/0001_baseline.yaml", "version: 1\ndescription: as it is\nsteps: []\n")
        folder.write(
            "m/0002_twins.yaml",
            """
            version: 2
            description: a becomes b, and A comes
            steps:
              - renameField: {type: Reading, from: a, to: b}
              - addField: {type: Reading, field: A, fieldType: INT64, default: 7}

            """)
        let migrated = try ckport(
            ["migrate", "apply", "--dir", "m", "--store", "s.sqlite", "--no-backup", "-q"], in: folder.url)
        #expect(migrated.status == 0, "\(migrated.stderr)")
        let after = try ckport(["export", "--store", "s.sqlite", "--style", "plain", "-q"], in: folder.url).stdout
        #expect(
            after == (0..<3).map {
                "{\"recordName\":\"r-\($0)\",\"recordType\":\"Reading\",\"scope\":\"private\",\"zoneName\":\"Home\",\"A\":7,\"_schemaVersion\":2,\"b\":\"text \($0)\"}"
            }.joined(separator: "\n") + "\n", "\(after)")
    }
}
