import Records

/// How a store is opened: the settings every kind of store takes.
public struct StoreOpenOptions: Sendable {
    /// How long a write waits for another process's write to end before giving up, by default.
    public static let defaultWaitSeconds: Double = 300

    /// Make an empty store when none is there. Commands that only read pass false, so a
    /// mistyped location is an error rather than a new empty store.
    public var create: Bool
    /// Bring a store of an older format up to date in place (a write); false refuses such a
    /// store instead, for a caller that promises to change nothing.
    public var upgrade: Bool
    /// How long a write waits while another writer holds what it needs, in seconds.
    public var waitSeconds: Double
    /// For a store that does not exist yet: build it where nobody sees it until its first write
    /// commits (a store that can; the others ignore it).
    public var buildAside: Bool
    /// Called once each time a write starts to wait for another process.
    public var waiting: (@Sendable () -> Void)?

    public init(
        create: Bool, upgrade: Bool = true, waitSeconds: Double = StoreOpenOptions.defaultWaitSeconds,
        buildAside: Bool = false, waiting: (@Sendable () -> Void)? = nil
    ) {
        self.create = create
        self.upgrade = upgrade
        self.waitSeconds = waitSeconds
        self.buildAside = buildAside
        self.waiting = waiting
    }
}

/// One kind of store, as ``RecordStores`` opens it from the text that names it (a path, a URL).
public protocol RecordStoreBackend: Sendable {
    /// The kind of store, for messages: "SQLite", "PostgreSQL".
    var name: String { get }
    /// Whether `location` names a store of this kind.
    func handles(_ location: String) -> Bool
    /// Opens the store at `location` (or makes it, with ``StoreOpenOptions/create``).
    func open(_ location: String, options: StoreOpenOptions) throws -> any RecordStoring
    /// Whether a store is at `location` yet. A location that cannot be asked (a server that
    /// does not answer) counts as yes: opening it then says why.
    func exists(_ location: String, options: StoreOpenOptions) -> Bool
}

/// The kinds of store a program opens by location: the first backend that handles a location
/// opens it.
///
/// ```swift
/// let stores = RecordStores([PostgresBackend(), SQLiteBackend()])
/// let store = try stores.open("postgresql://me@db.example/family", options: StoreOpenOptions(create: false))
/// ```
public struct RecordStores: Sendable {
    public let backends: [any RecordStoreBackend]

    /// `backends` in the order they are asked; put one that takes any location (SQLite's, a
    /// file path) last.
    public init(_ backends: [any RecordStoreBackend]) {
        self.backends = backends
    }

    /// The backend that opens `location`.
    public func backend(for location: String) throws -> any RecordStoreBackend {
        guard let backend = backends.first(where: { $0.handles(location) }) else {
            throw StoreError.unavailable(
                path: location,
                reason:
                    "no kind of store this program knows (\(backends.map(\.name).joined(separator: ", "))) is named so")
        }
        return backend
    }

    /// Opens the store at `location` with the backend that handles it.
    public func open(_ location: String, options: StoreOpenOptions) throws -> any RecordStoring {
        try backend(for: location).open(location, options: options)
    }

    /// Whether a store is at `location` yet (see ``RecordStoreBackend/exists(_:options:)``).
    public func exists(_ location: String, options: StoreOpenOptions) -> Bool {
        (try? backend(for: location))?.exists(location, options: options) ?? false
    }
}
