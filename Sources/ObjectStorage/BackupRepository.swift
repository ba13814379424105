import Crypto
import CryptoExtras
import Formats
import Foundation
import Records

/// A place that holds snapshots of stores, made and read only through ckport: a folder or a
/// bucket (see ``RepositoryStorage``), laid out as
///
///     config                 what the repository is (JSON, never secret): its id, whether it is encrypted
///     keys/ID                an encrypted repository's key: its keys, sealed under the passphrase
///     snapshots/ID           one snapshot: the store it came from, when, the snapshot it builds on,
///                            and the bundle's description (sealed when encrypted)
///     data/XX/NAME           a snapshot's body (its records, compressed) and asset files, each once
///     locks/ID               who is using the repository (see ``RepositoryLock``)
///
/// A snapshot becomes visible when its `snapshots/` object is written, and that is written
/// last: a backup stopped before leaves objects in `data/` that no snapshot names, which the
/// next `forget --prune` removes.
///
/// An encrypted repository seals every object but `config` and its locks with AES-256-GCM
/// under keys that exist only in it (``RepositoryKeys``), and the names in `data/` and
/// `snapshots/` are random or keyed hashes: nothing of a family's data shows, not even the
/// names of its record types. The passphrase opens `keys/`: it can change without a byte of
/// data being written again. A lost passphrase loses the backups.
public final class BackupRepository: Sendable {
    public let storage: any RepositoryStorage
    public let config: RepositoryConfig
    let keys: RepositoryKeys?

    init(storage: any RepositoryStorage, config: RepositoryConfig, keys: RepositoryKeys?) {
        self.storage = storage
        self.config = config
        self.keys = keys
    }

    public var location: String { storage.location }
    public var isEncrypted: Bool { keys != nil }

    /// The largest `config`, key or snapshot object a reader takes.
    static let smallLimit = 64 << 20

    // MARK: Making and opening

    /// Makes a repository where there is none: encrypted for its whole life when `passphrase`
    /// is given.
    public static func create(_ storage: any RepositoryStorage, passphrase: String?) async throws -> BackupRepository {
        if try await storage.size(of: "config") != nil {
            throw RepositoryError.exists(location: storage.location)
        }
        let config = RepositoryConfig(
            id: RepositoryNames.random(16), encrypted: passphrase != nil,
            created: ISO8601.format(milliseconds: Int64(Date().timeIntervalSince1970 * 1000)))
        var keys: RepositoryKeys?
        if let passphrase {
            let made = RepositoryKeys.generate()
            try await storage.write("keys/" + RepositoryNames.random(16), try made.keyFile(passphrase: passphrase))
            keys = made
        }
        // The config comes last: a repository whose making was cut short is none.
        try await storage.write("config", try RepositoryConfig.encode(config))
        return BackupRepository(storage: storage, config: config, keys: keys)
    }

    /// Opens a repository. An encrypted one needs its passphrase; a passphrase given for a plain
    /// one is refused unless `allowUnencrypted` (whoever can write to the storage could put a
    /// plain repository of their own in an encrypted one's place).
    public static func open(
        _ storage: any RepositoryStorage, passphrase: String?, allowUnencrypted: Bool = false
    ) async throws -> BackupRepository {
        guard let bytes = try await storage.read("config", limit: 1 << 20) else {
            throw RepositoryError.notARepository(location: storage.location)
        }
        let config = try RepositoryConfig.decode(bytes, location: storage.location)
        guard config.encrypted else {
            if passphrase != nil && !allowUnencrypted {
                throw RepositoryError.notEncrypted(location: storage.location)
            }
            return BackupRepository(storage: storage, config: config, keys: nil)
        }
        guard let passphrase else { throw RepositoryError.needsPassphrase(location: storage.location) }
        let files = try await storage.list("keys/")
        guard !files.isEmpty else {
            throw RepositoryError.damaged(location: storage.location, object: "keys/", problem: "holds no key")
        }
        for file in files.prefix(64) {
            guard let keyFile = try await storage.read(file.key, limit: 1 << 20) else { continue }
            // A file that is no key file (left by another program) is passed over.
            guard
                let keys = try? RepositoryKeys.open(
                    keyFile, passphrase: passphrase, name: file.key, location: storage.location)
            else { continue }
            return BackupRepository(storage: storage, config: config, keys: keys)
        }
        throw RepositoryError.wrongPassphrase(location: storage.location)
    }

    /// Seals the keys under a new passphrase and removes the key files of the old one: the
    /// data is not written again.
    public func changePassphrase(to passphrase: String) async throws {
        guard let keys else { throw RepositoryError.notEncrypted(location: location) }
        let old = try await storage.list("keys/")
        try await storage.write("keys/" + RepositoryNames.random(16), try keys.keyFile(passphrase: passphrase))
        for file in old { try await storage.delete(file.key) }
    }

    // MARK: Objects

    /// The object that holds an asset file, named by its SHA-256 (in an encrypted repository,
    /// by a keyed hash of it, so that the name tells nothing).
    public func assetObject(_ sha256: String) -> String {
        let name = keys.map { $0.hiddenName(sha256) } ?? sha256
        return "data/\(name.prefix(2))/\(name)"
    }

    /// A new object name in `data/`.
    public func newDataObject() -> String {
        let name = RepositoryNames.random(32)
        return "data/\(name.prefix(2))/\(name)"
    }

    /// Writes a small object whole, sealed when the repository is encrypted.
    func writeSmall(_ name: String, _ plain: [UInt8]) async throws {
        try await storage.write(name, keys.map { $0.sealWhole(plain, name: name) } ?? plain)
    }

    /// Reads a small object, opened when the repository is encrypted; nil when there is none.
    func readSmall(_ name: String) async throws -> [UInt8]? {
        guard let stored = try await storage.read(name, limit: BackupRepository.smallLimit) else { return nil }
        guard let keys else { return stored }
        do {
            return try keys.openWhole(stored, name: name)
        } catch {
            throw RepositoryError.damaged(
                location: location, object: name,
                problem: "does not open with the repository's key: it is damaged or not this repository's")
        }
    }

    /// An object written a piece at a time, sealed in chunks when the repository is encrypted.
    public func startObject(_ name: String) async throws -> RepositoryObjectWriter {
        RepositoryObjectWriter(
            upload: try await storage.startUpload(name), sealer: keys.map { $0.streamSealer(name: name) })
    }

    /// Reads an object from its start, in order, a few MB per request.
    public func objectReader(_ name: String, storedSize: Int64) -> RepositoryObjectReader {
        RepositoryObjectReader(
            storage: storage, name: name, storedSize: storedSize, opener: keys.map { $0.streamOpener(name: name) })
    }

    // MARK: Snapshots

    /// Every snapshot, oldest first. A snapshot object that cannot be read is an error naming it.
    public func snapshots() async throws -> [RepositorySnapshot] {
        var found: [RepositorySnapshot] = []
        for object in try await storage.list("snapshots/") {
            found.append(try await snapshot(named: object.key))
        }
        return found.sorted { ($0.time, $0.id) < ($1.time, $1.id) }
    }

    /// The snapshot object `name` (`snapshots/ID`).
    public func snapshot(named name: String) async throws -> RepositorySnapshot {
        guard let bytes = try await readSmall(name) else {
            throw RepositoryError.damaged(location: location, object: name, problem: "is missing")
        }
        do {
            let snapshot = try JSONDecoder().decode(RepositorySnapshot.self, from: Data(bytes))
            guard "snapshots/" + snapshot.id == name else {
                throw RepositoryError.damaged(
                    location: location, object: name, problem: "names itself \(snapshot.id)")
            }
            return snapshot
        } catch let error as RepositoryError {
            throw error
        } catch {
            throw RepositoryError.damaged(location: location, object: name, problem: "cannot be read: \(error)")
        }
    }

    /// Makes a snapshot visible: its object is the last one a backup writes.
    public func publish(_ snapshot: RepositorySnapshot) async throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try await writeSmall("snapshots/" + snapshot.id, Array(try encoder.encode(snapshot)))
    }

    /// Removes a snapshot from the list (its objects stay until a prune).
    public func remove(_ snapshot: RepositorySnapshot) async throws {
        try await storage.delete("snapshots/" + snapshot.id)
    }

    /// Raises the repository's version to `version` when it is lower (rewriting `config`), so
    /// that a ckport too old for what is about to be written refuses the repository instead.
    public func require(version: Int) async throws {
        let current = try await storage.read("config", limit: 1 << 20).map {
            try RepositoryConfig.decode($0, location: storage.location)
        }
        guard let current, current.version < version else { return }
        var raised = current
        raised.version = version
        try await storage.write("config", try RepositoryConfig.encode(raised))
    }
}

/// What `config` says.
public struct RepositoryConfig: Codable, Sendable, Equatable {
    public var format = "ckport-repository"
    /// 1: the first; 2: a snapshot's description may hold a base (``RepositoryBase``), which a
    /// ckport of version 1 would not see (its prune would remove the base's data).
    public var version = RepositoryConfig.basesVersion
    public static let basesVersion = 2
    public var id: String
    public var encrypted: Bool
    /// The plain size of each sealed chunk of an encrypted object.
    public var chunkSize = 1 << 20
    public var created: String

    static func encode(_ config: RepositoryConfig) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return Array(try encoder.encode(config)) + [0x0A]
    }

    static func decode(_ bytes: [UInt8], location: String) throws -> RepositoryConfig {
        guard let config = try? JSONDecoder().decode(RepositoryConfig.self, from: Data(bytes)),
            config.format == "ckport-repository"
        else {
            throw RepositoryError.notARepository(location: location)
        }
        guard (1...RepositoryConfig.basesVersion).contains(config.version) else {
            throw RepositoryError.damaged(
                location: location, object: "config",
                problem: "says version \(config.version), which this ckport does not read; update ckport")
        }
        guard config.chunkSize == 1 << 20 else {
            throw RepositoryError.damaged(
                location: location, object: "config", problem: "names a chunk size of \(config.chunkSize)")
        }
        return config
    }
}

/// One snapshot of a store, as `snapshots/ID` holds it.
public struct RepositorySnapshot: Codable, Sendable, Equatable {
    public var id: String
    /// When it was made: ISO 8601, UTC, milliseconds.
    public var time: String
    public var host: String
    /// The store's id (its change tokens' origin).
    public var store: String
    /// Where the store was, as the backup was given it.
    public var storeLocation: String
    /// The snapshot this one holds the changes after; nil for a full one.
    public var parent: String?
    /// Records (a full snapshot, a folded one too) or changes (an incremental one).
    public var records: Int
    /// What it added to the repository: its body and the asset files no earlier snapshot had.
    public var bytes: Int64
    /// Its body object in `data/`, and its stored size.
    public var body: String
    public var bodyStoredBytes: Int64
    /// The bundle: its manifest, schema and history, and where its records lie in the body.
    public var parts: BundleParts
    /// The selection it holds when it is not the whole store (`types=Task;zone=family-1`); a
    /// snapshot builds only on one of the same selection.
    public var selection: String?
    /// The full bundle its body's changes apply to, when that bundle's own snapshot is gone:
    /// a snapshot folded by `forget` (see ``RepositoryBase``). Its `parent` is then nil — it
    /// needs no other snapshot — and its body is incremental.
    public var base: RepositoryBase?
    /// How many records the store held (in the selection) when it was made; nil in a
    /// description written before this was kept.
    public var storeRecords: Int?

    public init(
        id: String, time: String, host: String, store: String, storeLocation: String, parent: String?, records: Int,
        bytes: Int64, body: String, bodyStoredBytes: Int64, parts: BundleParts, selection: String? = nil,
        base: RepositoryBase? = nil, storeRecords: Int? = nil
    ) {
        self.base = base
        self.storeRecords = storeRecords
        self.id = id
        self.time = time
        self.host = host
        self.store = store
        self.storeLocation = storeLocation
        self.parent = parent
        self.records = records
        self.bytes = bytes
        self.body = body
        self.bodyStoredBytes = bodyStoredBytes
        self.parts = parts
        self.selection = selection
    }

    public var token: String { parts.manifest.token }
    public var isFull: Bool { parent == nil }
    /// `time` in milliseconds since 1970.
    public var milliseconds: Int64 { ISO8601.parse(time) ?? 0 }
    /// The first 8 characters of the id, as lists show it.
    public var shortID: String { String(id.prefix(8)) }

    /// What `ckport snapshots --json` prints of a snapshot.
    public struct Summary: Encodable, Sendable {
        public var id: String
        public var time: String
        public var store: String
        public var storeLocation: String
        public var host: String
        /// Null for a full snapshot.
        public var parent: String?
        public var records: Int
        public var bytes: Int64
        public var token: String

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(time, forKey: .time)
            try container.encode(store, forKey: .store)
            try container.encode(storeLocation, forKey: .storeLocation)
            try container.encode(host, forKey: .host)
            // A full snapshot's parent is written as null, not left out.
            try container.encode(parent, forKey: .parent)
            try container.encode(records, forKey: .records)
            try container.encode(bytes, forKey: .bytes)
            try container.encode(token, forKey: .token)
        }

        enum CodingKeys: String, CodingKey {
            case id, time, store, storeLocation, host, parent, records, bytes, token
        }
    }

    public var summary: Summary {
        Summary(
            id: id, time: time, store: store, storeLocation: storeLocation, host: host, parent: parent,
            records: records, bytes: bytes, token: token)
    }
}

/// A full snapshot's bundle, kept after the snapshot itself was forgotten, inside the
/// description of a later snapshot that was folded onto it: that snapshot's body holds the
/// changes from this bundle's token to its own, merged from the chain between. Folding this way
/// rewrites only the changes, not the whole store; `forget` writes a new full bundle once the
/// merged changes grow past half of the base.
public struct RepositoryBase: Codable, Sendable, Equatable {
    /// The snapshot it was, and when that was made.
    public var id: String
    public var time: String
    public var records: Int
    public var body: String
    public var bodyStoredBytes: Int64
    public var parts: BundleParts

    public init(id: String, time: String, records: Int, body: String, bodyStoredBytes: Int64, parts: BundleParts) {
        self.id = id
        self.time = time
        self.records = records
        self.body = body
        self.bodyStoredBytes = bodyStoredBytes
        self.parts = parts
    }

    /// The base as the first link of the chain of `snapshot`, whose base it is.
    public func link(of snapshot: RepositorySnapshot) -> RepositorySnapshot {
        RepositorySnapshot(
            id: id, time: time, host: snapshot.host, store: snapshot.store, storeLocation: snapshot.storeLocation,
            parent: nil, records: records, bytes: 0, body: body, bodyStoredBytes: bodyStoredBytes, parts: parts,
            selection: snapshot.selection)
    }
}

public enum RepositoryNames {
    /// `bytes` random bytes in hex.
    public static func random(_ bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }
}

// MARK: - Writing and reading objects

/// Writes one object of a repository: the bytes it is given, sealed in 1 MiB chunks when the
/// repository is encrypted, sent in parts of 16 MiB. Memory holds one part.
public final class RepositoryObjectWriter: @unchecked Sendable {
    // One task writes an object (its parts go in order).
    private let upload: any RepositoryUpload
    private let sealer: StreamSealer?
    private var part: [UInt8] = []
    public private(set) var storedBytes: Int64 = 0

    init(upload: any RepositoryUpload, sealer: StreamSealer?) {
        self.upload = upload
        self.sealer = sealer
        part.reserveCapacity(RepositoryUploadLimits.partSize + (1 << 20))
    }

    public func add(_ bytes: [UInt8]) async throws {
        if let sealer { part += sealer.add(bytes) } else { part += bytes }
        if part.count >= RepositoryUploadLimits.partSize { try await send() }
    }

    private func send() async throws {
        let sending = part
        part.removeAll(keepingCapacity: true)
        storedBytes += Int64(sending.count)
        try await upload.add(sending)
    }

    /// Sends the rest; the object appears whole.
    public func finish() async throws {
        if let sealer { part += sealer.finish() }
        storedBytes += Int64(part.count)
        // No empty last part (some servers refuse one); an empty object is put as one.
        if !part.isEmpty { try await upload.add(part) }
        part = []
        try await upload.finish()
    }

    public func abort() async { await upload.abort() }
}

/// Reads one object of a repository in order, opening sealed chunks as they come.
public final class RepositoryObjectReader: @unchecked Sendable {
    // One task reads an object.
    private let storage: any RepositoryStorage
    private let name: String
    private let storedSize: Int64
    private let opener: StreamOpener?
    private var offset: Int64 = 0

    init(storage: any RepositoryStorage, name: String, storedSize: Int64, opener: StreamOpener?) {
        self.storage = storage
        self.name = name
        self.storedSize = storedSize
        self.opener = opener
    }

    /// The next bytes (a few MB), nil at the end.
    public func next() async throws -> [UInt8]? {
        let step = opener?.sealedChunk ?? (4 << 20)
        let batch = opener == nil ? step : step * 4
        guard offset < storedSize || (opener != nil && !(opener!.finished)) else { return nil }
        let count = Int(min(Int64(batch), storedSize - offset))
        let stored = count > 0 ? try await storage.read(name, from: offset, count: count) : []
        guard stored.count == count else {
            throw RepositoryError.damaged(
                location: storage.location, object: name,
                problem: "is shorter than the \(storedSize) bytes its snapshot names")
        }
        offset += Int64(count)
        guard let opener else { return stored }
        do {
            return try opener.open(stored, atEnd: offset >= storedSize)
        } catch {
            throw RepositoryError.damaged(
                location: storage.location, object: name,
                problem: "a chunk does not open with the repository's key: the object is damaged")
        }
    }
}

// MARK: - Keys and sealing

/// An encrypted repository's keys: one that seals objects, one that names asset objects.
struct RepositoryKeys: Sendable {
    let data: SymmetricKey
    let names: SymmetricKey

    static let chunkSize = 1 << 20
    static let magic = Array("CKPORTS1".utf8)

    static func generate() -> RepositoryKeys {
        RepositoryKeys(data: SymmetricKey(size: .bits256), names: SymmetricKey(size: .bits256))
    }

    /// What `keys/ID` holds: the keys, sealed under a key scrypt derives from the passphrase.
    struct KeyFile: Codable {
        var kdf = "scrypt"
        var n: Int
        var r: Int
        var p: Int
        var salt: String
        var sealed: String
        var created: String
    }

    static let keyFileData = Array("ckport repository key".utf8)

    func keyFile(passphrase: String) throws -> [UInt8] {
        let salt = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let file = KeyFile(
            n: 1 << 15, r: 8, p: 1, salt: Data(salt).base64EncodedString(), sealed: "",
            created: ISO8601.format(milliseconds: Int64(Date().timeIntervalSince1970 * 1000)))
        let wrapping = try KDF.Scrypt.deriveKey(
            from: Array(passphrase.utf8), salt: salt, outputByteCount: 32, rounds: file.n, blockSize: file.r,
            parallelism: file.p)
        let material = data.withUnsafeBytes { Array($0) } + names.withUnsafeBytes { Array($0) }
        let box = try AES.GCM.seal(material, using: wrapping, authenticating: RepositoryKeys.keyFileData)
        var sealedFile = file
        sealedFile.sealed = box.combined!.base64EncodedString()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return Array(try encoder.encode(sealedFile)) + [0x0A]
    }

    /// The keys a key file seals, nil when the passphrase does not open it.
    static func open(_ bytes: [UInt8], passphrase: String, name: String, location: String) throws -> RepositoryKeys? {
        guard let file = try? JSONDecoder().decode(KeyFile.self, from: Data(bytes)), file.kdf == "scrypt",
            let salt = Data(base64Encoded: file.salt), let sealed = Data(base64Encoded: file.sealed)
        else {
            throw RepositoryError.damaged(location: location, object: name, problem: "is not a key file ckport reads")
        }
        // As for encrypted bundles: r and p fixed, N capped, so that a crafted key file cannot
        // make a reader spend gigabytes before the passphrase is even tried.
        guard file.r == 8, file.p == 1, file.n >= 1 << 10, file.n <= 1 << 17, file.n & (file.n - 1) == 0 else {
            throw RepositoryError.damaged(
                location: location, object: name, problem: "asks for scrypt parameters ckport does not use")
        }
        let wrapping = try KDF.Scrypt.deriveKey(
            from: Array(passphrase.utf8), salt: salt, outputByteCount: 32, rounds: file.n, blockSize: file.r,
            parallelism: file.p)
        guard let box = try? AES.GCM.SealedBox(combined: sealed),
            let material = try? AES.GCM.open(box, using: wrapping, authenticating: RepositoryKeys.keyFileData),
            material.count == 64
        else { return nil }
        let bytes = Array(material)
        return RepositoryKeys(data: SymmetricKey(data: bytes[0..<32]), names: SymmetricKey(data: bytes[32..<64]))
    }

    /// A name that tells nothing of `text` to whoever lacks the keys.
    func hiddenName(_ text: String) -> String {
        HMAC<SHA256>.authenticationCode(for: Array(text.utf8), using: names).map { String(format: "%02x", $0) }.joined()
    }

    /// The key of one object: its own, derived from the repository's with a random salt and
    /// the object's name, so that an object cannot pass for another and no nonce repeats.
    func objectKey(salt: [UInt8], name: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: data, salt: salt, info: Array("ckport object \(name)".utf8), outputByteCount: 32)
    }

    func streamSealer(name: String) -> StreamSealer {
        let salt = (0..<24).map { _ in UInt8.random(in: 0...255) }
        return StreamSealer(key: objectKey(salt: salt, name: name), header: RepositoryKeys.magic + salt)
    }

    func streamOpener(name: String) -> StreamOpener { StreamOpener(keys: self, name: name) }

    func sealWhole(_ plain: [UInt8], name: String) -> [UInt8] {
        let sealer = streamSealer(name: name)
        return sealer.add(plain) + sealer.finish()
    }

    func openWhole(_ stored: [UInt8], name: String) throws -> [UInt8] {
        let opener = streamOpener(name: name)
        return try opener.open(stored, atEnd: true)
    }
}

/// An object sealed in chunks: a header (`CKPORTS1` and a 24-byte salt), then 1 MiB chunks,
/// each sealed with AES-256-GCM under the object's key, its number as the nonce and, as the
/// authenticated data, whether it is the last: a chunk cannot be changed, moved, dropped or
/// the object cut short after one without the reader noticing.
final class StreamSealer: @unchecked Sendable {
    private let key: SymmetricKey
    private var header: [UInt8]?
    private var pending: [UInt8] = []
    private var index: UInt64 = 0

    init(key: SymmetricKey, header: [UInt8]) {
        self.key = key
        self.header = header
    }

    func add(_ bytes: [UInt8]) -> [UInt8] {
        var out = header ?? []
        header = nil
        pending += bytes
        let size = RepositoryKeys.chunkSize
        var start = 0
        // A full chunk is sealed only once a byte after it shows it is not the last.
        while pending.count - start > size {
            out += seal(Array(pending[start..<(start + size)]), last: false)
            start += size
        }
        if start > 0 { pending.removeFirst(start) }
        return out
    }

    func finish() -> [UInt8] {
        let out = (header ?? []) + seal(pending, last: true)
        header = nil
        pending = []
        return out
    }

    private func seal(_ plain: [UInt8], last: Bool) -> [UInt8] {
        let nonce = try! AES.GCM.Nonce(data: [0, 0, 0, 0] + withUnsafeBytes(of: index.bigEndian) { Array($0) })
        index += 1
        let box = try! AES.GCM.seal(plain, using: key, nonce: nonce, authenticating: [last ? 1 : 0])
        return Array(box.ciphertext) + Array(box.tag)
    }
}

final class StreamOpener: @unchecked Sendable {
    private let keys: RepositoryKeys
    private let name: String
    private var key: SymmetricKey?
    private var pending: [UInt8] = []
    private var index: UInt64 = 0
    private(set) var finished = false
    /// A sealed chunk's size, tag included.
    let sealedChunk = RepositoryKeys.chunkSize + 16

    init(keys: RepositoryKeys, name: String) {
        self.keys = keys
        self.name = name
    }

    struct Damaged: Error {}

    /// Opens what `stored` completes; `atEnd` when it holds the object's last bytes.
    func open(_ stored: [UInt8], atEnd: Bool) throws -> [UInt8] {
        guard !finished else { throw Damaged() }
        pending += stored
        if key == nil {
            guard pending.count >= 32, Array(pending[0..<8]) == RepositoryKeys.magic else {
                if atEnd || pending.count >= 32 { throw Damaged() }
                return []
            }
            key = keys.objectKey(salt: Array(pending[8..<32]), name: name)
            pending.removeFirst(32)
        }
        var out: [UInt8] = []
        var start = 0
        while pending.count - start > sealedChunk || (atEnd && start < pending.count)
            || (atEnd && pending.isEmpty && !finished)
        {
            let end = min(start + sealedChunk, pending.count)
            let last = atEnd && end == pending.count
            guard end - start >= 16 else { throw Damaged() }
            let chunk = pending[start..<end]
            let nonce = try AES.GCM.Nonce(data: [0, 0, 0, 0] + withUnsafeBytes(of: index.bigEndian) { Array($0) })
            let box = try AES.GCM.SealedBox(nonce: nonce, ciphertext: chunk.dropLast(16), tag: chunk.suffix(16))
            out += try AES.GCM.open(box, using: key!, authenticating: [last ? 1 : 0])
            index += 1
            start = end
            if last {
                finished = true
                break
            }
        }
        pending.removeFirst(start)
        return out
    }
}
