import ArgumentParser
import Foundation
import Formats
import Records
import Store

struct BackupCommand: ParsableCommand {
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

        --encrypt seals the whole bundle with AES-256-GCM under a key derived from a \
        passphrase (scrypt, random salt), read from --passphrase-file or $CKPORT_PASSPHRASE:

          CKPORT_PASSPHRASE="$(cat ~/.ckport-pass)" \\
              ckport backup -o family.ckbundle --encrypt
        """
    )

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("The bundle to write (.ckbundle or .tar.gz).", valueName: "file"))
    var output: String

    @OptionGroup var filter: RecordFilterOptions

    @Option(help: ArgumentHelp("Write only what changed after this earlier bundle of the same store was made.", valueName: "bundle"))
    var since: String?

    @Flag(help: "Encrypt the bundle (AES-256-GCM, key from the passphrase by scrypt).")
    var encrypt = false

    @OptionGroup var passphrase: PassphraseOptions

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        if output == "-" { throw ValidationError("a bundle goes to a file: -o family.ckbundle") }
        if since != nil && filter.predicate != nil { throw ValidationError("--since writes every change; it does not combine with --where") }
    }

    func run() throws {
        let store = try storeOptions.open(create: false)
        let query = try filter.query()
        let progress = ProgressLine("backing up", quiet: storeOptions.quiet)
        let started = Date()
        var base: ChangeToken?
        if let since {
            try InputFiles.check(since, as: "a bundle", binary: true)
            let previous = try BundleReader(path: since, passphrase: try passphrase.passphrase())
            base = try ChangeToken(parsing: previous.manifest.token)
        }
        var key: String?
        if encrypt {
            guard let given = try passphrase.passphrase() else {
                throw CommandFailure.usage("--encrypt needs a passphrase: --passphrase-file FILE, or $CKPORT_PASSPHRASE")
            }
            key = given
        }
        // The count gives the progress line its percentage and ETA (a full backup: records
        // are read in one pass, so the count is what the pass will meet).
        let total = progress.isEnabled && base == nil ? try store.read { try $0.count(query) } : nil
        let summary = try BundleWriter().write(store, query: query, since: base, to: output, passphrase: key) { progress.update(records: $0, total: total) }
        progress.finish()
        if !storeOptions.quiet {
            let manifest = summary.manifest
            Console.error("backed up \(Console.count(manifest.recordCount)) \(base == nil ? "records" : "changes") in \(manifest.members.count - 1) members to \(output) "
                + "(\(Console.bytes(summary.bytesWritten))) in \(Console.seconds(Date().timeIntervalSince(started)))")
            Console.error("change token: \(manifest.token)")
        }
        if !summary.missingAssets.isEmpty {
            Console.error("warning: \(Console.count(summary.missingAssets.count)) assets the records name are not held by the store, so the bundle keeps their values without the files (e.g. \(summary.missingAssets.prefix(2).joined(separator: ", ")))")
        }
    }
}

/// Where a bundle's passphrase comes from: a file, or $CKPORT_PASSPHRASE — never the command
/// line, where other users and the shell history would see it.
struct PassphraseOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Read the passphrase of an encrypted bundle from this file (its first line). Default: $CKPORT_PASSPHRASE.", valueName: "file"))
    var passphraseFile: String?

    func passphrase() throws -> String? {
        if let passphraseFile {
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

/// Options shared by the commands that read bundles.
struct BundleLimitOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Refuse a bundle that expands more than this many times its compressed size.", valueName: "ratio"))
    var maxRatio: Int64 = DecompressionLimits().maxRatio

    @Option(help: ArgumentHelp("Refuse a bundle that expands to more than this many GiB.", valueName: "GiB"))
    var maxSize: Int64 = DecompressionLimits().maxTotalBytes >> 30

    var limits: DecompressionLimits { DecompressionLimits(maxTotalBytes: maxSize << 30, maxRatio: maxRatio) }
}

struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check a bundle completely without restoring it.",
        discussion: """
        Checks the gzip and tar structure, every member's size, SHA-256 and record count \
        against the manifest, and every record against the bundled schema. Exits 2 on any \
        problem, naming the member.

          ckport verify family.ckbundle
        """
    )

    @Argument(help: "The bundle.")
    var bundle: String

    @OptionGroup var limits: BundleLimitOptions

    @OptionGroup var passphrase: PassphraseOptions

    @Flag(name: [.short, .long], help: "Print nothing when the bundle is sound.")
    var quiet = false

    func run() throws {
        let started = Date()
        try InputFiles.check(bundle, as: "a bundle", binary: true)
        let reader = try BundleReader(path: bundle, limits: limits.limits, passphrase: try passphrase.passphrase(), stageAssets: false, decodeOnTwoThreads: true)
        let validator = RecordValidator(schema: reader.schema)
        var assetsInBundle = Set<String>()
        var assetsNamed = Set<String>()
        var assetBytes: Int64 = 0
        var problems: [String] = []
        var perType: [String: Int] = [:]
        // Records and reference targets are kept as 64-bit hashes, so that memory stays small
        // at millions of records; a reference to a record not seen yet keeps its names (up to
        // a limit) for the report.
        var keys = RecordKeyHasher()
        var seen: Set<Int> = []
        seen.reserveCapacity(min(reader.manifest.recordCount, 20_000_000))
        var forward: [(hash: Int, from: String, to: String)] = []
        var forwardHashes: [Int] = []
        let typesWithAssets = Set(reader.schema.recordTypes.filter { type in type.fields.contains { $0.type.primitive == .asset } }.map(\.name))
        var lastType = ""
        var lastTypeCount = 0
        // Decompressing runs a thread ahead, hashing and parsing on two more (see BundleReader's
        // decodeOnTwoThreads); checking runs here.
        let items = PrefetchingSource(reader)
        while let item = try items.next() {
            switch item {
            case .invalid(let issue, _):
                problems.append(issue.description)
            case .record(let sourced):
                let record = sourced.record
                if record.recordType == lastType {
                    lastTypeCount += 1
                } else {
                    if lastTypeCount > 0 { perType[lastType, default: 0] += lastTypeCount }
                    lastType = record.recordType
                    lastTypeCount = 1
                }
                seen.insert(keys.key(record.zone, record.recordName))
                for issue in validator.issues(in: record) {
                    problems.append("\(sourced.position): record '\(record.recordName)' (\(record.recordType)): \(issue)")
                }
                record.fields.entries.withUnsafeBufferPointer { entries in
                    for k in 0..<entries.count {
                        guard case .reference(let target) = entries[k].value else { continue }
                        let hash = keys.key(record.zone, target.recordName)
                        if seen.contains(hash) { continue }
                        if forward.count < 10_000 { forward.append((hash, record.recordName, target.recordName)) } else { forwardHashes.append(hash) }
                    }
                }
                if typesWithAssets.contains(record.recordType) {
                    record.forEachAsset { _, asset in if let sha256 = asset.sha256 { assetsNamed.insert(sha256) } }
                }
            case .asset(let asset):
                assetsInBundle.insert(asset.sha256)
                assetBytes += asset.size
            }
            if problems.count >= 20 { break }
        }
        if lastTypeCount > 0 { perType[lastType, default: 0] += lastTypeCount }
        guard problems.isEmpty else {
            throw CommandFailure.invalid(problems.joined(separator: "\n") + "\n\(bundle) is not sound")
        }
        let outside = forward.filter { !seen.contains($0.hash) }
        let outsideCount = outside.count + forwardHashes.filter { !seen.contains($0) }.count
        if !quiet {
            let manifest = reader.manifest
            let assetNote = assetsInBundle.isEmpty ? "" : " and \(Console.count(assetsInBundle.count)) asset files (\(Console.bytes(assetBytes)))"
            print("\(bundle): sound — \(Console.count(reader.recordsRead)) records\(assetNote) in \(manifest.members.count - 1) members, every checksum and count as the manifest says")
            print("made \(manifest.created) by ckport \(manifest.ckportVersion) from store \(manifest.storeID) at \(manifest.token)")
            for (type, count) in perType.sorted(by: { $0.key < $1.key }) { print("  \(type): \(Console.count(count))") }
            if outsideCount > 0 {
                print("note: \(Console.count(outsideCount)) references point at records outside the bundle, e.g. \(outside.prefix(3).map { "\($0.from) → \($0.to)" }.joined(separator: ", "))")
            }
            let absent = assetsNamed.subtracting(assetsInBundle)
            if !absent.isEmpty {
                print("note: \(Console.count(absent.count)) assets the records name are not in the bundle (their bytes were not in the store), e.g. \(absent.sorted().prefix(2).joined(separator: ", "))")
            }
            print("checked in \(Console.seconds(Date().timeIntervalSince(started)))")
        }
    }
}

struct InspectCommand: ParsableCommand {
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

    @OptionGroup var passphrase: PassphraseOptions

    func run() throws {
        try InputFiles.check(bundle, as: "a bundle", binary: true)
        let reader = try BundleReader(path: bundle, limits: limits.limits, passphrase: try passphrase.passphrase())
        let manifest = reader.manifest
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(manifest), as: UTF8.self))
            return
        }
        print("bundle   \(bundle)")
        print("made     \(manifest.created) by ckport \(manifest.ckportVersion) (format \(manifest.format))")
        print("store    \(manifest.storeID), token \(manifest.token)")
        if let base = manifest.baseToken { print("base     \(base): incremental, the changes after that token") }
        print("schema   \(reader.schema.recordTypes.count) record types: \(reader.schema.recordTypes.map(\.name).joined(separator: ", "))")
        print("")
        let assets = manifest.members.filter { $0.kind == "asset" }
        let assetRows = assets.isEmpty ? [] : [["(assets)", "", "\(Console.count(assets.count)) files", "", Console.bytes(assets.reduce(0) { $0 + $1.bytes })]]
        if !reader.migrationHistory.isEmpty {
            let sets = Dictionary(grouping: reader.migrationHistory, by: \.set).map { "\($0.key) at version \($0.value.map(\.version).max() ?? 0)" }.sorted()
            print("history  \(reader.migrationHistory.count) migrations applied: \(sets.joined(separator: ", "))")
        }
        let rows = manifest.members.filter { !["schema", "asset", "migrations"].contains($0.kind) }.map { member in
            member.kind == "changes"
                ? ["(changes)", "", "", Console.count(member.records ?? 0), Console.bytes(member.bytes)]
                : [member.scope ?? "", member.zoneName ?? "", member.recordType ?? "", Console.count(member.records ?? 0), Console.bytes(member.bytes)]
        } + assetRows + [["total", "", "", Console.count(manifest.recordCount), Console.bytes(manifest.members.reduce(0) { $0 + $1.bytes })]]
        print(Console.table(["scope", "zone", "type", "records", "bytes"], rows, numeric: [3, 4]))
    }
}

struct RestoreCommand: ParsableCommand {
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
        """
    )

    @Argument(help: "The bundle, or a full bundle and the incremental ones after it, in order.")
    var bundles: [String]

    /// The import modes that make sense for a restore (insert would refuse every record a
    /// store already has).
    enum RestoreMode: String, ExpressibleByArgument, CaseIterable {
        case upsert, replace, newer
        var writeMode: WriteMode { WriteMode(rawValue: rawValue)! }
    }

    @Option(name: .customLong("mode"), help: "How bundled records combine with stored ones, for a store that is not empty.")
    var restoreMode: RestoreMode?

    var mode: WriteMode? { restoreMode?.writeMode }

    @Option(name: .customLong("type"), help: ArgumentHelp("Restore only this record type; repeat for several.", valueName: "type"))
    var recordTypes: [String] = []

    @Option(help: ArgumentHelp("Restore only zones with this name; repeat for several.", valueName: "name"))
    var zone: [String] = []

    @Option(help: ArgumentHelp("Restore the records of zone OLD into zone NEW (same scope and owner); repeat for several.", valueName: "old=new"))
    var renameZone: [String] = []

    @OptionGroup var limits: BundleLimitOptions

    @OptionGroup var passphrase: PassphraseOptions

    @OptionGroup var storeOptions: StoreOptions

    func run() throws {
        let started = Date()
        let key = try passphrase.passphrase()
        for bundle in bundles { try InputFiles.check(bundle, as: "a bundle", binary: true) }
        let readers = try bundles.map { try BundleReader(path: $0, limits: limits.limits, passphrase: key) }
        try RestoreCommand.checkChain(readers, intoExisting: mode != nil)
        let existed = FileManager.default.fileExists(atPath: storeOptions.path)
        let store = try storeOptions.open(create: true)
        do {
            let stored = try store.read { try $0.stats().totalRecords }
            if stored > 0 && mode == nil {
                throw CommandFailure.usage("the store \(storeOptions.path) already holds \(Console.count(stored)) records; pass --mode upsert, replace or newer to restore into it")
            }
            // A bundle of another app (or of another version of the schema) would take away
            // types this store holds records of: say what it is, and where it can go instead.
            let bundleTypes = Set(readers.last!.schema.recordTypes.map(\.name))
            let heldTypes = Set(try store.read { try $0.stats().entries.filter { $0.records > 0 }.map(\.recordType) })
            let missing = heldTypes.subtracting(bundleTypes).sorted()
            if !missing.isEmpty {
                throw CommandFailure.invalid("\(readers.last!.path)'s schema has no record type \(missing.joined(separator: ", ")), which \(storeOptions.path) holds records of: it is the backup of another app or of another schema. Nothing was changed; restore it into a store of its own (--store NEW.sqlite)")
            }
            // The schema and every record go in one transaction, which commits only once the
            // whole bundle has checked out (sizes, checksums, counts, every record valid).
            let progress = ProgressLine("restoring", quiet: storeOptions.quiet)
            let importer = RecordImporter(store: store, options: ImportOptions(mode: mode ?? .upsert))
            importer.progress = { progress.update(records: $0.records, bytesDone: $0.bytesRead, bytesTotal: $0.totalBytes) }
            var renames: [String: String] = [:]
            for entry in renameZone {
                let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { throw CommandFailure.usage("--rename-zone takes OLD=NEW, e.g. family-1-zone=family-1-copy") }
                renames[parts[0]] = parts[1]
            }
            let sources: [RecordSource] = recordTypes.isEmpty && zone.isEmpty && renames.isEmpty
                ? readers
                : readers.map { SelectingSource($0, types: Set(recordTypes), zones: Set(zone), renames: renames) }
            // The migration history comes along: the newest bundle's, added to what the store has.
            let history = readers.last!.migrationHistory
            if !history.isEmpty {
                importer.finishing = { session in
                    for entry in history { try session.recordMigration(entry) }
                }
            }
            let summary = try importer.run(sources, schema: readers.last!.schema)
            progress.finish()
            if !storeOptions.quiet {
                let assets = summary.assets > 0 ? " and \(Console.count(summary.assets)) asset files" : ""
                Console.error("restored \(Console.count(summary.totals.inserted + summary.totals.updated)) records\(assets) (\(Console.count(summary.totals.unchanged)) unchanged, \(Console.count(summary.totals.deleted)) deleted) from \(bundles.joined(separator: ", ")) into \(storeOptions.path) in \(Console.seconds(Date().timeIntervalSince(started)))")
                Console.error("change token: \(summary.token?.description ?? "")")
            }
        } catch {
            // A store this restore created and could not fill is removed again.
            if !existed {
                for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: storeOptions.path + suffix) }
            }
            throw error
        }
    }

    /// A chain starts with a full bundle (or, into a store that already holds an earlier
    /// restore, with an incremental one) and each incremental bundle starts where the one
    /// before it ended.
    static func checkChain(_ readers: [BundleReader], intoExisting: Bool) throws {
        guard let first = readers.first else { throw CommandFailure.usage("name a bundle to restore") }
        if first.manifest.baseToken != nil && !intoExisting {
            throw CommandFailure.invalid("\(first.path) is incremental (it starts at \(first.manifest.baseToken!)); restore the full bundle it builds on first, or pass --mode to apply it to a store restored earlier")
        }
        for (previous, next) in zip(readers, readers.dropFirst()) {
            guard let base = next.manifest.baseToken else {
                throw CommandFailure.invalid("\(next.path) is a full bundle; only incremental bundles can follow \(previous.path) in a chain")
            }
            guard next.manifest.storeID == previous.manifest.storeID else {
                throw CommandFailure.invalid("\(next.path) comes from store \(next.manifest.storeID), \(previous.path) from \(previous.manifest.storeID): they are not one chain")
            }
            guard base == previous.manifest.token else {
                let baseSequence = (try? ChangeToken(parsing: base))?.sequence ?? 0
                let previousSequence = (try? ChangeToken(parsing: previous.manifest.token))?.sequence ?? 0
                let what = baseSequence > previousSequence
                    ? "a bundle is missing between them (the one that starts at \(previous.manifest.token))"
                    : "they are in the wrong order, or \(next.path) belongs to another chain"
                throw CommandFailure.invalid("\(next.path) starts at \(base), but \(previous.path) ends at \(previous.manifest.token): \(what)")
            }
        }
    }
}

/// Passes on the records of some types and zones only, renaming zones on the way. Every
/// record is still read, so that every member's checksum is checked.
final class SelectingSource: RecordSource {
    private let source: RecordSource
    private let types: Set<String>
    private let zones: Set<String>
    private let renames: [String: String]

    init(_ source: RecordSource, types: Set<String>, zones: Set<String>, renames: [String: String]) {
        self.source = source
        self.types = types
        self.zones = zones
        self.renames = renames
    }

    var name: String { source.name }
    var bytesRead: Int64 { source.bytesRead }
    var totalBytes: Int64? { source.totalBytes }

    func next() throws -> SourceItem? {
        while let item = try source.next() {
            guard case .record(var sourced) = item else { return item }
            if !types.isEmpty && !types.contains(sourced.record.recordType) { continue }
            if !zones.isEmpty && !zones.contains(sourced.record.zone.zoneName) { continue }
            if let renamed = renames[sourced.record.zone.zoneName] { sourced.record.id.zone.zoneName = renamed }
            return .record(sourced)
        }
        return nil
    }
}

/// 64-bit keys for (zone, record name) pairs, for telling which references point inside a
/// bundle. The zone's share is worked out once per zone, the name's with a multiply-and-mix
/// over eight bytes at a time: cheap enough to run twice per record at a million records.
struct RecordKeyHasher {
    private var lastZone: ZoneID?
    private var lastZoneSeed: UInt64 = 0

    mutating func key(_ zone: ZoneID, _ name: String) -> Int {
        if zone != lastZone {
            lastZone = zone
            var seed: UInt64 = 0x243F_6A88_85A3_08D3
            for part in [zone.scope.rawValue, zone.zoneName, zone.ownerRecordName] { seed = RecordKeyHasher.mix(part, seed) }
            lastZoneSeed = seed
        }
        return Int(bitPattern: UInt(RecordKeyHasher.mix(name, lastZoneSeed)))
    }

    private static func mix(_ text: String, _ seed: UInt64) -> UInt64 {
        if let hash = text.utf8.withContiguousStorageIfAvailable({ mix($0, seed) }) { return hash }
        var copy = text
        return copy.withUTF8 { mix($0, seed) }
    }

    private static func mix(_ bytes: UnsafeBufferPointer<UInt8>, _ seed: UInt64) -> UInt64 {
        do {
            var hash = seed ^ (UInt64(bytes.count) &* 0x9E37_79B9_7F4A_7C15)
            var index = 0
            while index + 8 <= bytes.count {
                let word = UnsafeRawPointer(bytes.baseAddress! + index).loadUnaligned(as: UInt64.self)
                hash = (hash ^ word) &* 0xBF58_476D_1CE4_E5B9
                hash ^= hash >> 31
                index += 8
            }
            var tail: UInt64 = 0
            var shift: UInt64 = 0
            while index < bytes.count {
                tail |= UInt64(bytes[index]) << shift
                shift += 8
                index += 1
            }
            hash = (hash ^ tail) &* 0x94D0_49BB_1331_11EB
            // The finalizer of SplitMix64, so that every input bit reaches every output bit.
            hash ^= hash >> 30
            hash = hash &* 0xBF58_476D_1CE4_E5B9
            hash ^= hash >> 27
            hash = hash &* 0x94D0_49BB_1331_11EB
            return hash ^ (hash >> 31)
        }
    }
}
