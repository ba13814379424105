import Foundation
import Records
import StoreCore

extension RecordStore: RecordStoring {
    public var location: String { path }
}

extension StoreSession: LoadingSession {
    public func makeLoader() throws -> any RecordLoader { try BulkLoad(session: self) }
}

// The SQLite session's fast paths, offered as capabilities (its rows straight to JSON or CSV).
extension StoreSession: CanonicalJSONReading, RowReading {}

extension RecordStore: VersionedStore {
    public var formatVersion: Int { Self.formatVersion }
}

/// SQLite stores, in files: every location is a path.
public struct SQLiteBackend: RecordStoreBackend {
    public init() {}

    public var name: String { "SQLite" }

    public func handles(_ location: String) -> Bool { true }

    public func open(_ location: String, options: StoreOpenOptions) throws -> any RecordStoring {
        try RecordStore(
            path: location, create: options.create, upgrade: options.upgrade, waitSeconds: options.waitSeconds,
            waiting: options.waiting, buildAside: options.buildAside)
    }

    public func exists(_ location: String, options: StoreOpenOptions) -> Bool {
        FileManager.default.fileExists(atPath: location)
    }
}
