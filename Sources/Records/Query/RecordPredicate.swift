/// A query predicate in CloudKit's subset: comparisons joined by AND.
///
/// ```
/// familyID == 'family-1' AND startDate >= 2026-03-01 AND isDeleted == false
/// status IN ['backlog', 'next']
/// recordName BEGINSWITH 'DailyEntry_2026-01'
/// tags CONTAINS 'groceries'
/// ```
public struct RecordPredicate: Sendable, Hashable {
    public var conditions: [Condition]

    public init(_ conditions: [Condition]) {
        self.conditions = conditions
    }

    /// Parses predicate text; errors carry the column where the text went wrong.
    public static func parse(_ text: String) throws(PredicateError) -> RecordPredicate {
        var parser = PredicateParser(text)
        return try parser.parse()
    }
}

extension RecordPredicate: CustomStringConvertible {
    /// The predicate as text that parses back to the same conditions:
    /// `status IN ['backlog', 'next'] AND points > 3`.
    public var description: String { conditions.map(\.description).joined(separator: " AND ") }
}

public enum ComparisonOperator: String, Sendable, Hashable {
    case equal = "=="
    case notEqual = "!="
    case less = "<"
    case lessOrEqual = "<="
    case greater = ">"
    case greaterOrEqual = ">="
    case `in` = "IN"
    case beginsWith = "BEGINSWITH"
    case contains = "CONTAINS"
}

/// A literal in a predicate, kept as written until the field's type says how to read it.
public enum PredicateValue: Sendable, Hashable, CustomStringConvertible {
    case string(String)
    case number(String)
    case bool(Bool)
    /// An unquoted date or date-time: `2026-03-01`, `2026-03-01T09:00:00Z`.
    case date(String)
    case list([PredicateValue])

    public var description: String {
        switch self {
        case .string(let s):
            // A quote or backslash inside is escaped, so that the text parses back to `s`.
            var quoted = "'"
            for scalar in s.unicodeScalars {
                if scalar == "'" || scalar == "\\" { quoted.unicodeScalars.append("\\") }
                quoted.unicodeScalars.append(scalar)
            }
            return quoted + "'"
        case .number(let n): return n
        case .bool(let b): return b ? "true" : "false"
        case .date(let d): return d
        case .list(let values): return "[" + values.map(\.description).joined(separator: ", ") + "]"
        }
    }
}

public struct Condition: Sendable, Hashable {
    public var field: String
    public var op: ComparisonOperator
    public var value: PredicateValue
    /// 1-based columns of the field and of the value in the predicate text (0 when the
    /// condition was built in code).
    public var fieldColumn: Int
    public var valueColumn: Int

    public init(
        field: String, op: ComparisonOperator, value: PredicateValue, fieldColumn: Int = 0, valueColumn: Int = 0
    ) {
        self.field = field
        self.op = op
        self.value = value
        self.fieldColumn = fieldColumn
        self.valueColumn = valueColumn
    }
}

extension Condition: CustomStringConvertible {
    public var description: String { "\(field) \(op.rawValue) \(value)" }
}

public struct PredicateError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var column: Int
    public var message: String

    public init(column: Int, message: String) {
        self.column = column
        self.message = message
    }

    public var description: String { "column \(column): \(message)" }
}

struct PredicateParser {
    private enum Token: Equatable {
        case identifier(String)
        case string(String)
        case number(String)
        case date(String)
        case symbol(String)
        case end
    }

    private let scalars: [Unicode.Scalar]
    private var index = 0
    private var token: Token = .end
    private var tokenColumn = 1

    init(_ text: String) {
        scalars = Array(text.unicodeScalars)
    }

    mutating func parse() throws(PredicateError) -> RecordPredicate {
        try advance()
        if token == .end { throw PredicateError(column: 1, message: "the predicate is empty") }
        var conditions = [try condition()]
        while true {
            if case .identifier(let word) = token, word.uppercased() == "AND" {
                try advance()
                conditions.append(try condition())
            } else if token == .symbol("&&") {
                try advance()
                conditions.append(try condition())
            } else if token == .end {
                return RecordPredicate(conditions)
            } else if case .identifier(let word) = token, word.uppercased() == "OR" {
                throw PredicateError(
                    column: tokenColumn,
                    message:
                        "OR is not supported: CloudKit predicates join conditions with AND only (use IN for alternatives)"
                )
            } else {
                throw PredicateError(
                    column: tokenColumn, message: "expected AND or the end of the predicate, found \(describe(token))")
            }
        }
    }

    private mutating func condition() throws(PredicateError) -> Condition {
        let fieldColumn = tokenColumn
        guard case .identifier(let field) = token else {
            throw PredicateError(column: tokenColumn, message: "expected a field name, found \(describe(token))")
        }
        try advance()
        let opColumn = tokenColumn
        let op: ComparisonOperator
        switch token {
        case .symbol("=="), .symbol("="): op = .equal
        case .symbol("!="), .symbol("<>"): op = .notEqual
        case .symbol("<"): op = .less
        case .symbol("<="): op = .lessOrEqual
        case .symbol(">"): op = .greater
        case .symbol(">="): op = .greaterOrEqual
        case .identifier(let word) where ["IN", "BEGINSWITH", "CONTAINS"].contains(word.uppercased()):
            op = ComparisonOperator(rawValue: word.uppercased())!
        default:
            throw PredicateError(
                column: opColumn,
                message:
                    "expected an operator (==, !=, <, <=, >, >=, IN, BEGINSWITH, CONTAINS) after '\(field)', found \(describe(token))"
            )
        }
        try advance()
        let valueColumn = tokenColumn
        let value: PredicateValue
        if op == .in {
            guard case .symbol(let open) = token, ["[", "{", "("].contains(open) else {
                throw PredicateError(
                    column: tokenColumn, message: "IN needs a list such as ['a', 'b'], found \(describe(token))")
            }
            let close = open == "[" ? "]" : open == "{" ? "}" : ")"
            try advance()
            var values: [PredicateValue] = []
            if token != .symbol(close) {
                while true {
                    values.append(try literal())
                    if token == .symbol(",") {
                        try advance()
                        continue
                    }
                    if token == .symbol(close) { break }
                    throw PredicateError(
                        column: tokenColumn,
                        message: "expected ',' or '\(close)' in the IN list, found \(describe(token))")
                }
            }
            try advance()
            value = .list(values)
        } else {
            value = try literal()
        }
        return Condition(field: field, op: op, value: value, fieldColumn: fieldColumn, valueColumn: valueColumn)
    }

    private mutating func literal() throws(PredicateError) -> PredicateValue {
        let value: PredicateValue
        switch token {
        case .string(let s): value = .string(s)
        case .number(let n): value = .number(n)
        case .date(let d): value = .date(d)
        case .identifier(let word) where word.lowercased() == "true" || word.lowercased() == "yes": value = .bool(true)
        case .identifier(let word) where word.lowercased() == "false" || word.lowercased() == "no": value = .bool(false)
        case .identifier(let word):
            throw PredicateError(
                column: tokenColumn, message: "expected a value, found '\(word)' (quote text: '\(word)')")
        default:
            throw PredicateError(
                column: tokenColumn,
                message:
                    "expected a value ('text', a number, a date such as 2026-03-01, true or false), found \(describe(token))"
            )
        }
        try advance()
        return value
    }

    private func describe(_ token: Token) -> String {
        switch token {
        case .identifier(let w): return "'\(w)'"
        case .string(let s): return "'\(s)'"
        case .number(let n), .date(let n): return n
        case .symbol(let s): return "'\(s)'"
        case .end: return "the end of the predicate"
        }
    }

    private func peek(_ offset: Int = 0) -> Unicode.Scalar? {
        index + offset < scalars.count ? scalars[index + offset] : nil
    }

    private static func isIdentifierStart(_ c: Unicode.Scalar) -> Bool {
        (c >= "A" && c <= "Z") || (c >= "a" && c <= "z") || c == "_"
    }

    private static func isDigit(_ c: Unicode.Scalar?) -> Bool {
        guard let c else { return false }
        return c >= "0" && c <= "9"
    }

    private mutating func advance() throws(PredicateError) {
        while let c = peek(), c == " " || c == "\t" || c == "\n" || c == "\r" { index += 1 }
        tokenColumn = index + 1
        guard let c = peek() else {
            token = .end
            return
        }
        if PredicateParser.isIdentifierStart(c) {
            var word = ""
            while let d = peek(), PredicateParser.isIdentifierStart(d) || PredicateParser.isDigit(d) {
                word.unicodeScalars.append(d)
                index += 1
            }
            token = .identifier(word)
        } else if c == "\"" && !(peek(1).map { $0 == "\"" } ?? false) && isQuotedIdentifierAhead() {
            index += 1
            var word = ""
            while let d = peek(), d != "\"" {
                word.unicodeScalars.append(d)
                index += 1
            }
            index += 1
            token = .identifier(word)
        } else if c == "'" || c == "\"" || c == "\u{2018}" || c == "\u{201C}" {
            let close: Unicode.Scalar = c == "\u{2018}" ? "\u{2019}" : c == "\u{201C}" ? "\u{201D}" : c
            index += 1
            var text = ""
            while true {
                guard let d = peek() else {
                    throw PredicateError(column: tokenColumn, message: "text starting here is not closed with \(close)")
                }
                index += 1
                if d == "\\", let next = peek() {
                    text.unicodeScalars.append(next)
                    index += 1
                } else if d == close {
                    if peek() == close {
                        text.unicodeScalars.append(close)
                        index += 1
                    } else {
                        break
                    }
                } else {
                    text.unicodeScalars.append(d)
                }
            }
            token = .string(text)
        } else if PredicateParser.isDigit(c) || ((c == "-" || c == "+") && PredicateParser.isDigit(peek(1))) {
            let start = index
            index += 1
            while let d = peek(), PredicateParser.isDigit(d) { index += 1 }
            if peek() == "-" && index - start >= 4 {
                // A date: read up to the next separator.
                while let d = peek(), !(d == " " || d == "," || d == ")" || d == "]" || d == "}" || d == "\t") {
                    index += 1
                }
                token = .date(String(String.UnicodeScalarView(scalars[start..<index])))
                return
            }
            if peek() == ".", PredicateParser.isDigit(peek(1)) {
                index += 1
                while let d = peek(), PredicateParser.isDigit(d) { index += 1 }
            }
            if let e = peek(), e == "e" || e == "E" {
                let save = index
                index += 1
                if let s = peek(), s == "+" || s == "-" { index += 1 }
                if PredicateParser.isDigit(peek()) {
                    while let d = peek(), PredicateParser.isDigit(d) { index += 1 }
                } else {
                    index = save
                }
            }
            token = .number(String(String.UnicodeScalarView(scalars[start..<index])))
        } else {
            let two = peek(1).map { String(c) + String($0) } ?? ""
            if ["==", "!=", "<>", "<=", ">=", "&&"].contains(two) {
                index += 2
                token = .symbol(two)
            } else if "=<>[](){},".unicodeScalars.contains(c) {
                index += 1
                token = .symbol(String(c))
            } else {
                throw PredicateError(column: tokenColumn, message: "unexpected character '\(c)'")
            }
        }
    }

    /// A double-quoted word followed by an operator is a quoted field name ("grant" == 1);
    /// anywhere else double quotes hold text.
    private func isQuotedIdentifierAhead() -> Bool {
        var i = index + 1
        while i < scalars.count, scalars[i] != "\"" {
            let c = scalars[i]
            if !(PredicateParser.isIdentifierStart(c) || PredicateParser.isDigit(c)) { return false }
            i += 1
        }
        guard i < scalars.count else { return false }
        i += 1
        while i < scalars.count, scalars[i] == " " { i += 1 }
        guard i < scalars.count else { return false }
        let c = scalars[i]
        if "=!<>".unicodeScalars.contains(c) { return true }
        let rest = String(String.UnicodeScalarView(scalars[i...])).uppercased()
        return rest.hasPrefix("IN") || rest.hasPrefix("BEGINSWITH") || rest.hasPrefix("CONTAINS")
    }
}
