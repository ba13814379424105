import Foundation
import Records

/// A calendar that cannot be written as xCal, and where.
public struct XCalWriteError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }
    public var file: String
    /// What was being written: `VEVENT 'event-1' SUMMARY`.
    public var subject: String
    public var message: String

    public init(file: String, subject: String, message: String) {
        self.file = file
        self.subject = subject
        self.message = message
    }

    public var description: String { "\(file): \(subject): \(message)" }
}

/// Writes iCalendar components as xCal (RFC 6321), streaming: each component the parser
/// gives becomes its XML element, each property an element holding its parameters and
/// typed values, and nothing else changes — the values are iCalendar's, in xCal's
/// notation (`2026-03-03T18:45:00`, `-05:00`, a `<recur>` of parts). Properties RFC 5545 does
/// not define keep their value text as `<unknown>` (RFC 6321 §5), so a converter back to
/// iCalendar gets them unchanged.
public final class XCalWriter {
    private var xml: XMLWriter
    private let file: String
    private var openCalendar = 0
    private var calendarPropertiesWritten = 0

    public init(output: OutputFile) {
        xml = XMLWriter(output: output)
        file = output.path
    }

    /// Reads every component `parser` gives and writes the document; the output is not
    /// committed here.
    public func write(from parser: ICalParser) throws {
        xml.raw(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<icalendar xmlns=\"urn:ietf:params:xml:ns:icalendar-2.0\">\n")
        while let component = try parser.next() {
            if parser.calendarCount != openCalendar {
                if openCalendar > 0 { closeCalendar() }
                openCalendar = parser.calendarCount
                try openCalendar(parser.calendarProperties)
            }
            try write(component, depth: 3, owner: nil)
            try xml.flushIfLarge()
        }
        if parser.calendarCount != openCalendar {
            // A calendar without components (or several).
            if openCalendar > 0 { closeCalendar() }
            try openCalendar(parser.calendarProperties)
            openCalendar = parser.calendarCount
        }
        if openCalendar > 0 {
            guard parser.calendarProperties.count == calendarPropertiesWritten else {
                throw XCalWriteError(
                    file: file, subject: "VCALENDAR",
                    message:
                        "a calendar property follows the components; xCal writes them first, and ckport does not reorder"
                )
            }
            closeCalendar()
        }
        xml.raw("</icalendar>\n")
        try xml.flush()
    }

    private func openCalendar(_ properties: [ContentLine]) throws {
        xml.raw("  <vcalendar>\n")
        if !properties.isEmpty {
            xml.raw("    <properties>\n")
            for property in properties { try write(property, depth: 3, owner: "VCALENDAR") }
            xml.raw("    </properties>\n")
        }
        calendarPropertiesWritten = properties.count
        xml.raw("    <components>\n")
    }

    private func closeCalendar() {
        xml.raw("    </components>\n  </vcalendar>\n")
    }

    private func indent(_ depth: Int) { xml.indent(depth, with: 0x20, width: 2) }

    private func elementName(_ iCalendarName: String, subject: String) throws -> String {
        guard let first = iCalendarName.unicodeScalars.first,
            (first >= "A" && first <= "Z") || (first >= "a" && first <= "z")
        else {
            throw XCalWriteError(
                file: file, subject: subject,
                message: "the name \(iCalendarName) does not begin with a letter, so it cannot be an XML element")
        }
        return iCalendarName.lowercased()
    }

    private func write(_ component: ICalComponent, depth: Int, owner: String?) throws {
        let subject = component.name + (component.property("UID").map { " '\($0.value)'" } ?? "")
        let name = try elementName(component.name, subject: subject)
        indent(depth)
        xml.raw("<\(name)>\n")
        if !component.properties.isEmpty {
            indent(depth + 1)
            xml.raw("<properties>\n")
            for property in component.properties { try write(property, depth: depth + 2, owner: subject) }
            indent(depth + 1)
            xml.raw("</properties>\n")
        }
        if !component.components.isEmpty {
            indent(depth + 1)
            xml.raw("<components>\n")
            for child in component.components { try write(child, depth: depth + 2, owner: subject) }
            indent(depth + 1)
            xml.raw("</components>\n")
        }
        indent(depth)
        xml.raw("</\(name)>\n")
    }

    // MARK: Properties

    private func write(_ property: ContentLine, depth: Int, owner: String?) throws {
        let subject = (owner.map { $0 + " " } ?? "") + property.name
        func fail(_ message: String) -> XCalWriteError {
            XCalWriteError(file: file, subject: subject, message: message)
        }
        let name = try elementName(property.name, subject: subject)
        let declared = property.parameter("VALUE")
        let type: XCalValue
        if let declared {
            type = XCalValue(iCalendarName: declared) ?? .unknown
        } else {
            type =
                XCalValue.defaultType(of: property.name)
                ?? (["GEO", "REQUEST-STATUS"].contains(property.name) ? .text : .unknown)
        }
        indent(depth)
        xml.raw("<\(name)>\n")
        do {
            let parameters = property.parameters.filter { $0.name != "VALUE" || type == .unknown }
            if !parameters.isEmpty {
                indent(depth + 1)
                xml.raw("<parameters>\n")
                for parameter in parameters {
                    let parameterName = try elementName(parameter.name, subject: subject + ";" + parameter.name)
                    let parameterType = XCalValue.parameterType(parameter.name)
                    indent(depth + 2)
                    xml.raw("<\(parameterName)>")
                    for value in parameter.values {
                        try element(parameterType.rawValue, parameterType == .boolean ? value.lowercased() : value)
                    }
                    xml.raw("</\(parameterName)>\n")
                }
                indent(depth + 1)
                xml.raw("</parameters>\n")
            }
            indent(depth + 1)
            if declared == nil && property.name == "GEO" {
                let parts = property.value.split(separator: ";", omittingEmptySubsequences: false)
                guard parts.count == 2, Double(parts[0]) != nil, Double(parts[1]) != nil else {
                    throw fail("GEO is latitude;longitude, found \"\(property.value)\"")
                }
                try element("latitude", String(parts[0]))
                try element("longitude", String(parts[1]))
            } else if declared == nil && property.name == "REQUEST-STATUS" {
                let parts = XCalWriter.splitUnescaped(property.value, on: 0x3B)
                guard parts.count >= 2 else {
                    throw fail("REQUEST-STATUS is code;description[;data], found \"\(property.value)\"")
                }
                try element("code", parts[0])
                try element("description", ICalText.unescape(parts[1]))
                if parts.count > 2 { try element("data", ICalText.unescape(parts[2...].joined(separator: ";"))) }
            } else {
                let values: [String]
                if type == .unknown || !XCalValue.listProperties.contains(property.name) {
                    values = [type == .text ? ICalText.unescape(property.value) : property.value]
                } else if type == .text {
                    values = ICalText.splitList(property.value)
                } else {
                    values = property.value.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
                }
                for value in values { try writeValue(value, type: type, fail: fail) }
            }
            xml.byte(0x0A)
        } catch let error as XMLCharacterError {
            throw fail(error.message)
        }
        indent(depth)
        xml.raw("</\(name)>\n")
    }

    private func element(_ name: String, _ text: String) throws(XMLCharacterError) {
        xml.raw("<\(name)>")
        try xml.escaped(text)
        xml.raw("</\(name)>")
    }

    private func writeValue(_ value: String, type: XCalValue, fail: (String) -> XCalWriteError) throws {
        func converted(_ text: String?) throws -> String {
            guard let text else { throw fail("\"\(value)\" is not a valid \(type.iCalendarName ?? "value")") }
            return text
        }
        switch type {
        case .date:
            try element("date", try converted(XCalValue.xmlDate(Substring(value))))
        case .dateTime:
            try element("date-time", try converted(XCalValue.xmlDateTime(Substring(value))))
        case .time:
            try element("time", try converted(XCalValue.xmlTime(Substring(value))))
        case .utcOffset:
            try element("utc-offset", try converted(XCalValue.xmlOffset(Substring(value))))
        case .boolean:
            try element("boolean", value.lowercased())
        case .period:
            let parts = value.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, let start = XCalValue.xmlDateTime(parts[0]) else {
                throw fail("\"\(value)\" is not a PERIOD (start/end or start/duration)")
            }
            xml.raw("<period><start>\(start)</start>")
            if let end = XCalValue.xmlDateTime(parts[1]) {
                xml.raw("<end>\(end)</end>")
            } else {
                try element("duration", String(parts[1]))
            }
            xml.raw("</period>")
        case .recur:
            try writeRecur(value, fail: fail)
        default:
            try element(type.rawValue, value)
        }
    }

    /// `FREQ=WEEKLY;BYDAY=MO,WE` → `<recur><freq>WEEKLY</freq><byday>MO</byday><byday>WE</byday></recur>`,
    /// the parts in the schema's order.
    private func writeRecur(_ value: String, fail: (String) -> XCalWriteError) throws {
        var parts: [String: String] = [:]
        for part in value.split(separator: ";") {
            let pair = part.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { throw fail("\"\(part)\" in RRULE is not NAME=VALUE") }
            let key = pair[0].uppercased()
            guard XCalValue.recurParts.contains(key) else {
                throw fail("RRULE part \(key) has no place in xCal's <recur>")
            }
            guard parts[key] == nil else { throw fail("RRULE gives \(key) twice") }
            parts[key] = String(pair[1])
        }
        xml.raw("<recur>")
        for key in XCalValue.recurParts {
            guard let text = parts[key] else { continue }
            let name = key.lowercased()
            if key == "UNTIL" {
                if let dateTime = XCalValue.xmlDateTime(Substring(text)) {
                    try element(name, dateTime)
                } else if let date = XCalValue.xmlDate(Substring(text)) {
                    try element(name, date)
                } else {
                    throw fail("UNTIL=\(text) is neither a DATE nor a DATE-TIME")
                }
            } else if XCalValue.recurListParts.contains(key) {
                for item in text.split(separator: ",") { try element(name, String(item)) }
            } else {
                try element(name, text)
            }
        }
        xml.raw("</recur>")
    }

    /// Splits on `separator` where no backslash escapes it; the parts keep their escapes.
    static func splitUnescaped(_ text: String, on separator: UInt8) -> [String] {
        var parts: [String] = []
        var current: [UInt8] = []
        var escaped = false
        for byte in text.utf8 {
            if escaped {
                current.append(byte)
                escaped = false
            } else if byte == 0x5C {
                current.append(byte)
                escaped = true
            } else if byte == separator {
                parts.append(String(decoding: current, as: UTF8.self))
                current.removeAll()
            } else {
                current.append(byte)
            }
        }
        parts.append(String(decoding: current, as: UTF8.self))
        return parts
    }
}
