import AsyncHTTPClient
import Formats
import Foundation
import NIOCore
import NIOHTTP1
import Records

/// Where a bucket is: the service's address, its region, the bucket, and whether the bucket is
/// named in the path (`http://127.0.0.1:8333/BUCKET/KEY`, what MinIO, SeaweedFS and most
/// servers on a private address need) or in the host name (`https://BUCKET.s3.amazonaws.com/KEY`,
/// AWS's way).
public struct S3Endpoint: Sendable, Equatable {
    public var url: URL
    public var region: String
    public var bucket: String
    public var pathStyle: Bool

    public init(url: URL, region: String, bucket: String, pathStyle: Bool) {
        self.url = url
        self.region = region
        self.bucket = bucket
        self.pathStyle = pathStyle
    }

    /// The address and wire path of `key` (percent-encoded as SigV4 encodes it), and the Host
    /// header the request is signed with.
    func address(of key: String) -> (url: String, path: String, host: String) {
        let scheme = url.scheme ?? "https"
        let port = url.port.map { ":\($0)" } ?? ""
        // An IPv6 address is written in brackets in an address and a Host header.
        let named = url.host ?? ""
        let base = named.contains(":") && !named.hasPrefix("[") ? "[\(named)]" : named
        let encodedKey = key.isEmpty ? "" : SigV4Signer.encode(key, keepingSlashes: true)
        if pathStyle {
            let path = "/" + SigV4Signer.encode(bucket) + (key.isEmpty ? "" : "/" + encodedKey)
            return ("\(scheme)://\(base)\(port)\(path)", path, base + port)
        }
        let host = "\(bucket).\(base)"
        let path = "/" + encodedKey
        return ("\(scheme)://\(host)\(port)\(path)", path, host + port)
    }
}

/// An object a listing names.
public struct StoredObject: Sendable, Equatable {
    public var key: String
    public var size: Int64
    public var etag: String
    /// When it was written, as the server says.
    public var modified: Date?

    public init(key: String, size: Int64, etag: String = "", modified: Date? = nil) {
        self.key = key
        self.size = size
        self.etag = etag
        self.modified = modified
    }
}

/// What an S3 server answered that ckport cannot go on from: who it is (a key the server does
/// not know, a signature it does not accept), a bucket that is not there, a clock the server
/// calls wrong, or a server that kept failing after every retry. Never holds a secret.
public struct ObjectStorageError: CKPortError, Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// 403: the key is unknown, its secret does not sign as the server's, or it may not do this.
        case refused
        /// The bucket does not exist.
        case noBucket
        /// The server's clock and this machine's differ by more than it allows.
        case clockSkewed
        /// 5xx or SlowDown, still after the last retry; or no answer.
        case unavailable
        /// Any other answer.
        case failed
    }

    public var kind: Kind
    /// What was asked (`PUT snapshots/…`), the bucket, the HTTP status (0: no answer), and the
    /// server's code and message.
    public var operation: String
    public var bucket: String
    public var status: Int
    public var code: String
    public var serverMessage: String
    /// How many times the request was sent (retries of a passing fault included).
    public var tries: Int

    public init(
        kind: Kind, operation: String, bucket: String, status: Int, code: String, serverMessage: String,
        tries: Int = 1
    ) {
        self.tries = tries
        self.kind = kind
        self.operation = operation
        self.bucket = bucket
        self.status = status
        self.code = code
        self.serverMessage = serverMessage
    }

    public var category: ErrorCategory {
        switch kind {
        case .refused: return .authentication
        case .noBucket: return .usage
        case .clockSkewed, .unavailable, .failed: return .environment
        }
    }

    public var explanation: Message {
        let answer =
            status == 0 ? serverMessage : "\(status) \(code)\(serverMessage.isEmpty ? "" : ": \(serverMessage)")"
        switch kind {
        case .refused:
            return
                "the object store refused \(operation) in bucket \(bucket) (\(answer)): check the access key and its secret, and what the key may do"
        case .noBucket: return "the bucket \(bucket) does not exist (\(operation): \(answer))"
        case .clockSkewed:
            return
                "the object store says this machine's clock is wrong (\(answer)): set the clock (NTP) and try again"
        case .unavailable:
            let after = tries > 1 && status != 0 ? " after \(tries) tries" : ""
            return "the object store did not answer \(operation) in bucket \(bucket)\(after) (\(answer))"
        case .failed: return "the object store could not do \(operation) in bucket \(bucket) (\(answer))"
        }
    }

    public var description: String { explanation.description }
}

/// S3's API, as much of it as a repository of snapshots needs: objects put, read, listed and
/// deleted, and multipart uploads for objects made a part at a time. Every request is signed
/// (SigV4 with the payload's SHA-256); answers of 500, 502, 503, 504 and SlowDown, and a
/// connection lost, are tried again with backoff, a bounded number of times.
public final class S3Client: Sendable {
    public let endpoint: S3Endpoint
    private let signer: SigV4Signer
    private let http: HTTPClient
    /// Tries of one request, and the first wait between them (doubling, at most 20 s).
    private let attempts: Int
    private let firstWait: Double
    /// The time requests are signed with (the machine's clock but in tests).
    private let clock: @Sendable () -> Date
    /// The largest answer read into memory (a listing page, an error): objects are read by
    /// ``get(_:limit:)`` with a limit of the caller's.
    private static let maxAnswer = 16 << 20

    public init(
        endpoint: S3Endpoint, credentials: AWSCredentials, http: HTTPClient = S3Client.sharedHTTP, attempts: Int = 6,
        firstWait: Double = 0.25, clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.endpoint = endpoint
        self.clock = clock
        signer = SigV4Signer(credentials: credentials, region: endpoint.region, service: "s3")
        self.http = http
        self.attempts = max(1, attempts)
        self.firstWait = firstWait
    }

    /// One HTTP client for the process, as `HTTPClient.shared`, but a connection that cannot be
    /// made fails the request at once instead of being tried again until the request's deadline:
    /// the client's own retries count each attempt. Never shut down, as the shared one.
    public static let sharedHTTP: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.timeout.connect = .seconds(30)
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    // MARK: Objects

    /// Puts `body` at `key`, replacing what is there; the object's ETag.
    @discardableResult
    public func put(_ key: String, _ body: [UInt8]) async throws -> String {
        let answer = try await send("PUT", key, body: body)
        return answer.headers.first(name: "ETag") ?? ""
    }

    /// The object at `key`, nil when there is none; more than `limit` bytes is an error.
    public func get(_ key: String, limit: Int) async throws -> [UInt8]? {
        let answer = try await send("GET", key, limit: limit, missingIsNil: true)
        return answer.status == 404 ? nil : answer.body
    }

    /// `count` bytes of the object at `key` from `offset` (fewer at its end); a missing object
    /// is an error.
    public func get(_ key: String, from offset: Int64, count: Int) async throws -> [UInt8] {
        precondition(count > 0, "a range of at least one byte")
        let answer = try await send(
            "GET", key, headers: [("Range", "bytes=\(offset)-\(offset + Int64(count) - 1)")], limit: count)
        // A server that ignores Range answers 200 with the whole object: more than asked is
        // refused by the limit, and a whole object that fits is right only from offset 0.
        guard answer.status == 206 || offset == 0 else {
            throw failure(
                "GET \(key)", status: answer.status, code: "", message: "the server did not answer with the range asked"
            )
        }
        return answer.body
    }

    /// The object's size, nil when there is none.
    public func size(of key: String) async throws -> Int64? {
        let answer = try await send("HEAD", key, missingIsNil: true)
        guard answer.status != 404 else { return nil }
        return answer.headers.first(name: "Content-Length").flatMap { Int64($0) }
    }

    /// Deletes `key` (nothing there is fine, as S3 has it).
    public func delete(_ key: String) async throws {
        _ = try await send("DELETE", key, missingIsNil: true)
    }

    /// Every object whose key starts with `prefix`, in key order, a page of up to 1,000 at a
    /// time; at most `limit` objects.
    public func list(prefix: String, limit: Int = 10_000_000) async throws -> [StoredObject] {
        var found: [StoredObject] = []
        var token: String?
        repeat {
            var query: [(name: String, value: String)] = [("list-type", "2"), ("prefix", prefix)]
            if let token { query.append(("continuation-token", token)) }
            let answer = try await send("GET", "", query: query)
            let page = try S3Client.listing(answer.body, operation: "list \(prefix)")
            found += page.objects
            guard found.count <= limit else {
                throw ObjectStorageError(
                    kind: .failed, operation: "list \(prefix)", bucket: endpoint.bucket, status: 200, code: "",
                    serverMessage: "more than \(limit) objects")
            }
            // A server that says "more" without a token would list the same page for ever.
            token = page.truncated ? page.next : nil
            if page.truncated && (page.next ?? "").isEmpty {
                throw ObjectStorageError(
                    kind: .failed, operation: "list \(prefix)", bucket: endpoint.bucket, status: 200, code: "",
                    serverMessage: "a truncated listing without a continuation token")
            }
        } while token != nil
        return found
    }

    /// Makes the bucket; one that is there already and is this key's is fine.
    public func createBucket() async throws {
        // Outside us-east-1, AWS wants the region named in the request.
        let body =
            endpoint.region == "us-east-1"
            ? []
            : Array(
                "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><LocationConstraint>\(S3Client.escape(endpoint.region))</LocationConstraint></CreateBucketConfiguration>"
                    .utf8)
        do {
            _ = try await send("PUT", "", body: body)
        } catch let error as ObjectStorageError
            where ["BucketAlreadyOwnedByYou", "BucketAlreadyExists"].contains(error.code)
        {
            return
        }
    }

    // MARK: Multipart uploads

    /// Starts an upload of `key` in parts; its upload ID.
    public func startUpload(_ key: String) async throws -> String {
        let answer = try await send("POST", key, query: [("uploads", "")])
        guard let id = try S3Client.texts(answer.body, operation: "start upload \(key)")["UploadId"], !id.isEmpty else {
            throw failure("start upload \(key)", status: answer.status, code: "", message: "no UploadId in the answer")
        }
        return id
    }

    /// Uploads part `number` (1 to 10,000; every part but the last at least 5 MiB); its ETag.
    public func uploadPart(_ key: String, uploadID: String, number: Int, _ body: [UInt8]) async throws -> String {
        let answer = try await send(
            "PUT", key, query: [("partNumber", String(number)), ("uploadId", uploadID)], body: body)
        guard let etag = answer.headers.first(name: "ETag") else {
            throw failure("upload part \(number) of \(key)", status: answer.status, code: "", message: "no ETag")
        }
        return etag
    }

    /// Makes the object of the parts uploaded, in order: it appears whole, or not at all.
    public func completeUpload(_ key: String, uploadID: String, parts: [(number: Int, etag: String)]) async throws {
        var xml = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        for part in parts {
            xml += "<Part><PartNumber>\(part.number)</PartNumber><ETag>\(S3Client.escape(part.etag))</ETag></Part>"
        }
        xml += "</CompleteMultipartUpload>"
        let operation = "complete upload \(key)"
        var wait = firstWait
        for attempt in 1...attempts {
            let answer: Answer
            do {
                answer = try await send("POST", key, query: [("uploadId", uploadID)], body: Array(xml.utf8))
            } catch let error as ObjectStorageError where error.code == "NoSuchUpload" {
                // The upload is gone: completed by an earlier try whose answer was lost (the
                // object is there), or not (the error stands).
                if try await size(of: key) != nil { return }
                throw error
            }
            // S3 may answer 200 and still fail, with an Error document as the body; its
            // InternalError and SlowDown are to be tried again.
            let fields = try S3Client.texts(answer.body, operation: operation)
            guard let code = fields["Code"], fields["ETag"] == nil else { return }
            if ["InternalError", "SlowDown"].contains(code) && attempt < attempts {
                try await pause(&wait)
                continue
            }
            throw failure(
                operation, status: answer.status, code: code, message: fields["Message"] ?? "", tries: attempt)
        }
    }

    /// The uploads in parts begun under `prefix` and neither completed nor abandoned: each one's
    /// key, upload ID and when it began (at most `limit`).
    public func uploads(prefix: String, limit: Int = 100_000) async throws -> [(
        key: String, uploadID: String, started: Date?
    )] {
        var found: [(key: String, uploadID: String, started: Date?)] = []
        var marker: (key: String, id: String)?
        repeat {
            var query: [(name: String, value: String)] = [("prefix", prefix), ("uploads", "")]
            if let marker { query += [("key-marker", marker.key), ("upload-id-marker", marker.id)] }
            let answer = try await send("GET", "", query: query)
            let reader = try XMLReader(
                bytes: S3Client.withoutLeadingSpace(answer.body), name: "list uploads",
                limits: .init(depth: 16, bytes: Int64(S3Client.maxAnswer)))
            var upload: [String: String]?
            var top: [String: String] = [:]
            var current: String?
            var page = 0
            while let event = try reader.next() {
                switch event {
                case .start(let name, _):
                    if name == "Upload" { upload = [:] }
                    current = name
                case .text(let text):
                    guard let current else { break }
                    if upload != nil {
                        upload![current, default: ""] += text
                    } else {
                        top[current, default: ""] += text
                    }
                case .end(let name):
                    if name == "Upload", let done = upload, let key = done["Key"], let id = done["UploadId"] {
                        let started = done["Initiated"].flatMap { S3Client.timestamp($0) }
                        found.append((key, id, started))
                        page += 1
                        upload = nil
                    }
                    current = nil
                }
            }
            guard found.count <= limit else {
                throw failure("list uploads", status: 200, code: "", message: "more than \(limit) uploads")
            }
            marker = nil
            if top["IsTruncated"] == "true", let key = top["NextKeyMarker"], let id = top["NextUploadIdMarker"],
                page > 0
            {
                marker = (key, id)
            }
        } while marker != nil
        return found
    }

    /// Abandons an upload: its parts are deleted.
    public func abortUpload(_ key: String, uploadID: String) async throws {
        _ = try await send("DELETE", key, query: [("uploadId", uploadID)], missingIsNil: true)
    }

    // MARK: Requests

    struct Answer {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]
    }

    /// Sends a signed request, trying again after a failure that may pass; an answer of 2xx
    /// (or 404 when `missingIsNil`), else the error it means.
    private func send(
        _ method: String, _ key: String, query: [(name: String, value: String)] = [],
        headers: [(String, String)] = [], body: [UInt8] = [], limit: Int = S3Client.maxAnswer,
        missingIsNil: Bool = false
    ) async throws -> Answer {
        let operation = "\(method) \(key.isEmpty ? "/" : key)"
        let hash = SigV4Signer.payloadHash(body)
        var wait = firstWait
        for attempt in 1...attempts {
            let answer: Answer
            do {
                answer = try await exchange(
                    method, key, query: query, headers: headers, body: body, hash: hash, limit: limit)
            } catch let error as ObjectStorageError {
                throw error
            } catch {
                // No answer (a connection refused, reset or timed out): try again.
                if attempt == attempts || Task.isCancelled {
                    throw ObjectStorageError(
                        kind: .unavailable, operation: operation, bucket: endpoint.bucket, status: 0, code: "",
                        serverMessage: "no answer after \(attempt) tries: \(error)")
                }
                try await pause(&wait)
                continue
            }
            if (200..<300).contains(answer.status) || (missingIsNil && answer.status == 404 && !isBucketMissing(answer))
            {
                return answer
            }
            let fields = (try? S3Client.texts(answer.body, operation: operation)) ?? [:]
            let code = fields["Code"] ?? ""
            let transient = [500, 502, 503, 504].contains(answer.status) || code == "SlowDown"
            if transient && attempt < attempts {
                try await pause(&wait)
                continue
            }
            throw failure(
                operation, status: answer.status, code: code, message: fields["Message"] ?? "", tries: attempt)
        }
        fatalError("unreachable: the last attempt returns or throws")
    }

    private func isBucketMissing(_ answer: Answer) -> Bool {
        ((try? S3Client.texts(answer.body, operation: "")) ?? [:])["Code"] == "NoSuchBucket"
    }

    private func pause(_ wait: inout Double) async throws {
        // Full jitter: a random wait up to the current bound, so that clients do not retry together.
        try await Task.sleep(nanoseconds: UInt64(Double.random(in: wait / 2...wait) * 1e9))
        wait = min(wait * 2, 20)
    }

    private func failure(
        _ operation: String, status: Int, code: String, message: String, tries: Int = 1
    ) -> ObjectStorageError {
        let kind: ObjectStorageError.Kind
        switch (status, code) {
        case (_, "RequestTimeTooSkewed"): kind = .clockSkewed
        case (_, "NoSuchBucket"): kind = .noBucket
        case (403, _), (401, _), (_, "InvalidAccessKeyId"), (_, "SignatureDoesNotMatch"), (_, "AccessDenied"):
            kind = .refused
        case (500...599, _), (_, "SlowDown"): kind = .unavailable
        default: kind = .failed
        }
        return ObjectStorageError(
            kind: kind, operation: operation, bucket: endpoint.bucket, status: status, code: code,
            serverMessage: String(message.prefix(300)), tries: tries)
    }

    /// One signed request and its answer (the body read up to `limit` bytes).
    private func exchange(
        _ method: String, _ key: String, query: [(name: String, value: String)], headers: [(String, String)],
        body: [UInt8], hash: String, limit: Int
    ) async throws -> Answer {
        let (url, path, host) = endpoint.address(of: key)
        var signed = SigV4Signer.Request(method: method, path: path, query: query, headers: [("Host", host)] + headers)
        signer.sign(&signed, payloadHash: hash, date: clock())
        let encodedQuery = signed.encodedQuery
        var request = HTTPClientRequest(url: url + (encodedQuery.isEmpty ? "" : "?" + encodedQuery))
        request.method = HTTPMethod(rawValue: method)
        for (name, value) in signed.headers { request.headers.add(name: name, value: value) }
        if method == "PUT" || method == "POST" {
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await http.execute(request, timeout: .seconds(300))
        var bytes: [UInt8] = []
        if method != "HEAD" {
            // An object larger than the caller takes is refused; an error's document is small.
            let ok = (200..<300).contains(response.status.code)
            do {
                bytes = Array(try await response.body.collect(upTo: ok ? limit : S3Client.maxAnswer).readableBytesView)
            } catch is NIOTooManyBytesError {
                throw ObjectStorageError(
                    kind: .failed, operation: "\(method) \(key)", bucket: endpoint.bucket,
                    status: Int(response.status.code),
                    code: "",
                    serverMessage: "the answer is larger than the \(ok ? limit : S3Client.maxAnswer) bytes expected")
            }
        }
        return Answer(status: Int(response.status.code), headers: response.headers, body: bytes)
    }

    // MARK: XML

    /// The text of each leaf element of an answer, by name (the last one of a name wins): an
    /// error's Code and Message, an upload's UploadId.
    static func texts(_ body: [UInt8], operation: String) throws -> [String: String] {
        let body = withoutLeadingSpace(body)
        guard !body.isEmpty else { return [:] }
        let reader = try XMLReader(bytes: body, name: operation, limits: .init(depth: 16, bytes: Int64(maxAnswer)))
        var fields: [String: String] = [:]
        var current: String?
        while let event = try reader.next() {
            switch event {
            case .start(let name, _): current = name
            case .text(let text): if let current { fields[current, default: ""] += text }
            case .end: current = nil
            }
        }
        return fields
    }

    /// A ListObjectsV2 page: its objects, whether more follow, and the token of the next page.
    static func listing(_ body: [UInt8], operation: String) throws -> (
        objects: [StoredObject], truncated: Bool, next: String?
    ) {
        let reader = try XMLReader(
            bytes: withoutLeadingSpace(body), name: operation, limits: .init(depth: 16, bytes: Int64(maxAnswer)))
        var objects: [StoredObject] = []
        var object: [String: String]?
        var top: [String: String] = [:]
        var current: String?
        while let event = try reader.next() {
            switch event {
            case .start(let name, _):
                if name == "Contents" { object = [:] }
                current = name
            case .text(let text):
                guard let current else { break }
                if object != nil { object![current, default: ""] += text } else { top[current, default: ""] += text }
            case .end(let name):
                current = nil
                if name == "Contents", let fields = object {
                    objects.append(
                        StoredObject(
                            key: fields["Key"] ?? "", size: Int64(fields["Size"] ?? "") ?? 0,
                            etag: fields["ETag"] ?? "",
                            modified: fields["LastModified"].flatMap { S3Client.timestamp($0) }))
                    object = nil
                }
            }
        }
        return (objects, top["IsTruncated"] == "true", top["NextContinuationToken"])
    }

    /// An answer without the white space S3 may send before the document while it works (a
    /// long CompleteMultipartUpload), which an XML parser refuses before the declaration.
    /// A time in an answer (`2026-12-07T03:24:43.228Z`; servers in Go write up to nine
    /// fractional digits, of which the first three are kept).
    static func timestamp(_ text: String) -> Date? {
        var trimmed = text
        if let dot = text.firstIndex(of: "."), let end = text[dot...].firstIndex(where: { !$0.isNumber && $0 != "." }) {
            let digits = text[text.index(after: dot)..<end]
            trimmed = String(text[..<dot]) + (digits.isEmpty ? "" : "." + digits.prefix(3)) + String(text[end...])
        }
        return ISO8601.parse(trimmed).map { Date(timeIntervalSince1970: Double($0) / 1000) }
    }

    static func withoutLeadingSpace(_ body: [UInt8]) -> [UInt8] {
        Array(body.drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 })
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
