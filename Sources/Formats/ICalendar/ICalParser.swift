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
    private var pending: (text: [UInt8], line: Int)?
    private var inCalendar = false
    /// Properties of the current VCALENDAR (PRODID, X-WR-CALNAME, …).
    public private(set) var calendarProperties: [ContentLine] = []
    public private(set) var calendarCount = 0

    public init(input: ByteInput) {
        self.input = input
    }

    public var name: String { input.name }

    private func fail(_ message: String, line: Int) -> InputIssue {
        InputIssue(position: SourcePosition(file: input.name, line: line), message: message)
    }

    /// The next logical line (unfolded), with the physical line it starts on.
    private func nextLogicalLine() throws -> (text: [UInt8], line: Int)? {
        var current = pending
        pending = nil
        while let raw = try input.nextLine() {
            physicalLine += 1
            if raw.isEmpty {
                continue
            }
            if raw[0] == 0x20 || raw[0] == 0x09 {
                guard current != nil else {
                    throw fail("a folded continuation line with no line before it", line: physicalLine)
                }
                current!.text.append(contentsOf: raw.dropFirst())
                continue
            }
            if let done = current {
                pending = (Array(raw), physicalLine)
                return done
            }
            current = (Array(raw), physicalLine)
        }
        return current
    }

    /// Splits a logical line into a content line.
    func parse(_ bytes: [UInt8], line: Int) throws -> ContentLine {
        guard let text = bytes.withUnsafeBytes({ UTF8Validation.string($0) }) else {
            throw fail("the line is not valid UTF-8", line: line)
        }
        var scalars = text.unicodeScalars[...]
        var name = ""
        while let c = scalars.first, c != ";" && c != ":" {
            guard c.properties.isAlphabetic || ("0"..."9").contains(c) || c == "-" else {
                throw fail("expected a property name (letters, digits, '-'), found '\(c)' in \"\(text.prefix(60))\"", line: line)
            }
            name.unicodeScalars.append(c)
            scalars.removeFirst()
        }
        guard !name.isEmpty else { throw fail("a content line needs a name before ':' or ';': \"\(text.prefix(60))\"", line: line) }
        var parameters: [(name: String, values: [String])] = []
        while scalars.first == ";" {
            scalars.removeFirst()
            var parameterName = ""
            while let c = scalars.first, c != "=" && c != ":" && c != ";" {
                parameterName.unicodeScalars.append(c)
                scalars.removeFirst()
            }
            guard scalars.first == "=" else {
                throw fail("parameter '\(parameterName)' of \(name) has no '=value'", line: line)
            }
            scalars.removeFirst()
            var values: [String] = []
            while true {
                var value = ""
                if scalars.first == "\"" {
                    scalars.removeFirst()
                    while let c = scalars.first, c != "\"" {
                        value.unicodeScalars.append(c)
                        scalars.removeFirst()
                    }
                    guard scalars.first == "\"" else { throw fail("a quoted parameter value of \(name) is not closed", line: line) }
                    scalars.removeFirst()
                } else {
                    while let c = scalars.first, c != "," && c != ":" && c != ";" {
                        value.unicodeScalars.append(c)
                        scalars.removeFirst()
                    }
                }
                values.append(value)
                if scalars.first == "," { scalars.removeFirst(); continue }
                break
            }
            parameters.append((parameterName.uppercased(), values))
        }
        guard scalars.first == ":" else {
            throw fail("expected ':' before the value of \(name)", line: line)
        }
        scalars.removeFirst()
        return ContentLine(name: name.uppercased(), parameters: parameters, value: String(String.UnicodeScalarView(scalars)), line: line)
    }

    /// The next component inside a VCALENDAR, or nil at the end of the input.
    public func next() throws -> ICalComponent? {
        while let (bytes, line) = try nextLogicalLine() {
            let content = try parse(bytes, line: line)
            if content.name == "BEGIN" {
                let kind = content.value.uppercased()
                if !inCalendar {
                    guard kind == "VCALENDAR" else { throw fail("expected BEGIN:VCALENDAR, found BEGIN:\(content.value)", line: line) }
                    inCalendar = true
                    calendarCount += 1
                    calendarProperties = []
                    continue
                }
                return try readComponent(kind, line: line)
            }
            if content.name == "END" {
                guard inCalendar, content.value.uppercased() == "VCALENDAR" else {
                    throw fail("END:\(content.value) without a matching BEGIN", line: line)
                }
                inCalendar = false
                continue
            }
            guard inCalendar else { throw fail("\(content.name) outside BEGIN:VCALENDAR … END:VCALENDAR", line: line) }
            calendarProperties.append(content)
        }
        if inCalendar { throw fail("the file ends inside BEGIN:VCALENDAR (END:VCALENDAR is missing)", line: physicalLine) }
        return nil
    }

    private func readComponent(_ kind: String, line: Int) throws -> ICalComponent {
        var component = ICalComponent(name: kind, line: line)
        while let (bytes, lineNumber) = try nextLogicalLine() {
            let content: ContentLine
            do {
                content = try parse(bytes, line: lineNumber)
            } catch let issue as InputIssue {
                if component.problem == nil { component.problem = issue }
                continue
            }
            if content.name == "BEGIN" {
                let child = try readComponent(content.value.uppercased(), line: lineNumber)
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
