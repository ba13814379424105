import CloudKitWeb
import Formats
import Foundation
import Records
import StoreCore

/// How pushed records meet the ones CloudKit holds.
public enum PushMode: String, Sendable, CaseIterable {
    /// New records only: one CloudKit already holds is reported (EXISTS), not overwritten.
    case create
    /// Change records CloudKit holds, field by field, if nobody changed them since the store
    /// took them (their change tag): a stale one is reported (CONFLICT), a missing one too.
    case update
    /// Like update, but the record becomes exactly the store's (fields it lacks are removed).
    case replace

    /// CloudKit's operation type for a live record, forced or not.
    func operationType(force: Bool) -> String {
        switch (self, force) {
        case (.create, false): "create"
        case (.update, false): "update"
        case (.replace, false): "replace"
        case (.create, true), (.replace, true): "forceReplace"
        case (.update, true): "forceUpdate"
        }
    }
}

/// Which records a push sends, and how.
public struct PushRequest: Sendable {
    /// The records to send. A query without a scope takes the records of the target
    /// database's scope.
    public var query: RecordQuery
    /// Send what changed after this token instead, deletions included.
    public var since: ChangeToken?
    public var mode: PushMode
    /// Overwrite whatever CloudKit holds (forceUpdate, forceReplace, forceDelete).
    public var force: Bool
    /// Bytes of operations per request at most (besides CloudKit's 200 operations).
    public var byteBudget: Int

    public init(
        query: RecordQuery = RecordQuery(), since: ChangeToken? = nil, mode: PushMode = .create, force: Bool = false,
        byteBudget: Int = ModifyBatcher.defaultByteBudget
    ) {
        self.query = query
        self.since = since
        self.mode = mode
        self.force = force
        self.byteBudget = byteBudget
    }
}

/// One operation a push sends (or, dry, would send).
public struct PushOperation: Sendable {
    public var zone: ZoneID
    public var recordType: String
    public var recordName: String
    /// `create`, `update`, `replace`, `forceUpdate`, `forceReplace` or `forceDelete`.
    public var operationType: String
    /// The operation as the request carries it: `{"operationType": …, "record": {…}}`.
    public var json: [UInt8]
    /// Assets whose bytes the store holds, to upload before the operation is sent, which then
    /// carries CloudKit's receipts instead: each with its field, its place in an ASSETID_LIST
    /// (nil for an ASSETID) and its SHA-256.
    public var uploads: [AssetUpload] = []
    /// The record, while its operation may still change (an upload's receipt).
    var record: Record?
    var withChangeTag = false

    /// Whether the operation deletes its record.
    public var isDeletion: Bool { operationType == "delete" || operationType == "forceDelete" }

    /// Rebuilds the operation's JSON from the record. A deletion's record holds its name alone.
    mutating func encode(with codec: JSONRecordCodec) {
        guard let record else { return }
        var out = JSONWriter(capacity: 512)
        out.raw("{\"operationType\":")
        out.string(operationType)
        out.raw(",\"record\":")
        if isDeletion {
            out.raw("{\"recordName\":")
            out.string(record.recordName)
            if withChangeTag, let tag = record.changeTag {
                out.raw(",\"recordChangeTag\":")
                out.string(tag)
            }
            out.byte(UInt8(ascii: "}"))
        } else {
            // A record that roots a share asks for the short GUID the share's URL needs.
            codec.encodeForModify(
                record, withChangeTag: withChangeTag, createShortGUID: operationType == "create" && record.share != nil,
                to: &out)
        }
        out.byte(UInt8(ascii: "}"))
        json = out.bytes
    }
}

/// An asset a push uploads: its field, its place in an ASSETID_LIST (nil for an ASSETID), and
/// the SHA-256 the store keeps its bytes under.
public struct AssetUpload: Sendable, Equatable {
    public var field: String
    public var element: Int?
    public var sha256: String
}

/// A record CloudKit turned away, or one a push could not send.
public struct PushRejection: Sendable {
    public var operation: PushOperation
    /// CloudKit's code (CONFLICT, EXISTS, NOT_FOUND, …), or ckport's reason for not sending.
    public var serverErrorCode: String
    public var reason: Message
}

/// What a push did to the records of one type.
public struct PushCounts: Sendable, Equatable {
    public var saved = 0
    public var deleted = 0
    /// Already in CloudKit (create).
    public var exists = 0
    /// Changed in CloudKit since the store took it (update, replace).
    public var conflicts = 0
    /// Not in CloudKit (update, replace).
    public var missing = 0
    /// Turned away for another reason, or not sent (a deletion without force).
    public var failed = 0

    public var rejected: Int { exists + conflicts + missing + failed }
    public init() {}
}

/// What a push did, per record type.
public struct PushResult: Sendable {
    public var destination: String
    public var byType: [String: PushCounts] = [:]
    public var requests = 0
    public var zonesCreated: [String] = []
    /// What became of each share the push met.
    public var shares: [ShareRestoration] = []

    public init(destination: String) { self.destination = destination }

    public var total: PushCounts {
        byType.values.reduce(into: PushCounts()) { total, counts in
            total.saved += counts.saved
            total.deleted += counts.deleted
            total.exists += counts.exists
            total.conflicts += counts.conflicts
            total.missing += counts.missing
            total.failed += counts.failed
        }
    }
}

/// A push that stopped part way: what CloudKit had accepted until then stays accepted.
public struct CloudPushStopped: CKPortError, Sendable {
    public var partial: PushResult
    public var underlying: Message
    public var underlyingCategory: ErrorCategory

    public init(partial: PushResult, underlying: Message, underlyingCategory: ErrorCategory) {
        self.partial = partial
        self.underlying = underlying
        self.underlyingCategory = underlyingCategory
    }

    public var category: ErrorCategory { underlyingCategory }
    public var description: String { explanation.description }

    public var explanation: Message {
        let total = partial.total
        return
            "\(underlying)\n  before it stopped, CloudKit accepted \(total.saved) records and \(total.deleted) deletions in \(partial.requests) requests; pushing again sends them again (with create: reported as EXISTS)"
    }
}

extension CloudSync {
    /// The operations a push would send, in the order it would send them, without reaching
    /// CloudKit. Deletions (with `since`) need `force`: the store keeps no change tag for them.
    /// Records that could not go as the store holds them go to `notSent`, with the reason.
    /// `shares` hears what would become of each share the store holds (``ShareRestoration``).
    public static func plan(
        _ store: some RecordStoring, request: PushRequest, database: CloudKitDatabase,
        notSent: ((PushRejection) throws -> Void)? = nil, shares: ((ShareRestoration) throws -> Void)? = nil,
        _ each: (PushOperation) throws -> Void
    ) throws {
        try store.readSession { session in
            let batches = OperationBatches(request: request, database: database, schema: session.schema)
            try batches.produce(session) { batch in
                for rejection in batch.unsent { try notSent?(rejection) }
                for operation in batch.operations { try each(operation) }
                for plan in batch.shares {
                    try shares?(
                        restoration(
                            plan, state: shareDecision(plan, request: request, scope: database.scope) ?? .wouldCreate))
                }
                return true
            }
        }
    }

    /// Sends the records `request` selects to the database `client` speaks to, in
    /// `records/modify` requests of at most 200 operations and `request.byteBudget` bytes,
    /// creating custom zones CloudKit lacks. Records go with their `parent`, parents first;
    /// shares are created again afterwards where CloudKit allows it (``ShareRestoration``
    /// says, per share, what was created, who was invited again, and what was not). Records CloudKit turns away (EXISTS, CONFLICT,
    /// NOT_FOUND, …) go to `rejected` one by one; the rest of the push goes on. The store is
    /// read in one transaction on a thread of its own, a few requests ahead of the sending; the
    /// assets a request uploads are read by that thread too, in the same transaction.
    public static func push(
        _ client: CloudKitClient, from store: some RecordStoring, request: PushRequest,
        progress: ProgressHandler? = nil, rejected: (PushRejection) throws -> Void
    ) async throws -> PushResult {
        let database = client.database
        var result = PushResult(destination: source(database))
        let codec = JSONRecordCodec(schema: try store.loadSchema())
        do {
            var known = Set(try await zones(client))
            // The reader also reads the assets the sending asks for (see BatchFeed).
            let feed = BatchFeed<OperationBatch, any RecordSession>(depth: 4)
            WorkerThread.start(name: "ckport push reader") {
                do {
                    try store.readSession { session in
                        let batches = OperationBatches(request: request, database: database, schema: session.schema)
                        try batches.produce(session) { feed.put($0, context: session) }
                        feed.finish(context: session)
                    }
                } catch {
                    feed.fail(error)
                }
            }
            defer { feed.cancel() }
            var sent = 0
            var sharePlans: [SharePlan] = []
            func turnAway(_ operation: PushOperation, _ code: String, _ reason: Message) throws {
                var counts = result.byType[operation.recordType, default: PushCounts()]
                switch code {
                case "EXISTS": counts.exists += 1
                case "CONFLICT": counts.conflicts += 1
                case "NOT_FOUND": counts.missing += 1
                default: counts.failed += 1
                }
                result.byType[operation.recordType] = counts
                try rejected(PushRejection(operation: operation, serverErrorCode: code, reason: reason))
            }
            while let batch = try await feed.next() {
                sharePlans += batch.shares
                for rejection in batch.unsent {
                    try turnAway(rejection.operation, rejection.serverErrorCode, rejection.reason)
                }
                guard !batch.operations.isEmpty else { continue }
                if batch.zone.zoneName != ZoneID.defaultZoneName && !known.contains(batch.zone) {
                    if let refusal = try await createZone(batch.zone, client: client) {
                        for operation in batch.operations { try turnAway(operation, "NOT_SENT", Message(refusal)) }
                        continue
                    }
                    known.insert(batch.zone)
                    result.zonesCreated.append(batch.zone.zoneName)
                }
                var batch = batch
                try await uploadAssets(&batch, client: client, feed: feed, codec: codec)
                // Operations CloudKit asks to send again later (a per-record retryAfter) go again,
                // on their own, after the longest wait it asked for.
                var pending = batch.operations
                var round = 0
                while !pending.isEmpty {
                    round += 1
                    let answered = try await modify(pending, in: batch, client: client) { result.requests += 1 }
                    var again: [PushOperation] = []
                    var wait = 0.0
                    for (operation, outcome) in answered {
                        if let outcome, let code = outcome.serverErrorCode,
                            !(operation.isDeletion && code == "NOT_FOUND")
                        {
                            let reason = outcome.reason ?? ""
                            let after = outcome.retryAfter
                            let busy = ["TRY_AGAIN_LATER", "THROTTLED", "INTERNAL_ERROR", "ZONE_BUSY"].contains(code)
                            if after != nil || busy,
                                let delay = client.policy.delay(
                                    after: round, failure: .server(retryAfter: after, busy: busy))
                            {
                                again.append(operation)
                                wait = max(wait, delay)
                                continue
                            }
                            try turnAway(
                                operation, code,
                                Message(
                                    reason
                                        + (after.map {
                                            "; CloudKit asked to wait \(Int($0)) s and ckport had tried \(round) times"
                                        } ?? "")))
                        } else if outcome == nil {
                            try turnAway(operation, "NO_ANSWER", "CloudKit's answer did not mention this record")
                        } else {
                            var counts = result.byType[operation.recordType, default: PushCounts()]
                            if operation.isDeletion { counts.deleted += 1 } else { counts.saved += 1 }
                            result.byType[operation.recordType] = counts
                        }
                    }
                    if !again.isEmpty {
                        await client.announceWait(
                            "records/modify", seconds: wait,
                            reason:
                                "CloudKit asked to send \(again.count) record\(again.count == 1 ? "" : "s") again later"
                        )
                        try await client.pause(wait)
                    }
                    pending = again
                }
                sent += batch.operations.count
                progress?(OperationProgress(records: sent))
            }
            // Shares last: CloudKit creates one only for a root record it holds.
            try await restoreShares(
                sharePlans, client: client, request: request, codec: codec, result: &result, rejected: rejected)
            return result
        } catch let error as CKPortError {
            throw CloudPushStopped(partial: result, underlying: error.explanation, underlyingCategory: error.category)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw CloudPushStopped(partial: result, underlying: "\(error)", underlyingCategory: .environment)
        }
    }

    /// Sends operations in one `records/modify` request and pairs each with its outcome (nil
    /// when the answer does not mention it). A request CloudKit refuses whole for what one of
    /// them holds (400 BAD_REQUEST) is sent again in halves, until the refused operations stand
    /// alone and get that answer as their own outcome: one bad record does not stop a push.
    private static func modify(
        _ operations: [PushOperation], in batch: OperationBatch, client: CloudKitClient,
        sent: () -> Void
    ) async throws -> [(PushOperation, CloudKitWire.Outcome?)] {
        var request = batch
        request.operations = operations
        let answer: Data
        do {
            answer = try await client.send("records/modify", body: Data(request.requestBody()))
            sent()
        } catch let error as CloudKitServerError where error.code == .badRequest && error.status == 400 {
            sent()
            guard operations.count > 1 else {
                return [
                    (
                        operations[0],
                        CloudKitWire.Outcome(
                            recordName: operations[0].recordName, serverErrorCode: "BAD_REQUEST",
                            reason: error.reason ?? "CloudKit refused the request that held it")
                    )
                ]
            }
            let half = operations.count / 2
            return try await modify(Array(operations[..<half]), in: batch, client: client, sent: sent)
                + modify(Array(operations[half...]), in: batch, client: client, sent: sent)
        }
        let outcomes = try CloudKitWire.decode(CloudKitWire.Outcomes.self, from: answer, operation: "records/modify")
            .records
        return operations.enumerated().map { index, operation in
            let outcome =
                outcomes.indices.contains(index) && outcomes[index].recordName == operation.recordName
                ? outcomes[index] : outcomes.first { $0.recordName == operation.recordName }
            return (operation, outcome)
        }
    }

    /// Uploads the assets a batch's records hold in the store (`assets/upload` for the URLs,
    /// a token per asset — an ASSETID_LIST's elements each have one, under the list's field —
    /// then each file's bytes), and puts CloudKit's receipts in their operations.
    private static func uploadAssets(
        _ batch: inout OperationBatch, client: CloudKitClient, feed: BatchFeed<OperationBatch, any RecordSession>,
        codec: JSONRecordCodec
    ) async throws {
        let wanted = batch.operations.indices.flatMap { index in batch.operations[index].uploads.map { (index, $0) } }
        guard !wanted.isEmpty else { return }
        let tokens = wanted.map { index, upload in
            CloudKitWire.AssetUploadRequest.Token(
                recordName: batch.operations[index].recordName, recordType: batch.operations[index].recordType,
                fieldName: upload.field)
        }
        // At most 200 tokens a request ("Data Size Limits").
        var places: [CloudKitWire.AssetUploadPlaces.Place] = []
        for start in stride(from: 0, to: tokens.count, by: 200) {
            let request = try CloudKitWire.encode(
                CloudKitWire.AssetUploadRequest(
                    zoneID: wireZone(batch.zone), tokens: Array(tokens[start..<min(start + 200, tokens.count)])))
            places += try CloudKitWire.decode(
                CloudKitWire.AssetUploadPlaces.self, from: try await client.send("assets/upload", body: request),
                operation: "assets/upload"
            ).tokens
        }
        for (index, upload) in wanted {
            let name = batch.operations[index].recordName
            let what = "record \(name) field \(upload.field)\(upload.element.map { "[\($0)]" } ?? "")"
            // The answer's tokens come in the order asked; several for one list field, one each.
            guard
                let place = places.firstIndex(where: { $0.recordName == name && $0.fieldName == upload.field }),
                let address = places[place].url, let url = URL(string: address)
            else {
                throw CloudKitServerError(
                    serverErrorCode: "BAD_ANSWER", reason: "assets/upload gave no URL for \(what)", status: 200)
            }
            places.remove(at: place)
            // Read by the push's reader, in its transaction.
            let sha256 = upload.sha256
            let bytes: Data? = try await feed.errand { session in
                var bytes = Data()
                return try session.readAsset(sha256) { bytes.append(contentsOf: $0) } ? bytes : nil
            }
            guard let bytes else {
                throw CloudKitServerError(
                    serverErrorCode: "NOT_SENT", reason: "\(what): the store no longer holds asset \(upload.sha256)",
                    status: 0)
            }
            let answer = try await client.upload(bytes, to: url)
            let uploaded = try? JSONDecoder().decode(CloudKitWire.UploadedAsset.self, from: answer)
            guard let file = uploaded?.singleFile, let checksum = file.fileChecksum, let receipt = file.receipt else {
                throw CloudKitServerError(
                    serverErrorCode: "BAD_ANSWER",
                    reason: "the upload of \(what) was not answered with a singleFile and its receipt", status: 200)
            }
            let asset = Asset(
                fileChecksum: checksum, size: file.size.map(Int64.init) ?? Int64(bytes.count),
                referenceChecksum: file.referenceChecksum, wrappingKey: file.wrappingKey, receipt: receipt)
            if let element = upload.element,
                case .list(let type, var items)? = batch.operations[index].record?[upload.field],
                items.indices.contains(element)
            {
                items[element] = .asset(asset)
                batch.operations[index].record?[upload.field] = .list(type, items)
            } else {
                batch.operations[index].record?[upload.field] = .asset(asset)
            }
        }
        for index in Set(wanted.map(\.0)) {
            batch.operations[index].encode(with: codec)
            batch.operations[index].record = nil
        }
    }

    /// Creates a custom zone CloudKit lacks; returns why it could not, or nil when it did.
    /// Zones of the shared database are their owners' to create: one that is missing there is
    /// not shared with the signed-in user (any more), and is not created.
    private static func createZone(_ zone: ZoneID, client: CloudKitClient) async throws -> String? {
        if client.database.scope == .shared {
            return
                "the shared database has no zone \(zone.zoneName) of owner \(zone.ownerRecordName): only its owner can make it, and it is not shared with you (any more)"
        }
        let body = try CloudKitWire.encode(
            CloudKitWire.ZoneModifyRequest(operations: [
                .init(operationType: "create", zone: CloudKitWire.Zone(zoneID: wireZone(zone)))
            ]))
        let answer = try CloudKitWire.decode(
            CloudKitWire.Zones.self, from: try await client.send("zones/modify", body: body), operation: "zones/modify")
        // Each zone of the request has its own outcome, with an error when it failed.
        let outcome = answer.zones.first { $0.zoneID?.zoneName == zone.zoneName }
        guard let outcome else { return "CloudKit's answer to creating zone \(zone.zoneName) did not mention it" }
        if let code = outcome.serverErrorCode {
            return "CloudKit did not create zone \(zone.zoneName): \(code)\(outcome.reason.map { ": \($0)" } ?? "")"
        }
        return nil
    }
}

/// Operations of one zone, ready to go in one `records/modify` request; and operations that
/// are not to be sent, with the reason.
struct OperationBatch: Sendable {
    var zone: ZoneID
    var operations: [PushOperation] = []
    var unsent: [PushRejection] = []
    /// The shares met, with their roots: in the last batch, after every record.
    var shares: [SharePlan] = []

    func requestBody() -> [UInt8] {
        var out = JSONWriter(capacity: operations.reduce(64) { $0 + $1.json.count + 1 })
        out.raw("{\"atomic\":false,\"operations\":[")
        for (index, operation) in operations.enumerated() {
            if index > 0 { out.byte(UInt8(ascii: ",")) }
            out.bytes.append(contentsOf: operation.json)
        }
        out.raw("],\"zoneID\":{\"zoneName\":")
        out.string(zone.zoneName)
        // The owner only where the zone is somebody else's (see CloudSync.wireZone).
        if zone.scope == .shared && zone.ownerRecordName != ZoneID.defaultOwnerName {
            out.raw(",\"ownerRecordName\":")
            out.string(zone.ownerRecordName)
        }
        out.raw("}}")
        return out.bytes
    }
}

/// Turns the store's records into batches of operations, a zone at a time.
final class OperationBatches {
    /// How many levels of parents a push orders; deeper records go last.
    static let maxDepth = 64

    let request: PushRequest
    let scope: DatabaseScope
    let codec: JSONRecordCodec
    private var open: [ZoneID: (batcher: ModifyBatcher, operations: [PushOperation])] = [:]
    private var unsent: [PushRejection] = []

    init(request: PushRequest, database: CloudKitDatabase, schema: Schema) {
        self.request = request
        scope = request.query.scope ?? DatabaseScope(rawValue: database.scope.rawValue)!
        codec = JSONRecordCodec(schema: schema)
    }

    /// Calls `emit` with each batch as it fills; stops early when `emit` says false.
    ///
    /// CloudKit takes a record with a `parent` only when the parent is there already or comes
    /// earlier in the same request, so records go parents first, a pass over the selection per
    /// level: the records without a parent, then those whose parent has none, and so on (a
    /// record's level is found by walking up its parents in the store, so memory stays flat).
    /// Records whose parents run in a loop, or more than ``maxDepth`` deep, go last. Share
    /// records do not go as records: they are gathered, with their roots, for
    /// ``CloudSync/push`` to create once every record is in.
    func produce(_ session: any RecordSession, _ emit: (OperationBatch) throws -> Bool) throws {
        var stopped = false
        var lastZone: ZoneID?
        var shares: [Record] = []
        var roots: [RecordID: String] = [:]
        var waiting = 0
        func take(_ record: Record) throws {
            // In store order a zone's records come together: close the previous zone's batch.
            if self.request.since == nil, let lastZone, lastZone != record.zone, let batch = self.close(lastZone) {
                stopped = !(try emit(batch))
            }
            lastZone = record.zone
            if let full = self.add(record) { stopped = !(try emit(full)) }
        }
        func pass(_ body: (Record) throws -> Void) throws {
            try withoutActuallyEscaping(body) { body in
                let each: (Record) throws -> Void = { record in
                    guard !stopped else { return }
                    try body(record)
                }
                if let since = request.since {
                    try session.forEachChange(
                        since: since, recordTypes: request.query.recordTypes, scope: scope,
                        zoneName: request.query.zoneName, each)
                } else {
                    var query = request.query
                    query.scope = scope
                    try session.forEach(query, each)
                }
            }
        }
        /// How many parents up the store's records go from `record` (1: its parent has none, or
        /// is not in the store); nil past `limit` or in a loop.
        func level(_ record: Record, limit: Int) throws -> Int? {
            var steps = 1
            var seen: Set<String> = [record.recordName]
            var parent = record.parent
            while let name = parent, let above = try session.record(RecordID(recordName: name, zone: record.zone)),
                !above.isDeleted
            {
                guard let next = above.parent, next != name else { return steps }
                guard seen.insert(name).inserted, steps < limit else { return nil }
                steps += 1
                parent = next
            }
            return steps
        }
        func hasParent(_ record: Record) -> Bool {
            !record.isDeleted && !record.isShare && record.parent != nil && record.parent != record.recordName
        }
        try pass { record in
            if record.isShare && !record.isDeleted {
                shares.append(record)
                return
            }
            if let share = record.share, !record.isDeleted {
                roots[RecordID(recordName: share, zone: record.zone)] = record.recordName
            }
            if hasParent(record) {
                waiting += 1
                return
            }
            try take(record)
        }
        var depth = 1
        while waiting > 0 && !stopped && depth <= OperationBatches.maxDepth {
            var sent = 0
            try pass { record in
                guard hasParent(record), try level(record, limit: depth + 1) == depth else { return }
                sent += 1
                try take(record)
            }
            waiting -= sent
            depth += 1
        }
        if waiting > 0 && !stopped {
            // Parents in a loop, or deeper than any app nests: sent as they come (CloudKit says
            // which it takes).
            try pass { record in
                guard hasParent(record), try level(record, limit: OperationBatches.maxDepth + 1) == nil else { return }
                try take(record)
            }
        }
        guard !stopped else { return }
        for zone in open.keys.sorted() {
            if let batch = close(zone), !(try emit(batch)) { return }
        }
        var plans: [SharePlan] = []
        for share in shares {
            // A root the push did not select is still the store's: look for it there.
            var root = roots[share.id]
            if root == nil {
                let predicate = RecordPredicate([
                    Condition(field: "___share", op: .equal, value: .string(share.recordName))
                ])
                let types = session.schema.recordTypes.map(\.name).filter { $0 != Record.shareType }
                try session.forEach(
                    RecordQuery(
                        recordTypes: types, scope: share.zone.scope, zoneName: share.zone.zoneName, predicate: predicate
                    )
                ) { record in
                    if record.zone == share.zone { root = record.recordName }
                }
            }
            plans.append(SharePlan(share: share, root: root))
        }
        if !unsent.isEmpty || !plans.isEmpty, let zone = lastZone ?? plans.first?.share.zone {
            _ = try emit(OperationBatch(zone: zone, unsent: unsent, shares: plans))
        }
    }

    /// Adds a record's operation; returns the batch it closed, if any.
    private func add(_ record: Record) -> OperationBatch? {
        let type: String
        if record.isDeleted {
            guard request.force else {
                unsent.append(
                    PushRejection(
                        operation: operation(record, type: "delete").0, serverErrorCode: "NOT_SENT",
                        reason:
                            "a deletion is sent only when forced: the store keeps no change tag for a deleted record"))
                return nil
            }
            type = "forceDelete"
        } else {
            type = request.mode.operationType(force: request.force)
        }
        let (operation, notSent) = operation(record, type: type)
        if let reason = notSent {
            unsent.append(PushRejection(operation: operation, serverErrorCode: "NOT_SENT", reason: reason))
            return nil
        }
        var entry = open[record.zone] ?? (ModifyBatcher(byteBudget: request.byteBudget), [])
        var closed: OperationBatch?
        if entry.batcher.add(operation.json) != nil {
            closed = OperationBatch(zone: record.zone, operations: entry.operations, unsent: unsent)
            unsent = []
            entry.operations = []
        }
        entry.operations.append(operation)
        open[record.zone] = entry
        return closed
    }

    private func close(_ zone: ZoneID) -> OperationBatch? {
        guard let entry = open.removeValue(forKey: zone), !entry.operations.isEmpty else { return nil }
        defer { unsent = [] }
        return OperationBatch(zone: zone, operations: entry.operations, unsent: unsent)
    }

    /// Why a record's operation cannot go to CloudKit as the store holds it, or nil.
    private func whyNotSent(_ record: Record, operation: PushOperation) -> Message? {
        // CloudKit checks the change tag of update and replace, and refuses the whole request
        // when one lacks it.
        if operation.withChangeTag && record.changeTag == nil {
            return
                "the record has no change tag (it was not pulled from CloudKit), which \(operation.operationType) needs: \(Wording.createOrForcePush)"
        }
        return nil
    }

    /// A record's operation, and why it cannot be sent, if it cannot.
    private func operation(_ record: Record, type: String) -> (PushOperation, notSent: Message?) {
        var record = record
        var operation = PushOperation(
            zone: record.zone, recordType: record.recordType, recordName: record.recordName, operationType: type,
            json: [])
        operation.withChangeTag = !type.hasPrefix("force") && type != "create"
        var missing: [String] = []
        for entry in record.fields.entries {
            switch entry.value {
            case .asset(let asset):
                if let sha256 = asset.sha256 {
                    operation.uploads.append(AssetUpload(field: entry.name, element: nil, sha256: sha256))
                } else if asset.receipt == nil {
                    missing.append(entry.name)
                }
            case .list(.asset, let items):
                for (position, item) in items.enumerated() {
                    guard case .asset(let asset) = item else { continue }
                    if let sha256 = asset.sha256 {
                        operation.uploads.append(AssetUpload(field: entry.name, element: position, sha256: sha256))
                    } else if asset.receipt == nil {
                        missing.append("\(entry.name)[\(position)]")
                    }
                }
            default:
                break
            }
        }
        if !missing.isEmpty && !operation.isDeletion {
            // CloudKit takes an asset only with the receipt of an upload; without the bytes there
            // is nothing to upload. An update changes only the fields it sends, so it leaves
            // CloudKit's copy of such a field alone; a create or replace cannot.
            if request.mode == .update {
                for field in Set(missing.map { String($0.prefix { $0 != "[" }) }) { record.fields[field] = nil }
            } else {
                operation.record = record
                operation.encode(with: codec)
                operation.record = nil
                return (
                    operation,
                    "the store holds no bytes of asset\(missing.count == 1 ? "" : "s") \(missing.joined(separator: ", ")), and CloudKit takes an asset only with its upload's receipt: \(Wording.keepAssetBytes)"
                )
            }
        }
        operation.record = record
        operation.encode(with: codec)
        if operation.uploads.isEmpty { operation.record = nil }
        return (operation, whyNotSent(record, operation: operation))
    }
}

/// Hands batches from a producer thread to an async consumer, at most `depth` waiting: the
/// producer blocks when the consumer falls behind, and the consumer suspends (it never blocks
/// a thread) until a batch comes.
///
/// The consumer may also send the producer's thread an errand to run with the producer's
/// `Context` (the push sends its asset reads to the reader's session). A store with one
/// connection cannot serve a second reader while the producer's transaction is open, and the
/// producer keeps it open while it waits for the consumer: read elsewhere, the two would wait
/// for each other. The producer runs errands whenever it waits for room, and once it has
/// finished, until the consumer has taken the last batch or gone.
final class BatchFeed<Element: Sendable, Context>: Sendable {
    typealias Errand = @Sendable (Context) -> Void

    private struct State {
        var waiting: [Element] = []
        var ended = false
        var failure: Error?
        var cancelled = false
        /// The consumer has been told there is nothing more.
        var drained = false
        /// The producer's thread no longer runs errands.
        var producerGone = false
        var errands: [(run: Errand, refuse: @Sendable (Error) -> Void)] = []
        var consumer: CheckedContinuation<Element?, Error>?
    }
    /// Continuations are resumed after the lock is let go.
    private let state = Monitor(State())
    private let depth: Int

    init(depth: Int) { self.depth = depth }

    /// Producer: false when the consumer has gone and production should stop. Runs the
    /// consumer's errands with `context` while it waits for room.
    func put(_ element: Element, context: Context) -> Bool {
        let depth = self.depth
        while true {
            let (accepted, consumer, errands) = state.withLock(
                when: { $0.waiting.count < depth || $0.cancelled || !$0.errands.isEmpty },
                then: {
                    state -> (Bool, CheckedContinuation<Element?, Error>?, [Errand]) in
                    if !state.errands.isEmpty {
                        defer { state.errands.removeAll() }
                        return (true, nil, state.errands.map(\.run))
                    }
                    if state.cancelled { return (false, nil, []) }
                    if let consumer = state.consumer {
                        state.consumer = nil
                        return (true, consumer, [])
                    }
                    state.waiting.append(element)
                    return (true, nil, [])
                })
            if !errands.isEmpty {
                for errand in errands { errand(context) }
                continue
            }
            consumer?.resume(returning: element)
            return accepted
        }
    }

    /// Producer: no more batches. Then runs the consumer's errands with `context` until the
    /// consumer has taken the last batch or gone.
    func finish(context: Context) {
        end(nil)
        while true {
            let errands = state.withLock(
                when: { $0.drained || $0.cancelled || !$0.errands.isEmpty },
                then: { state -> [Errand] in
                    defer { state.errands.removeAll() }
                    return state.errands.map(\.run)
                })
            if errands.isEmpty { break }
            for errand in errands { errand(context) }
        }
        producerGone(nil)
    }

    /// Producer: production failed with `error`, or (nil) the producer's thread is ending.
    func fail(_ error: Error) {
        end(error)
        producerGone(error)
    }

    private func end(_ error: Error?) {
        let consumer = state.withLock { state in
            if !state.ended {
                state.ended = true
                state.failure = error
            }
            defer { state.consumer = nil }
            return state.consumer
        }
        if let error { consumer?.resume(throwing: error) } else { consumer?.resume(returning: nil) }
        if consumer != nil && error == nil { state.withLock { $0.drained = true } }
    }

    /// Errands no one will run are refused.
    private func producerGone(_ error: Error?) {
        let refused = state.withLock { state in
            state.producerGone = true
            defer { state.errands.removeAll() }
            return state.errands.map(\.refuse)
        }
        for refuse in refused { refuse(error ?? CancellationError()) }
    }

    /// What the consumer finds when it asks.
    private enum Now {
        case element(Element)
        case ended(Error?)
        case waiting
    }

    /// Consumer: the next batch, nil at the end.
    func next() async throws -> Element? {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Element?, Error>) in
            let now: Now = state.withLock { state in
                if !state.waiting.isEmpty { return .element(state.waiting.removeFirst()) }
                if state.ended {
                    if state.failure == nil { state.drained = true }
                    return .ended(state.failure)
                }
                state.consumer = continuation
                return .waiting
            }
            switch now {
            case .element(let element): continuation.resume(returning: element)
            case .ended(let failure?): continuation.resume(throwing: failure)
            case .ended(nil): continuation.resume(returning: nil)
            case .waiting: break
            }
        }
    }

    /// Consumer: runs `work` on the producer's thread with its context, and returns what it
    /// returns. Fails when the producer has gone (it failed, or the consumer cancelled).
    func errand<T: Sendable>(_ work: @escaping @Sendable (Context) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
            let gone: Error? = state.withLock { state in
                if state.producerGone || state.cancelled || state.drained {
                    return state.failure ?? CancellationError()
                }
                state.errands.append(
                    (
                        run: { context in continuation.resume(with: Result { try work(context) }) },
                        refuse: { continuation.resume(throwing: $0) }
                    ))
                return nil
            }
            if let gone { continuation.resume(throwing: gone) }
        }
    }

    /// Consumer: stop; a producer waiting for room is told to stop, and errands not yet run
    /// are refused.
    func cancel() {
        let refused = state.withLock { state in
            state.cancelled = true
            state.waiting.removeAll()
            defer { state.errands.removeAll() }
            return state.errands.map(\.refuse)
        }
        for refuse in refused { refuse(CancellationError()) }
    }
}
