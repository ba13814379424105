import Formats
import Foundation
import Records
import StoreCore

/// Exporting records from a store into files, and calendars into iCalendar.
public enum Exports {}

/// Where an export writes.
public enum ExportDestination: Equatable, Sendable {
    /// One file, or standard output for `-`.
    case file(String)
    /// A folder, with a file per record type (for a format that holds one type per file).
    case directory(String)
}

/// What an export writes.
public struct ExportRequest {
    /// The records: types, scope, zone, predicate, sort and limit.
    public var query: RecordQuery
    /// Export what changed after this token instead, deletions as tombstones (JSON only):
    /// `query`'s types, scope and zone apply.
    public var since: ChangeToken?
    public var format: RecordFormat
    /// The time zone times are written in, where the format has local times (CSV).
    public var timeZone: TimeZone?
    /// Settings of the format (`JSONWriteSettings`, `CSVWriteOptions`…).
    public var settings: FormatSettings
    /// Also write the asset files the records name into this folder, as `DIR/<sha256>`.
    public var assetDirectory: String?

    public init(
        query: RecordQuery = RecordQuery(), since: ChangeToken? = nil, format: RecordFormat = .jsonLines,
        timeZone: TimeZone? = nil, settings: FormatSettings = FormatSettings(), assetDirectory: String? = nil
    ) {
        self.query = query
        self.since = since
        self.format = format
        self.timeZone = timeZone
        self.settings = settings
        self.assetDirectory = assetDirectory
    }
}

/// What an export wrote.
public struct ExportResult {
    public struct File: Equatable, Sendable {
        public var path: String
        /// The record type of a format that holds one type per file.
        public var recordType: String?
        public var records: Int
    }

    public var files: [File]
    public var records: Int { files.reduce(0) { $0 + $1.records } }
    /// The store's change token when the records were read: pass it as `since` next time.
    public var token: ChangeToken
    /// The asset files written, when an asset folder was given.
    public var assets: AssetFolderWriter?
    /// For a format that exports from the store (a calendar): what it wrote, in its terms.
    public var summary: FormatExportSummary?
}

extension Exports {
    /// Writes the records `request` selects, all from one state of the store. Each file is
    /// written under a temporary name and moved into place only when complete; a folder the
    /// export created is removed again when it fails.
    public static func records<Store: RecordStoring>(
        from store: Store, to destination: ExportDestination, request: ExportRequest,
        progress: ProgressHandler? = nil
    ) throws -> ExportResult {
        guard let makeWriter = request.format.makeWriter else {
            guard let export = request.format.exportFromStore else {
                throw OperationError.formatCannotHold(
                    format: request.format.title, what: "records: ckport reads it but does not write it")
            }
            return try fromStore(store, to: destination, request: request, export: export)
        }
        if request.format.oneRecordTypePerFile {
            return try perTypeFiles(
                from: store, to: destination, request: request, makeWriter: makeWriter, progress: progress)
        }
        guard case .file(let path) = destination else {
            throw OperationError.formatCannotHold(
                format: request.format.title, what: "a file per record type: write one file")
        }
        // A plain record and a property list put fields beside the system keys.
        if request.settings[JSONWriteSettings.self]?.style == .plain || request.format == .propertyList {
            let collisions = JSONRecordCodec.plainCollisions(
                in: store.schema, types: request.query.recordTypes.isEmpty ? nil : request.query.recordTypes)
            if !collisions.isEmpty { throw OperationError.plainStyleCollisions(collisions) }
        }
        let assetFiles = request.assetDirectory.map { AssetFolderWriter(directory: $0) }
        var written = 0
        if request.format == .jsonLines && request.since == nil && assetFiles == nil
            && request.settings.get(JSONWriteSettings.self, default: JSONWriteSettings()).style == .canonical,
            let result = try rowExport(from: store, to: path, query: request.query, progress: progress)
        {
            return result
        }
        let token = try store.read { session in
            let context = RecordWriteContext(
                schema: session.schema, timeZone: request.timeZone, settings: request.settings)
            let writer = try makeWriter(try OutputFile(path: path), context)
            // The count is one quick pass over the primary keys; only for someone listening.
            let total = progress != nil && request.since == nil ? try session.count(request.query) : nil
            let token = try Exports.stream(into: BackgroundSink(writer), progress: progress, total: total) { emit in
                let collect: (Record) throws -> Void = { record in
                    assetFiles?.note(record)
                    try emit(record)
                    written += 1
                }
                if let since = request.since {
                    try session.forEachChange(
                        since: since, recordTypes: request.query.recordTypes, scope: request.query.scope,
                        zoneName: request.query.zoneName, collect)
                } else {
                    try session.forEach(request.query, collect)
                }
                return session.currentToken
            }
            try assetFiles?.write(from: session)
            return token
        }
        return ExportResult(
            files: [ExportResult.File(path: path, recordType: nil, records: written)], token: token, assets: assetFiles)
    }

    /// Canonical JSON Lines written straight from the store's rows (``CanonicalJSONReading``),
    /// the same bytes as the general path without a record between row and text; nil when the
    /// store cannot or the query sorts.
    private static func rowExport<Store: RecordStoring>(
        from store: Store, to path: String, query: RecordQuery,
        progress: ProgressHandler?
    ) throws -> ExportResult? {
        try store.read { session -> ExportResult? in
            guard let rows = session as? any CanonicalJSONReading, rows.canWriteJSONFromRows(query) else { return nil }
            let output = try OutputFile(path: path)
            let total = progress != nil ? try rows.count(query) : nil
            let written: Int
            do {
                // The lines are made and written on a second thread while this one reads on.
                written = try rows.writeCanonicalJSONLines(
                    query,
                    progress: progress.map { progress in
                        { count in
                            progress(
                                OperationProgress(
                                    records: count, done: total.map { _ in Int64(count) }, total: total.map(Int64.init))
                            )
                        }
                    }, write: { try output.write($0) })
                try output.commit()
            } catch {
                output.discard()
                throw error
            }
            return ExportResult(
                files: [ExportResult.File(path: path, recordType: nil, records: written)], token: rows.currentToken,
                assets: nil)
        }
    }

    /// A format that writes from the store's transaction itself (a calendar through its mapping).
    private static func fromStore<Store: RecordStoring>(
        _ store: Store, to destination: ExportDestination, request: ExportRequest,
        export: RecordFormat.StoreExporter
    ) throws -> ExportResult {
        guard case .file(let path) = destination else {
            throw OperationError.formatCannotHold(
                format: request.format.title, what: "a file per record type: write one file")
        }
        if request.since != nil {
            throw OperationError.formatCannotHold(
                format: request.format.title, what: "deleted records: export changes as JSON")
        }
        let file = try OutputFile(path: path)
        do {
            let (summary, token) = try store.readSession { session in
                let context = RecordWriteContext(
                    schema: session.schema, timeZone: request.timeZone, settings: request.settings)
                return (try export(session, request.query, file, context), session.currentToken)
            }
            let count = summary.written.values.reduce(0, +)
            return ExportResult(
                files: [ExportResult.File(path: path, recordType: nil, records: count)], token: token, assets: nil,
                summary: summary)
        } catch {
            file.discard()
            throw error
        }
    }

    private static func perTypeFiles<Store: RecordStoring>(
        from store: Store, to destination: ExportDestination, request: ExportRequest,
        makeWriter: (OutputFile, RecordWriteContext) throws -> RecordSink,
        progress: ProgressHandler?
    ) throws -> ExportResult {
        if request.since != nil {
            throw OperationError.formatCannotHold(
                format: request.format.title, what: "deleted records: export changes as JSON")
        }
        let assetFiles = request.assetDirectory.map { AssetFolderWriter(directory: $0) }
        var createdDirectory: String?
        do {
            return try store.read { session in
                let schema = session.schema
                let names =
                    request.query.recordTypes.isEmpty
                    ? schema.recordTypes.map(\.name).sorted() : request.query.recordTypes
                let types = try names.map { name in
                    guard let type = schema.recordType(named: name) else {
                        throw OperationError.unknownRecordType(name, known: schema.recordTypes.map(\.name).sorted())
                    }
                    return type
                }
                let directory: String?
                switch destination {
                case .file:
                    if types.count != 1 {
                        throw OperationError.formatCannotHold(
                            format: request.format.title, what: "more than one record type in a file: write to a folder"
                        )
                    }
                    directory = nil
                case .directory(let path):
                    directory = path
                    if !FileManager.default.fileExists(atPath: path) {
                        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
                        createdDirectory = path
                    }
                }
                var files: [ExportResult.File] = []
                for type in types {
                    let path: String
                    switch destination {
                    case .file(let file): path = file
                    case .directory:
                        path =
                            URL(fileURLWithPath: directory!).appendingPathComponent(
                                "\(type.name).\(fileExtension(request))"
                            ).path
                    }
                    let context = RecordWriteContext(
                        schema: schema, recordType: type, timeZone: request.timeZone, settings: request.settings)
                    let writer = try makeWriter(try OutputFile(path: path), context)
                    var query = request.query
                    query.recordTypes = [type.name]
                    let total = progress != nil ? try session.count(query) : nil
                    var written = 0
                    // CSV of scalar fields is written straight from the table's rows, the same
                    // bytes without a record per row (CSVRecordWriter.writeRows).
                    if let csv = writer as? any RowWriting, assetFiles == nil, let rows = session as? any RowReading,
                        rows.canReadRows(query)
                    {
                        do {
                            written = try csv.writeRows(of: rows, query) { count in
                                if count % 8192 == 0, let progress {
                                    progress(
                                        OperationProgress(
                                            records: count, done: total.map { _ in Int64(count) },
                                            total: total.map(Int64.init)))
                                }
                            }
                            try writer.finish()
                        } catch {
                            writer.discard()
                            throw error
                        }
                        files.append(ExportResult.File(path: path, recordType: type.name, records: written))
                        continue
                    }
                    try Exports.stream(into: BackgroundSink(writer), progress: progress, total: total) { emit in
                        try session.forEach(query) { record in
                            assetFiles?.note(record)
                            try emit(record)
                            written += 1
                        }
                    }
                    try assetFiles?.write(from: session)
                    files.append(ExportResult.File(path: path, recordType: type.name, records: written))
                }
                return ExportResult(files: files, token: session.currentToken, assets: assetFiles)
            }
        } catch {
            if let createdDirectory { try? FileManager.default.removeItem(atPath: createdDirectory) }
            throw error
        }
    }

    /// The extension of a folder's files: TSV when the settings' delimiter is a tab.
    private static func fileExtension(_ request: ExportRequest) -> String {
        if request.format == .csv || request.format == .tsv {
            return request.settings[CSVWriteOptions.self]?.dialect.delimiter == 0x09
                || (request.format == .tsv && request.settings[CSVWriteOptions.self] == nil) ? "tsv" : "csv"
        }
        return request.format.extensions.first ?? request.format.name
    }
}

// MARK: - Calendars

extension Exports {
    /// Writes the records `query` selects as an iCalendar file through `mapping` (record types
    /// → components), all from one state of the store.
    public static func calendar(
        from store: some RecordStoring, to path: String, mapping: CalendarMapping, query: RecordQuery = RecordQuery(),
        options: ICalExportOptions = ICalExportOptions()
    ) throws -> ICalExportSummary {
        var settings = FormatSettings()
        settings[CalendarWriteSettings.self] = CalendarWriteSettings(mapping: mapping, options: options)
        let result = try records(
            from: store, to: .file(path), request: ExportRequest(query: query, format: .iCalendar, settings: settings))
        return result.summary!.details[ICalExportSummary.self]!
    }

    /// Writes the calendars an archive import kept whole, as they came in (`query`'s predicate
    /// picks components).
    public static func calendarArchive(
        from store: some RecordStoring, to path: String, query: RecordQuery = RecordQuery()
    ) throws -> CalendarArchiveSummary {
        var settings = FormatSettings()
        settings[CalendarWriteSettings.self] = CalendarWriteSettings(keepsCalendarsWhole: true)
        let result = try records(
            from: store, to: .file(path), request: ExportRequest(query: query, format: .iCalendar, settings: settings))
        return result.summary!.details[CalendarArchiveSummary.self]!
    }
}
