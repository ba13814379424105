import Crypto
import Foundation
import Records
import StoreCore

/// Writes a backup bundle: a gzip-compressed POSIX tar with `manifest.json` first, then
/// `schema.ckdb`, then `records/<scope>/<zone>/<RecordType>.jsonl` in the canonical JSON shape,
/// then `assets/<sha256>` for every asset file the records name and the store holds. A store
/// that has had migrations adds `migrations.json` (its history) right after the schema.
/// Records are first spooled (hashed, counted and already compressed) to a temporary file beside
/// the output so that the manifest, which names every member's size and SHA-256, can come first.
/// The compression runs on every core while the records are read: the archive is one gzip
/// member whose deflate stream is made of segments compressed apart (``ParallelDeflater``), so
/// the spool holds each record member's compressed bytes, and the archive puts them after the
/// manifest and the members' headers without compressing them again. Memory stays flat. The
/// spool has no name in the folder and, for an encrypted bundle, is itself encrypted (see
/// ``BundleSpool``).
public struct BundleWriter {
    public var level: Int32 = 6
    public var version = CKPortVersion.current

    public init() {}

    public struct Summary: Sendable {
        public var manifest: BundleManifest
        public var bytesWritten: Int64
        /// Assets the records name (by SHA-256) whose bytes the store does not hold: the
        /// bundle keeps the values but cannot carry the files.
        public var missingAssets: [String] = []
    }

    public static let migrationsPath = "migrations.json"

    /// The member path of an asset file.
    public static func assetPath(_ sha256: String) -> String { "assets/" + sha256 }

    /// The member path of a zone's records of one type. Names are percent-encoded outside
    /// letters, digits, `-`, `_` and `.`, and a leading `.` is encoded too, so that no name can
    /// form a path segment `.` or `..` (or a hidden file); an empty name is `%`, which no
    /// encoding produces. The owner is added when it is not the default.
    public static func memberPath(_ zone: ZoneID, _ type: String) -> String {
        func safe(_ text: String) -> String {
            guard !text.isEmpty else { return "%" }
            let encoded =
                text.addingPercentEncoding(
                    withAllowedCharacters: CharacterSet(
                        charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")) ?? text
            return encoded.hasPrefix(".") ? "%2E" + encoded.dropFirst() : encoded
        }
        var zonePart = safe(zone.zoneName)
        if zone.ownerRecordName != ZoneID.defaultOwnerName { zonePart += "@" + safe(zone.ownerRecordName) }
        return "records/\(zone.scope.rawValue)/\(zonePart)/\(safe(type)).jsonl"
    }

    /// The member of an incremental bundle: every change after its base token, in the order
    /// the changes happened, deletions as tombstones.
    public static let changesPath = "changes.jsonl"

    /// Writes the records `query` selects, or with `since` every change after that token (an
    /// incremental bundle: `query`'s types, scope and zone still apply, its predicate does not).
    /// With `passphrase`, the bundle is encrypted (see ``BundleEncryption``).
    public func write(
        _ store: some RecordStoring, query: RecordQuery = RecordQuery(), since: ChangeToken? = nil, to path: String,
        passphrase: String? = nil, progress: ((Int) -> Void)? = nil
    ) throws -> Summary {
        try store.readSession { session in
            try write(session, query: query, since: since, to: path, passphrase: passphrase, progress: progress)
        }
    }

    /// Writes the bundle from a transaction that is already open: everything in it — schema,
    /// records, history and asset files — comes from that transaction's one state of the
    /// store. A write transaction may pass its session to back up exactly what it is about
    /// to change.
    public func write(
        _ session: any RecordSession, query: RecordQuery = RecordQuery(), since: ChangeToken? = nil, to path: String,
        passphrase: String? = nil, progress: ((Int) -> Void)? = nil
    ) throws -> Summary {
        // A backup holds a family's data: its owner's alone unless they say otherwise.
        let output = try OutputFile(path: path, privateIfNew: true)
        do {
            return try write(
                session, query: query, since: since, to: output, passphrase: passphrase, progress: progress)
        } catch {
            output.discard()
            throw error
        }
    }

    private func write(
        _ session: any RecordSession, query: RecordQuery, since: ChangeToken?, to output: OutputFile,
        passphrase: String?, progress: ((Int) -> Void)?
    ) throws -> Summary {
        let path = output.path
        let spoolDirectory =
            path == "-" ? FileManager.default.temporaryDirectory.path : (path as NSString).deletingLastPathComponent
        OutputFile.removeStale(in: spoolDirectory.isEmpty ? "." : spoolDirectory)
        let spool = try BundleSpool(directory: spoolDirectory.isEmpty ? "." : spoolDirectory, sealed: passphrase != nil)
        let made = try firstPass(session, query: query, since: since, into: spool, progress: progress)
        // Pass 2: the archive — the record members as pass 1 compressed them — and, with a
        // passphrase, encrypted.
        let encryptor = try passphrase.map { try BundleEncryptor(passphrase: $0) { try output.write($0) } }
        let archive = ArchiveStream(level: level) { bytes in
            if let encryptor { try encryptor.write(bytes) } else { try output.write(bytes) }
        }
        try archive.head(made.manifest, made.small)
        for (member, spooled) in zip(made.records.members, made.records.spooledMembers) {
            try archive.compressedMember(member.path, size: member.bytes, crc: spooled.crc) { emit in
                try spool.read(spooled.chunks) { chunk in
                    try Interruption.check()
                    try emit(chunk)
                }
            }
        }
        for member in made.assetMembers {
            try archive.member(member.path, size: member.bytes) { put in
                try BundleWriter.readAsset(member, from: session, put)
            }
        }
        try archive.finish()
        try encryptor?.finish()
        try output.commit()
        return Summary(manifest: made.manifest, bytesWritten: output.bytesWritten, missingAssets: made.missingAssets)
    }

    /// Writes a bundle in two parts, for a place that keeps objects rather than files: the
    /// records members' compressed bytes, handed to `body` as they are made (a few hundred KB
    /// at a time, so that they can travel while later records are still being read), and the
    /// rest, returned at the end (``BundleParts``). Asset files are not written: the parts name
    /// them, and whoever keeps the parts keeps the files (each once, by SHA-256).
    /// ``BundleAssembly`` puts the bundle back together from the two parts and the files.
    public func writeParts(
        _ session: any RecordSession, query: RecordQuery = RecordQuery(), since: ChangeToken? = nil,
        body: @escaping ([UInt8]) throws -> Void, progress: ((Int) -> Void)? = nil
    ) throws -> (parts: BundleParts, missingAssets: [String]) {
        let sink = StreamingSink(body)
        let made = try firstPass(session, query: query, since: since, into: sink, progress: progress)
        var spans: [BundleParts.Span] = []
        for spooled in made.records.spooledMembers {
            spans.append(
                BundleParts.Span(
                    compressedBytes: spooled.chunks.reduce(Int64(0)) { $0 + sink.lengths[$1] }, crc: spooled.crc))
        }
        let schema = made.small.first { $0.path == "schema.ckdb" }!.bytes
        let history = made.small.first { $0.path == BundleWriter.migrationsPath }?.bytes
        let parts = BundleParts(
            manifest: made.manifest, schema: String(decoding: schema, as: UTF8.self),
            migrations: history.map { String(decoding: $0, as: UTF8.self) }, records: spans,
            bodyBytes: sink.total)
        return (parts, made.missingAssets)
    }

    /// Writes the parts of an incremental bundle from changes that are not in a store: the
    /// records `changes` hands over (deletions as tombstones), in that order, as one changes
    /// member whose compressed bytes go to `body` as they are made. The schema and history are
    /// taken as given (the bundle holds them as text), the asset members from `assets` (by
    /// SHA-256) for the files the records name; a name `assets` lacks is left out, as a backup
    /// leaves out a file its store does not hold. This is how a chain of increments becomes
    /// one (``BundleParts`` of what the chain's records add up to).
    public func writeChangeParts(
        schema: String, migrations: String?, connectorState: [ConnectorStateEntry]? = nil, storeID: String,
        token: String, baseToken: String, created: String,
        assets: [String: BundleManifest.Member], body: @escaping ([UInt8]) throws -> Void,
        changes: (_ add: (Record) throws -> Void) throws -> Void
    ) throws -> BundleParts {
        let parsed = try SchemaParser.parse(schema, file: "schema.ckdb")
        let sink = StreamingSink(body)
        let records = RecordSpooler(spool: sink, schema: parsed, changes: true, level: level, progress: nil)
        try records.open(BundleWriter.changesPath, zone: .defaultZone, type: "")
        try changes { try records.add($0) }
        try records.finish()
        let assetMembers = records.assetHashes.sorted().compactMap { assets[$0] }
        var small: [(path: String, kind: String, bytes: [UInt8])] = [("schema.ckdb", "schema", Array(schema.utf8))]
        if let migrations { small.append((BundleWriter.migrationsPath, "migrations", Array(migrations.utf8))) }
        let smallMembers = small.map {
            BundleManifest.Member(
                path: $0.0, kind: $0.1, bytes: Int64($0.2.count), sha256: BundleReader.hex(SHA256.hash(data: $0.2)))
        }
        var manifest = BundleManifest(
            format: BundleManifest.currentFormat, ckportVersion: version, created: created, storeID: storeID,
            token: token, baseToken: baseToken, recordTypes: parsed.recordTypes.map(\.name),
            members: smallMembers + records.members + assetMembers)
        manifest.connectorState = connectorState
        let spans = records.spooledMembers.map { spooled in
            BundleParts.Span(
                compressedBytes: spooled.chunks.reduce(Int64(0)) { $0 + sink.lengths[$1] }, crc: spooled.crc)
        }
        return BundleParts(
            manifest: manifest, schema: schema, migrations: migrations, records: spans, bodyBytes: sink.total)
    }

    /// An asset member's bytes from the store, checked against the SHA-256 that names them.
    public static func readAsset(
        _ member: BundleManifest.Member, from session: any RecordSession, _ put: ([UInt8]) throws -> Void
    ) throws {
        var hasher = SHA256()
        var written: Int64 = 0
        try session.readAsset(member.sha256) { chunk in
            hasher.update(bufferPointer: chunk)
            written += Int64(chunk.count)
            try put(Array(chunk))
        }
        guard written == member.bytes, BundleReader.hex(hasher.finalize()) == member.sha256 else {
            throw StoreError.corrupt("asset \(member.sha256) does not hold the bytes its SHA-256 names")
        }
    }

    /// What pass 1 made: the records members compressed into `sink`, and the manifest.
    private struct FirstPass {
        var records: RecordSpooler
        var small: [(path: String, kind: String, bytes: [UInt8])]
        var assetMembers: [BundleManifest.Member]
        var missingAssets: [String]
        var manifest: BundleManifest
    }

    private func firstPass(
        _ session: any RecordSession, query: RecordQuery, since: ChangeToken?, into sink: any CompressedChunkSink,
        progress: ((Int) -> Void)?
    ) throws -> FirstPass {
        // Pass 1: the records into the spool, one member per (scope, zone, type), or one of
        // changes; the manifest needs every member's size and SHA-256 before it can go first.
        let records = RecordSpooler(
            spool: sink, schema: session.schema, changes: since != nil, level: level, progress: progress)
        if let since {
            try records.open(BundleWriter.changesPath, zone: .defaultZone, type: "")
            try session.forEachChange(
                since: since, recordTypes: query.recordTypes, scope: query.scope, zoneName: query.zoneName, records.add)
        } else if let rows = session as? any CanonicalJSONReading, query.limit == nil, query.sortField == nil {
            // Type by type, in the order one query visits them: a type without assets (no
            // files to gather) goes straight from its rows to JSON, the others through records.
            for type in try rows.recordTypeNames(query) {
                var one = query
                one.recordTypes = [type]
                if !records.hasAssets(type), rows.canWriteJSONFromRows(one) {
                    try records.addRows(of: rows, one)
                    continue
                }
                try session.forEach(one) { record in
                    if !records.holds(record) {
                        try records.open(
                            BundleWriter.memberPath(record.zone, record.recordType), zone: record.zone,
                            type: record.recordType)
                    }
                    try records.add(record)
                }
            }
        } else {
            try session.forEach(query) { record in
                if !records.holds(record) {
                    try records.open(
                        BundleWriter.memberPath(record.zone, record.recordType), zone: record.zone,
                        type: record.recordType)
                }
                try records.add(record)
            }
        }
        try records.finish()
        var assetMembers: [BundleManifest.Member] = []
        var missingAssets: [String] = []
        for sha256 in records.assetHashes.sorted() {
            if let size = try session.assetSize(sha256) {
                assetMembers.append(
                    BundleManifest.Member(
                        path: BundleWriter.assetPath(sha256), kind: "asset", bytes: size, sha256: sha256))
            } else {
                missingAssets.append(sha256)
            }
        }
        let history = try session.migrationHistory(set: nil)
        let historyBytes = history.isEmpty ? [] : try BundleWriter.json(history)
        let schemaBytes = Array(SchemaPrinter.print(session.schema).utf8)
        var small: [(path: String, kind: String, bytes: [UInt8])] = [("schema.ckdb", "schema", schemaBytes)]
        if !historyBytes.isEmpty { small.append((BundleWriter.migrationsPath, "migrations", historyBytes)) }
        let smallMembers = small.map {
            BundleManifest.Member(
                path: $0.0, kind: $0.1, bytes: Int64($0.2.count), sha256: BundleReader.hex(SHA256.hash(data: $0.2)))
        }
        var manifest = BundleManifest(
            format: BundleManifest.currentFormat, ckportVersion: version,
            created: ISO8601.format(milliseconds: Int64(Date().timeIntervalSince1970 * 1000)),
            storeID: session.storeID, token: session.currentToken.description, baseToken: since?.description,
            recordTypes: session.schema.recordTypes.map(\.name), members: smallMembers + records.members + assetMembers)
        // The connector state, from the same transaction, whole (a restore of an increment
        // takes the newest).
        var state: [ConnectorStateEntry] = []
        try session.forEachConnectorState(kind: nil, name: nil) { state.append($0) }
        if !state.isEmpty { manifest.connectorState = state }
        return FirstPass(
            records: records, small: small, assetMembers: assetMembers, missingAssets: missingAssets,
            manifest: manifest)
    }

    /// A manifest or a migration history as the bundle holds it: sorted, indented JSON.
    static func json<Value: Encodable>(_ value: Value) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(value)) + [0x0A]
    }
}

/// Pass 1 of a bundle: records encoded as JSON Lines, member by member, each member's size,
/// SHA-256 and record count noted for the manifest, the assets the records name gathered, and
/// the bytes compressed on the other cores into the spool (``ParallelDeflater``).
private final class RecordSpooler {
    private let spool: any CompressedChunkSink
    private let codec: JSONRecordCodec
    private let typesWithAssets: Set<String>
    private let changes: Bool
    private let progress: ((Int) -> Void)?
    private var writer = JSONWriter(capacity: 1 << 18)
    private var hasher = SHA256()
    private var current: (zone: ZoneID, type: String, path: String)?
    private var count = 0
    private var memberStart: Int64 = 0
    /// Whether the member being written has handed over a chunk yet.
    private var memberStarted = false
    private var spooled: Int64 = 0
    private var total = 0
    private(set) var members: [BundleManifest.Member] = []
    /// Each member's compressed chunks in the spool and the CRC-32 of its bytes, in the order
    /// of `members`; complete after ``finish()``.
    private(set) var spooledMembers: [(chunks: Range<Int>, crc: UInt32)] = []
    private(set) var assetHashes = Set<String>()
    private var deflater: ParallelDeflater!
    /// The member each chunk handed to the deflater belongs to, by chunk number.
    private var chunkMembers: [Int] = []

    init(spool: any CompressedChunkSink, schema: Schema, changes: Bool, level: Int32, progress: ((Int) -> Void)?) {
        self.spool = spool
        codec = JSONRecordCodec(schema: schema)
        typesWithAssets = Set(
            schema.recordTypes.filter { $0.fields.contains { $0.type.primitive == .asset } }.map(\.name))
        self.changes = changes
        self.progress = progress
        deflater = ParallelDeflater(level: level) { [unowned self] segment in
            let member = chunkMembers[segment.index]
            let index = spool.count
            try spool.append(segment.compressed)
            var entry = spooledMembers[member]
            entry.chunks = (entry.chunks.isEmpty ? index : entry.chunks.lowerBound)..<(index + 1)
            entry.crc = GzipFraming.combine(entry.crc, segment.crc, secondLength: Int64(segment.length))
            spooledMembers[member] = entry
        }
    }

    /// Whether records of `type` can name asset files.
    func hasAssets(_ type: String) -> Bool { typesWithAssets.contains(type) }

    /// Whether `record` belongs to the member being written.
    func holds(_ record: Record) -> Bool {
        guard let current else { return false }
        return current.zone == record.zone && current.type == record.recordType
    }

    /// Closes the member being written, if any, and starts the next.
    func open(_ path: String, zone: ZoneID, type: String) throws {
        try close()
        current = (zone, type, path)
        memberStarted = false
        spooledMembers.append((0..<0, 0))
    }

    func add(_ record: Record) throws {
        if typesWithAssets.contains(record.recordType) {
            record.forEachAsset { _, asset in if let sha256 = asset.sha256 { assetHashes.insert(sha256) } }
        }
        codec.encode(record, style: .canonical, to: &writer)
        writer.byte(0x0A)
        count += 1
        total += 1
        if writer.bytes.count >= 1 << 18 { try flush() }
        if total % 10_000 == 0 { progress?(total) }
    }

    /// Adds the records `query` selects from the store's rows (``CanonicalJSONReading/forEachCanonicalJSON(_:into:starting:_:)``):
    /// the same bytes ``add(_:)`` writes, a member per zone and type as they come.
    func addRows(of rows: any CanonicalJSONReading, _ query: RecordQuery) throws {
        // The writer is handed to the rows as a local and put back whenever a member is
        // opened or the buffer flushed, which work on the spooler's own.
        var out = JSONWriter()
        swap(&out, &writer)
        defer { swap(&out, &writer) }
        try rows.forEachCanonicalJSON(
            query, into: &out,
            starting: { zone, type, out in
                swap(&out, &self.writer)
                defer { swap(&out, &self.writer) }
                try self.open(BundleWriter.memberPath(zone, type), zone: zone, type: type)
            },
            { out in
                out.byte(0x0A)
                count += 1
                total += 1
                if out.bytes.count >= 1 << 18 {
                    swap(&out, &writer)
                    defer { swap(&out, &writer) }
                    try flush()
                }
                if total % 10_000 == 0 { progress?(total) }
            })
    }

    func close() throws {
        guard let open = current else { return }
        try flush()
        let digest = BundleReader.hex(hasher.finalize())
        if changes {
            members.append(
                BundleManifest.Member(
                    path: open.path, kind: "changes", bytes: spooled - memberStart, sha256: digest, records: count))
        } else {
            members.append(
                BundleManifest.Member(
                    path: open.path, kind: "records", bytes: spooled - memberStart,
                    sha256: digest, records: count, scope: open.zone.scope.rawValue, zoneName: open.zone.zoneName,
                    ownerRecordName: open.zone.ownerRecordName, recordType: open.type))
        }
        hasher = SHA256()
        count = 0
        memberStart = spooled
        current = nil
    }

    /// Closes the last member and waits for the last of the compression.
    func finish() throws {
        try close()
        try deflater.finish()
        deflater = nil
    }

    private func flush() throws {
        guard !writer.bytes.isEmpty else { return }
        hasher.update(data: writer.bytes)
        chunkMembers.append(spooledMembers.count - 1)
        try deflater.add(writer.bytes, continuing: memberStarted)
        memberStarted = true
        spooled += Int64(writer.bytes.count)
        writer.bytes.removeAll(keepingCapacity: true)
    }
}

/// Pass 2 of a bundle: tar members as one gzip member — the headers, the small members and
/// the assets compressed here, the record members as pass 1 compressed them — handed to `emit`
/// (the output file, through encryption when the bundle has a passphrase).
final class ArchiveStream {
    private let segmenter: DeflateSegmenter
    private let level: Int32
    private let emit: ([UInt8]) throws -> Void
    private let modified: Int64
    /// The CRC-32 and length of everything the archive holds so far, for gzip's trailer.
    private var crc: UInt32 = 0
    private var length: Int64 = 0
    private var started = false

    init(level: Int32, modified: Int64 = Int64(Date().timeIntervalSince1970), emit: @escaping ([UInt8]) throws -> Void)
    {
        self.level = level
        self.modified = modified
        self.emit = emit
        segmenter = DeflateSegmenter(level: level)
    }

    /// The manifest, then the schema and the migration history.
    func head(_ manifest: BundleManifest, _ small: [(path: String, kind: String, bytes: [UInt8])]) throws {
        try member("manifest.json", try BundleWriter.json(manifest))
        for entry in small { try member(entry.path, entry.bytes) }
    }

    /// A member held in memory.
    func member(_ path: String, _ bytes: [UInt8]) throws {
        try put(
            Tar.header(path: path, size: Int64(bytes.count), modified: modified) + bytes
                + Tar.padding(Int64(bytes.count)))
    }

    /// A member of `size` bytes whose deflate segments (``DeflateSegmenter``) `body` hands to
    /// the function it is given; `crc` is the CRC-32 of the bytes they hold.
    func compressedMember(
        _ path: String, size: Int64, crc memberCRC: UInt32, _ body: (_ emit: ([UInt8]) throws -> Void) throws -> Void
    ) throws {
        try put(Tar.header(path: path, size: size, modified: modified))
        try body(emit)
        crc = GzipFraming.combine(crc, memberCRC, secondLength: size)
        length += size
        try put(Tar.padding(size))
    }

    /// Compresses the asset members on every core; its threads serve them all.
    private lazy var deflater = ParallelDeflater(level: level) { [unowned self] segment in
        crc = GzipFraming.combine(crc, segment.crc, secondLength: Int64(segment.length))
        length += Int64(segment.length)
        try emit(segment.compressed)
    }

    /// A member of `size` bytes that `body` writes through the function it is given, compressed
    /// on every core.
    func member(_ path: String, size: Int64, _ body: (_ put: ([UInt8]) throws -> Void) throws -> Void) throws {
        try put(Tar.header(path: path, size: size, modified: modified))
        let deflater = self.deflater
        var pending: [UInt8] = []
        var started = false
        try body { bytes in
            pending += bytes
            if pending.count >= 1 << 18 {
                try deflater.add(pending, continuing: started)
                started = true
                pending = []
            }
        }
        if !pending.isEmpty { try deflater.add(pending, continuing: started) }
        try deflater.finish()
        try put(Tar.padding(size))
    }

    func finish() throws {
        try put(Tar.end, last: true)
        try emit(GzipFraming.trailer(crc: crc, length: length))
    }

    private func put(_ bytes: [UInt8], last: Bool = false) throws {
        if !started {
            started = true
            try emit(GzipFraming.header)
        }
        guard !bytes.isEmpty || last else { return }
        bytes.withUnsafeBytes { crc = GzipFraming.combine(crc, GzipFraming.crc($0), secondLength: Int64($0.count)) }
        length += Int64(bytes.count)
        try emit(segmenter.segment(bytes, last: last))
    }
}
