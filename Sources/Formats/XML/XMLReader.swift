import CLibXML2
import Foundation
import Records

/// XML that cannot be read, or that ckport refuses to read: the file, the line and column,
/// and what is wrong.
public struct XMLInputError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }
    public var file: String
    public var line: Int
    public var column: Int
    public var message: Message

    public init(file: String, line: Int, column: Int, message: Message) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
    }

    public var explanation: Message {
        line > 0 ? "\(file):\(line):\(column): \(message)" : "\(file): \(message)"
    }

    public var description: String { explanation.description }
}

/// A streaming reader of XML, on libxml2's `xmlTextReader`: one node at a time, so memory stays
/// flat whatever the file's size. XML is hostile input here — a model file or a property list
/// someone sent — so the reader:
///
/// - never reaches the network (`XML_PARSE_NONET`) and never loads a DTD, internal or external;
/// - never expands entities: a document that declares any (`<!ENTITY …>`, the way to external
///   entity disclosure and to "billion laughs" bombs) or refers to one other than XML's five is
///   refused;
/// - refuses elements nested deeper than ``Limits/depth``, inputs larger than ``Limits/bytes``
///   and text nodes larger than ``Limits/textBytes``.
///
/// Every error names the file, the line and the column.
public final class XMLReader {
    public struct Limits: Sendable {
        /// Elements nested deeper than this are refused.
        public var depth: Int
        /// An input larger than this is refused before it is read.
        public var bytes: Int64
        /// A text node larger than this is refused.
        public var textBytes: Int

        /// Report text that is only white space (between elements, or a value such as
        /// `<string> </string>`) instead of leaving it out.
        public var keepsWhitespace: Bool

        public init(depth: Int = 128, bytes: Int64 = 4 << 30, textBytes: Int = 64 << 20, keepsWhitespace: Bool = false)
        {
            self.depth = depth
            self.bytes = bytes
            self.textBytes = textBytes
            self.keepsWhitespace = keepsWhitespace
        }
    }

    /// What the reader meets, in document order.
    public enum Event: Equatable, Sendable {
        /// An element opens: its name and attributes (in document order). A self-closing
        /// element is followed at once by its ``end(_:)``.
        case start(String, attributes: [Attribute])
        case end(String)
        /// Character data (text and CDATA); whitespace between elements is left out.
        case text(String)
    }

    public struct Attribute: Equatable, Sendable {
        public var name: String
        public var value: String

        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The input's name in messages.
    public let name: String
    private let limits: Limits
    private var reader: xmlTextReaderPtr?
    /// Kept alive while libxml2 reads from it.
    private let memory: UnsafeMutableBufferPointer<UInt8>?
    private var pendingEnd: String?
    /// The namespace of the element the last ``Event/start(_:attributes:)`` opened (nil: none),
    /// until the next call of ``next()``.
    public var namespaceURI: String? {
        reader.flatMap { xmlTextReaderConstNamespaceUri($0) }.map { XMLReader.string($0) }
    }

    /// Whether the element the last start opened is in namespace `uri`, compared without
    /// making a String of it.
    public func isInNamespace(_ uri: StaticString) -> Bool {
        guard let reader, let namespace = xmlTextReaderConstNamespaceUri(reader) else { return false }
        return strcmp(
            UnsafeRawPointer(namespace).assumingMemoryBound(to: CChar.self),
            UnsafeRawPointer(uri.utf8Start).assumingMemoryBound(to: CChar.self)) == 0
    }

    /// The local name (without a prefix) of the element the last start opened, until the next
    /// call of ``next()``.
    public var localName: String {
        reader.map { XMLReader.string(xmlTextReaderConstLocalName($0)) } ?? ""
    }
    /// The input a stream reader pulls from (see ``init(input:limits:)``).
    private var stream: StreamContext?

    /// Where libxml2's read callback takes bytes from, and what went wrong there.
    private final class StreamContext {
        let input: ByteInput
        let limit: Int64
        var given: Int64 = 0
        var failure: Error?

        init(input: ByteInput, limit: Int64) {
            self.input = input
            self.limit = limit
        }

        func read(into buffer: UnsafeMutablePointer<CChar>, count: Int) -> Int32 {
            do {
                if input.position >= input.end, !(try input.fill()) { return 0 }
                let n = min(count, input.end - input.position)
                given += Int64(n)
                guard given <= limit else {
                    failure = XMLInputError(
                        file: input.name, line: 0, column: 0,
                        message: "is more than \(limit) bytes; XML input is limited to that")
                    return -1
                }
                UnsafeMutableRawPointer(buffer).copyMemory(
                    from: input.bytes(input.position, input.position + n).baseAddress!, byteCount: n)
                input.position += n
                return Int32(n)
            } catch {
                failure = error
                return -1
            }
        }
    }

    /// Reads the file at `path`.
    public init(path: String, limits: Limits = Limits()) throws {
        name = path
        self.limits = limits
        memory = nil
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw XMLInputError(
                file: path, line: 0, column: 0, message: "cannot be read (\(String(cString: strerror(errno))))")
        }
        guard Int64(info.st_size) <= limits.bytes else {
            throw XMLInputError(
                file: path, line: 0, column: 0,
                message: "is \(info.st_size) bytes; XML input is limited to \(limits.bytes) bytes")
        }
        if let handle = FileHandle(forReadingAtPath: path) {
            defer { try? handle.close() }
            try XMLReader.checkProlog(Array((try? handle.read(upToCount: XMLReader.prologBytes)) ?? Data()), name: path)
        }
        xmlResetLastError()
        reader = xmlReaderForFile(path, nil, XMLReader.options)
        guard reader != nil else {
            throw XMLInputError(file: path, line: 0, column: 0, message: "cannot be opened as XML")
        }
    }

    /// Reads `bytes`, called `name` in messages.
    public init(bytes: [UInt8], name: String, limits: Limits = Limits()) throws {
        self.name = name
        self.limits = limits
        guard Int64(bytes.count) <= limits.bytes, bytes.count <= Int(Int32.max) else {
            throw XMLInputError(
                file: name, line: 0, column: 0,
                message: "is \(bytes.count) bytes; XML input is limited to \(limits.bytes) bytes")
        }
        try XMLReader.checkProlog(Array(bytes.prefix(XMLReader.prologBytes)), name: name)
        xmlResetLastError()
        let copy = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        _ = copy.initialize(from: bytes)
        memory = copy
        reader = copy.baseAddress!.withMemoryRebound(to: CChar.self, capacity: copy.count) { pointer in
            xmlReaderForMemory(pointer, Int32(bytes.count), nil, nil, XMLReader.options)
        }
        guard reader != nil else {
            throw XMLInputError(file: name, line: 0, column: 0, message: "cannot be read as XML")
        }
    }

    /// Reads from `input` as libxml2 asks for bytes: a file or standard input of any size,
    /// with memory flat. The prolog is checked from the input's first bytes.
    public init(input: ByteInput, limits: Limits = Limits()) throws {
        name = input.name
        self.limits = limits
        memory = nil
        while input.end - input.position < XMLReader.prologBytes, try input.fill() {}
        let head = input.bytes(input.position, min(input.end, input.position + XMLReader.prologBytes))
        try XMLReader.checkProlog(Array(head), name: input.name)
        let context = StreamContext(input: input, limit: limits.bytes)
        stream = context
        xmlResetLastError()
        let read: ckport_xml_read_callback = { raw, buffer, count in
            guard let raw, let buffer, count > 0 else { return 0 }
            return Unmanaged<StreamContext>.fromOpaque(raw).takeUnretainedValue().read(into: buffer, count: Int(count))
        }
        // The context lives as long as this reader (`stream`), which frees libxml2's reader first.
        reader = xmlReaderForIO(read, nil, Unmanaged.passUnretained(context).toOpaque(), nil, nil, XMLReader.options)
        guard reader != nil else {
            throw XMLInputError(file: name, line: 0, column: 0, message: "cannot be read as XML")
        }
    }

    /// Bytes of a stream input libxml2 has taken so far (0 for a file or bytes in memory).
    public var bytesRead: Int64 { stream?.given ?? 0 }

    deinit {
        if let reader { xmlFreeTextReader(reader) }
        memory?.deallocate()
    }

    /// No network, no error output of libxml2's own (errors are thrown), no entity
    /// substitution (`XML_PARSE_NOENT` stays off), no DTD loading or default attributes from
    /// one, CDATA as text.
    private static let options = Int32(
        CKPORT_XML_PARSE_NONET | CKPORT_XML_PARSE_NOERROR | CKPORT_XML_PARSE_NOWARNING | CKPORT_XML_PARSE_NOCDATA)

    /// How much of the input's head is scanned for entity declarations.
    static let prologBytes = 1 << 20

    /// The line of the node the reader is at (the element just started, say); where it has
    /// none, the line the parser has come to.
    public var line: Int {
        guard let reader else { return 0 }
        if let node = xmlTextReaderCurrentNode(reader) {
            let line = xmlGetLineNo(node)
            if line > 0 { return line }
        }
        return Int(xmlTextReaderGetParserLineNumber(reader))
    }

    private func fail(_ message: Message) -> XMLInputError {
        XMLInputError(
            file: name, line: line, column: reader.map { Int(xmlTextReaderGetParserColumnNumber($0)) } ?? 0,
            message: message)
    }

    /// The next event, or nil at the end of the document.
    public func next() throws -> Event? {
        if let end = pendingEnd {
            pendingEnd = nil
            return .end(end)
        }
        guard let reader else { return nil }
        while true {
            xmlResetLastError()
            let status = xmlTextReaderRead(reader)
            if status == 0 { return nil }
            guard status == 1 else {
                if let failure = stream?.failure { throw failure }
                throw parseError()
            }
            // libxml2 goes on past some errors (an undeclared entity, say); ckport does not.
            if let error = xmlGetLastError(), error.pointee.level >= 2 { throw parseError() }
            let type = xmlTextReaderNodeType(reader)
            switch type {
            case Int32(CKPORT_XML_READER_TYPE_ELEMENT):
                let depth = Int(xmlTextReaderDepth(reader))
                guard depth < limits.depth else { throw fail("elements are nested more than \(limits.depth) deep") }
                let name = XMLReader.string(xmlTextReaderConstName(reader))
                var attributes: [Attribute] = []
                if xmlTextReaderHasAttributes(reader) == 1 {
                    while xmlTextReaderMoveToNextAttribute(reader) == 1 {
                        attributes.append(
                            Attribute(
                                XMLReader.string(xmlTextReaderConstName(reader)),
                                XMLReader.string(xmlTextReaderConstValue(reader))))
                    }
                    xmlTextReaderMoveToElement(reader)
                }
                if xmlTextReaderIsEmptyElement(reader) == 1 { pendingEnd = name }
                return .start(name, attributes: attributes)
            case Int32(CKPORT_XML_READER_TYPE_END_ELEMENT):
                return .end(XMLReader.string(xmlTextReaderConstName(reader)))
            case Int32(CKPORT_XML_READER_TYPE_WHITESPACE), Int32(CKPORT_XML_READER_TYPE_SIGNIFICANT_WHITESPACE):
                guard limits.keepsWhitespace, let value = xmlTextReaderConstValue(reader) else { continue }
                return .text(XMLReader.string(value))
            case Int32(CKPORT_XML_READER_TYPE_TEXT), Int32(CKPORT_XML_READER_TYPE_CDATA):
                guard let value = xmlTextReaderConstValue(reader) else { continue }
                let length = strlen(UnsafeRawPointer(value).assumingMemoryBound(to: CChar.self))
                guard length <= limits.textBytes else {
                    throw fail("a text of \(length) bytes; XML text is limited to \(limits.textBytes) bytes")
                }
                return .text(XMLReader.string(value))
            case Int32(CKPORT_XML_READER_TYPE_ENTITY_REFERENCE):
                throw fail(
                    "the entity reference &\(XMLReader.string(xmlTextReaderConstName(reader))); is not accepted (ckport expands no entities)"
                )
            default:
                continue
            }
        }
    }

    /// Refuses a document whose DOCTYPE declares entities, before libxml2 reads it: the prolog
    /// (what comes before the root element) is scanned for an internal subset with `<!ENTITY`.
    /// Cautious on purpose: the same text inside a comment of the subset refuses too.
    /// Where `needle` first occurs in `haystack` at or after `start` (memchr and memcmp: a
    /// prolog is searched whole, up to a megabyte).
    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int = 0) -> Int? {
        guard start < haystack.count else { return nil }
        guard let lead = needle.first, haystack.count - start >= needle.count else { return nil }
        return haystack.withUnsafeBytes { hay in
            needle.withUnsafeBytes { pin in
                var offset = start
                while offset <= hay.count - pin.count {
                    guard let hit = memchr(hay.baseAddress! + offset, Int32(lead), hay.count - pin.count - offset + 1)
                    else { return nil }
                    let at = hay.baseAddress!.distance(to: UnsafeRawPointer(hit))
                    if memcmp(hit, pin.baseAddress!, pin.count) == 0 { return at }
                    offset = at + 1
                }
                return nil
            }
        }
    }

    static func checkProlog(_ head: [UInt8], name: String) throws {
        guard let doctype = find(Array("<!DOCTYPE".utf8), in: head) else { return }
        var index = doctype + 9
        var quote: UInt8?
        while index < head.count {
            let byte = head[index]
            if let open = quote {
                if byte == open { quote = nil }
            } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                quote = byte
            } else if byte == UInt8(ascii: ">") {
                return
            } else if byte == UInt8(ascii: "[") {
                if find(Array("<!ENTITY".utf8), in: head, from: index) != nil {
                    let line = head[..<index].reduce(1) { $0 + ($1 == 10 ? 1 : 0) }
                    throw XMLInputError(
                        file: name, line: line, column: 0,
                        message:
                            "the document declares entities in its DOCTYPE; ckport reads no entity declarations (they can reach other files or expand without bound)"
                    )
                }
                return
            }
            index += 1
        }
    }

    /// libxml2's own message for the error that stopped the reader, with its position.
    private func parseError() -> XMLInputError {
        if let error = xmlGetLastError() {
            let message =
                error.pointee.message.map { String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines) }
                ?? "not well-formed XML"
            let line = Int(error.pointee.line)
            return XMLInputError(
                file: name, line: line > 0 ? line : self.line, column: Int(error.pointee.int2),
                message: Message(message))
        }
        return fail("not well-formed XML")
    }

    /// Whether `text` is only XML's white space (space, tab, line feed, carriage return).
    public static func isWhitespace(_ text: String) -> Bool {
        text.utf8.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
    }

    /// `text` without XML white space at either end.
    public static func trimmed(_ text: String) -> String {
        let utf8 = text.utf8
        func space(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        guard let first = utf8.first, let last = utf8.last, space(first) || space(last) else { return text }
        guard let start = utf8.firstIndex(where: { !space($0) }), let end = utf8.lastIndex(where: { !space($0) }) else {
            return ""
        }
        return String(text[start...end])
    }

    private static func string(_ pointer: UnsafePointer<xmlChar>?) -> String {
        guard let pointer else { return "" }
        return String(cString: UnsafeRawPointer(pointer).assumingMemoryBound(to: CChar.self))
    }
}
