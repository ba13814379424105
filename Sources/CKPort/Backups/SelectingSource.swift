import Records

/// Passes on the records of some types and zones only, renaming zones on the way. Every
/// record is still read, so that a bundle's every member is checked.
public final class SelectingSource: RecordSource {
    private let source: RecordSource
    private let types: Set<String>
    private let zones: Set<String>
    private let renames: [String: String]

    /// Empty `types` or `zones` select every type or zone; `renames` maps zone names.
    public init(_ source: RecordSource, types: Set<String>, zones: Set<String>, renames: [String: String]) {
        self.source = source
        self.types = types
        self.zones = zones
        self.renames = renames
    }

    public var name: String { source.name }
    public var bytesRead: Int64 { source.bytesRead }
    public var totalBytes: Int64? { source.totalBytes }

    public func next() throws -> SourceItem? {
        while let item = try source.next() {
            guard case .record(var sourced) = item else { return item }
            if !types.isEmpty && !types.contains(sourced.record.recordType) { continue }
            if !zones.isEmpty && !zones.contains(sourced.record.zone.zoneName) { continue }
            if let renamed = renames[sourced.record.zone.zoneName] { sourced.record.id.zone.zoneName = renamed }
            return .record(sourced)
        }
        return nil
    }
}
