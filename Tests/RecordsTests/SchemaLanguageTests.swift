import Foundation
import TestSupport
import Testing

@testable import Records

@Suite("Schema language")
struct SchemaLanguageTests {
    static let apps = ["family-todo", "family-calendar", "relationship-checkin", "screen-time-rewards", "notes"]

    @Test("sample schemas print back exactly as written", arguments: apps)
    func sampleSchemaFixedPoint(app: String) throws {
        let text = try String(
            contentsOf: packageRoot.appendingPathComponent("samples/\(app)/schema.ckdb"), encoding: .utf8)
        let schema = try SchemaParser.parse(text, file: "\(app)/schema.ckdb")
        let printed = SchemaPrinter.print(schema)
        #expect(printed == text)
        let reparsed = try SchemaParser.parse(printed)
        #expect(SchemaPrinter.print(reparsed) == printed)
        #expect(reparsed.isEquivalent(to: schema))
    }

    static let everything = """
        // exported by hand, with every construct
        -- a second comment style before the schema
        /* and a block comment,
           over two lines */
        DEFINE SCHEMA
            CREATE ROLE "test role";
            CREATE ROLE Editor;

            record type Kitchen (
                "___createTime" TIMESTAMP SORTABLE,
                "___recordID"   REFERENCE QUERYABLE,
                zebra           STRING QUERYABLE SEARCHABLE SORTABLE, // trailing comment
                "grant"         INT64,
                photo           ASSET,
                blob            BYTES,
                ratio           DOUBLE SORTABLE,
                count           INT64 QUERYABLE,
                place           LOCATION QUERYABLE,
                owner           REFERENCE QUERYABLE,
                legacyAmount    NUMBER,
                score           NUMBER PREFERRED AS INT64,
                weight          NUMBER PREFERRED AS DOUBLE,
                secret          ENCRYPTED STRING,
                secretBytes     ENCRYPTED BYTES,
                secretRatio     ENCRYPTED DOUBLE,
                secretCount     ENCRYPTED INT64,
                secretPlace     ENCRYPTED LOCATION,
                secretWhen      ENCRYPTED TIMESTAMP,
                tags            LIST<STRING> QUERYABLE,
                privateTags     LIST<ENCRYPTED STRING>,
                moments         LIST<TIMESTAMP>,
                links           LIST<REFERENCE>,
                "_schemaVersion" INT64 QUERYABLE,
                GRANT READ, WRITE TO Editor,
                GRANT CREATE TO "test role",
                GRANT WRITE TO "_creator", GRANT READ TO "_world" /* two grants on one line */
            );
            RECORD TYPE Empty ( );
        """

    @Test("every construct of the grammar is read")
    func everyConstruct() throws {
        let schema = try SchemaParser.parse(Self.everything)
        #expect(schema.roles == ["test role", "Editor"])
        let kitchen = try #require(schema.recordType(named: "Kitchen"))
        #expect(kitchen.fields.prefix(6).map(\.name) == Names.systemFields.map(\.name))
        #expect(kitchen.field(named: "___createTime")?.options == .sortable)
        #expect(kitchen.field(named: "___recordID")?.options == .queryable)
        #expect(kitchen.field(named: "zebra")?.options == [.queryable, .searchable, .sortable])
        #expect(kitchen.field(named: "grant")?.type == .int64)
        #expect(kitchen.field(named: "legacyAmount")?.type == FieldType(.number))
        #expect(kitchen.field(named: "score")?.type == FieldType(.number, numberPreference: .int64))
        #expect(kitchen.field(named: "weight")?.type == FieldType(.number, numberPreference: .double))
        #expect(kitchen.field(named: "secretPlace")?.type == FieldType(.location, encrypted: true))
        #expect(kitchen.field(named: "privateTags")?.type == FieldType(.string, list: true, encrypted: true))
        #expect(kitchen.field(named: "links")?.type == .list(.reference))
        #expect(kitchen.field(named: "_schemaVersion")?.options == .queryable)
        #expect(kitchen.userFields.count == 22)
        #expect(kitchen.grants.count == 4)
        #expect(kitchen.grants[0] == Grant([.read, .write], to: "Editor"))
        #expect(schema.recordType(named: "Empty")?.userFields.isEmpty == true)
    }

    @Test("printing uses cktool's layout and is a fixed point")
    func printLayout() throws {
        let printed = SchemaPrinter.print(try SchemaParser.parse(Self.everything))
        let expectedStart = """
            DEFINE SCHEMA

                CREATE ROLE "test role";
                CREATE ROLE Editor;

                RECORD TYPE Empty (
                    "___createTime" TIMESTAMP,
                    "___createdBy"  REFERENCE,
                    "___etag"       STRING,
                    "___modTime"    TIMESTAMP,
                    "___modifiedBy" REFERENCE,
                    "___recordID"   REFERENCE
                );

                RECORD TYPE Kitchen (
                    "___createTime"  TIMESTAMP SORTABLE,
            """
        #expect(printed.hasPrefix(expectedStart))
        #expect(printed.contains("\n        \"_schemaVersion\" INT64 QUERYABLE,\n"))
        #expect(printed.contains("\n        \"grant\"          INT64,\n"))
        #expect(printed.contains("\n        privateTags      LIST<ENCRYPTED STRING>,\n"))
        #expect(printed.contains("\n        score            NUMBER PREFERRED AS INT64,\n"))
        #expect(printed.contains("\n        zebra            STRING QUERYABLE SEARCHABLE SORTABLE,\n"))
        #expect(
            printed.hasSuffix(
                """
                        GRANT READ, WRITE TO Editor,
                        GRANT WRITE TO "_creator",
                        GRANT READ TO "_world",
                        GRANT CREATE TO "test role"
                    );

                """))
        #expect(SchemaPrinter.print(try SchemaParser.parse(printed)) == printed)
    }

    @Test("keywords are read in any case")
    func keywordCase() throws {
        let schema = try SchemaParser.parse(
            "define schema record type T (name string queryable, n list<int64>, grant read to \"_world\");")
        #expect(schema.recordType(named: "T")?.field(named: "name")?.options == .queryable)
        #expect(schema.recordType(named: "T")?.field(named: "n")?.type == .list(.int64))
    }

    @Test("schema text is recognised by its first words, comments and all")
    func detection() {
        #expect(SchemaParser.looksLikeSchema("DEFINE SCHEMA\n"))
        #expect(SchemaParser.looksLikeSchema("// exported\n/* x */ -- y\n  define   schema"))
        #expect(!SchemaParser.looksLikeSchema("{\"records\": []}"))
        #expect(!SchemaParser.looksLikeSchema("RECORD TYPE T ();"))
    }

    struct BadSchema: Sendable, CustomStringConvertible {
        var text: String
        var line: Int
        var column: Int
        var message: String
        var description: String { message }
    }

    static let badSchemas: [BadSchema] = [
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE T (\n    r ENCRYPTED REFERENCE\n  );", line: 3, column: 17,
            message: "REFERENCE cannot be ENCRYPTED"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE T (\n    a ENCRYPTED ASSET\n  );", line: 3, column: 17,
            message: "ASSET cannot be ENCRYPTED"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE T (\n    a STRING,\n    a INT64\n  );", line: 4, column: 5,
            message: "field 'a' is declared twice in 'T' (first at 3:5)"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE T (\n    \"1abc\" STRING\n  );", line: 3, column: 5,
            message: "a field name must start with a letter"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE \"Bad-Name\" (a STRING);", line: 2, column: 15,
            message: "a record type name may hold only letters, digits and '_'"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE T (\n    a STRNG\n  );", line: 3, column: 7,
            message: "expected a field type"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE T (a STRING)\n  RECORD TYPE U (b STRING);", line: 3, column: 3,
            message: "expected ';' to end the statement"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE T (\n    a STRING\n    b STRING\n  );", line: 4, column: 5,
            message: "is a comma missing?"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE T (\n    a STRING,\n    GRANT READ TO Nobody\n  );", line: 4, column: 5,
            message: "names role 'Nobody', which is not created"),
        BadSchema(
            text: "DEFINE SCHEMA\n  /* never closed\n  RECORD TYPE T (a STRING);", line: 2, column: 3,
            message: "a '/*' comment is not closed"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE \"T (a STRING);", line: 2, column: 15,
            message: "a quoted name is not closed"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE T (\n    \"___createTime\" STRING\n  );", line: 3, column: 5,
            message: "system field '___createTime' is TIMESTAMP, not STRING"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE T (\n    \"___mine\" STRING\n  );", line: 3, column: 5,
            message: "'___mine' is not a CloudKit system field"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE T (\n    l LIST<LIST<STRING>>\n  );", line: 3, column: 12,
            message: "a LIST cannot hold another LIST"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE T (\n    grant STRING\n  );", line: 3, column: 11,
            message: "expected READ, CREATE or WRITE"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE T (a STRING);\n  RECORD TYPE T (b STRING);", line: 3, column: 15,
            message: "record type 'T' is defined twice"),
        BadSchema(
            text: "RECORD TYPE T (a STRING);", line: 1, column: 1, message: "a schema starts with 'DEFINE SCHEMA'"),
        // A Swift file under a schema's name: the line quoted is the one the position names.
        BadSchema(
            text: "//\n//  Model.swift\n//\n\nimport Foundation\nimport CloudKit\n", line: 5, column: 1,
            message: "found 'import Foundation'"),
        BadSchema(text: "/* a header */  struct Note {}\n", line: 1, column: 17, message: "found 'struct Note {}'"),
        BadSchema(text: "// nothing but a comment\n", line: 2, column: 1, message: "found nothing but comments"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE T (a STRING QUERYABLE QUERYABLE);", line: 2, column: 37,
            message: "option QUERYABLE is given twice"),
        BadSchema(
            text: "DEFINE SCHEMA\n  CREATE ROLE \"_world\";", line: 2, column: 15, message: "role '_world' is implicit"),
        BadSchema(
            text: "DEFINE SCHEMA\n  RECORD TYPE T (n NUMBER PREFERRED AS STRING);", line: 2, column: 40,
            message: "expected INT64 or DOUBLE after 'PREFERRED AS'"),
    ]

    @Test("bad schema text is refused with its line, column and what was expected", arguments: badSchemas)
    func badSchema(_ bad: BadSchema) {
        do {
            _ = try SchemaParser.parse(bad.text, file: "schema.ckdb")
            Issue.record("accepted: \(bad.text)")
        } catch {
            let first = error.diagnostics.first!
            #expect(first.position == TextPosition(line: bad.line, column: bad.column), "\(error)")
            #expect(first.message.description.contains(bad.message), "\(error)")
            #expect(error.description.hasPrefix("schema.ckdb:\(bad.line):\(bad.column): "))
        }
    }

    @Test("index options CloudKit accepts but cannot use are warnings: the schema reads")
    func indexAdvice() throws {
        for (text, words) in [
            ("s ENCRYPTED STRING QUERYABLE", "CloudKit cannot query, sort or search encrypted values"),
            ("n INT64 SEARCHABLE", "CloudKit searches only STRING fields"),
            ("b BYTES QUERYABLE", "CloudKit query predicates cannot compare BYTES values"),
        ] {
            let (schema, warnings) = try SchemaParser.check(
                "DEFINE SCHEMA\n  RECORD TYPE T (\n    \(text)\n  );", file: "schema.ckdb")
            #expect(schema.recordType(named: "T")?.userFields.count == 1)
            #expect(
                warnings.count == 1 && warnings[0].severity == .warning
                    && warnings[0].message.description.contains(words),
                "\(warnings)")
            #expect(warnings[0].position == TextPosition(line: 3, column: 5))
        }
    }

    @Test("every semantic problem is reported, not only the first")
    func allProblems() {
        let text =
            "DEFINE SCHEMA\n RECORD TYPE T (\n  a ENCRYPTED STRING SORTABLE,\n  b BYTES QUERYABLE,\n  a STRING\n );"
        #expect(throws: SchemaError.self) { try SchemaParser.parse(text) }
        do { _ = try SchemaParser.parse(text) } catch {
            #expect(error.diagnostics.map(\.position.line) == [3, 4, 5])
        }
    }
}
