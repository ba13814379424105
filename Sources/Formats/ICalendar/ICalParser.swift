import Records

/// An iCalendar component: its properties and sub-components, with the line it starts on.
public struct ICalComponent: Sendable {
    public var name: String
    public var properties: [ContentLine]
    public var components: [ICalComponent]
    public var line: Int
    /// The first line inside the component that could not be read; the rest was still read,
    /// so that one bad component can be skipped and the others imported.
    public var problem: InputIssue?

    public init(name: String, properties: [ContentLine] = [], components: [ICalComponent] = [], line: Int = 0) {
        self.name = name
        self.properties = properties
        self.components = components
        self.line = line
    }

    public func property(_ name: String) -> ContentLine? {
        properties.first { $0.name == name }
    }

    public func all(_ name: String) -> [ContentLine] {
        properties.filter { $0.name == name }
    }
}

/// Reads iCalendar text as it comes from Google Calendar, Apple Calendar, Outlook or
/// Thunderbird: lines unfolded (CRLF or LF, then a space or tab), content lines split into
/// name, parameters (quoted values, lists) and value, and components nested by BEGIN/END.
///
/// It streams: `next()` hands out each component directly under a VCALENDAR (VEVENT, VTODO,
/// VJOURNAL, VTIMEZONE, …) once its END is read, so a calendar of any size is read one event
/// at a time. Several VCALENDARs in one file are read in turn.
public final class ICalParser {
    private let input: ByteInput
    private var physicalLine = 0
    private var inCalendar = false
    /// Properties of the current VCALENDAR (PRODID, X-WR-CALNAME, …).
    public private(set) var calendarProperties: [ContentLine] = []
    public private(set) var calendarCount = 0
    /// Each VCALENDAR read to its END since ``takeFinishedCalendars()`` was last called: its
    /// number (from 1) and its own properties.
    private var finishedCalendars: [(number: Int, properties: [ContentLine])] = []

    /// The calendars read to their END since the last call, in order.
    public func takeFinishedCalendars() -> [(number: Int, properties: [ContentLine])] {
        defer { finishedCalendars = [] }
        return finishedCalendars
    }

    /// Lines between one END:VCALENDAR and the next BEGIN:VCALENDAR (or the end of the file):
    /// left out, as no calendar holds them.
    public private(set) var linesOutsideCalendars = 0
    /// Keep each property's logical line as read (``ContentLine/raw``), for a lossless archive.
    public var keepRaw = false
    /// What was read leniently (RFC 5545 says otherwise, but real clients write it), with how
    /// often: for the import's summary.
    public private(set) var warnings: [String: Int] = [:]

    static func isCalendarStart(_ bytes: [UInt8]) -> Bool {
        let text = String(decoding: bytes, as: UTF8.self).uppercased()
        return text.hasPrefix("BEGIN:VCALENDAR")
    }

    /// The property and parameter names met on nearly every line, by length: a name read is
    /// matched against these bytes and handed out as the string already made, instead of a
    /// new string per line.
    static let commonNames: [[(key: NameKey, name: String)]] = {
        let names = [
            "BEGIN", "END", "UID", "DTSTAMP", "DTSTART", "DTEND", "DUE", "DURATION", "SUMMARY", "DESCRIPTION",
            "LOCATION",
            "CATEGORIES", "CREATED", "LAST-MODIFIED", "SEQUENCE", "ORGANIZER", "ATTENDEE", "STATUS", "RRULE", "RDATE",
            "EXDATE", "RECURRENCE-ID", "TRIGGER", "ACTION", "TRANSP", "CLASS", "PRIORITY", "URL", "COMPLETED",
            "X-CKPORT-ZONE", "X-CKPORT-TYPE", "X-CKPORT-RECORD", "CN", "ROLE", "PARTSTAT", "RSVP", "CUTYPE", "TZID",
            "VALUE", "SCOPE", "OWNER", "RELATED", "LANGUAGE", "ALTREP",
        ]
        var table = [[(key: NameKey, name: String)]](repeating: [], count: 16)
        for name in names {
            Array(name.utf8).withUnsafeBufferPointer { table[name.utf8.count].append((NameKey($0), name)) }
        }
        return table
    }()

    /// The bytes of a name shorter than 16, packed into two words: compared in two steps.
    struct NameKey: Equatable {
        var low: UInt64 = 0, high: UInt64 = 0

        init(_ bytes: UnsafeBufferPointer<UInt8>) {
            for index in 0..<bytes.count {
                if index < 8 {
                    low |= UInt64(bytes[index]) << (8 * index)
                } else {
                    high |= UInt64(bytes[index]) << (8 * (index - 8))
                }
            }
        }
    }

    /// TEXT properties (RFC 5545 §3.3.11), whose escapes are checked.
    static let textProperties: Set<String> = [
        "SUMMARY", "DESCRIPTION", "LOCATION", "COMMENT", "CATEGORIES", "CONTACT", "RESOURCES", "TZNAME",
    ]

    /// Counts a backslash before a character TEXT does not escape (`\"`, say): read as that
    /// character, as the peers do.
    private func checkEscapes(_ content: ContentLine) {
        guard ICalParser.textProperties.contains(content.name) else { return }
        var escaped = false
        for byte in content.value.utf8 {
            if escaped {
                if !(byte == 0x5C || byte == 0x3B || byte == 0x2C || byte == UInt8(ascii: "n")
                    || byte == UInt8(ascii: "N"))
                {
                    warnings[
                        "an escape TEXT does not know (such as \\\") was read as the character itself", default: 0] += 1
                }
                escaped = false
            } else if byte == 0x5C {
                escaped = true
            }
        }
    }

    public init(input: ByteInput) {
        self.input = input
    }

    public var name: String { input.name }

    private func fail(_ message: Message, line: Int) -> InputIssue {
        InputIssue(position: SourcePosition(file: input.name, line: line), message: message)
    }

    /// The logical line `nextLogicalLine()` read (unfolded). It and `lookahead` are reused from
    /// line to line: a calendar of a million lines allocates no array per line.
    private var logical: [UInt8] = []
    /// The physical line read after `logical` to see whether it continued it, with its number;
    /// it starts the next logical line.
    private var lookahead: [UInt8] = []
    private var lookaheadLine: Int?

    /// Reads the next logical line (unfolded) into `logical`; returns the physical line it
    /// starts on, or nil at the end of the input.
    private func nextLogicalLine() throws -> Int? {
        // The buffers and counters are worked on as locals and put back at the end: a class's
        // stored properties are checked for exclusive access on every use.
        var text: [UInt8] = []
        var next: [UInt8] = []
        swap(&text, &logical)
        swap(&next, &lookahead)
        var number = physicalLine
        defer {
            swap(&text, &logical)
            swap(&next, &lookahead)
            physicalLine = number
        }
        text.removeAll(keepingCapacity: true)
        var start = lookaheadLine
        if start != nil { swap(&text, &next) }
        lookaheadLine = nil
        while var raw = try input.nextLine() {
            number += 1
            // A UTF-8 byte-order mark before the first line (editors on Windows write one):
            // not part of the calendar, and every reader of real files skips it.
            if number == 1, raw.starts(with: [0xEF, 0xBB, 0xBF]) { raw = UnsafeRawBufferPointer(rebasing: raw[3...]) }
            if input.overlongLine != nil {
                throw fail("the line is longer than \(ByteInput.maximumLineBytes >> 20) MB", line: number)
            }
            if raw.isEmpty {
                continue
            }
            if raw[0] == 0x20 || raw[0] == 0x09 {
                guard let start else {
                    throw fail("a folded continuation line with no line before it", line: number)
                }
                guard text.count + raw.count <= ByteInput.maximumLineBytes else {
                    throw fail("the property unfolds to more than \(ByteInput.maximumLineBytes >> 20) MB", line: start)
                }
                text.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[1...]))
                continue
            }
            if start != nil {
                next.removeAll(keepingCapacity: true)
                next.append(contentsOf: raw)
                lookaheadLine = number
                return start
            }
            text.append(contentsOf: raw)
            start = number
        }
        return start
    }

    /// Splits a logical line into a content line. The delimiters are all ASCII, so the line is
    /// scanned as bytes once it is known to be UTF-8; only names, parameter values and the
    /// value become strings.
    func parse(_ bytes: [UInt8], line: Int, checkingEscapes: Bool = false) throws -> ContentLine {
        try bytes.withUnsafeBufferPointer { buffer -> ContentLine in
            if UTF8Validation.firstInvalidOffset(buffer) != nil {
                throw fail("the line is not valid UTF-8", line: line)
            }
            let count = buffer.count
            func text(_ from: Int, _ to: Int) -> String {
                String(decoding: UnsafeBufferPointer(rebasing: buffer[from..<to]), as: UTF8.self)
            }
            func preview() -> String { String(text(0, count).prefix(60)) }
            /// A property or parameter name, upper-cased: letters, digits and '-' (RFC 5545 §3.1).
            func name(_ from: Int, _ to: Int) -> String {
                let bytes = UnsafeBufferPointer(rebasing: buffer[from..<to])
                if !bytes.contains(where: { $0 >= 0x61 && $0 <= 0x7A }) {
                    if bytes.count < ICalParser.commonNames.count {
                        let key = NameKey(bytes)
                        for common in ICalParser.commonNames[bytes.count] where common.key == key { return common.name }
                    }
                    return String(decoding: bytes, as: UTF8.self)
                }
                var upper = [UInt8](UnsafeBufferPointer(rebasing: buffer[from..<to]))
                for index in upper.indices where upper[index] >= 0x61 && upper[index] <= 0x7A { upper[index] -= 0x20 }
                return String(decoding: upper, as: UTF8.self)
            }
            var i = 0
            while i < count, buffer[i] != 0x3B, buffer[i] != 0x3A {  // ';' ':'
                let c = buffer[i]
                guard (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D
                else {
                    let found = text(i, count).first.map(String.init) ?? "?"
                    throw fail(
                        "expected a property name (letters, digits, '-'), found '\(found)' in \"\(preview())\"",
                        line: line)
                }
                i += 1
            }
            guard i > 0 else {
                throw fail("a content line needs a name before ':' or ';': \"\(preview())\"", line: line)
            }
            let propertyName = name(0, i)
            var parameters: [(name: String, values: [String])] = []
            if i < count, buffer[i] == 0x3B { parameters.reserveCapacity(4) }
            while i < count, buffer[i] == 0x3B {
                i += 1
                let nameStart = i
                while i < count, buffer[i] != 0x3D, buffer[i] != 0x3A, buffer[i] != 0x3B { i += 1 }  // '=' ':' ';'
                guard i < count, buffer[i] == 0x3D else {
                    throw fail("parameter '\(text(nameStart, i))' of \(propertyName) has no '=value'", line: line)
                }
                let parameterName = name(nameStart, i)
                i += 1
                var values: [String] = []
                while true {
                    if i < count, buffer[i] == 0x22 {  // '"'
                        let valueStart = i + 1
                        i = valueStart
                        while i < count, buffer[i] != 0x22 { i += 1 }
                        guard i < count else {
                            throw fail("a quoted parameter value of \(propertyName) is not closed", line: line)
                        }
                        values.append(text(valueStart, i))
                        i += 1
                    } else {
                        let valueStart = i
                        // Up to the next ',' ':' or ';'.
                        while i < count, buffer[i] != 0x2C, buffer[i] != 0x3A, buffer[i] != 0x3B { i += 1 }
                        values.append(text(valueStart, i))
                    }
                    if i < count, buffer[i] == 0x2C {
                        i += 1
                        continue
                    }
                    break
                }
                parameters.append((parameterName, values))
            }
            guard i < count, buffer[i] == 0x3A else {
                throw fail("expected ':' before the value of \(propertyName)", line: line)
            }
            var content = ContentLine(name: propertyName, parameters: parameters, value: text(i + 1, count), line: line)
            if keepRaw { content.raw = text(0, count) }
            if checkingEscapes, UnsafeBufferPointer(rebasing: buffer[(i + 1)...]).contains(0x5C) {
                checkEscapes(content)
            }
            return content
        }
    }

    /// The next component inside a VCALENDAR, or nil at the end of the input.
    public func next() throws -> ICalComponent? {
        while let line = try nextLogicalLine() {
            // Some clients leave a line or two after END:VCALENDAR: read on, and say so.
            if !inCalendar && calendarCount > 0 && !ICalParser.isCalendarStart(logical) {
                warnings["a line after END:VCALENDAR was ignored", default: 0] += 1
                linesOutsideCalendars += 1
                continue
            }
            // Lines of the calendar itself are not read leniently (nor does Python's icalendar):
            // a stray BEGIN or END there would change what the components are.
            let content = try parse(logical, line: line)
            if content.name == "BEGIN" {
                let kind = content.value.uppercased()
                if !inCalendar {
                    guard kind == "VCALENDAR" else {
                        throw fail("expected BEGIN:VCALENDAR, found BEGIN:\(content.value)", line: line)
                    }
                    inCalendar = true
                    calendarCount += 1
                    calendarProperties = []
                    continue
                }
                return try readComponent(kind, line: line, depth: 1)
            }
            if content.name == "END" {
                guard inCalendar, content.value.uppercased() == "VCALENDAR" else {
                    throw fail("END:\(content.value) without a matching BEGIN", line: line)
                }
                inCalendar = false
                finishedCalendars.append((calendarCount, calendarProperties))
                continue
            }
            guard inCalendar else { throw fail("\(content.name) outside BEGIN:VCALENDAR … END:VCALENDAR", line: line) }
            calendarProperties.append(content)
            calendarPropertyCounts[content.name, default: 0] += 1
        }
        if inCalendar {
            throw fail("the file ends inside BEGIN:VCALENDAR (END:VCALENDAR is missing)", line: physicalLine)
        }
        return nil
    }

    /// How many times each property of the calendars themselves (not of their components) was
    /// read, over every VCALENDAR of the input.
    public private(set) var calendarPropertyCounts: [String: Int] = [:]

    /// Lines left out because they are not content lines, by the name they begin with (or
    /// "unnamed"): what a reader that keeps everything must report as not kept.
    public private(set) var unreadableLines: [String: Int] = [:]

    /// ``unreadableLines`` as a report's "not kept" items ("2 unreadable ORGANIZER lines"), by name.
    public var unreadableLineItems: [String] {
        unreadableLines.sorted { $0.key < $1.key }.map {
            "\($0.value) unreadable \($0.key) line\($0.value == 1 ? "" : "s")"
        }
            + (linesOutsideCalendars == 0
                ? [] : ["\(linesOutsideCalendars) line\(linesOutsideCalendars == 1 ? "" : "s") outside any VCALENDAR"])
    }

    /// Reads a logical line of a component that is not a content line as Python's icalendar
    /// does: it is left out, counted in ``unreadableLines`` and said in ``warnings``, and
    /// the component is read on. Such lines come from writers that lose a fold's leading
    /// space (the tail of a DESCRIPTION, `X-APPLE-RADIUS=49.9…` after its property's first
    /// half) or a property's ':' (`ORGANIZER;CN=Bob`). Text that is not UTF-8 stays an error
    /// of its component. False when the line is left to fail.
    private func readLeniently() -> Bool {
        let bytes = logical
        guard bytes.withUnsafeBufferPointer({ UTF8Validation.firstInvalidOffset($0) }) == nil else { return false }
        var nameEnd = 0
        while nameEnd < bytes.count {
            let c = bytes[nameEnd]
            guard (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D else {
                break
            }
            nameEnd += 1
        }
        let name = nameEnd > 0 ? String(decoding: bytes[..<nameEnd], as: UTF8.self).uppercased() : "unnamed"
        unreadableLines[name, default: 0] += 1
        warnings[
            "a line that is not a property (a fold that lost its leading space, a property without its ':') was left out",
            default: 0] += 1
        return true
    }

    /// How deep components may nest inside VCALENDAR. RFC 5545 and its extensions nest two or
    /// three levels (VEVENT › VALARM, VTIMEZONE › STANDARD); deeper input is refused before it
    /// can exhaust the stack.
    public static let maximumDepth = 32

    private func readComponent(_ kind: String, line: Int, depth: Int) throws -> ICalComponent {
        guard depth <= ICalParser.maximumDepth else {
            throw fail("BEGIN:\(kind) nests components more than \(ICalParser.maximumDepth) levels deep", line: line)
        }
        var component = ICalComponent(name: kind, line: line)
        component.properties.reserveCapacity(16)
        while let lineNumber = try nextLogicalLine() {
            let content: ContentLine
            do {
                content = try parse(logical, line: lineNumber, checkingEscapes: true)
            } catch let issue as InputIssue {
                if readLeniently() { continue }
                if component.problem == nil { component.problem = issue }
                continue
            }
            if content.name == "BEGIN" {
                let child = try readComponent(content.value.uppercased(), line: lineNumber, depth: depth + 1)
                if component.problem == nil { component.problem = child.problem }
                component.components.append(child)
            } else if content.name == "END" {
                guard content.value.uppercased() == kind else {
                    throw fail("END:\(content.value) closes BEGIN:\(kind) of line \(line)", line: lineNumber)
                }
                return component
            } else {
                component.properties.append(content)
            }
        }
        throw fail("BEGIN:\(kind) is never closed (END:\(kind) is missing)", line: line)
    }
}
