import Foundation

/// Where something is in an input: a file, a line and column, and for JSON the path inside
/// the document.
public struct SourcePosition: Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var line: Int?
    public var column: Int?
    /// A JSON path such as `records[3].fields.dueDate.value`, when the input is JSON.
    public var path: String?

    public init(file: String, line: Int? = nil, column: Int? = nil, path: String? = nil) {
        self.file = file
        self.line = line
        self.column = column
        self.path = path
    }

    /// `tasks.jsonl:12:34` (with ` (fields.dueDate.value)` when a path is known).
    public var description: String {
        var text = file
        if let line { text += ":\(line)" }
        if let column { text += ":\(column)" }
        if let path, !path.isEmpty { text += " (\(path))" }
        return text
    }
}

/// A problem with one input record, or with the input itself, that says where it is and what
/// was expected: `tasks.jsonl:12:34: record 'task-7' (Task), field 'dueDate': expected …`.
public struct InputIssue: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var position: SourcePosition
    public var recordName: String?
    public var recordType: String?
    public var field: String?
    public var message: Message
    /// The zone of the record it is about, when one was read (a pull's rejects file keeps it
    /// with the record, so that the record goes back to its zone).
    public var zone: ZoneID?

    public init(
        position: SourcePosition, recordName: String? = nil, recordType: String? = nil, field: String? = nil,
        message: Message
    ) {
        self.position = position
        self.recordName = recordName
        self.recordType = recordType
        self.field = field
        self.message = message
    }

    public var description: String { explanation.description }

    public var explanation: Message {
        var subject: [String] = []
        if let recordName {
            subject.append("record '\(recordName)'" + (recordType.map { " (\($0))" } ?? ""))
        } else if let recordType {
            let article = recordType.first.map { "AEIOU".contains($0) } == true ? "an" : "a"
            subject.append("\(article) \(recordType) record")
        }
        if let field { subject.append("field '\(field)'") }
        return "\(position): \(subject.isEmpty ? "" : subject.joined(separator: ", ") + ": ")\(message)"
    }
}

/// A record read from an input, with where it came from.
public struct SourcedRecord: Sendable {
    /// The record as read. Changing it drops ``checked``: what the reader found was found of
    /// the record it read.
    public var record: Record {
        didSet { checked = nil }
    }
    public var position: SourcePosition
    /// The record's own bytes in the input, kept for a rejects file: a slice of a buffer the
    /// reader may share among the records of a batch (one allocation for many records, freed
    /// once, rather than one each — the records are freed on another thread than the reader's).
    public var rawBytes: ArraySlice<UInt8>?
    /// Finds a field of this record in the input, for messages about that field.
    public var locateField: (@Sendable (String) -> SourcePosition)?
    /// Set by a reader that checked the record's fields against its type's fields as it read
    /// them: a validator whose type has the same fields checks only the rest. Nil again once
    /// ``record`` changes.
    public var checked: CheckedFields?
    /// The input does not say the record's zone (a CSV file without the system columns): it is
    /// in the zone records that name none are given, which the import may have to check.
    public var namesNoZone = false
    /// Fields the reader gave the record itself, not the input (a calendar import's `--set`
    /// where the file says nothing of the field): a record the store holds with another value
    /// in one of them keeps its own, and the import counts it (`ImportSummary.keptOwnValues`).
    public var filledFields: [String] = []

    /// The record's own bytes, as an array of their own.
    public var raw: [UInt8]? {
        get { rawBytes.map { Array($0) } }
        set { rawBytes = newValue.map { $0[...] } }
    }

    public init(
        record: Record, position: SourcePosition, raw: [UInt8]? = nil,
        locateField: (@Sendable (String) -> SourcePosition)? = nil
    ) {
        self.record = record
        self.position = position
        self.rawBytes = raw.map { $0[...] }
        self.locateField = locateField
    }

    public init(
        record: Record, position: SourcePosition, rawBytes: ArraySlice<UInt8>?,
        locateField: (@Sendable (String) -> SourcePosition)? = nil
    ) {
        self.record = record
        self.position = position
        self.rawBytes = rawBytes
        self.locateField = locateField
    }

    public func position(ofField field: String?) -> SourcePosition {
        guard let field, let locateField else { return position }
        return locateField(field)
    }
}

/// What a reader yields: a record, or a record it could not read (which an import may skip).
public enum SourceItem: Sendable {
    case record(SourcedRecord)
    case invalid(InputIssue, raw: [UInt8]?)
    /// Asset bytes that travel beside the records (a bundle's `assets/<sha256>` members).
    case asset(StagedAsset)
}

/// Asset bytes a source carries, already checked against their SHA-256 and size, and kept in a
/// temporary file until the consumer stores them (and then removes the file).
public struct StagedAsset: Sendable {
    public var sha256: String
    public var size: Int64
    /// The bytes, set aside; nil when the source only checked them and kept nothing.
    public var bytes: (any StagedBytes)?
    /// Where the bytes came from, for messages (`family.ckbundle/assets/3f…`).
    public var origin: String

    public init(sha256: String, size: Int64, bytes: (any StagedBytes)?, origin: String) {
        self.sha256 = sha256
        self.size = size
        self.bytes = bytes
        self.origin = origin
    }

    /// Lets the bytes go.
    public func discard() {
        bytes?.discard()
    }
}

/// Bytes set aside for a while, to be read back (as often as needed) by another thread: an
/// asset on its way from a bundle or another store into a store. Implementations keep them
/// where no other user can read them, and nothing of them stays behind when they go.
public protocol StagedBytes: AnyObject, Sendable {
    /// How many bytes.
    var count: Int64 { get }
    /// Hands out the bytes in order, a piece at a time.
    func read(_ body: (UnsafeRawBufferPointer) throws -> Void) throws
    /// Lets the bytes go.
    func discard()
}

/// A reader of records: the source end of every pipeline.
///
/// `next()` returns items until the input ends (nil). A problem confined to one record comes
/// back as `.invalid`; a problem that stops the input from being read further is thrown.
public protocol RecordSource: AnyObject {
    func next() throws -> SourceItem?
    /// The name of the input in messages.
    var name: String { get }
    /// Bytes consumed so far and in all, for progress; nil when unknown (a pipe).
    var bytesRead: Int64 { get }
    var totalBytes: Int64? { get }
}

extension RecordSource {
    /// Remarks on what the source read but did not turn into records (skipped properties,
    /// rules it could not keep), for the import's summary.
    public var notes: [Message] { [] }
}

/// A source with remarks for the summary.
public protocol AnnotatedRecordSource: RecordSource {
    var notes: [Message] { get }
}

/// A source that can say what of its input it did not turn into records or fields (a
/// calendar's second alarm, an attendee's role): a strict import refuses when there is any.
public protocol LossReportingSource: RecordSource {
    /// Each item not kept, in words; empty when everything read was kept.
    var notKeptItems: [String] { get }
}

/// A source whose records are of record types it defines itself (a calendar archive), which
/// an import adds to the store's schema.
public protocol SchemaExtendingSource: RecordSource {
    var addedRecordTypes: [RecordTypeDefinition] { get }
}

/// A writer of records: the sink end of an export pipeline.
public protocol RecordSink: AnyObject {
    func write(_ record: Record) throws
    /// Completes the output. Until then nothing is in place: a failed export leaves no file.
    func finish() throws
    /// Abandons the output and removes what was written.
    func discard()
}

/// Receives records an import rejects (for `--rejects FILE`), with the reason.
public protocol RejectSink: AnyObject {
    func reject(_ issue: InputIssue, raw: [UInt8]?) throws
    /// Makes what was handed over so far durable (a file synced to disk): called before the
    /// transaction that left the records out commits, where that matters (a pull).
    func sync() throws
}

extension RejectSink {
    public func sync() throws {}
}

/// Records already in memory as a source: for programs that build records themselves, and
/// for tests.
public final class ArrayRecordSource: RecordSource {
    private var iterator: IndexingIterator<[Record]>
    private var index = 0
    public let name: String

    public init(_ records: [Record], name: String = "records") {
        iterator = records.makeIterator()
        self.name = name
    }

    public func next() throws -> SourceItem? {
        guard let record = iterator.next() else { return nil }
        index += 1
        return .record(SourcedRecord(record: record, position: SourcePosition(file: name, line: index)))
    }

    public var bytesRead: Int64 { 0 }
    public var totalBytes: Int64? { nil }
}
