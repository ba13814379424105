import Records

/// How JSON records are read: in CloudKit Web Services' shape, plain, or whichever each
/// record is in.
public struct JSONReadSettings: Sendable {
    /// Nil: each record's shape is detected.
    public var style: ValueStyle?
    public init(style: ValueStyle? = nil) { self.style = style }
}

/// How JSON records are written.
public struct JSONWriteSettings: Sendable {
    public var style: ValueStyle
    public init(style: ValueStyle = .canonical) { self.style = style }
}

extension RecordFormat {
    /// A JSON document: `{"records": [ … ]}` as CloudKit's records/query returns it, or an array.
    public static let json = RecordFormat(
        names: ["json"], extensions: ["json"], title: "JSON", summary: "a document of records", noun: "JSON",
        sniff: { head in
            let first = Sniffing.firstSignificantByte(head)
            if first == UInt8(ascii: "[") { return true }
            // An object that does not end on its first line is a document, not JSON Lines.
            return first == UInt8(ascii: "{")
                && Sniffing.firstLine(head).last(where: { $0 != 0x20 && $0 != 0x09 }) != UInt8(ascii: "}")
        },
        makeReader: { input, context in try JSONFormatSupport.reader(input, context, layout: .document) },
        makeWriter: { output, context in JSONFormatSupport.writer(output, context, layout: .document) })

    /// JSON Lines: one record object per line.
    public static let jsonLines = RecordFormat(
        names: ["jsonl", "ndjson"], extensions: ["jsonl", "ndjson"], title: "JSON Lines", summary: "a record per line",
        noun: "JSON",
        sniff: { head in
            Sniffing.firstSignificantByte(head) == UInt8(ascii: "{")
                && Sniffing.firstLine(head).last(where: { $0 != 0x20 && $0 != 0x09 }) == UInt8(ascii: "}")
        },
        makeReader: { input, context in try JSONFormatSupport.reader(input, context, layout: .lines) },
        makeWriter: { output, context in JSONFormatSupport.writer(output, context, layout: .lines) })

    /// JSON whose layout — a document or a record per line — is told by its first bytes: what
    /// an input is read as when neither a format nor its name says otherwise. Not in
    /// ``RecordFormats/all``: it is a way of reading the two formats above.
    public static let jsonDetectingLayout = RecordFormat(
        names: ["json-detected"], extensions: [], title: "JSON",
        summary: "a document or a record per line, told by the first bytes", noun: "JSON",
        sniff: { head in RecordFormat.json.sniff(head) || RecordFormat.jsonLines.sniff(head) },
        makeReader: { input, context in try JSONFormatSupport.reader(input, context, layout: nil) },
        makeWriter: nil)
}

enum JSONFormatSupport {
    static func codec(_ context: RecordReadContext) -> JSONRecordCodec {
        JSONRecordCodec(
            schema: context.schema, readStyle: context.settings[JSONReadSettings.self]?.style,
            defaultRecordType: context.defaultRecordType, defaultZone: context.defaultZone, timeZone: context.timeZone)
    }

    static func reader(_ input: RecordInput, _ context: RecordReadContext, layout: JSONRecordReader.Layout?) throws
        -> RecordSource
    {
        JSONRecordReader(input: try input.open(), layout: layout, codec: codec(context))
    }

    static func writer(_ output: OutputFile, _ context: RecordWriteContext, layout: JSONRecordReader.Layout)
        -> RecordSink
    {
        JSONRecordWriter(
            output: output, layout: layout,
            style: context.settings.get(JSONWriteSettings.self, default: JSONWriteSettings()).style,
            schema: context.schema)
    }
}
