import Foundation
import Records
import Store
import Testing

/// Schema files shaped as `cktool export-schema` writes them for Core Data apps (CD_ types and
/// fields, CD_entityName, _ckAsset companions, CDMR, an index on nearly every field, roles and
/// grants) and as people write them by hand.
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
                #expect(second.schema.recordType(named: type.name)?.field(named: field.name)?.options == field.options, "\(type.name).\(field.name)")
            }
            let grants = second.schema.recordType(named: type.name)?.grants ?? []
            #expect(Set(grants.map { "\($0.role) \($0.permissions)" }) == Set(type.grants.map { "\($0.role) \($0.permissions)" }), "\(type.name)")
        }
        #expect(Set(second.schema.roles) == Set(original.roles))
    }

    @Test("Core Data's index options read with warnings, never errors; the advice names the field and its place")
    func coreDataWarnings() throws {
        let path = schemaCorpus.first { $0.hasSuffix("coredata-recipes.ckdb") }!
        let (schema, warnings) = try SchemaParser.check(try String(contentsOfFile: path, encoding: .utf8), file: path)
        #expect(schema.recordType(named: "CD_Recipe")?.field(named: "CD_parametersJSON")?.options == [.queryable, .sortable])
        #expect(warnings.map(\.position.line) == [48, 49])
        #expect(warnings.allSatisfy { $0.severity == .warning })
        #expect(warnings[0].description == "48:9: warning: field 'CD_parametersJSON' is BYTES with QUERYABLE SORTABLE: CloudKit query predicates cannot compare BYTES values, so the index only costs space")
    }

    @Test("ckport's advice is a warning, each kind of it; CloudKit's rules stay errors")
    func adviceAndRules() throws {
        let advice = schemaCorpus.first { $0.hasSuffix("handmade-advice.ckdb") }!
        let (_, warnings) = try SchemaParser.check(try String(contentsOfFile: advice, encoding: .utf8), file: advice)
        #expect(warnings.map(\.message).map { String($0.prefix(24)) } == ["field 'blob' is BYTES wi", "field 'count' is INT64 w", "field 'diary' is ENCRYPT", "field 'file' is ASSET wi"])
        // A real error beside a warning: the error stops the parse and both are listed.
        do {
            _ = try SchemaParser.parse("DEFINE SCHEMA\n RECORD TYPE T (\n  b BYTES QUERYABLE,\n  b STRING\n );", file: "two.ckdb")
            Issue.record("a field defined twice was accepted")
        } catch {
            #expect(error.errors.count == 1)
            #expect(error.description == "two.ckdb:3:3: warning: field 'b' is BYTES with QUERYABLE: CloudKit query predicates cannot compare BYTES values, so the index only costs space\ntwo.ckdb:4:3: field 'b' is declared twice in 'T' (first at 3:3)", "\(error)")
        }
    }
}
