import Foundation
import Records

/// Record names made from a record's own fields, for rows that carry no `recordName`:
/// `DailyEntry_{date:yyyy-MM-dd}_{authorUserRecordID}`. Importing the same rows again then
/// meets the same names, so a re-import is an idempotent upsert.
///
/// `{field}` stands for the field's value (a reference's record name, a timestamp in ISO-8601);
/// `{field:pattern}` formats a timestamp with `yyyy`, `MM`, `dd`, `HH`, `mm`, `ss` and `SSS`.
public struct NameTemplate: Sendable {
    enum Part: Sendable, Equatable {
        case literal(String)
        case field(String, pattern: String?)
    }

    let parts: [Part]
    public let text: String

    public init(_ text: String) throws(ValueError) {
        self.text = text
        var parts: [Part] = []
        var literal = ""
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{") {
            literal += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}") else {
                throw ValueError("\(Wording.nameTemplate(text)): a '{' is not closed")
            }
            let inside = rest[rest.index(after: open)..<close]
            let pieces = inside.split(separator: ":", maxSplits: 1)
            guard let name = pieces.first, !name.isEmpty else {
                throw ValueError("\(Wording.nameTemplate(text)): '{}' names no field")
            }
            if !literal.isEmpty {
                parts.append(.literal(literal))
                literal = ""
            }
            parts.append(.field(String(name), pattern: pieces.count > 1 ? String(pieces[1]) : nil))
            rest = rest[rest.index(after: close)...]
        }
        literal += rest
        if !literal.isEmpty { parts.append(.literal(literal)) }
        guard parts.contains(where: { if case .field = $0 { return true } else { return false } }) else {
            throw ValueError(
                "\(Wording.nameTemplate(text)) uses no field, so every record would get the same name")
        }
        self.parts = parts
    }

    public var fieldNames: [String] {
        parts.compactMap { if case .field(let name, _) = $0 { return name } else { return nil } }
    }

    /// The name for a record; fails naming the field when one is missing or cannot be shown.
    public func render(_ record: Record, timeZone: TimeZone?) throws(ValueError) -> String {
        var out = ""
        for part in parts {
            switch part {
            case .literal(let text):
                out += text
            case .field(let name, let pattern):
                guard let value = record.fields[name] else {
                    throw ValueError(
                        "\(Wording.nameTemplateWord) needs field '\(name)', which this row leaves empty")
                }
                switch value {
                case .string(let s): out += s
                case .int64(let i): out += String(i)
                case .double(let d): out += d.description
                case .reference(let r): out += r.recordName
                case .timestamp(let t):
                    out +=
                        pattern.map { NameTemplate.format(t, pattern: $0, timeZone: timeZone) }
                        ?? ISO8601.format(milliseconds: t)
                default:
                    throw ValueError(
                        "\(Wording.nameTemplateWord) cannot put field '\(name)' (\(value.type)) in a record name")
                }
            }
        }
        return out
    }

    static func format(_ ms: Int64, pattern: String, timeZone: TimeZone?) -> String {
        let offset =
            timeZone.map { Int64($0.secondsFromGMT(for: Date(timeIntervalSince1970: Double(ms) / 1000))) * 1000 } ?? 0
        let local = ms + offset
        let days = ISO8601.floorDiv(local, 86_400_000)
        let msOfDay = (local % 86_400_000 + 86_400_000) % 86_400_000
        let (year, month, day) = ISO8601.civil(fromDays: days)
        let tokens: [(String, String)] = [
            ("yyyy", pad(year, 4)), ("MM", pad(month, 2)), ("dd", pad(day, 2)), ("HH", pad(msOfDay / 3_600_000, 2)),
            ("mm", pad(msOfDay / 60_000 % 60, 2)), ("ss", pad(msOfDay / 1000 % 60, 2)), ("SSS", pad(msOfDay % 1000, 3)),
        ]
        var out = ""
        var rest = Substring(pattern)
        outer: while !rest.isEmpty {
            for (token, value) in tokens where rest.hasPrefix(token) {
                out += value
                rest = rest.dropFirst(token.count)
                continue outer
            }
            out.append(rest.removeFirst())
        }
        return out
    }

    private static func pad(_ n: Int64, _ width: Int) -> String {
        let text = String(n)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}
