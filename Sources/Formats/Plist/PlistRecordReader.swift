import Foundation
import Records

/// Reads records from an XML property list: an `<array>` of `<dict>`s, each a record in the
/// plain style's keys (as ``PlistRecordWriter`` writes them, or as any program that writes
/// plists does), streaming — one record's dictionary in memory at a time.
///
/// Values are typed by the schema first: a TIMESTAMP field takes a `<date>`, ISO-8601
/// `<string>` or milliseconds as `<integer>`; an INT64 field takes `<integer>`, `<true/>` or
/// `<false/>` (1 and 0). A field the schema lacks (with `--allow-new-fields`) takes its type
/// from its element: `<string>` STRING, `<integer>` and booleans INT64, `<real>` DOUBLE,
/// `<date>` TIMESTAMP, `<data>` BYTES, a `<dict>` with `recordName` REFERENCE, with
/// `latitude` and `longitude` LOCATION, an `<array>` a list of its elements' type.
///
/// The XML is read as hostile input (see ``XMLReader``): no DTD is loaded (the plist DOCTYPE
/// is only a name), no entity is expanded, depth and size are limited.
public final class PlistRecordReader: RecordSource {
    private let input: ByteInput
    private let xml: XMLReader
    private let codec: JSONRecordCodec
    private var started = false
    private var finished = false
    private var index = 0

    public init(input: ByteInput, codec: JSONRecordCodec, limits: XMLReader.Limits = XMLReader.Limits()) throws {
        self.input = input
        self.codec = codec
        var limits = limits
        limits.keepsWhitespace = true
        xml = try XMLReader(input: input, limits: limits)
    }

    public var name: String { input.name }
    public var bytesRead: Int64 { input.bytesRead }
    public var totalBytes: Int64? { input.totalBytes }

    private func fail(_ message: Message) -> XMLInputError {
        XMLInputError(file: input.name, line: xml.line, column: 0, message: message)
    }

    /// The next event that is not white space between elements.
    private func nextMarkup(in context: String) throws -> XMLReader.Event? {
        while let event = try xml.next() {
            if case .text(let text) = event {
                guard XMLReader.isWhitespace(text) else {
                    throw fail("text \"\(text.prefix(40))\" \(context), where a property list has only elements")
                }
                continue
            }
            return event
        }
        return nil
    }

    public func next() throws -> SourceItem? {
        if finished { return nil }
        if !started {
            started = true
            try openArray()
            if finished { return nil }
        }
        guard let event = try nextMarkup(in: "between records") else {
            throw fail("the file ends inside the array of records (</array></plist> is missing)")
        }
        switch event {
        case .start("dict", _):
            return try record()
        case .end("array"):
            try closeDocument()
            return nil
        case .start(let element, _):
            throw fail("expected a <dict> for each record, found <\(element)>")
        default:
            throw fail("expected a <dict> for each record")
        }
    }

    /// Reads up to the records' `<array>`; an empty array finishes at once.
    private func openArray() throws {
        var event = try nextMarkup(in: "before the records")
        if case .start("plist", _)? = event { event = try nextMarkup(in: "before the records") }
        switch event {
        case .start("array", _)?:
            return
        case .start("dict", _)?:
            throw fail(
                "the property list is one dictionary; ckport reads records from an <array> of <dict>s, one per record")
        case .start(let element, _)?:
            throw fail("expected an <array> of records, found <\(element)>")
        default:
            throw fail("expected <plist> with an <array> of records; the file holds none")
        }
    }

    private func closeDocument() throws {
        finished = true
        while let event = try nextMarkup(in: "after the records") {
            if case .end("plist") = event { continue }
            if case .start(let element, _) = event {
                throw fail("<\(element)> after the array of records; a property list holds one top-level value")
            }
            throw fail("unexpected content after the array of records")
        }
    }

    // MARK: Records

    private func record() throws -> SourceItem {
        index += 1
        let line = xml.line
        var keyLines: [String: Int] = [:]
        var hints: [String: FieldType] = [:]
        let object = try dictionary(keyLines: &keyLines, hints: &hints)
        let json = JSONValue.object(object)
        let file = input.name
        let position = SourcePosition(file: file, line: line, path: "record \(index)")
        do {
            let record = try codec.decode(json, typeHints: hints)
            let lines = keyLines
            return .record(
                SourcedRecord(
                    record: record, position: position, raw: nil,
                    locateField: { field in
                        SourcePosition(file: file, line: lines[field] ?? line)
                    }))
        } catch {
            var out = JSONWriter(capacity: 256)
            out.value(json)
            let place =
                error.field.flatMap { keyLines[$0] } ?? error.path.first.flatMap {
                    if case .key(let k) = $0 { keyLines[k] } else { nil }
                } ?? line
            return .invalid(
                InputIssue(
                    position: SourcePosition(file: file, line: place), recordName: error.recordName,
                    recordType: error.recordType,
                    field: error.field, message: error.message), raw: out.bytes)
        }
    }

    /// A `<dict>`'s keys and values, after its start: keys in order, a key given twice
    /// refused. For the record's own dictionary, `keyLines` and `hints` collect each key's
    /// line and the type its element shows.
    private func dictionary(keyLines: inout [String: Int], hints: inout [String: FieldType], topLevel: Bool = true)
        throws -> JSONObject
    {
        var members: [JSONObject.Member] = []
        var seen = Set<String>()
        while true {
            guard let event = try nextMarkup(in: "inside a <dict>") else { throw fail("the file ends inside a <dict>") }
            switch event {
            case .end("dict"):
                return JSONObject(members)
            case .start("key", _):
                let keyLine = xml.line
                let key = try scalarText("key")
                guard seen.insert(key).inserted else {
                    throw fail(
                        "the key \"\(key)\" appears twice in one <dict>; ckport refuses a key given twice, since the last one would silently win"
                    )
                }
                guard case .start(let element, _)? = try nextMarkup(in: "after <key>\(key)</key>") else {
                    throw fail("<key>\(key)</key> has no value after it")
                }
                let (value, hint) = try self.value(element, in: key)
                members.append(JSONObject.Member(key: key, value: value))
                if topLevel {
                    keyLines[key] = keyLine
                    if let hint { hints[key] = hint }
                }
            case .start(let element, _):
                throw fail("expected <key> in a <dict>, found <\(element)>")
            default:
                throw fail("expected <key> or </dict>")
            }
        }
    }

    /// The text of a scalar element up to its end; elements inside it are refused.
    private func scalarText(_ element: String) throws -> String {
        var text = ""
        while let event = try xml.next() {
            switch event {
            case .text(let part): text += part
            case .end: return text
            case .start(let inner, _): throw fail("<\(inner)> inside <\(element)>, which holds only text")
            }
        }
        throw fail("the file ends inside <\(element)>")
    }

    /// A value element (after its start) as JSON, with the field type its element alone says
    /// where JSON cannot say it (a date, data, or a list of them).
    private func value(_ element: String, in key: String) throws -> (JSONValue, FieldType?) {
        switch element {
        case "string":
            return (.string(try scalarText(element)), nil)
        case "integer":
            let text = XMLReader.trimmed(try scalarText(element))
            guard PlistRecordReader.isInteger(text) else {
                throw fail("<integer>\(text.prefix(40))</integer> of \"\(key)\" is not a whole number")
            }
            return (.number(text.hasPrefix("+") ? String(text.dropFirst()) : text), nil)
        case "real":
            let text = XMLReader.trimmed(try scalarText(element))
            guard let number = Double(text) else {
                throw fail("<real>\(text.prefix(40))</real> of \"\(key)\" is not a number")
            }
            guard number.isFinite else {
                throw fail("<real>\(text)</real> of \"\(key)\": CloudKit's DOUBLE holds finite numbers only")
            }
            return (.number(number.description), nil)
        case "true", "false":
            guard XMLReader.isWhitespace(try scalarText(element)) else {
                throw fail("<\(element)/> of \"\(key)\" holds text")
            }
            return (.number(element == "true" ? "1" : "0"), nil)
        case "date":
            let text = XMLReader.trimmed(try scalarText(element))
            guard ISO8601.parse(text, timeZone: TimeZone(identifier: "UTC")) != nil else {
                throw fail("<date>\(text.prefix(40))</date> of \"\(key)\" is not a date (YYYY-MM-DDTHH:MM:SSZ)")
            }
            return (.string(text), .timestamp)
        case "data":
            let text = String(
                decoding: try scalarText(element).utf8.filter { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D },
                as: UTF8.self)
            guard Base64.decode(text) != nil else { throw fail("<data> of \"\(key)\" is not base64") }
            return (.string(text), .bytes)
        case "array":
            var elements: [JSONValue] = []
            var hints: [FieldType?] = []
            while true {
                guard let event = try nextMarkup(in: "inside an <array>") else {
                    throw fail("the file ends inside an <array>")
                }
                if case .end("array") = event { break }
                guard case .start(let inner, _) = event else { throw fail("expected a value in an <array>") }
                let (value, hint) = try self.value(inner, in: key)
                elements.append(value)
                hints.append(hint)
            }
            var listHint: FieldType?
            if let first = hints.first, let first, hints.allSatisfy({ $0 == first }) {
                listHint = first
                listHint?.isList = true
            }
            return (.array(elements), listHint)
        case "dict":
            var ignoredLines: [String: Int] = [:]
            var ignoredHints: [String: FieldType] = [:]
            return (.object(try dictionary(keyLines: &ignoredLines, hints: &ignoredHints, topLevel: false)), nil)
        default:
            throw fail(
                "<\(element)> is not a property list value (string, integer, real, true, false, date, data, array, dict)"
            )
        }
    }

    private static func isInteger(_ text: String) -> Bool {
        var digits = Substring(text)
        if digits.first == "-" || digits.first == "+" { digits = digits.dropFirst() }
        return !digits.isEmpty && digits.allSatisfy { $0.isASCII && $0.isNumber }
    }
}
