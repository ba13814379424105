import Crypto
import Formats
import Foundation
import Records
import StoreCore

/// Calendar subscription feeds: a named selection of the store (a predicate, record types, a
/// calendar mapping, a time zone) that ``FeedServer`` serves at `/feeds/NAME.ics` to whoever
/// holds one of its tokens. Phones subscribe to the feed's address (Apple Calendar, Google
/// Calendar and Outlook fetch it again every few minutes or hours), so a family's calendar stays
/// current without anyone exporting a file again.
///
/// A feed lives in the store (connector state of kind `feed`), so it moves with the store. The
/// store keeps only the SHA-256 of each token: a copy of the store, or a backup of it, holds no
/// token that opens a feed.
public enum Feeds {
    /// The kind of connector state feeds are kept under.
    public static let stateKind = "feed"
    static let definitionKey = ""
    static let tokenPrefix = "token:"

    /// What a feed shows.
    public struct Definition: Codable, Sendable, Equatable {
        /// Only these record types (empty: every type the mapping has a component for).
        public var recordTypes: [String]
        /// Only this database scope, and zones of this name.
        public var scope: DatabaseScope?
        public var zone: String?
        /// The predicate, as `--where` takes it.
        public var predicate: String?
        /// The calendar mapping's text (YAML or JSON), kept whole so that the feed does not
        /// depend on a file, and where it came from (for messages).
        public var mapping: String
        public var mappingSource: String
        /// The IANA time zone times are written in (nil: UTC).
        public var timeZone: String?
        /// Records the mapping calls cancelled are written with STATUS:CANCELLED rather than
        /// left out, so that a subscriber's copy of a cancelled event says so.
        public var includeCancelled: Bool
        /// When the feed was made, in milliseconds: the DTSTAMP of a record without times.
        public var created: Int64

        public init(
            recordTypes: [String] = [], scope: DatabaseScope? = nil, zone: String? = nil, predicate: String? = nil,
            mapping: String, mappingSource: String,
            timeZone: String? = nil, includeCancelled: Bool = false,
            created: Int64 = Int64(Date().timeIntervalSince1970 * 1000)
        ) {
            self.recordTypes = recordTypes
            self.scope = scope
            self.zone = zone
            self.predicate = predicate
            self.mapping = mapping
            self.mappingSource = mappingSource
            self.timeZone = timeZone
            self.includeCancelled = includeCancelled
            self.created = created
        }

        /// Whether `other` selects the same (its creation time aside).
        public func selectsSame(as other: Definition) -> Bool {
            var other = other
            other.created = created
            return self == other
        }
    }

    /// A subscriber's token as the store keeps it: never the token, only its SHA-256.
    public struct Token: Codable, Sendable, Equatable {
        /// A short name for it (the first twelve hex digits of the hash): what `list` shows
        /// and `revoke` takes.
        public var id: String
        public var sha256: String
        /// Who it is for, as the one who added it said.
        public var label: String?
        public var created: Int64
    }

    /// A feed: its name, what it selects and who may read it.
    public struct Feed: Sendable, Equatable {
        public var name: String
        public var definition: Definition
        public var tokens: [Token]
    }

    /// A feed as `calendar feed list --json` prints it: what it shows, and each token's id,
    /// label and creation time (never the token, nor its hash).
    public struct Listing: Encodable, Sendable {
        public struct Token: Encodable, Sendable {
            public var id: String
            public var label: String?
            public var created: String
        }

        public var name: String
        public var path: String
        public var recordTypes: [String]
        public var scope: String?
        public var zone: String?
        public var `where`: String?
        public var mapping: String
        public var tz: String?
        public var includeCancelled: Bool
        public var tokens: [Token]

        public init(_ feed: Feed) {
            let definition = feed.definition
            name = feed.name
            path = "/feeds/\(feed.name).ics"
            recordTypes = definition.recordTypes
            scope = definition.scope?.rawValue
            zone = definition.zone
            `where` = definition.predicate
            mapping = definition.mappingSource
            tz = definition.timeZone
            includeCancelled = definition.includeCancelled
            tokens = feed.tokens.map {
                Token(id: $0.id, label: $0.label, created: ISO8601.format(milliseconds: $0.created))
            }
        }
    }

    /// A new subscriber's token: shown once, then only its hash is kept.
    public struct NewToken: Sendable {
        public var feed: String
        public var id: String
        /// The secret itself, for the subscriber's address (`/feeds/NAME.ics?token=…`).
        public var token: String
        /// The address's path and query, to put after the server's base URL.
        public var path: String
        /// Whether the feed was made by this call (rather than given another subscriber).
        public var madeFeed: Bool
    }

    /// Why a feed operation refused.
    public enum FeedError: CKPortError, Equatable {
        /// A feed name that an address cannot carry plainly.
        case badName(String)
        /// No feed of that name.
        case noSuchFeed(String, known: [String])
        /// A new feed was asked for without saying what it shows.
        case noDefinition(String)
        /// The feed exists and selects something else.
        case definedOtherwise(String)
        /// No token of the feed matches.
        case noSuchToken(feed: String, token: String)

        public var category: ErrorCategory {
            switch self {
            case .badName, .noSuchFeed, .noSuchToken, .noDefinition, .definedOtherwise: .usage
            }
        }

        public var description: String { explanation.description }

        public var explanation: Message {
            switch self {
            case .badName(let name):
                return
                    "\(name) is not a feed name: use 1 to 64 letters, digits, '-' and '_' (it is part of the feed's address)"
            case .noSuchFeed(let name, let known):
                return
                    "the store has no feed named \(name)\(known.isEmpty ? " (it has none)" : " (it has \(known.joined(separator: ", ")))")"
            case .noDefinition(let name):
                return "the store has no feed named \(name) yet: say what it shows (a mapping, or the sample app's)"
            case .definedOtherwise(let name):
                return
                    "the feed \(name) already selects something else: remove it first, or give it another name (adding a subscriber to it needs no selection)"
            case .noSuchToken(let feed, let token):
                return "the feed \(feed) has no token \(token) (list shows each token's id)"
            }
        }
    }

    /// Whether `name` may name a feed: it is part of the address, so plain ASCII.
    public static func isValidName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { $0.isASCIILetterOrDigit || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }

    /// The feed `name` with its tokens, or nil.
    public static func feed(named name: String, in session: any RecordSession) throws -> Feed? {
        guard let definition = try session.connectorHead(Definition.self, kind: stateKind, name: name) else {
            return nil
        }
        let tokens = try session.connectorEntries(Token.self, kind: stateKind, name: name, prefix: tokenPrefix).map(
            \.value)
        return Feed(name: name, definition: definition, tokens: tokens.sorted { $0.created < $1.created })
    }

    /// Every feed of the store, by name.
    public static func list(in store: some RecordStoring) throws -> [Feed] {
        try store.readSession { session in
            try session.connectorStateNames(kind: stateKind).compactMap { try feed(named: $0, in: session) }
        }
    }

    /// Gives the feed `name` a new subscriber token, making the feed from `definition` when the
    /// store has none of that name. `check` is handed the definition before anything is
    /// written (it throws when the mapping or predicate does not fit the store).
    public static func add(
        _ name: String, definition: Definition?, label: String? = nil, in store: some RecordStoring
    ) throws -> NewToken {
        guard isValidName(name) else { throw FeedError.badName(name) }
        if let definition { try check(definition, store: store) }
        let token = newSecret()
        let hash = sha256Hex(token)
        let id = String(hash.prefix(12))
        let made = try store.writeSession(dryRun: false) { session -> Bool in
            let existing = try feed(named: name, in: session)
            if let existing {
                if let definition, !definition.selectsSame(as: existing.definition) {
                    throw FeedError.definedOtherwise(name)
                }
            } else {
                guard let definition else { throw FeedError.noDefinition(name) }
                try session.saveConnectorState(
                    try json(definition), kind: stateKind, name: name, key: definitionKey)
            }
            let entry = Token(
                id: id, sha256: hash, label: label, created: Int64(Date().timeIntervalSince1970 * 1000))
            try session.saveConnectorState(try json(entry), kind: stateKind, name: name, key: tokenPrefix + id)
            return existing == nil
        }
        return NewToken(feed: name, id: id, token: token, path: "/feeds/\(name).ics?token=\(token)", madeFeed: made)
    }

    /// Revokes one token of the feed: by its id, or by the token itself. A running server
    /// refuses it from its next request.
    @discardableResult
    public static func revoke(_ name: String, token: String, in store: some RecordStoring) throws -> Token {
        try store.writeSession(dryRun: false) { session in
            guard let feed = try feed(named: name, in: session) else {
                throw FeedError.noSuchFeed(name, known: try session.connectorStateNames(kind: stateKind))
            }
            let hash = sha256Hex(token)
            guard let match = feed.tokens.first(where: { $0.id == token || $0.sha256 == hash }) else {
                // The argument may be the secret itself: never repeat it.
                throw FeedError.noSuchToken(feed: name, token: token.count > 16 ? "given" : token)
            }
            try session.saveConnectorState(nil, kind: stateKind, name: name, key: tokenPrefix + match.id)
            return match
        }
    }

    /// Removes the feed and every token of it.
    public static func remove(_ name: String, in store: some RecordStoring) throws {
        try store.writeSession(dryRun: false) { session in
            guard try feed(named: name, in: session) != nil else {
                throw FeedError.noSuchFeed(name, known: try session.connectorStateNames(kind: stateKind))
            }
            try session.removeConnectorState(kind: stateKind, name: name)
        }
    }

    /// The export request that writes the feed: the same iCalendar `export` writes for the same
    /// selection, with each component's DTSTAMP and SEQUENCE from its record (see
    /// `ICalExportOptions.revisionsFromRecords`), so that the same store gives the same bytes.
    public static func request(for definition: Definition, schema: Schema) throws -> ExportRequest {
        let mapping = try CalendarMapping.parse(definition.mapping, file: definition.mappingSource, schema: schema)
        var query = RecordQuery(recordTypes: definition.recordTypes, scope: definition.scope, zoneName: definition.zone)
        if let text = definition.predicate {
            query.predicate = try RecordPredicate.parse(text)
            query.predicateText = text
        }
        var settings = FormatSettings()
        settings[CalendarWriteSettings.self] = CalendarWriteSettings(
            mapping: mapping,
            options: ICalExportOptions(
                timeZone: definition.timeZone.flatMap(TimeZone.init(identifier:)), dtstamp: definition.created,
                includeCancelled: definition.includeCancelled, revisionsFromRecords: true, allowsEmpty: true))
        return ExportRequest(query: query, format: .iCalendar, settings: settings)
    }

    /// Writes the feed's calendar into `path`, as a server answers it.
    public static func write(
        _ definition: Definition, from store: some RecordStoring, to path: String
    ) throws -> ExportResult {
        try Exports.records(
            from: store, to: .file(path), request: try request(for: definition, schema: store.schema))
    }

    /// Checks that the definition's mapping, predicate and time zone fit the store.
    static func check(_ definition: Definition, store: some RecordStoring) throws {
        let request = try request(for: definition, schema: store.schema)
        guard let mapping = request.settings[CalendarWriteSettings.self]?.mapping else { return }
        _ = try store.readSession { session in
            try ICalendarExporter(session: session, mapping: mapping, options: ICalExportOptions()).queries(
                request.query)
        }
    }

    // MARK: Tokens

    /// 32 random bytes as base64url without padding: 43 characters an address carries as they are.
    static func newSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func sha256Hex(_ text: String) -> String {
        SHA256.hash(data: Data(text.utf8)).hexDigits
    }

    /// Whether `presented` is one of `tokens`, comparing its hash with every token's hash in
    /// time that depends only on the number of tokens, never on where they differ.
    public static func admits(_ presented: String, _ tokens: [Token]) -> Bool {
        let hash = Array(sha256Hex(presented).utf8)
        var found: UInt8 = 0
        for token in tokens {
            let stored = Array(token.sha256.utf8)
            var difference: UInt8 = stored.count == hash.count ? 0 : 1
            for index in 0..<min(stored.count, hash.count) { difference |= stored[index] ^ hash[index] }
            found |= difference == 0 ? 1 : 0
        }
        return found == 1
    }

    static func json<Value: Encodable>(_ value: Value) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}

extension UInt8 {
    fileprivate var isASCIILetterOrDigit: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
    }
}
