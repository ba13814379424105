import ArgumentParser
import Formats
import Foundation
import PostgresStore
import Records
import SQLiteStore
import StoreCore

struct CKPortCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ckport",
        abstract: "Move CloudKit records in and out of a local store, and keep them safe through schema changes.",
        discussion: """
            ckport keeps CloudKit data — record types, zones, records with typed fields, system \
            fields and change tokens — in one SQLite file, and moves it to and from JSON.

            Start with a schema (the text 'cktool export-schema' writes), then import records:

              ckport schema import samples/family-calendar/schema.ckdb
              ckport import samples/family-calendar/records.jsonl
              ckport export --type Event --sort startDate \\
                  --where "familyID == 'family-1' AND isDeleted == false"

            The store is --store PATH, else $CKPORT_STORE, else ./ckport.sqlite. A store on a \
            PostgreSQL server is a URL: --store 'postgresql://USER@HOST:PORT/DB?schema=NAME' (the \
            password from PGPASSWORD or ~/.pgpass, never the command line).
            Exit status: 0 done, 1 usage error, 2 invalid input (nothing was written), 3 any other failure (for pull: also records left out), 4 CloudKit wants a new sign-in.
            """,
        version: CKPortCommand.versionText,
        subcommands: [
            SchemaCommand.self, ImportCommand.self, ExportCommand.self, BackupCommand.self, VerifyCommand.self,
            InspectCommand.self,
            RestoreCommand.self, CopyCommand.self, MigrateCommand.self, DeleteCommand.self, SharesCommand.self,
            StatsCommand.self, ServeCommand.self, UpgradeCommand.self, GenerateCommand.self, PullCommand.self,
            PushCommand.self, CloudCommand.self, RepoCommand.self, SnapshotsCommand.self, ForgetCommand.self,
            CalendarCommand.self,
        ]
    )
}

extension CKPortCommand {
    /// `ckport --version`: the version, the commit it was built from, and the formats it writes.
    static var versionText: String {
        """
        ckport \(CKPortVersion.current)
        commit \(BuildCommit.commit ?? "unknown (built from source; scripts/release.sh records it)")
        writes SQLite store format \(RecordStore.formatVersion), PostgreSQL store format \(PostgresStore.format), backup bundle format \(BundleManifest.currentFormat)
        """
    }
}

/// Options every command that touches a store takes.
struct StoreOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The store: a SQLite file, or postgresql://USER@HOST:PORT/DB?schema=NAME.",
            discussion:
                "Default: $CKPORT_STORE, else ./ckport.sqlite. A PostgreSQL store's password comes from PGPASSWORD, passfile=FILE in the URL, or ~/.pgpass.",
            valueName: "path-or-url"))
    var store: String?

    @Flag(name: [.short, .long], help: "No progress and no summary on standard error (errors are still reported).")
    var quiet = false

    @Option(
        help: ArgumentHelp(
            "How long to wait while another ckport writes to the store (on PostgreSQL: for any lock another transaction holds), in seconds.",
            valueName: "seconds"))
    var wait: Double = RecordStore.defaultWaitSeconds

    var path: String { StoreOptions.resolvePath(store) }

    /// Where the store is: `--store`, then `$CKPORT_STORE`, then `./ckport.sqlite`.
    static func resolvePath(_ option: String?, environment: [String: String] = ProcessInfo.processInfo.environment)
        -> String
    {
        if let option, !option.isEmpty { return option }
        if let fromEnvironment = environment["CKPORT_STORE"], !fromEnvironment.isEmpty { return fromEnvironment }
        return "ckport.sqlite"
    }

    func validate() throws {
        guard wait >= 0, wait.isFinite else { throw ValidationError("--wait takes a number of seconds, 0 or more") }
    }

    /// Opens the store, on SQLite or PostgreSQL by what `--store` names; commands that only
    /// read pass `create: false`, commands that load records `buildAside: true`.
    func open(create: Bool, upgrade: Bool = true, buildAside: Bool = false) throws -> any RecordStoring {
        try StoreOptions.open(path, create: create, upgrade: upgrade, wait: wait, quiet: quiet, buildAside: buildAside)
    }

    /// Opens the store at `path` (a SQLite file or a postgresql:// URL); a store of an older
    /// format is upgraded in place, or with `upgrade` false refused. With `buildAside`, a new
    /// SQLite store is built beside `path` and appears there when its first write commits (see
    /// ``RecordStore/init(path:create:upgrade:waitSeconds:waiting:buildAside:)``).
    static func open(
        _ path: String, create: Bool, upgrade: Bool = true, wait: Double, quiet: Bool, buildAside: Bool = false
    ) throws -> any RecordStoring {
        var waiting: (@Sendable () -> Void)?
        if !quiet { waiting = { Console.error("waiting for another ckport writing to \(path)…") } }
        let options = StoreOpenOptions(
            create: create, upgrade: upgrade, waitSeconds: wait, buildAside: buildAside, waiting: waiting)
        let store = try stores.open(path, options: options)
        if let versioned = store as? any VersionedStore, let upgradedFrom = versioned.upgradedFrom, !quiet {
            Console.error(
                "upgraded the store \(Console.clean(path)) in place from format \(upgradedFrom) to \(versioned.formatVersion) (records now keep their parent and share links)"
            )
        }
        return store
    }

    /// The kinds of store ckport opens: PostgreSQL by its URLs, SQLite by any other path.
    static let stores = RecordStores([PostgresBackend(), SQLiteBackend()])

    /// Whether there is a store at `path` yet: a file, or a store in the server's namespace (a
    /// server that cannot be asked counts as yes: opening the store then says why).
    static func exists(_ path: String, wait: Double) -> Bool {
        stores.exists(path, options: StoreOpenOptions(create: false, waitSeconds: wait))
    }

    /// The kind of store at `path`, for messages.
    static func backend(_ path: String) -> String {
        (try? stores.backend(for: path).name) ?? "SQLite"
    }
}
