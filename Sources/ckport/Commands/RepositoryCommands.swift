import ArgumentParser
import CKPort
import Foundation
import ObjectStorage
import Records

/// Where a repository is: `--repo`, else `$CKPORT_REPO`.
struct RepositoryOptions: ParsableArguments {
    @Option(
        name: .customLong("repo"),
        help: ArgumentHelp(
            "The backup repository: a folder, s3://BUCKET/PREFIX or rclone:REMOTE:PATH. Default: $CKPORT_REPO.",
            discussion:
                "S3's key comes from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), or AWS_PROFILE's in ~/.aws/credentials; the region from AWS_REGION; the endpoint from --s3-endpoint or AWS_ENDPOINT_URL; a private CA from AWS_CA_BUNDLE.",
            valueName: "folder-or-url"))
    var repo: String?

    @Option(
        help: ArgumentHelp(
            "The S3-compatible server (MinIO, SeaweedFS, R2, B2, …), when it is not AWS. Default: $AWS_ENDPOINT_URL.",
            valueName: "url"))
    var s3Endpoint: String?

    /// The repository's address, if one is given.
    var address: String? {
        if let repo, !repo.isEmpty { return repo }
        if let fromEnvironment = ProcessInfo.processInfo.environment["CKPORT_REPO"], !fromEnvironment.isEmpty {
            return fromEnvironment
        }
        return nil
    }

    func storage() throws -> any RepositoryStorage {
        guard let address else {
            throw CommandFailure.usage(
                "name the repository: --repo FOLDER, --repo s3://BUCKET/PREFIX or --repo rclone:REMOTE:PATH (or $CKPORT_REPO)"
            )
        }
        return try RepositoryAddress.storage(address, endpoint: s3Endpoint)
    }

    func open(_ passphrase: ReadPassphraseOptions) async throws -> BackupRepository {
        try await BackupRepository.open(
            try storage(), passphrase: try passphrase.passphrase.passphrase(),
            allowUnencrypted: passphrase.allowUnencrypted)
    }
}

/// Which snapshot of a repository a command means: `--snapshot`, `--at` and `--source`, as
/// `restore` and `serve` take them.
struct SnapshotChoiceOptions: ParsableArguments {
    @Option(help: ArgumentHelp("With --repo: the snapshot (its id, or its first characters).", valueName: "id"))
    var snapshot: String?

    @Option(
        help: ArgumentHelp(
            "With --repo: the newest snapshot made at or before this time (2026-11-24T18:00:00Z, or a local 2026-11-24 18:00).",
            valueName: "time"))
    var at: String?

    @Option(
        help: ArgumentHelp(
            "With --repo: the store the snapshots are of (its id, or its first characters), when the repository holds several.",
            valueName: "store-id"))
    var source: String?

    /// Whether any of them is given.
    var isGiven: Bool { snapshot != nil || at != nil || source != nil }

    /// The choice, `--at` read as ISO 8601 or a local time.
    func choice() throws -> SnapshotChoice {
        var moment: Int64?
        if let at {
            guard let parsed = ISO8601.parse(at, timeZone: .current) else {
                throw CommandFailure.usage(
                    "--at takes a time: 2026-11-24T18:00:00Z, 2026-11-24T18:00+01:00, or a local 2026-11-24 18:00")
            }
            moment = parsed
        }
        return SnapshotChoice(id: snapshot, at: moment, source: source)
    }
}

struct RepoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "repo",
        abstract: "Make a backup repository, or change its passphrase.",
        discussion: """
            A repository holds snapshots of stores, each one the changes since the one before \
            (or everything, the first time): ckport backup --repo writes them, ckport snapshots \
            lists them, ckport restore --repo brings one back.

              ckport repo init /mnt/nas/ckport --passphrase-file ~/.ckport-pass
              AWS_PROFILE=backups ckport repo init s3://family-backups/ckport
            """,
        subcommands: [RepoInitCommand.self, RepoPassphraseCommand.self]
    )
}

struct RepoInitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Make a backup repository in a folder or a bucket.",
        discussion: """
            With a passphrase (--passphrase-file, or $CKPORT_PASSPHRASE) the repository is \
            encrypted for its whole life: every snapshot sealed with AES-256-GCM, and no object's \
            name tells anything of the data. The passphrase opens the repository's key, so it can \
            be changed later without writing the data again (ckport repo passphrase). \
            A lost passphrase loses the backups: nobody can open them, ckport neither.

              ckport repo init /mnt/nas/ckport --passphrase-file ~/.ckport-pass
              AWS_ENDPOINT_URL=http://127.0.0.1:8333 ckport repo init s3://backups/family
              ckport repo init ./plain-repo --no-encrypt
            """
    )

    @Argument(help: "Where: a folder, s3://BUCKET/PREFIX or rclone:REMOTE:PATH. Default: $CKPORT_REPO.")
    var repository: String?

    @Option(
        help: ArgumentHelp(
            "The S3-compatible server, when it is not AWS. Default: $AWS_ENDPOINT_URL.", valueName: "url"))
    var s3Endpoint: String?

    @Flag(help: "Make the bucket if it is not there (S3 only).")
    var createBucket = false

    @Flag(
        inversion: .prefixedNo,
        help: "Encrypt the repository. Default: encrypted when a passphrase is given, else plain.")
    var encrypt: Bool?

    @OptionGroup var passphrase: PassphraseOptions

    @Flag(name: [.short, .long], help: "Print nothing but errors.")
    var quiet = false

    func run() async throws {
        let options = RepositoryOptions(repo: repository, s3Endpoint: s3Endpoint)
        let storage = try options.storage()
        let phrase = try passphrase.passphrase()
        if encrypt == true && phrase == nil { throw OperationError.noPassphrase }
        if encrypt == false && passphrase.passphraseFile != nil {
            throw CommandFailure.usage("--no-encrypt makes a plain repository, which takes no passphrase")
        }
        if createBucket, let s3 = storage as? S3Storage { try await s3.client.createBucket() }
        let made = try await BackupRepository.create(storage, passphrase: encrypt == false ? nil : phrase)
        if !quiet {
            Console.error(
                "made the repository \(made.location) (\(made.isEncrypted ? "encrypted: keep the passphrase safe, a lost one loses the backups" : "not encrypted"))"
            )
        }
    }
}

extension RepositoryOptions {
    init(repo: String?, s3Endpoint: String?) {
        self.init()
        self.repo = repo
        self.s3Endpoint = s3Endpoint
    }
}

struct RepoPassphraseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passphrase",
        abstract: "Change an encrypted repository's passphrase (the data is not written again).",
        discussion: """
              ckport repo passphrase --repo /mnt/nas/ckport \\
                  --passphrase-file ~/.old-pass --new-passphrase-file ~/.new-pass
            """
    )

    @OptionGroup var repository: RepositoryOptions

    @OptionGroup var passphrase: PassphraseOptions

    @Option(help: ArgumentHelp("Read the new passphrase from this file (its first line).", valueName: "file"))
    var newPassphraseFile: String

    func run() async throws {
        let newPhrase = try PassphraseOptions(passphraseFile: newPassphraseFile).passphrase() ?? ""
        let opened = try await BackupRepository.open(try repository.storage(), passphrase: try passphrase.passphrase())
        try await opened.changePassphrase(to: newPhrase)
        Console.error("changed the passphrase of \(opened.location)")
    }
}

extension PassphraseOptions {
    init(passphraseFile: String) {
        self.init()
        self.passphraseFile = passphraseFile
    }
}

struct SnapshotsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "snapshots",
        abstract: "List a repository's snapshots.",
        discussion: """
            Each snapshot: its id (the first 8 characters are enough to name it), when it was \
            made, the store it is of (its store id, and where the store was), whether it is full \
            or builds on another, how many records (or changes) it holds and what it added to the \
            repository.

              ckport snapshots --repo /mnt/nas/ckport
              ckport snapshots --json | jq '.[-1].id'
            """
    )

    @OptionGroup var repository: RepositoryOptions

    @Option(
        help: ArgumentHelp("Only the snapshots of this store (its id, or its first characters).", valueName: "store-id")
    )
    var source: String?

    @Flag(help: "Print a JSON array for scripts: id, time, store, storeLocation, host, parent, records, bytes, token.")
    var json = false

    @OptionGroup var passphrase: ReadPassphraseOptions

    func run() async throws {
        let opened = try await repository.open(passphrase)
        let all = try await opened.snapshots()
        let shown = source == nil ? all : try Backups.snapshots(of: source, in: all, repository: opened.location)
        if json {
            var out = JSONWriter()
            out.raw("[")
            for (index, snapshot) in shown.enumerated() {
                if index > 0 { out.raw(",") }
                try out.encoded(snapshot.summary)
            }
            out.raw("]")
            print(out.text)
            return
        }
        let rows = shown.map { snapshot in
            [
                snapshot.shortID, snapshot.time, String(snapshot.store.prefix(12)),
                snapshot.parent.map { "after " + String($0.prefix(8)) }
                    ?? (snapshot.base == nil ? "full" : "full, folded"),
                Console.count(snapshot.records), Console.bytes(snapshot.bytes),
            ]
        }
        print(Console.table(["id", "time", "store", "kind", "records", "added"], rows, numeric: [4, 5]))
        if !shown.isEmpty {
            let stores = Set(shown.map(\.store))
            Console.error(
                "\(Console.count(shown.count)) snapshot\(shown.count == 1 ? "" : "s") of \(stores.count) store\(stores.count == 1 ? "" : "s") in \(opened.location)"
            )
        }
    }
}

struct ForgetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forget",
        abstract: "Remove the snapshots a retention policy does not keep.",
        discussion: """
            restic's rules, store by store: --keep-last N keeps the newest N; --keep-hourly, \
            --keep-daily, --keep-weekly, --keep-monthly and --keep-yearly N keep the newest \
            snapshot of each of the newest N hours, days, ISO weeks, months or years that have one \
            (-1: every one), in this machine's time zone. A snapshot any rule keeps stays.

            A kept snapshot that builds on one that goes is first folded: the changes of those \
            that go are merged into it (written, read back and checked), and when the full \
            snapshot they built on goes too, its data stays as the folded one's base; once the \
            changes pass half of that base, the whole chain is written again as one full \
            snapshot. Nothing kept ever breaks. --prune then \
            removes the data no snapshot needs; without it, only the list changes. --dry-run \
            shows what would go and why each one stays.

              ckport forget --repo /mnt/nas/ckport --keep-daily 7 --keep-weekly 5 \\
                  --keep-monthly 12 --prune
              ckport forget --keep-last 3 --dry-run
            """
    )

    @OptionGroup var repository: RepositoryOptions

    @Option(help: ArgumentHelp("Keep the newest N snapshots.", valueName: "n"))
    var keepLast = 0
    @Option(help: ArgumentHelp("Keep the newest snapshot of each of the newest N hours.", valueName: "n"))
    var keepHourly = 0
    @Option(help: ArgumentHelp("Keep the newest snapshot of each of the newest N days.", valueName: "n"))
    var keepDaily = 0
    @Option(help: ArgumentHelp("Keep the newest snapshot of each of the newest N weeks.", valueName: "n"))
    var keepWeekly = 0
    @Option(help: ArgumentHelp("Keep the newest snapshot of each of the newest N months.", valueName: "n"))
    var keepMonthly = 0
    @Option(help: ArgumentHelp("Keep the newest snapshot of each of the newest N years.", valueName: "n"))
    var keepYearly = 0

    @Option(
        help: ArgumentHelp("Only the snapshots of this store (its id, or its first characters).", valueName: "store-id")
    )
    var source: String?

    @Flag(help: "Show what would go and why each snapshot stays; change nothing.")
    var dryRun = false

    @Flag(help: "Remove the data no snapshot needs any more.")
    var prune = false

    @Flag(help: "Print the decisions as JSON for scripts.")
    var json = false

    @OptionGroup var passphrase: ReadPassphraseOptions

    @Flag(name: [.short, .long], help: "No progress and no summary on standard error.")
    var quiet = false

    var policy: RetentionPolicy {
        RetentionPolicy(
            last: keepLast, hourly: keepHourly, daily: keepDaily, weekly: keepWeekly, monthly: keepMonthly,
            yearly: keepYearly)
    }

    func validate() throws {
        for value in [keepLast, keepHourly, keepDaily, keepWeekly, keepMonthly, keepYearly] where value < -1 {
            throw ValidationError("a --keep-… count is a number of snapshots, or -1 for every one")
        }
        if policy.isEmpty {
            throw ValidationError(
                "give at least one --keep-… rule (--keep-last, --keep-daily, …): a forget without one would remove every snapshot"
            )
        }
    }

    func run() async throws {
        let opened = try await repository.open(passphrase)
        let result = try await Backups.forget(
            opened, policy: policy, source: source, dryRun: dryRun, prune: prune,
            progress: quiet ? nil : { Console.error($0) })
        if json {
            var out = JSONWriter()
            out.raw("[")
            for (index, decision) in result.decisions.enumerated() {
                if index > 0 { out.raw(",") }
                out.raw("{\"id\":")
                out.string(decision.snapshot.id)
                out.raw(",\"time\":")
                out.string(decision.snapshot.time)
                out.raw(",\"store\":")
                out.string(decision.snapshot.store)
                out.raw(",\"keep\":")
                out.raw(decision.kept ? "true" : "false")
                out.raw(",\"folded\":")
                out.raw(decision.folded ? "true" : "false")
                out.raw(",\"reasons\":")
                try out.encoded(decision.reasons)
                out.raw("}")
            }
            out.raw("]")
            print(out.text)
        } else {
            let rows = result.decisions.map { decision in
                [
                    decision.snapshot.shortID, decision.snapshot.time, String(decision.snapshot.store.prefix(12)),
                    decision.kept ? "keep" : (dryRun ? "would go" : "gone"),
                    decision.reasons.joined(separator: ", ")
                        + (decision.folded ? (dryRun ? " (would be folded)" : " (folded)") : ""),
                ]
            }
            print(Console.table(["id", "time", "store", "", "why"], rows, numeric: []))
        }
        if !quiet {
            let going = result.decisions.filter { !$0.kept }.count
            Console.error(
                "\(dryRun ? "would remove" : "removed") \(Console.count(going)) of \(Console.count(result.decisions.count)) snapshots"
                    + (prune && !dryRun
                        ? "; pruned \(Console.count(result.prunedObjects)) objects (\(Console.bytes(result.prunedBytes)))"
                        : "")
            )
        }
    }
}
