import Records

extension RecordFormat {
    /// An XML property list (Apple's `PropertyList-1.0` DTD): an array with a dictionary per
    /// record, typed values as plist types. See ``PlistRecordWriter`` and
    /// ``PlistRecordReader``.
    public static let propertyList = RecordFormat(
        names: ["plist"], extensions: ["plist"], title: "property list",
        summary: "an XML plist array of record dictionaries", noun: "an XML property list",
        sniff: { head in
            var text = head[...]
            if text.starts(with: [0xEF, 0xBB, 0xBF]) { text = text.dropFirst(3) }
            let prefix = String(decoding: text.prefix(512), as: UTF8.self)
            return prefix.hasPrefix("<?xml") && (prefix.contains("<!DOCTYPE plist") || prefix.contains("<plist"))
        },
        makeReader: { input, context in
            let codec = JSONRecordCodec(
                schema: context.schema, readStyle: .plain, defaultRecordType: context.defaultRecordType,
                defaultZone: context.defaultZone, timeZone: context.timeZone)
            return try PlistRecordReader(input: try input.open(), codec: codec)
        },
        makeWriter: { output, _ in PlistRecordWriter(output: output) })
}
