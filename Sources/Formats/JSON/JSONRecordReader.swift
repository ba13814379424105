import Foundation
import Records

/// Reads records from JSON Lines (one record per line) or from a JSON document
/// (`{"records": [ … ]}` as CloudKit's `records/query` returns it, or a bare array), streaming:
/// one record in memory at a time, whatever the size of the file.
public final class JSONRecordReader: RecordSource {
    public enum Layout: String, Sendable {
        /// One record object per line (`.jsonl`, `.ndjson`).
        case lines
        /// A document holding an array of records (`.json`).
        case document
    }

    private let input: ByteInput
    private let codec: JSONRecordCodec
    private var layout: Layout?
    private var lineNumber = 0
    private var scanner: JSONDocumentScanner?
    private var elementIndex = 0
    /// With two threads: lines decoded ahead, last first, and an error to throw after them.
    private var decoded: [SourceItem] = []
    private var pendingError: Error?
    private var inputEnded = false
    /// Lines of the current batches that were too long to read, by line number.
    private var overlongLines: [Int: Int64] = [:]
    private let side: SideThread<[SourceItem]>?
    static let linesPerBatch = 256

    /// - Parameter twoThreads: decode JSON Lines on two threads (this one and one more), in
    ///   batches, the records still coming out in file order. Worth it when decoding is the
    ///   slow part and the consumer is light.
    public convenience init(input: ByteInput, layout: Layout?, codec: JSONRecordCodec, twoThreads: Bool = false) {
        self.init(input: input, layout: layout, codec: codec, sideThread: twoThreads ? SideThread() : nil)
    }

    /// Decodes on `sideThread` too when given; readers read one after another can share one.
    init(input: ByteInput, layout: Layout?, codec: JSONRecordCodec, sideThread: SideThread<[SourceItem]>?) {
        self.input = input
        self.layout = layout
        self.codec = codec
        side = sideThread
    }

    public var name: String { input.name }
    public var bytesRead: Int64 { input.bytesRead }
    public var totalBytes: Int64? { input.totalBytes }

    /// The layout a file name implies: `.jsonl`/`.ndjson` are lines, `.json` a document.
    public static func layout(forPath path: String) -> Layout? {
        let lower = path.lowercased()
        if lower.hasSuffix(".jsonl") || lower.hasSuffix(".ndjson") { return .lines }
        if lower.hasSuffix(".json") { return .document }
        return nil
    }

    public func next() throws -> SourceItem? {
        if layout == nil { layout = try sniffLayout() }
        switch layout! {
        case .lines: return try nextLine()
        case .document: return try nextElement()
        }
    }

    /// A document starts with `[`, or with `{` followed by a `"records"` key; anything else is lines.
    private func sniffLayout() throws -> Layout {
        var index = input.position
        while true {
            while index < input.end {
                switch input[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                case UInt8(ascii: "["): return .document
                case UInt8(ascii: "{"):
                    // Look at the first key.
                    let text = String(decoding: input.bytes(index, min(input.end, index + 64)), as: UTF8.self)
                    let afterBrace = text.dropFirst().drop { $0 == " " || $0 == "\n" || $0 == "\r" || $0 == "\t" }
                    return afterBrace.hasPrefix("\"records\"") ? .document : .lines
                default: return .lines
                }
            }
            let consumed = index - input.position
            if try !input.fill() { return .lines }
            index = input.position + consumed
        }
    }

    // MARK: Lines

    /// Lines are read a batch at a time into one buffer, and each record keeps a slice of it:
    /// one allocation for a batch rather than one for every line, freed once (by whichever
    /// thread releases the batch's last record) rather than line by line.
    private func nextLine() throws -> SourceItem? {
        while true {
            if let item = decoded.popLast() { return item }
            if let error = pendingError {
                pendingError = nil
                throw error
            }
            if inputEnded { return nil }
            decoded = nextBatches()
            decoded.reverse()
        }
    }

    private func lineItem(_ bytes: ArraySlice<UInt8>, line: Int, overlong: [Int: Int64]) -> SourceItem {
        if let length = overlong[line] { return self.overlong(length, line: line) }
        return item(bytes, line: line, column: 1, pathPrefix: [])
    }

    /// A line too long to hold a record, refused without being read into memory.
    private func overlong(_ length: Int64, line: Int) -> SourceItem {
        .invalid(
            InputIssue(
                position: SourcePosition(file: input.name, line: line, column: 1),
                message:
                    "the line is \(length) bytes long, more than the \(ByteInput.maximumLineBytes >> 20) MB a record can take even with every character escaped (CloudKit's limit is 1 MB a record); it was skipped unread"
            ),
            raw: nil)
    }

    /// The items of the next batch of lines; with a side thread, of the next two batches, the
    /// second decoded there while the first is decoded here, in order. A read error is kept for
    /// after the records read before it, as reading line by line.
    private func nextBatches() -> [SourceItem] {
        guard let side else {
            let (lines, failure) = batch()
            pendingError = failure
            let overlong = overlongLines
            overlongLines = [:]
            return lines.items { lineItem($0, line: $1, overlong: overlong) }
        }
        let first = batch()
        var second: (batch: LineBatch, failure: Error?) = (LineBatch(), nil)
        if first.failure == nil && !inputEnded { second = batch() }
        pendingError = first.failure ?? second.failure
        let overlong = overlongLines
        overlongLines = [:]
        var items: [SourceItem]
        if second.batch.lines.isEmpty {
            items = first.batch.items { lineItem($0, line: $1, overlong: overlong) }
        } else {
            let later = second.batch
            side.start { [self] in
                later.items { lineItem($0, line: $1, overlong: overlong) }
            }
            items = first.batch.items { lineItem($0, line: $1, overlong: overlong) }
            items += side.collect()
        }
        return items
    }

    /// Lines read together, in one buffer: each line's bytes and its number.
    struct LineBatch: Sendable {
        var buffer: [UInt8] = []
        var lines: [(range: Range<Int>, line: Int)] = []

        /// Each line made into an item, in order.
        func items(_ make: (ArraySlice<UInt8>, Int) -> SourceItem) -> [SourceItem] {
            lines.map { make(buffer[$0.range], $0.line) }
        }
    }

    /// How many bytes of lines a batch holds at most (a batch ends after the line that passes
    /// this, or after ``linesPerBatch`` lines).
    static let bytesPerBatch = 1 << 18

    /// The next lines that are not blank, up to a batch, and the read error that cut it short.
    private func batch() -> (batch: LineBatch, failure: Error?) {
        var batch = LineBatch()
        batch.lines.reserveCapacity(JSONRecordReader.linesPerBatch)
        do {
            while batch.lines.count < JSONRecordReader.linesPerBatch
                && batch.buffer.count < JSONRecordReader.bytesPerBatch
            {
                guard let line = try input.nextLine() else {
                    inputEnded = true
                    break
                }
                lineNumber += 1
                if let length = input.overlongLine {
                    batch.lines.append((0..<0, lineNumber))
                    overlongLines[lineNumber] = length
                    continue
                }
                if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
                if batch.buffer.isEmpty {
                    batch.buffer.reserveCapacity(max(JSONRecordReader.bytesPerBatch + (1 << 14), line.count))
                }
                let start = batch.buffer.count
                batch.buffer.append(contentsOf: line)
                batch.lines.append((start..<batch.buffer.count, lineNumber))
            }
        } catch {
            return (batch, error)
        }
        return (batch, nil)
    }

    // MARK: Documents

    private func nextElement() throws -> SourceItem? {
        if scanner == nil { scanner = JSONDocumentScanner(input: input) }
        guard let (bytes, line, column) = try scanner!.nextElement() else { return nil }
        defer { elementIndex += 1 }
        return item(bytes[...], line: line, column: column, pathPrefix: scanner!.elementPath(elementIndex))
    }

    // MARK: Records

    private func item(_ bytes: ArraySlice<UInt8>, line: Int, column: Int, pathPrefix: [JSONPathComponent]) -> SourceItem
    {
        let file = input.name
        func position(at offset: Int, path: [JSONPathComponent]) -> SourcePosition {
            let (l, c) = bytes.withUnsafeBytes { $0.position(of: offset, startLine: line, startColumn: column) }
            return SourcePosition(file: file, line: l, column: c, path: (pathPrefix + path).pathString)
        }
        let start = SourcePosition(
            file: file, line: line, column: column, path: pathPrefix.isEmpty ? nil : pathPrefix.pathString)
        let decoded = bytes.withUnsafeBytes { raw in
            Result { () throws(RecordDecodingError) in try codec.decodeChecked(bytes: raw) }
        }
        switch decoded {
        case .success(let (record, style, checked)):
            let locate: @Sendable (String) -> SourcePosition = { field in
                let path = JSONRecordCodec.path(ofField: field, style: style)
                let offset = bytes.withUnsafeBytes { JSONParser.offset(of: path, in: $0) }
                guard let offset else { return start }
                let (l, c) = bytes.withUnsafeBytes { $0.position(of: offset, startLine: line, startColumn: column) }
                return SourcePosition(file: file, line: l, column: c, path: (pathPrefix + path).pathString)
            }
            var sourced = SourcedRecord(record: record, position: start, rawBytes: bytes, locateField: locate)
            sourced.checked = checked
            return .record(sourced)
        case .failure(let error):
            let offset = error.byteOffset ?? bytes.withUnsafeBytes { JSONParser.offset(of: error.path, in: $0) } ?? 0
            return .invalid(
                InputIssue(
                    position: position(at: offset, path: error.path), recordName: error.recordName,
                    recordType: error.recordType, field: error.field, message: error.message), raw: Array(bytes))
        }
    }
}

/// Walks a JSON document to the records array and hands out each element's bytes.
final class JSONDocumentScanner {
    private let input: ByteInput
    private var line = 1
    private var column = 1
    private enum State {
        case start
        case inArray(first: Bool)
        case afterArray, done
    }
    private var state = State.start
    /// True when the records array sits under a `"records"` key.
    private var enveloped = false

    init(input: ByteInput) {
        self.input = input
    }

    func elementPath(_ index: Int) -> [JSONPathComponent] {
        enveloped ? [.key("records"), .index(index)] : [.index(index)]
    }

    private var here: SourcePosition { SourcePosition(file: input.name, line: line, column: column) }

    private func fail(_ message: Message) -> InputIssue {
        InputIssue(position: here, message: message)
    }

    /// The next element's bytes and where it starts, or nil after the last one.
    func nextElement() throws -> ([UInt8], Int, Int)? {
        while true {
            switch state {
            case .start:
                try skipWhitespace()
                guard let b = try peek() else {
                    throw fail("the file is empty: expected {\"records\": [ … ]} or [ … ]")
                }
                if b == UInt8(ascii: "[") {
                    advance()
                    state = .inArray(first: true)
                } else if b == UInt8(ascii: "{") {
                    advance()
                    enveloped = true
                    try seekRecordsKey(afterMember: false)
                } else {
                    try validateValue()
                    throw fail("expected {\"records\": [ … ]} or [ … ], found another JSON value")
                }
            case .inArray(let first):
                try skipWhitespace()
                guard let b = try peek() else {
                    throw fail("not valid JSON: the file ends inside the records array (expected ']')")
                }
                if b == UInt8(ascii: "]") {
                    advance()
                    state = .afterArray
                    continue
                }
                if !first {
                    guard b == UInt8(ascii: ",") else {
                        throw fail("not valid JSON: expected ',' or ']' between records, found \(shown(b))")
                    }
                    advance()
                    try skipWhitespace()
                    if try peek() == UInt8(ascii: "]") {
                        throw fail("not valid JSON: a comma before ']' (JSON has no trailing commas)")
                    }
                }
                state = .inArray(first: false)
                let (startLine, startColumn) = (line, column)
                return (try captureValue(), startLine, startColumn)
            case .afterArray:
                if enveloped {
                    try seekRecordsKey(afterMember: true)
                    if case .afterArray = state { state = .done }
                } else {
                    state = .done
                }
            case .done:
                try skipWhitespace()
                if let b = try peek() { throw fail("not valid JSON: \(shown(b)) after the end of the document") }
                return nil
            }
        }
    }

    /// Reads object members, skipping all but `"records"`, until the records array opens
    /// (state becomes inArray) or the object closes.
    /// The top-level object's keys so far: a key given twice is refused, as everywhere else.
    private var topLevelKeys: Set<[UInt8]> = []

    /// Reads object members until the records array opens (state becomes inArray) or the
    /// object closes. Every other member (`continuationMarker`, `syncToken`, anything) is
    /// checked as JSON as it streams past, never held whole.
    private func seekRecordsKey(afterMember: Bool) throws {
        var needComma = afterMember
        while true {
            try skipWhitespace()
            guard let b = try peek() else {
                throw fail("not valid JSON: the file ends inside the top-level object (expected '}')")
            }
            if b == UInt8(ascii: "}") {
                advance()
                if case .start = state { throw fail("the object has no \"records\" array") }
                state = .done
                return
            }
            if needComma {
                guard b == UInt8(ascii: ",") else {
                    throw fail("not valid JSON: expected ',' or '}' in the top-level object, found \(shown(b))")
                }
                advance()
                try skipWhitespace()
                if try peek() == UInt8(ascii: "}") {
                    throw fail("not valid JSON: a comma before '}' (JSON has no trailing commas)")
                }
            }
            needComma = true
            guard try peek() == UInt8(ascii: "\"") else {
                throw fail("not valid JSON: expected a key in double quotes, found \(shown(try peek()))")
            }
            let keyPosition = here
            let keyBytes = try validateString()
            guard topLevelKeys.insert(keyBytes).inserted else {
                throw InputIssue(
                    position: keyPosition,
                    message:
                        "key \"\(String(decoding: keyBytes, as: UTF8.self))\" appears twice in the top-level object: ckport refuses a key given twice in any object, since RFC 8259 leaves its meaning open"
                )
            }
            try skipWhitespace()
            guard try peek() == UInt8(ascii: ":") else {
                throw fail("not valid JSON: expected ':' after a key, found \(shown(try peek()))")
            }
            advance()
            try skipWhitespace()
            if keyBytes == Array("records".utf8) {
                guard try peek() == UInt8(ascii: "[") else { throw fail("\"records\" must be an array") }
                advance()
                state = .inArray(first: true)
                return
            }
            try validateValue()
        }
    }

    private func shown(_ byte: UInt8?) -> String {
        guard let byte else { return "the end of the file" }
        return byte >= 0x21 && byte < 0x7F ? "'\(Character(UnicodeScalar(byte)))'" : String(format: "byte 0x%02X", byte)
    }

    // MARK: Checking a value as it streams past

    private enum Container {
        case object(keys: Set<[UInt8]>)
        case array
        var isArray: Bool { if case .array = self { return true } else { return false } }
    }

    /// Reads one JSON value (RFC 8259: UTF-8, no NaN or Infinity, no comments, no trailing
    /// commas, no unescaped control characters, nesting within the parser's limit, no key
    /// twice in one object) without keeping it.
    private func validateValue() throws {
        var stack: [Container] = []
        var expectValue = true
        while true {
            try skipWhitespace()
            let b = try peek()
            if expectValue {
                guard let b else { throw fail("not valid JSON: the file ends where a value should be") }
                switch b {
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    guard stack.count < JSONParser.maxDepth else {
                        throw fail("not valid JSON: JSON nests deeper than \(JSONParser.maxDepth) levels")
                    }
                    advance()
                    try skipWhitespace()
                    let close = UInt8(ascii: b == UInt8(ascii: "[") ? "]" : "}")
                    if try peek() == close {
                        // Empty: the value ends here.
                        advance()
                        if stack.isEmpty { return }
                        break
                    }
                    if b == UInt8(ascii: "[") {
                        stack.append(.array)
                        continue
                    }
                    stack.append(.object(keys: []))
                    try objectKey(&stack)
                    continue
                case UInt8(ascii: "\""): _ = try validateString(keep: false)
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try validateNumber()
                case UInt8(ascii: "t"): try literal("true")
                case UInt8(ascii: "f"): try literal("false")
                case UInt8(ascii: "n"): try literal("null")
                default: throw fail("not valid JSON: expected a value, found \(shown(b))")
                }
                expectValue = false
            } else {
                guard let top = stack.last else { return }
                guard let b else {
                    throw fail("not valid JSON: the file ends inside \(top.isArray ? "an array" : "an object")")
                }
                if b == UInt8(ascii: ",") {
                    advance()
                    try skipWhitespace()
                    let next = try peek()
                    if next == UInt8(ascii: "]") || next == UInt8(ascii: "}") {
                        throw fail("not valid JSON: a comma before \(shown(next)) (JSON has no trailing commas)")
                    }
                    if !top.isArray { try objectKey(&stack) }
                    expectValue = true
                } else if b == UInt8(ascii: top.isArray ? "]" : "}") {
                    advance()
                    stack.removeLast()
                    if stack.isEmpty { return }
                } else {
                    throw fail("not valid JSON: expected ',' or '\(top.isArray ? "]" : "}")', found \(shown(b))")
                }
            }
        }
    }

    /// A key and its colon, inside the object on top of `stack`.
    private func objectKey(_ stack: inout [Container]) throws {
        guard try peek() == UInt8(ascii: "\"") else {
            throw fail("not valid JSON: expected a key in double quotes, found \(shown(try peek()))")
        }
        let position = here
        let key = try validateString()
        guard case .object(var keys) = stack.removeLast() else { preconditionFailure("a key outside an object") }
        guard keys.insert(key).inserted else {
            throw InputIssue(
                position: position,
                message:
                    "key \"\(String(decoding: key, as: UTF8.self))\" appears twice in one object: ckport refuses a key given twice in any object, since RFC 8259 leaves its meaning open"
            )
        }
        stack.append(.object(keys: keys))
        try skipWhitespace()
        guard try peek() == UInt8(ascii: ":") else {
            throw fail("not valid JSON: expected ':' after a key, found \(shown(try peek()))")
        }
        advance()
    }

    /// A string, checked for escapes, control characters and UTF-8; its raw bytes when `keep`.
    @discardableResult
    private func validateString(keep: Bool = true) throws -> [UInt8] {
        advance()  // the opening quote
        var kept: [UInt8] = []
        var continuation = 0
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        while true {
            guard let b = try peek() else { throw fail("not valid JSON: the file ends inside a string") }
            if continuation > 0 {
                guard b >= low && b <= high else { throw fail("not valid JSON: the text is not UTF-8") }
                continuation -= 1
                low = 0x80
                high = 0xBF
            } else if b == UInt8(ascii: "\"") {
                advance()
                return kept
            } else if b < 0x20 {
                throw fail(
                    "not valid JSON: a control character (byte 0x\(String(format: "%02X", b))) inside a string must be escaped"
                )
            } else if b == UInt8(ascii: "\\") {
                advance()
                if keep { kept.append(b) }
                guard let e = try peek() else { throw fail("not valid JSON: the file ends inside a string") }
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    break
                case UInt8(ascii: "u"):
                    for _ in 0..<4 {
                        if keep { kept.append(try peek() ?? 0) }
                        advance()
                        guard let h = try peek(), (h >= 0x30 && h <= 0x39) || (h | 0x20 >= 0x61 && h | 0x20 <= 0x66)
                        else {
                            throw fail("not valid JSON: \\u needs four hexadecimal digits")
                        }
                    }
                default:
                    throw fail("not valid JSON: '\\\(Character(UnicodeScalar(e)))' is not an escape JSON knows")
                }
                if keep { kept.append(try peek()!) }
                advance()
                continue
            } else if b >= 0x80 {
                switch b {
                case 0xC2...0xDF: continuation = 1
                case 0xE0:
                    continuation = 2
                    low = 0xA0
                case 0xE1...0xEC, 0xEE, 0xEF: continuation = 2
                case 0xED:
                    continuation = 2
                    high = 0x9F
                case 0xF0:
                    continuation = 3
                    low = 0x90
                case 0xF1...0xF3: continuation = 3
                case 0xF4:
                    continuation = 3
                    high = 0x8F
                default: throw fail("not valid JSON: the text is not UTF-8")
                }
            }
            if keep { kept.append(b) }
            advance()
        }
    }

    /// A number as RFC 8259 writes it: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    private func validateNumber() throws {
        func digits() throws -> Int {
            var count = 0
            while let d = try peek(), d >= 0x30 && d <= 0x39 {
                advance()
                count += 1
            }
            return count
        }
        if try peek() == UInt8(ascii: "-") { advance() }
        if try peek() == UInt8(ascii: "0") {
            advance()
        } else if try digits() == 0 {
            throw fail("not valid JSON: a number needs digits (NaN and Infinity are not JSON)")
        }
        if try peek() == UInt8(ascii: ".") {
            advance()
            guard try digits() > 0 else { throw fail("not valid JSON: a decimal point needs digits after it") }
        }
        if let e = try peek(), e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
            advance()
            if let sign = try peek(), sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { advance() }
            guard try digits() > 0 else { throw fail("not valid JSON: an exponent needs digits") }
        }
        if let next = try peek(), next >= 0x30 && next <= 0x39 {
            throw fail("not valid JSON: a number cannot start with 0 followed by digits")
        }
    }

    private func literal(_ word: String) throws {
        for expected in word.utf8 {
            guard try peek() == expected else {
                throw fail("not valid JSON: expected a value (a word in JSON is true, false or null)")
            }
            advance()
        }
    }

    private func peek() throws -> UInt8? {
        if input.position >= input.end, try !input.fill() { return nil }
        return input[input.position]
    }

    private func advance() {
        let b = input[input.position]
        input.position += 1
        if b == 0x0A {
            line += 1
            column = 1
        } else if b & 0xC0 != 0x80 {
            column += 1
        }
    }

    private func skipWhitespace() throws {
        while let b = try peek(), b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 { advance() }
    }

    /// Copies one balanced JSON value (object, array, string or scalar) out of the input; the
    /// JSON parser checks it afterwards.
    private func captureValue() throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(1024)
        var depth = 0
        var inString = false
        var escaped = false
        guard let first = try peek() else { throw fail("not valid JSON: the file ends where a value should be") }
        if first == UInt8(ascii: ",") || first == UInt8(ascii: "]") || first == UInt8(ascii: "}")
            || first == UInt8(ascii: ":")
        {
            throw fail("not valid JSON: expected a value, found \(shown(first))")
        }
        let scalar = first != UInt8(ascii: "{") && first != UInt8(ascii: "[") && first != UInt8(ascii: "\"")
        while true {
            if input.position >= input.end, try !input.fill() {
                if scalar && !out.isEmpty { return out }
                throw fail("not valid JSON: the file ends inside a value")
            }
            let b = input[input.position]
            if scalar {
                if b == UInt8(ascii: ",") || b == UInt8(ascii: "]") || b == UInt8(ascii: "}") || b == 0x20 || b == 0x0A
                    || b == 0x0D || b == 0x09
                {
                    return out
                }
            }
            out.append(b)
            advance()
            if scalar { continue }
            if inString {
                if escaped {
                    escaped = false
                } else if b == UInt8(ascii: "\\") {
                    escaped = true
                } else if b == UInt8(ascii: "\"") {
                    inString = false
                    if depth == 0 { return out }
                }
                continue
            }
            switch b {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth == 0 { return out }
            default: break
            }
        }
    }
}
