import ArgumentParser
import CKPort
import Formats
import Foundation
import Records
import SampleApps
import StoreCore

struct CalendarCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "calendar",
        abstract: "Keep a family's calendar current on their phones: subscription feeds of the store.",
        discussion: """
              ckport calendar feed add family --where "familyID == 'family-1'" --tz Europe/Berlin
              ckport serve --feeds-only --bind 0.0.0.0 --port 8641

            A feed is a named selection of the store that ckport serve answers at \
            /feeds/NAME.ics to whoever holds one of its tokens: a phone subscribes to its address \
            once and fetches it again every few minutes or hours.
            """,
        subcommands: [FeedCommand.self]
    )
}

struct FeedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "feed",
        abstract: "Calendar subscription feeds: add a feed or a subscriber, list them, revoke a token, remove a feed.",
        subcommands: [FeedAddCommand.self, FeedListCommand.self, FeedRevokeCommand.self, FeedRemoveCommand.self]
    )
}

struct FeedAddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract:
            "Add a subscriber to a feed (making the feed first when the store has none of that name); prints the address.",
        discussion: """
              ckport calendar feed add family --where "familyID == 'family-1'" --tz Europe/Berlin --label "Anna's phone"
              ckport calendar feed add family --label "Ben's phone" --url https://cal.example.org
              ckport calendar feed add chores --store chores.sqlite --mapping chores.yaml

            The first add of a name makes the feed from --type, --scope, --zone, --where, \
            --mapping (the sample app's when the store's schema is one; the file's text is kept \
            in the store), --tz and --include-deleted; a later add of the same name gives it \
            another subscriber and takes none of them (or exactly the feed's own). Each \
            subscriber gets a token of their own, printed once inside the address: the store \
            keeps only its SHA-256, so a lost address cannot be shown again (add another, and \
            revoke the lost one). The address goes to the phone as it is; give the https:// one \
            to Google Calendar (by URL) and the webcal:// one to Apple Calendar and Outlook. \
            The token travels in the query (?token=), which a proxy can leave out of its log \
            (see docs/calendars.md). Every event is written as export writes it, with \
            DTSTAMP and SEQUENCE from the record (SEQUENCE rises when the record is modified).
            """
    )

    @Argument(help: "The feed's name: 1 to 64 letters, digits, '-' and '_' (part of its address).")
    var name: String

    @OptionGroup var filter: RecordFilterOptions

    @Option(
        help: ArgumentHelp(
            "The calendar mapping (YAML or JSON) from record types to components; default: the sample app's when the store's schema is one.",
            valueName: "file"))
    var mapping: String?

    @Option(
        help: ArgumentHelp("Times as local times of this IANA zone, with a VTIMEZONE; default: UTC.", valueName: "zone")
    )
    var tz: String?

    @Flag(
        help: "Keep records the mapping calls cancelled in the feed, with STATUS:CANCELLED, so that phones drop them.")
    var includeDeleted = false

    @Option(help: ArgumentHelp("Who the token is for (shown by list).", valueName: "text"))
    var label: String?

    @Option(
        help: ArgumentHelp(
            "The address phones reach serve at (a TLS proxy's, such as https://cal.example.org). Default: http://127.0.0.1:8641.",
            valueName: "url"))
    var url = "http://127.0.0.1:8641"

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        _ = try ArgumentChecks.timeZone(tz)
        guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
            throw ValidationError("--url \(url) is not an http:// or https:// address")
        }
    }

    /// Whether any option says what the feed shows.
    var definesFeed: Bool {
        !filter.recordTypes.isEmpty || filter.scope != nil || filter.zone != nil || filter.predicate != nil
            || mapping != nil || tz != nil || includeDeleted
    }

    func run() async throws {
        let store = try storeOptions.open(create: false)
        defer { try? store.closeConnections() }
        _ = try filter.query()
        let exists = try Feeds.list(in: store).contains { $0.name == name }
        var definition: Feeds.Definition?
        if !exists || definesFeed {
            let (text, source) = try mappingText(store)
            definition = Feeds.Definition(
                recordTypes: filter.recordTypes, scope: filter.scope, zone: filter.zone, predicate: filter.predicate,
                mapping: text, mappingSource: source, timeZone: tz, includeCancelled: includeDeleted)
        }
        let added: Feeds.NewToken
        do {
            added = try Feeds.add(name, definition: definition, label: label, in: store)
        } catch let error as MappingError {
            throw CommandFailure.invalid(error.description)
        }
        let base = url.hasSuffix("/") ? String(url.dropLast()) : url
        let address = base + added.path
        if !storeOptions.quiet {
            Console.error(
                added.madeFeed
                    ? "made the feed \(name); its first subscriber's token is \(added.id)"
                    : "added a subscriber to the feed \(name): token \(added.id)")
            Console.error(
                "the address below opens the feed: give it only to its subscriber (the store keeps only its hash; it cannot be shown again)"
            )
        }
        print(address)
        if base.hasPrefix("https://") { print("webcal://" + address.dropFirst("https://".count)) }
    }

    /// The mapping's text and where it came from: the file's, or the sample app's.
    func mappingText(_ store: any RecordStoring) throws -> (String, String) {
        if let mapping {
            try InputFiles.check(mapping, as: "a mapping")
            _ = try CalendarMappingChoice.resolve(mapping, store: store, quiet: true)
            guard let text = try? String(contentsOfFile: mapping, encoding: .utf8) else {
                throw CommandFailure.invalid("\(mapping): not UTF-8 text")
            }
            return (text, (mapping as NSString).lastPathComponent)
        }
        _ = try CalendarMappingChoice.resolve(nil, store: store, quiet: storeOptions.quiet)
        guard let app = SampleApp.withCalendar(holding: store.schema), let text = app.calendarMappingText else {
            throw CommandFailure.usage("a feed needs a calendar mapping: pass --mapping FILE")
        }
        return (text, "\(app.rawValue) mapping")
    }
}

struct FeedListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the store's feeds: what each shows, and each subscriber's token id (never the token).")

    @Flag(help: "Print JSON for scripts.")
    var json = false

    @OptionGroup var storeOptions: StoreOptions

    func run() async throws {
        let store = try storeOptions.open(create: false)
        defer { try? store.closeConnections() }
        let feeds = try Feeds.list(in: store)
        if json {
            var out = JSONWriter()
            try out.encoded(feeds.map(Feeds.Listing.init))
            print(out.text)
            return
        }
        guard !feeds.isEmpty else {
            print("no feeds (ckport calendar feed add NAME makes one)")
            return
        }
        for (index, feed) in feeds.enumerated() {
            if index > 0 { print("") }
            let definition = feed.definition
            var shows: [String] = []
            if !definition.recordTypes.isEmpty {
                shows.append("types \(definition.recordTypes.joined(separator: ", "))")
            }
            if let scope = definition.scope { shows.append("scope \(scope.rawValue)") }
            if let zone = definition.zone { shows.append("zone \(zone)") }
            if let predicate = definition.predicate { shows.append("where \(predicate)") }
            print("feed    \(Console.clean(feed.name))  /feeds/\(feed.name).ics")
            print(
                "shows   \(Console.clean(shows.isEmpty ? "every record the mapping maps" : shows.joined(separator: "; ")))"
            )
            print(
                "as      \(Console.clean(definition.mappingSource)), \(definition.timeZone.map { "local times of \($0)" } ?? "UTC")\(definition.includeCancelled ? ", cancelled events kept" : "")"
            )
            if feed.tokens.isEmpty { print("tokens  none: nobody can read it") }
            for token in feed.tokens {
                print(
                    "token   \(token.id)  since \(ISO8601.format(milliseconds: token.created))\(token.label.map { "  \(Console.clean($0))" } ?? "")"
                )
            }
        }
    }
}

struct FeedRevokeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Revoke a subscriber's token: a running serve refuses it (404) from its next request.",
        discussion: """
              ckport calendar feed revoke family 3f9a01c2

            TOKEN is the id list shows (the first eight hex digits of the token's hash). The \
            token itself is taken too, but a command line is seen by other users of the \
            machine and kept in the shell's history: prefer the id.
            """)

    @Argument(help: "The feed.")
    var name: String

    @Argument(help: "The token's id, as list shows it.")
    var token: String

    @OptionGroup var storeOptions: StoreOptions

    func run() async throws {
        let store = try storeOptions.open(create: false)
        defer { try? store.closeConnections() }
        let revoked = try Feeds.revoke(name, token: token, in: store)
        print(
            "revoked token \(revoked.id)\(revoked.label.map { " (\(Console.clean($0)))" } ?? "") of the feed \(name)")
    }
}

struct FeedRemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove a feed and every token of it (a running serve answers 404 from its next request).")

    @Argument(help: "The feed.")
    var name: String

    @OptionGroup var storeOptions: StoreOptions

    func run() async throws {
        let store = try storeOptions.open(create: false)
        defer { try? store.closeConnections() }
        try Feeds.remove(name, in: store)
        print("removed the feed \(name)")
    }
}
