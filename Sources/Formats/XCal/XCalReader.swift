import Foundation
import Records
import Synchronization

/// Which line of an xCal file each line of the iCalendar text made from it came from, for the
/// most recent lines (a window of a million): what a message about a component or property
/// points at.
final class XCalLineMap: Sendable {
    private static let window = 1 << 20
    /// The window, and how many iCalendar lines were made so far: the reader adds lines as it
    /// converts, while a record's `locateField` (which may travel to another thread) looks.
    private let lines = Mutex<(xmlLines: [Int32], count: Int)>(([Int32](repeating: 0, count: XCalLineMap.window), 0))

    /// iCalendar lines made so far.
    var count: Int { lines.withLock { $0.count } }

    func add(xmlLine: Int) {
        lines.withLock { lines in
            lines.xmlLines[lines.count & (XCalLineMap.window - 1)] = Int32(clamping: xmlLine)
            lines.count += 1
        }
    }

    /// The xCal line of iCalendar line `line` (1-based), when still in the window.
    func xmlLine(of line: Int) -> Int? {
        lines.withLock { lines in
            guard line >= 1, line <= lines.count, lines.count - line < XCalLineMap.window else { return nil }
            let value = Int(lines.xmlLines[(line - 1) & (XCalLineMap.window - 1)])
            return value > 0 ? value : nil
        }
    }
}

/// Turns xCal (RFC 6321) into iCalendar text as it is read, for the iCalendar reader and its
/// mappings: an element per component becomes BEGIN/END lines, an element per property one
/// content line with its parameters and its values in iCalendar's notation (text escaped,
/// `2026-03-03T18:45:00` as `20260303T184500`, `<recur>` parts as `FREQ=…;BYDAY=…`), and
/// `VALUE=` where a value's type is not the property's default. Memory holds one property
/// at a time.
///
/// Elements of other namespaces inside a calendar are left out (and reported as not kept);
/// anything else xCal does not define is refused with its file, line and column.
final class XCalToICalendar {
    private let xml: XMLReader
    private let input: ByteInput
    private let lines: XCalLineMap
    private var pending: [UInt8] = []
    private var finished = false
    private var started = false

    /// What the reader is inside.
    private enum Context {
        case icalendar
        case component(String)
        case properties
        case components
    }
    private var stack: [Context] = []

    /// Elements of other namespaces that were left out, by name, with how often.
    private(set) var skipped: [String: Int] = [:]

    init(input: ByteInput, lines: XCalLineMap) throws {
        self.input = input
        self.lines = lines
        xml = try XMLReader(input: input, limits: XMLReader.Limits(keepsWhitespace: true))
    }

    var bytesRead: Int64 { input.bytesRead }
    var totalBytes: Int64? { input.totalBytes }

    /// Fills `buffer` with the next iCalendar bytes; 0 at the end.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        while pending.count < buffer.count && !finished {
            try step()
        }
        let n = min(buffer.count, pending.count)
        guard n > 0 else { return 0 }
        pending.withUnsafeBytes { source in
            buffer.baseAddress!.copyMemory(from: source.baseAddress!, byteCount: n)
        }
        // What is left (the start of a line) moves to the front: the text held is one read's
        // worth and a property, however long the file.
        pending.removeSubrange(0..<n)
        return n
    }

    /// iCalendar text made and not yet read.
    var bufferedBytes: Int { pending.count }

    private func fail(_ message: Message) -> XMLInputError {
        XMLInputError(file: input.name, line: xml.line, column: 0, message: message)
    }

    private func emit(_ line: String, xmlLine: Int) {
        pending.append(contentsOf: line.utf8)
        pending.append(0x0D)
        pending.append(0x0A)
        lines.add(xmlLine: xmlLine)
    }

    /// The next event that is not white space between elements.
    private func nextMarkup(inside element: String) throws -> XMLReader.Event? {
        while let event = try xml.next() {
            if case .text(let text) = event {
                guard XMLReader.isWhitespace(text) else {
                    throw fail("text \"\(text.prefix(40))\" directly inside <\(element)>, where xCal has only elements")
                }
                continue
            }
            return event
        }
        return nil
    }

    private var isXCal: Bool { xml.isInNamespace(XCalValue.namespace) }

    /// Skips the element just started, whatever it holds.
    private func skipElement() throws {
        var depth = 1
        while depth > 0, let event = try xml.next() {
            switch event {
            case .start: depth += 1
            case .end: depth -= 1
            case .text: continue
            }
        }
    }

    private func noteSkipped(_ name: String) throws {
        skipped["<\(name)> (\(xml.namespaceURI ?? "no namespace"))", default: 0] += 1
        try skipElement()
    }

    /// Reads one structural step: a component's start or end, or a whole property.
    private func step() throws {
        let here = stack.last
        let inside: String
        switch here {
        case nil: inside = started ? "the document" : "the document"
        case .icalendar: inside = "icalendar"
        case .component(let name): inside = name.lowercased()
        case .properties: inside = "properties"
        case .components: inside = "components"
        }
        guard let event = try nextMarkup(inside: inside) else {
            if stack.isEmpty && started {
                finished = true
                return
            }
            throw fail(started ? "the file ends inside <\(inside)>" : "the file holds no <icalendar> element")
        }
        switch (here, event) {
        case (nil, .start(_, _)):
            guard !started else { throw fail("a second top-level element <\(xml.localName)>") }
            guard xml.localName == "icalendar", isXCal else {
                throw fail(
                    "expected <icalendar xmlns=\"\(String(describing: XCalValue.namespace))\">, found <\(xml.localName)>"
                        + (xml.namespaceURI.map { " in namespace \($0)" } ?? " without xCal's namespace"))
            }
            started = true
            stack.append(.icalendar)
        case (.icalendar, .start(_, _)):
            guard isXCal else { return try noteSkipped(xml.localName) }
            guard xml.localName == "vcalendar" else {
                throw fail("expected <vcalendar> inside <icalendar>, found <\(xml.localName)>")
            }
            emit("BEGIN:VCALENDAR", xmlLine: xml.line)
            stack.append(.component("VCALENDAR"))
        case (.component, .start(_, _)):
            guard isXCal else { return try noteSkipped(xml.localName) }
            switch xml.localName {
            case "properties": stack.append(.properties)
            case "components": stack.append(.components)
            default: throw fail("expected <properties> or <components> inside a component, found <\(xml.localName)>")
            }
        case (.components, .start(_, _)):
            guard isXCal else { return try noteSkipped(xml.localName) }
            let name = xml.localName.uppercased()
            emit("BEGIN:" + name, xmlLine: xml.line)
            stack.append(.component(name))
        case (.properties, .start(_, _)):
            let element = xml.localName
            guard isXCal else { return try noteSkipped(element) }
            let line = xml.line
            emit(try property(element), xmlLine: line)
        case (.component(let name), .end):
            emit("END:" + name, xmlLine: xml.line)
            stack.removeLast()
        case (.some, .end):
            stack.removeLast()
        default:
            throw fail("unexpected content inside <\(inside)>")
        }
    }

    // MARK: Properties

    /// One value element's type and its text in iCalendar's notation.
    private struct Value {
        var type: XCalValue
        var text: String
    }

    /// Reads a property element (after its start) and gives its content line.
    private func property(_ element: String) throws -> String {
        let name = element.uppercased()
        var parameters: [(String, [String])] = []
        var values: [Value] = []
        var parts: [String: String] = [:]
        while true {
            guard let event = try nextMarkup(inside: element) else { throw fail("the file ends inside <\(element)>") }
            switch event {
            case .end:
                return try contentLine(name, parameters: parameters, values: values, parts: parts)
            case .start:
                guard isXCal else {
                    try noteSkipped(xml.localName)
                    continue
                }
                let inner = xml.localName
                if let type = XCalValue.named(inner), type != .period, type != .recur {
                    values.append(Value(type: type, text: try scalar(type, text: try text(of: inner))))
                } else if inner == "parameters" {
                    guard parameters.isEmpty else { throw fail("<\(element)> has a second <parameters>") }
                    parameters = try self.parameters(of: element)
                } else if ["latitude", "longitude", "code", "description", "data"].contains(inner) {
                    guard parts[inner] == nil else { throw fail("<\(inner)> appears twice in <\(element)>") }
                    parts[inner] = try text(of: inner)
                } else if inner == "period" {
                    values.append(Value(type: .period, text: try period()))
                } else if inner == "recur" {
                    values.append(Value(type: .recur, text: try recur()))
                } else {
                    throw fail(
                        "<\(inner)> is not an xCal value type (text, date, date-time, duration, period, recur, utc-offset, integer, float, boolean, uri, cal-address, binary, time, unknown)"
                    )
                }
            case .text:
                continue
            }
        }
    }

    /// The text of an element that holds only text.
    private func text(of element: String) throws -> String {
        var text = ""
        while let event = try xml.next() {
            switch event {
            case .text(let part): text += part
            case .end: return text
            case .start: throw fail("<\(xml.localName)> inside <\(element)>, which holds only text")
            }
        }
        throw fail("the file ends inside <\(element)>")
    }

    /// A value of a simple type in iCalendar's notation.
    private func scalar(_ type: XCalValue, text: String) throws -> String {
        func converted(_ value: String?) throws -> String {
            guard let value else {
                throw fail("<\(type.rawValue)>\(text.prefix(40))</\(type.rawValue)> is not a valid \(type.rawValue)")
            }
            return value
        }
        switch type {
        case .date: return try converted(XCalValue.iCalDate(text))
        case .dateTime: return try converted(XCalValue.iCalDateTime(text))
        case .time: return try converted(XCalValue.iCalTime(Substring(text)))
        case .utcOffset: return try converted(XCalValue.iCalOffset(text))
        case .boolean:
            switch XMLReader.trimmed(text) {
            case "true", "1": return "TRUE"
            case "false", "0": return "FALSE"
            default: throw fail("<boolean>\(text.prefix(20))</boolean> is not true or false")
            }
        case .text: return text
        default:
            guard !text.contains(where: { $0 == "\n" || $0 == "\r" }) else {
                throw fail("a line break inside <\(type.rawValue)>, which iCalendar cannot hold there")
            }
            return text
        }
    }

    private func period() throws -> String {
        var start: String?
        var end: String?
        while true {
            guard let event = try nextMarkup(inside: "period") else { throw fail("the file ends inside <period>") }
            switch event {
            case .end:
                guard let start, let end else { throw fail("<period> needs <start> and <end> or <duration>") }
                return start + "/" + end
            case .start:
                let inner = xml.localName
                let value = try text(of: inner)
                switch inner {
                case "start":
                    start = try XCalValue.iCalDateTime(value).orFail {
                        fail("<start>\(value)</start> is not a date-time")
                    }
                case "end":
                    end = try XCalValue.iCalDateTime(value).orFail { fail("<end>\(value)</end> is not a date-time") }
                case "duration": end = value
                default: throw fail("<\(inner)> in <period> (start, end, duration)")
                }
            case .text:
                continue
            }
        }
    }

    private func recur() throws -> String {
        var parts: [String: [String]] = [:]
        while true {
            guard let event = try nextMarkup(inside: "recur") else { throw fail("the file ends inside <recur>") }
            switch event {
            case .end:
                guard parts["FREQ"] != nil else { throw fail("<recur> needs <freq>") }
                return XCalValue.recurParts.compactMap { key in parts[key].map { "\(key)=\($0.joined(separator: ","))" }
                }.joined(separator: ";")
            case .start:
                let element = xml.localName
                let key = element.uppercased()
                guard XCalValue.recurParts.contains(key) else { throw fail("<\(element)> is not a part of <recur>") }
                var value = XMLReader.trimmed(try text(of: element))
                if key == "UNTIL" {
                    value = try XCalValue.iCalDateOrDateTime(value).orFail {
                        fail("<until>\(value)</until> is neither a date nor a date-time")
                    }
                }
                guard !value.contains(where: { $0 == ";" || $0 == "," || $0 == "\n" }) else {
                    throw fail("<\(key.lowercased())>\(value)</\(key.lowercased())> holds a separator")
                }
                guard parts[key] == nil || XCalValue.recurListParts.contains(key) else {
                    throw fail("<\(key.lowercased())> appears twice in <recur>")
                }
                parts[key, default: []].append(value)
            case .text:
                continue
            }
        }
    }

    /// `<parameters>`' parameters, each with its values in iCalendar's notation.
    private func parameters(of element: String) throws -> [(String, [String])] {
        var result: [(String, [String])] = []
        while true {
            guard let event = try nextMarkup(inside: "parameters") else {
                throw fail("the file ends inside <parameters>")
            }
            switch event {
            case .end:
                return result
            case .start:
                guard isXCal else {
                    try noteSkipped(xml.localName)
                    continue
                }
                let name = xml.localName
                var values: [String] = []
                while true {
                    guard let inner = try nextMarkup(inside: name) else { throw fail("the file ends inside <\(name)>") }
                    if case .end = inner { break }
                    let valueElement = xml.localName
                    guard case .start = inner, let type = XCalValue.named(valueElement) else {
                        throw fail(
                            "a parameter's value is a typed element such as <text>, found <\(valueElement)> in <\(name)>"
                        )
                    }
                    values.append(try scalar(type, text: try text(of: valueElement)))
                }
                guard !values.isEmpty else { throw fail("parameter <\(name)> has no value") }
                for value in values where value.contains(where: { $0 == "\"" || $0 == "\n" || $0 == "\r" }) {
                    throw fail(
                        "parameter <\(name)>'s value holds a quote or a line break, which iCalendar parameters cannot hold"
                    )
                }
                result.append((name.uppercased(), values))
            case .text:
                continue
            }
        }
    }

    /// The content line of a property read from xCal.
    private func contentLine(_ name: String, parameters: [(String, [String])], values: [Value], parts: [String: String])
        throws -> String
    {
        var value: String
        var parameters = parameters
        if name == "GEO" && values.isEmpty {
            guard let latitude = parts["latitude"], let longitude = parts["longitude"], Double(latitude) != nil,
                Double(longitude) != nil
            else {
                throw fail("<geo> needs <latitude> and <longitude> numbers")
            }
            value = latitude + ";" + longitude
        } else if name == "REQUEST-STATUS" && values.isEmpty {
            guard let code = parts["code"], let description = parts["description"] else {
                throw fail("<request-status> needs <code> and <description>")
            }
            value = code + ";" + ICalText.escape(description)
            if let data = parts["data"] { value += ";" + ICalText.escape(data) }
        } else {
            guard parts.isEmpty else {
                throw fail(
                    "<\(parts.keys.sorted()[0])> belongs to <geo> or <request-status>, not <\(name.lowercased())>")
            }
            guard let type = values.first?.type else { throw fail("<\(name.lowercased())> has no value") }
            guard values.allSatisfy({ $0.type == type }) else {
                throw fail("<\(name.lowercased())> holds values of different types")
            }
            let texts = values.map { type == .text ? ICalText.escape($0.text) : $0.text }
            guard values.count == 1 || XCalValue.listProperties.contains(name) || XCalValue.defaultType(of: name) == nil
            else {
                throw fail("<\(name.lowercased())> holds \(values.count) values; iCalendar's \(name) holds one")
            }
            value = texts.joined(separator: ",")
            if type == .unknown {
                guard !value.contains(where: { $0 == "\n" || $0 == "\r" }) else {
                    throw fail("a line break inside <unknown>, which iCalendar cannot hold")
                }
            } else if type != (XCalValue.defaultType(of: name) ?? .text), let typeName = type.iCalendarName {
                parameters.removeAll { $0.0 == "VALUE" }
                parameters.append(("VALUE", [typeName]))
            }
        }
        var line = name
        for (parameter, values) in parameters {
            line += ";" + parameter + "="
            line += values.map { $0.contains(where: { $0 == ":" || $0 == ";" || $0 == "," }) ? "\"\($0)\"" : $0 }
                .joined(separator: ",")
        }
        return line + ":" + value
    }
}

extension Optional {
    fileprivate func orFail(_ error: () -> Error) throws -> Wrapped {
        guard let self else { throw error() }
        return self
    }
}

/// The iCalendar reader over an xCal file: its records, with every position turned back
/// into the xCal file's line.
final class XCalRecordSource: AnnotatedRecordSource, LossReportingSource, SchemaExtendingSource {
    private let inner: RecordSource
    private let lines: XCalLineMap
    private let converter: () -> XCalToICalendar?

    init(inner: RecordSource, lines: XCalLineMap, converter: @escaping () -> XCalToICalendar?) {
        self.inner = inner
        self.lines = lines
        self.converter = converter
    }

    var name: String { inner.name }
    var bytesRead: Int64 { converter()?.bytesRead ?? 0 }
    var totalBytes: Int64? { converter()?.totalBytes }

    private func mapped(_ position: SourcePosition) -> SourcePosition {
        var position = position
        position.line = position.line.flatMap { lines.xmlLine(of: $0) }
        position.column = nil
        return position
    }

    func next() throws -> SourceItem? {
        do {
            switch try inner.next() {
            case .record(var sourced)?:
                sourced.position = mapped(sourced.position)
                if let locate = sourced.locateField {
                    let lines = self.lines
                    sourced.locateField = { field in
                        var position = locate(field)
                        position.line = position.line.flatMap { lines.xmlLine(of: $0) }
                        return position
                    }
                }
                return .record(sourced)
            case .invalid(var issue, let raw)?:
                issue.position = mapped(issue.position)
                return .invalid(issue, raw: raw)
            case let other:
                return other
            }
        } catch var issue as InputIssue {
            issue.position = mapped(issue.position)
            throw issue
        }
    }

    var notes: [Message] {
        var notes = (inner as? AnnotatedRecordSource)?.notes ?? []
        if let skipped = converter()?.skipped, !skipped.isEmpty {
            let elements = skipped.keys.sorted().map { "\($0) ×\(skipped[$0]!)" }.joined(separator: ", ")
            notes.append("left out elements of other namespaces: \(elements)")
        }
        return notes
    }

    var notKeptItems: [String] {
        var items = (inner as? LossReportingSource)?.notKeptItems ?? []
        if let skipped = converter()?.skipped {
            items += skipped.keys.sorted().map { "\($0), an element of another namespace" }
        }
        return items
    }

    var addedRecordTypes: [RecordTypeDefinition] { (inner as? SchemaExtendingSource)?.addedRecordTypes ?? [] }
}
