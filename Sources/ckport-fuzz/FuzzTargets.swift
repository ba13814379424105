import CKPort
import Formats
import Foundation
import Migrations
import Records
import SQLiteStore
import SampleApps
import StoreCore

/// libFuzzer targets for ckport's readers. `scripts/fuzz.sh TARGET SECONDS` builds this with
/// `--sanitize fuzzer --sanitize address` and runs one target, chosen by $CKPORT_FUZZ_TARGET:
///
/// | target   | reads the input as                                                       |
/// |----------|--------------------------------------------------------------------------|
/// | schema   | a schema (`DEFINE SCHEMA …`)                                              |
/// | json     | JSON Lines, then a JSON document, of notes records (every field type)     |
/// | csv, tsv | CSV or TSV of Note records (any format the registry reads, by its name)   |
/// | plist    | an XML property list of notes records                                     |
/// | ics      | an iCalendar file through the family-calendar mapping                     |
/// | xcal     | an xCal file (RFC 6321) through the family-calendar mapping               |
/// | bundle   | a backup bundle, or a plain tar that the target gzips first (so that the  |
/// |          | fuzzer reaches the tar, manifest and record parsing, not only zlib);      |
/// |          | read through each inflater built in                                       |
/// | where    | a `--where` predicate, then evaluated on a record                         |
/// | xml      | any XML, through the XML reader (libxml2, entities and limits refused)    |
/// | coredata | a Core Data model's `contents`, then its CloudKit schema and lint         |
/// | expression | a `setField` expression, then evaluated on a notes record              |
/// | migration | a migration file (YAML), then compiled against the notes schema         |
/// | mapping  | a calendar mapping (YAML) against the family-calendar schema              |
/// | template | a CSV record-name template, then rendered for a notes record              |
/// | cloudkit-page | a CloudKit Web Services answer (records/query, changes/zone), as a pull |
/// |          | reads it, into family-todo records (shares and parents among them)        |
/// | leak-canary | nothing: leaks two objects on purpose, for `scripts/leak-check.sh`       |
///
/// Errors are expected; a crash, a hang or a leak is a finding.
enum FuzzTargets {
    static let target = ProcessInfo.processInfo.environment["CKPORT_FUZZ_TARGET"] ?? "schema"
    static let notes = SampleApp.notes.schema
    static let calendar = SampleApp.familyCalendar.schema
    static let todo = SampleApp.familyTodo.schema
    static let mapping = try! CalendarMapping.parse(
        SampleApp.familyCalendar.calendarMappingText!, file: "mapping", schema: calendar)
    /// A notes record with a value of every kind, for the targets that evaluate what they read.
    static let sampleNote = Record(
        id: RecordID(recordName: "n"), recordType: "Note",
        fields: [
            "title": .string("Milk"), "pinned": .int64(1), "createdAt": .timestamp(0),
            "tags": .list(.string, [.string("a")]),
            "readingMinutes": .double(2.5), "folder": .reference(Reference(recordName: "f")),
        ])
    static let bundlePath = FileManager.default.temporaryDirectory.appendingPathComponent(
        "ckport-fuzz-\(getpid()).ckbundle"
    ).path

    static func drain(_ source: RecordSource) {
        do {
            while let item = try source.next() {
                if case .asset(let staged) = item { staged.discard() }
            }
        } catch {}
    }

    /// Reads the input through the registry's reader of `format`: calendar formats through the
    /// family-calendar mapping, record formats as notes records (of type Note when the records
    /// name none).
    static func read(_ bytes: [UInt8], as format: RecordFormat) {
        var context = RecordReadContext(schema: notes, defaultRecordType: "Note")
        if format.kind == .calendar {
            context = RecordReadContext(schema: calendar)
            context.settings[CalendarReadSettings.self] = CalendarReadSettings(mapping: mapping)
        }
        guard let source = try? format.makeReader!(.bytes(bytes, name: "fuzz"), context) else { return }
        drain(source)
    }

    static func run(_ bytes: [UInt8]) {
        switch target {
        case "schema":
            _ = try? SchemaParser.parse(String(decoding: bytes, as: UTF8.self), file: "fuzz")
        case "json":
            // Both layouts, and the detection of which one an input is.
            read(bytes, as: .jsonLines)
            read(bytes, as: .jsonDetectingLayout)
        case "bundle":
            let gzipped = bytes.starts(with: [0x1F, 0x8B]) ? bytes : GzipCompressor.member(bytes)
            guard FileManager.default.createFile(atPath: bundlePath, contents: Data(gzipped)) else { return }
            // Half the inputs (by their length) go through the two-thread decoding verify uses;
            // every input through each inflater built in (zlib, and ISA-L where it is).
            for engine in GzipReader.Engine.available {
                if let reader = try? BundleReader(
                    path: bundlePath, limits: DecompressionLimits(maxTotalBytes: 64 << 20, maxRatio: 200),
                    stageAssets: true, decodeOnTwoThreads: bytes.count % 2 == 0, engine: engine)
                {
                    drain(reader)
                }
            }
        case "where":
            let text = String(decoding: bytes, as: UTF8.self)
            if let predicate = try? RecordPredicate.parse(text), let type = notes.recordType(named: "Note") {
                _ = try? predicate.matches(sampleNote, type: type)
                _ = predicate.description
            }
        case "expression":
            if let expression = try? Expression.parse(String(decoding: bytes, as: UTF8.self)) {
                _ = try? expression.evaluate(sampleNote)
                _ = expression.description
            }
        case "migration":
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "ckport-fuzz-\(getpid())-migrations"
            ).path
            try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: folder + "/0001_fuzz.yaml", contents: Data(bytes)),
                let set = try? MigrationSet.load(directory: folder), let first = set.migrations.first
            else { return }
            _ = try? CompiledMigration(first, schema: notes, latestVersion: set.latestVersion)
        case "mapping":
            _ = try? CalendarMapping.parse(String(decoding: bytes, as: UTF8.self), file: "fuzz", schema: calendar)
        case "template":
            if let template = try? NameTemplate(String(decoding: bytes, as: UTF8.self)) {
                _ = try? template.render(sampleNote, timeZone: TimeZone(identifier: "Europe/Berlin"))
            }
        case "xml":
            guard
                let reader = try? XMLReader(
                    bytes: bytes, name: "fuzz", limits: XMLReader.Limits(depth: 64, bytes: 1 << 20, textBytes: 1 << 16))
            else { return }
            while (try? reader.next()) != nil {}
        case "coredata":
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "ckport-fuzz-\(getpid()).xcdatamodel"
            ).path
            try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: folder + "/contents", contents: Data(bytes)),
                let model = try? CoreDataModel.read(folder)
            else { return }
            _ = try? CoreDataCloudKit.schema(for: model)
            _ = CoreDataCloudKit.problems(in: model)
        case "cloudkit-page":
            let zone = ZoneID(scope: .shared, zoneName: "household-1", ownerRecordName: "_owner")
            _ = try? CloudAnswerPage.read(Data(bytes), operation: "changes/zone", schema: todo, zone: zone)
        case "leak-canary":
            // Leaks on purpose (two objects that own each other), so that scripts/leak-check.sh
            // can show that its checker sees a leak before it reports that the readers have none.
            let first = LeakCanary()
            let second = LeakCanary()
            first.other = second
            second.other = first
        default:
            // Every other reader of the format registry, by the format's name (csv, tsv, ics…).
            guard let format = RecordFormats.named(target), format.makeReader != nil else {
                fatalError(
                    "CKPORT_FUZZ_TARGET must be schema, json, bundle, where, expression, migration, mapping, template, cloudkit-page, xml, coredata or a format ckport reads: \(RecordFormats.all.filter { $0.makeReader != nil }.map(\.name).joined(separator: ", "))"
                )
            }
            read(bytes, as: format)
        }
    }
}

final class LeakCanary {
    var other: LeakCanary?
}

#if FUZZING
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
        FuzzTargets.run(Array(UnsafeBufferPointer(start: data, count: size)))
        return 0
    }
#else
    @main
    struct FuzzTargetsMain {
        /// Without the fuzzer: runs each file named on the command line (or each file in a folder
        /// named there) through the target once, which replays a crash file or a whole corpus.
        static func main() {
            var count = 0
            for path in CommandLine.arguments.dropFirst() {
                var isFolder: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
                    FileHandle.standardError.write(Data("ckport-fuzz: no such file: \(path)\n".utf8))
                    exit(1)
                }
                let files =
                    isFolder.boolValue
                    ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map {
                        path + "/" + $0
                    }
                    : [path]
                for file in files {
                    guard let data = FileManager.default.contents(atPath: file) else { continue }
                    FuzzTargets.run(Array(data))
                    count += 1
                }
            }
            try? FileManager.default.removeItem(atPath: FuzzTargets.bundlePath)
            print("ckport-fuzz: \(FuzzTargets.target): \(count) inputs replayed")
        }
    }
#endif
