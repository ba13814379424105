import Crypto
import Foundation
import Records
import StoreCore

/// A problem found in a bundle.
public struct BundleError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var file: String
    public var member: String?
    public var message: Message

    public init(file: String, member: String?, message: Message) {
        self.file = file
        self.member = member
        self.message = message
    }

    public var explanation: Message { "\(file)\(member.map { " (\($0))" } ?? ""): \(message)" }
    public var description: String { explanation.description }
}

/// Reads a bundle: the manifest and the schema first, then every records member as one stream
/// of records, each member's size, SHA-256 and record count checked against the manifest as it
/// ends (or its SHA-256 by a second reading, for a restore: see `checkRecordsAfterReading`),
/// and the manifest's members all present at the end. Records are never extracted to
/// disk; an asset member comes out as a ``SourceItem/asset(_:)`` staged in a temporary file of
/// ckport's own (or, without `stageAssets`, only checked).
public final class BundleReader: RecordSource {
    public let path: String
    public let manifest: BundleManifest
    public let schema: Schema
    /// The migrations the source store had had (`migrations.json`), oldest first.
    public private(set) var migrationHistory: [MigrationHistoryEntry] = []
    /// Decompression (and decryption), the tar framing and every member's SHA-256 run a few
    /// chunks ahead on a thread of their own.
    private let tar: TarReadAhead
    private var expected: [String: BundleManifest.Member] = [:]
    /// The records member being read. A class, so that looking at it for every record costs one
    /// reference count rather than a copy of the member's description.
    private final class OpenMember {
        let member: BundleManifest.Member
        let reader: JSONRecordReader
        let bytes: Box<Int64>
        var records = 0

        init(member: BundleManifest.Member, reader: JSONRecordReader, bytes: Box<Int64>) {
            self.member = member
            self.reader = reader
            self.bytes = bytes
        }
    }

    private var current: OpenMember?
    private var done = false
    private let stageAssets: Bool
    public private(set) var recordsRead = 0
    /// Whether the bundle is encrypted (and was opened with its passphrase).
    public let isEncrypted: Bool

    final class Box<T> {
        var value: T
        init(_ value: T) { self.value = value }
    }

    /// Decodes records on a second thread too, when the consumer is light (verify).
    private let sideThread: SideThread<[SourceItem]>?

    /// A plain bundle's file, hashed as it is read (nil for an encrypted one).
    private let file: HashingFileReader?
    private let limits: DecompressionLimits
    private let engine: GzipReader.Engine
    /// Whether the records members' SHA-256 are left to a second reading of the file (see
    /// ``init(path:limits:passphrase:allowUnencrypted:stageAssets:decodeOnTwoThreads:checkRecordsAfterReading:engine:)``),
    /// which is then to check these, by path, against the manifest's digests.
    public let checksRecordsAfterReading: Bool
    private var checkLater: [String: String] = [:]
    private var secondReading: SecondReading?

    /// An encrypted bundle needs its passphrase. Without `stageAssets`, asset members are
    /// checked but not kept (`StagedAsset.bytes` is nil), as verify wants. `decodeOnTwoThreads`
    /// suits a consumer that does little with each record: for one that works hard (a restore
    /// writing to SQLite) the second thread only takes time from it.
    ///
    /// With a passphrase, a bundle that is not encrypted is refused unless `allowUnencrypted`:
    /// whoever can write to the folder of an encrypted backup could otherwise put a plain bundle
    /// of their own making in its place (a plain bundle's checksums are nobody's secret), and it
    /// would be read without a word.
    ///
    /// `checkRecordsAfterReading` leaves the SHA-256 of the records members to a second reading
    /// of the file, so that a consumer that works hard on each record (a restore writing to
    /// SQLite) does not share its cores with the hashing: it begins once the last record has
    /// been read, on a thread of its own, while the consumer finishes (a restore builds its
    /// indexes then, on one core). Sizes and record counts are still checked as each member
    /// ends. The consumer must call ``finishChecks()`` before it trusts what it read — a restore
    /// calls it before it commits. Only a plain bundle in a regular file is read twice, and the
    /// second reading must find the same bytes (their SHA-256 is kept from the first), so a file
    /// that changes in between is refused; an encrypted bundle (whose chunks are authenticated as
    /// they are decrypted) keeps every check as it is read (``checksRecordsAfterReading`` says
    /// which).
    ///
    /// `engine` inflates the bundle: the fastest one built in unless a caller (a test, the
    /// fuzzer) wants each of them to read the same bytes.
    public convenience init(
        path: String, limits: DecompressionLimits = DecompressionLimits(), passphrase: String? = nil,
        allowUnencrypted: Bool = false, stageAssets: Bool = true, decodeOnTwoThreads: Bool = false,
        checkRecordsAfterReading: Bool = false, engine: GzipReader.Engine = .fastest
    ) throws {
        let isEncrypted = BundleEncryption.isEncrypted(path: path)
        if passphrase != nil && !isEncrypted && !allowUnencrypted {
            throw BundleError(
                file: path, member: nil,
                message:
                    "the bundle is not encrypted, though a passphrase was given: it may not be the backup that was encrypted with it (a plain bundle can be made by anyone); \(Wording.allowUnencrypted)"
            )
        }
        let gzip: GzipReader
        let file: HashingFileReader?
        if isEncrypted {
            guard let passphrase else {
                throw BundleError(
                    file: path, member: nil,
                    message: "the bundle is encrypted: give its passphrase\(Wording.passphraseSource)")
            }
            let decryptor = try BundleDecryptor(path: path, passphrase: passphrase)
            gzip = GzipReader(name: path, limits: limits, engine: engine) { try decryptor.read(into: $0) }
            file = nil
        } else {
            let reader = try HashingFileReader(path: path, hashing: checkRecordsAfterReading)
            gzip = GzipReader(name: path, limits: limits, engine: engine) { try reader.read(into: $0) }
            file = reader
        }
        try self.init(
            name: path, gzip: gzip, file: file, isEncrypted: isEncrypted,
            totalBytes: (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value,
            limits: limits, engine: engine, stageAssets: stageAssets, decodeOnTwoThreads: decodeOnTwoThreads,
            checkRecordsAfterReading: checkRecordsAfterReading)
    }

    /// Reads a bundle's bytes from `source` (as `read(2)` does: how many it put in the buffer,
    /// 0 at the end): a bundle assembled from a repository's parts, say. `name` stands for it in
    /// messages. Every member is checked as it is read.
    public convenience init(
        name: String, totalBytes: Int64? = nil, limits: DecompressionLimits = DecompressionLimits(),
        stageAssets: Bool = true, decodeOnTwoThreads: Bool = false, engine: GzipReader.Engine = .fastest,
        source: @escaping (UnsafeMutableRawBufferPointer) throws -> Int
    ) throws {
        let gzip = GzipReader(name: name, limits: limits, engine: engine, source: source)
        try self.init(
            name: name, gzip: gzip, file: nil, isEncrypted: false, totalBytes: totalBytes, limits: limits,
            engine: engine, stageAssets: stageAssets, decodeOnTwoThreads: decodeOnTwoThreads,
            checkRecordsAfterReading: false)
    }

    private init(
        name path: String, gzip: GzipReader, file: HashingFileReader?, isEncrypted: Bool, totalBytes: Int64?,
        limits: DecompressionLimits, engine: GzipReader.Engine, stageAssets: Bool, decodeOnTwoThreads: Bool,
        checkRecordsAfterReading: Bool
    ) throws {
        self.path = path
        self.stageAssets = stageAssets
        self.limits = limits
        self.engine = engine
        self.isEncrypted = isEncrypted
        self.totalBytes = totalBytes
        self.file = file
        sideThread = decodeOnTwoThreads ? SideThread() : nil
        let later = checkRecordsAfterReading && (file?.isRegularFile ?? false)
        checksRecordsAfterReading = later
        // The members that will be read as records (the manifest, read next, says which they
        // are) are left unhashed.
        let hashes: @Sendable (String) -> Bool = { path in
            !later || !(path.hasPrefix("records/") || path == BundleWriter.changesPath)
        }
        tar = TarReadAhead(
            name: path, progress: { gzip.compressedBytes }, hashes: hashes, source: { try gzip.read(into: $0) })
        func fail(_ member: String?, _ message: Message) -> BundleError {
            BundleError(file: path, member: member, message: message)
        }
        guard let first = try tar.next(), first.path == "manifest.json" else {
            throw fail(nil, "not a ckport bundle: manifest.json is not its first member")
        }
        guard first.size <= 64 << 20 else {
            throw fail("manifest.json", "is \(first.size) bytes, too large for a manifest")
        }
        let manifestBytes = try tar.readAll(limit: Int(first.size))
        do {
            manifest = try JSONDecoder().decode(BundleManifest.self, from: Data(manifestBytes))
        } catch {
            throw fail("manifest.json", "cannot be read: \(error)")
        }
        guard manifest.format <= BundleManifest.currentFormat else {
            throw fail(
                "manifest.json",
                "bundle format \(manifest.format) is newer than this ckport reads (\(BundleManifest.currentFormat)); update ckport"
            )
        }
        for member in manifest.members {
            try Tar.checkPath(member.path, archive: path)
            guard expected.updateValue(member, forKey: member.path) == nil else {
                throw fail("manifest.json", "names member '\(member.path)' twice")
            }
        }
        guard let schemaEntry = try tar.next(), schemaEntry.path == "schema.ckdb",
            let schemaMember = expected.removeValue(forKey: "schema.ckdb")
        else {
            throw fail(nil, "schema.ckdb must follow manifest.json")
        }
        guard schemaEntry.size == schemaMember.bytes else {
            throw fail("schema.ckdb", "is \(schemaEntry.size) bytes; the manifest says \(schemaMember.bytes)")
        }
        let schemaBytes = try tar.readAll(limit: Int(min(schemaEntry.size, 64 << 20)))
        guard let schemaDigest = tar.digest, BundleReader.hex(schemaDigest) == schemaMember.sha256 else {
            throw fail("schema.ckdb", "its SHA-256 does not match the manifest: the member is damaged")
        }
        do {
            schema = try SchemaParser.parse(String(decoding: schemaBytes, as: UTF8.self), file: path + "/schema.ckdb")
        } catch {
            throw fail("schema.ckdb", "\(error)")
        }
        if let historyMember = expected.removeValue(forKey: BundleWriter.migrationsPath) {
            guard let entry = try tar.next(), entry.path == BundleWriter.migrationsPath else {
                throw fail(BundleWriter.migrationsPath, "must follow schema.ckdb")
            }
            guard entry.size == historyMember.bytes else {
                throw fail(
                    BundleWriter.migrationsPath, "is \(entry.size) bytes; the manifest says \(historyMember.bytes)")
            }
            let bytes = try tar.readAll(limit: Int(min(entry.size, 64 << 20)))
            guard let digest = tar.digest, BundleReader.hex(digest) == historyMember.sha256 else {
                throw fail(
                    BundleWriter.migrationsPath, "its SHA-256 does not match the manifest: the member is damaged")
            }
            do {
                migrationHistory = try JSONDecoder().decode([MigrationHistoryEntry].self, from: Data(bytes))
            } catch {
                throw fail(BundleWriter.migrationsPath, "cannot be read: \(error)")
            }
        }
    }

    deinit {
        secondReading?.cancel()
    }

    /// Waits for the second reading that `checkRecordsAfterReading` asked for, and throws what
    /// it found: a damaged member, or a file that changed. Returns at once when the checks were
    /// not put off. Ctrl-C ends the wait (``InterruptedError``).
    public func finishChecks() throws {
        if let failure { throw failure }
        guard checksRecordsAfterReading else { return }
        guard done else { throw fail(nil, "was not read to its end, so its records members' SHA-256 were not checked") }
        do {
            try secondReading?.wait()
        } catch let error as InterruptedError {
            throw error
        } catch {
            failure = error
            damage = error
            throw error
        }
    }

    /// What the second reading found wrong, once ``finishChecks()`` has seen it.
    private var damage: Error?

    /// For a consumer that failed after reading the bundle to its end (records refused as
    /// invalid, say): the damage the second reading found, if any — the likelier cause, and
    /// the one to report. Nil when the checks were not put off, the reading did not get that
    /// far, or the members are sound.
    public func damageFound() -> Error? {
        if let damage { return damage }
        guard checksRecordsAfterReading, done, failure == nil, secondReading != nil else { return nil }
        do {
            try finishChecks()
            return nil
        } catch is InterruptedError {
            return nil
        } catch {
            return error
        }
    }

    static func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 {
        digest.map { String(format: "%02x", $0) }.joined()
    }

    public var name: String { path }
    public var bytesRead: Int64 { tar.bytesRead }
    public let totalBytes: Int64?

    private func fail(_ member: String?, _ message: Message) -> BundleError {
        BundleError(file: path, member: member, message: message)
    }

    /// The error that ended reading: every later call throws it again, so that reading on
    /// after a refusal never ends as if the bundle were whole.
    private var failure: Error?

    public func next() throws -> SourceItem? {
        if let failure { throw failure }
        do {
            return try nextItem()
        } catch {
            failure = error
            throw error
        }
    }

    private func nextItem() throws -> SourceItem? {
        try Interruption.check()
        while !done {
            if let open = current {
                if let item = try open.reader.next() {
                    open.records += 1
                    recordsRead += 1
                    if case .invalid(var issue, let raw) = item {
                        issue.position.file = path + "/" + open.member.path
                        return .invalid(issue, raw: raw)
                    }
                    return item
                }
                try finish(open.member, digest: tar.digest, bytes: open.bytes.value, records: open.records)
                current = nil
                continue
            }
            guard let entry = try tar.next() else {
                done = true
                if let missing = expected.keys.sorted().first {
                    throw fail(
                        missing,
                        "is in the manifest but not in the bundle (\(expected.count) member\(expected.count == 1 ? "" : "s") missing)"
                    )
                }
                if !checkLater.isEmpty {
                    // The archive ends only after the last byte of the file has been read.
                    guard let file, let digest = file.digest else {
                        preconditionFailure("the archive ended before its file did")
                    }
                    secondReading = SecondReading(
                        file: try HashingFileReader(secondReadingOf: file), limits: limits, engine: engine,
                        expected: checkLater, first: (digest, file.bytes))
                }
                return nil
            }
            guard let member = expected.removeValue(forKey: entry.path) else {
                throw fail(entry.path, "is not in the manifest")
            }
            guard entry.size == member.bytes else {
                throw fail(entry.path, "is \(entry.size) bytes; the manifest says \(member.bytes)")
            }
            if member.kind == "asset" {
                return .asset(try readAsset(member))
            }
            let bytes = Box<Int64>(0)
            let tar = self.tar
            let input = ByteInput(name: path + "/" + entry.path, totalBytes: entry.size) { buffer in
                let n = try tar.readContent(into: buffer)
                bytes.value += Int64(n)
                return n
            }
            let reader = JSONRecordReader(
                input: input, layout: .lines, codec: JSONRecordCodec(schema: schema), sideThread: sideThread)
            current = OpenMember(member: member, reader: reader, bytes: bytes)
        }
        return nil
    }

    /// Reads an asset member through (the read-ahead thread hashes it), with `stageAssets`
    /// copying it to a temporary file.
    private func readAsset(_ member: BundleManifest.Member) throws -> StagedAsset {
        guard member.path == BundleWriter.assetPath(member.sha256) else {
            throw fail(
                member.path,
                "an asset member must be named after its SHA-256 (\(BundleWriter.assetPath(member.sha256)))")
        }
        // Kept sealed, in a file no name reaches: an encrypted bundle's assets never reach the
        // disk in the clear, and nothing stays behind if the process is killed.
        let staged: SealedBytes? = stageAssets ? try SealedBytes() : nil
        var bytes: Int64 = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = try buffer.withUnsafeMutableBytes { try tar.readContent(into: $0) }
            if n == 0 { break }
            try buffer.withUnsafeBytes { try staged?.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            bytes += Int64(n)
        }
        try finish(member, digest: tar.digest, bytes: bytes, records: 0)
        return StagedAsset(sha256: member.sha256, size: member.bytes, bytes: staged, origin: path + "/" + member.path)
    }

    /// `digest` is nil when the member was not read to its end, or (a records member, with
    /// `checkRecordsAfterReading`) was read unhashed, to be checked by the second reading.
    private func finish(_ member: BundleManifest.Member, digest: SHA256.Digest?, bytes: Int64, records: Int) throws {
        guard bytes == member.bytes else {
            throw fail(member.path, "holds \(bytes) bytes; the manifest says \(member.bytes)")
        }
        if let digest {
            guard BundleReader.hex(digest) == member.sha256 else {
                throw fail(member.path, "its SHA-256 does not match the manifest: the member is damaged")
            }
        } else if checksRecordsAfterReading && member.kind != "asset" && member.records != nil {
            checkLater[member.path] = member.sha256
        } else {
            throw fail(member.path, "its SHA-256 does not match the manifest: the member is damaged")
        }
        if let expectedRecords = member.records, expectedRecords != records {
            throw fail(member.path, "holds \(records) records; the manifest says \(expectedRecords)")
        }
    }
}
