import CloudKitWeb
import Crypto
import Foundation
import Records

/// CloudKit Web Services over an in-memory container, for tests and for trying scripts
/// offline: the documented operations (`zones/list`, `zones/modify`, `records/modify`,
/// `records/changes`, `records/query`), both ways of signing in, the documented limits and
/// error dictionaries, and faults injected on purpose. It answers requests in-process (it is
/// a ``CloudKitTransport``); an HTTP server can put it on a port.
public final class CloudKitEmulator: CloudKitTransport, @unchecked Sendable {
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
        public init() {}
    }

    /// A fault to answer with instead of doing the work.
    public enum Fault: Sendable, Equatable {
        case throttled(retryAfter: Double)
        case unavailable
        case droppedConnection
        case quotaExceeded
    }

    /// The connection was cut before an answer came.
    public struct ConnectionDropped: Error {
        public init() {}
    }

    private final class Zone {
        /// Record name → the record's JSON as answers carry it (encoded once, when saved: a
        /// record kept as a dictionary would cost ten times the memory), and its type.
        var encoded: [String: Data] = [:]
        var types: [String: String] = [:]

        func save(_ name: String, _ record: [String: Any]?) {
            encoded[name] = record.flatMap { try? JSONSerialization.data(withJSONObject: $0, options: [.withoutEscapingSlashes]) }
            types[name] = record?["recordType"] as? String
        }

        func save(_ name: String, encoded data: Data, type: String?) {
            encoded[name] = data
            types[name] = type
        }

        /// The record named `name` as a dictionary, read back from its JSON.
        func record(_ name: String) -> [String: Any]? {
            encoded[name].flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
        }
        /// Record name → the change sequence of its last change; deletions stay as tombstones.
        var changedAt: [String: Int] = [:]
        var deleted: Set<String> = []
        /// Every change in order (sequence, record name); an entry a later change of the same
        /// record superseded is skipped when read.
        var changes: [(sequence: Int, name: String)] = []

        func changed(_ name: String, at sequence: Int) {
            changedAt[name] = sequence
            changes.append((sequence, name))
        }
    }

    private let lock = NSLock()
    public let container: String
    public var settings: Settings
    private var zones: [String: [String: Zone]] = [:]   // "environment/database" → zone name → zone
    private var sequence = 0
    private var keys: [String: String] = [:]             // key ID → public key PEM
    private var apiTokens: Set<String> = []
    private var webTokens: [String: String] = [:]        // current web auth token → user
    private var signInUser = "_user"
    /// Asset bytes by receipt (uploaded, or put here by ``storeAsset(_:)``).
    private var assets: [String: Data] = [:]
    private var pendingUploads: Set<String> = []
    private var faults: [(operation: String, fault: Fault)] = []
    /// Every operation answered, in order, for tests to look at.
    public private(set) var log: [String] = []

    public init(container: String, settings: Settings = Settings()) {
        self.container = container
        self.settings = settings
    }

    // MARK: - Setting up

    public func registerKey(id: String, publicKeyPEM: String) { locked { keys[id] = publicKeyPEM } }

    /// Registers an API token and a user signed in with `webAuthToken`.
    public func registerUser(apiToken: String, webAuthToken: String, user: String = "_user") {
        locked {
            signInUser = user
            apiTokens.insert(apiToken)
            webTokens[webAuthToken] = user
        }
    }

    /// Keeps asset bytes as an upload would, and returns the receipt that a record's ASSETID
    /// value names them by (`{"receipt": …, "size": …}` in `records/modify`).
    public func storeAsset(_ bytes: Data) -> String {
        locked {
            let receipt = "r-" + UUID().uuidString.lowercased()
            assets[receipt] = bytes
            return receipt
        }
    }

    /// Answers the next request to `operation` (or to any operation, with "*") with `fault`.
    public func inject(_ fault: Fault, on operation: String = "*", times: Int = 1) {
        locked { for _ in 0..<times { faults.append((operation, fault)) } }
    }

    // MARK: - Answering

    public func send(_ request: CloudKitHTTPRequest) async throws -> CloudKitHTTPResponse {
        try respond(request)
    }

    /// Answers a request; throws ``ConnectionDropped`` when a fault cuts the connection.
    public func respond(_ request: CloudKitHTTPRequest) throws -> CloudKitHTTPResponse {
        try locked { try answer(request) }
    }

    /// Puts records (CloudKit's record dictionaries, as `ckport export` writes them) into a
    /// database of the container, each in the zone its `zoneID` names (else `zone`), as
    /// changes the feed will report.
    public func load(_ records: [[String: Any]], environment: CloudKitDatabase.Environment = .development,
                     scope: CloudKitDatabase.Scope = .private, zone defaultZone: String = "_defaultZone") {
        locked {
            let database = "\(environment.rawValue)/\(scope.rawValue)"
            _ = zonesOf(database)
            for var record in records {
                guard let name = record["recordName"] as? String else { continue }
                let zoneName = ((record["zoneID"] as? [String: Any])?["zoneName"] as? String) ?? defaultZone
                if zones[database]![zoneName] == nil { zones[database]![zoneName] = Zone() }
                let zone = zones[database]![zoneName]!
                sequence += 1
                record["scope"] = nil
                record["recordChangeTag"] = String(sequence, radix: 36)
                record["zoneID"] = ["zoneName": zoneName]
                zone.save(name, record)
                zone.changed(name, at: sequence)
            }
        }
    }

    /// ``load(_:environment:scope:zone:)`` for records already parsed by ckport's own JSON
    /// reader: much faster for large loads, as nothing passes through Foundation's JSON.
    public func load(json records: [JSONValue], environment: CloudKitDatabase.Environment = .development,
                     scope: CloudKitDatabase.Scope = .private, zone defaultZone: String = "_defaultZone") {
        locked {
            let database = "\(environment.rawValue)/\(scope.rawValue)"
            _ = zonesOf(database)
            for case .object(let record) in records {
                guard let name = record["recordName"]?.stringValue else { continue }
                var zoneName = defaultZone
                if case .object(let zoneID)? = record["zoneID"], let given = zoneID["zoneName"]?.stringValue { zoneName = given }
                if zones[database]![zoneName] == nil { zones[database]![zoneName] = Zone() }
                let zone = zones[database]![zoneName]!
                sequence += 1
                var kept = record.members.filter { !["scope", "recordChangeTag", "zoneID"].contains($0.key) }
                kept.append(JSONObject.Member(key: "recordChangeTag", value: .string(String(sequence, radix: 36))))
                kept.append(JSONObject.Member(key: "zoneID", value: .object(JSONObject([JSONObject.Member(key: "zoneName", value: .string(zoneName))]))))
                var writer = JSONWriter(capacity: 2048)
                writer.value(.object(JSONObject(kept)))
                zone.save(name, encoded: Data(writer.bytes), type: record["recordType"]?.stringValue)
                zone.changed(name, at: sequence)
            }
        }
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    private func answer(_ request: CloudKitHTTPRequest) throws -> CloudKitHTTPResponse {
        if request.url.path == "/signin" { return signIn(request) }
        if request.url.path.hasPrefix("/upload/") { return receiveAsset(request) }
        if request.url.path.hasPrefix("/download/") { return sendAsset(request) }
        let parts = request.url.path.split(separator: "/").map(String.init)
        // database / 1 / container / environment / database / operation…
        guard parts.count >= 6, parts[0] == "database", parts[1] == "1", parts[2] == container,
              let environment = CloudKitDatabase.Environment(rawValue: parts[3]), let scope = CloudKitDatabase.Scope(rawValue: parts[4]) else {
            return error(404, "NOT_FOUND", "no such container or path: \(request.url.path)")
        }
        let operation = parts[5...].joined(separator: "/")
        log.append(operation)
        if let index = faults.firstIndex(where: { $0.operation == operation || $0.operation == "*" }) {
            let fault = faults.remove(at: index).fault
            switch fault {
            case .throttled(let after): return error(429, "THROTTLED", "request rate too high", retryAfter: after)
            case .unavailable: return CloudKitHTTPResponse(status: 503, body: Data("Service Unavailable".utf8))
            case .droppedConnection: throw ConnectionDropped()
            case .quotaExceeded: return error(413, "QUOTA_EXCEEDED", "the container is out of space")
            }
        }
        var rotated: String?
        var caller = "_server"
        if let keyID = request.header(ServerToServerKey.keyIDHeader) {
            guard scope == .public else { return error(403, "ACCESS_DENIED", "server-to-server keys reach the public database only") }
            guard let pem = keys[keyID], let date = request.header(ServerToServerKey.dateHeader),
                  let signature = request.header(ServerToServerKey.signatureHeader),
                  ServerToServerKey.verify(signature: signature, publicKeyPEM: pem, date: date, body: request.body, path: request.url.path) else {
                return error(401, "AUTHENTICATION_FAILED", "the request's signature does not match a registered key")
            }
            guard let sent = ISO8601DateFormatter().date(from: date), abs(sent.timeIntervalSinceNow) <= settings.clockSkew else {
                return error(401, "AUTHENTICATION_FAILED", "the request's date is too far from the server's clock")
            }
        } else {
            let query = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems ?? []
            guard let api = query.first(where: { $0.name == "ckAPIToken" })?.value, apiTokens.contains(api) else {
                return error(401, "AUTHENTICATION_FAILED", "unknown API token")
            }
            guard let web = query.first(where: { $0.name == "ckWebAuthToken" })?.value, let user = webTokens[web] else {
                var page = URLComponents()
                page.scheme = request.url.scheme
                page.host = request.url.host
                page.port = request.url.port
                page.path = "/signin"
                page.queryItems = [URLQueryItem(name: "ckAPIToken", value: api)]
                return error(421, "AUTHENTICATION_REQUIRED", "request needs authorization", redirectURL: page.url?.absoluteString)
            }
            // Each answer carries the token to use next; the one used is spent.
            webTokens[web] = nil
            let next = UUID().uuidString
            webTokens[next] = user
            rotated = next
            caller = user
        }
        let body = request.body.isEmpty ? [:] : ((try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] ?? [:])
        var response: CloudKitHTTPResponse
        switch operation {
        case "users/current": response = json(["userRecordName": caller])
        case "assets/upload": response = uploadURLs(body, base: request.url)
        case "zones/list": response = listZones("\(environment.rawValue)/\(scope.rawValue)")
        case "zones/modify": response = modifyZones("\(environment.rawValue)/\(scope.rawValue)", body)
        case "records/modify": response = modifyRecords("\(environment.rawValue)/\(scope.rawValue)", body, user: caller, base: request.url)
        case "records/changes": response = changes("\(environment.rawValue)/\(scope.rawValue)", body)
        case "records/query": response = query("\(environment.rawValue)/\(scope.rawValue)", body)
        default: response = error(404, "NOT_FOUND", "no operation \(operation)")
        }
        if let rotated { response.headers.append(("X-Apple-CloudKit-Web-Auth-Token", rotated)) }
        return response
    }

    /// `assets/upload`: a URL on this server for each asset field named, to POST the bytes to.
    private func uploadURLs(_ body: [String: Any], base: URL) -> CloudKitHTTPResponse {
        var tokens: [[String: Any]] = []
        for token in body["tokens"] as? [[String: Any]] ?? [] {
            guard let recordName = token["recordName"] as? String, let fieldName = token["fieldName"] as? String else {
                return error(400, "BAD_REQUEST", "an upload token names a recordName and a fieldName")
            }
            let slot = "u-" + UUID().uuidString.lowercased()
            pendingUploads.insert(slot)
            tokens.append(["recordName": recordName, "fieldName": fieldName, "url": address(base, "/upload/\(slot)")])
        }
        return json(["tokens": tokens])
    }

    /// The bytes POSTed to an upload URL: kept, and answered with the dictionary that the
    /// record's asset field is then saved with.
    private func receiveAsset(_ request: CloudKitHTTPRequest) -> CloudKitHTTPResponse {
        let slot = String(request.url.path.dropFirst("/upload/".count))
        guard request.method == "POST", pendingUploads.remove(slot) != nil else { return error(404, "NOT_FOUND", "no such upload") }
        guard request.body.count <= settings.maxAssetSize else {
            return error(413, "BAD_REQUEST", "an asset holds at most \(settings.maxAssetSize) bytes; this one holds \(request.body.count)")
        }
        let receipt = "r-" + UUID().uuidString.lowercased()
        assets[receipt] = request.body
        let checksum = Data(SHA256.hash(data: request.body).prefix(20)).base64EncodedString()
        return json(["singleFile": ["fileChecksum": checksum, "size": request.body.count, "receipt": receipt,
                                    "referenceChecksum": checksum, "wrappingKey": "emulator-key"]])
    }

    private func sendAsset(_ request: CloudKitHTTPRequest) -> CloudKitHTTPResponse {
        let parts = request.url.path.split(separator: "/")
        guard parts.count >= 2, let bytes = assets[String(parts[1])] else { return error(404, "NOT_FOUND", "no such asset") }
        return CloudKitHTTPResponse(status: 200, headers: [("Content-Type", "application/octet-stream")], body: bytes)
    }

    /// Where a record's asset is downloaded from; `${f}` stands for a file name, as in CloudKit's.
    private func downloadURL(_ receipt: String, base: URL) -> String {
        address(base, "/download/\(receipt)/") + "${f}"
    }

    private func address(_ base: URL, _ path: String) -> String {
        var components = URLComponents()
        components.scheme = base.scheme
        components.host = base.host
        components.port = base.port
        components.path = path
        return components.url!.absoluteString
    }

    /// The sign-in page: a browser that opens it is signed in as the registered user at once
    /// and sent to the callback with a new web auth token.
    private func signIn(_ request: CloudKitHTTPRequest) -> CloudKitHTTPResponse {
        let query = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        guard let api = query.first(where: { $0.name == "ckAPIToken" })?.value, apiTokens.contains(api) else {
            return error(401, "AUTHENTICATION_FAILED", "unknown API token")
        }
        guard let callback = settings.signInCallback, var target = URLComponents(string: callback) else {
            return error(400, "BAD_REQUEST", "this API token has no sign-in callback (ckport-emulator --sign-in-callback URL)")
        }
        let token = UUID().uuidString
        webTokens[token] = signInUser
        target.queryItems = (target.queryItems ?? []) + [URLQueryItem(name: "ckWebAuthToken", value: token)]
        return CloudKitHTTPResponse(status: 302, headers: [("Location", target.url!.absoluteString)], body: Data())
    }

    // MARK: - Operations

    private func zonesOf(_ database: String) -> [String: Zone] {
        if zones[database] == nil { zones[database] = ["_defaultZone": Zone()] }
        return zones[database]!
    }

    private func zoneName(_ body: [String: Any]) -> String {
        ((body["zoneID"] as? [String: Any])?["zoneName"] as? String) ?? "_defaultZone"
    }

    private func listZones(_ database: String) -> CloudKitHTTPResponse {
        json(["zones": zonesOf(database).keys.sorted().map { ["zoneID": ["zoneName": $0]] }])
    }

    private func modifyZones(_ database: String, _ body: [String: Any]) -> CloudKitHTTPResponse {
        _ = zonesOf(database)
        var results: [[String: Any]] = []
        for operation in body["operations"] as? [[String: Any]] ?? [] {
            let name = (((operation["zone"] as? [String: Any])?["zoneID"] as? [String: Any])?["zoneName"] as? String) ?? ""
            guard !name.isEmpty else { return error(400, "BAD_REQUEST", "a zone operation needs a zoneID") }
            if operation["operationType"] as? String == "delete" { zones[database]![name] = nil } else if zones[database]![name] == nil { zones[database]![name] = Zone() }
            results.append(["zoneID": ["zoneName": name]])
        }
        return json(["zones": results])
    }

    private func modifyRecords(_ database: String, _ body: [String: Any], user: String, base: URL) -> CloudKitHTTPResponse {
        // The server keeps the system fields: who saved a record when, from where.
        let stamp: [String: Any] = ["timestamp": Int64(Date().timeIntervalSince1970 * 1000), "userRecordName": user, "deviceID": "ckport-emulator"]
        let operations = body["operations"] as? [[String: Any]] ?? []
        guard operations.count <= settings.maxOperations else {
            return error(400, "BAD_REQUEST", "a request holds at most \(settings.maxOperations) operations; this one holds \(operations.count)")
        }
        let name = zoneName(body)
        guard let zone = zonesOf(database)[name] else { return error(404, "ZONE_NOT_FOUND", "no zone \(name)") }
        var results: [Data] = []   // each operation's outcome as JSON
        for operation in operations {
            guard let type = operation["operationType"] as? String, var record = operation["record"] as? [String: Any],
                  let recordName = record["recordName"] as? String else {
                return error(400, "BAD_REQUEST", "an operation needs an operationType and a record with a recordName")
            }
            let existing = zone.record(recordName)
            let tag = record["recordChangeTag"] as? String
            func refuse(_ code: String, _ reason: String) {
                results.append(Data("{\"reason\":\(quoted(reason)),\"recordName\":\(quoted(recordName)),\"serverErrorCode\":\"\(code)\"}".utf8))
            }
            switch type {
            case "create" where existing != nil: refuse("EXISTS", "record already exists"); continue
            case "update", "replace", "delete":
                guard let existing else { refuse("NOT_FOUND", "record not found"); continue }
                if tag != existing["recordChangeTag"] as? String { refuse("CONFLICT", "oplock error: the record has changed"); continue }
            case "create", "forceUpdate", "forceReplace", "forceDelete": break
            default: return error(400, "BAD_REQUEST", "unknown operationType \(type)")
            }
            // An asset field names its upload by receipt; the record keeps where to download it.
            if var fields = record["fields"] as? [String: Any] {
                var unknown: String?
                for (fieldName, field) in fields {
                    guard var entry = field as? [String: Any], var value = entry["value"] as? [String: Any], let receipt = value["receipt"] as? String else { continue }
                    guard let bytes = assets[receipt] else {
                        unknown = "field \(fieldName): no uploaded asset has the receipt \(receipt)"
                        break
                    }
                    value["receipt"] = nil
                    value["size"] = bytes.count
                    value["fileChecksum"] = Data(SHA256.hash(data: bytes).prefix(20)).base64EncodedString()
                    value["downloadURL"] = downloadURL(receipt, base: base)
                    entry["value"] = value
                    fields[fieldName] = entry
                }
                if let unknown { refuse("BAD_REQUEST", unknown); continue }
                record["fields"] = fields
            }
            sequence += 1
            zone.changed(recordName, at: sequence)
            if type == "delete" || type == "forceDelete" {
                zone.save(recordName, nil)
                zone.deleted.insert(recordName)
                results.append(Data("{\"deleted\":true,\"recordName\":\(quoted(recordName))}".utf8))
                continue
            }
            if (type == "update" || type == "forceUpdate"), let existing {
                var fields = existing["fields"] as? [String: Any] ?? [:]
                for (key, value) in record["fields"] as? [String: Any] ?? [:] { fields[key] = value }
                record["fields"] = fields
            }
            record["created"] = existing?["created"] ?? stamp
            record["modified"] = stamp
            zone.deleted.remove(recordName)
            record["recordChangeTag"] = String(sequence, radix: 36)
            record["zoneID"] = ["zoneName": name]
            zone.save(recordName, record)
            results.append(zone.encoded[recordName] ?? Data())
        }
        var answer = Data("{\"records\":[".utf8)
        for (index, result) in results.enumerated() {
            if index > 0 { answer.append(UInt8(ascii: ",")) }
            answer.append(result)
        }
        answer.append(Data("]}".utf8))
        return CloudKitHTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: answer)
    }

    private func changes(_ database: String, _ body: [String: Any]) -> CloudKitHTTPResponse {
        let name = zoneName(body)
        guard name != "_defaultZone" else { return error(400, "BAD_REQUEST", "record changes are fetched from custom zones only") }
        guard let zone = zonesOf(database)[name] else { return error(404, "ZONE_NOT_FOUND", "no zone \(name)") }
        var after = 0
        if let token = body["syncToken"] as? String {
            guard let value = Int(token.dropFirst("emu-".count)), token.hasPrefix("emu-") else {
                return error(400, "BAD_REQUEST", "unknown sync token")
            }
            after = value
        }
        let limit = min(settings.pageSize, body["resultsLimit"] as? Int ?? settings.pageSize)
        // The first change after the token, by binary search; then the live entries in order.
        var low = 0, high = zone.changes.count
        while low < high {
            let middle = (low + high) / 2
            if zone.changes[middle].sequence <= after { low = middle + 1 } else { high = middle }
        }
        var records: [Data] = []
        var last = after
        var index = low
        while index < zone.changes.count && records.count < limit {
            let change = zone.changes[index]
            index += 1
            last = change.sequence
            guard zone.changedAt[change.name] == change.sequence else { continue }
            records.append(zone.encoded[change.name] ?? Data("{\"deleted\":true,\"recordName\":\(quoted(change.name))}".utf8))
        }
        let moreComing = zone.changes[index...].contains { zone.changedAt[$0.name] == $0.sequence }
        if !moreComing { last = max(last, zone.changes.last?.sequence ?? after) }
        var body = Data("{\"moreComing\":\(moreComing),\"records\":[".utf8)
        for (index, record) in records.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body.append(record)
        }
        body.append(Data("],\"syncToken\":\"emu-\(last)\",\"zoneID\":{\"zoneName\":\(quoted(name))}}".utf8))
        return CloudKitHTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: body)
    }

    private func query(_ database: String, _ body: [String: Any]) -> CloudKitHTTPResponse {
        let name = zoneName(body)
        guard let zone = zonesOf(database)[name] else { return error(404, "ZONE_NOT_FOUND", "no zone \(name)") }
        guard let type = (body["query"] as? [String: Any])?["recordType"] as? String else {
            return error(400, "BAD_REQUEST", "a query needs a recordType")
        }
        let start = Int((body["continuationMarker"] as? String) ?? "0") ?? 0
        let limit = min(settings.pageSize, body["resultsLimit"] as? Int ?? settings.pageSize)
        let matching = zone.types.filter { $0.value == type }.map(\.key).sorted()
        let page = matching.dropFirst(start).prefix(limit)
        var body = Data("{\"records\":[".utf8)
        for (index, recordName) in page.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body.append(zone.encoded[recordName] ?? Data())
        }
        body.append(UInt8(ascii: "]"))
        if start + page.count < matching.count { body.append(Data(",\"continuationMarker\":\"\(start + page.count)\"".utf8)) }
        body.append(UInt8(ascii: "}"))
        return CloudKitHTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: body)
    }

    // MARK: - Answers

    /// A string as a JSON string literal.
    private func quoted(_ text: String) -> String {
        String(decoding: (try? JSONSerialization.data(withJSONObject: [text], options: [.withoutEscapingSlashes])) ?? Data("[\"\"]".utf8), as: UTF8.self).dropFirst().dropLast().description
    }

    private func json(_ object: [String: Any]) -> CloudKitHTTPResponse {
        let body = (try? JSONSerialization.data(withJSONObject: object, options: [.withoutEscapingSlashes])) ?? Data()
        return CloudKitHTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: body)
    }

    private func error(_ status: Int, _ code: String, _ reason: String, retryAfter: Double? = nil, redirectURL: String? = nil) -> CloudKitHTTPResponse {
        var object: [String: Any] = ["uuid": UUID().uuidString, "serverErrorCode": code, "reason": reason]
        if let retryAfter { object["retryAfter"] = retryAfter }
        if let redirectURL { object["redirectURL"] = redirectURL }
        var response = json(object)
        response.status = status
        return response
    }
}
