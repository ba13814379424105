import Formats
import Foundation
import Records
import StoreCore

/// Importing records from files into a store.
public enum Imports {}

/// One input of an import and the format it is read in.
public struct ImportInput {
    public var input: RecordInput
    public var format: RecordFormat

    public init(_ input: RecordInput, format: RecordFormat) {
        self.input = input
        self.format = format
    }

    /// A file (or `-`, standard input) in `format`; without one, in the format its name says,
    /// else the one its first bytes show (CSV, TSV, iCalendar), else JSON of either layout.
    public static func file(_ path: String, format: RecordFormat? = nil) -> ImportInput {
        ImportInput(.file(path), format: format ?? RecordFormats.forPath(path) ?? sniffed(path) ?? .jsonDetectingLayout)
    }

    private static func sniffed(_ path: String) -> RecordFormat? {
        guard path != "-", let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let head = try? handle.read(upToCount: 4096), let format = RecordFormats.sniff(Array(head)) else {
            return nil
        }
        // JSON of either layout is read by detecting it anyway.
        return format == .json || format == .jsonLines ? nil : format
    }
}

/// What an import reads and how it writes.
public struct ImportRequest {
    public var inputs: [ImportInput]
    /// A schema to import first (a schema file given with the records); nil: the store's.
    public var schema: Schema?
    /// The write mode, whether new fields may be added, invalid records skipped, a dry run.
    public var options: ImportOptions
    /// The record type of records that name none.
    public var defaultRecordType: String?
    /// The zone of records that name none.
    public var defaultZone: ZoneID
    /// The time zone of times written without an offset, and of floating calendar times.
    public var timeZone: TimeZone?
    /// Settings of particular formats (`CSVReadSettings`, `CalendarReadSettings`…).
    public var settings: FormatSettings
    /// Refuse the whole import when an input holds something the records would not keep.
    public var strict: Bool
    /// Where rejected records go (with `ImportOptions.skipInvalid`): finished when the import
    /// succeeds, discarded when it fails.
    public var rejects: RejectsWriter?
    /// Runs in the import's transaction after the last record, before it commits (throwing
    /// rolls the whole import back): what must commit with the records, such as where a pull
    /// got to.
    public var finishing: ((any RecordSession) throws -> Void)?
    /// Read the inputs one after another, each reader made when the one before is done: for
    /// many small inputs (memory stays that of one reader). The readers after the first are
    /// made inside the import's transaction, so their format must look up what it needs from
    /// the store once per import (iCalendar does) and add no record types of its own (a
    /// calendar archive does).
    public var oneReaderAtATime = false

    public init(
        inputs: [ImportInput], schema: Schema? = nil, options: ImportOptions = ImportOptions(),
        defaultRecordType: String? = nil, defaultZone: ZoneID = .defaultZone, timeZone: TimeZone? = nil,
        settings: FormatSettings = FormatSettings(), strict: Bool = false, rejects: RejectsWriter? = nil
    ) {
        self.inputs = inputs
        self.schema = schema
        self.options = options
        self.defaultRecordType = defaultRecordType
        self.defaultZone = defaultZone
        self.timeZone = timeZone
        self.settings = settings
        self.strict = strict
        self.rejects = rejects
    }
}

/// A format was asked to read that ckport only writes.
public struct FormatNotReadable: CKPortError, Sendable {
    public var format: String
    public var file: String
    public var category: ErrorCategory { .usage }
    public var description: String { "\(file): ckport writes \(format) but does not read it" }
}

extension Imports {
    /// Imports every input in one transaction: all of it, or — when any record is invalid and
    /// invalid records are not skipped, or the import is interrupted — nothing.
    public static func run<Store: RecordStoring>(
        _ request: ImportRequest, into store: Store, progress: ProgressHandler? = nil
    ) throws -> ImportSummary {
        let schema = try request.schema ?? store.loadSchema()
        let context = RecordReadContext(
            schema: schema, defaultRecordType: request.defaultRecordType, defaultZone: request.defaultZone,
            timeZone: request.timeZone, allowNewFields: request.options.allowNewFields, store: store,
            settings: request.settings)
        let makers = try request.inputs.map { input -> () throws -> RecordSource in
            guard let make = input.format.makeReader else {
                throw FormatNotReadable(format: input.format.title, file: input.input.name)
            }
            return { try make(input.input, context) }
        }
        let sources: [RecordSource] =
            request.oneReaderAtATime && makers.count > 1
            ? [try ChainedSource(name: request.inputs[0].input.name, makers: makers)] : try makers.map { try $0() }
        // Records need a schema to be checked against, unless they bring their own types.
        var added: [RecordTypeDefinition] = []
        for case let source as SchemaExtendingSource in sources {
            for type in source.addedRecordTypes where !added.contains(where: { $0.name == type.name }) {
                added.append(type)
            }
        }
        if request.schema == nil && !request.options.allowNewFields && added.isEmpty && !sources.isEmpty
            && schema.recordTypes.isEmpty
        {
            throw OperationError.noSchema(store: store.location, storeExists: true)
        }
        var hooks = ImportHooks(rejects: request.rejects, addingTypes: added)
        let reporting = request.strict ? sources.compactMap { $0 as? LossReportingSource } : []
        let finishing = request.finishing
        if request.strict || finishing != nil {
            hooks.finishing = { session in
                let items = reporting.flatMap(\.notKeptItems)
                guard items.isEmpty else { throw OperationError.inputNotKept(items) }
                try finishing?(session)
            }
        }
        if let progress {
            hooks.progress = {
                progress(OperationProgress(records: $0.records, done: $0.bytesRead, total: $0.totalBytes))
            }
        }
        do {
            let summary = try store.importRecords(
                sources, schema: request.schema, options: request.options, hooks: hooks)
            try request.rejects?.finish()
            return summary
        } catch {
            request.rejects?.discard()
            throw error
        }
    }
}
