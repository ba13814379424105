import Formats
import Foundation
import Records
import TestSupport
import Testing

@Suite("Core Data models and their CloudKit schema")
struct CoreDataTests {
    static let sample = packageRoot.appendingPathComponent("samples/coredata/FamilyTodo.xcdatamodeld").path

    /// A model folder with one version holding `entities` (XML of <entity> elements).
    func model(_ entities: String, in scratch: Scratch, name: String = "Test") throws -> String {
        let folder = scratch.path("\(name).xcdatamodel")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let text = """
            <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
            <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0" usedWithCloudKit="YES">
            \(entities)
            </model>
            """
        try text.write(toFile: folder + "/contents", atomically: true, encoding: .utf8)
        return folder
    }

    func field(_ schema: Schema, _ type: String, _ name: String) -> FieldDefinition? {
        schema.recordType(named: type)?.field(named: name)
    }

    @Test(
        "the sample's current version: a CD_ type per root entity, sub-entities folded in, every attribute type, to-one and many-to-many relationships, Users"
    )
    func sampleSchema() throws {
        let model = try CoreDataModel.read(Self.sample)
        #expect(
            model.version == "FamilyTodo 2"
                && model.entities.map(\.name) == ["Household", "Member", "Task", "RecurringChore"])
        let derived = try CoreDataCloudKit.schema(for: model)
        let schema = derived.schema
        #expect(schema.recordTypes.map(\.name) == ["CDMR", "CD_Household", "CD_Member", "CD_Task", "Users"])
        // RecurringChore lives in its root's record type.
        #expect(
            field(schema, "CD_Task", "CD_intervalDays")?.type == .int64
                && field(schema, "CD_Task", "CD_effort")?.type == .double)
        let expected: [(String, String, String)] = [
            ("CD_Household", "CD_name", "STRING QUERYABLE SEARCHABLE SORTABLE"),
            ("CD_Household", "CD_id", "STRING QUERYABLE SEARCHABLE SORTABLE"),
            ("CD_Household", "CD_website", "STRING QUERYABLE SEARCHABLE SORTABLE"),
            ("CD_Household", "CD_createdAt", "TIMESTAMP QUERYABLE SORTABLE"),
            ("CD_Household", "CD_photo", "BYTES QUERYABLE SORTABLE"), ("CD_Household", "CD_photo_ckAsset", "ASSET"),
            ("CD_Household", "CD_settings", "BYTES QUERYABLE SORTABLE"),
            ("CD_Household", "CD_inviteCode", "ENCRYPTED STRING"),
            ("CD_Household", "CD_budget", "STRING QUERYABLE SEARCHABLE SORTABLE"),
            ("CD_Member", "CD_age", "INT64 QUERYABLE SORTABLE"), ("CD_Member", "CD_points", "INT64 QUERYABLE SORTABLE"),
            ("CD_Task", "CD_done", "INT64 QUERYABLE SORTABLE"), ("CD_Task", "CD_estimate", "DOUBLE QUERYABLE SORTABLE"),
            ("CD_Task", "CD_household", "STRING QUERYABLE SEARCHABLE SORTABLE"),
            ("CD_Task", "CD_assignee", "STRING QUERYABLE SEARCHABLE SORTABLE"),
            ("CD_Task", "CD_entityName", "STRING QUERYABLE SEARCHABLE SORTABLE"),
            ("CDMR", "CD_recordNames", "STRING QUERYABLE SEARCHABLE SORTABLE"),
            // What the container adds: an asset beside every String and Binary attribute, the
            // move receipt with its own, and no index on a system field.
            ("CD_Household", "CD_name_ckAsset", "ASSET"), ("CD_Task", "CD_title_ckAsset", "ASSET"),
            ("CD_Task", "CD_moveReceipt", "BYTES QUERYABLE SORTABLE"), ("CD_Task", "CD_moveReceipt_ckAsset", "ASSET"),
            ("CD_Member", "CD_moveReceipt", "BYTES QUERYABLE SORTABLE"), ("CD_Task", "___recordID", "REFERENCE"),
            ("CD_Task", "___createTime", "TIMESTAMP"), ("CD_Member", "___modifiedBy", "REFERENCE"),
        ]
        for (type, name, declared) in expected {
            let found = field(schema, type, name)
            #expect(
                found.map { ([$0.type.description] + $0.options.names).joined(separator: " ") } == declared,
                "\(type).\(name): \(String(describing: found))")
        }
        // To-many sides keep nothing of their own; only to-one sides hold a name.
        #expect(
            field(schema, "CD_Household", "CD_tasks") == nil && field(schema, "CD_Member", "CD_assigned") == nil
                && field(schema, "CD_Member", "CD_households") == nil)
        #expect(schema.recordType(named: "Users")?.field(named: "roles")?.type == .list(.int64))
        // A UUID or URI holds no asset; an attribute ckport cannot place from Apple's word is noted.
        #expect(
            field(schema, "CD_Household", "CD_id_ckAsset") == nil
                && field(schema, "CD_Household", "CD_website_ckAsset") == nil)
        #expect(derived.notes.count == 4, "\(derived.notes)")
        #expect(derived.notes.filter { $0.contains("Apple does not document") }.count == 3, "\(derived.notes)")
        #expect(
            derived.notes.contains("the configuration marked Used with CloudKit (Cloud) chose the entities"),
            "\(derived.notes)")
        // What ckport prints, its schema language reads back the same.
        #expect(try SchemaParser.parse(SchemaPrinter.print(schema)) == schema)
    }

    @Test(
        "versions: the current one from .xccurrentversion, another by name, an unknown one refused with the versions there are"
    )
    func versions() throws {
        let first = try CoreDataCloudKit.schema(for: CoreDataModel.read(Self.sample, version: "FamilyTodo 1")).schema
        #expect(first.recordTypes.map(\.name) == ["CD_Household", "CD_Task", "Users"])
        #expect(field(first, "CD_Task", "CD_priority") == nil && field(first, "CD_Task", "CD_household") != nil)
        #expect { try CoreDataModel.read(Self.sample, version: "FamilyTodo 9") } throws: { error in
            "\(error)".contains("has no version \"FamilyTodo 9\" (its versions: FamilyTodo 1, FamilyTodo 2)")
        }
        let scratch = Scratch()
        let bundle = scratch.path("Two.xcdatamodeld")
        for version in ["A", "B"] {
            try FileManager.default.createDirectory(
                atPath: bundle + "/\(version).xcdatamodel", withIntermediateDirectories: true)
            try "<model></model>".write(
                toFile: bundle + "/\(version).xcdatamodel/contents", atomically: true, encoding: .utf8)
        }
        #expect { try CoreDataModel.read(bundle) } throws: {
            "\($0)".contains("has several versions (A, B) and no .xccurrentversion")
        }
        #expect(try CoreDataModel.read(bundle, version: "B").version == "B")
        // An empty .xccurrentversion is there, and names nothing.
        try "".write(toFile: bundle + "/.xccurrentversion", atomically: true, encoding: .utf8)
        #expect { try CoreDataModel.read(bundle) } throws: {
            "\($0)".contains(
                ".xccurrentversion: names no version (no _XCCurrentVersionName), and the model has several (A, B)")
        }
        // One naming a version that is gone: with several versions, refused with the versions there are.
        let current = { (name: String) in
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plist version=\"1.0\"><dict><key>_XCCurrentVersionName</key><string>\(name).xcdatamodel</string></dict></plist>\n"
        }
        try current("Gone").write(toFile: bundle + "/.xccurrentversion", atomically: true, encoding: .utf8)
        #expect { try CoreDataModel.read(bundle) } throws: {
            "\($0)".contains("names the version \"Gone\", which the model does not hold (its versions: A, B)")
        }
        // With one version left, that one is read (as Xcode does), and the derived schema says so.
        try FileManager.default.removeItem(atPath: bundle + "/B.xcdatamodel")
        let only = try CoreDataModel.read(bundle)
        #expect(
            only.version == "A"
                && only.notes == [
                    ".xccurrentversion names the version \"Gone\", which the model does not hold; its only version, \"A\", was read"
                ], "\(only.notes)")
        #expect(try CoreDataCloudKit.schema(for: only).notes.first == only.notes.first)
        try "".write(toFile: bundle + "/.xccurrentversion", atomically: true, encoding: .utf8)
        #expect(
            try CoreDataModel.read(bundle).notes == [
                ".xccurrentversion names no version; its only version, \"A\", was read"
            ])
    }

    /// Each field of a type as `NAME TYPE OPTIONS`, the system fields without options (an
    /// index on one is made in the CloudKit console, not by a model's container).
    func fieldLines(_ type: RecordTypeDefinition?) -> Set<String> {
        Set(
            (type?.fields ?? []).map { field in
                ([field.name, field.type.description] + (field.name.hasPrefix("___") ? [] : field.options.names))
                    .joined(separator: " ")
            })
    }

    static let corpora = packageRoot.appendingPathComponent("Tests/Fixtures/corpora")

    @Test(
        "a model derives, byte for byte, the schema its container initializes, as real exports show it (FACTS.md names each source)"
    )
    func initializedExport() throws {
        let folder = Self.corpora.appendingPathComponent("coredata/initialized")
        let derived = try CoreDataCloudKit.schema(
            for: CoreDataModel.read(folder.appendingPathComponent("Chores.xcdatamodel").path))
        let expected = try String(contentsOf: folder.appendingPathComponent("initialized.ckdb"), encoding: .utf8)
        #expect(SchemaPrinter.print(derived.schema) == expected)
        #expect(
            derived.notes == [
                "UUID and URI attributes: STRING without a _ckAsset companion (their values are short); Apple does not document one"
            ])
    }

    /// Rows of the model corpus's SOURCES.tsv: folder, repository, commit, path, cloudkit,
    /// types, problems, licence, note.
    static let models: [[String]] = corpusRows("coredata/models")

    @Test(
        "real apps' models: each derives the types recorded for it, prints back as it reads, and lints as recorded — an app that syncs through CloudKit with no problem",
        arguments: models.map { [$0[0], $0[4], $0[5], $0[6]] })
    func realModels(_ row: [String]) throws {
        let (path, cloudKit, types, problems) = (row[0], row[1] == "yes", Int(row[2])!, Int(row[3])!)
        let model = try CoreDataModel.read(path)
        let derived = try CoreDataCloudKit.schema(for: model).schema
        #expect(derived.recordTypes.count == types, "\(derived.recordTypes.map(\.name))")
        let printed = SchemaPrinter.print(derived)
        #expect(SchemaPrinter.print(try SchemaParser.parse(printed)) == printed)
        let found = CoreDataCloudKit.problems(in: model)
        #expect(found.count == problems, "\(found.map(\.description))")
        if cloudKit { #expect(found.isEmpty) }
    }

    @Test("the model corpus is there, each with its source and licence, apps that sync through CloudKit among them")
    func modelCorpus() {
        #expect(Self.models.count >= 10)
        #expect(
            Self.models.filter { $0[4] == "yes" }.count >= 5 && Self.models.contains { $0[4] == "no" && $0[6] != "0" })
        for row in Self.models {
            #expect(
                row.count == 9 && FileManager.default.fileExists(atPath: row[0]) && row[2].count == 40
                    && !row[7].isEmpty, "\(row)")
        }
    }

    @Test("transient and derived attributes are left out, and said to be")
    func transientAndDerived() throws {
        let scratch = Scratch()
        let path = try model(
            """
            <entity name="Chore" representedClassName="Chore" syncable="YES">
                <attribute name="title" optional="YES" attributeType="String"/>
                <attribute name="draft" optional="YES" transient="YES" attributeType="String"/>
                <attribute name="titleLength" optional="YES" attributeType="Integer 64" derived="YES" derivationExpression="title.length" usesScalarValueType="YES"/>
            </entity>
            """, in: scratch)
        let derived = try CoreDataCloudKit.schema(for: CoreDataModel.read(path))
        #expect(field(derived.schema, "CD_Chore", "CD_title") != nil)
        #expect(
            field(derived.schema, "CD_Chore", "CD_draft") == nil
                && field(derived.schema, "CD_Chore", "CD_draft_ckAsset") == nil)
        #expect(field(derived.schema, "CD_Chore", "CD_titleLength") == nil)
        #expect(
            derived.notes.contains { $0.hasPrefix("attribute Chore.draft is transient") }
                && derived.notes.contains { $0.hasPrefix("attribute Chore.titleLength is derived") }, "\(derived.notes)"
        )
    }

    @Test("configurations: those marked Used with CloudKit choose the entities, local-only ones are left out and named")
    func configurations() throws {
        let scratch = Scratch()
        let path = try model(
            """
            <entity name="Chore" representedClassName="Chore" syncable="YES">
                <attribute name="title" optional="YES" attributeType="String"/>
            </entity>
            <entity name="Draft" representedClassName="Draft" syncable="YES">
                <attribute name="text" optional="YES" attributeType="String"/>
            </entity>
            <configuration name="Cloud" usedWithCloudKit="YES">
                <memberEntity name="Chore"/>
            </configuration>
            <configuration name="Local">
                <memberEntity name="Draft"/>
            </configuration>
            """, in: scratch)
        let derived = try CoreDataCloudKit.schema(for: CoreDataModel.read(path))
        #expect(derived.schema.recordTypes.map(\.name) == ["CD_Chore", "Users"])
        #expect(
            derived.notes.contains(
                "the configuration marked Used with CloudKit (Cloud) chose the entities; left out as local-only: Draft"),
            "\(derived.notes)")
        #expect(
            try CoreDataCloudKit.schema(for: CoreDataModel.read(path), configuration: "Local").schema.recordTypes.map(
                \.name) == ["CD_Draft", "Users"])
    }

    @Test("lint: each of CloudKit's rules for Core Data broken once, each reported with the line of its element")
    func lint() throws {
        let scratch = Scratch()
        let broken = try model(
            """
            <entity name="Chore" representedClassName="Chore" syncable="YES">
                <attribute name="title" attributeType="String"/>
                <attribute name="token" optional="YES" attributeType="Undefined"/>
                <relationship name="owner" maxCount="1" deletionRule="Deny" destinationEntity="Member" inverseName="chores" inverseEntity="Member"/>
                <relationship name="area" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Area"/>
                <uniquenessConstraints>
                    <uniquenessConstraint>
                        <constraint value="title"/>
                    </uniquenessConstraint>
                </uniquenessConstraints>
            </entity>
            <entity name="Member" representedClassName="Member" syncable="YES">
                <attribute name="points" attributeType="Integer 64" defaultValueString="0" usesScalarValueType="YES"/>
                <attribute name="joined" attributeType="Date" defaultDateTimeInterval="-978307200" usesScalarValueType="NO"/>
                <attribute name="left" attributeType="Date" usesScalarValueType="NO"/>
                <relationship name="chores" optional="YES" toMany="YES" deletionRule="Cascade" destinationEntity="Chore" inverseName="owner" inverseEntity="Chore"/>
            </entity>
            <entity name="Area" representedClassName="Area" syncable="YES"/>
            <configuration name="Cloud" usedWithCloudKit="YES"><memberEntity name="Chore"/><memberEntity name="Member"/></configuration>
            <configuration name="Local"><memberEntity name="Area"/></configuration>
            """, in: scratch)
        let problems = CoreDataCloudKit.problems(in: try CoreDataModel.read(broken))
        let lines = problems.map { "\($0.line) " + $0.message.split(separator: " ").prefix(5).joined(separator: " ") }
        #expect(
            lines == [
                "3 entity Chore has a uniqueness",
                "4 attribute Chore.title is required and",
                "5 attribute Chore.token is of type",
                "6 relationship Chore.owner is required; CloudKit",
                "6 relationship Chore.owner has the Deny",
                "7 relationship Chore.area has no inverse;",
                "7 relationship Chore.area reaches entity Area",
                // A Date's default is written as defaultDateTimeInterval (seconds from 2001), not
                // defaultValueString: `joined` has one, `left` none.
                "17 attribute Member.left is required and",
            ], "\(problems)")
        #expect(problems.allSatisfy { $0.file.hasSuffix("Test.xcdatamodel/contents") })
        #expect(CoreDataCloudKit.problems(in: try CoreDataModel.read(Self.sample)).isEmpty)
    }
}
