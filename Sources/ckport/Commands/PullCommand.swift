import ArgumentParser
import CKPort
import CloudKitWeb
import Foundation

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

    @Option(help: ArgumentHelp("A file whose first line is the API token. Default: $CKPORT_CK_API_TOKEN.", valueName: "file"))
    var apiTokenFile: String?

    @Option(help: ArgumentHelp("A file whose first line is the user's web auth token; ckport writes the next token back to it. Default: $CKPORT_CK_WEB_AUTH_TOKEN.", valueName: "file"))
    var webAuthTokenFile: String?

    @Option(help: ArgumentHelp("The CloudKit Web Services server (default Apple's), e.g. a ckport-emulator's URL.", valueName: "url"))
    var baseURL: String?

    func validate() throws {
        guard CloudKitDatabase.Environment(rawValue: environment) != nil else { throw ValidationError("--environment is development or production") }
        guard CloudKitDatabase.Scope(rawValue: database) != nil else { throw ValidationError("--database is private, shared or public") }
        if (keyID == nil) != (keyFile == nil) { throw ValidationError("--key-id and --key-file go together") }
        if let baseURL, URL(string: baseURL)?.scheme == nil { throw ValidationError("--base-url takes a URL such as http://127.0.0.1:8181") }
    }

    func cloudDatabase() throws -> CloudKitDatabase {
        guard let container else { throw CommandFailure.usage("--container names the CloudKit container, e.g. iCloud.com.example.App") }
        return try CloudKitDatabase(container: container, environment: CloudKitDatabase.Environment(rawValue: environment)!,
                             scope: CloudKitDatabase.Scope(rawValue: database)!,
                             baseURL: baseURL.flatMap(URL.init(string:)) ?? CloudKitDatabase.appleBaseURL)
    }

    /// The API token, from its file or the environment.
    func apiToken() throws -> String {
        guard let api = try apiTokenFile.map(CloudKitCredentials.token(fromFile:)) ?? ProcessInfo.processInfo.environment["CKPORT_CK_API_TOKEN"], !api.isEmpty else {
            throw CommandFailure.usage("give an API token (--api-token-file FILE or $CKPORT_CK_API_TOKEN) and a web auth token, or a server-to-server key (--key-id, --key-file) for the public database")
        }
        return api
    }

    func credentials() throws -> CloudKitCredentials {
        if let keyID, let keyFile { return .serverToServer(try ServerToServerKey(keyID: keyID, file: keyFile)) }
        let environment = ProcessInfo.processInfo.environment
        let api = try apiToken()
        guard let web = try webAuthTokenFile.map(CloudKitCredentials.token(fromFile:)) ?? environment["CKPORT_CK_WEB_AUTH_TOKEN"], !web.isEmpty else {
            throw CommandFailure.usage("give the user's web auth token: --web-auth-token-file FILE or $CKPORT_CK_WEB_AUTH_TOKEN")
        }
        return .webToken(apiToken: api, webAuthToken: web)
    }

    /// A client for the database, over HTTP: retries are reported on standard error, and each
    /// new web auth token goes to --web-auth-token-file as it arrives (CloudKit spends a token
    /// on use, so one kept only in memory would be lost with a killed process).
    /// With a progress line, a wait shows on it (on a terminal); else on a line of its own.
    func client(quiet: Bool, progress: ProgressLine? = nil) throws -> CloudKitClient {
        let keeper = webAuthTokenFile.map(WebAuthTokenFile.init(path:))
        return try CloudKitClient(database: try cloudDatabase(), credentials: try credentials(), transport: HTTPClientTransport(),
                                  onRetry: { operation, seconds, reason in
                                      guard !quiet else { return }
                                      // "CloudKit answered THROTTLED (HTTP 429): …" → THROTTLED
                                      let answered = "CloudKit answered "
                                      let code = reason.hasPrefix(answered) ? String(reason.dropFirst(answered.count).prefix { $0 != " " }) : "no answer"
                                      if progress?.note("\(code): waiting \(Console.seconds(seconds))") != true {
                                          Console.error("waiting \(Console.seconds(seconds)) before asking \(operation) again: \(reason)")
                                      }
                                  },
                                  onWebAuthToken: { token in keeper?.keep(token) })
    }

    /// At the end: the newest web auth token, synced to disk, or a word that the environment's
    /// one is spent.
    func keep(_ client: CloudKitClient, quiet: Bool) async throws {
        guard let next = await client.webAuthToken else { return }
        if let webAuthTokenFile {
            let file = try OutputFile(path: webAuthTokenFile, ownerOnly: true)
            try file.write(next + "\n")
            try file.commit()
        } else if !quiet {
            Console.error("note: CloudKit turned the web auth token over; the one in $CKPORT_CK_WEB_AUTH_TOKEN no longer works (--web-auth-token-file FILE keeps the new one)")
        }
    }
}

struct PullCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pull",
        abstract: "Pull a CloudKit database into the store, incrementally.",
        discussion: """
        Custom zones of the private and shared databases come through their change feeds: each \
        page of records, its deletions and the zone's sync token commit together, so the next \
        pull fetches only what changed and a pull cut off anywhere resumes where it stopped. \
        The public database and default zones are read with queries per record type of the \
        store's schema: CloudKit answers those only for types whose ___recordID is QUERYABLE, \
        and queries do not see deletions. Import the container's schema first (cktool \
        export-schema writes it). Throttling and unavailable servers are retried as CloudKit \
        asks (retryAfter, else backoff). With --assets each asset file is downloaded and kept \
        in the store with its record (ckport export --assets DIR writes them out again).

          ckport schema import schema.ckdb
          ckport pull --container iCloud.com.example.App --environment production \\
              --database private --api-token-file api.txt --web-auth-token-file web.txt
          ckport pull --container iCloud.com.example.App --database public \\
              --key-id 2f3a… --key-file eckey.pem
        """
    )

    @OptionGroup(title: "CloudKit") var cloud: CloudOptions

    @Option(help: ArgumentHelp("Records per page to ask for (CloudKit's default when not given).", valueName: "count"))
    var pageSize: Int?

    @Flag(help: "Also download each asset file the records name and keep it in the store, with its record (without: the store keeps the asset's checksum, size and download URL).")
    var assets = false

    @Option(help: ArgumentHelp("Zones (or record types) fetched at once, at most. With a web auth token the requests still go one at a time (each answer brings the next token); pages are saved while the next ones travel.", valueName: "count"))
    var concurrency = 4

    @OptionGroup var storeOptions: StoreOptions

    func run() throws {
        guard concurrency >= 1 else { throw ValidationError("--concurrency is at least 1") }
        let store = try storeOptions.open(create: false)
        guard !store.schema.recordTypes.isEmpty else {
            throw CommandFailure.invalid("the store \(storeOptions.path) has no schema: import the container's schema first ('ckport schema import schema.ckdb'; 'xcrun cktool export-schema' writes it)")
        }
        let progress = ProgressLine("pulling", quiet: storeOptions.quiet)
        let client = try cloud.client(quiet: storeOptions.quiet, progress: progress)
        let started = Date()
        nonisolated(unsafe) let unsafeStore = store
        nonisolated(unsafe) let handler = progress.handler
        let cloud = self.cloud
        let quiet = storeOptions.quiet
        let result: PullResult = try blocking {
            do {
                let result = try await CloudSync.pull(client, into: unsafeStore, resultsLimit: pageSize, concurrency: concurrency, assets: assets, progress: handler)
                try await cloud.keep(client, quiet: quiet)
                return result
            } catch {
                try? await cloud.keep(client, quiet: quiet)
                throw error
            }
        }
        progress.finish()
        guard !storeOptions.quiet else { return }
        for zone in result.zones {
            let how = zone.incremental ? "change feed" : "queries"
            Console.error("\(zone.zone.zoneName): \(Console.count(zone.saved)) records saved, \(Console.count(zone.deleted)) deleted, in \(zone.pages) page\(zone.pages == 1 ? "" : "s") (\(how))")
        }
        Console.error("pulled \(Console.count(result.saved)) records and \(Console.count(result.deleted)) deletions from \(result.source) into \(storeOptions.path) in \(Console.seconds(Date().timeIntervalSince(started)))")
    }
}

/// Runs async work from a command's synchronous run and waits for it.
func blocking<T>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
    nonisolated(unsafe) var outcome: Result<T, Error>?
    let done = DispatchSemaphore(value: 0)
    Task {
        do { outcome = .success(try await work()) } catch { outcome = .failure(error) }
        done.signal()
    }
    done.wait()
    return try outcome!.get()
}
