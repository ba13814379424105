import ArgumentParser
import CKPort
import Formats
import Foundation
import ObjectStorage
import Records
import SQLiteStore
import StoreCore

struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Write the store (or a part of it) to one compressed bundle.",
        discussion: """
            A bundle is a gzip-compressed POSIX tar: manifest.json first (counts, sizes and \
            SHA-256 of every member, the schema's record types, the store's change token), then \
            schema.ckdb, then records/<scope>/<zone>/<RecordType>.jsonl in CloudKit's record shape, \
            then assets/<sha256> for every asset file the records name. \
            `tar -tzf` lists it and `gzip -t` checks it; `ckport verify` checks everything.

              ckport backup -o family.ckbundle
              ckport backup -o tasks.ckbundle --type Task --where "status != 'done'"

            --since PREVIOUS.ckbundle writes an incremental bundle: only what changed or was \
            deleted after PREVIOUS was made, in the order it happened. Restore a chain in order:

              ckport backup -o monday.ckbundle
              ckport backup -o tuesday.ckbundle --since monday.ckbundle
              ckport restore monday.ckbundle tuesday.ckbundle --store restored.sqlite

            A passphrase, from --passphrase-file or $CKPORT_PASSPHRASE, seals the whole bundle \
            with AES-256-GCM under a key derived from it (scrypt, random salt): a backup given a \
            passphrase is always encrypted. --encrypt insists on it (no passphrase is then an \
            error); --no-encrypt writes a plain bundle although $CKPORT_PASSPHRASE is set.

              ckport backup -o family.ckbundle --passphrase-file ~/.ckport-pass
              CKPORT_PASSPHRASE="$(cat ~/.ckport-pass)" \\
                  ckport backup -o family.ckbundle --encrypt

            --repo (or $CKPORT_REPO, when there is no -o) writes a snapshot into a repository \
            (ckport repo init makes one): the first snapshot of a store holds everything, each \
            later one only what changed since the one before (by the store's change token). The \
            records travel compressed while later ones are still being read; the snapshot \
            appears only once all of it is written. An encrypted repository takes its passphrase \
            as a bundle does.

              ckport backup --repo /mnt/nas/ckport --passphrase-file ~/.ckport-pass
              ckport backup --repo s3://family-backups/ckport --store family.sqlite
            """
    )

    @Option(
        name: [.short, .customLong("output")],
        help: ArgumentHelp("The bundle to write (.ckbundle or .tar.gz).", valueName: "file"))
    var output: String?

    @OptionGroup var repository: RepositoryOptions

    @Flag(help: "With --repo: a full snapshot, even when an earlier one of the store could be built on.")
    var full = false

    @OptionGroup var filter: RecordFilterOptions

    @Option(
        help: ArgumentHelp(
            "Write only what changed after this earlier bundle of the same store was made.", valueName: "bundle"))
    var since: String?

    @Flag(
        inversion: .prefixedNo,
        help:
            "Encrypt the bundle (AES-256-GCM, key from the passphrase by scrypt). Default: encrypted when a passphrase is given (--passphrase-file, $CKPORT_PASSPHRASE), else plain."
    )
    var encrypt: Bool?

    @OptionGroup var passphrase: PassphraseOptions

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        if output == "-" { throw ValidationError("a bundle goes to a file: -o family.ckbundle") }
        if since != nil && filter.predicate != nil {
            throw ValidationError("--since writes every change; it does not combine with --where")
        }
        if output != nil && repository.repo != nil {
            throw ValidationError("write a bundle (-o FILE) or a snapshot into a repository (--repo), not both")
        }
        if output == nil && repository.address == nil {
            throw ValidationError(
                "say where the backup goes: -o FILE for a bundle, or --repo REPOSITORY (or $CKPORT_REPO)")
        }
        if output == nil && since != nil {
            throw ValidationError("--since is for bundles; a repository finds the snapshot to build on itself")
        }
        if output != nil && full { throw ValidationError("--full is for --repo: a bundle without --since is full") }
    }

    func run() async throws {
        guard let output else { return try await backupToRepository() }
        let store = try storeOptions.open(create: false)
        if let since { try InputFiles.check(since, as: "a bundle", binary: true) }
        // A passphrase encrypts: never a plain bundle beside one, unless --no-encrypt says so.
        // A passphrase variable that is set but empty ("$(cat ~/.missing)") is a mistake, not a wish for a plain bundle.
        if passphrase.passphraseFile == nil, encrypt != false,
            ProcessInfo.processInfo.environment["CKPORT_PASSPHRASE"] == ""
        {
            throw CommandFailure.usage(
                "$CKPORT_PASSPHRASE is set but empty, so no bundle was written: give it the passphrase, or unset it (or --no-encrypt) for a plain bundle"
            )
        }
        let phrase = try passphrase.passphrase()
        let encrypts = encrypt ?? (phrase != nil)
        if encrypt == false && passphrase.passphraseFile != nil && since == nil {
            throw CommandFailure.usage(
                "--no-encrypt writes a plain bundle, which takes no passphrase: leave out --passphrase-file for a plain bundle, or leave out --no-encrypt to encrypt it"
            )
        }
        if !encrypts && phrase != nil && !storeOptions.quiet {
            Console.error(
                "note: the bundle is not encrypted (--no-encrypt)\(since == nil ? ", although $CKPORT_PASSPHRASE is set" : "; the passphrase opens \(since!) only")"
            )
        }
        let options = BackupOptions(query: try filter.query(), since: since, encrypt: encrypts, passphrase: phrase)
        let progress = ProgressLine("backing up", quiet: storeOptions.quiet)
        let started = Date()
        let result = try Backups.write(store, to: output, options: options, progress: progress.handler)
        progress.finish()
        if !storeOptions.quiet {
            let manifest = result.manifest
            Console.error(
                "backed up \(Console.count(manifest.recordCount)) \(result.isIncremental ? "changes" : "records") in \(result.memberCount) member\(result.memberCount == 1 ? "" : "s") to \(output) "
                    + "(\(Console.bytes(result.bytesWritten))\(encrypts ? ", encrypted" : "")) in \(Console.seconds(Date().timeIntervalSince(started)))"
            )
            Console.error("change token: \(manifest.token)")
        }
        if !result.missingAssets.isEmpty {
            Console.error(
                "warning: \(Console.count(result.missingAssets.count)) assets the records name are not held by the store, so the bundle keeps their values without the files (e.g. \(result.missingAssets.prefix(2).joined(separator: ", ")))"
            )
        }
    }

    private func backupToRepository() async throws {
        if encrypt == true && passphrase.passphraseFile == nil
            && (ProcessInfo.processInfo.environment["CKPORT_PASSPHRASE"] ?? "").isEmpty
        {
            throw OperationError.noPassphrase
        }
        let store = try storeOptions.open(create: false)
        let opened = try await BackupRepository.open(
            try repository.storage(), passphrase: try passphrase.passphrase(), allowUnencrypted: encrypt == false)
        if encrypt == true && !opened.isEncrypted { throw RepositoryError.notEncrypted(location: opened.location) }
        let progress = ProgressLine("backing up", quiet: storeOptions.quiet)
        let started = Date()
        let result: RepositoryBackupResult
        do {
            result = try await Backups.backup(
                store, to: opened, options: RepositoryBackupOptions(query: try filter.query(), full: full),
                progress: progress.handler)
            progress.finish()
        } catch {
            progress.finish()
            throw error
        }
        let snapshot = result.snapshot
        if !storeOptions.quiet {
            if let reason = result.fullBecause { Console.error("note: a full snapshot, because \(reason)") }
            let kind =
                snapshot.parent.map { "changes since snapshot \(String($0.prefix(8)))" } ?? "records (a full snapshot)"
            Console.error(
                "snapshot \(snapshot.shortID): \(Console.count(snapshot.records)) \(kind), \(Console.bytes(snapshot.bytes)) added to \(opened.location)\(opened.isEncrypted ? " (encrypted)" : "") in \(Console.seconds(Date().timeIntervalSince(started)))"
            )
            if result.newAssets + result.keptAssets > 0 {
                Console.error(
                    "asset files: \(Console.count(result.newAssets)) written, \(Console.count(result.keptAssets)) there already"
                )
            }
            Console.error("change token: \(snapshot.token)")
        }
        if !result.missingAssets.isEmpty {
            Console.error(
                "warning: \(Console.count(result.missingAssets.count)) assets the records name are not held by the store, so the snapshot keeps their values without the files (e.g. \(result.missingAssets.prefix(2).joined(separator: ", ")))"
            )
        }
    }
}

/// Where a bundle's passphrase comes from: a file, or $CKPORT_PASSPHRASE — never the command
/// line, where other users and the shell history would see it.
struct PassphraseOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Read the passphrase of an encrypted bundle from this file (its first line). Default: $CKPORT_PASSPHRASE.",
            valueName: "file"))
    var passphraseFile: String?

    func passphrase() throws -> String? {
        if let passphraseFile {
            Console.warnIfShared(passphraseFile, "a bundle's passphrase")
            guard let text = try? String(contentsOfFile: passphraseFile, encoding: .utf8) else {
                throw CommandFailure.usage("cannot read the passphrase file \(passphraseFile)")
            }
            let line = String(text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
                .trimmingCharacters(in: CharacterSet(charactersIn: "\r"))
            guard !line.isEmpty else { throw CommandFailure.usage("the passphrase file \(passphraseFile) is empty") }
            return line
        }
        if let value = ProcessInfo.processInfo.environment["CKPORT_PASSPHRASE"], !value.isEmpty { return value }
        return nil
    }
}

/// Passphrase options for commands that read bundles: a plain bundle is refused when a
/// passphrase is given, unless --allow-unencrypted.
struct ReadPassphraseOptions: ParsableArguments {
    @OptionGroup var passphrase: PassphraseOptions

    @Flag(
        help:
            "With a passphrase, read a bundle that is not encrypted too (by default it is refused: it may have been put in the encrypted backup's place)."
    )
    var allowUnencrypted = false

    func options(_ limits: BundleLimitOptions) throws -> BundleReadOptions {
        BundleReadOptions(
            limits: limits.limits, passphrase: try passphrase.passphrase(), allowUnencrypted: allowUnencrypted)
    }
}

/// Options shared by the commands that read bundles.
struct BundleLimitOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Refuse a bundle that expands more than this many times its compressed size.", valueName: "ratio"))
    var maxRatio: Int64 = DecompressionLimits().maxRatio

    @Option(help: ArgumentHelp("Refuse a bundle that expands to more than this many GiB.", valueName: "GiB"))
    var maxSize: Int64 = DecompressionLimits().maxTotalBytes >> 30

    var limits: DecompressionLimits { DecompressionLimits(maxTotalBytes: maxSize << 30, maxRatio: maxRatio) }
}

struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check a bundle completely without restoring it.",
        discussion: """
            Checks the gzip and tar structure, every member's size, SHA-256 and record count \
            against the manifest, and every record against the bundled schema. Exits 2 on any \
            problem, naming the member.

              ckport verify family.ckbundle

            With --repo (and no bundle): the repository — every snapshot readable, every chain \
            whole, every object a snapshot names present at its size; --read-data reads every \
            snapshot whole as a restore would (every checksum and count), --read-data-subset 10% \
            a random tenth of them (a nightly job covers them all in turn).

              ckport verify --repo /mnt/nas/ckport --read-data-subset 10%
            """
    )

    @Argument(help: "The bundle.")
    var bundle: String?

    @OptionGroup var repository: RepositoryOptions

    @Flag(help: "With --repo: read every snapshot whole.")
    var readData = false

    @Option(help: ArgumentHelp("With --repo: read this share of the snapshots whole (10%).", valueName: "percent"))
    var readDataSubset: String?

    func validate() throws {
        if bundle != nil && repository.repo != nil {
            throw ValidationError("check a bundle or a repository (--repo), not both")
        }
        if bundle == nil && repository.address == nil {
            throw ValidationError("name the bundle to check, or a repository (--repo, or $CKPORT_REPO)")
        }
        if bundle != nil && (readData || readDataSubset != nil) {
            throw ValidationError("--read-data and --read-data-subset are for --repo: a bundle is always read whole")
        }
    }

    func repositoryShare() throws -> Double {
        if readData { return 1 }
        guard let text = readDataSubset else { return 0 }
        let number = text.hasSuffix("%") ? String(text.dropLast()) : text
        guard let value = Double(number), value > 0, value <= 100 else {
            throw CommandFailure.usage("--read-data-subset takes a share from 1% to 100%, e.g. 10%")
        }
        return value / 100
    }

    @OptionGroup var limits: BundleLimitOptions

    @OptionGroup var passphrase: ReadPassphraseOptions

    @Flag(name: [.short, .long], help: "Print nothing when the bundle is sound.")
    var quiet = false

    func run() async throws {
        let started = Date()
        guard let bundle else { return try await verifyRepository(started) }
        try InputFiles.check(bundle, as: "a bundle", binary: true)
        let check = try Backups.verify(bundle, options: try passphrase.options(limits))
        if !quiet {
            let manifest = check.manifest
            let assetNote =
                check.assetFiles == 0
                ? "" : " and \(Console.count(check.assetFiles)) asset files (\(Console.bytes(check.assetBytes)))"
            print(
                "\(bundle): sound — \(Console.count(check.records)) records\(assetNote) in \(manifest.members.count - 1) members, every checksum and count as the manifest says"
            )
            print(
                check.encrypted
                    ? "encrypted: yes (AES-256-GCM; every chunk opened with the passphrase)"
                    : "encrypted: no (anyone who can write to its folder could have made it; its checksums are not keyed)"
            )
            print(
                "made \(manifest.created) by ckport \(manifest.ckportVersion) from store \(manifest.storeID) at \(manifest.token)"
            )
            for (type, count) in check.recordsByType.sorted(by: { $0.key < $1.key }) {
                print("  \(type): \(Console.count(count))")
            }
            if check.outsideReferences > 0 {
                print(
                    "note: \(Console.count(check.outsideReferences)) references point at records outside the bundle, e.g. \(check.outsideReferenceExamples.map { "\($0.from) → \($0.to)" }.joined(separator: ", "))"
                )
            }
            if !check.absentAssets.isEmpty {
                print(
                    "note: \(Console.count(check.absentAssets.count)) assets the records name are not in the bundle (their bytes were not in the store), e.g. \(check.absentAssets.prefix(2).joined(separator: ", "))"
                )
            }
            print("checked in \(Console.seconds(Date().timeIntervalSince(started)))")
        }
    }

    private func verifyRepository(_ started: Date) async throws {
        let share = try repositoryShare()
        let opened = try await repository.open(passphrase)
        let check = try await Backups.verify(opened, readFraction: share)
        guard check.problems.isEmpty else {
            throw CommandFailure.invalid(
                check.problems.prefix(20).joined(separator: "\n")
                    + "\n\(opened.location) is not sound (\(check.problems.count) problem\(check.problems.count == 1 ? "" : "s"))"
            )
        }
        if !quiet {
            print(
                "\(opened.location): sound — \(Console.count(check.snapshots)) snapshots, \(Console.count(check.objects)) objects, every chain whole\(check.read > 0 ? "; \(Console.count(check.read)) snapshots read whole, every checksum and count right" : "")"
            )
            print("checked in \(Console.seconds(Date().timeIntervalSince(started)))")
        }
    }
}

struct InspectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Show a bundle's manifest: when and from where it was made, and what it holds.",
        discussion: """
            Reads only the manifest and the schema at the front of the bundle.

              ckport inspect family.ckbundle
              ckport inspect family.ckbundle --json | jq '.members[].records'
            """
    )

    @Argument(help: "The bundle.")
    var bundle: String

    @Flag(help: "Print the manifest itself, as JSON.")
    var json = false

    @OptionGroup var limits: BundleLimitOptions

    @OptionGroup var passphrase: ReadPassphraseOptions

    func run() async throws {
        try InputFiles.check(bundle, as: "a bundle", binary: true)
        let reader = try Backups.open(bundle, options: try passphrase.options(limits))
        let manifest = reader.manifest
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(manifest), as: UTF8.self))
            return
        }
        print("bundle   \(bundle) (\(reader.isEncrypted ? "encrypted" : "not encrypted"))")
        print("made     \(manifest.created) by ckport \(manifest.ckportVersion) (format \(manifest.format))")
        print("store    \(manifest.storeID), token \(manifest.token)")
        if let base = manifest.baseToken { print("base     \(base): incremental, the changes after that token") }
        print(
            "schema   \(reader.schema.recordTypes.count) record types: \(reader.schema.recordTypes.map(\.name).joined(separator: ", "))"
        )
        print("")
        let assets = manifest.members.filter { $0.kind == "asset" }
        let assetRows =
            assets.isEmpty
            ? []
            : [
                [
                    "(assets)", "", "\(Console.count(assets.count)) files", "",
                    Console.bytes(assets.reduce(0) { $0 + $1.bytes }),
                ]
            ]
        if !reader.migrationHistory.isEmpty {
            let sets = Dictionary(grouping: reader.migrationHistory, by: \.set).map {
                "\($0.key) at version \($0.value.map(\.version).max() ?? 0)"
            }.sorted()
            print("history  \(reader.migrationHistory.count) migrations applied: \(sets.joined(separator: ", "))")
        }
        let rows =
            manifest.members.filter { !["schema", "asset", "migrations"].contains($0.kind) }.map { member in
                member.kind == "changes"
                    ? ["(changes)", "", "", Console.count(member.records ?? 0), Console.bytes(member.bytes)]
                    : [
                        member.scope ?? "", member.zoneName ?? "", member.recordType ?? "",
                        Console.count(member.records ?? 0), Console.bytes(member.bytes),
                    ]
            } + assetRows + [
                [
                    "total", "", "", Console.count(manifest.recordCount),
                    Console.bytes(manifest.members.reduce(0) { $0 + $1.bytes }),
                ]
            ]
        print(Console.table(["scope", "zone", "type", "records", "bytes"], rows, numeric: [3, 4]))
    }
}

struct RestoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Restore a bundle into a store.",
        discussion: """
            The bundle's schema and records go into the store in one transaction, which commits only \
            once the whole bundle has checked out (every size, checksum and count, every record \
            valid), so a damaged bundle restores nothing. A store that already holds \
            records needs --mode (upsert, replace or newer, as for import).

              ckport restore family.ckbundle --store restored.sqlite
              ckport restore family.ckbundle --mode newer
              ckport restore monday.ckbundle tuesday.ckbundle wednesday.ckbundle
              ckport restore family.ckbundle --zone family-1-zone \\
                  --type Event --type EventParticipant
              ckport restore family.ckbundle --mode upsert \\
                  --rename-zone family-1-zone=family-1-before-upgrade

            A chain is checked before anything is written: each incremental bundle must start \
            where the one before it ended, from the same store.

            From a repository (--repo, or $CKPORT_REPO when no bundle is named): the newest \
            snapshot, the one --snapshot names, or the newest made at or before --at (ISO 8601 \
            with Z or an offset, or a local time). ckport finds the snapshots it builds on and \
            checks them all as it checks bundles.

              ckport restore --repo /mnt/nas/ckport --store restored.sqlite
              ckport restore --repo s3://family-backups/ckport --at "2026-11-24 18:00" \\
                  --type TodoItem --store tuesday.sqlite
              ckport restore --repo /mnt/nas/ckport --snapshot 3f9c01ab --store copy.sqlite
            """
    )

    @Argument(help: "The bundle, or a full bundle and the incremental ones after it, in order.")
    var bundles: [String] = []

    @OptionGroup var repository: RepositoryOptions

    @OptionGroup var chosen: SnapshotChoiceOptions

    /// The import modes that make sense for a restore (insert would refuse every record a
    /// store already has).
    enum RestoreMode: String, ExpressibleByArgument, CaseIterable {
        case upsert, replace, newer
        var writeMode: WriteMode { WriteMode(rawValue: rawValue)! }
    }

    @Option(
        name: .customLong("mode"), help: "How bundled records combine with stored ones, for a store that is not empty.")
    var restoreMode: RestoreMode?

    var mode: WriteMode? { restoreMode?.writeMode }

    @Option(
        name: .customLong("type"),
        help: ArgumentHelp("Restore only this record type; repeat for several.", valueName: "type"))
    var recordTypes: [String] = []

    @Option(help: ArgumentHelp("Restore only zones with this name; repeat for several.", valueName: "name"))
    var zone: [String] = []

    @Option(
        help: ArgumentHelp(
            "Restore the records of zone OLD into zone NEW (same scope and owner); repeat for several.",
            valueName: "old=new"))
    var renameZone: [String] = []

    @OptionGroup var limits: BundleLimitOptions

    @OptionGroup var passphrase: ReadPassphraseOptions

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        if !bundles.isEmpty && repository.repo != nil {
            throw ValidationError("restore bundles, or a snapshot from a repository (--repo), not both")
        }
        if bundles.isEmpty && repository.address == nil {
            throw ValidationError("name the bundles to restore, or a repository (--repo, or $CKPORT_REPO)")
        }
        if bundles.isEmpty == false && chosen.isGiven {
            throw ValidationError("--snapshot, --at and --source choose a snapshot of a repository (--repo)")
        }
        if chosen.snapshot != nil && chosen.at != nil {
            throw ValidationError("choose a snapshot by --snapshot or by --at, not both")
        }
    }

    func run() async throws {
        let started = Date()
        for bundle in bundles { try InputFiles.check(bundle, as: "a bundle", binary: true) }
        var renames: [String: String] = [:]
        for entry in renameZone {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                throw CommandFailure.usage("--rename-zone takes OLD=NEW, e.g. family-1-zone=family-1-copy")
            }
            renames[parts[0]] = parts[1]
        }
        let options = RestoreOptions(
            mode: mode, recordTypes: Set(recordTypes), zones: Set(zone), zoneRenames: renames,
            read: try passphrase.options(limits))
        if bundles.isEmpty { return try await restoreFromRepository(options, started: started) }
        // The chain is checked before a store is made for it.
        let readers = try bundles.map { try Backups.open($0, options: options.read, forRestore: true) }
        try Backups.checkChain(readers, intoExisting: mode != nil)
        // A new store is built aside and appears only once the restore has committed; one made
        // in place that the restore could not fill is removed by the store itself, and only if
        // no other process has opened it meanwhile.
        let store = try storeOptions.open(create: true, buildAside: true)
        let progress = ProgressLine("restoring", quiet: storeOptions.quiet)
        let summary: ImportSummary
        do {
            summary = try Backups.restore(readers, into: store, options: options, progress: progress.handler)
            progress.finish()
        } catch {
            progress.finish()
            throw error
        }
        if !storeOptions.quiet {
            let assets = summary.assets > 0 ? " and \(Console.count(summary.assets)) asset files" : ""
            let written = summary.totals.inserted + summary.totals.updated
            // A chain writes a record once a bundle: say what the store holds at the end too.
            let holds =
                bundles.count > 1 || summary.totals.deleted > 0 || mode != nil
                ? "; the store now holds \(Console.count(try store.read { try $0.count(RecordQuery()) })) records" : ""
            Console.error(
                "restored \(Console.count(written)) record\(written == 1 ? "" : "s")\(assets) (\(Console.count(summary.totals.unchanged)) unchanged, \(Console.count(summary.totals.deleted)) deleted) from \(bundles.joined(separator: ", ")) into \(storeOptions.path) in \(Console.seconds(Date().timeIntervalSince(started)))\(holds)"
            )
            Console.error("change token: \(summary.token?.description ?? "")")
        }
    }

    private func restoreFromRepository(_ options: RestoreOptions, started: Date) async throws {
        let choice = try self.chosen.choice()
        let opened = try await repository.open(passphrase)
        let all = try await opened.snapshots()
        let chosen = try Backups.choose(choice, in: all, repository: opened.location)
        let store = try storeOptions.open(create: true, buildAside: true)
        let progress = ProgressLine("restoring", quiet: storeOptions.quiet)
        let summary: ImportSummary
        do {
            summary = try await Backups.restore(
                from: opened, snapshot: chosen, into: store, options: options, progress: progress.handler)
            progress.finish()
        } catch {
            progress.finish()
            throw error
        }
        if !storeOptions.quiet {
            let written = summary.totals.inserted + summary.totals.updated
            let count = try store.read { try $0.count(RecordQuery()) }
            Console.error(
                "restored snapshot \(chosen.shortID) of \(chosen.time) (\(Console.count(written)) records written, \(Console.count(summary.totals.deleted)) deleted) from \(opened.location) into \(storeOptions.path) in \(Console.seconds(Date().timeIntervalSince(started))); the store now holds \(Console.count(count)) records"
            )
            Console.error("change token: \(summary.token?.description ?? "")")
        }
    }
}
