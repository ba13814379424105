/// Many inputs read one after another as one source, each input's reader made when the one
/// before it is done and let go of then: thousands of small inputs (the events a calendar pull
/// fetched, one input each so that a message names the event) cost one reader's memory, not
/// thousands. Each record keeps its own input's position; the notes are every reader's.
///
/// The first reader is made at once, the others as the records are read, which for an import
/// is inside its transaction: a reader that looks something up in the store must do so once,
/// for the first (see `RecordReadContext.memo`).
public final class ChainedSource: AnnotatedRecordSource, LossReportingSource {
    public let name: String
    private var makers: IndexingIterator<[() throws -> RecordSource]>
    private var current: RecordSource?
    private var finishedNotes: [Message] = []
    private var finishedNotKept: [String] = []
    private var finishedBytes: Int64 = 0
    public let totalBytes: Int64?

    /// `makers` make the readers, in order; `totalBytes` is their inputs' size, when known.
    public init(name: String, makers: [() throws -> RecordSource], totalBytes: Int64? = nil) throws {
        self.name = name
        self.makers = makers.makeIterator()
        self.totalBytes = totalBytes
        current = try self.makers.next()?()
    }

    public func next() throws -> SourceItem? {
        while true {
            if current == nil {
                guard let make = makers.next() else { return nil }
                current = try make()
            }
            if let item = try current?.next() { return item }
            finish()
        }
    }

    private func finish() {
        guard let done = current else { return }
        finishedNotes += (done as? AnnotatedRecordSource)?.notes ?? []
        finishedNotKept += (done as? LossReportingSource)?.notKeptItems ?? []
        finishedBytes += done.bytesRead
        current = nil
    }

    public var bytesRead: Int64 { finishedBytes + (current?.bytesRead ?? 0) }
    public var notes: [Message] { finishedNotes + ((current as? AnnotatedRecordSource)?.notes ?? []) }
    public var notKeptItems: [String] {
        finishedNotKept + ((current as? LossReportingSource)?.notKeptItems ?? [])
    }
}
