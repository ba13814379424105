import Foundation
import Records
import TestSupport
import Testing

@testable import ckport

/// The command line is flags → options → an operation → what it prints. These checks keep
/// library work from growing back into it.
@Suite("the command line stays thin")
struct LayeringTests {
    /// Types the command line declares that are not commands, option groups or flag values,
    /// each with why it belongs to the command line.
    static let commandLineTypes: [String: String] = [
        "ExitStatus": "the exit statuses are the command line's promise to shells",
        "CommandFailure": "an error that already carries its exit status and message",
        "Failures": "maps a library error's category to an exit status and adds the flag to use",
        "Console": "messages for people on standard error, numbers grouped for reading",
        "ProgressLine": "a terminal's one-line progress display",
        "ArgumentChecks": "turns flag values (time zones, delimiters) into library values",
        "Suggestions": "the nearest command or flag name for a typo",
        "CalendarMappingChoice": "the default mapping comes from the sample apps, which the library does not ship",
        "FormatOptionGroup": "help groups of flags that only some formats take",
        "CommandLineWords": "the flags the library's messages name, where the library speaks of settings",
        "BuildCommit": "the commit of this build, written by scripts/release.sh into the executable it builds",
        "CloudConnection":
            "a client built from the CloudKit flags, with the terminal's messages about its token file (the library's part is CloudKitClient and WebAuthTokenFile)",
    ]

    static func commandLineFiles() throws -> [(name: String, text: String)] {
        let root = packageRoot.appendingPathComponent("Sources/ckport")
        let enumerator = try #require(FileManager.default.enumerator(atPath: root.path))
        return try enumerator.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }.sorted().map { file in
            (file, try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8))
        }
    }

    @Test("every type the command line declares is a command, an option group, a flag value, or listed with its reason")
    func typesBelongToTheCommandLine() throws {
        let declaration = try Regex(#"(?:struct|enum|class|protocol|actor) (\w+)([^{\n]*)\{"#)
        var unexpected: [String] = []
        var seen: Set<String> = []
        for (file, text) in try Self.commandLineFiles() {
            for match in text.matches(of: declaration) {
                let name = String(match.output[1].substring ?? "")
                let conformances = String(match.output[2].substring ?? "")
                seen.insert(name)
                let parsing = ["ParsableCommand", "ParsableArguments", "ExpressibleByArgument"].contains {
                    conformances.contains($0)
                }
                if !parsing && Self.commandLineTypes[name] == nil { unexpected.append("\(file): \(name)") }
            }
        }
        #expect(
            unexpected.isEmpty,
            "types in the command line that a library user may need: move them to CKPort, or list them here with the reason they stay: \(unexpected)"
        )
        #expect(
            Set(Self.commandLineTypes.keys).isSubset(of: seen),
            "listed but gone: \(Set(Self.commandLineTypes.keys).subtracting(seen))")
    }

    @Test("the command line reads, writes, imports and migrates only through the operations and the format registry")
    func noEngineWorkInCommands() throws {
        let engines = [
            "RecordImporter(", "MigrationRunner(", "BundleWriter(", "BundleReader(", "ICalendarExporter(",
            "CalendarArchiveExporter(",
            "JSONRecordReader(", "CSVRecordReader(", "ICalendarRecordReader(", "CalendarArchiveReader(",
            "JSONRecordWriter(", "CSVRecordWriter(", "RecordValidator(",
        ]
        var uses: [String] = []
        for (file, text) in try Self.commandLineFiles() {
            for engine in engines where text.contains(engine) { uses.append("\(file): \(engine)") }
        }
        #expect(uses.isEmpty, "\(uses)")
    }

    @Test("the store's path comes from the command line: --store, then $CKPORT_STORE, then ./ckport.sqlite")
    func storePath() {
        #expect(StoreOptions.resolvePath(nil, environment: ["CKPORT_STORE": "/x/y.sqlite"]) == "/x/y.sqlite")
        #expect(StoreOptions.resolvePath("a.sqlite", environment: ["CKPORT_STORE": "/x/y.sqlite"]) == "a.sqlite")
        #expect(StoreOptions.resolvePath(nil, environment: [:]) == "ckport.sqlite")
        #expect(StoreOptions.resolvePath("", environment: ["CKPORT_STORE": ""]) == "ckport.sqlite")
    }

    /// Every Swift file of `module`, with its text.
    static func sources(of module: String) throws -> [(file: String, text: String)] {
        let root = packageRoot.appendingPathComponent("Sources/\(module)")
        let enumerator = try #require(FileManager.default.enumerator(atPath: root.path))
        return try enumerator.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }.sorted().map {
            ("\(module)/\($0)", try String(contentsOf: root.appendingPathComponent($0), encoding: .utf8))
        }
    }

    @Test("the store contract, the formats and the migrations know no store: no GRDB, no PostgresNIO, no backend")
    func coreKnowsNoBackend() throws {
        let backendImport = try Regex(
            #"(?m)^\s*(?:@_exported |@testable |internal |public )?import (?:(?:class|struct|enum|protocol) )?(GRDB\w*|PostgresNIO|SQLiteStore|PostgresStore)\b"#
        )
        var found: [String] = []
        var files = 0
        for module in ["StoreCore", "StoreConformance", "Formats", "Migrations"] {
            for (file, text) in try Self.sources(of: module) {
                files += 1
                for match in text.matches(of: backendImport) { found.append("\(file): \(text[match.range])") }
            }
        }
        #expect(files > 50, "the modules' files were not found (\(files))")
        #expect(found.isEmpty, "\(found)")
    }

    @Test("no code outside a store's module casts to that store's types: fast paths are capabilities")
    func noDowncastToABackend() throws {
        let owned = [
            "SQLiteStore": ["RecordStore", "StoreSession", "RecordRow"],
            "PostgresStore": ["PostgresStore", "PostgresSession"],
            "Formats": ["CSVRecordWriter", "JSONRecordWriter", "BundleWriter"],
        ]
        let modules = try FileManager.default.contentsOfDirectory(
            atPath: packageRoot.appendingPathComponent("Sources").path)
        var casts: [String] = []
        var files = 0
        for (owner, types) in owned {
            let cast = try Regex(#"\b(?:as[?!]?|is)\s+(?:any\s+)?("# + types.joined(separator: "|") + #")\b"#)
            for module in modules where module != owner {
                for (file, text) in try Self.sources(of: module) {
                    files += 1
                    for match in text.matches(of: cast) { casts.append("\(file): \(text[match.range])") }
                }
            }
        }
        #expect(files > 200, "the sources were not found (\(files))")
        #expect(casts.isEmpty, "\(casts)")
    }

    @Test("ckport's record type is `Record` everywhere: no file needs its module's name to tell it from GRDB's")
    func recordNameIsUnambiguous() throws {
        var spelled: [String] = []
        let qualified = try Regex(#"\bRecords\.Record\b"#)
        for folder in ["Sources", "Tests", "Examples/Sources"] {
            let root = packageRoot.appendingPathComponent(folder)
            let enumerator = try #require(FileManager.default.enumerator(atPath: root.path))
            for case let file as String in enumerator where file.hasSuffix(".swift") {
                let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
                if text.contains(qualified) { spelled.append("\(folder)/\(file)") }
            }
        }
        #expect(spelled.isEmpty, "\(spelled)")
    }

    @Test("the library's messages name no flag: where they mention a setting, the command line says its flag")
    func libraryNamesNoFlags() throws {
        var flagged: [String] = []
        let flag = try Regex(#"--[a-z][a-z-]+"#)
        for module in [
            "Records", "StoreCore", "SQLiteStore", "PostgresStore", "Formats", "Migrations", "CloudKitWeb", "CKPort",
        ] {
            let root = packageRoot.appendingPathComponent("Sources/\(module)")
            let enumerator = try #require(FileManager.default.enumerator(atPath: root.path))
            for case let file as String in enumerator where file.hasSuffix(".swift") {
                let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    let code = line.trimmingCharacters(in: .whitespaces)
                    if code.hasPrefix("//") { continue }
                    // A flag inside a string literal of code.
                    if line.contains("\""), line.contains(flag) { flagged.append("\(module)/\(file):\(number + 1)") }
                }
            }
        }
        #expect(flagged.isEmpty, "\(flagged)")
        let zone = ZoneID(scope: .shared, zoneName: "household-1", ownerRecordName: "_a1")
        let samples: [Wording] = [
            .allowNewFields, .allowNewTypes, .startNewChangeChain, .createStore(path: "s.sqlite"), .updatingModes,
            .predicate("a == 1"), .predicateWord, .sortField("title"), .chooseRecordTypes, .chooseModelVersion,
            .skipInvalid, .expansionWindow, .expandForOccurrences, .importWithoutExpanding, .keepWholeOrRefuse,
            .keepWhole, .importIntoArchive, .fixedField(field: "f", text: "v"), .passphraseSource, .defaultRecordType,
            .giveRecordType, .fieldList, .mapColumn(header: "Due"), .remapColumn(header: "Due"), .nameTemplate("{x}"),
            .nameTemplateWord, .repairHistory, .forceAppendOnly, .createOrForcePush, .keepAssetBytes, .allowUnencrypted,
            .signInAgain, .upgradeStore(path: "s.sqlite"), .upgradeStoreFirst(path: "s.sqlite"), .pushMode("update"),
            .storeWait, .waitLonger, .restoreBaseFirst, .restoreModes, .storeOfItsOwn, .encryptionNeedsPassphrase,
            .giveSchema, .strictImport, .plainStyle, .canonicalStyle, .chooseZone, .giveRowsZone(zone), .sourceChoice,
        ]
        // Every case is sampled: a new one fails to compile here until it is added above.
        func sampled(_ wording: Wording) -> Bool {
            switch wording {
            case .allowNewFields, .allowNewTypes, .startNewChangeChain, .createStore, .updatingModes, .predicate,
                .predicateWord, .sortField, .chooseRecordTypes, .chooseModelVersion, .skipInvalid, .expansionWindow,
                .expandForOccurrences, .importWithoutExpanding, .keepWholeOrRefuse, .keepWhole, .importIntoArchive,
                .fixedField, .passphraseSource, .defaultRecordType, .giveRecordType, .fieldList, .mapColumn,
                .remapColumn, .nameTemplate, .nameTemplateWord, .repairHistory, .forceAppendOnly, .createOrForcePush,
                .keepAssetBytes, .allowUnencrypted, .signInAgain, .upgradeStore, .upgradeStoreFirst, .pushMode,
                .storeWait, .waitLonger, .restoreBaseFirst, .restoreModes, .storeOfItsOwn, .encryptionNeedsPassphrase,
                .giveSchema, .strictImport, .plainStyle, .canonicalStyle, .chooseZone, .giveRowsZone, .sourceChoice:
                return samples.contains(wording)
            }
        }
        #expect(samples.count == 48)
        for wording in samples {
            #expect(sampled(wording))
            #expect(!wording.dataText.contains("--"), "\(wording): \(wording.dataText)")
            let words = try #require(CommandLineWords.words(wording))
            #expect(words.contains("--") || words.contains("ckport "), "\(wording): \(words)")
        }
    }
}
