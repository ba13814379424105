import Foundation

/// The value types of RFC 6321 (xCal) and how iCalendar's text of each becomes xCal's and
/// back: the facts both directions share.
enum XCalValue: String, CaseIterable {
    case binary, boolean
    case calAddress = "cal-address"
    case date
    case dateTime = "date-time"
    case duration, float, integer, period, recur, text, time, uri
    case
        utcOffset = "utc-offset"
    case unknown

    /// The namespace of every xCal element.
    static let namespace: StaticString = "urn:ietf:params:xml:ns:icalendar-2.0"

    /// The value type an element's name says (`date-time`), if any: one hash lookup, where
    /// `init(rawValue:)` compares the name with each case in turn.
    static func named(_ element: String) -> XCalValue? { byName[element] }
    private static let byName = Dictionary(uniqueKeysWithValues: allCases.map { ($0.rawValue, $0) })

    /// The type's name in iCalendar's VALUE parameter (`DATE-TIME`); nil for `unknown`.
    var iCalendarName: String? { self == .unknown ? nil : rawValue.uppercased() }

    init?(iCalendarName: String) {
        guard let value = XCalValue(rawValue: iCalendarName.lowercased()), value != .unknown else { return nil }
        self = value
    }

    /// Each property's default value type (RFC 5545 §3.7–3.8); nil for a property RFC 5545
    /// does not define, whose value xCal keeps as `unknown` (RFC 6321 §5). GEO and
    /// REQUEST-STATUS have structured values of their own.
    static func defaultType(of property: String) -> XCalValue? {
        switch property {
        case "CALSCALE", "METHOD", "PRODID", "VERSION", "CATEGORIES", "CLASS", "COMMENT", "DESCRIPTION", "LOCATION",
            "RESOURCES", "STATUS",
            "SUMMARY", "TRANSP", "TZID", "TZNAME", "CONTACT", "RELATED-TO", "UID", "ACTION":
            return .text
        case "ATTACH", "TZURL", "URL": return .uri
        case "PERCENT-COMPLETE", "PRIORITY", "REPEAT", "SEQUENCE": return .integer
        case "COMPLETED", "CREATED", "DTSTAMP", "LAST-MODIFIED", "DTEND", "DUE", "DTSTART", "RECURRENCE-ID", "EXDATE",
            "RDATE":
            return .dateTime
        case "DURATION", "TRIGGER": return .duration
        case "FREEBUSY": return .period
        case "TZOFFSETFROM", "TZOFFSETTO": return .utcOffset
        case "ATTENDEE", "ORGANIZER": return .calAddress
        case "RRULE", "EXRULE": return .recur
        default: return nil
        }
    }

    /// Properties whose value is a list, one xCal value element per item.
    static let listProperties: Set<String> = ["CATEGORIES", "RESOURCES", "EXDATE", "RDATE", "FREEBUSY"]

    /// Parameters whose values are not text (RFC 6321 §3.5); every other one is text.
    static func parameterType(_ name: String) -> XCalValue {
        switch name {
        case "ALTREP", "DIR": return .uri
        case "DELEGATED-FROM", "DELEGATED-TO", "MEMBER", "SENT-BY": return .calAddress
        case "RSVP": return .boolean
        default: return .text
        }
    }

    /// RECUR's parts in the order RFC 6321's schema lists them, with RFC 7529's RSCALE first
    /// and SKIP last.
    static let recurParts = [
        "RSCALE", "FREQ", "UNTIL", "COUNT", "INTERVAL", "BYSECOND", "BYMINUTE", "BYHOUR", "BYDAY", "BYMONTHDAY",
        "BYYEARDAY",
        "BYWEEKNO", "BYMONTH", "BYSETPOS", "WKST", "SKIP",
    ]
    /// RECUR parts that hold a comma-separated list, one element per item.
    static let recurListParts: Set<String> = [
        "BYSECOND", "BYMINUTE", "BYHOUR", "BYDAY", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH", "BYSETPOS",
    ]

    // MARK: iCalendar text → xCal text

    /// `20081006` → `2008-10-06`.
    static func xmlDate(_ text: Substring) -> String? {
        let digits = Array(text.utf8)
        guard digits.count == 8, digits.allSatisfy(isDigit) else { return nil }
        return "\(text.prefix(4))-\(text.dropFirst(4).prefix(2))-\(text.suffix(2))"
    }

    /// `121500` or `121500Z` → `12:15:00` / `12:15:00Z`.
    static func xmlTime(_ text: Substring) -> String? {
        let utc = text.hasSuffix("Z")
        let body = utc ? text.dropLast() : text
        guard body.utf8.count == 6, body.utf8.allSatisfy(isDigit) else { return nil }
        return "\(body.prefix(2)):\(body.dropFirst(2).prefix(2)):\(body.suffix(2))" + (utc ? "Z" : "")
    }

    /// `20081006T121500Z` → `2008-10-06T12:15:00Z`.
    static func xmlDateTime(_ text: Substring) -> String? {
        guard let t = text.firstIndex(of: "T"), let date = xmlDate(text[..<t]),
            let time = xmlTime(text[text.index(after: t)...])
        else { return nil }
        return date + "T" + time
    }

    /// `-0500` → `-05:00`, `+013045` → `+01:30:45`.
    static func xmlOffset(_ text: Substring) -> String? {
        guard let sign = text.first, sign == "+" || sign == "-" else { return nil }
        let digits = text.dropFirst()
        guard digits.utf8.count == 4 || digits.utf8.count == 6, digits.utf8.allSatisfy(isDigit) else { return nil }
        var out = "\(sign)\(digits.prefix(2)):\(digits.dropFirst(2).prefix(2))"
        if digits.utf8.count == 6 { out += ":\(digits.suffix(2))" }
        return out
    }

    // MARK: xCal text → iCalendar text

    /// `2008-10-06` → `20081006`.
    static func iCalDate(_ text: String) -> String? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].utf8.count == 4, parts[1].utf8.count == 2, parts[2].utf8.count == 2,
            parts.allSatisfy({ $0.utf8.allSatisfy(isDigit) })
        else { return nil }
        return parts.joined()
    }

    /// `12:15:00Z` → `121500Z`.
    static func iCalTime(_ text: Substring) -> String? {
        let utc = text.hasSuffix("Z")
        let parts = (utc ? text.dropLast() : text).split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ $0.utf8.count == 2 && $0.utf8.allSatisfy(isDigit) }) else {
            return nil
        }
        return parts.joined() + (utc ? "Z" : "")
    }

    /// `2008-10-06T12:15:00Z` → `20081006T121500Z`.
    static func iCalDateTime(_ text: String) -> String? {
        guard let t = text.firstIndex(of: "T"), let date = iCalDate(String(text[..<t])),
            let time = iCalTime(text[text.index(after: t)...])
        else { return nil }
        return date + "T" + time
    }

    /// `-05:00` → `-0500`.
    static func iCalOffset(_ text: String) -> String? {
        guard let sign = text.first, sign == "+" || sign == "-" else { return nil }
        let parts = text.dropFirst().split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 || parts.count == 3,
            parts.allSatisfy({ $0.utf8.count == 2 && $0.utf8.allSatisfy(isDigit) })
        else { return nil }
        return String(sign) + parts.joined()
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    /// A date or date-time as the other format writes it, telling which it is.
    static func iCalDateOrDateTime(_ text: String) -> String? {
        text.contains("T") ? iCalDateTime(text) : iCalDate(text)
    }
}
