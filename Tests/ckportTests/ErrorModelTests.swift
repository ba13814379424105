import CloudKitWeb
import Foundation
import ObjectStorage
import Testing
import WebServing

@testable import CKPort
@testable import Formats
@testable import Migrations
@testable import Records
@testable import SQLiteStore
@testable import StoreCore
@testable import ckport

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
        (
            SchemaError(diagnostics: [SchemaDiagnostic(position: TextPosition(line: 1, column: 1), message: "bad")]),
            .invalidInput
        ),
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
        (CalendarMappingMissing(file: "family.ics"), .usage),
        (CalendarFixedFieldUnknown(field: "status", text: "pending", recordTypes: ["Event"]), .usage),
        (CloudKitRequestError.invalidContainer("com.example"), .usage),
        (CloudKitServerError(serverErrorCode: "THROTTLED", retryAfter: 5, status: 429), .environment),
        (
            CloudKitServerError(
                serverErrorCode: "AUTHENTICATION_REQUIRED", reason: "request needs authorization",
                redirectURL: "https://idmsa.apple.com/IDMSWebAuth/auth?oauth_token=x", status: 421), .authentication
        ),
        (TokenFileError(path: "web.txt", reason: "cannot create a file beside it: Permission denied"), .environment),
        (
            PrivateFileError(
                path: "/tmp",
                reason:
                    "cannot make a private folder there (Permission denied); set TMPDIR to a folder you can write to"),
            .environment
        ),
        (
            AccountMismatch(
                store: "family.sqlite", source: "iCloud.com.example.App/production/private", pulledAs: "_aca0",
                signedInAs: "_b1b2"), .usage
        ),
        (
            PullRequestError(
                description: "CloudKit gives 1 to 200 records per answer; 500 records per page cannot be asked for"),
            .usage
        ),
        (CloudKitUnavailable(operation: "records/changes", attempts: 6, lastProblem: "connection reset"), .environment),
        (ConnectionFailure(server: "127.0.0.1:8181", code: ECONNREFUSED, reason: "connection refused"), .environment),
        (
            CloudPushStopped(
                partial: PushResult(destination: "iCloud.com.example.Notes/development/private"),
                underlying: "CloudKit answered QUOTA_EXCEEDED (HTTP 413)", underlyingCategory: .environment),
            .environment
        ),
        (WebServer.ServerError("cannot listen on 127.0.0.1:8642: Address already in use"), .environment),
        (InputFileError(path: "in.json", "no such file"), .invalidInput),
        (
            RecordInAnotherZone(
                position: SourcePosition(file: "tasks.csv", line: 2, column: 1), recordName: "task-1",
                recordType: "Task",
                given: .defaultZone, stored: ZoneID(scope: .shared, zoneName: "household-1", ownerRecordName: "_2c35")),
            .invalidInput
        ),
        (
            SchemaConflict(
                recordType: "Task", field: "title", first: ("a.ckdb", "STRING"), second: ("b.ckdb", "INT64")),
            .invalidInput
        ),
        (
            XMLInputError(file: "Model.xcdatamodel/contents", line: 3, column: 7, message: "not well-formed"),
            .invalidInput
        ),
        (OperationError.ambiguousRecordName("n-1", zones: ["private/A", "private/B"]), .invalidInput),
        (FormatNotReadable(format: "iCalendar", file: "x.ics"), .usage),
        (
            PlistWriteError(
                file: "tasks.plist", recordName: "t-1", recordType: "Task", field: "title",
                message: "holds the character U+0001 at character 3, which XML 1.0 cannot hold (not even as &#…;)"),
            .invalidInput
        ),
        (
            XCalWriteError(
                file: "family.xcal", subject: "VEVENT 'e-1' RRULE",
                message: "RRULE part X-FOO has no place in xCal's <recur>"), .invalidInput
        ),
        (OperationError.bundleNotSound(bundle: "b.ckbundle", problems: ["checksum"]), .invalidInput),
        (OperationError.noBundles, .usage),
        (OperationError.chainStartsIncremental(bundle: "t.ckbundle", base: "ck1-a-1"), .invalidInput),
        (OperationError.chainFullBundleInside(bundle: "t.ckbundle", previous: "m.ckbundle"), .invalidInput),
        (
            OperationError.chainFromOtherStore(
                bundle: "t.ckbundle", store: "a", previous: "m.ckbundle", previousStore: "b"), .invalidInput
        ),
        (
            OperationError.chainBroken(
                bundle: "t.ckbundle", base: "ck1-a-5", previous: "m.ckbundle", previousEnd: "ck1-a-3", missing: true),
            .invalidInput
        ),
        (OperationError.storeNotEmpty(store: "s.sqlite", records: 1200), .usage),
        (
            OperationError.bundleOfAnotherSchema(bundle: "b.ckbundle", missingTypes: ["Note"], store: "s.sqlite"),
            .invalidInput
        ),
        (OperationError.noPassphrase, .usage),
        (OperationError.noSchema(store: "s.sqlite", storeExists: true), .invalidInput),
        (OperationError.inputNotKept(["1 VALARM"]), .invalidInput),
        (OperationError.unknownRecordType("Nope", known: ["Note"]), .invalidInput),
        (OperationError.plainStyleCollisions(["Note.recordName"]), .invalidInput),
        (OperationError.recordsWouldFail, .invalidInput),
        (OperationError.noMigrations(directory: "migrations/none"), .invalidInput),
        (OperationError.formatCannotHold(format: "CSV", what: "deleted records"), .usage),
        (ScratchError(folder: "/tmp/ckport-1/names-1", reason: "database or disk is full"), .environment),
        (
            ObjectStorageError(
                kind: .refused, operation: "PUT snapshots/a", bucket: "backups", status: 403,
                code: "SignatureDoesNotMatch",
                serverMessage: "The request signature we calculated does not match"), .authentication
        ),
        (Feeds.FeedError.badName("../x"), .usage),
        (PublishError.definedOtherwise(collection: "https://dav.example.org/anna/family/"), .usage),
        (PullError.wouldDeleteMost(collection: "https://dav.example.org/anna/school/", deleting: 30, of: 31), .usage),
        (
            CalDAVError(
                kind: .refused, request: "PUT https://dav.example.org/anna/family/e-1.ics", status: 401,
                detail: "not signed in"), .authentication
        ),
        (RepositoryError.wrongPassphrase(location: "s3://backups/family"), .authentication),
        (RepositoryError.cannotDelete(location: "s3://backups/family", object: "snapshots/ab"), .authentication),
        (RepositoryError.locked(location: "/mnt/nas/ckport", holder: "forget by ann on nas"), .environment),
        (RepositoryError.ambiguousStore(location: "/mnt/nas/ckport", stores: ["a1", "b2"]), .usage),
        (
            RepositoryError.damaged(location: "/mnt/nas/ckport", object: "data/ab/cd", problem: "is missing"),
            .invalidInput
        ),
    ]

    @Test("every public error type of the library is a CKPortError, and each has a sample here")
    func everyTypeCategorised() throws {
        var declared: Set<String> = []
        var bare: [String] = []
        let sources = packageRoot.appendingPathComponent("Sources")
        let library = [
            "Records", "StoreCore", "SQLiteStore", "Formats", "Migrations", "CKPort", "CloudKitWeb", "WebServing",
            "ObjectStorage",
        ]
        let declaration = try Regex(
            #"public (?:final )?(?:struct|enum|class|actor) (\w+)[^{\n]*:[^{\n]*\b(Error|CKPortError)\b"#)
        for module in library {
            let enumerator = try #require(
                FileManager.default.enumerator(atPath: sources.appendingPathComponent(module).path))
            for case let file as String in enumerator where file.hasSuffix(".swift") {
                let text = try String(
                    contentsOf: sources.appendingPathComponent(module).appendingPathComponent(file), encoding: .utf8)
                for match in text.matches(of: declaration) {
                    let name = String(match.output[1].substring ?? "")
                    declared.insert(name)
                    if match.output[2].substring == "Error" { bare.append("\(module)/\(file): \(name)") }
                }
            }
        }
        #expect(bare.isEmpty, "public error types that are not CKPortError: \(bare)")
        let sampled = Set(Self.samples.map { String(describing: type(of: $0.0)) })
        // Every case of the operations' error is sampled too.
        let operationSource = try String(
            contentsOf: sources.appendingPathComponent("CKPort/OperationError.swift"), encoding: .utf8)
        let cases = Set(
            operationSource.split(separator: "\n").filter { $0.hasPrefix("    case ") }.map { line in
                String(line.dropFirst(9).prefix { $0.isLetter || $0.isNumber })
            })
        let sampledCases = Set(Self.samples.compactMap { $0.0 as? OperationError }.map(Self.caseName))
        #expect(
            cases.count >= 10 && cases == sampledCases, "declared: \(cases.sorted()); sampled: \(sampledCases.sorted())"
        )
        #expect(declared.count >= 20, "\(declared)")
        #expect(
            declared == sampled,
            "declared but not sampled: \(declared.subtracting(sampled)); sampled but not declared: \(sampled.subtracting(declared))"
        )
    }

    @Test("each error's category, and the exit status the command line gives it")
    func categoriesAndStatuses() {
        for (error, category) in Self.samples {
            #expect(error.category == category, "\(type(of: error)): \(error)")
            let (status, message) = Failures.classify(error)
            let expected: CLIExitStatus =
                switch category {
                case .usage: .usage
                case .invalidInput: .invalidInput
                case .environment, .internal: .failure
                case .authentication: .signIn
                }
            #expect(status == expected, "\(type(of: error))")
            // The library speaks of the data; the command line says the same message, with
            // the settings it mentions named as its flags.
            #expect(!error.description.contains("--"), "\(error.description)")
            #expect(message.hasPrefix(error.explanation.worded(CommandLineWords.words)), "\(message)")
            #expect(error.explanation.description == error.description)
            #expect(Failures.isLibraryError(error))
        }
        // An error from outside the library is a failure, never mistaken for invalid input.
        struct Foreign: Error {}
        #expect(Failures.classify(Foreign()).0 == .failure)
        #expect(!Failures.isLibraryError(Foreign()))
    }

    /// An operation error's case name.
    static func caseName(_ error: OperationError) -> String {
        if let label = Mirror(reflecting: error).children.first?.label { return label }
        switch error {
        case .noBundles: return "noBundles"
        case .noPassphrase: return "noPassphrase"
        case .recordsWouldFail: return "recordsWouldFail"
        default: return "?"
        }
    }

    @Test("the command line names the flag where an operation speaks of a setting, and keeps the data's words")
    func commandLineHints() {
        let hinted: [(OperationError, String)] = [
            (
                .storeNotEmpty(store: "s.sqlite", records: 1200),
                "the store s.sqlite already holds 1,200 records; pass --mode upsert, replace or newer to restore into it"
            ),
            (.noPassphrase, "--encrypt needs a passphrase: --passphrase-file FILE, or $CKPORT_PASSPHRASE"),
            (
                .inputNotKept(["1 VALARM"]),
                "--strict: the mapping would not keep 1 VALARM; nothing was imported (--mapping archive keeps a calendar whole)"
            ),
            (
                .chainStartsIncremental(bundle: "t.ckbundle", base: "ck1-a-1"),
                "t.ckbundle is incremental (it starts at ck1-a-1); restore the full bundle it builds on first, or pass --mode to apply it to a store restored earlier"
            ),
        ]
        for (error, text) in hinted {
            #expect(Failures.classify(error).1 == text)
            #expect(error.description != text)
        }
        let plain = OperationError.chainFromOtherStore(
            bundle: "t.ckbundle", store: "a", previous: "m.ckbundle", previousStore: "b")
        #expect(
            Failures.classify(plain).1 == "t.ckbundle comes from store a, m.ckbundle from b: they are not one chain")
    }

    @Test(
        "a message keeps the settings it mentions apart from its words: the library says the data's, the command line its flags, through every wrapper"
    )
    func wordingsTravelWithTheError() throws {
        // A validator's issue, wrapped in an input issue, wrapped in an import failure.
        let issue = InputIssue(
            position: SourcePosition(file: "tasks.jsonl", line: 3), recordName: "t1", recordType: "Task", field: "due",
            message: "record type 'Task' has no field 'due' (\(Wording.allowNewFields))")
        var summary = ImportSummary()
        summary.issues = [issue]
        let failure = ImportFailure(summary: summary, truncated: false)
        #expect(failure.explanation.mentions(.allowNewFields) && failure.explanation.mentions(.skipInvalid))
        #expect(failure.description.contains("(allow new fields to add it to the schema)"))
        #expect(!failure.description.contains("--"))
        let said = Failures.classify(failure).1
        #expect(
            said.contains(
                "tasks.jsonl:3: record 't1' (Task), field 'due': record type 'Task' has no field 'due' (use --allow-new-fields to add it to the schema)"
            ))
        #expect(said.hasSuffix("(use --skip-invalid --rejects FILE to import the valid records)"))
        // A pull says its own remedy in the same place, by the wording, not by its words.
        let pulled = issue.explanation.replacing(.allowNewFields, with: .allowNewTypes)
        #expect(pulled.commandLine.contains("(use --allow-new-types to add it to the schema)"))
        #expect(!pulled.mentions(.allowNewFields))
        // A push stopped by an expired sign-in keeps the remedy of the error that stopped it.
        let expired = CloudKitServerError(serverErrorCode: "AUTHENTICATION_REQUIRED", reason: "", status: 421)
        let stopped = CloudPushStopped(
            partial: PushResult(destination: "iCloud.com.example.Notes/development/private"),
            underlying: expired.explanation, underlyingCategory: expired.category)
        #expect(Failures.classify(stopped).1.contains("sign in again with 'ckport cloud login'"))
        #expect(stopped.description.contains("sign in again for a new web auth token"))
        // A store another process holds: the wait is the command line's flag.
        let busy = StoreError.busy(path: "s.sqlite", seconds: 5)
        #expect(Failures.classify(busy).1.hasSuffix("nothing was changed (--wait SECONDS waits longer)"))
        #expect(busy.description.hasSuffix("nothing was changed (a longer wait may outlast it)"))
        // Adjacent text is one part; interpolated messages keep their parts.
        let joined: Message = "a \(Message("b")) c \(Wording.storeWait) d"
        #expect(joined.parts == [.text("a b c "), .wording(.storeWait), .text(" d")])
        #expect(Message.joined([Message("x"), Message(.storeWait)], separator: "; ").commandLine == "x; --wait")
    }

}
