import ArgumentParser
import CKPort
import CloudKitWeb
import Formats
import Foundation
import Records

/// Where a CloudKit database is and how to sign in to it: flags for the address, files or
/// environment variables for the secrets (never the command line, where other users and the
/// shell's history would see them).
struct CloudOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The container identifier, e.g. iCloud.com.example.App (required).", valueName: "id"))
    var container: String?

    @Option(help: "development or production.")
    var environment: String = "development"

    @Option(help: "The database: private, shared or public.")
    var database: String = "private"

    @Option(help: ArgumentHelp("A server-to-server key's ID (public database only), with --key-file.", valueName: "id"))
    var keyID: String?

    @Option(help: ArgumentHelp("The PEM file with the server-to-server key's private half.", valueName: "file"))
    var keyFile: String?

    @Option(
        help: ArgumentHelp(
            "A file whose first line is the API token. Default: $CKPORT_CK_API_TOKEN.", valueName: "file"))
    var apiTokenFile: String?

    @Option(
        help: ArgumentHelp(
            "A file whose first line is the user's web auth token; ckport writes the next token back to it. Default: $CKPORT_CK_WEB_AUTH_TOKEN.",
            valueName: "file"))
    var webAuthTokenFile: String?

    @Option(
        help: ArgumentHelp(
            "The CloudKit Web Services server (default Apple's), e.g. a ckport-emulator's URL.", valueName: "url"))
    var baseURL: String?

    @Option(
        help: ArgumentHelp(
            "The longest wait CloudKit may ask for (retryAfter) that ckport waits out before asking again; a longer one ends the command.",
            valueName: "seconds"))
    var maxWait: Double = 900

    func validate() throws {
        guard CloudKitDatabase.Environment(rawValue: environment) != nil else {
            throw ValidationError("--environment is development or production")
        }
        guard CloudKitDatabase.Scope(rawValue: database) != nil else {
            throw ValidationError("--database is private, shared or public")
        }
        if (keyID == nil) != (keyFile == nil) { throw ValidationError("--key-id and --key-file go together") }
        if let baseURL, URL(string: baseURL)?.scheme == nil {
            throw ValidationError("--base-url takes a URL such as http://127.0.0.1:8181")
        }
        guard maxWait >= 0 else { throw ValidationError("--max-wait is a number of seconds, 0 or more") }
    }

    func cloudDatabase() throws -> CloudKitDatabase {
        guard let container else {
            throw CommandFailure.usage("--container names the CloudKit container, e.g. iCloud.com.example.App")
        }
        return try CloudKitDatabase(
            container: container, environment: CloudKitDatabase.Environment(rawValue: environment)!,
            scope: CloudKitDatabase.Scope(rawValue: database)!,
            baseURL: baseURL.flatMap(URL.init(string:)) ?? CloudKitDatabase.appleBaseURL)
    }

    /// The API token, from its file or the environment.
    func apiToken() throws -> String {
        if let apiTokenFile { Console.warnIfShared(apiTokenFile, "the API token") }
        guard
            let api = try apiTokenFile.map(CloudKitCredentials.token(fromFile:))
                ?? ProcessInfo.processInfo.environment["CKPORT_CK_API_TOKEN"], !api.isEmpty
        else {
            throw CommandFailure.usage(
                "give an API token (--api-token-file FILE or $CKPORT_CK_API_TOKEN) and a web auth token, or a server-to-server key (--key-id, --key-file) for the public database"
            )
        }
        return api
    }

    func credentials() throws -> CloudKitCredentials {
        if let keyID, let keyFile {
            Console.warnIfShared(keyFile, "a server-to-server key")
            return .serverToServer(try ServerToServerKey(keyID: keyID, file: keyFile))
        }
        if let webAuthTokenFile { Console.warnIfShared(webAuthTokenFile, "a web auth token") }
        let environment = ProcessInfo.processInfo.environment
        let api = try apiToken()
        guard
            let web = try webAuthTokenFile.map(CloudKitCredentials.token(fromFile:))
                ?? environment["CKPORT_CK_WEB_AUTH_TOKEN"], !web.isEmpty
        else {
            throw CommandFailure.usage(
                "give the user's web auth token: --web-auth-token-file FILE or $CKPORT_CK_WEB_AUTH_TOKEN")
        }
        return .webToken(apiToken: api, webAuthToken: web)
    }

    /// A client for the database, over HTTP: retries are reported on standard error (or on the
    /// progress line), and each new web auth token goes to --web-auth-token-file as it arrives
    /// (one kept only in memory would be lost with a killed process).
    func connect(quiet: Bool, progress: ProgressLine? = nil) throws -> CloudConnection {
        let keeper = webAuthTokenFile.map { WebAuthTokenFile(path: $0) }
        let client = try CloudKitClient(
            database: try cloudDatabase(), credentials: try credentials(), transport: HTTPClientTransport(),
            policy: RetryPolicy(longestWait: maxWait),
            onRetry: { operation, seconds, reason in
                guard !quiet else { return }
                // "CloudKit answered THROTTLED (HTTP 429): …" → THROTTLED
                let answered = "CloudKit answered "
                let code =
                    reason.hasPrefix(answered)
                    ? String(reason.dropFirst(answered.count).prefix { $0 != " " }) : "no answer"
                let until = seconds >= 60 ? " (until \(CloudOptions.clock(Date().addingTimeInterval(seconds))))" : ""
                if progress?.note("\(code): waiting \(Console.seconds(seconds))\(until)") != true {
                    Console.error(
                        "waiting \(Console.seconds(seconds))\(until) before asking \(operation) again: \(reason)")
                }
            },
            onWebAuthToken: { token in keeper?.keep(token) })
        return CloudConnection(client: client, keeper: keeper, quiet: quiet)
    }

    /// `14:05 UTC`: a time of day as waits and tokens are told.
    static func clock(_ date: Date) -> String {
        let text = ISO8601DateFormatter().string(from: date)
        return String(text.dropFirst(11).prefix(5)) + " UTC"
    }
}

/// A client, and the file its web auth tokens go to.
struct CloudConnection: Sendable {
    let client: CloudKitClient
    let keeper: WebAuthTokenFile?
    let quiet: Bool

    /// At the end: the first failure to keep a token in --web-auth-token-file, if there was
    /// one; or a word that the environment's token was turned over.
    func finish() async throws {
        guard let next = await client.webAuthToken else { return }
        if let keeper {
            try keeper.checkKept()
            if keeper.replacedElsewhere && !quiet {
                Console.error(
                    "note: \(keeper.path) was written by another ckport while this one ran (a new sign-in?); it was left as that one wrote it"
                )
            }
        } else if !quiet, next != ProcessInfo.processInfo.environment["CKPORT_CK_WEB_AUTH_TOKEN"] {
            Console.error(
                "note: CloudKit turned the web auth token over; --web-auth-token-file FILE keeps the newest one")
        }
    }
}

struct PullCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pull",
        abstract: "Pull a CloudKit database into the store, incrementally.",
        discussion: """
            Custom zones of the private and shared databases come through their change feeds: each \
            page of records, its deletions and the zone's sync token commit together, so the next \
            pull fetches only what changed and a pull cut off anywhere resumes where it stopped. \
            The public database and default zones are read with queries per record type of the \
            store's schema: only types whose ___recordID is QUERYABLE (and not system types such as \
            Users) can be queried, and queries do not see deletions; the types left unread are \
            listed. Import the container's schema first (cktool export-schema writes it).

            A feed never stalls: a record the store cannot take (a type or field the schema lacks, \
            such as a share's cloudkit.share or a type added since the schema was exported) is left \
            out, counted, and written with its reason and its zone to --rejects FILE, and the rest \
            of its page is saved; the exit status is then 3. The zone is read again from the start \
            by the next pull, so that once the schema has the type or field (ckport schema import, \
            or --allow-new-types, which adds such types and fields) the records come in. A zone whose sync token expired, or that was \
            reset, is fetched again from the start and what CloudKit no longer holds becomes \
            tombstones; a zone deleted in CloudKit loses its records the same way.

            CloudKit's THROTTLED, TRY_AGAIN_LATER and INTERNAL_ERROR are retried (after its \
            retryAfter, up to --max-wait, else with backoff). An expired web auth token ends the \
            pull with exit status 4, before anything is written: sign in again (ckport cloud \
            login). With --assets each asset file is downloaded and kept in the store with its \
            record.

              ckport schema import schema.ckdb
              ckport pull --container iCloud.com.example.App --environment production \\
                  --database private --api-token-file api.txt --web-auth-token-file web.txt \\
                  --rejects left-out.jsonl
              ckport pull --container iCloud.com.example.App --database public \\
                  --key-id 2f3a… --key-file eckey.pem
            """
    )

    @OptionGroup(title: "CloudKit") var cloud: CloudOptions

    @Option(
        help: ArgumentHelp(
            "Records per page to ask for, 1 to 200 (CloudKit's most, and its default).", valueName: "count"))
    var pageSize: Int?

    @Flag(
        help:
            "Also download each asset file the records name and keep it in the store, with its record (without: the store keeps the asset's checksum, size and download URL)."
    )
    var assets = false

    @Flag(
        name: [.customLong("allow-new-types"), .customLong("allow-new-fields")],
        help: "Add record types and fields the schema lacks to it, instead of leaving their records out.")
    var allowNewTypes = false

    @Option(
        help: ArgumentHelp(
            "Append the records left out, each with its reason and CloudKit's JSON, to this file (JSON Lines, made for you alone), synced before each page is saved.",
            valueName: "file"))
    var rejects: String?

    @Option(
        help: ArgumentHelp(
            "Zones (or record types) fetched at once, at most. With a web auth token the requests still go one at a time (each answer brings the next token); pages are saved while the next ones travel.",
            valueName: "count"))
    var concurrency = 4

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        guard concurrency >= 1 else { throw ValidationError("--concurrency is at least 1") }
        if let pageSize, !(1...CloudSync.maxResultsLimit).contains(pageSize) {
            throw ValidationError(
                "--page-size is 1 to \(CloudSync.maxResultsLimit): CloudKit gives at most \(CloudSync.maxResultsLimit) records per answer"
            )
        }
    }

    func run() async throws {
        let store = try storeOptions.open(create: false)
        guard try !store.loadSchema().recordTypes.isEmpty else {
            throw CommandFailure.invalid(
                "the store \(storeOptions.path) has no schema: import the container's schema first ('ckport schema import schema.ckdb'; 'xcrun cktool export-schema' writes it)"
            )
        }
        let progress = ProgressLine("pulling", quiet: storeOptions.quiet)
        let connection = try cloud.connect(quiet: storeOptions.quiet, progress: progress)
        let rejectsWriter = try rejects.map { try AppendingRejectsWriter(path: $0, words: CommandLineWords.words) }
        let started = Date()
        let outcome: Result<PullResult, Error>
        do {
            let result = try await CloudSync.pull(
                connection.client, into: store, resultsLimit: pageSize, concurrency: concurrency,
                assets: assets, allowNewTypes: allowNewTypes, rejects: rejectsWriter, progress: progress.handler)
            try await connection.finish()
            outcome = .success(result)
        } catch {
            try? await connection.finish()
            outcome = .failure(error)
        }
        progress.finish()
        let result = try outcome.get()
        if !storeOptions.quiet {
            for line in PullCommand.report(result) { Console.error(line) }
            Console.error(
                "pulled \(Console.count(result.saved)) records and \(Console.count(result.deleted)) deletions from \(result.source) into \(storeOptions.path) in \(Console.seconds(Date().timeIntervalSince(started)))"
            )
        }
        if result.leftOut > 0 {
            let kept =
                rejects.map { "; they are in \($0), each with its reason" }
                ?? " (--rejects FILE keeps them, each with its reason)"
            throw CommandFailure(
                status: .failure,
                message:
                    "\(Console.count(result.leftOut)) record\(result.leftOut == 1 ? " was" : "s were") left out\(kept); the rest is saved. "
                    + "The next pull asks for them again (it reads their zones again from the start): give the schema their types and fields first "
                    + "(ckport schema import SCHEMA, or pull --allow-new-types to add them)")
        }
    }

    /// What a pull did, zone by zone, and what it left out and why.
    static func report(_ result: PullResult) -> [String] {
        var lines: [String] = []
        for zone in result.zones {
            let name =
                zone.zone.zoneName
                + (zone.zone.ownerRecordName == ZoneID.defaultOwnerName ? "" : " (owner \(zone.zone.ownerRecordName))")
            if zone.gone {
                let kept =
                    zone.keptLocal > 0
                    ? "; \(Console.count(zone.keptLocal)) records made or imported here (no change tag) were kept" : ""
                lines.append(
                    "\(name): gone from CloudKit; its \(Console.count(zone.removed)) records were deleted here (tombstones kept)\(kept)"
                )
                continue
            }
            let how = zone.incremental ? "change feed" : "queries"
            var line =
                "\(name): \(Console.count(zone.saved)) records saved, \(Console.count(zone.deleted)) deleted, in \(zone.pages) page\(zone.pages == 1 ? "" : "s") (\(how))"
            if zone.leftOut > 0 { line += ", \(Console.count(zone.leftOut)) left out" }
            lines.append(line)
            if let why = zone.refetched {
                lines.append(
                    "  fetched again from the start: \(why); \(Console.count(zone.removed)) records CloudKit no longer holds were deleted here (tombstones kept)"
                )
            }
            if zone.keptLocal > 0 {
                lines.append(
                    "  \(Console.count(zone.keptLocal)) records made or imported here (no change tag), not in CloudKit, were kept"
                )
            }
        }
        for (type, count) in result.leftOutByType.sorted(by: { $0.key < $1.key }) {
            lines.append("left out: \(Console.count(count)) \(type) record\(count == 1 ? "" : "s")")
        }
        // The import's remedy is to allow new fields; a pull's, to allow new types.
        for issue in result.leftOutExamples.prefix(3) {
            lines.append("  e.g. " + issue.explanation.replacing(.allowNewFields, with: .allowNewTypes).commandLine)
        }
        for entry in result.notPulled {
            lines.append("not pulled: \(entry.recordType) in \(entry.zone.zoneName): \(entry.reason)")
        }
        for change in result.schemaChanges { lines.append("schema: \(change)") }
        for note in result.notes { lines.append("note: \(note)") }
        return lines
    }
}
