import ArgumentParser
import CKPort
import Formats
import Foundation
import Migrations
import Records
import SQLiteStore
import StoreCore

struct SchemaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Import, export and check schemas in CloudKit's schema language.",
        discussion: """
            Schemas are the 'DEFINE SCHEMA' text that 'xcrun cktool export-schema' writes \
            (usually saved as schema.ckdb); ckport reads them exactly as cktool writes them and \
            writes them back the same way.

              ckport schema check schema.ckdb
              ckport schema import schema.ckdb
              ckport schema export -o schema.ckdb
              ckport schema diff old.ckdb new.ckdb
              ckport schema from-coredata Model.xcdatamodeld -o schema.ckdb
              ckport schema lint-coredata Model.xcdatamodeld
            """,
        subcommands: [Import.self, Export.self, Check.self, Diff.self, FromCoreData.self, LintCoreData.self]
    )

    static func read(_ path: String) throws -> Schema {
        try readChecked(path).schema
    }

    /// Whether `path` names a Core Data model: an `.xcdatamodeld` or `.xcdatamodel` folder.
    static func isModel(_ path: String) -> Bool {
        let trimmed = path.hasSuffix("/") ? String(path.dropLast()) : path
        return trimmed.hasSuffix(".xcdatamodeld") || trimmed.hasSuffix(".xcdatamodel")
    }

    /// The schema `path` names: a `.ckdb` file, a Core Data model (its CloudKit schema, of
    /// `version` when given), or a store.
    static func schema(of path: String, version: String?, wait: Double) throws -> Schema {
        if isModel(path) { return try CoreDataCloudKit.schema(for: CoreDataModel.read(path, version: version)).schema }
        if path.contains("://") || path.hasSuffix(".sqlite") {
            return try StoreOptions.open(path, create: false, wait: wait, quiet: true).loadSchema()
        }
        return try read(path)
    }

    struct FromCoreData: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "from-coredata",
            abstract: "Print the CloudKit schema NSPersistentCloudKitContainer derives from a Core Data model.",
            discussion: """
                Reads the model's current version (or --version) and writes the .ckdb that \
                cktool export-schema would show once the container's schema is initialized: a \
                CD_<Entity> record type per root entity (sub-entities share it, told apart by \
                CD_entityName), CD_<attribute> fields, to-one relationships as CD_<name> STRING \
                fields holding the related record's name, many-to-many relationships as CDMR \
                records, and the Users type every container has. Where Apple's documentation is \
                silent, a comment at the top says what ckport chose.

                  ckport schema from-coredata Model.xcdatamodeld
                  ckport schema from-coredata Model.xcdatamodeld --version "Model 3" \\
                      -o next.ckdb
                  ckport schema from-coredata Model.xcdatamodeld --configuration Cloud
                """
        )

        @Argument(help: ArgumentHelp("The model: a .xcdatamodeld or .xcdatamodel folder.", valueName: "model"))
        var model: String

        @Option(help: ArgumentHelp("The model version to read (default: the current one).", valueName: "name"))
        var version: String?

        @Option(help: ArgumentHelp("Only the entities of this configuration.", valueName: "name"))
        var configuration: String?

        @Option(
            name: [.short, .customLong("output")],
            help: ArgumentHelp("Where to write the schema ('-' for standard output).", valueName: "file"))
        var output = "-"

        func run() async throws {
            let derived = try CoreDataCloudKit.schema(
                for: CoreDataModel.read(model, version: version), configuration: configuration)
            var text = derived.notes.map { "// ckport: \($0)\n" }.joined()
            text += SchemaPrinter.print(derived.schema)
            let file = try OutputFile(path: output)
            try file.write(text)
            try file.commit()
        }
    }

    struct LintCoreData: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "lint-coredata",
            abstract: "Check a Core Data model against CloudKit's rules for Core Data.",
            discussion: """
                CloudKit takes no uniqueness constraints, no Undefined or ObjectID attributes, no \
                required attribute without a default, no required relationship, no relationship \
                without an inverse, no Deny delete rule, and no relationship from one \
                configuration's entities to another's. Each problem is printed with the file and \
                line of the element; the command exits 2 when there is one.

                  ckport schema lint-coredata Model.xcdatamodeld
                  ckport schema lint-coredata Model.xcdatamodeld --version "Model 2"
                """
        )

        @Argument(help: ArgumentHelp("The model: a .xcdatamodeld or .xcdatamodel folder.", valueName: "model"))
        var model: String

        @Option(help: ArgumentHelp("The model version to check (default: the current one).", valueName: "name"))
        var version: String?

        func run() async throws {
            let read = try CoreDataModel.read(model, version: version)
            let problems = CoreDataCloudKit.problems(in: read)
            for problem in problems { print(problem) }
            if !problems.isEmpty {
                throw CommandFailure.invalid(
                    "\(problems.count) problem\(problems.count == 1 ? "" : "s") with CloudKit in \(read.file)")
            }
            print("\(read.file): \(read.entities.count) entities, nothing CloudKit refuses")
        }
    }

    /// The schema in `path` and ckport's warnings about it (`--strict` makes them errors).
    static func readChecked(_ path: String) throws -> (schema: Schema, warnings: [SchemaDiagnostic]) {
        try InputFiles.readSchema(path)
    }

    struct Diff: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Compare two schemas and mark each change as deployable to CloudKit's production schema or not.",
            discussion: """
                Lists added, removed and changed record types, fields, indexes, roles and grants. \
                A production schema only ever adds types and fields, so removing or retyping one is \
                marked NOT deployable. When NEW is a Core Data model, a type or field it no longer \
                has is marked kept instead: its container only adds to the schema, and production \
                keeps what the model stopped writing. With --check the command exits 2 when any \
                change could not deploy.

                  ckport schema diff schema-v1.ckdb schema-v2.ckdb
                  ckport schema diff production.ckdb development.ckdb --check
                  ckport schema diff production.ckdb Model.xcdatamodeld --version "Model 3"

                OLD and NEW may each be a .ckdb file, a store (a .sqlite file or a \
                postgresql:// URL) or a Core Data model (.xcdatamodeld or .xcdatamodel), whose \
                CloudKit schema is compared.
                """
        )

        @Argument(
            help: ArgumentHelp("The schema before: a .ckdb file, a store or a Core Data model.", valueName: "old"))
        var old: String

        @Argument(help: ArgumentHelp("The schema after: a .ckdb file, a store or a Core Data model.", valueName: "new"))
        var new: String

        @Flag(help: "Exit 2 when a change could not deploy to production.")
        var check = false

        @Option(
            help: ArgumentHelp(
                "The version of a Core Data model given as OLD or NEW (default: its current one).", valueName: "name"))
        var version: String?

        @Flag(help: "Print the differences as JSON.")
        var json = false

        func run() async throws {
            let differences = SchemaDiff.differences(
                from: try SchemaCommand.schema(of: old, version: version, wait: 0),
                to: try SchemaCommand.schema(of: new, version: version, wait: 0),
                newOnlyAdds: SchemaCommand.isModel(new))
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                print(String(decoding: try encoder.encode(differences), as: UTF8.self))
            } else if differences.isEmpty {
                print("the schemas say the same thing")
            } else {
                let width = differences.map(\.change.count).max() ?? 0
                for difference in differences {
                    let mark =
                        difference.deployable
                        ? "deployable" + (difference.reason.map { " (\($0))" } ?? "")
                        : "NOT deployable: " + (difference.reason ?? "")
                    print(difference.change.padding(toLength: width + 2, withPad: " ", startingAt: 0) + mark)
                }
            }
            let refused = differences.filter { !$0.deployable }.count
            if check && refused > 0 {
                throw CommandFailure.invalid(
                    "\(refused) change\(refused == 1 ? "" : "s") could not deploy to CloudKit's production schema")
            }
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make the store's schema the one in FILE (or the files together).",
            discussion: """
                Record types and fields that are new are added. A type or field that goes away, or \
                a field whose type changes, is accepted only while no stored record holds a value \
                for it; otherwise nothing changes and ckport says which values are in the way.

                Several files make one schema (several apps in one store): every type of each, and \
                a type two files declare (CloudKit's cloudkit.share) with the fields and grants of \
                both; a field they define differently is refused.

                  ckport schema import samples/family-todo/schema.ckdb --store family.sqlite
                  ckport schema import samples/family-todo/schema.ckdb \\
                      samples/family-calendar/schema.ckdb --store families.sqlite
                """
        )

        @Argument(help: ArgumentHelp("Schema files (cktool's 'DEFINE SCHEMA' text).", valueName: "file"))
        var files: [String]

        @Flag(help: "Show what would change, and change nothing.")
        var dryRun = false

        @OptionGroup var storeOptions: StoreOptions

        func run() async throws {
            var read: [(file: String, schema: Schema)] = []
            for file in files {
                let (schema, warnings) = try SchemaCommand.readChecked(file)
                if !storeOptions.quiet { for warning in warnings { Console.error("\(file):\(warning)") } }
                read.append((file, schema))
            }
            let schema = read.count == 1 ? read[0].schema : try Schema.merged(read)
            let store = try storeOptions.open(create: true)
            let change = try store.importSchema(schema, dryRun: dryRun)
            if !storeOptions.quiet {
                let lines = change.summary
                Console.error(
                    lines.isEmpty
                        ? "schema unchanged"
                        : (dryRun ? "would change:\n" : "schema changed:\n")
                            + lines.map { "  " + $0 }.joined(separator: "\n"))
            }
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the store's schema in cktool's layout.",
            discussion: """
                  ckport schema export                 # to standard output
                  ckport schema export -o schema.ckdb
                """
        )

        @Option(
            name: [.short, .customLong("output")],
            help: ArgumentHelp("Where to write ('-' for standard output).", valueName: "file"))
        var output: String = "-"

        @OptionGroup var storeOptions: StoreOptions

        func run() async throws {
            let store = try storeOptions.open(create: false)
            let file = try OutputFile(path: output)
            try file.write(SchemaPrinter.print(store.loadSchema()))
            try file.commit()
        }
    }

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check schema files without touching a store.",
            discussion: """
                Reports every problem with its line and column. Errors are what CloudKit's schema \
                language refuses (syntax, unknown types, duplicate names, ENCRYPTED where CloudKit \
                refuses it, unknown roles); warnings are ckport's advice on a schema CloudKit accepts \
                (an index on a field CloudKit cannot query, SEARCHABLE on a field that is not a \
                STRING). Warnings exit 0; --strict makes them errors.

                  ckport schema check schema.ckdb
                  ckport schema check --strict schema.ckdb
                  ckport schema check --print schema.ckdb   # also print it in cktool's layout
                """
        )

        @Argument(help: ArgumentHelp("Schema files.", valueName: "file"))
        var files: [String]

        @Flag(name: .customLong("print"), help: "Print each schema in cktool's layout.")
        var printSchema = false

        @Flag(help: "Treat warnings (ckport's advice) as errors.")
        var strict = false

        func run() async throws {
            var failed = false
            for file in files {
                do {
                    let (schema, warnings) = try SchemaCommand.readChecked(file)
                    for warning in warnings { Console.error("\(file):\(warning)") }
                    if strict && !warnings.isEmpty {
                        failed = true
                        Console.error(
                            "\(file): \(warnings.count) warning\(warnings.count == 1 ? "" : "s"), errors under --strict"
                        )
                        continue
                    }
                    let fields = schema.recordTypes.reduce(0) { $0 + $1.userFields.count }
                    let advice = warnings.isEmpty ? "" : ", \(warnings.count) warning\(warnings.count == 1 ? "" : "s")"
                    Console.error(
                        "\(file): ok — \(schema.recordTypes.count) record types, \(fields) fields, \(schema.roles.count) roles\(advice)"
                    )
                    if printSchema { print(SchemaPrinter.print(schema), terminator: "") }
                } catch {
                    failed = true
                    // Problems inside the schema read as a compiler's, FILE:LINE:COL: …; a file
                    // that cannot be read is an error like any other command's.
                    Console.error((error is SchemaError ? "" : "error: ") + Failures.classify(error).1)
                }
            }
            if failed { throw ExitCode(ExitStatus.invalidInput.rawValue) }
        }
    }
}
