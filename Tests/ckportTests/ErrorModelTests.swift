import Foundation
import Testing
@testable import ckport
@testable import Formats
@testable import Migrations
@testable import Records
@testable import Store

/// The command line's exit statuses (Testing has an `ExitStatus` of its own).
typealias CLIExitStatus = ckport.ExitStatus

/// One error model: every public error type of the library says its category, and the
/// command line turns the category into its exit status.
@Suite("errors")
struct ErrorModelTests {
    /// One value of every public error type, with the category it must have.
    static let samples: [(any CKPortError, ErrorCategory)] = [
        (InterruptedError(signal: 2), .environment),
        (SaveRefusal(message: "record 'a' already exists"), .invalidInput),
        (AssetError("asset 'x' is missing"), .invalidInput),
        (ImportFailure(summary: ImportSummary(), truncated: false), .invalidInput),
        (MappingError(file: "m.yaml", line: 3, message: "no such field"), .invalidInput),
        (RecurrenceError(message: "bad RRULE"), .invalidInput),
        (ArchiveError(file: "b.ckbundle", message: "not gzip"), .invalidInput),
        (BundleError(file: "b.ckbundle", member: nil, message: "checksum"), .invalidInput),
        (RecordDecodingError(path: [.key("fields")], message: "not an object"), .invalidInput),
        (OutputError(path: "/out", message: "disk full"), .environment),
        (ValueError("not a number"), .invalidInput),
        (InputIssue(position: SourcePosition(file: "in.json", line: 1), message: "bad"), .invalidInput),
        (PredicateError(column: 3, message: "unknown operator"), .invalidInput),
        (SchemaError(diagnostics: [SchemaDiagnostic(position: TextPosition(line: 1, column: 1), message: "bad")]), .invalidInput),
        (JSONSyntaxError(offset: 4, message: "not valid JSON"), .invalidInput),
        (ExpressionError(column: 2, message: "bad"), .invalidInput),
        (RecordFailure(recordName: "a", recordType: "T", field: nil, step: "1", message: "bad"), .invalidInput),
        (ConversionProblem("bad"), .invalidInput),
        (MigrationError(file: "0001.yaml", line: 1, "bad"), .invalidInput),
        (StoreError.badQuery("bad"), .invalidInput),
        (StoreError.badToken("bad"), .invalidInput),
        (StoreError.deleteRefused("bad"), .invalidInput),
        (StoreError.schemaChangeRefused(["bad"]), .invalidInput),
        (StoreError.missing(path: "s.sqlite"), .environment),
        (StoreError.notAStore(path: "s.sqlite", reason: "not a database"), .environment),
        (StoreError.unsupportedFormat(path: "s.sqlite", version: 99), .environment),
        (StoreError.cannotWrite(path: "s.sqlite", reason: "full"), .environment),
        (StoreError.busy(path: "s.sqlite", seconds: 1), .environment),
        (StoreError.unavailable(path: "s.sqlite", reason: "permission denied"), .environment),
        (StoreError.corrupt("bad page"), .internal),
    ]

    @Test("every public error type of the library is a CKPortError, and each has a sample here")
    func everyTypeCategorised() throws {
        var declared: Set<String> = []
        var bare: [String] = []
        let sources = packageRoot.appendingPathComponent("Sources")
        let library = ["Records", "Store", "Formats", "Migrations"]
        let declaration = try Regex(#"public (?:final )?(?:struct|enum|class|actor) (\w+)[^{\n]*:[^{\n]*\b(Error|CKPortError)\b"#)
        for module in library {
            let enumerator = try #require(FileManager.default.enumerator(atPath: sources.appendingPathComponent(module).path))
            for case let file as String in enumerator where file.hasSuffix(".swift") {
                let text = try String(contentsOf: sources.appendingPathComponent(module).appendingPathComponent(file), encoding: .utf8)
                for match in text.matches(of: declaration) {
                    let name = String(match.output[1].substring ?? "")
                    declared.insert(name)
                    if match.output[2].substring == "Error" { bare.append("\(module)/\(file): \(name)") }
                }
            }
        }
        #expect(bare.isEmpty, "public error types that are not CKPortError: \(bare)")
        let sampled = Set(Self.samples.map { String(describing: type(of: $0.0)) })
        #expect(declared.count >= 20, "\(declared)")
        #expect(declared == sampled, "declared but not sampled: \(declared.subtracting(sampled)); sampled but not declared: \(sampled.subtracting(declared))")
    }

    @Test("each error's category, and the exit status the command line gives it")
    func categoriesAndStatuses() {
        for (error, category) in Self.samples {
            #expect(error.category == category, "\(type(of: error)): \(error)")
            let (status, message) = Failures.classify(error)
            let expected: CLIExitStatus = switch category {
            case .usage: .usage
            case .invalidInput: .invalidInput
            case .environment, .internal: .failure
            }
            #expect(status == expected, "\(type(of: error))")
            #expect(message.hasPrefix(error.description), "\(message)")
            #expect(Failures.isLibraryError(error))
        }
        // An error from outside the library is a failure, never mistaken for invalid input.
        struct Foreign: Error {}
        #expect(Failures.classify(Foreign()).0 == .failure)
        #expect(!Failures.isLibraryError(Foreign()))
    }
}
