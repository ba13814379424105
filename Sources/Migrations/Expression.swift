import Records

/// A small expression over a record's own fields, for `setField`:
///
///     startTime + durationSeconds * 1000
///     coalesce(nickname, firstName + " " + lastName)
///     'v' + _appVersion
///
/// Numbers (`42`, `2.5`), text in single or double quotes, `null`, field names, `+ - * / %`,
/// parentheses and `coalesce(a, b, …)` (the first value that is not null). `+` joins text
/// when either side is text. A TIMESTAMP plus or minus a number is a TIMESTAMP (milliseconds);
/// a TIMESTAMP minus a TIMESTAMP is their distance in milliseconds. `/` of two whole numbers
/// divides whole (as SQL does). A field without a value is null, and null spreads through
/// arithmetic, so `coalesce` is how a default is given.
public indirect enum Expression: Sendable, Hashable, CustomStringConvertible {
    case literal(ExpressionValue)
    case field(String)
    case binary(Character, Expression, Expression)
    case negate(Expression)
    case coalesce([Expression])

    public var description: String {
        switch self {
        case .literal(let value): return value.literalText
        case .field(let name): return name
        case .binary(let op, let a, let b): return "(\(a) \(op) \(b))"
        case .negate(let e): return "-\(e)"
        case .coalesce(let items): return "coalesce(\(items.map(\.description).joined(separator: ", ")))"
        }
    }

    /// Every field the expression reads.
    public var fieldNames: [String] {
        switch self {
        case .literal: return []
        case .field(let name): return [name]
        case .binary(_, let a, let b): return a.fieldNames + b.fieldNames
        case .negate(let e): return e.fieldNames
        case .coalesce(let items): return items.flatMap(\.fieldNames)
        }
    }

    /// Parses an expression; the error names the column (1-based) where it went wrong.
    public static func parse(_ text: String) throws(ExpressionError) -> Expression {
        var parser = ExpressionParser(Array(text.utf8))
        let expression = try parser.expression()
        parser.skipSpaces()
        guard parser.index == parser.bytes.count else { throw parser.fail("unexpected text after the expression") }
        return expression
    }

    /// The value for `record`.
    public func evaluate(_ record: Record) throws(ExpressionError) -> ExpressionValue {
        try evaluate { record.fields[$0] }
    }

    /// The value when each field's value is what `field` gives for its name.
    public func evaluate(_ field: (String) -> FieldValue?) throws(ExpressionError) -> ExpressionValue {
        switch self {
        case .literal(let value): return value
        case .field(let name):
            guard let value = field(name) else { return .null }
            switch value {
            case .string(let s): return .string(s)
            case .int64(let i): return .int(i)
            case .double(let d): return .double(d)
            case .timestamp(let t): return .timestamp(t)
            default:
                throw ExpressionError(
                    column: 0, message: "field '\(name)' is \(value.type), which expressions cannot compute with")
            }
        case .negate(let e):
            switch try e.evaluate(field) {
            case .null: return .null
            case .int(let i): return .int(0 &- i)
            case .double(let d): return .double(-d)
            default: throw ExpressionError(column: 0, message: "only numbers can be negated (in \(self))")
            }
        case .coalesce(let items):
            for item in items {
                let value = try item.evaluate(field)
                if value != .null { return value }
            }
            return .null
        case .binary(let op, let a, let b):
            return try Expression.apply(op, try a.evaluate(field), try b.evaluate(field), in: self)
        }
    }

    private static func apply(_ op: Character, _ x: ExpressionValue, _ y: ExpressionValue, in expression: Expression)
        throws(ExpressionError) -> ExpressionValue
    {
        func fail(_ message: String) -> ExpressionError {
            ExpressionError(column: 0, message: "\(message) (in \(expression))")
        }
        if x == .null || y == .null { return .null }
        if op == "+", x.isText || y.isText { return .string(x.text + y.text) }
        switch (x, y) {
        case (.int(let a), .int(let b)):
            switch op {
            case "+":
                let (r, o) = a.addingReportingOverflow(b)
                if o { throw fail("the sum overflows INT64") }
                return .int(r)
            case "-":
                let (r, o) = a.subtractingReportingOverflow(b)
                if o { throw fail("the difference overflows INT64") }
                return .int(r)
            case "*":
                let (r, o) = a.multipliedReportingOverflow(by: b)
                if o { throw fail("the product overflows INT64") }
                return .int(r)
            case "/":
                if b == 0 { throw fail("division by zero") }
                return .int(a / b)
            default:
                if b == 0 { throw fail("division by zero") }
                return .int(a % b)
            }
        case (.int, .double), (.double, .int), (.double, .double):
            let a = x.number!
            let b = y.number!
            switch op {
            case "+": return .double(a + b)
            case "-": return .double(a - b)
            case "*": return .double(a * b)
            case "/": return .double(a / b)
            default: return .double(a.truncatingRemainder(dividingBy: b))
            }
        case (.timestamp(let t), .int(let n)) where op == "+" || op == "-":
            let (r, o) = op == "+" ? t.addingReportingOverflow(n) : t.subtractingReportingOverflow(n)
            if o { throw fail("the time overflows") }
            return .timestamp(r)
        case (.int(let n), .timestamp(let t)) where op == "+":
            let (r, o) = t.addingReportingOverflow(n)
            if o { throw fail("the time overflows") }
            return .timestamp(r)
        case (.timestamp(let t), .double(let d)) where op == "+" || op == "-":
            return .timestamp(op == "+" ? t + Int64(d.rounded()) : t - Int64(d.rounded()))
        case (.timestamp(let a), .timestamp(let b)) where op == "-":
            return .int(a &- b)
        default:
            throw fail("cannot compute \(x.kind) \(op) \(y.kind)")
        }
    }
}

/// A value inside an expression.
public enum ExpressionValue: Sendable, Hashable {
    case null
    case int(Int64)
    case double(Double)
    case string(String)
    /// Milliseconds since 1970.
    case timestamp(Int64)

    var isText: Bool { if case .string = self { return true } else { return false } }

    var number: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    var kind: String {
        switch self {
        case .null: return "null"
        case .int: return "a whole number"
        case .double: return "a number"
        case .string: return "text"
        case .timestamp: return "a time"
        }
    }

    var text: String {
        switch self {
        case .null: return ""
        case .int(let i): return String(i)
        case .double(let d): return d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
        case .string(let s): return s
        case .timestamp(let t): return ISO8601.format(milliseconds: t)
        }
    }

    var literalText: String {
        switch self {
        case .string(let s): return "'" + s.replacingOccurrences(of: "'", with: "''") + "'"
        case .null: return "null"
        default: return text
        }
    }

    /// The value as a field of `type`, or nil for null.
    public func fieldValue(as type: FieldType) throws(ExpressionError) -> FieldValue? {
        func fail() -> ExpressionError {
            ExpressionError(column: 0, message: "the result, \(kind) (\(text)), cannot be stored in a \(type) field")
        }
        guard !type.isList else { throw fail() }
        switch (self, type.primitive) {
        case (.null, _): return nil
        case (.string(let s), .string): return .string(s)
        case (.int(let i), .int64), (.timestamp(let i), .int64): return .int64(i)
        case (.int(let i), .double): return .double(Double(i))
        case (.double(let d), .double): return .double(d)
        case (.double(let d), .int64) where d == d.rounded() && abs(d) < 9.2e18: return .int64(Int64(d))
        case (.int(let i), .timestamp), (.timestamp(let i), .timestamp): return .timestamp(i)
        case (.int(let i), .number): return .int64(i)
        case (.double(let d), .number): return .double(d)
        case (_, .string): return .string(text)
        default: throw fail()
        }
    }
}

public struct ExpressionError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    /// 1-based column in the expression's text; 0 when the problem came up while computing.
    public var column: Int
    public var message: String
    public var description: String { column > 0 ? "column \(column): \(message)" : message }
}

private struct ExpressionParser {
    let bytes: [UInt8]
    var index = 0
    /// How deep parentheses, signs and `coalesce(…)` nest here, and how many operators the
    /// expression has: both are bounded, so that neither reading an expression nor evaluating
    /// or printing its tree (which recurse) can run out of stack, whatever the text.
    var nesting = 0
    var operators = 0
    static let maxNesting = 64
    static let maxOperators = 1_000

    mutating func enter() throws(ExpressionError) {
        nesting += 1
        if nesting > ExpressionParser.maxNesting {
            throw fail("the expression nests deeper than \(ExpressionParser.maxNesting) levels")
        }
    }

    mutating func countOperator() throws(ExpressionError) {
        operators += 1
        if operators > ExpressionParser.maxOperators {
            throw fail("the expression has more than \(ExpressionParser.maxOperators) operators")
        }
    }

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func fail(_ message: String) -> ExpressionError { ExpressionError(column: index + 1, message: message) }

    mutating func skipSpaces() {
        while index < bytes.count,
            bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0A || bytes[index] == 0x0D
        { index += 1 }
    }

    mutating func peek() -> UInt8? {
        skipSpaces()
        return index < bytes.count ? bytes[index] : nil
    }

    mutating func expression() throws(ExpressionError) -> Expression {
        var left = try term()
        while let c = peek(), c == UInt8(ascii: "+") || c == UInt8(ascii: "-") {
            try countOperator()
            index += 1
            left = .binary(Character(UnicodeScalar(c)), left, try term())
        }
        return left
    }

    mutating func term() throws(ExpressionError) -> Expression {
        var left = try unary()
        while let c = peek(), c == UInt8(ascii: "*") || c == UInt8(ascii: "/") || c == UInt8(ascii: "%") {
            try countOperator()
            index += 1
            left = .binary(Character(UnicodeScalar(c)), left, try unary())
        }
        return left
    }

    mutating func unary() throws(ExpressionError) -> Expression {
        if peek() == UInt8(ascii: "-") {
            try enter()
            defer { nesting -= 1 }
            index += 1
            return .negate(try unary())
        }
        return try primary()
    }

    mutating func primary() throws(ExpressionError) -> Expression {
        guard let c = peek() else { throw fail("the expression ends where a value should be") }
        if c == UInt8(ascii: "(") {
            try enter()
            defer { nesting -= 1 }
            index += 1
            let inner = try expression()
            guard peek() == UInt8(ascii: ")") else { throw fail("expected ')'") }
            index += 1
            return inner
        }
        if c == UInt8(ascii: "'") || c == UInt8(ascii: "\"") {
            index += 1
            var text: [UInt8] = []
            while true {
                guard index < bytes.count else {
                    throw fail("the text is not closed with \(Character(UnicodeScalar(c)))")
                }
                if bytes[index] == c {
                    if index + 1 < bytes.count, bytes[index + 1] == c {
                        text.append(c)
                        index += 2
                        continue
                    }
                    index += 1
                    break
                }
                text.append(bytes[index])
                index += 1
            }
            return .literal(.string(String(decoding: text, as: UTF8.self)))
        }
        if (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) || c == UInt8(ascii: ".") {
            let start = index
            while index < bytes.count,
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) || bytes[index] == UInt8(ascii: ".")
                    || bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")
            { index += 1 }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            if let i = Int64(text) { return .literal(.int(i)) }
            if let d = Double(text) { return .literal(.double(d)) }
            index = start
            throw fail("'\(text)' is not a number")
        }
        if isNameStart(c) {
            let start = index
            while index < bytes.count,
                isNameStart(bytes[index]) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index])
            { index += 1 }
            let name = String(decoding: bytes[start..<index], as: UTF8.self)
            if peek() == UInt8(ascii: "(") {
                guard name == "coalesce" else {
                    index = start
                    throw fail("unknown function '\(name)' (there is coalesce)")
                }
                try enter()
                defer { nesting -= 1 }
                index += 1
                var items: [Expression] = []
                while true {
                    items.append(try expression())
                    if peek() == UInt8(ascii: ",") {
                        index += 1
                        continue
                    }
                    guard peek() == UInt8(ascii: ")") else { throw fail("expected ',' or ')' in coalesce(…)") }
                    index += 1
                    break
                }
                return .coalesce(items)
            }
            if name == "null" { return .literal(.null) }
            return .field(name)
        }
        throw fail("unexpected '\(Character(UnicodeScalar(c)))'")
    }

    func isNameStart(_ c: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(c) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(c)
            || c == UInt8(ascii: "_")
    }
}
