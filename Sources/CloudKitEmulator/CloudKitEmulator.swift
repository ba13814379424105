import CloudKitWeb
import Crypto
import Foundation
import Records
import Synchronization

/// CloudKit Web Services over an in-memory container, for tests and for trying scripts
/// offline. It answers as Apple's service does where public captures of real answers show it,
/// and as the CloudKit Web Services Reference says where none do
/// (`Tests/CloudKitWebTests/Fixtures/captures.json` holds the captures it is checked against,
/// each with its source):
///
/// - Web auth tokens shaped like Apple's (`106__54__…__…`, with `+`, `/` and `=`), read from a
///   query string the way a form is (`+` is a space), turned over in
///   `X-Apple-CloudKit-Web-Auth-Token` with every answer; a sign-in's tokens all work until it
///   ends, 30 minutes after it, or two weeks with "Keep me signed in".
/// - `zones/list`, `zones/modify`, `zones/changes` (`metaSyncToken`, deleted zones),
///   `records/modify` (change tags required for update, replace and delete, CONFLICT, EXISTS,
///   NOT_FOUND, the 200-operation limit, no atomic requests in the default zone),
///   `records/changes` (sync tokens that expire with a zone's reset, `moreComing`),
///   `records/query` (only types the schema indexes; never system types), `assets/upload`,
///   `users/current`, and a sign-in page.
/// - Zone owners as CloudKit names them, share records (`cloudkit.share`) in change feeds,
///   empty lists answered as `UNKNOWN_LIST`, encrypted values as `"isEncrypted": true`.
/// - Faults injected on purpose: THROTTLED, TRY_AGAIN_LATER and INTERNAL_ERROR with or without
///   `retryAfter`, a bare 503, a cut connection, QUOTA_EXCEEDED, records to send again later.
///
/// It answers requests in-process (it is a ``CloudKitTransport``); ``EmulatorServer`` puts it
/// on a loopback port.
///
/// Its container is one ``EmulatedContainer`` behind a mutex: a request, or a test's change,
/// has it to itself while it runs.
public final class CloudKitEmulator: CloudKitTransport, Sendable {
    public struct Settings: Sendable {
        /// Records per `records/changes` or `records/query` answer at most: small values force
        /// clients through many pages.
        public var pageSize = 200
        /// Operations per `records/modify` request at most.
        public var maxOperations = ModifyBatcher.maxOperations
        /// The largest asset an upload takes, in bytes.
        public var maxAssetSize = 15 << 20
        /// How far a server-to-server request's date may be from the emulator's clock.
        public var clockSkew: TimeInterval = 600
        /// Where the sign-in page sends the browser with a new web auth token, as an API
        /// token's "URL Redirect" sign-in callback does; nil: the page says none is set.
        public var signInCallback: String?
        /// Whether the person signing in on the sign-in page ticks "Keep me signed in" (the
        /// page's `keep=1` ticks it for one sign-in).
        public var keepSignedIn = false
        /// How an empty list comes back: as `UNKNOWN_LIST` (as CloudKit answered in captures
        /// from 2016), or under its own type (as in captures from 2026).
        public var emptyListsAsUnknown = true
        /// Keep every request's body in ``CloudKitEmulator/sentBodies``, for tests to read.
        public var keepRequestBodies = false
        public init() {}
    }

    /// A fault to answer with instead of doing the work.
    public enum Fault: Sendable, Equatable {
        /// 429 THROTTLED, with or without `retryAfter`.
        case throttled(retryAfter: Double?)
        /// 503 TRY_AGAIN_LATER, with or without `retryAfter`.
        case tryAgainLater(retryAfter: Double?)
        /// 500 INTERNAL_ERROR, without `retryAfter`.
        case internalError
        /// 503 with no error dictionary (a load balancer's page).
        case unavailable
        case droppedConnection
        case quotaExceeded
        /// In the next `records/modify`, the first `count` operations are answered with a
        /// per-record TRY_AGAIN_LATER and `retryAfter`, and not applied.
        case recordsBusy(count: Int, retryAfter: Double)
        /// In the next `zones/modify`, each zone to create is answered with this per-zone error.
        case zoneRefused(code: String, reason: String)
        /// Every `records/modify` that holds an operation on this record is refused whole, 400
        /// BAD_REQUEST (as CloudKit refuses a request for what one of its records holds).
        /// Stays until the emulator goes.
        case refuseRequestsHolding(recordName: String)
    }

    /// The connection was cut before an answer came.
    public struct ConnectionDropped: Error {
        public init() {}
    }

    public let container: String
    private let state: Mutex<EmulatedContainer>

    public init(container: String, settings: Settings = Settings()) {
        self.container = container
        state = Mutex(EmulatedContainer(container: container, settings: settings))
    }

    /// The emulator's settings; a change applies from the next request on.
    public var settings: Settings {
        get { state.withLock { $0.settings } }
        set { state.withLock { $0.settings = newValue } }
    }

    /// Every operation answered, in order, for tests to look at.
    public var log: [String] { state.withLock { $0.log } }
    /// Every request's URL, in order, for tests to look at.
    public var requests: [URL] { state.withLock { $0.requests } }
    /// Every request's body, in order, when the settings say to keep them.
    public var sentBodies: [Data] { state.withLock { $0.sentBodies } }

    // MARK: - Setting up

    public func registerKey(id: String, publicKeyPEM: String) {
        state.withLock { $0.registerKey(id: id, publicKeyPEM: publicKeyPEM) }
    }

    /// Registers an API token and a user signed in now with `webAuthToken` (a token of the
    /// test's choosing; ``signIn(apiToken:user:keepSignedIn:)`` makes one shaped like Apple's).
    /// `signedInAgo`: how long before now the sign-in began (a sign-in that has ended, say).
    public func registerUser(
        apiToken: String, webAuthToken: String, user: String = "_user", keepSignedIn: Bool = false,
        signedInAgo: TimeInterval = 0
    ) {
        state.withLock {
            $0.registerUser(
                apiToken: apiToken, webAuthToken: webAuthToken, user: user, keepSignedIn: keepSignedIn,
                signedInAgo: signedInAgo)
        }
    }

    /// Signs `user` in as the sign-in page would, and returns the first web auth token.
    public func signIn(apiToken: String, user: String = "_user", keepSignedIn: Bool = false) -> String {
        state.withLock { $0.signIn(apiToken: apiToken, user: user, keepSignedIn: keepSignedIn) }
    }

    /// Tells the container its schema (as `cktool export-schema` writes it): queries then go
    /// only to types whose `___recordID` is QUERYABLE, and encrypted fields take only values
    /// marked encrypted.
    public func defineSchema(_ schema: Schema) { state.withLock { $0.schema = schema } }

    /// Moves the emulator's clock on (sign-ins expire, server-to-server dates age).
    public func advanceClock(by seconds: TimeInterval) { state.withLock { $0.clockOffset += seconds } }

    /// Stops the emulator's clock where it is: from now on only ``advanceClock(by:)`` moves it,
    /// so that a test's sign-ins age by what the test says, however slowly it runs.
    public func freezeClock() { state.withLock { $0.frozenAt = Date() } }

    /// Keeps asset bytes as an upload would, and returns the receipt that a record's ASSETID
    /// value names them by (`{"receipt": …, "size": …}` in `records/modify`).
    public func storeAsset(_ bytes: Data) -> String { state.withLock { $0.storeAsset(bytes) } }

    /// Answers the next request to `operation` (or to any operation, with "*") with `fault`.
    public func inject(_ fault: Fault, on operation: String = "*", times: Int = 1) {
        state.withLock { $0.inject(fault, on: operation, times: times) }
    }

    /// Puts records (as CloudKit sends them, or as `ckport export` writes them) into a
    /// database of the container, each in the zone its `zoneID` names (else `zone`), as
    /// changes the feed will report.
    public func load(
        _ records: [CloudKitWire.Record], environment: CloudKitDatabase.Environment = .development,
        scope: CloudKitDatabase.Scope = .private, zone: String = "_defaultZone"
    ) {
        state.withLock { $0.load(records, environment: environment, scope: scope, zone: zone) }
    }

    /// ``load(_:environment:scope:zone:)`` for records already parsed by ckport's own JSON
    /// reader: much faster for large loads.
    public func load(
        json records: [JSONValue], environment: CloudKitDatabase.Environment = .development,
        scope: CloudKitDatabase.Scope = .private, zone: String = "_defaultZone"
    ) {
        state.withLock { $0.load(json: records, environment: environment, scope: scope, zone: zone) }
    }

    /// Deletes a zone and its records, as its owner would in an app.
    public func deleteZone(
        _ name: String, environment: CloudKitDatabase.Environment = .development,
        scope: CloudKitDatabase.Scope = .private, owner: String? = nil
    ) {
        state.withLock { $0.deleteZone(name, environment: environment, scope: scope, owner: owner) }
    }

    /// Makes a zone's sync tokens stop working, as CloudKit's do when they are old or the zone
    /// was reset; `keeping` names the records it still holds afterwards (nil: all).
    public func expireSyncTokens(
        zone name: String, environment: CloudKitDatabase.Environment = .development,
        scope: CloudKitDatabase.Scope = .private, keeping: Set<String>? = nil
    ) {
        state.withLock { $0.expireSyncTokens(zone: name, environment: environment, scope: scope, keeping: keeping) }
    }

    /// Shares `root` (a record of a custom zone) as an app would with `CKShare(rootRecord:)`:
    /// a `cloudkit.share` record joins the zone, its owner and participants with it, and the
    /// root record names it in `share`; both changes reach the zone's change feed. Returns
    /// the share's record name.
    @discardableResult
    public func share(
        _ root: String, zone name: String, title: String,
        participants: [(user: String, permission: String, accepted: Bool)] = [],
        publicPermission: String = "NONE", environment: CloudKitDatabase.Environment = .development,
        scope: CloudKitDatabase.Scope = .private
    ) -> String? {
        state.withLock {
            $0.share(
                root, zone: name, title: title, participants: participants, publicPermission: publicPermission,
                environment: environment, scope: scope)
        }
    }

    // MARK: - Answering

    public func send(_ request: CloudKitHTTPRequest) async throws -> CloudKitHTTPResponse {
        try respond(request)
    }

    /// Answers a request; throws ``ConnectionDropped`` when a fault cuts the connection.
    public func respond(_ request: CloudKitHTTPRequest) throws -> CloudKitHTTPResponse {
        try state.withLock { try $0.answer(request) }
    }
}

/// The emulated container: its databases, zones, records, users and faults. Not thread-safe on
/// its own: ``CloudKitEmulator`` holds it behind a mutex, and every method here runs with the
/// mutex held.
final class EmulatedContainer {
    typealias Settings = CloudKitEmulator.Settings
    typealias Fault = CloudKitEmulator.Fault
    typealias ConnectionDropped = CloudKitEmulator.ConnectionDropped

    let container: String
    var settings: Settings
    /// "environment/database" → zone key → zone. A zone's key is its name, and in the shared
    /// database its owner's name before it (`owner/name`).
    var databases: [String: [String: EmulatedZone]] = [:]
    /// "environment/database" → every zone created or deleted, in order, for `zones/changes`.
    var zoneLog: [String: [(sequence: Int, zone: EmulatedZone, deleted: Bool)]] = [:]
    var sequence = 0
    var zoneSequence = 0
    var keys: [String: String] = [:]  // key ID → public key PEM
    var apiTokens: Set<String> = []
    var sessions: [Int: SignInSession] = [:]
    var tokens: [String: Int] = [:]  // web auth token → sign-in
    var nextSession = 0
    var signInUser = "_user"
    /// Asset bytes by receipt (uploaded, or put here by ``storeAsset(_:)``).
    var assets: [String: Data] = [:]
    var pendingUploads: Set<String> = []
    var faults: [(operation: String, fault: Fault)] = []
    var refusedRecords: Set<String> = []
    /// What the container's schema says, when the emulator was given one: which types may be
    /// queried, which fields are encrypted.
    var schema: Schema?
    var clockOffset: TimeInterval = 0
    var frozenAt: Date?
    /// Every operation answered, in order, for tests to look at.
    var log: [String] = []
    /// Every request's URL, in order, for tests to look at.
    var requests: [URL] = []
    /// Every request's body, in order, when the settings say to keep them.
    var sentBodies: [Data] = []

    init(container: String, settings: Settings = Settings()) {
        self.container = container
        self.settings = settings
    }

    // MARK: - Setting up

    func registerKey(id: String, publicKeyPEM: String) { do { keys[id] = publicKeyPEM } }

    /// Registers an API token and a user signed in now with `webAuthToken` (a token of the
    /// test's choosing; ``signIn(apiToken:user:keepSignedIn:)`` makes one shaped like Apple's).
    /// `signedInAgo`: how long before now the sign-in began (a sign-in that has ended, say).
    func registerUser(
        apiToken: String, webAuthToken: String, user: String = "_user", keepSignedIn: Bool = false,
        signedInAgo: TimeInterval = 0
    ) {
        do {
            signInUser = user
            apiTokens.insert(apiToken)
            let session = startSession(user: user, keepSignedIn: keepSignedIn)
            sessions[session]!.signedInAt -= signedInAgo
            tokens[webAuthToken] = session
        }
    }

    /// Signs `user` in as the sign-in page would, and returns the first web auth token.
    func signIn(apiToken: String, user: String = "_user", keepSignedIn: Bool = false) -> String {
        do {
            signInUser = user
            apiTokens.insert(apiToken)
            return issueToken(for: startSession(user: user, keepSignedIn: keepSignedIn))
        }
    }

    /// Tells the container its schema (as `cktool export-schema` writes it): queries then go
    /// only to types whose `___recordID` is QUERYABLE, and encrypted fields take only values
    /// marked encrypted.
    func defineSchema(_ schema: Schema) { do { self.schema = schema } }

    /// Moves the emulator's clock on (sign-ins expire, server-to-server dates age).
    func advanceClock(by seconds: TimeInterval) { do { clockOffset += seconds } }

    /// Stops the emulator's clock where it is: from now on only ``advanceClock(by:)`` moves it,
    /// so that a test's sign-ins age by what the test says, however slowly it runs.
    func freezeClock() { do { frozenAt = Date() } }

    var now: Date { (frozenAt ?? Date()).addingTimeInterval(clockOffset) }

    /// Keeps asset bytes as an upload would, and returns the receipt that a record's ASSETID
    /// value names them by (`{"receipt": …, "size": …}` in `records/modify`).
    func storeAsset(_ bytes: Data) -> String {
        do {
            let receipt = "r-" + UUID().uuidString.lowercased()
            assets[receipt] = bytes
            return receipt
        }
    }

    /// Answers the next request to `operation` (or to any operation, with "*") with `fault`.
    func inject(_ fault: Fault, on operation: String = "*", times: Int = 1) {
        do {
            if case .refuseRequestsHolding(let name) = fault {
                refusedRecords.insert(name)
                return
            }
            for _ in 0..<times { faults.append((operation, fault)) }
        }
    }

    /// Puts records (as CloudKit sends them, or as `ckport export` writes them) into a
    /// database of the container, each in the zone its `zoneID` names (else `zone`), as
    /// changes the feed will report.
    func load(
        _ records: [CloudKitWire.Record], environment: CloudKitDatabase.Environment = .development,
        scope: CloudKitDatabase.Scope = .private, zone defaultZone: String = "_defaultZone"
    ) {
        do {
            let database = "\(environment.rawValue)/\(scope.rawValue)"
            for var record in records {
                guard let name = record.recordName else { continue }
                let zone = zoneForLoading(
                    database, scope: scope, name: record.zoneID?.zoneName ?? defaultZone,
                    owner: record.zoneID?.ownerRecordName)
                sequence += 1
                record.other["scope"] = nil
                record.recordChangeTag = changeTag(sequence)
                record.zoneID = zone.wireID
                record.pluginFields = record.pluginFields ?? [:]
                record.deleted = false
                zone.save(name, record)
                zone.changed(name, at: sequence)
            }
        }
    }

    /// ``load(_:environment:scope:zone:)`` for records already parsed by ckport's own JSON
    /// reader: much faster for large loads, as nothing passes through Foundation's JSON.
    func load(
        json records: [JSONValue], environment: CloudKitDatabase.Environment = .development,
        scope: CloudKitDatabase.Scope = .private, zone defaultZone: String = "_defaultZone"
    ) {
        do {
            let database = "\(environment.rawValue)/\(scope.rawValue)"
            for case .object(let record) in records {
                guard let name = record["recordName"]?.stringValue else { continue }
                var zoneName = defaultZone
                var owner: String?
                if case .object(let zoneID)? = record["zoneID"] {
                    if let given = zoneID["zoneName"]?.stringValue { zoneName = given }
                    owner = zoneID["ownerRecordName"]?.stringValue
                }
                let zone = zoneForLoading(database, scope: scope, name: zoneName, owner: owner)
                sequence += 1
                var kept = record.members.filter {
                    !["scope", "recordChangeTag", "zoneID", "deleted"].contains($0.key)
                }
                // CloudKit names the zone in a record's `share` link.
                for index in kept.indices where kept[index].key == "share" {
                    if case .object(var link) = kept[index].value, link["zoneID"] == nil {
                        link.members.append(JSONObject.Member(key: "zoneID", value: zone.jsonValue))
                        kept[index].value = .object(link)
                    }
                }
                kept.append(JSONObject.Member(key: "recordChangeTag", value: .string(changeTag(sequence))))
                kept.append(JSONObject.Member(key: "deleted", value: .bool(false)))
                kept.append(JSONObject.Member(key: "zoneID", value: zone.jsonValue))
                var writer = JSONWriter(capacity: 2048)
                writer.value(.object(JSONObject(kept)))
                zone.save(name, encoded: Data(writer.bytes), type: record["recordType"]?.stringValue)
                zone.changed(name, at: sequence)
            }
        }
    }

    // MARK: - Answering

    /// Answers a request; throws ``CloudKitEmulator/ConnectionDropped`` when a fault cuts the
    /// connection.
    func answer(_ request: CloudKitHTTPRequest) throws -> CloudKitHTTPResponse {
        requests.append(request.url)
        if settings.keepRequestBodies { sentBodies.append(request.body) }
        if request.url.path == "/signin" { return signInPage(request) }
        if request.url.path.hasPrefix("/upload/") { return receiveAsset(request) }
        if request.url.path.hasPrefix("/download/") { return sendAsset(request) }
        let parts = request.url.path.split(separator: "/").map(String.init)
        // database / 1 / container / environment / database / operation…
        guard parts.count >= 6, parts[0] == "database", parts[1] == "1", parts[2] == container,
            let environment = CloudKitDatabase.Environment(rawValue: parts[3]),
            let scope = CloudKitDatabase.Scope(rawValue: parts[4])
        else {
            return error(404, "NOT_FOUND", "no such container or path: \(request.url.path)")
        }
        let operation = parts[5...].joined(separator: "/")
        log.append(operation)
        var busyRecords: (count: Int, retryAfter: Double)?
        var zoneRefusal: (code: String, reason: String)?
        if operation == "records/modify", !refusedRecords.isEmpty,
            let body = decoded(CloudKitWire.ModifyRequest.self, request.body),
            body.operations.contains(where: { refusedRecords.contains($0.record?.recordName ?? "") })
        {
            return error(400, "BAD_REQUEST", "BadRequestException: Unexpected input")
        }
        if let index = faults.firstIndex(where: { $0.operation == operation || $0.operation == "*" }) {
            let fault = faults.remove(at: index).fault
            switch fault {
            case .throttled(let after): return error(429, "THROTTLED", "request rate too high", retryAfter: after)
            case .tryAgainLater(let after):
                return error(503, "TRY_AGAIN_LATER", "service unavailable, try again later", retryAfter: after)
            case .internalError: return error(500, "INTERNAL_ERROR", "internal server error")
            case .unavailable: return CloudKitHTTPResponse(status: 503, body: Data("Service Unavailable".utf8))
            case .droppedConnection: throw ConnectionDropped()
            case .quotaExceeded: return error(413, "QUOTA_EXCEEDED", "the container is out of space")
            case .recordsBusy(let count, let after): busyRecords = (count, after)
            case .zoneRefused(let code, let reason): zoneRefusal = (code, reason)
            case .refuseRequestsHolding: break
            }
        }
        let caller: Caller
        switch authenticate(request, scope: scope, operation: operation) {
        case .refused(let response): return response
        case .caller(let who): caller = who
        }
        let body = request.body
        let database = "\(environment.rawValue)/\(scope.rawValue)"
        var response: CloudKitHTTPResponse
        switch operation {
        case "users/current" where scope != .shared: response = json(CloudKitWire.User(userRecordName: caller.user))
        case "assets/upload": response = uploadURLs(body, base: request.url)
        case "zones/list": response = listZones(database, scope: scope, caller: caller)
        case "zones/modify": response = modifyZones(database, scope: scope, body, caller: caller, refusal: zoneRefusal)
        case "zones/changes" where scope != .shared: response = zoneChanges(database, body, caller: caller)
        case "records/modify":
            response = modifyRecords(database, scope: scope, body, caller: caller, base: request.url, busy: busyRecords)
        case "records/changes": response = changes(database, scope: scope, body, caller: caller)
        case "records/query": response = query(database, scope: scope, body, caller: caller)
        case "records/lookup": response = lookup(database, scope: scope, body, caller: caller)
        default: response = error(404, "NOT_FOUND", "no operation \(operation) in the \(scope.rawValue) database")
        }
        if let rotated = caller.nextToken { response.headers.append(("X-Apple-CloudKit-Web-Auth-Token", rotated)) }
        return response
    }

    // MARK: - Answers

    /// A string as a JSON string literal.
    func quoted(_ text: String) -> String {
        var writer = JSONWriter(capacity: text.utf8.count + 2)
        writer.string(text)
        return writer.text
    }

    func json(_ message: some Encodable) -> CloudKitHTTPResponse {
        let body = (try? CloudKitWire.encode(message)) ?? Data()
        return CloudKitHTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: body)
    }

    /// A request's body as the message it should be; an empty body is an empty object.
    func decoded<Message: Decodable>(_ type: Message.Type, _ body: Data) -> Message? {
        try? JSONDecoder().decode(type, from: body.isEmpty ? Data("{}".utf8) : body)
    }

    /// An error dictionary: `uuid`, `serverErrorCode`, `reason`, and `retryAfter` or
    /// `redirectURL` when given.
    func error(_ status: Int, _ code: String, _ reason: String, retryAfter: Double? = nil, redirectURL: String? = nil)
        -> CloudKitHTTPResponse
    {
        var response = json(
            CloudKitWire.Failure(
                uuid: UUID().uuidString.lowercased(), serverErrorCode: code, reason: reason, retryAfter: retryAfter,
                redirectURL: redirectURL))
        response.status = status
        return response
    }

    /// A change tag as CloudKit writes them: eight lowercase base-36 characters (`kf3z2sxt`).
    func changeTag(_ sequence: Int) -> String {
        let digits = String(UInt64(sequence) &* 2_654_435_761 % 2_821_109_907_456, radix: 36)
        return String(repeating: "0", count: max(0, 8 - digits.count)) + digits
    }
}
