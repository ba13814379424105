import Foundation
import Records

/// A field's value in a table row, read in place. Text and bytes point into the store's copy
/// of the row: valid only until the row moves on, and never to be kept.
public enum RowValue {
    case text(UnsafeBufferPointer<UInt8>)
    case int64(Int64)
    case timestamp(Int64)
    case double(Double)
    case bytes(UnsafeRawBufferPointer)
    /// The target's record name and the reference's action.
    case reference(UnsafeBufferPointer<UInt8>, ReferenceAction)
}

/// The row of a record type's table that ``RowReading/forEachRow(_:_:)`` stands on: what an
/// export writes its text from without building a ``Record`` (no String per column, no field
/// array). Read it only inside the call that hands it out.
public protocol StoredRow: AnyObject {
    /// The zone of the current row.
    var zone: ZoneID { get }
    /// A number that changes whenever the zone or the record type of the rows may have: a
    /// reader that makes something of them makes it again only when this moves.
    var zoneSerial: Int { get }
    var recordType: String { get }
    /// The record type's field names, sorted by their UTF-8 bytes; field positions index them.
    var fieldNames: [String] { get }
    /// Where the field `name` stands in ``fieldNames``, or nil when the type has no such field.
    func position(ofField name: String) -> Int?

    var recordName: UnsafeBufferPointer<UInt8> { get }
    var changeTag: UnsafeBufferPointer<UInt8>? { get }
    /// The record name of the record's parent, and of the share it is the root of.
    var parent: UnsafeBufferPointer<UInt8>? { get }
    var share: UnsafeBufferPointer<UInt8>? { get }
    /// A share's details (compact JSON), when the record has them.
    var shareDetails: UnsafeBufferPointer<UInt8>? { get }
    /// The creation (or, with `modified`, the modification) stamp: its time in milliseconds,
    /// the user and the device; nil when the record has none.
    func stamp(modified: Bool) -> (
        timestamp: Int64, user: UnsafeBufferPointer<UInt8>?, device: UnsafeBufferPointer<UInt8>?
    )?
    /// The value of the field at `position`, nil when the record has none. Lists, assets and
    /// locations are not read here (``RowReading/canReadRows(_:)`` says no to their types).
    func value(at position: Int) -> RowValue?
}
