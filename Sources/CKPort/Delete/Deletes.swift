import Records
import StoreCore

/// Deleting records, with CloudKit's reference actions: a record that points at a deleted one
/// through a DELETE_SELF reference goes too.
public enum Deletes {}

extension Deletes {
    /// Deletes the records of these names. A name is looked for in the zones `zone` and
    /// `scope` allow; a name live in several of them must be narrowed down.
    public static func records(
        named names: [String], zone: String? = nil, scope: DatabaseScope? = nil,
        in store: some RecordStoring, dryRun: Bool = false
    ) throws -> [DeletedRecord] {
        try store.writeSession(dryRun: dryRun) { session in
            try session.delete(try names.map { try resolve($0, zone: zone, scope: scope, in: session) })
        }
    }

    /// Deletes the records `query` selects (its types, scope, zone and predicate).
    public static func records(matching query: RecordQuery, in store: some RecordStoring, dryRun: Bool = false) throws
        -> [DeletedRecord]
    {
        try store.writeSession(dryRun: dryRun) { session in try session.delete(matching: query) }
    }

    /// The zone holding `name`: the one given, else the only zone where the name is live.
    static func resolve(_ name: String, zone: String?, scope: DatabaseScope?, in session: any RecordSession) throws
        -> RecordID
    {
        let candidates = session.zones.filter {
            (zone.map($0.zoneName.hasSameBytes(as:)) ?? true) && (scope == nil || $0.scope == scope)
        }
        let hits = try candidates.filter { try session.record(RecordID(recordName: name, zone: $0)) != nil }
        if hits.count > 1 { throw OperationError.ambiguousRecordName(name, zones: hits.map(\.description)) }
        return RecordID(
            recordName: name,
            zone: hits.first ?? candidates.first
                ?? ZoneID(scope: scope ?? .private, zoneName: zone ?? ZoneID.defaultZoneName))
    }
}
