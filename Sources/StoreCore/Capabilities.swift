import Records

// What a store may do faster than the record-by-record protocols allow, each a protocol of its
// own that a backend's session or store conforms to when it can. Callers ask with
// `as? any CanonicalJSONReading` and take the general path when the answer is no, so no code
// outside a backend names the backend.

/// A session that writes records as canonical JSON straight from its rows, without a
/// ``Record`` between row and text (the bytes ``Record``'s canonical JSON would be).
public protocol CanonicalJSONReading: RecordReading {
    /// Whether ``forEachCanonicalJSON(_:into:starting:_:)`` can read what `query` selects.
    func canWriteJSONFromRows(_ query: RecordQuery) -> Bool
    /// The record types `query` reads, in the order ``RecordReading/forEach(_:_:)`` visits them.
    func recordTypeNames(_ query: RecordQuery) throws -> [String]
    /// Appends each record `query` selects to `out` as one canonical JSON object, in the order
    /// ``RecordReading/forEach(_:_:)`` gives, and calls `written` after each. `starting` hears
    /// the zone and record type before the first record of each run of records that share them.
    func forEachCanonicalJSON(
        _ query: RecordQuery, into out: inout JSONWriter,
        starting: ((ZoneID, String, inout JSONWriter) throws -> Void)?,
        _ written: (inout JSONWriter) throws -> Void
    ) throws
    /// Writes each record `query` selects as one line of canonical JSON: `write` gets the lines
    /// a batch at a time, in order (a store may make them on a thread of its own, never two
    /// batches at once); `progress` hears how many records have been read. Returns the count.
    func writeCanonicalJSONLines(
        _ query: RecordQuery, progress: ((Int) -> Void)?, write: @escaping ([UInt8]) throws -> Void
    ) throws -> Int
}

/// A session that hands out the rows of its record types' tables in place, for writers that
/// make text of scalar fields without building records (CSV).
public protocol RowReading: RecordReading {
    /// Whether ``forEachRow(_:_:)`` can read what `query` selects.
    func canReadRows(_ query: RecordQuery) -> Bool
    /// Calls `body` with each row `query` selects, in the order ``RecordReading/forEach(_:_:)``
    /// gives the records. The row is only valid inside `body`, and is the same object each time
    /// (moved on to the next row).
    func forEachRow(_ query: RecordQuery, _ body: (any StoredRow) throws -> Void) throws
}

/// A store with a format of its own, which an older ckport may have written and this one
/// upgrades in place.
public protocol VersionedStore: AnyObject {
    /// The format this ckport writes.
    var formatVersion: Int { get }
    /// The format the store had before this handle upgraded it, or nil when it did not.
    var upgradedFrom: Int? { get }
}

/// A writer that takes rows in place (``RowReading``) as well as records: the same bytes as
/// writing the records, without building them.
public protocol RowWriting: AnyObject {
    /// Writes the rows `query` selects from `session` (``RowReading/canReadRows(_:)`` said yes);
    /// `written` hears the count after each row. Returns how many were written.
    func writeRows(of session: any RowReading, _ query: RecordQuery, written: ((Int) -> Void)?) throws -> Int
}
