/// What an error or a note says, with the settings and remedies it mentions kept as
/// ``Wording``s rather than words: the library never decides how a front end names its
/// settings. ``description`` says it in the library's own words; a front end says it its way,
/// once, where it shows it (``worded(_:)``).
///
/// Written as a string literal, with ``Wording``s and other messages interpolated:
///
/// ```swift
/// let message: Message = "record type 'Task' has no field 'due' (\(Wording.allowNewFields))"
/// ```
public struct Message: Sendable, Hashable, Codable, CustomStringConvertible, CustomDebugStringConvertible,
    ExpressibleByStringInterpolation
{
    /// A run of words, or a wording the front end chooses the words for.
    public enum Part: Sendable, Hashable, Codable {
        case text(String)
        case wording(Wording)
    }

    /// The message's parts, in order; adjacent text is joined into one part.
    public private(set) var parts: [Part]

    public init(_ text: String) {
        parts = text.isEmpty ? [] : [.text(text)]
    }

    public init(_ wording: Wording) {
        parts = [.wording(wording)]
    }

    public init(stringLiteral value: String) {
        self.init(value)
    }

    public init(stringInterpolation: StringInterpolation) {
        parts = stringInterpolation.message.parts
    }

    /// The message with each wording said by `words`, or in the library's words where `words`
    /// returns nil.
    public func worded(_ words: (Wording) -> String?) -> String {
        var out = ""
        for part in parts {
            switch part {
            case .text(let text): out += text
            case .wording(let wording): out += words(wording) ?? wording.dataText
            }
        }
        return out
    }

    /// The message in the library's words.
    public var description: String { worded { _ in nil } }

    public var debugDescription: String { description.debugDescription }

    public var isEmpty: Bool { parts.isEmpty }

    /// Whether the message, in the library's words, contains `text`.
    public func contains(_ text: some StringProtocol) -> Bool { description.contains(text) }

    /// Whether the message, in the library's words, starts with `text`.
    public func hasPrefix(_ text: String) -> Bool { description.hasPrefix(text) }

    /// Whether the message mentions `wording`.
    public func mentions(_ wording: Wording) -> Bool { parts.contains(.wording(wording)) }

    /// The message with every mention of `wording` replaced by `other`.
    public func replacing(_ wording: Wording, with other: Wording) -> Message {
        var copy = self
        copy.parts = parts.map { $0 == .wording(wording) ? .wording(other) : $0 }
        return copy
    }

    public mutating func append(_ other: Message) {
        for part in other.parts { append(part) }
    }

    public mutating func append(_ text: String) {
        append(.text(text))
    }

    private mutating func append(_ part: Part) {
        if case .text(let more) = part {
            if more.isEmpty { return }
            if case .text(let last)? = parts.last {
                parts[parts.count - 1] = .text(last + more)
                return
            }
        }
        parts.append(part)
    }

    public static func + (lhs: Message, rhs: Message) -> Message {
        var joined = lhs
        joined.append(rhs)
        return joined
    }

    public static func += (lhs: inout Message, rhs: Message) {
        lhs.append(rhs)
    }

    /// `messages` with `separator` between each two.
    public static func joined(_ messages: some Sequence<Message>, separator: String) -> Message {
        var joined = Message("")
        var first = true
        for message in messages {
            if !first { joined.append(separator) }
            joined.append(message)
            first = false
        }
        return joined
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        fileprivate var message = Message("")

        public init(literalCapacity: Int, interpolationCount: Int) {}

        public mutating func appendLiteral(_ literal: String) {
            message.append(literal)
        }

        public mutating func appendInterpolation(_ wording: Wording) {
            message.append(.wording(wording))
        }

        public mutating func appendInterpolation(_ other: Message) {
            message.append(other)
        }

        public mutating func appendInterpolation(_ value: some Any) {
            message.append(String(describing: value))
        }
    }
}

extension CKPortError {
    public var explanation: Message { Message(description) }
}

/// How messages write numbers.
public enum Counts {
    /// `1234567` → `1,234,567`: the same in every locale, as a log or a test reads it.
    public static func grouped(_ n: Int) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (index, character) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(character)
        }
        return n < 0 ? "-" + out : out
    }
}

extension DefaultStringInterpolation {
    /// A message put into a string says whose words it uses: `message.description` (the
    /// library's) or `message.worded(…)` (a front end's).
    @available(*, deprecated, message: "say whose words: message.description, or message.worded(_:)")
    public mutating func appendInterpolation(_ message: Message) {
        appendLiteral(message.description)
    }
}
