import Foundation
import Formats
import Records
import Testing
import TestSupport

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

    @Test("the sample's current version: a CD_ type per root entity, sub-entities folded in, every attribute type, to-one and many-to-many relationships, Users")
    func sampleSchema() throws {
        let model = try CoreDataModel.read(Self.sample)
        #expect(model.version == "FamilyTodo 2" && model.entities.map(\.name) == ["Household", "Member", "Task", "RecurringChore"])
        let derived = try CoreDataCloudKit.schema(for: model)
        let schema = derived.schema
        #expect(schema.recordTypes.map(\.name) == ["CDMR", "CD_Household", "CD_Member", "CD_Task", "Users"])
        // RecurringChore lives in its root's record type.
        #expect(field(schema, "CD_Task", "CD_intervalDays")?.type == .int64 && field(schema, "CD_Task", "CD_effort")?.type == .double)
        let expected: [(String, String, String)] = [
            ("CD_Household", "CD_name", "STRING QUERYABLE SEARCHABLE SORTABLE"), ("CD_Household", "CD_id", "STRING QUERYABLE SEARCHABLE SORTABLE"),
            ("CD_Household", "CD_website", "STRING QUERYABLE SEARCHABLE SORTABLE"), ("CD_Household", "CD_createdAt", "TIMESTAMP QUERYABLE SORTABLE"),
            ("CD_Household", "CD_photo", "BYTES QUERYABLE SORTABLE"), ("CD_Household", "CD_photo_ckAsset", "ASSET"),
            ("CD_Household", "CD_settings", "BYTES QUERYABLE SORTABLE"), ("CD_Household", "CD_inviteCode", "ENCRYPTED STRING"),
            ("CD_Household", "CD_budget", "STRING QUERYABLE SEARCHABLE SORTABLE"),
            ("CD_Member", "CD_age", "INT64 QUERYABLE SORTABLE"), ("CD_Member", "CD_points", "INT64 QUERYABLE SORTABLE"),
            ("CD_Task", "CD_done", "INT64 QUERYABLE SORTABLE"), ("CD_Task", "CD_estimate", "DOUBLE QUERYABLE SORTABLE"),
            ("CD_Task", "CD_household", "STRING QUERYABLE SEARCHABLE SORTABLE"), ("CD_Task", "CD_assignee", "STRING QUERYABLE SEARCHABLE SORTABLE"),
            ("CD_Task", "CD_entityName", "STRING QUERYABLE SEARCHABLE SORTABLE"),
            ("CDMR", "CD_recordNames", "STRING QUERYABLE SEARCHABLE SORTABLE"),
        ]
        for (type, name, declared) in expected {
            let found = field(schema, type, name)
            #expect(found.map { ([$0.type.description] + $0.options.names).joined(separator: " ") } == declared, "\(type).\(name): \(String(describing: found))")
        }
        // To-many sides keep nothing of their own; only to-one sides hold a name.
        #expect(field(schema, "CD_Household", "CD_tasks") == nil && field(schema, "CD_Member", "CD_assigned") == nil && field(schema, "CD_Member", "CD_households") == nil)
        #expect(schema.recordType(named: "Users")?.field(named: "roles")?.type == .list(.int64))
        #expect(derived.notes.count == 2 && derived.notes.allSatisfy { $0.contains("Apple does not document") })
        // What ckport prints, its schema language reads back the same.
        #expect(try SchemaParser.parse(SchemaPrinter.print(schema)) == schema)
    }

    @Test("versions: the current one from .xccurrentversion, another by name, an unknown one refused with the versions there are")
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
            try FileManager.default.createDirectory(atPath: bundle + "/\(version).xcdatamodel", withIntermediateDirectories: true)
            try "<model></model>".write(toFile: bundle + "/\(version).xcdatamodel/contents", atomically: true, encoding: .utf8)
        }
        #expect { try CoreDataModel.read(bundle) } throws: { "\($0)".contains("has several versions (A, B) and no .xccurrentversion") }
        #expect(try CoreDataModel.read(bundle, version: "B").version == "B")
        // An empty .xccurrentversion is there, and names nothing.
        try "".write(toFile: bundle + "/.xccurrentversion", atomically: true, encoding: .utf8)
        #expect { try CoreDataModel.read(bundle) } throws: { "\($0)".contains(".xccurrentversion: names no version (no _XCCurrentVersionName), and the model has several (A, B)") }
        // One naming a version that is gone: with several versions, refused with the versions there are.
        let current = { (name: String) in
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plist version=\"1.0\"><dict><key>_XCCurrentVersionName</key><string>\(name).xcdatamodel</string></dict></plist>\n"
        }
        try current("Gone").write(toFile: bundle + "/.xccurrentversion", atomically: true, encoding: .utf8)
        #expect { try CoreDataModel.read(bundle) } throws: { "\($0)".contains("names the version \"Gone\", which the model does not hold (its versions: A, B)") }
        // With one version left, that one is read (as Xcode does), and the derived schema says so.
        try FileManager.default.removeItem(atPath: bundle + "/B.xcdatamodel")
        let only = try CoreDataModel.read(bundle)
        #expect(only.version == "A" && only.notes == [".xccurrentversion names the version \"Gone\", which the model does not hold; its only version, \"A\", was read"], "\(only.notes)")
        #expect(try CoreDataCloudKit.schema(for: only).notes.first == only.notes.first)
        try "".write(toFile: bundle + "/.xccurrentversion", atomically: true, encoding: .utf8)
        #expect(try CoreDataModel.read(bundle).notes == [".xccurrentversion names no version; its only version, \"A\", was read"])
    }

    @Test("the CloudKit schemas of two Core Data apps as cktool exported them, derived again from models that say the same")
    func corpus() throws {
        let scratch = Scratch()
        let journal = try model("""
            <entity name="Entry" representedClassName="Entry" syncable="YES">
                <attribute name="attachment" optional="YES" attributeType="Binary" allowsExternalBinaryDataStorage="YES"/>
                <attribute name="body" optional="YES" attributeType="String" allowsCloudEncryption="YES"/>
                <attribute name="date" optional="YES" attributeType="Date" usesScalarValueType="NO"/>
                <attribute name="location" optional="YES" attributeType="Transformable"/>
                <attribute name="mood" optional="YES" attributeType="Integer 16" defaultValueString="0" usesScalarValueType="YES"/>
                <attribute name="score" optional="YES" attributeType="Double" defaultValueString="0.0" usesScalarValueType="YES"/>
                <attribute name="secretTags" optional="YES" attributeType="Transformable" allowsCloudEncryption="YES"/>
                <relationship name="notebook" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Notebook" inverseName="entries" inverseEntity="Notebook"/>
            </entity>
            <entity name="Notebook" representedClassName="Notebook" syncable="YES">
                <attribute name="color" optional="YES" attributeType="Transformable"/>
                <attribute name="name" optional="YES" attributeType="String"/>
                <attribute name="sortOrder" optional="YES" attributeType="Integer 32" defaultValueString="0" usesScalarValueType="YES"/>
                <relationship name="entries" optional="YES" toMany="YES" deletionRule="Cascade" destinationEntity="Entry" inverseName="notebook" inverseEntity="Entry"/>
            </entity>
            """, in: scratch, name: "Journal")
        let exported = try SchemaParser.parse(String(contentsOfFile: packageRoot.appendingPathComponent("Tests/StoreTests/SchemaCorpus/coredata-journal.ckdb").path, encoding: .utf8))
        let derived = try CoreDataCloudKit.schema(for: CoreDataModel.read(journal)).schema
        #expect(SchemaPrinter.print(derived) == SchemaPrinter.print(exported))

        let recipes = try model("""
            <entity name="Recipe" representedClassName="Recipe" syncable="YES">
                <attribute name="createdAt" optional="YES" attributeType="Date" usesScalarValueType="NO"/>
                <attribute name="id" optional="YES" attributeType="UUID" usesScalarValueType="NO"/>
                <attribute name="isFavorite" optional="YES" attributeType="Boolean" usesScalarValueType="YES"/>
                <attribute name="parametersJSON" optional="YES" attributeType="Transformable"/>
                <attribute name="photo" optional="YES" attributeType="Binary" allowsExternalBinaryDataStorage="YES"/>
                <attribute name="servings" optional="YES" attributeType="Integer 64" defaultValueString="0" usesScalarValueType="YES"/>
                <attribute name="sourceURL" optional="YES" attributeType="URI"/>
                <attribute name="title" optional="YES" attributeType="String"/>
                <relationship name="ingredients" optional="YES" toMany="YES" deletionRule="Cascade" destinationEntity="Ingredient" inverseName="recipe" inverseEntity="Ingredient"/>
                <relationship name="related" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Recipe" inverseName="relatedFrom" inverseEntity="Recipe"/>
                <relationship name="relatedFrom" optional="YES" toMany="YES" deletionRule="Nullify" destinationEntity="Recipe" inverseName="related" inverseEntity="Recipe"/>
            </entity>
            <entity name="Ingredient" representedClassName="Ingredient" syncable="YES">
                <attribute name="amount" optional="YES" attributeType="Double" defaultValueString="0.0" usesScalarValueType="YES"/>
                <attribute name="name" optional="YES" attributeType="String"/>
                <attribute name="unit" optional="YES" attributeType="String"/>
                <relationship name="recipe" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Recipe" inverseName="ingredients" inverseEntity="Recipe"/>
            </entity>
            """, in: scratch, name: "Recipes")
        var exportedRecipes = try SchemaParser.parse(String(contentsOfFile: packageRoot.appendingPathComponent("Tests/StoreTests/SchemaCorpus/coredata-recipes.ckdb").path, encoding: .utf8))
        // The role and its grant were added in the CloudKit console, not by Core Data.
        exportedRecipes.roles = []
        for index in exportedRecipes.recordTypes.indices { exportedRecipes.recordTypes[index].grants.removeAll { $0.role == "Editors" } }
        let derivedRecipes = try CoreDataCloudKit.schema(for: CoreDataModel.read(recipes)).schema
        #expect(SchemaPrinter.print(derivedRecipes) == SchemaPrinter.print(exportedRecipes))
    }

    @Test("lint: each of CloudKit's rules for Core Data broken once, each reported with the line of its element")
    func lint() throws {
        let scratch = Scratch()
        let broken = try model("""
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
        #expect(lines == [
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
