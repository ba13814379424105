import CloudKitWeb
import Foundation
import Formats
import Records
import Store

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

    public init(query: RecordQuery = RecordQuery(), since: ChangeToken? = nil, mode: PushMode = .create, force: Bool = false,
                byteBudget: Int = 2 << 20) {
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
    /// Asset fields whose bytes the store holds (field name → SHA-256): uploaded before the
    /// operation is sent, which then carries CloudKit's receipt instead.
    public var uploads: [String: String] = [:]
    /// The record, while its operation may still change (an upload's receipt).
    var record: Record?
    var withChangeTag = false

    /// Rebuilds the operation's JSON from the record.
    mutating func encode(with codec: JSONRecordCodec) {
        guard let record else { return }
        var out = JSONWriter(capacity: 512)
        out.raw("{\"operationType\":")
        out.string(operationType)
        out.raw(",\"record\":")
        codec.encodeForModify(record, withChangeTag: withChangeTag, to: &out)
        out.byte(UInt8(ascii: "}"))
        json = out.bytes
    }
}

/// A record CloudKit turned away, or one a push could not send.
public struct PushRejection: Sendable {
    public var operation: PushOperation
    /// CloudKit's code (CONFLICT, EXISTS, NOT_FOUND, …), or ckport's reason for not sending.
    public var serverErrorCode: String
    public var reason: String
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
    public var underlying: String
    public var underlyingCategory: ErrorCategory

    public init(partial: PushResult, underlying: String, underlyingCategory: ErrorCategory) {
        self.partial = partial
        self.underlying = underlying
        self.underlyingCategory = underlyingCategory
    }

    public var category: ErrorCategory { underlyingCategory }
    public var description: String {
        let total = partial.total
        return "\(underlying)\n  before it stopped, CloudKit accepted \(total.saved) records and \(total.deleted) deletions in \(partial.requests) requests; pushing again sends them again (with create: reported as EXISTS)"
    }
}

extension CloudSync {
    /// The operations a push would send, in the order it would send them, without reaching
    /// CloudKit. Deletions (with `since`) need `force`: the store keeps no change tag for them.
    public static func plan(_ store: some RecordStoring, request: PushRequest, database: CloudKitDatabase,
                            _ each: (PushOperation) throws -> Void) throws {
        try store.readSession { session in
            let batches = OperationBatches(request: request, database: database, schema: session.schema)
            try batches.produce(session) { batch in
                for operation in batch.operations { try each(operation) }
                return true
            }
        }
    }

    /// Sends the records `request` selects to the database `client` speaks to, in
    /// `records/modify` requests of at most 200 operations and `request.byteBudget` bytes,
    /// creating custom zones CloudKit lacks. Records CloudKit turns away (EXISTS, CONFLICT,
    /// NOT_FOUND, …) go to `rejected` one by one; the rest of the push goes on. The store is
    /// read in one transaction on a thread of its own, a few requests ahead of the sending.
    public static func push(_ client: CloudKitClient, from store: some RecordStoring, request: PushRequest,
                            progress: ProgressHandler? = nil, rejected: (PushRejection) throws -> Void) async throws -> PushResult {
        let database = client.database
        var result = PushResult(destination: source(database))
        let codec = JSONRecordCodec(schema: store.schema)
        do {
            var known = Set(try await zones(client).map(\.zoneName))
            let feed = BatchFeed<OperationBatch>(depth: 4)
            nonisolated(unsafe) let reading: any RecordStoring = store
            let producer = Thread {
                do {
                    try reading.readSession { session in
                        let batches = OperationBatches(request: request, database: database, schema: session.schema)
                        try batches.produce(session) { feed.put($0) }
                    }
                    feed.finish(nil)
                } catch {
                    feed.finish(error)
                }
            }
            producer.start()
            defer { feed.cancel() }
            var sent = 0
            while let batch = try await feed.next() {
                for rejection in batch.unsent {
                    result.byType[rejection.operation.recordType, default: PushCounts()].failed += 1
                    try rejected(rejection)
                }
                guard !batch.operations.isEmpty else { continue }
                if batch.zone.zoneName != ZoneID.defaultZoneName && !known.contains(batch.zone.zoneName) {
                    try await createZone(batch.zone, client: client)
                    known.insert(batch.zone.zoneName)
                    result.zonesCreated.append(batch.zone.zoneName)
                }
                var batch = batch
                try await uploadAssets(&batch, client: client, store: store, codec: codec)
                let answer = try await client.send("records/modify", body: Data(batch.requestBody()))
                result.requests += 1
                let object = try JSONSerialization.jsonObject(with: answer) as? [String: Any] ?? [:]
                let outcomes = object["records"] as? [[String: Any]] ?? []
                for (index, operation) in batch.operations.enumerated() {
                    let outcome = outcomes.indices.contains(index) && outcomes[index]["recordName"] as? String == operation.recordName
                        ? outcomes[index] : outcomes.first { $0["recordName"] as? String == operation.recordName }
                    var counts = result.byType[operation.recordType, default: PushCounts()]
                    if let outcome, let code = outcome["serverErrorCode"] as? String {
                        switch code {
                        case "EXISTS": counts.exists += 1
                        case "CONFLICT": counts.conflicts += 1
                        case "NOT_FOUND": counts.missing += 1
                        default: counts.failed += 1
                        }
                        result.byType[operation.recordType] = counts
                        try rejected(PushRejection(operation: operation, serverErrorCode: code, reason: outcome["reason"] as? String ?? ""))
                    } else if outcome == nil {
                        counts.failed += 1
                        result.byType[operation.recordType] = counts
                        try rejected(PushRejection(operation: operation, serverErrorCode: "NO_ANSWER", reason: "CloudKit's answer did not mention this record"))
                    } else {
                        if operation.operationType.hasSuffix("elete") { counts.deleted += 1 } else { counts.saved += 1 }
                        result.byType[operation.recordType] = counts
                    }
                }
                sent += batch.operations.count
                progress?(OperationProgress(records: sent))
            }
            return result
        } catch let error as CKPortError {
            throw CloudPushStopped(partial: result, underlying: error.description, underlyingCategory: error.category)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw CloudPushStopped(partial: result, underlying: "\(error)", underlyingCategory: .environment)
        }
    }

    /// Uploads the assets a batch's records hold in the store (`assets/upload` for the URLs,
    /// then each file's bytes), and puts CloudKit's receipts in their operations.
    private static func uploadAssets(_ batch: inout OperationBatch, client: CloudKitClient, store: some RecordStoring, codec: JSONRecordCodec) async throws {
        let wanted = batch.operations.indices.flatMap { index in batch.operations[index].uploads.keys.sorted().map { (index, $0) } }
        guard !wanted.isEmpty else { return }
        let tokens: [[String: Any]] = wanted.map { index, field in
            ["recordName": batch.operations[index].recordName, "recordType": batch.operations[index].recordType, "fieldName": field]
        }
        let request = try JSONSerialization.data(withJSONObject: ["zoneID": zoneJSON(batch.zone), "tokens": tokens], options: [.sortedKeys])
        let answer = try JSONSerialization.jsonObject(with: try await client.send("assets/upload", body: request)) as? [String: Any]
        let places = answer?["tokens"] as? [[String: Any]] ?? []
        for (index, field) in wanted {
            let name = batch.operations[index].recordName
            guard let place = places.first(where: { $0["recordName"] as? String == name && $0["fieldName"] as? String == field }),
                  let address = place["url"] as? String, let url = URL(string: address) else {
                throw CloudKitServerError(serverErrorCode: "BAD_ANSWER", reason: "assets/upload gave no URL for record \(name) field \(field)", status: 200)
            }
            let sha256 = batch.operations[index].uploads[field]!
            var bytes = Data()
            let held = try store.readSession { session in try session.readAsset(sha256) { bytes.append(contentsOf: $0) } }
            guard held else {
                throw CloudKitServerError(serverErrorCode: "NOT_SENT", reason: "record \(name) field \(field): the store no longer holds asset \(sha256)", status: 0)
            }
            let uploaded = try JSONSerialization.jsonObject(with: try await client.upload(bytes, to: url)) as? [String: Any]
            guard let file = uploaded?["singleFile"] as? [String: Any], let checksum = file["fileChecksum"] as? String else {
                throw CloudKitServerError(serverErrorCode: "BAD_ANSWER", reason: "the upload of record \(name) field \(field) was not answered with a singleFile", status: 200)
            }
            let asset = Asset(fileChecksum: checksum, size: (file["size"] as? Int).map(Int64.init) ?? Int64(bytes.count),
                              referenceChecksum: file["referenceChecksum"] as? String, wrappingKey: file["wrappingKey"] as? String,
                              receipt: file["receipt"] as? String)
            batch.operations[index].record?[field] = .asset(asset)
        }
        for index in Set(wanted.map(\.0)) {
            batch.operations[index].encode(with: codec)
            batch.operations[index].record = nil
        }
    }

    /// The zones of the database `client` speaks to.
    public static func zones(_ client: CloudKitClient) async throws -> [ZoneID] {
        let scope = DatabaseScope(rawValue: client.database.scope.rawValue)!
        let listing = try JSONSerialization.jsonObject(with: try await client.send("zones/list")) as? [String: Any] ?? [:]
        return (listing["zones"] as? [[String: Any]] ?? []).compactMap { entry -> ZoneID? in
            guard let id = entry["zoneID"] as? [String: Any], let name = id["zoneName"] as? String else { return nil }
            return ZoneID(scope: scope, zoneName: name, ownerRecordName: id["ownerRecordName"] as? String ?? ZoneID.defaultOwnerName)
        }
    }

    private static func createZone(_ zone: ZoneID, client: CloudKitClient) async throws {
        let body: [String: Any] = ["operations": [["operationType": "create", "zone": ["zoneID": zoneJSON(zone)]]]]
        _ = try await client.send("zones/modify", body: try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys]))
    }

    /// A zone as CloudKit's requests name it.
    static func zoneJSON(_ zone: ZoneID) -> [String: Any] {
        var json: [String: Any] = ["zoneName": zone.zoneName]
        if zone.ownerRecordName != ZoneID.defaultOwnerName { json["ownerRecordName"] = zone.ownerRecordName }
        return json
    }
}

/// Operations of one zone, ready to go in one `records/modify` request; and operations that
/// are not to be sent, with the reason.
struct OperationBatch: Sendable {
    var zone: ZoneID
    var operations: [PushOperation] = []
    var unsent: [PushRejection] = []

    func requestBody() -> [UInt8] {
        var out = JSONWriter(capacity: operations.reduce(64) { $0 + $1.json.count + 1 })
        out.raw("{\"atomic\":false,\"operations\":[")
        for (index, operation) in operations.enumerated() {
            if index > 0 { out.byte(UInt8(ascii: ",")) }
            out.bytes.append(contentsOf: operation.json)
        }
        out.raw("],\"zoneID\":{\"zoneName\":")
        out.string(zone.zoneName)
        if zone.ownerRecordName != ZoneID.defaultOwnerName {
            out.raw(",\"ownerRecordName\":")
            out.string(zone.ownerRecordName)
        }
        out.raw("}}")
        return out.bytes
    }
}

/// Turns the store's records into batches of operations, a zone at a time.
final class OperationBatches {
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
    func produce(_ session: any RecordSession, _ emit: (OperationBatch) throws -> Bool) throws {
        var stopped = false
        var lastZone: ZoneID?
        let each: (Record) throws -> Void = { record in
            guard !stopped else { return }
            // In store order a zone's records come together: close the previous zone's batch.
            if self.request.since == nil, let lastZone, lastZone != record.zone, let batch = self.close(lastZone) {
                stopped = !(try emit(batch))
            }
            lastZone = record.zone
            if let full = self.add(record) { stopped = !(try emit(full)) }
        }
        if let since = request.since {
            try session.forEachChange(since: since, recordTypes: request.query.recordTypes, scope: scope, zoneName: request.query.zoneName, each)
        } else {
            var query = request.query
            query.scope = scope
            try session.forEach(query, each)
        }
        guard !stopped else { return }
        for zone in open.keys.sorted() {
            if let batch = close(zone), !(try emit(batch)) { return }
        }
        if !unsent.isEmpty, let zone = lastZone {
            _ = try emit(OperationBatch(zone: zone, unsent: unsent))
        }
    }

    /// Adds a record's operation; returns the batch it closed, if any.
    private func add(_ record: Record) -> OperationBatch? {
        let type: String
        if record.isDeleted {
            guard request.force else {
                unsent.append(PushRejection(operation: operation(record, type: "delete"), serverErrorCode: "NOT_SENT",
                                            reason: "a deletion is sent only when forced: the store keeps no change tag for a deleted record"))
                return nil
            }
            type = "forceDelete"
        } else {
            type = request.mode.operationType(force: request.force)
        }
        let operation = operation(record, type: type)
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

    private func operation(_ record: Record, type: String) -> PushOperation {
        var operation = PushOperation(zone: record.zone, recordType: record.recordType, recordName: record.recordName, operationType: type, json: [])
        operation.record = record
        operation.withChangeTag = !type.hasPrefix("force") && type != "create"
        for entry in record.fields.entries {
            if case .asset(let asset) = entry.value, let sha256 = asset.sha256 { operation.uploads[entry.name] = sha256 }
        }
        operation.encode(with: codec)
        if operation.uploads.isEmpty { operation.record = nil }
        return operation
    }
}

/// Hands batches from a producer thread to an async consumer, at most `depth` waiting: the
/// producer blocks when the consumer falls behind, and the consumer suspends (it never blocks
/// a thread) until a batch comes.
final class BatchFeed<Element: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var waiting: [Element] = []
    private var ended = false
    private var failure: Error?
    private var cancelled = false
    private var consumer: CheckedContinuation<Element?, Error>?
    private let depth: Int

    init(depth: Int) { self.depth = depth }

    /// Producer: false when the consumer has gone and production should stop.
    func put(_ element: Element) -> Bool {
        condition.lock()
        while waiting.count >= depth && !cancelled { condition.wait() }
        if cancelled { condition.unlock(); return false }
        if let consumer {
            self.consumer = nil
            condition.unlock()
            consumer.resume(returning: element)
            return true
        }
        waiting.append(element)
        condition.unlock()
        return true
    }

    /// Producer: no more batches; `error` when production failed.
    func finish(_ error: Error?) {
        condition.lock()
        ended = true
        failure = error
        let consumer = self.consumer
        self.consumer = nil
        condition.unlock()
        if let error { consumer?.resume(throwing: error) } else { consumer?.resume(returning: nil) }
    }

    /// Consumer: the next batch, nil at the end.
    func next() async throws -> Element? {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Element?, Error>) in
            condition.lock()
            if !waiting.isEmpty {
                let element = waiting.removeFirst()
                condition.broadcast()
                condition.unlock()
                continuation.resume(returning: element)
            } else if ended {
                let failure = self.failure
                condition.unlock()
                if let failure { continuation.resume(throwing: failure) } else { continuation.resume(returning: nil) }
            } else {
                consumer = continuation
                condition.unlock()
            }
        }
    }

    /// Consumer: stop; a producer waiting for room is told to stop.
    func cancel() {
        condition.lock()
        cancelled = true
        waiting.removeAll()
        condition.broadcast()
        condition.unlock()
    }
}
