import Foundation
import Records

/// How an import treats its input.
public struct ImportOptions: Sendable {
    public var mode: WriteMode
    /// Add unknown fields and types to the schema, as CloudKit's development environment does.
    public var allowNewFields: Bool
    /// Import the valid records and reject the others, instead of importing nothing.
    public var skipInvalid: Bool
    /// Validate and count, then roll everything back.
    public var dryRun: Bool
    /// Stop reading after this many problems (the import fails anyway; more would be noise).
    public var maxErrors: Int
    /// Where asset files are: each ASSET value with a `sha256` the store lacks is read from
    /// `<dir>/<sha256>`, one with only a `localPath` from that path (relative paths inside
    /// `<dir>`), and the bytes are stored with the record. Nil leaves asset values as given.
    public var assetDirectory: String?
    /// A record whose name the store holds as another type takes that record's place, instead
    /// of being refused. Only for a chain of bundles restored into a store that was empty: a
    /// later bundle's record under a name an earlier one gave another type says that, between
    /// the two, the earlier record was deleted and its name used again (a bundle holds each
    /// record's last state, not the deletion before it).
    public var replacesOtherTypes = false

    public init(
        mode: WriteMode = .upsert, allowNewFields: Bool = false, skipInvalid: Bool = false, dryRun: Bool = false,
        maxErrors: Int = 20
    ) {
        self.mode = mode
        self.allowNewFields = allowNewFields
        self.skipInvalid = skipInvalid
        self.dryRun = dryRun
        self.maxErrors = maxErrors
    }
}

/// How far an import has come.
public struct ImportProgress: Sendable {
    public var records: Int
    public var bytesRead: Int64
    /// Nil when an input's size is unknown (a pipe).
    public var totalBytes: Int64?
}

/// Counts of what an import did (or would do) to one record type.
public struct ImportCounts: Sendable, Hashable {
    public var inserted = 0
    public var updated = 0
    public var unchanged = 0
    public var deleted = 0
    public var rejected = 0

    public var total: Int { inserted + updated + unchanged + deleted + rejected }
}

/// The outcome of an import.
public struct ImportSummary: Sendable {
    /// Counts per record type.
    public var counts: [String: ImportCounts] = [:]
    /// Every problem found (all of them were rejected with --skip-invalid; otherwise they
    /// made the import fail).
    public var issues: [InputIssue] = []
    public var schemaChanges: [String] = []
    /// Remarks from the sources: what they read but did not import.
    public var notes: [Message] = []
    /// Asset files stored (files the store already held are not counted).
    public var assets = 0
    /// Records that kept their own value of a field the reader filled (see
    /// ``SourcedRecord/filledFields``), by `RecordType.field`.
    public var keptOwnValues: [String: Int] = [:]
    public var dryRun = false
    /// The store's change token after the import.
    public var token: ChangeToken?

    public var totals: ImportCounts {
        counts.values.reduce(into: ImportCounts()) { total, counts in
            total.inserted += counts.inserted
            total.updated += counts.updated
            total.unchanged += counts.unchanged
            total.deleted += counts.deleted
            total.rejected += counts.rejected
        }
    }
}

/// A record whose input names no zone, and whose name a record of its type has in another zone
/// of the store: the import would put a copy beside it. Nothing is imported.
public struct RecordInAnotherZone: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }
    public var position: SourcePosition
    public var recordName: String
    public var recordType: String
    /// The zone it would go to: the one records that name none are given.
    public var given: ZoneID
    /// Where the store holds it.
    public var stored: ZoneID

    public var description: String { explanation.description }

    public var explanation: Message {
        let owner = stored.ownerRecordName == ZoneID.defaultOwnerName ? "" : " (owner \(stored.ownerRecordName))"
        return
            "\(position): record '\(recordName)' (\(recordType)) is in the store's \(stored.scope.rawValue) zone \(stored.zoneName)\(owner), and the file does not say which zone its rows are in: importing it would make a copy in \(given.scope.rawValue) zone \(given.zoneName) beside it."
            + "\nnothing was imported: the store is unchanged (\(Wording.giveRowsZone(stored)))"
    }
}

/// An import that wrote nothing because its input had problems.
public struct ImportFailure: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var summary: ImportSummary
    /// True when reading stopped at the error limit, so there may be more problems.
    public var truncated: Bool

    public var description: String { explanation.description }

    public var explanation: Message {
        var text = Message.joined(summary.issues.map(\.explanation), separator: "\n")
        if truncated { text += "\n(stopped after \(summary.issues.count) problems; there may be more)" }
        text += "\nnothing was imported: the store is unchanged (\(Wording.skipInvalid))"
        return text
    }
}

/// Moves records from sources into a store in one transaction: the store end of every import.
///
/// Each record is validated against the store's schema and CloudKit's limits, then saved by
/// the import mode. Without `skipInvalid` one bad record fails the whole import and the
/// store stays exactly as it was.
public final class RecordImporter {
    public let options: ImportOptions
    public var rejects: RejectSink?
    /// Called now and then with how far the import has come.
    public var progress: ((ImportProgress) -> Void)?
    /// Last writes of the same transaction, once every record is in (a restore's migration
    /// history).
    public var finishing: ((any RecordSession) throws -> Void)?
    /// Record types to add to the store's schema, inside the import's transaction, when the
    /// schema lacks them (a built-in mapping's types, say). Types already there are left as
    /// they are.
    public var addingTypes: [RecordTypeDefinition] = []
    /// The names the store's records of a type have in other zones than the one records that
    /// name none are given (nil when there are none), by type: asked once a type, so that a
    /// row's check is a look-up in a set, not a query (see ``SourcedRecord/namesNoZone``).
    private var elsewhere: [String: NameSet?] = [:]

    /// The store, as the import uses it: its schema now, a write transaction, a read's token.
    private let storeSchema: () throws -> Schema
    private let writeTransaction:
        (_ dryRun: Bool, _ schema: SchemaUse, _ body: (any LoadingSession) throws -> ImportSummary) throws ->
            ImportSummary
    private let readToken: () throws -> ChangeToken

    public init<S: RecordStoring>(store: S, options: ImportOptions) where S.Session: LoadingSession {
        self.options = options
        storeSchema = { try store.loadSchema() }
        writeTransaction = { dryRun, schema, body in try store.write(dryRun: dryRun, schema: schema) { try body($0) } }
        readToken = { try store.read { $0.currentToken } }
    }

    /// The records a loader holds, with what messages about them need, until it saves them.
    /// (Only what a message needs: the record itself is the loader's to hold.)
    private struct Held {
        var position: SourcePosition
        var recordName: String
        var recordType: String
        var zone: ZoneID
        var raw: ArraySlice<UInt8>?
    }

    /// Imports everything the sources yield, after first applying `schema` when given.
    ///
    /// Each source is read on a background thread while records are written on this one.
    public func run(_ inputs: [RecordSource], schema newSchema: Schema? = nil) throws -> ImportSummary {
        // With a fixed schema, records are validated on the reading thread as well.
        // The schema the records will meet: the one given, or the store's, with the types the
        // sources add. Against the store's, it also says what the load may do to the schema, for
        // the locks the write takes first (a schema the store already has changes nothing).
        let current = try storeSchema()
        var wanted = newSchema ?? current
        for type in addingTypes where wanted.recordType(named: type.name) == nil { wanted.recordTypes.append(type) }
        let schemaUse: SchemaUse =
            options.allowNewFields || SchemaChange(from: current, to: wanted).changesSchema ? .changes : .keeps
        var earlyValidation: (@Sendable (SourceItem) -> SourceItem?)? = nil
        if !options.allowNewFields {
            let validator = RecordValidator(schema: wanted)
            earlyValidation = { item in
                guard case .record(let sourced) = item,
                    let issue = RecordImporter.validate(sourced, validator, allowNewFields: false)
                else { return nil }
                return .invalid(issue, raw: sourced.raw)
            }
        }
        let sources = inputs.map { PrefetchingSource($0, transform: earlyValidation) }
        let totalBytes = inputs.allSatisfy { $0.totalBytes != nil } ? inputs.reduce(0) { $0 + $1.totalBytes! } : nil
        func report(_ records: Int) {
            progress?(
                ImportProgress(
                    records: records, bytesRead: sources.reduce(0) { $0 + $1.bytesRead }, totalBytes: totalBytes))
        }
        var summary = ImportSummary()
        summary.dryRun = options.dryRun
        var truncated = false
        var failed = false
        do {
            summary = try writeTransaction(options.dryRun, schemaUse) { session in
                var summary = summary
                if let newSchema {
                    summary.schemaChanges += try session.apply(schema: newSchema).summary
                }
                if addingTypes.contains(where: { session.schema.recordType(named: $0.name) == nil }) {
                    var schema = session.schema
                    for type in addingTypes where schema.recordType(named: type.name) == nil {
                        schema.recordTypes.append(type)
                    }
                    summary.schemaChanges += try session.apply(schema: schema).summary
                }
                var validator = RecordValidator(schema: session.schema)
                var read = 0
                let loader = try session.makeLoader()
                loader.replacesOtherTypes = options.replacesOtherTypes
                var held: [Held] = []
                // The items whose records the loader holds (copies sharing their strings and
                // arrays): handed back to a reading thread only once the loader has saved and
                // let go of them, so that the last reference, and the freeing, is that thread's
                // (else the loader's copies free every record on this thread). Their own
                // source's thread, but for those held across the end of a source, which go to
                // the next one's (the ended source's thread is gone).
                var holding = false
                var saved = false
                var heldItems: [SourceItem] = []
                /// Counts a problem; false when the import should stop reading.
                func note(_ issue: InputIssue, raw: [UInt8]?) throws -> Bool {
                    summary.counts[issue.recordType ?? "(unknown type)", default: ImportCounts()].rejected += 1
                    summary.issues.append(issue)
                    if options.skipInvalid {
                        try rejects?.reject(issue, raw: raw)
                        return true
                    }
                    failed = true
                    if summary.issues.count >= options.maxErrors {
                        truncated = true
                        return false
                    }
                    return true
                }
                /// Saves the records the loader holds and counts what that did.
                func flush() throws -> Bool {
                    guard !held.isEmpty else { return true }
                    let results = try loader.flush()
                    guard results.count == held.count else {
                        throw StoreError.corrupt("the store answered for \(results.count) of \(held.count) records")
                    }
                    saved = true
                    defer { held.removeAll(keepingCapacity: true) }
                    var going = true
                    for index in held.indices {
                        switch results[index] {
                        case .success(let outcome):
                            RecordImporter.count(outcome, of: held[index].recordType, in: &summary)
                        case .failure(let refusal):
                            let entry = held[index]
                            var issue = InputIssue(
                                position: entry.position, recordName: entry.recordName, recordType: entry.recordType,
                                field: nil, message: refusal.message)
                            issue.zone = entry.zone
                            if going { going = try note(issue, raw: entry.raw.map { Array($0) }) }
                        }
                    }
                    return going
                }
                /// Imports one item read; false when the import should stop reading.
                func take(_ item: SourceItem) throws -> Bool {
                    try Interruption.check()
                    read += 1
                    if read % 4096 == 0 { report(read) }
                    let issue: InputIssue?
                    var raw: ArraySlice<UInt8>? = nil
                    switch item {
                    case .invalid(let problem, let bytes):
                        issue = problem
                        raw = bytes?[...]
                    case .record(let sourced):
                        raw = sourced.rawBytes
                        // Records held by the loader are saved before the schema changes under them.
                        if options.allowNewFields, !held.isEmpty,
                            RecordImporter.changesSchema(sourced.record, session.schema), !(try flush())
                        {
                            return false
                        }
                        let step = try importRecord(
                            sourced, session: session, validator: &validator, validated: earlyValidation != nil,
                            loader: loader, summary: &summary)
                        if case .held = step {
                            holding = true
                            held.append(
                                Held(
                                    position: sourced.position, recordName: sourced.record.recordName,
                                    recordType: sourced.record.recordType,
                                    zone: sourced.record.zone, raw: raw))
                            if loader.wantsFlush, !(try flush()) { return false }
                        }
                        if case .refused(let problem) = step { issue = problem } else { issue = nil }
                    case .asset(let staged):
                        defer { staged.discard() }
                        read -= 1
                        guard let bytes = staged.bytes else { return true }
                        do {
                            if try session.putAsset(
                                .staged(bytes, origin: staged.origin), expectedSHA256: staged.sha256,
                                expectedSize: staged.size
                            ).added {
                                summary.assets += 1
                            }
                        } catch let error as AssetError {
                            throw AssetError("\(staged.origin): \(error.message)")
                        }
                        return true
                    }
                    guard let issue else { return true }
                    return try note(issue, raw: raw.map { Array($0) })
                }
                sources: for source in sources {
                    while let item = try source.next() {
                        holding = false
                        let going = try take(item)
                        // Freed on the thread that read it.
                        if holding { heldItems.append(consume item) } else { source.retire(consume item) }
                        if saved {
                            saved = false
                            // The one just taken was saved too, unless the loader still holds it
                            // (the save came before it).
                            let kept = holding && !held.isEmpty ? heldItems.popLast() : nil
                            while let item = heldItems.popLast() { source.retire(consume item) }
                            if let kept { heldItems.append(kept) }
                        }
                        if !going { break sources }
                    }
                }
                if !truncated { _ = try flush() }
                report(read)
                if failed { throw ImportFailure(summary: summary, truncated: truncated) }
                try loader.finish(inserted: summary.totals.inserted)
                try finishing?(session)
                summary.schemaChanges = summary.schemaChanges.uniqued()
                summary.notes = inputs.flatMap { ($0 as? AnnotatedRecordSource)?.notes ?? [] }
                summary.token = session.currentToken
                return summary
            }
        }
        if options.dryRun { summary.token = try readToken() }
        return summary
    }

    static func count(_ outcome: SaveOutcome, of recordType: String, in summary: inout ImportSummary) {
        switch outcome {
        case .inserted: summary.counts[recordType, default: ImportCounts()].inserted += 1
        case .updated: summary.counts[recordType, default: ImportCounts()].updated += 1
        case .unchanged: summary.counts[recordType, default: ImportCounts()].unchanged += 1
        case .deleted: summary.counts[recordType, default: ImportCounts()].deleted += 1
        }
    }

    /// The first problem the validator finds with a record, placed in its input.
    static func validate(_ sourced: SourcedRecord, _ validator: RecordValidator, allowNewFields: Bool) -> InputIssue? {
        let problems = validator.issues(in: sourced.record, checked: sourced.checked, allowNewFields: allowNewFields)
        guard let first = problems.first else { return nil }
        let record = sourced.record
        let message =
            problems.count == 1
            ? first.message
            : first.message
                + " (and \(problems.count - 1) more problem\(problems.count == 2 ? "" : "s") in this record)"
        var issue = InputIssue(
            position: sourced.position(ofField: first.field), recordName: record.recordName,
            recordType: record.recordType, field: first.field, message: message)
        issue.zone = record.zone
        return issue
    }

    /// What became of one record read.
    private enum Step {
        case saved
        /// The loader holds it, to save with others.
        case held
        case refused(InputIssue)
    }

    /// Whether saving `record` with new fields allowed would change `schema`.
    static func changesSchema(_ record: Record, _ schema: Schema) -> Bool {
        guard !record.isDeleted else { return false }
        guard let type = schema.recordType(named: record.recordType) else { return true }
        return record.sortedFieldNames.contains { type.field(named: $0) == nil }
    }

    /// Validates one record and saves it, or hands it to the loader to save with others.
    private func importRecord(
        _ sourced: SourcedRecord, session: any LoadingSession, validator: inout RecordValidator, validated: Bool,
        loader: any RecordLoader, summary: inout ImportSummary
    ) throws -> Step {
        var record = sourced.record
        func issue(_ field: String?, _ message: Message) -> InputIssue {
            var issue = InputIssue(
                position: sourced.position(ofField: field), recordName: sourced.record.recordName,
                recordType: sourced.record.recordType,
                field: field, message: message)
            issue.zone = sourced.record.zone
            return issue
        }
        if !validated, let problem = RecordImporter.validate(sourced, validator, allowNewFields: options.allowNewFields)
        {
            return .refused(problem)
        }
        if let directory = options.assetDirectory, !record.isDeleted {
            var problem: InputIssue?
            record = try record.mappingAssets { field, asset in
                guard problem == nil else { return asset }
                do {
                    return try attach(asset, from: directory, session: session, summary: &summary)
                } catch let error as AssetError {
                    problem = issue(field, Message(error.message))
                    return asset
                }
            }
            if let problem { return .refused(problem) }
        }
        if options.allowNewFields && !record.isDeleted {
            let type = session.schema.recordType(named: record.recordType)
            for name in record.sortedFieldNames where type?.field(named: name) == nil {
                let field = FieldDefinition(name: name, type: record.fields[name]!.type)
                try session.addField(field, toType: record.recordType)
                summary.schemaChanges.append("+ \(record.recordType).\(name) \(field.type)")
            }
            if type == nil && record.fields.isEmpty {
                var schema = session.schema
                schema.recordTypes.append(RecordTypeDefinition(name: record.recordType))
                try session.apply(schema: schema)
                summary.schemaChanges.append("+ record type \(record.recordType)")
            }
            validator.schema = session.schema
        }
        // A record whose input does not say its zone (a CSV file without the zone's columns) is
        // never a copy beside one of the same name in another zone: a new one is refused.
        if sourced.namesNoZone, !record.isDeleted, let elsewhere = try namesElsewhere(record, session: session),
            try elsewhere.contains(record.recordName), try session.record(record.id) == nil,
            let other = try session.record(named: record.recordName, ofType: record.recordType),
            other.zone != record.zone
        {
            throw RecordInAnotherZone(
                position: sourced.position, recordName: record.recordName, recordType: record.recordType,
                given: record.zone, stored: other.zone)
        }
        if !sourced.filledFields.isEmpty, !record.isDeleted, let stored = try session.record(record.id),
            stored.recordType == record.recordType
        {
            for field in sourced.filledFields {
                guard let given = record.fields[field], let own = stored.fields[field], own != given else { continue }
                record.fields[field] = own
                // A reference to the same record with another action is the record's own, not another value.
                if case .reference(let a) = own, case .reference(let b) = given, a.recordName == b.recordName {
                    continue
                }
                summary.keptOwnValues[record.recordType + "." + field, default: 0] += 1
            }
        }
        try loader.prepare(for: record.recordType)
        let outcome: SaveOutcome?
        do {
            // Moved, not copied, into a loader that holds it.
            outcome = try loader.save(consume record, mode: options.mode)
        } catch let refusal as SaveRefusal {
            return .refused(issue(nil, refusal.message))
        }
        guard let outcome else { return .held }
        RecordImporter.count(outcome, of: sourced.record.recordType, in: &summary)
        return .saved
    }
}

extension RecordImporter {
    /// The names of `record`'s type in zones other than its own, kept on disk (a type may have
    /// millions); nil when the type is in no other zone, as most are.
    private func namesElsewhere(_ record: Record, session: any RecordSession) throws -> NameSet? {
        if let known = elsewhere[record.recordType] { return known }
        let zone = record.zone
        let all = try session.count(RecordQuery(recordTypes: [record.recordType]))
        let here = try session.count(
            RecordQuery(
                recordTypes: [record.recordType], scope: zone.scope, zoneName: zone.zoneName,
                ownerRecordName: zone.ownerRecordName))
        var found: NameSet?
        if all > here {
            let names = try NameSet()
            var batch: [String] = []
            try session.forEach(RecordQuery(recordTypes: [record.recordType])) { stored in
                guard stored.zone != zone, !stored.isDeleted else { return }
                batch.append(stored.recordName)
                if batch.count >= 4096 {
                    try names.insert(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
            try names.insert(batch)
            found = names
        }
        elsewhere[record.recordType] = .some(found)
        return found
    }

    /// The asset with its bytes stored, read from `directory` (see ``ImportOptions/assetDirectory``).
    func attach(_ asset: Asset, from directory: String, session: any RecordSession, summary: inout ImportSummary) throws
        -> Asset
    {
        var asset = asset
        let file: String
        if let sha256 = asset.sha256 {
            if try session.assetSize(sha256) != nil { return asset }
            if let byHash = try? RecordImporter.resolve(sha256, in: directory) {
                file = byHash
            } else if let local = asset.localPath {
                file = try RecordImporter.resolve(local, in: directory)
            } else {
                throw AssetError("no file for asset \(sha256) in \(directory)")
            }
        } else if let local = asset.localPath {
            file = try RecordImporter.resolve(local, in: directory)
        } else {
            return asset
        }
        let stored = try session.putAsset(
            file: file, expectedSHA256: asset.sha256, expectedSize: asset.size >= 0 ? asset.size : nil)
        if stored.added { summary.assets += 1 }
        asset.sha256 = stored.sha256
        asset.size = stored.size
        return asset
    }

    /// A regular file inside `directory` named by `localPath`. The path must be relative and
    /// may not climb out with `..`, and once symbolic links are followed the file must still be
    /// inside the folder. What is outside the folder is never opened, and the error is the same
    /// whether or not something is there, so a record cannot probe the rest of the disk.
    static func resolve(_ localPath: String, in directory: String) throws -> String {
        let outside = AssetError("the asset path '\(localPath)' names no file inside the assets folder \(directory)")
        guard !localPath.isEmpty, !localPath.hasPrefix("/"), !localPath.split(separator: "/").contains("..") else {
            throw outside
        }
        guard let root = realpath(directory, nil) else {
            throw AssetError("the assets folder \(directory) cannot be read")
        }
        defer { free(root) }
        let folder = String(cString: root)
        guard let real = realpath((directory as NSString).appendingPathComponent(localPath), nil) else { throw outside }
        defer { free(real) }
        let resolved = String(cString: real)
        guard resolved.hasPrefix(folder == "/" ? "/" : folder + "/") else { throw outside }
        var info = stat()
        guard stat(resolved, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { throw outside }
        return resolved
    }
}

extension Array where Element: Hashable {
    func uniqued() -> [Element] {
        var seen: Set<Element> = []
        return filter { seen.insert($0).inserted }
    }
}
