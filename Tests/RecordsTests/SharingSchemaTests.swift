import Records
import Testing

/// CloudKit's share type as `cktool export-schema` writes it into the schema of every app that
/// shares: the type name and its three fields quoted (they hold a dot), after `Users` in byte
/// order, no index, and its own grants. The layout was learnt from cktool's exports of apps that
/// share (boxed/Done-and-done 49c8b647 cloudkit/development.ckdb; 2001Y/app-4-marin 74be3ac6
/// _schema/CloudKitSchema.ckdb): they came back byte for byte through import and export.
@Suite("schemas with CloudKit's share type")
struct SharingSchemaTests {
    static let exported = """
        DEFINE SCHEMA

            RECORD TYPE CD_Chore (
                CD_entityName   STRING QUERYABLE SEARCHABLE SORTABLE,
                CD_title        STRING QUERYABLE SEARCHABLE SORTABLE,
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE,
                GRANT WRITE TO "_creator",
                GRANT CREATE TO "_icloud",
                GRANT READ TO "_world"
            );

            RECORD TYPE Users (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE,
                roles           LIST<INT64>,
                GRANT WRITE TO "_creator",
                GRANT READ TO "_world"
            );

            RECORD TYPE "cloudkit.share" (
                "___createTime"               TIMESTAMP,
                "___createdBy"                REFERENCE,
                "___etag"                     STRING,
                "___modTime"                  TIMESTAMP,
                "___modifiedBy"               REFERENCE,
                "___recordID"                 REFERENCE,
                "cloudkit.thumbnailImageData" BYTES,
                "cloudkit.title"              STRING,
                "cloudkit.type"               STRING,
                GRANT WRITE TO "_creator",
                GRANT CREATE TO "_icloud",
                GRANT READ TO "_world"
            );

        """

    @Test(
        "an export with the share type reads, and prints back byte for byte: fields in cktool's byte order, CD_ before the system fields"
    )
    func fixedPoint() throws {
        let schema = try SchemaParser.parse(Self.exported)
        let share = try #require(schema.recordType(named: "cloudkit.share"))
        #expect(share.userFields.map(\.name) == ["cloudkit.thumbnailImageData", "cloudkit.title", "cloudkit.type"])
        #expect(share.userFields.map(\.type) == [.bytes, .string, .string])
        #expect(share == RecordTypeDefinition.share)
        #expect(SchemaPrinter.print(schema) == Self.exported)
        #expect(SchemaPrinter.print(try SchemaParser.parse(SchemaPrinter.print(schema))) == Self.exported)
        let (_, warnings) = try SchemaParser.check(Self.exported, file: "export.ckdb")
        #expect(warnings.isEmpty, "\(warnings)")
    }

    @Test(
        "other dotted names are refused, and the message says which rule applies",
        arguments: [
            (
                "RECORD TYPE \"my.type\" (title STRING)",
                "a record type name may hold only letters, digits and '_': 'my.type' (a dot belongs only to CloudKit's own cloudkit.share)"
            ),
            (
                "RECORD TYPE \"cloudkit.folder\" (title STRING)",
                "'cloudkit.folder' is not a record type CloudKit defines (of its own types with a dot, a schema declares only cloudkit.share)"
            ),
            (
                "RECORD TYPE Chore (\"cloudkit.title\" STRING)",
                "'cloudkit.title' is a name of CloudKit's own, which only cloudkit.share has (cloudkit.thumbnailImageData, cloudkit.title, cloudkit.type)"
            ),
            (
                "RECORD TYPE \"cloudkit.share\" (\"cloudkit.owner\" STRING)",
                "'cloudkit.owner' is not a field CloudKit gives shares (those are cloudkit.thumbnailImageData, cloudkit.title, cloudkit.type)"
            ),
            (
                "RECORD TYPE \"cloudkit.share\" (\"cloudkit.title\" INT64)",
                "CloudKit's field 'cloudkit.title' of cloudkit.share is STRING, not INT64"
            ),
            (
                "RECORD TYPE Chore (\"due.date\" TIMESTAMP)",
                "a field name may hold only letters, digits and '_': 'due.date'"
            ),
        ])
    func refusals(_ statement: String, _ message: String) {
        do {
            _ = try SchemaParser.parse("DEFINE SCHEMA " + statement + ";")
            Issue.record("\(statement) was taken")
        } catch {
            #expect("\(error)".contains(message), "\(error)")
        }
    }

    @Test("a zone share may carry the app's own fields beside CloudKit's")
    func appFieldsOnShare() throws {
        let schema = try SchemaParser.parse(
            """
            DEFINE SCHEMA
                RECORD TYPE "cloudkit.share" ("cloudkit.title" STRING, color STRING, GRANT READ TO "_world");
            """)
        #expect(schema.recordType(named: "cloudkit.share")?.userFields.map(\.name) == ["cloudkit.title", "color"])
    }

    @Test("records of the share type validate, with CloudKit's field names")
    func validation() throws {
        var schema = Schema()
        schema.recordTypes.append(.share)
        let validator = RecordValidator(schema: schema)
        let share = Record(
            id: RecordID(recordName: Record.zoneShareName, zone: ZoneID(scope: .private, zoneName: "Family")),
            recordType: Record.shareType,
            fields: ["cloudkit.title": .string("The Smiths")])
        #expect(validator.issues(in: share).isEmpty)
        var odd = share
        odd["cloudkit.owner"] = .string("me")
        #expect(
            validator.issues(in: odd, allowNewFields: true).map(\.message) == [
                "'cloudkit.owner' is not a field CloudKit gives shares (those are cloudkit.thumbnailImageData, cloudkit.title, cloudkit.type); a field name may hold only letters, digits and '_': 'cloudkit.owner'"
            ])
    }
}
