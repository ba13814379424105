import Crypto
import Foundation
import GRDBSQLite
import Records

// GRDB by name, so that its `Record` class stays out of the way of ckport's `Record`.
import class GRDB.Database
import struct GRDB.DatabaseError
import struct GRDB.DatabaseValue
import class GRDB.Row

/// A problem with an asset file: missing, unreadable, or not the bytes a record says.
public struct AssetError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Asset bytes, kept in the store file itself (table `_ck_asset`) and known by their SHA-256.
///
/// A record's ASSET value names its bytes by ``Asset/sha256``; many records may share one
/// file. Keeping the bytes inside SQLite makes them part of the same transaction as the
/// records: a restore or import that fails leaves no stray file behind, and the store stays
/// one file to copy. Bytes are streamed in and out in chunks (SQLite's incremental blob I/O),
/// so an asset of any size costs a fixed amount of memory.
extension StoreSession {
    /// The largest asset the store takes: SQLite's limit on one value.
    public static let maximumAssetSize: Int64 = 1_000_000_000
    static let assetChunk = 1 << 20

    private func assetTableExists() throws -> Bool {
        try db.tableExists("_ck_asset")
    }

    /// The size of the asset with this SHA-256, or nil when the store does not hold it.
    public func assetSize(_ sha256: String) throws -> Int64? {
        guard try assetTableExists() else { return nil }
        return try Int64.fetchOne(db, sql: "SELECT size FROM _ck_asset WHERE sha256 = ?", arguments: [sha256])
    }

    /// How many assets the store holds, and their total size.
    public func assetTotals() throws -> (count: Int, bytes: Int64) {
        guard try assetTableExists() else { return (0, 0) }
        let row = try Row.fetchOne(db, sql: "SELECT count(*), coalesce(sum(size), 0) FROM _ck_asset")!
        return (row[0], row[1])
    }

    /// Streams the asset's bytes to `body` in chunks of at most 1 MB; false when the store
    /// does not hold it.
    @discardableResult
    public func readAsset(_ sha256: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
        guard try assetTableExists(),
            let rowid = try Int64.fetchOne(db, sql: "SELECT rowid FROM _ck_asset WHERE sha256 = ?", arguments: [sha256])
        else { return false }
        var blob: OpaquePointer?
        guard sqlite3_blob_open(db.sqliteConnection, "main", "_ck_asset", "data", rowid, 0, &blob) == SQLITE_OK,
            let blob
        else {
            throw StoreError.corrupt(
                "asset \(sha256) cannot be read: \(String(cString: sqlite3_errmsg(db.sqliteConnection)))")
        }
        defer { sqlite3_blob_close(blob) }
        let total = Int(sqlite3_blob_bytes(blob))
        var buffer = [UInt8](repeating: 0, count: min(StoreSession.assetChunk, max(total, 1)))
        var offset = 0
        while offset < total {
            let n = min(buffer.count, total - offset)
            let status = buffer.withUnsafeMutableBytes {
                sqlite3_blob_read(blob, $0.baseAddress, Int32(n), Int32(offset))
            }
            guard status == SQLITE_OK else {
                throw StoreError.corrupt("asset \(sha256) cannot be read (SQLite error \(status))")
            }
            try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += n
        }
        return true
    }

    /// Adds an asset's bytes to the store's assets and returns their SHA-256, their size and
    /// whether they were new. Bytes the store already holds are not stored twice. With
    /// `expectedSHA256` or `expectedSize`, bytes that differ are refused and nothing is added.
    @discardableResult
    public func putAsset(_ source: AssetSource, expectedSHA256: String? = nil, expectedSize: Int64? = nil) throws -> (
        sha256: String, size: Int64, added: Bool
    ) {
        precondition(writable, "putAsset needs a write transaction")
        let (sha256, size) = try AssetFile.measure(source, expectedSHA256: expectedSHA256, expectedSize: expectedSize)
        if try assetSize(sha256) != nil { return (sha256, size, false) }
        try db.execute(
            sql:
                "CREATE TABLE IF NOT EXISTS _ck_asset (sha256 TEXT NOT NULL UNIQUE, size INTEGER NOT NULL, data BLOB NOT NULL)"
        )
        try db.execute(
            sql: "INSERT INTO _ck_asset (sha256, size, data) VALUES (?, ?, zeroblob(?))",
            arguments: [sha256, size, size])
        let rowid = db.lastInsertedRowID
        guard size > 0 else { return (sha256, size, true) }
        // Second pass: copy into the blob, hashing again in case the file changed meanwhile.
        var blob: OpaquePointer?
        guard sqlite3_blob_open(db.sqliteConnection, "main", "_ck_asset", "data", rowid, 1, &blob) == SQLITE_OK,
            let blob
        else {
            throw AssetError(
                "\(source.name): cannot write the asset into the store: \(String(cString: sqlite3_errmsg(db.sqliteConnection)))"
            )
        }
        defer { sqlite3_blob_close(blob) }
        var again = SHA256()
        var offset: Int64 = 0
        try source.read { chunk in
            guard offset + Int64(chunk.count) <= size else {
                throw AssetError("\(source.name): the file changed while it was being stored")
            }
            again.update(bufferPointer: chunk)
            let status = sqlite3_blob_write(blob, chunk.baseAddress, Int32(chunk.count), Int32(offset))
            guard status == SQLITE_OK else {
                throw AssetError("\(source.name): cannot write the asset into the store (SQLite error \(status))")
            }
            offset += Int64(chunk.count)
        }
        guard offset == size, again.finalize().map({ String(format: "%02x", $0) }).joined() == sha256 else {
            throw AssetError("\(source.name): the file changed while it was being stored")
        }
        return (sha256, size, true)
    }
}

extension Record {
    /// Every asset value in the record's fields, lists included, with its field name.
    public func forEachAsset(_ body: (String, Asset) throws -> Void) rethrows {
        for (name, value) in fields {
            switch value {
            case .asset(let asset): try body(name, asset)
            case .list(_, let items):
                for case .asset(let asset) in items { try body(name, asset) }
            default: break
            }
        }
    }

    /// The record with each asset value replaced by `transform`'s answer.
    public func mappingAssets(_ transform: (String, Asset) throws -> Asset) rethrows -> Record {
        var copy = self
        for (name, value) in fields {
            switch value {
            case .asset(let asset): copy.fields[name] = .asset(try transform(name, asset))
            case .list(let type, let items) where type == .asset:
                copy.fields[name] = .list(
                    type,
                    try items.map { item in
                        if case .asset(let asset) = item { return .asset(try transform(name, asset)) }
                        return item
                    })
            default: break
            }
        }
        return copy
    }
}

/// Where an asset's bytes come from when a store takes them: a file, or bytes set aside (an
/// asset on its way from a bundle).
public enum AssetSource {
    case file(String)
    case staged(any StagedBytes, origin: String)

    /// The source in messages.
    public var name: String {
        switch self {
        case .file(let path): return path
        case .staged(_, let origin): return origin
        }
    }

    /// Hands out the bytes in order, a piece at a time, from the start each time it is called.
    public func read(_ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        switch self {
        case .staged(let bytes, _):
            try bytes.read(body)
        case .file(let path):
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw AssetError("\(path): cannot open the asset file")
            }
            defer { try? handle.close() }
            while let chunk = try handle.read(upToCount: StoreSession.assetChunk), !chunk.isEmpty {
                try chunk.withUnsafeBytes { try body($0) }
            }
        }
    }
}

/// An asset about to be stored, hashed and measured first (every store does this the same
/// way, so bytes the store already holds cost no writes, and bytes that differ from what their
/// record says are refused before anything is written).
public enum AssetFile {
    /// Reads the bytes once: their SHA-256 and size, checked against what is expected when given.
    public static func measure(_ source: AssetSource, expectedSHA256: String?, expectedSize: Int64?) throws -> (
        sha256: String, size: Int64
    ) {
        var hasher = SHA256()
        var size: Int64 = 0
        try source.read { chunk in
            hasher.update(bufferPointer: chunk)
            size += Int64(chunk.count)
            guard size <= StoreSession.maximumAssetSize else {
                throw AssetError(
                    "\(source.name): the asset is larger than \(StoreSession.maximumAssetSize) bytes, the most a store keeps in one asset"
                )
            }
        }
        let sha256 = hasher.finalize().map { String(format: "%02x", $0) }.joined()
        if let expectedSize, expectedSize >= 0, expectedSize != size {
            throw AssetError("\(source.name): the asset is \(size) bytes; \(expectedSize) were expected")
        }
        if let expectedSHA256, expectedSHA256 != sha256 {
            throw AssetError("\(source.name): the asset's SHA-256 is \(sha256); \(expectedSHA256) was expected")
        }
        return (sha256, size)
    }
}
