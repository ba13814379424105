import Foundation
import Records
import StoreCore

/// Settings of particular formats, found by their type: each format defines the settings it
/// takes (``CSVReadSettings``, ``CalendarReadSettings``…) and reads them from here, so a new
/// format brings its own without a change anywhere else.
public struct FormatSettings: Sendable {
    private var values: [ObjectIdentifier: any Sendable] = [:]

    public init() {}

    public subscript<Settings: Sendable>(_ type: Settings.Type) -> Settings? {
        get { values[ObjectIdentifier(type)] as? Settings }
        set { values[ObjectIdentifier(type)] = newValue }
    }

    /// The settings of `type` that were given, or its defaults.
    public func get<Settings: Sendable>(_ type: Settings.Type, default value: @autoclosure () -> Settings) -> Settings {
        self[type] ?? value()
    }
}

/// What a format's export from a store wrote: how many of each kind of thing (components of a
/// calendar, say), and the format's own summary, found by its type.
public struct FormatExportSummary {
    public var written: [String: Int]
    public var details: FormatSettings

    public init(written: [String: Int], details: FormatSettings = FormatSettings()) {
        self.written = written
        self.details = details
    }
}

/// What a reader is made with: the schema records are checked against, where records that
/// name no type or zone go, and each format's own settings.
public struct RecordReadContext {
    public var schema: Schema
    /// The record type of records that name none.
    public var defaultRecordType: String?
    /// The zone of records that name none.
    public var defaultZone: ZoneID
    /// The time zone of times written without an offset (and of floating calendar times).
    public var timeZone: TimeZone?
    /// Whether fields and record types the schema lacks may be added.
    public var allowNewFields: Bool
    /// The store the records go to, for readers that look something up in it (a calendar's
    /// attendees by e-mail address). Nil: nothing is looked up.
    public var store: (any RecordStoring)?
    public var settings: FormatSettings
    /// What readers of one import look up in the store once and share (a calendar's people by
    /// e-mail address), so that a reader made during the import's transaction reads nothing.
    public let memo = ReadMemo()

    public init(
        schema: Schema, defaultRecordType: String? = nil, defaultZone: ZoneID = .defaultZone, timeZone: TimeZone? = nil,
        allowNewFields: Bool = false, store: (any RecordStoring)? = nil, settings: FormatSettings = FormatSettings()
    ) {
        self.schema = schema
        self.defaultRecordType = defaultRecordType
        self.defaultZone = defaultZone
        self.timeZone = timeZone
        self.allowNewFields = allowNewFields
        self.store = store
        self.settings = settings
    }
}

/// Values the readers of one import compute once and share, by key.
public final class ReadMemo: @unchecked Sendable {
    private var values: [String: Any] = [:]
    private let lock = NSLock()

    public init() {}

    /// The value kept under `key`, made by `make` the first time it is asked for.
    public func value<T>(_ key: String, _ make: () throws -> T) rethrows -> T {
        if let kept = lock.withLock({ values[key] }) { return kept as! T }
        let made = try make()
        lock.withLock { values[key] = made }
        return made
    }
}

/// What a writer is made with.
public struct RecordWriteContext {
    public var schema: Schema
    /// For a format that holds one record type per file: that type.
    public var recordType: RecordTypeDefinition?
    /// The time zone times are written in (UTC when nil).
    public var timeZone: TimeZone?
    public var settings: FormatSettings

    public init(
        schema: Schema, recordType: RecordTypeDefinition? = nil, timeZone: TimeZone? = nil,
        settings: FormatSettings = FormatSettings()
    ) {
        self.schema = schema
        self.recordType = recordType
        self.timeZone = timeZone
        self.settings = settings
    }
}
