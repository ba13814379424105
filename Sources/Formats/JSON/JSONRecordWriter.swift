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
public final class RejectsWriter: RejectSink {
    private let output: OutputFile
    public private(set) var count = 0

    public init(output: OutputFile) {
        self.output = output
    }

    public func reject(_ issue: InputIssue, raw: [UInt8]?) throws {
        var out = JSONWriter(capacity: 512)
        out.raw("{\"error\":")
        out.string(issue.message)
        out.raw(",\"position\":")
        out.string(issue.position.description)
        if let field = issue.field { out.raw(",\"field\":"); out.string(field) }
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
        try output.write(out.bytes)
        count += 1
    }

    public func finish() throws { try output.commit() }
    public func discard() { output.discard() }
}
