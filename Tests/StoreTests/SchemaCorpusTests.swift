import Foundation
import Records
import SQLiteStore
import StoreCore
import Testing

/// Schema files written here: shaped as a Core Data app's (CD_ types and fields, CD_entityName,
/// _ckAsset companions, CDMR, an index on nearly every field, roles and grants) and as people
/// write them by hand. The files CloudKit itself wrote are ``cloudKitWritten``.
let schemaCorpus: [String] = {
    let folder = packageRoot.appendingPathComponent("Tests/StoreTests/SchemaCorpus").path
    let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
    return names.filter { $0.hasSuffix(".ckdb") }.sorted().map { folder + "/" + $0 }
        + ["family-calendar", "family-todo", "notes", "relationship-checkin", "screen-time-rewards"].map {
            packageRoot.appendingPathComponent("samples/\($0)/schema.ckdb").path
        }
}()

@Suite("schemas as CloudKit exports them")
struct SchemaCorpusTests {
    @Test("the corpus is there")
    func corpusPresent() {
        #expect(schemaCorpus.count >= 9)
        #expect(schemaCorpus.contains { $0.hasSuffix("coredata-recipes.ckdb") })
    }

    @Test("import, export and import again reach a byte-identical fixed point", arguments: schemaCorpus)
    func fixedPoint(_ path: String) throws {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let scratch = Scratch()
        let first = try RecordStore(path: scratch.path("first.sqlite"))
        try first.importSchema(try SchemaParser.parse(text, file: path))
        let exported = SchemaPrinter.print(first.schema)
        let second = try RecordStore(path: scratch.path("second.sqlite"))
        try second.importSchema(try SchemaParser.parse(exported, file: "exported"))
        let again = SchemaPrinter.print(second.schema)
        #expect(again == exported, "\(path)")
        // Nothing CloudKit wrote is lost on the way: every type, field, option, role and grant.
        let original = try SchemaParser.parse(text, file: path)
        #expect(second.schema.isEquivalent(to: original), "\(path)")
        for type in original.recordTypes {
            for field in type.fields {
                #expect(
                    second.schema.recordType(named: type.name)?.field(named: field.name)?.options == field.options,
                    "\(type.name).\(field.name)")
            }
            let grants = second.schema.recordType(named: type.name)?.grants ?? []
            #expect(
                Set(grants.map { "\($0.role) \($0.permissions)" })
                    == Set(type.grants.map { "\($0.role) \($0.permissions)" }), "\(type.name)")
        }
        #expect(Set(second.schema.roles) == Set(original.roles))
    }

    /// Schema files CloudKit wrote, from public repositories: each row of the corpus's
    /// SOURCES.tsv (file, repository, commit, path, writer, expected, licence, note).
    static let cloudKitWritten: [[String]] = corpusRows("cloudkit-schemas")

    @Test("the corpus of schemas CloudKit wrote is there, each with its source")
    func cloudKitCorpusPresent() {
        #expect(Self.cloudKitWritten.count >= 5)
        for row in Self.cloudKitWritten {
            #expect(
                row.count == 8 && FileManager.default.fileExists(atPath: row[0]) && row[1].contains("/")
                    && row[2].count == 40 && !row[6].isEmpty, "\(row)")
            #expect(
                ["cktool", "console", "ckjs", "uncertain"].contains(row[4])
                    && ["identical", "reprinted"].contains(row[5]), "\(row)")
        }
        #expect(
            Self.cloudKitWritten.contains { $0[4] == "ckjs" } && Self.cloudKitWritten.contains { $0[4] == "console" })
    }

    @Test(
        "a schema CloudKit wrote comes back from a store byte for byte: its layout, field order, roles' order and grants",
        arguments: cloudKitWritten.map { [$0[0], $0[5]] })
    func cloudKitWrittenComeBack(_ row: [String]) throws {
        let (path, expected) = (row[0], row[1])
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let scratch = Scratch()
        let store = try RecordStore(path: scratch.path("store.sqlite"))
        try store.importSchema(try SchemaParser.parse(text, file: path))
        let exported = SchemaPrinter.print(try RecordStore(path: scratch.path("store.sqlite")).loadSchema())
        #expect(exported.hasPrefix("DEFINE SCHEMA\n\n    ") && exported.count > 300)
        if expected == "identical" {
            if exported != text {
                let first = zip(
                    exported.split(separator: "\n", omittingEmptySubsequences: false),
                    text.split(separator: "\n", omittingEmptySubsequences: false)
                )
                .enumerated().first { $0.element.0 != $0.element.1 }
                Issue.record(
                    "\(path): first difference at line \((first?.offset ?? -1) + 1): exported \(String(describing: first?.element.0)), file \(String(describing: first?.element.1))"
                )
            }
        } else {
            #expect(exported != text, "\(path) is listed as reprinted, and came back identical")
            #expect(try SchemaParser.parse(exported).isEquivalent(to: try SchemaParser.parse(text)), "\(path)")
        }
    }

    @Test(
        "a Core Data container's schema, in the layout its exports show (CD_ fields before the system fields, asset companions), comes back from a store byte for byte"
    )
    func coreDataLayoutComesBack() throws {
        let path = packageRoot.appendingPathComponent("Tests/Fixtures/corpora/coredata/initialized/initialized.ckdb")
            .path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let scratch = Scratch()
        let store = try RecordStore(path: scratch.path("store.sqlite"))
        try store.importSchema(try SchemaParser.parse(text, file: path))
        #expect(SchemaPrinter.print(try RecordStore(path: scratch.path("store.sqlite")).loadSchema()) == text)
        #expect(text.contains("        CD_title_ckAsset       ASSET,\n        \"___createTime\"        TIMESTAMP,"))
    }

    @Test("Core Data's index options read with warnings, never errors; the advice names the field and its place")
    func coreDataWarnings() throws {
        let path = schemaCorpus.first { $0.hasSuffix("coredata-recipes.ckdb") }!
        let (schema, warnings) = try SchemaParser.check(try String(contentsOfFile: path, encoding: .utf8), file: path)
        #expect(
            schema.recordType(named: "CD_Recipe")?.field(named: "CD_parametersJSON")?.options == [
                .queryable, .sortable,
            ])
        #expect(warnings.map(\.position.line) == [48, 49])
        #expect(warnings.allSatisfy { $0.severity == .warning })
        #expect(
            warnings[0].description
                == "48:9: warning: field 'CD_parametersJSON' is BYTES with QUERYABLE SORTABLE: CloudKit query predicates cannot compare BYTES values, so the index only costs space"
        )
    }

    @Test("ckport's advice is a warning, each kind of it; CloudKit's rules stay errors")
    func adviceAndRules() throws {
        let advice = schemaCorpus.first { $0.hasSuffix("handmade-advice.ckdb") }!
        let (_, warnings) = try SchemaParser.check(try String(contentsOfFile: advice, encoding: .utf8), file: advice)
        #expect(
            warnings.map(\.message).map { String($0.prefix(24)) } == [
                "field 'blob' is BYTES wi", "field 'count' is INT64 w", "field 'diary' is ENCRYPT",
                "field 'file' is ASSET wi",
            ])
        // A real error beside a warning: the error stops the parse and both are listed.
        do {
            _ = try SchemaParser.parse(
                "DEFINE SCHEMA\n RECORD TYPE T (\n  b BYTES QUERYABLE,\n  b STRING\n );", file: "two.ckdb")
            Issue.record("a field defined twice was accepted")
        } catch {
            #expect(error.errors.count == 1)
            #expect(
                error.description
                    == "two.ckdb:3:3: warning: field 'b' is BYTES with QUERYABLE: CloudKit query predicates cannot compare BYTES values, so the index only costs space\ntwo.ckdb:4:3: field 'b' is declared twice in 'T' (first at 3:3)",
                "\(error)")
        }
    }
}
