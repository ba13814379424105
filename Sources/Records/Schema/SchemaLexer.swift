/// A position in a text file, 1-based.
public struct TextPosition: Hashable, Sendable, CustomStringConvertible {
    public var line: Int
    public var column: Int

    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    public var description: String { "\(line):\(column)" }
}

struct SchemaToken: Sendable {
    enum Kind: Equatable, Sendable {
        /// A bare word: a keyword or an unquoted name.
        case word(String)
        /// A double-quoted name.
        case quoted(String)
        case punctuation(Character)
        case end
    }

    var kind: Kind
    var position: TextPosition

    /// How the token reads in an error message.
    var display: String {
        switch kind {
        case .word(let w): return "'\(w)'"
        case .quoted(let q): return "\"\(q)\""
        case .punctuation(let c): return "'\(c)'"
        case .end: return "the end of the file"
        }
    }

    func isKeyword(_ keyword: String) -> Bool {
        if case .word(let w) = kind { return w.uppercased() == keyword }
        return false
    }
}

/// Splits schema-language text into tokens, skipping whitespace and the three comment styles
/// (`// …`, `-- …`, `/* … */`).
struct SchemaLexer {
    private let scalars: [Unicode.Scalar]
    private var index = 0
    private var line = 1
    private var column = 1

    init(_ text: String) {
        scalars = Array(text.unicodeScalars)
    }

    /// The tokens of the text, or only the first `limit` of them.
    mutating func tokenize(limit: Int = Int.max) throws(SchemaError) -> [SchemaToken] {
        var tokens: [SchemaToken] = []
        while tokens.count < limit {
            try skipTrivia()
            let start = TextPosition(line: line, column: column)
            guard let c = peek() else {
                tokens.append(SchemaToken(kind: .end, position: start))
                return tokens
            }
            if isWordStart(c) {
                var word = ""
                while let d = peek(), isWordPart(d) {
                    word.unicodeScalars.append(d)
                    advance()
                }
                tokens.append(SchemaToken(kind: .word(word), position: start))
            } else if c == "\"" {
                advance()
                var name = ""
                while true {
                    guard let d = peek() else {
                        throw SchemaError(
                            start, "a quoted name is not closed: expected '\"' before the end of the file")
                    }
                    if d == "\n" {
                        throw SchemaError(start, "a quoted name is not closed on its line: expected '\"'")
                    }
                    advance()
                    if d == "\"" {
                        if peek() == "\"" {
                            advance()
                            name.unicodeScalars.append("\"")
                        } else {
                            break
                        }
                    } else {
                        name.unicodeScalars.append(d)
                    }
                }
                tokens.append(SchemaToken(kind: .quoted(name), position: start))
            } else if "(),;<>".unicodeScalars.contains(c) {
                advance()
                tokens.append(SchemaToken(kind: .punctuation(Character(c)), position: start))
            } else {
                throw SchemaError(start, "unexpected character '\(c)'")
            }
        }
        return tokens
    }

    private mutating func skipTrivia() throws(SchemaError) {
        while let c = peek() {
            if c == " " || c == "\t" || c == "\r" || c == "\n" || c == "\u{FEFF}" {
                advance()
            } else if (c == "/" && peek(1) == "/") || (c == "-" && peek(1) == "-") {
                while let d = peek(), d != "\n" {
                    _ = d
                    advance()
                }
            } else if c == "/" && peek(1) == "*" {
                let start = TextPosition(line: line, column: column)
                advance()
                advance()
                while true {
                    guard let d = peek() else {
                        throw SchemaError(
                            start, "a '/*' comment is not closed: expected '*/' before the end of the file")
                    }
                    if d == "*" && peek(1) == "/" {
                        advance()
                        advance()
                        break
                    }
                    advance()
                }
            } else {
                return
            }
        }
    }

    private func peek(_ offset: Int = 0) -> Unicode.Scalar? {
        index + offset < scalars.count ? scalars[index + offset] : nil
    }

    private mutating func advance() {
        if scalars[index] == "\n" {
            line += 1
            column = 1
        } else {
            column += 1
        }
        index += 1
    }

    private func isWordStart(_ c: Unicode.Scalar) -> Bool {
        (c >= "A" && c <= "Z") || (c >= "a" && c <= "z") || c == "_"
    }

    private func isWordPart(_ c: Unicode.Scalar) -> Bool {
        isWordStart(c) || (c >= "0" && c <= "9")
    }
}
