import Records

/// Passes on the records of some types and zones only, renaming zones on the way. Every
/// record is still read, so that a bundle's every member is checked.
public final class SelectingSource: RecordSource {
    private let source: RecordSource
    private let types: Set<String>
    /// Zone names compared by their bytes, as ``ZoneID`` compares them.
    private let zones: Set<ExactText>
    private let renames: [ExactText: String]

    /// Empty `types` or `zones` select every type or zone; `renames` maps zone names.
    public init(_ source: RecordSource, types: Set<String>, zones: Set<String>, renames: [String: String]) {
        self.source = source
        self.types = types
        self.zones = Set(zones.map(ExactText.init))
        self.renames = Dictionary(
            renames.map { (ExactText($0.key), $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    public var name: String { source.name }
    public var bytesRead: Int64 { source.bytesRead }
    public var totalBytes: Int64? { source.totalBytes }

    public func next() throws -> SourceItem? {
        while let item = try source.next() {
            guard case .record(var sourced) = item else { return item }
            if !types.isEmpty && !types.contains(sourced.record.recordType) { continue }
            if !zones.isEmpty && !zones.contains(ExactText(sourced.record.zone.zoneName)) { continue }
            if let renamed = renames[ExactText(sourced.record.zone.zoneName)] {
                sourced.record.id.zone.zoneName = renamed
            }
            return .record(sourced)
        }
        return nil
    }
}
