import Crypto
import Foundation
import NIOCore
import PostgresNIO
import Records
import StoreCore

/// Asset files in a PostgreSQL store: the bytes under their SHA-256, once however many records
/// name them, in rows of a megabyte, so that neither storing nor reading one holds it whole.
extension PostgresSession {
    static let assetChunk = 1 << 20

    /// Stores an asset's bytes (checked against what the record says of them when given);
    /// `added` is false when the store held them already.
    @discardableResult
    public func putAsset(_ source: AssetSource, expectedSHA256: String? = nil, expectedSize: Int64? = nil) throws -> (
        sha256: String, size: Int64, added: Bool
    ) {
        let (sha256, size) = try AssetFile.measure(source, expectedSHA256: expectedSHA256, expectedSize: expectedSize)
        let schema = namespace
        let inserted = try link.rows(
            """
            INSERT INTO \(unescaped: schema)._ck_asset (sha256, size) VALUES (\(sha256), \(size)) ON CONFLICT DO NOTHING RETURNING sha256
            """)
        guard !inserted.isEmpty else { return (sha256, size, false) }
        // Second pass: the bytes in rows of a megabyte, hashed again in case the file changed meanwhile.
        var again = SHA256()
        var index: Int32 = 0
        var pending = [UInt8]()
        pending.reserveCapacity(PostgresSession.assetChunk)
        func flush() throws {
            try link.execute(
                query: """
                    INSERT INTO \(unescaped: schema)._ck_asset_chunk (sha256, chunk, data) VALUES (\(sha256), \(index), \(ByteBuffer(bytes: pending)))
                    """)
            index += 1
            pending.removeAll(keepingCapacity: true)
        }
        try source.read { piece in
            again.update(bufferPointer: piece)
            var rest = piece[...]
            while !rest.isEmpty {
                let take = min(rest.count, PostgresSession.assetChunk - pending.count)
                pending.append(contentsOf: rest.prefix(take))
                rest = rest.dropFirst(take)
                if pending.count == PostgresSession.assetChunk { try flush() }
            }
        }
        if !pending.isEmpty { try flush() }
        guard again.finalize().map({ String(format: "%02x", $0) }).joined() == sha256 else {
            throw AssetError("\(source.name): the file changed while it was being stored")
        }
        return (sha256, size, true)
    }
}

extension PostgresSession {
    /// The size of an asset the store holds.
    public func assetSize(_ sha256: String) throws -> Int64? {
        try link.rows("SELECT size::text FROM \(name: namespace)._ck_asset WHERE sha256 = \(sha256)").first?[0].flatMap(
            Int64.init)
    }

    /// Passes an asset's bytes to `body` a megabyte at a time; false when the store lacks them.
    @discardableResult
    public func readAsset(_ sha256: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
        guard let size = try assetSize(sha256) else { return false }
        var index: Int32 = 0
        var total: Int64 = 0
        while let bytes = try link.bytes(
            "SELECT data FROM \(name: namespace)._ck_asset_chunk WHERE sha256 = \(sha256) AND chunk = \(index)")
        {
            try bytes.withUnsafeBytes { try body($0) }
            total += Int64(bytes.count)
            index += 1
        }
        guard total == size else {
            throw PostgresStoreError.notAStore(
                "\(location): asset \(sha256) holds \(total) bytes; its entry says \(size)")
        }
        return true
    }
}

extension PostgresLink {
    /// The first column of the first row as bytes (a bytea), or nil when there is no row.
    func bytes(_ query: PostgresQuery) throws -> [UInt8]? {
        let result = try rowsRaw(query)
        guard let row = result.first else { return nil }
        do {
            guard let buffer = try row.first?.decode(ByteBuffer?.self) else { return [] }
            return Array(buffer.readableBytesView)
        } catch {
            throw PostgresStoreError.server("\(location): a column of the answer is not bytes (\(error))")
        }
    }
}
