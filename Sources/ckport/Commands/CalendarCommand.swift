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
        abstract:
            "Keep a family's calendar current on their phones: subscription feeds of the store, and publishing into a CalDAV calendar.",
        discussion: """
              ckport calendar feed add family --where "familyID == 'family-1'" --tz Europe/Berlin
              ckport serve --feeds-only --bind 0.0.0.0 --port 8641

              ckport calendar publish --caldav https://dav.example.org/anna/family/ --user anna \\
                  --password-file ~/.config/ckport/dav-password --where "familyID == 'family-1'"
              ckport calendar status

            A feed is a named selection of the store that ckport serve answers at \
            /feeds/NAME.ics to whoever holds one of its tokens: a phone subscribes to its address \
            once and fetches it again every few minutes or hours. Publishing puts the same \
            events into a calendar on a CalDAV server (Nextcloud, Fastmail, Radicale, iCloud…), \
            which every phone of the account shows and keeps in step.
            """,
        subcommands: [FeedCommand.self, PublishCommand.self, PullCalendarCommand.self, CalendarStatusCommand.self]
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

    @OptionGroup var selection: CalendarSelectionOptions

    @Option(help: ArgumentHelp("Who the token is for (shown by list).", valueName: "text"))
    var label: String?

    @Option(
        help: ArgumentHelp(
            "The address phones reach serve at (a TLS proxy's, such as https://cal.example.org). Default: http://127.0.0.1:8641.",
            valueName: "url"))
    var url = "http://127.0.0.1:8641"

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
            throw ValidationError("--url \(url) is not an http:// or https:// address")
        }
    }

    func run() async throws {
        let store = try storeOptions.open(create: false)
        defer { try? store.closeConnections() }
        _ = try selection.filter.query()
        let exists = try Feeds.list(in: store).contains { $0.name == name }
        var definition: Feeds.Definition?
        if !exists || selection.isGiven {
            definition = try selection.definition(store, quiet: storeOptions.quiet)
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

            TOKEN is the id list shows (the first twelve hex digits of the token's hash). The \
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

struct PublishCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish",
        abstract:
            "Publish a selection of the store into a CalDAV calendar, sending only what changed since the last publish.",
        discussion: """
              ckport calendar publish --caldav https://dav.example.org/anna/family/ --user anna \\
                  --password-file ~/.config/ckport/dav-password --where "familyID == 'family-1'" --tz Europe/Berlin
              ckport calendar publish --caldav https://dav.example.org/ --calendar family --user anna \\
                  --password-file ~/.config/ckport/dav-password     # the account's address: found, made
              ckport calendar publish --caldav https://dav.example.org/anna/family/ --user anna \\
                  --password-file ~/.config/ckport/dav-password     # later: only what changed

            Each event becomes a resource of its own (UID.ics), written as export writes it. The \
            collection is made when nothing is at the address (MKCALENDAR); with --calendar NAME, \
            the address may be the server's or the account's, and the calendar home is found \
            through /.well-known/caldav, current-user-principal and calendar-home-set. Later \
            publishes repeat the first one's selection (giving another is refused) and send only \
            what changed: a new event with If-None-Match: *, a changed one with If-Match and the \
            ETag the server gave it (its SEQUENCE raised), a deleted or cancelled one deleted. \
            An event changed or deleted on the server since the last publish is reported and \
            left as the server has it, unless --prefer store. What was published where is kept \
            in the store (calendar status shows it). The password comes from --password-file or \
            $CKPORT_CALDAV_PASSWORD, never the command line.
            """
    )

    @Option(
        help: ArgumentHelp(
            "The calendar collection's address, or the server's or account's (with --calendar).", valueName: "url"))
    var caldav: String

    @Option(
        help: ArgumentHelp("The calendar's name in the account's calendar home (made when missing).", valueName: "name")
    )
    var calendar: String?

    @OptionGroup var signIn: CalDAVSignInOptions

    @OptionGroup var selection: CalendarSelectionOptions

    @Option(
        help: ArgumentHelp(
            "Who wins an event changed on both sides: server (reported, kept) or store.", valueName: "side"))
    var prefer: String = "server"

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        try CalDAVSignInOptions.checkAddress(caldav)
        guard CalendarPublishing.Preference(rawValue: prefer) != nil else {
            throw ValidationError("--prefer takes server or store")
        }
    }

    func run() async throws {
        let store = try storeOptions.open(create: false)
        defer { try? store.closeConnections() }
        _ = try selection.filter.query()
        let credentials = try signIn.credentials(for: caldav)
        var definition: Feeds.Definition?
        let url = URL(string: caldav)!
        // A publication of this address (or, with --calendar, of any: the address is found
        // first) repeats its selection when none is given.
        let known = try CalendarPublishing.publications(in: store).contains {
            calendar != nil || $0.collection == CalDAVClient.shown(CalDAVClient.canonical(url))
        }
        if selection.isGiven || !known {
            definition = try selection.definition(store, quiet: storeOptions.quiet)
        }
        let progress = ProgressLine("publishing", quiet: storeOptions.quiet)
        let result = try await CalendarPublishing.publish(
            from: store,
            request: CalendarPublishing.Request(
                url: url, calendar: calendar, definition: definition,
                prefer: CalendarPublishing.Preference(rawValue: prefer)!),
            client: CalDAVClient(credentials: credentials),
            progress: { done, total in progress.update(records: done, total: total) })
        progress.finish()
        let collection = CalDAVClient.shown(result.collection)
        if result.madeCollection { Console.error("made the calendar \(collection)") }
        if result.upToDate {
            print(
                "\(collection): nothing changed in the store or the calendar since the last publish (\(result.unchanged) events)"
            )
            return
        }
        print(
            "published to \(collection): \(result.created) new, \(result.updated) changed, \(result.deleted) deleted, \(result.unchanged) unchanged"
        )
        for conflict in result.conflicts {
            Console.error(
                "kept the server's: \(Console.clean(conflict.uid)) (\(Console.clean(conflict.href))) was \(conflict.reason.rawValue)"
            )
        }
        if !result.conflicts.isEmpty {
            Console.error(
                "\(result.conflicts.count) event\(result.conflicts.count == 1 ? " was" : "s were") left as the server has \(result.conflicts.count == 1 ? "it" : "them") (--prefer store writes the store's over them)"
            )
            throw ExitCode(ExitStatus.failure.rawValue)
        }
    }
}

struct CalendarStatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the store's feeds and CalDAV publications: where, what, when last, how many events.")

    @Flag(help: "Print JSON for scripts.")
    var json = false

    @OptionGroup var storeOptions: StoreOptions

    func run() async throws {
        let store = try storeOptions.open(create: false)
        defer { try? store.closeConnections() }
        let feeds = try Feeds.list(in: store)
        let publications = try CalendarPublishing.publications(in: store)
        let pulls = try CalendarPulling.pulls(in: store)
        if json {
            var out = JSONWriter()
            try out.encoded(
                CalendarStatus(
                    feeds: feeds.map(Feeds.Listing.init),
                    publications: publications.map(CalendarStatus.Publication.init),
                    pulls: pulls.map(CalendarStatus.Pull.init)))
            print(out.text)
            return
        }
        if feeds.isEmpty && publications.isEmpty && pulls.isEmpty {
            print("no feeds, publications or pulls (calendar feed add, calendar publish, calendar pull)")
            return
        }
        for feed in feeds {
            print(
                "feed         /feeds/\(feed.name).ics  \(feed.tokens.count) token\(feed.tokens.count == 1 ? "" : "s")")
        }
        for pull in pulls {
            print(
                "pull         \(Console.clean(pull.collection))  \(pull.members) event\(pull.members == 1 ? "" : "s"), last \(ISO8601.format(milliseconds: pull.pulled)), \(pull.syncToken == nil ? "no sync token (by ETags)" : "sync token \(Console.clean(pull.syncToken!))")"
            )
        }
        for publication in publications {
            print(
                "publication  \(Console.clean(publication.collection))  \(publication.events) events, last \(ISO8601.format(milliseconds: publication.published)), store at \(publication.token ?? "?")\(publication.conflicts > 0 ? ", \(publication.conflicts) left as the server has them" : "")"
            )
        }
    }
}

/// A user and password for a CalDAV server: the password from a file or the environment.
struct CalDAVSignInOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The user to sign in as (HTTP Basic). Default: $CKPORT_CALDAV_USER.", valueName: "user"))
    var user: String?

    @Option(
        help: ArgumentHelp(
            "A file whose first line is the password. Default: $CKPORT_CALDAV_PASSWORD.", valueName: "file"))
    var passwordFile: String?

    /// `--caldav`'s address: http or https, with a host, and no user or password in it.
    static func checkAddress(_ caldav: String) throws {
        guard let url = URL(string: caldav), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
            throw ValidationError("--caldav \(caldav) is not an http:// or https:// address")
        }
        guard url.user == nil && url.password == nil else {
            throw ValidationError(
                "--caldav: put the user in --user and the password in a file (--password-file), not in the address")
        }
    }

    /// The user and password for `caldav`, with a warning when they would cross the network
    /// unencrypted (http:// to another machine).
    func credentials(for caldav: String) throws -> CalDAVClient.Credentials? {
        let credentials = try credentials()
        if credentials != nil, let url = URL(string: caldav), url.scheme == "http", let host = url.host,
            !Self.isLoopback(host)
        {
            Console.error(
                "warning: --caldav is http://, so the password goes to \(host) unencrypted: use the server's https:// address"
            )
        }
        return credentials
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host.hasPrefix("127.") || host == "::1" || host == "[::1]"
    }

    func credentials() throws -> CalDAVClient.Credentials? {
        let environment = ProcessInfo.processInfo.environment
        let user = self.user ?? environment["CKPORT_CALDAV_USER"]
        var password: String?
        if let passwordFile {
            try InputFiles.check(passwordFile, as: "a password file")
            guard let text = try? String(contentsOfFile: passwordFile, encoding: .utf8),
                let line = text.split(separator: "\n").first.map({ $0.trimmingCharacters(in: .whitespacesAndNewlines) }
                ),
                !line.isEmpty
            else {
                throw CommandFailure.invalid("\(passwordFile): no password on its first line")
            }
            password = line
        } else {
            password = environment["CKPORT_CALDAV_PASSWORD"]
        }
        guard let user else {
            if password != nil {
                throw CommandFailure.usage("a password without a user: give --user (or $CKPORT_CALDAV_USER)")
            }
            return nil
        }
        guard let password else {
            throw CommandFailure.usage(
                "--user \(user) needs a password: --password-file FILE or $CKPORT_CALDAV_PASSWORD")
        }
        return CalDAVClient.Credentials(user: user, password: password)
    }
}

/// What a feed or a publication shows: the records (type, scope, zone, predicate), the calendar
/// mapping, the time zone and whether cancelled records are kept.
struct CalendarSelectionOptions: ParsableArguments {
    @OptionGroup var filter: RecordFilterOptions

    @Option(
        help: ArgumentHelp(
            "The calendar mapping (YAML or JSON) from record types to components; default: the sample app's when the store's schema is one. Its text is kept in the store.",
            valueName: "file"))
    var mapping: String?

    @Option(
        help: ArgumentHelp("Times as local times of this IANA zone, with a VTIMEZONE; default: UTC.", valueName: "zone")
    )
    var tz: String?

    @Flag(
        help:
            "Keep records the mapping calls cancelled, with STATUS:CANCELLED, so that calendars drop them (else they are left out, or deleted where they were published)."
    )
    var includeDeleted = false

    func validate() throws { _ = try ArgumentChecks.timeZone(tz) }

    /// Whether any option says what is shown.
    var isGiven: Bool {
        !filter.recordTypes.isEmpty || filter.scope != nil || filter.zone != nil || filter.predicate != nil
            || mapping != nil || tz != nil || includeDeleted
    }

    func definition(_ store: any RecordStoring, quiet: Bool) throws -> Feeds.Definition {
        let (text, source) = try Self.mappingText(mapping, store: store, quiet: quiet)
        return Feeds.Definition(
            recordTypes: filter.recordTypes, scope: filter.scope, zone: filter.zone, predicate: filter.predicate,
            mapping: text, mappingSource: source, timeZone: tz, includeCancelled: includeDeleted)
    }

    /// The mapping's text and where it came from: the file's, or the sample app's.
    static func mappingText(_ mapping: String?, store: any RecordStoring, quiet: Bool) throws -> (String, String) {
        if let mapping {
            try InputFiles.check(mapping, as: "a mapping")
            _ = try CalendarMappingChoice.resolve(mapping, store: store, quiet: true)
            guard let text = try? String(contentsOfFile: mapping, encoding: .utf8) else {
                throw CommandFailure.invalid("\(mapping): not UTF-8 text")
            }
            return (text, (mapping as NSString).lastPathComponent)
        }
        _ = try CalendarMappingChoice.resolve(nil, store: store, quiet: quiet)
        guard let app = SampleApp.withCalendar(holding: store.schema), let text = app.calendarMappingText else {
            throw CommandFailure.usage("a calendar needs a mapping: pass --mapping FILE")
        }
        return (text, "\(app.rawValue) mapping")
    }
}

struct PullCalendarCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pull",
        abstract:
            "Bring a CalDAV calendar into the store through a calendar mapping, and keep it in: each later pull takes only what changed.",
        discussion: """
              ckport calendar pull --caldav https://dav.example.org/anna/school/ --user anna \\
                  --password-file ~/.config/ckport/dav-password --set familyID=family-1 \\
                  --scope shared --zone family-1-zone --owner _4f00e3e229b648635c6f63dca8da05ef

            The first pull brings every event; later ones ask for what changed since the \
            collection's sync token (RFC 6578), or, where the server has none, compare every \
            event's ETag. Events are imported as import imports a calendar file (the same \
            mapping, --set and zone options); an event deleted on the server deletes the record \
            it brought, and only that one. An event whose UID names a record the calendar did \
            not bring (another family's, or a record of another kind) is never rewritten: the \
            pull names it and leaves it. A pull that would delete most of what the calendar \
            brought stops unless --delete-most. Events this store published into the same \
            calendar come back as themselves, not as changes; an event changed on the server \
            is taken as the server has it. What the pull got to is kept in the store (calendar \
            status), committed with the records.
            """
    )

    @Option(
        help: ArgumentHelp(
            "The calendar collection's address, or the server's or account's (with --calendar).", valueName: "url"))
    var caldav: String

    @Option(help: ArgumentHelp("The calendar's name in the account's calendar home.", valueName: "name"))
    var calendar: String?

    @OptionGroup var signIn: CalDAVSignInOptions

    @Option(
        help: ArgumentHelp(
            "The calendar mapping (YAML or JSON); default: the sample app's when the store's schema is one.",
            valueName: "file"))
    var mapping: String?

    @Option(
        name: .customLong("set"),
        help: ArgumentHelp(
            "Give new records this field value, e.g. familyID=family-1 (a record with another value keeps its own). Repeat for several.",
            valueName: "field=value"))
    var fixedFields: [String] = []

    @Option(help: "The database scope of the records: private, shared or public (default: private).")
    var scope: DatabaseScope?

    @Option(help: ArgumentHelp("The zone of the records (default: _defaultZone).", valueName: "name"))
    var zone: String?

    @Option(help: ArgumentHelp("The zone's owner (default: __defaultOwner__).", valueName: "userRecordName"))
    var owner: String?

    @Option(
        help: ArgumentHelp("The time zone of floating times and dates where the mapping keeps none.", valueName: "zone")
    )
    var tz: String?

    @Flag(help: "Go on when the calendar no longer holds most of the events it brought (it was emptied on purpose).")
    var deleteMost = false

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        _ = try ArgumentChecks.timeZone(tz)
        try CalDAVSignInOptions.checkAddress(caldav)
        for entry in fixedFields where !entry.contains("=") {
            throw ValidationError("--set takes field=value, found \"\(entry)\"")
        }
    }

    func run() async throws {
        let store = try storeOptions.open(create: false)
        defer { try? store.closeConnections() }
        let credentials = try signIn.credentials(for: caldav)
        let (text, source) = try CalendarSelectionOptions.mappingText(mapping, store: store, quiet: storeOptions.quiet)
        let fixed = fixedFields.map { entry in
            let parts = entry.split(separator: "=", maxSplits: 1)
            return (field: String(parts[0]), text: parts.count > 1 ? String(parts[1]) : "")
        }
        let result: CalendarPulling.Result
        do {
            result = try await CalendarPulling.pull(
                into: store,
                request: CalendarPulling.Request(
                    url: URL(string: caldav)!, calendar: calendar, mapping: text, mappingSource: source,
                    fixedFields: fixed,
                    zone: ZoneID(
                        scope: scope ?? .private, zoneName: zone ?? ZoneID.defaultZoneName,
                        ownerRecordName: owner ?? ZoneID.defaultOwnerName),
                    timeZone: try ArgumentChecks.timeZone(tz), allowDeletingMost: deleteMost),
                client: CalDAVClient(credentials: credentials))
        } catch PullError.wouldDeleteMost(let collection, let deleting, let of) {
            throw CommandFailure.usage(
                "\(collection) no longer holds \(deleting) of the \(of) events it brought: pulling would delete their records. Nothing was changed; --delete-most pulls anyway (a calendar emptied on purpose)"
            )
        }
        let collection = CalDAVClient.shown(result.collection)
        for note in result.notes where !storeOptions.quiet {
            Console.error("note: \(note.worded(CommandLineWords.words))")
        }
        for uid in result.refused {
            Console.error(
                "left as it is: \(Console.clean(uid)) names a record this calendar did not bring (another family's, or of another kind)"
            )
        }
        let how = result.bySyncToken ? "the changes since the last pull's sync token" : "every event"
        print(
            "pulled \(collection) (\(how)): \(result.fetched) event\(result.fetched == 1 ? "" : "s") fetched, \(result.inserted) records new, \(result.updated) changed, \(result.deleted) deleted\(result.echoes > 0 ? ", \(result.echoes) published by this store seen unchanged" : "")\(result.refused.isEmpty ? "" : ", \(result.refused.count) left as they are"); \(result.requests.count) request\(result.requests.count == 1 ? "" : "s") (\(result.requests.joined(separator: ", ")))"
        )
    }
}
