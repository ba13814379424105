import ArgumentParser
import CKPort
import CloudKitWeb
import Formats
import Foundation
import ObjectStorage
import Records
import SampleApps

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Look at a store in a web browser: its counts and schema, records by type and zone, each record.",
        discussion: """
              ckport serve --store family.sqlite
              ckport serve --store notes.sqlite --migrations migrations/notes
              ckport serve --store family.sqlite --tz Europe/Berlin     # then /calendar
              ckport serve --bundle monday.ckbundle --bundle tuesday.ckbundle
              ckport serve --repo /mnt/nas/ckport --at "2026-11-24 18:00"
              ckport serve --store 'postgresql://me@db.example/ckport?schema=family' --port 8080

            Serves a read-only view of the store on 127.0.0.1 (this machine only; --bind asks for \
            another address, with a warning) and prints its \
            address: the store's backend, size, change token and records per scope, zone and type, \
            with the schema in cktool's words; a table of each type's records in a zone, a page at \
            a time, with a predicate box that takes what --where takes; and each record with every \
            field and system field, its references as links and the records that point at it; \
            the shares and their participants; a calendar (a month, or an agenda) of the record \
            types a calendar mapping names, recurring records expanded in the viewer's time zone \
            as the iCalendar export writes them; with --bundle, a backup bundle (or a chain) \
            instead of a store: its manifest at /bundle, its records as a restore would bring them \
            back; with --repo, a snapshot of a backup repository the same way (the newest, or the \
            one --snapshot or --at chooses); with --migrations, what the set's pending \
            migrations would change, per type and per record, as migrate plan computes it. \
            Every page has a JSON form: add .json to its path. Nothing is ever written, and no \
            script runs in the pages (every value shows as text). Ctrl-C stops the server.
            """
    )

    @Option(
        help: ArgumentHelp(
            "The port to listen on (default: 8640, with --feeds-only 8641; 0: any free port; cloud login's sign-in callback has 8642).",
            valueName: "port"))
    var port: Int?

    @Flag(
        help:
            "Answer nothing but the store's calendar feeds (/feeds/NAME.ics?token=…, see calendar feed add): the listener to put beyond this machine, behind a TLS proxy."
    )
    var feedsOnly = false

    @Option(
        help: ArgumentHelp(
            "The IPv4 address to listen on, when other machines must reach the view (0.0.0.0: every interface). Default: 127.0.0.1, this machine only.",
            valueName: "address"))
    var bind = "127.0.0.1"

    @Option(
        help: ArgumentHelp(
            "A migration set (a folder of NNNN_name.yaml files): its pending migrations are rehearsed at /migrations, record by record, as migrate plan does.",
            valueName: "dir"))
    var migrations: String?

    @Option(
        help: ArgumentHelp(
            "The calendar mapping (YAML or JSON) whose record types /calendar shows; default: the sample app's mapping when the store's schema is one.",
            valueName: "file"))
    var mapping: String?

    @Option(
        help: ArgumentHelp(
            "The time zone the calendar is shown in (an IANA name; a page's ?tz= names another). Default: this machine's.",
            valueName: "zone"))
    var tz: String?

    @Option(
        name: .customLong("bundle"),
        help: ArgumentHelp(
            "Look at a backup bundle instead of a store, read-only: its manifest, and its records as a restore would bring them back. Repeat for a chain (the full bundle first).",
            valueName: "file"))
    var bundles: [String] = []

    @Option(
        name: .customLong("repo"),
        help: ArgumentHelp(
            "Look at a snapshot of this backup repository instead of a store, read-only (a folder, s3://BUCKET/PREFIX or rclone:REMOTE:PATH).",
            valueName: "folder-or-url"))
    var repo: String?

    @OptionGroup var chosen: SnapshotChoiceOptions

    @Option(
        help: ArgumentHelp(
            "With --repo: the S3-compatible server, when it is not AWS. Default: $AWS_ENDPOINT_URL.", valueName: "url"))
    var s3Endpoint: String?

    @OptionGroup var limits: BundleLimitOptions

    @OptionGroup var passphrase: ReadPassphraseOptions

    @Flag(help: "Open the view in the desktop's web browser once it is served (xdg-open on Linux, open on macOS).")
    var open = false

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        if let port, !(0...65535).contains(port) {
            throw ValidationError("--port takes 0 (any free port) to 65535")
        }
        if feedsOnly && (repo != nil || !bundles.isEmpty || migrations != nil) {
            throw ValidationError(
                "--feeds-only serves a store's feeds: --repo, --bundle and --migrations do not go with it")
        }
        if !bundles.isEmpty && storeOptions.store != nil {
            throw ValidationError("--bundle and --store: give one of them (a bundle is shown on its own)")
        }
        if repo != nil && (storeOptions.store != nil || !bundles.isEmpty) {
            throw ValidationError("--repo, --bundle and --store: give one of them (a snapshot is shown on its own)")
        }
        if repo == nil && chosen.isGiven {
            throw ValidationError("--snapshot, --at and --source choose a snapshot of a repository (--repo)")
        }
        if chosen.snapshot != nil && chosen.at != nil {
            throw ValidationError("choose a snapshot by --snapshot or by --at, not both")
        }
        if let tz, TimeZone(identifier: tz) == nil {
            throw ValidationError("--tz \(tz) is not a time zone (an IANA name such as Europe/Berlin)")
        }
    }

    /// Requests answered side by side, each by a store handle of its own: a long download or
    /// rehearsal keeps one busy while the others answer pages.
    static let handles = 3

    func run() async throws {
        if feedsOnly { return try await serveFeeds() }
        var handles: [any RecordStoring]
        var shown = storeOptions.path
        var view: BundleView?
        defer { view?.remove() }
        if let repo {
            let choice = try self.chosen.choice()
            let options = RepositoryOptions(repo: repo, s3Endpoint: s3Endpoint)
            let opened = try await options.open(passphrase)
            let chosen = try Backups.choose(choice, in: try await opened.snapshots(), repository: opened.location)
            let progress = ProgressLine("reading", quiet: storeOptions.quiet)
            view = try await BundleView.open(
                snapshot: chosen, in: opened, handles: ServeCommand.handles, progress: progress.handler)
            progress.finish()
            handles = view!.handles
            shown = "snapshot \(chosen.shortID) of \(chosen.time) in \(opened.location)"
        } else if bundles.isEmpty {
            // Nothing is written, not even the upgrade of an older store that every other
            // command makes on opening: such a store is refused with the command that upgrades it.
            handles = try (0..<ServeCommand.handles).map { _ in try storeOptions.open(create: false, upgrade: false) }
        } else {
            for bundle in bundles { try InputFiles.check(bundle, as: "a bundle", binary: true) }
            let progress = ProgressLine("reading", quiet: storeOptions.quiet)
            view = try BundleView.open(
                bundles, read: try passphrase.options(limits), handles: ServeCommand.handles,
                progress: progress.handler)
            progress.finish()
            handles = view!.handles
            shown = bundles.joined(separator: " + ")
        }
        let store = handles[0]
        let set = try migrations.map { try MigrationSet.load(directory: $0) }
        // A calendar when a mapping is given, or the store holds a sample app's calendar types.
        var calendar: CalendarMapping?
        if mapping != nil || SampleApp.withCalendar(holding: store.schema) != nil {
            calendar = try CalendarMappingChoice.resolve(mapping, store: store, quiet: true)
        }
        let backend =
            repo != nil
            ? "backup snapshot" : bundles.isEmpty ? StoreOptions.backend(storeOptions.path) : "backup bundle"
        let sites = BrowseSites(
            handles.map { handle in
                BrowseSite(
                    store: handle, backend: backend, migrations: set, calendar: calendar,
                    timeZone: tz.flatMap(TimeZone.init(identifier:)) ?? .current, bundles: view?.bundles ?? [])
            })
        let server = try await BrowseServer.start(sites, host: bind, port: port ?? 8640)
        if !bind.hasPrefix("127.") {
            Console.error(
                "warning: listening on \(bind), beyond this machine: anyone who can reach it on port \(server.port) can read every record of the store, unencrypted, without signing in"
            )
        }
        FileHandle.standardOutput.write(
            Data("serving \(shown) read-only on \(server.baseURL.absoluteString)/ (Ctrl-C stops)\n".utf8))
        if open { openInBrowser(server.baseURL.absoluteString + "/") }
        // Serves until Ctrl-C cancels the command; the answers under way then get their moment
        // (a stop of its own, which the cancellation does not cut short).
        while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
        await Task { await server.stop() }.value
        // Every handle let go of: the store's last connection takes its -wal and -shm files.
        if view == nil { for handle in handles { try? handle.closeConnections() } }
        if !storeOptions.quiet { Console.error("stopped") }
    }

    /// `serve --feeds-only`: the store's feeds and nothing else, until Ctrl-C.
    func serveFeeds() async throws {
        let handles = try (0..<ServeCommand.handles).map { _ in try storeOptions.open(create: false, upgrade: false) }
        let feeds = try Feeds.list(in: handles[0])
        let sites = BrowseSites(
            handles.map { BrowseSite(store: $0, backend: StoreOptions.backend(storeOptions.path), migrations: nil) })
        let server = try await FeedServer.start(sites, host: bind, port: port ?? 8641)
        FileHandle.standardOutput.write(
            Data(
                "serving the calendar feeds of \(storeOptions.path) on \(server.baseURL.absoluteString)/feeds/ (Ctrl-C stops)\n"
                    .utf8))
        if !storeOptions.quiet {
            Console.error(
                feeds.isEmpty
                    ? "the store has no feeds yet: ckport calendar feed add NAME makes one (this server answers it at once)"
                    : "feeds: \(feeds.map { "\($0.name) (\($0.tokens.count) token\($0.tokens.count == 1 ? "" : "s"))" }.joined(separator: ", "))"
            )
            if !bind.hasPrefix("127.") {
                Console.error(
                    "listening on \(bind): the feeds go over plain HTTP, tokens included; put a TLS proxy in front (docs/calendars.md)"
                )
            }
        }
        while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
        await Task { await server.stop() }.value
        for handle in handles { try? handle.closeConnections() }
        if !storeOptions.quiet { Console.error("stopped") }
    }

    /// Asks the desktop to open `url` in its browser; says so, and goes on serving, when it cannot.
    func openInBrowser(_ url: String) {
        #if os(macOS)
            let opener = "open"
        #else
            let opener = "xdg-open"
        #endif
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [opener, url]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
            process.waitUntilExit()
            if process.terminationStatus != 0 {
                Console.error(
                    "could not open a browser (\(opener) exited with \(process.terminationStatus)): open \(url) yourself"
                )
            }
        } catch {
            Console.error("could not open a browser (\(opener): \(error.localizedDescription)): open \(url) yourself")
        }
    }
}
