import Foundation
import Records

/// A migration's work on one type's records when it needs no whole record: it takes a record's
/// name and its field values, one per field of the type's working shape, changes the values
/// where they are and says what becomes of the record. Handed to
/// ``RecordSession/updateInPlace(type:into:renames:writes:reads:byValues:_:)``, which then
/// builds no record for a row and asks `transform` nothing.
public struct InPlaceValues {
    public enum Outcome: Sendable {
        case kept
        case deleted
        /// The values as they are now are the record's.
        case updated
    }
    public typealias Transform = (_ recordName: String, _ values: inout [FieldValue?]) throws -> Outcome

    /// Given the working shape's field names (the old fields under their old names and the
    /// added ones, in the order of the values), the transform; nil when the migration cannot
    /// work on values alone, and records are built as before.
    public let make: (_ fields: [String]) -> Transform?

    public init(_ make: @escaping (_ fields: [String]) -> Transform?) {
        self.make = make
    }
}
