import Crypto
import Foundation
import GRDBSQLite
import Records
import StoreCore

// GRDB by name, so that its `Record` class stays out of the way of ckport's `Record`.
import class GRDB.Database
import struct GRDB.DatabaseError
import struct GRDB.DatabaseValue
import class GRDB.Row

/// Asset bytes, kept in the store file itself (table `_ck_asset`) and known by their SHA-256.
///
/// A record's ASSET value names its bytes by ``Asset/sha256``; many records may share one
/// file. Keeping the bytes inside SQLite makes them part of the same transaction as the
/// records: a restore or import that fails leaves no stray file behind, and the store stays
/// one file to copy. Bytes are streamed in and out in chunks (SQLite's incremental blob I/O),
/// so an asset of any size costs a fixed amount of memory.
extension StoreSession {
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
        var buffer = [UInt8](repeating: 0, count: min(AssetFile.chunkSize, max(total, 1)))
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
