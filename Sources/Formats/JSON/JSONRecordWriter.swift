import Foundation
import Records

/// Writes records as JSON Lines or as a `{"records": [ … ]}` document, one record per line
/// either way, streaming.
public final class JSONRecordWriter: RecordSink {
    private let output: OutputFile
    private let codec: JSONRecordCodec
    private let style: ValueStyle
    private let layout: JSONRecordReader.Layout
    private var buffer = JSONWriter(capacity: 1 << 16)
    private var count = 0
    private var started = false

    public init(output: OutputFile, layout: JSONRecordReader.Layout, style: ValueStyle, schema: Schema) {
        self.output = output
        self.layout = layout
        self.style = style
        codec = JSONRecordCodec(schema: schema)
    }

    public var recordsWritten: Int { count }

    public func write(_ record: Record) throws {
        if layout == .document {
            buffer.raw(count == 0 ? "{\"records\":[\n" : ",\n")
        }
        codec.encode(record, style: style, to: &buffer)
        if layout == .lines { buffer.byte(0x0A) }
        count += 1
        if buffer.bytes.count >= 1 << 18 {
            try output.write(buffer.bytes)
            buffer.bytes.removeAll(keepingCapacity: true)
        }
    }

    public func finish() throws {
        if layout == .document { buffer.raw(count == 0 ? "{\"records\":[]}\n" : "\n]}\n") }
        try output.write(buffer.bytes)
        buffer.bytes.removeAll()
        try output.commit()
    }

    public func discard() {
        output.discard()
    }
}

/// Writes rejected records as JSON Lines: `{"error": "…", "position": "file:line:col",
/// "record": <the record as it was read>}`, so they can be fixed and imported again.
/// Rejected records appended to a file as they are decided on, each line synced to disk by
/// ``sync()`` (before the pull that left them out commits its page): nothing is lost if the
/// process is killed, and a file named again (a nightly run) grows. Made for the owner alone:
/// it holds whole records.
public final class AppendingRejectsWriter: RejectSink {
    public let path: String
    private let words: (Wording) -> String?
    private var fd: Int32 = -1
    private var pending: [UInt8] = []
    public private(set) var count = 0

    /// The file is opened (and made, if need be) with the first record it keeps: a run that
    /// leaves nothing out writes nothing. A folder that does not exist is refused at once.
    /// Each line's error is said with `words` (a front end's), else in the library's.
    public init(path: String, words: @escaping (Wording) -> String? = { _ in nil }) throws {
        self.path = path
        self.words = words
        let folder = (path as NSString).deletingLastPathComponent
        guard folder.isEmpty || FileManager.default.fileExists(atPath: folder) else {
            throw OutputError(path: path, message: "its folder \(folder) does not exist")
        }
    }

    deinit { if fd >= 0 { close(fd) } }

    public func reject(_ issue: InputIssue, raw: [UInt8]?) throws {
        pending += RejectsWriter.line(issue, raw: raw, words: words)
        count += 1
    }

    public func sync() throws {
        guard !pending.isEmpty else { return }
        if fd < 0 {
            fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                throw OutputError(path: path, message: "cannot open for appending: \(String(cString: strerror(errno)))")
            }
        }
        try pending.withUnsafeBytes { bytes in
            var written = 0
            while written < bytes.count {
                let n = Foundation.write(fd, bytes.baseAddress! + written, bytes.count - written)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    throw OutputError(path: path, message: "write failed: \(String(cString: strerror(errno)))")
                }
                written += n
            }
        }
        pending.removeAll(keepingCapacity: true)
        guard fsync(fd) == 0 else {
            throw OutputError(path: path, message: "sync failed: \(String(cString: strerror(errno)))")
        }
    }
}

public final class RejectsWriter: RejectSink {
    private let output: OutputFile
    private let words: (Wording) -> String?
    public private(set) var count = 0

    /// Each line's error is said with `words` (a front end's), else in the library's.
    public init(output: OutputFile, words: @escaping (Wording) -> String? = { _ in nil }) {
        self.output = output
        self.words = words
    }

    public func reject(_ issue: InputIssue, raw: [UInt8]?) throws {
        try output.write(RejectsWriter.line(issue, raw: raw, words: words))
        count += 1
    }

    /// A rejects file's line: `{"error": …, "position": …, "field": …, "record": {…}}`.
    static func line(_ issue: InputIssue, raw: [UInt8]?, words: (Wording) -> String?) -> [UInt8] {
        var out = JSONWriter(capacity: 512)
        out.raw("{\"error\":")
        out.string(issue.message.worded(words))
        out.raw(",\"position\":")
        out.string(issue.position.description)
        if let field = issue.field {
            out.raw(",\"field\":")
            out.string(field)
        }
        if let raw {
            if (try? JSONParser.parse(raw)) != nil {
                out.raw(",\"record\":")
                out.bytes.append(contentsOf: raw.filter { $0 != 0x0A && $0 != 0x0D })
            } else {
                out.raw(",\"text\":")
                out.string(String(decoding: raw, as: UTF8.self))
            }
        }
        out.raw("}\n")
        return out.bytes
    }

    public func finish() throws { try output.commit() }
    public func discard() { output.discard() }
}
