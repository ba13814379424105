import Foundation
import PostgresNIO
import Records

/// A ckport store in a PostgreSQL schema (namespace): the store for data sets and teams that
/// outgrow one machine.
///
/// The namespace holds `_ck_meta` (the store's format, identity, schema text and change
/// sequence) beside the store's tables; anything else in it makes it not a ckport store, and
/// ckport leaves it alone. Creating a store takes a transaction-scoped advisory lock on the
/// namespace's name, so two processes creating the same store at once make one store.
public final class PostgresStore: @unchecked Sendable {
    /// The layout of the namespace this ckport writes and reads.
    public static let format = 1

    public let location: PostgresLocation
    /// The store's identity, the first part of its change tokens.
    public let storeID: String
    let link: PostgresLink

    /// Opens the store at `location`; with `create`, makes it first when the namespace holds
    /// no store yet.
    public init(_ location: PostgresLocation, create: Bool, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        self.location = location
        let link = try PostgresLink(location, environment: environment)
        self.link = link
        let schema = location.schema
        storeID = try link.transaction {
            // One creator at a time per namespace (the key: the name's hash, in ckport's own space).
            try link.execute("SELECT pg_advisory_xact_lock(\(PostgresStore.lockKey(schema)))")
            let namespace = try link.rows("SELECT 1 FROM pg_namespace WHERE nspname = \(schema)").isEmpty == false
            let hasMeta = try !link.rows("SELECT 1 FROM pg_tables WHERE schemaname = \(schema) AND tablename = '_ck_meta'").isEmpty
            if hasMeta { return try PostgresStore.readIdentity(link, location) }
            if namespace {
                let tables = try link.rows("SELECT tablename FROM pg_tables WHERE schemaname = \(schema) ORDER BY tablename LIMIT 3").compactMap { $0[0] }
                if !tables.isEmpty {
                    throw PostgresStoreError.notAStore("\(location): schema \(schema) holds tables (\(tables.joined(separator: ", "))) but no ckport store; name another with ?schema=NAME")
                }
            }
            guard create else {
                throw PostgresStoreError.notAStore("\(location): no ckport store in schema \(schema); import a schema or records to create one")
            }
            let id = UUID().uuidString.lowercased()
            try link.execute(
                "CREATE SCHEMA IF NOT EXISTS \(schema)",
                "CREATE TABLE \(schema)._ck_meta (key text PRIMARY KEY, value text NOT NULL)",
                "INSERT INTO \(schema)._ck_meta (key, value) VALUES ('format', '\(PostgresStore.format)'), ('storeID', '\(id)'), ('changeSeq', '0'), ('schema', 'DEFINE SCHEMA\n')")
            return id
        }
    }

    /// The identity of the store the namespace holds, checked for a format this ckport reads.
    private static func readIdentity(_ link: PostgresLink, _ location: PostgresLocation) throws -> String {
        let schema = location.schema
        var meta: [String: String] = [:]
        for row in try link.rows("SELECT key, value FROM \(name: schema)._ck_meta") {
            if let key = row[0], let value = row[1] { meta[key] = value }
        }
        guard let format = meta["format"].flatMap(Int.init) else {
            throw PostgresStoreError.notAStore("\(location): schema \(schema) has a _ck_meta table without a format; it is not a ckport store")
        }
        guard format == PostgresStore.format else {
            throw PostgresStoreError.notAStore("\(location): the store is of format \(format); this ckport reads format \(PostgresStore.format)")
        }
        guard let id = meta["storeID"], !id.isEmpty else {
            throw PostgresStoreError.notAStore("\(location): the store has no identity (storeID) in _ck_meta")
        }
        return id
    }

    /// The schema as the store holds it now, read afresh.
    public func schema() throws -> Schema {
        let text = try link.rows("SELECT value FROM \(name: location.schema)._ck_meta WHERE key = 'schema'").first?[0] ?? "DEFINE SCHEMA\n"
        return try SchemaParser.parse(text)
    }

    /// The change sequence: how many changes the store has seen.
    public func changeSequence() throws -> Int64 {
        guard let text = try link.rows("SELECT value FROM \(name: location.schema)._ck_meta WHERE key = 'changeSeq'").first?[0],
              let sequence = Int64(text) else {
            throw PostgresStoreError.notAStore("\(location): the store's change sequence is missing or not a number")
        }
        return sequence
    }

    /// A 64-bit advisory lock key for a namespace's name (FNV-1a, so every process agrees).
    static func lockKey(_ schema: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "ckport:\(schema)".utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }
}

extension PostgresQuery.StringInterpolation {
    /// A name checked to be plain (``PostgresLocation/isPlainName(_:)``), written into the SQL
    /// as it is: PostgreSQL cannot take a schema or table name as a parameter.
    mutating func appendInterpolation(name: String) {
        precondition(PostgresLocation.isPlainName(name), "not a plain name: \(name)")
        appendInterpolation(unescaped: name)
    }
}
