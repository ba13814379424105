import Foundation
import Records

/// What a rewrite did.
public struct RewriteCounts: Sendable, Hashable {
    public var scanned = 0
    public var changed = 0
    public var deleted = 0
    public init() {}
}

extension RewriteCounts {
    /// Checks what a rewrite's transform made of `record` — every result in the record's zone,
    /// its own name at most once — and says whether one of the results keeps that name.
    public static func keepsName(_ record: Record, in results: [Record]) throws -> Bool {
        var kept = false
        for result in results {
            guard result.zone == record.zone else {
                throw StoreError.corrupt(
                    "a rewrite moved record '\(record.recordName)' to another zone, which records cannot do")
            }
            if result.recordName == record.recordName {
                guard !kept else { throw SaveRefusal(message: "record '\(record.recordName)' would be written twice") }
                kept = true
            }
        }
        return kept
    }
}

extension SchemaChange {
    /// The record types a rewrite rebuilds: those asked for, and every type whose definition
    /// the change touches (added, removed, with fields added, removed, retyped or re-indexed,
    /// or with other grants).
    public func rebuiltTypes(_ requested: Set<String>) -> Set<String> {
        var types = requested
        types.formUnion(addedTypes.map(\.name))
        types.formUnion(removedTypes)
        types.formUnion(addedFields.map(\.type))
        types.formUnion(removedFields.map(\.type))
        types.formUnion(retypedFields.map(\.type))
        types.formUnion(reindexedFields.map(\.type))
        types.formUnion(regrantedTypes)
        return types
    }
}
