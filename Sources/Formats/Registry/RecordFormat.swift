import Foundation
import Records
import StoreCore

/// One file format ckport reads or writes records in: its names, its file extensions, how to
/// recognise it from its first bytes, and how to make its reader and writer. Each format
/// declares itself beside its reader (`Formats/JSON/JSONFormat.swift`…) and is listed once in
/// ``RecordFormats/all``; the operations, the command line, the fuzz targets and the tests
/// take formats from there.
public struct RecordFormat: Sendable, Hashable, CustomStringConvertible {
    /// How records and a format's files correspond.
    public enum Kind: Sendable, Hashable {
        /// A file holds records, one after another (JSON, CSV…).
        case records
        /// A file holds calendars, read and written through a calendar mapping between
        /// components and record types (iCalendar…).
        case calendar
    }

    /// Writes what a query selects straight from a store's transaction into `output`, for a
    /// format whose files are not a stream of records (a calendar groups each event with its
    /// attendees and alarms). Commits `output` when done; says what it wrote.
    public typealias StoreExporter =
        @Sendable (
            _ session: any RecordSession, _ query: RecordQuery, _ output: OutputFile,
            _ context: RecordWriteContext
        ) throws -> FormatExportSummary

    /// The names a program or the command line gives the format by; the first is its own.
    public let names: [String]
    /// File name endings (without the dot) that mean this format, matched without case.
    public let extensions: [String]
    /// The format's name for people: "JSON Lines".
    public let title: String
    /// What its files hold, in a few words, for help texts: "a record per line".
    public let summary: String
    /// What a file in this format is called in a sentence ("not JSON", "not an iCalendar file").
    public let noun: String
    public let kind: Kind
    /// Whether the format holds one record type per file (a header fixes its columns).
    public let oneRecordTypePerFile: Bool
    /// Whether a file of the first bytes `head` is likely in this format.
    public let sniff: @Sendable (_ head: [UInt8]) -> Bool
    /// Makes a reader of `input`; nil when ckport only writes the format.
    public let makeReader: (@Sendable (_ input: RecordInput, _ context: RecordReadContext) throws -> RecordSource)?
    /// Makes a writer into `output`; nil when records reach the format another way.
    public let makeWriter: (@Sendable (_ output: OutputFile, _ context: RecordWriteContext) throws -> RecordSink)?
    /// Exports from a store's transaction, for a format without a record writer.
    public let exportFromStore: StoreExporter?

    public init(
        names: [String], extensions: [String], title: String, summary: String, noun: String, kind: Kind = .records,
        oneRecordTypePerFile: Bool = false,
        sniff: @escaping @Sendable ([UInt8]) -> Bool,
        makeReader: (@Sendable (RecordInput, RecordReadContext) throws -> RecordSource)?,
        makeWriter: (@Sendable (OutputFile, RecordWriteContext) throws -> RecordSink)?,
        exportFromStore: StoreExporter? = nil
    ) {
        precondition(!names.isEmpty, "a format needs a name")
        self.names = names
        self.extensions = extensions
        self.title = title
        self.summary = summary
        self.noun = noun
        self.oneRecordTypePerFile = oneRecordTypePerFile
        self.sniff = sniff
        self.makeReader = makeReader
        self.makeWriter = makeWriter
        self.exportFromStore = exportFromStore
        self.kind = kind
    }

    /// The format's own name.
    public var name: String { names[0] }
    public var description: String { name }

    public static func == (a: RecordFormat, b: RecordFormat) -> Bool { a.name == b.name }
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }

    /// Whether `path`'s name ends in one of the format's extensions.
    public func matches(path: String) -> Bool {
        let lower = path.lowercased()
        return extensions.contains { lower.hasSuffix("." + $0) }
    }
}

/// The formats ckport knows.
public enum RecordFormats {
    /// Every format, in the order help texts list them.
    public static let all: [RecordFormat] = [.json, .jsonLines, .csv, .tsv, .iCalendar, .xCal, .propertyList]

    /// The format with this name (or one of its other names), if any.
    public static func named(_ name: String) -> RecordFormat? {
        let lower = name.lowercased()
        return all.first { $0.names.contains(lower) }
    }

    /// Every name a format can be given by, in order.
    public static var allNames: [String] { all.flatMap(\.names) }

    /// The format a file's name says, if any.
    public static func forPath(_ path: String) -> RecordFormat? {
        all.first { $0.matches(path: path) }
    }

    /// The format whose sniffing recognises `head`, the first bytes of a file, if exactly
    /// one does.
    public static func sniff(_ head: [UInt8]) -> RecordFormat? {
        let matching = all.filter { $0.sniff(head) }
        return matching.count == 1 ? matching[0] : nil
    }
}

/// Sniffing helpers the formats share.
enum Sniffing {
    /// The first byte that is not white space (after a UTF-8 byte order mark), if any.
    static func firstSignificantByte(_ head: [UInt8]) -> UInt8? {
        var bytes = head[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        return bytes.first { !$0.isASCIIWhitespace }
    }

    /// The first line, without its line break.
    static func firstLine(_ head: [UInt8]) -> ArraySlice<UInt8> {
        var bytes = head[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        let end = bytes.firstIndex { $0 == 0x0A || $0 == 0x0D } ?? bytes.endIndex
        return bytes[..<end]
    }
}

extension UInt8 {
    fileprivate var isASCIIWhitespace: Bool { self == 0x20 || self == 0x09 || self == 0x0A || self == 0x0D }
}
