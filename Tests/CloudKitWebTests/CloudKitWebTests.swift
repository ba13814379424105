import CloudKitEmulator
import CloudKitWeb
import Foundation
import Records
import TestSupport
import Testing

/// Runs a program and returns its exit status and standard output.
func run(_ program: String, _ arguments: [String], in directory: URL) throws -> (Int32, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    process.currentDirectoryURL = directory
    let out = Pipe()
    process.standardOutput = out
    process.standardError = out
    try process.run()
    let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, text)
}

/// openssl, the independent implementation the signatures are checked against. CI installs it;
/// a machine without it fails here rather than skipping.
let openssl =
    ["/usr/bin/openssl", "/usr/local/bin/openssl"].first { FileManager.default.isExecutableFile(atPath: $0) }
    ?? "/usr/bin/openssl"

@Suite("CloudKit Web Services requests")
struct CloudKitRequestTests {
    @Test("operation paths and URLs as the reference composes them")
    func addresses() throws {
        let database = try CloudKitDatabase(
            container: "iCloud.com.example.Family", environment: .production, scope: .private)
        #expect(
            database.path("records/query") == "/database/1/iCloud.com.example.Family/production/private/records/query")
        #expect(
            database.url("zones/list").absoluteString
                == "https://api.apple-cloudkit.com/database/1/iCloud.com.example.Family/production/private/zones/list")
        let local = try CloudKitDatabase(
            container: "iCloud.com.example.Family", environment: .development, scope: .public,
            baseURL: URL(string: "http://127.0.0.1:8181/")!)
        // A token as CloudKit hands them out (Apple's format, seen in public captures of real
        // answers: partition, 54, base64 and the base64 of JSON, joined by "__").
        let token = "106__54__AZxQ+o9h/Wa7e=__eyJYLUFQUExFIjoiYSJ9"
        let url = local.url(
            "records/modify",
            query: [URLQueryItem(name: "ckAPIToken", value: "abc"), URLQueryItem(name: "ckWebAuthToken", value: token)])
        #expect(url.path == "/database/1/iCloud.com.example.Family/development/public/records/modify")
        #expect(url.host == "127.0.0.1" && url.port == 8181)
        // "Composing Web Service Requests": + → %2B, / → %2F, = → %3D; a form reader (which
        // takes + for a space) gets the token back whole.
        #expect(
            url.query == "ckAPIToken=abc&ckWebAuthToken=106__54__AZxQ%2Bo9h%2FWa7e%3D__eyJYLUFQUExFIjoiYSJ9", "\(url)")
        let pairs = url.query!.split(separator: "&").map { $0.split(separator: "=", maxSplits: 1) }
        #expect(pairs[1][1].replacingOccurrences(of: "+", with: " ").removingPercentEncoding == token)
        #expect(CloudKitDatabase.percentEncoded("a b&c=d/é~._-") == "a%20b%26c%3Dd%2F%C3%A9~._-")
        // users/current lives under the public database whichever one a client speaks to.
        #expect(
            database.url("users/current", scope: .public).path
                == "/database/1/iCloud.com.example.Family/production/public/users/current")
        for bad in ["com.example.Family", "iCloud.", "iCloud.com example", "iCloud.com/evil"] {
            #expect(throws: CloudKitRequestError.invalidContainer(bad)) {
                _ = try CloudKitDatabase(container: bad, environment: .development, scope: .public)
            }
        }
    }

    @Test("the date header is UTC to the second, without milliseconds")
    func dates() {
        #expect(ServerToServerKey.dateString(Date(timeIntervalSince1970: 1_764_000_000.987)) == "2025-11-24T16:00:00Z")
        #expect(ServerToServerKey.dateString(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00Z")
    }

    @Test("signatures openssl accepts, from SEC 1 and PKCS #8 keys openssl made; a changed body, path or date fails")
    func signaturesCheckedByOpenSSL() throws {
        let scratch = Scratch()
        let (made, output) = try run(
            openssl, ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sec1.pem"], in: scratch.url)
        #expect(made == 0, "\(output)")
        _ = try run(openssl, ["pkcs8", "-topk8", "-nocrypt", "-in", "sec1.pem", "-out", "pkcs8.pem"], in: scratch.url)
        _ = try run(openssl, ["ec", "-in", "sec1.pem", "-pubout", "-out", "public.pem"], in: scratch.url)
        let body = Data(#"{"query":{"recordType":"Articles"}}"#.utf8)
        let path = "/database/1/iCloud.com.example.Family/development/public/records/query"
        let date = Date(timeIntervalSince1970: 1_764_000_000)
        for file in ["sec1.pem", "pkcs8.pem"] {
            let key = try ServerToServerKey(keyID: "0a1b2c3d4e5f", file: scratch.path(file))
            let headers = try key.headers(body: body, path: path, date: date)
            #expect(
                headers.map(\.name) == [
                    "X-Apple-CloudKit-Request-KeyID", "X-Apple-CloudKit-Request-ISO8601Date",
                    "X-Apple-CloudKit-Request-SignatureV1",
                ])
            #expect(headers[0].value == "0a1b2c3d4e5f" && headers[1].value == "2025-11-24T16:00:00Z")
            // What was signed, as openssl would build it: DATE:base64(SHA-256(body)):PATH.
            try body.write(to: scratch.url.appendingPathComponent("body.json"))
            let (_, digest) = try run(
                "/bin/sh", ["-c", "\(openssl) dgst -sha256 -binary body.json | base64"], in: scratch.url)
            let message = "2025-11-24T16:00:00Z:\(digest.trimmingCharacters(in: .whitespacesAndNewlines)):\(path)"
            #expect(
                ServerToServerKey.message(date: "2025-11-24T16:00:00Z", body: body, path: path) == Data(message.utf8))
            try Data(message.utf8).write(to: scratch.url.appendingPathComponent("message"))
            try Data(base64Encoded: headers[2].value)!.write(to: scratch.url.appendingPathComponent("signature.der"))
            let (verified, said) = try run(
                openssl, ["dgst", "-sha256", "-verify", "public.pem", "-signature", "signature.der", "message"],
                in: scratch.url)
            #expect(verified == 0 && said.contains("Verified OK"), "\(file): \(said)")
            // And the other way: what openssl signs, ckport's check accepts.
            _ = try run(openssl, ["dgst", "-sha256", "-sign", file, "-out", "theirs.der", "message"], in: scratch.url)
            let theirs = try Data(contentsOf: scratch.url.appendingPathComponent("theirs.der")).base64EncodedString()
            let publicPEM = scratch.text("public.pem")
            #expect(
                ServerToServerKey.verify(
                    signature: theirs, publicKeyPEM: publicPEM, date: "2025-11-24T16:00:00Z", body: body, path: path))
            #expect(
                !ServerToServerKey.verify(
                    signature: theirs, publicKeyPEM: publicPEM, date: "2025-11-24T16:00:01Z", body: body, path: path))
            #expect(
                !ServerToServerKey.verify(
                    signature: theirs, publicKeyPEM: publicPEM, date: "2025-11-24T16:00:00Z",
                    body: body + Data(" ".utf8), path: path))
            #expect(
                !ServerToServerKey.verify(
                    signature: theirs, publicKeyPEM: publicPEM, date: "2025-11-24T16:00:00Z", body: body,
                    path: path + "x"))
            #expect(
                key.publicKeyPEM.trimmingCharacters(in: .whitespacesAndNewlines)
                    == publicPEM.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        #expect(throws: CloudKitRequestError.self) {
            _ = try ServerToServerKey(
                keyID: "0a1b", pem: "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n")
        }
        #expect(throws: CloudKitRequestError.self) {
            _ = try ServerToServerKey(keyID: "not a key id", file: scratch.path("sec1.pem"))
        }
    }
}

@Suite("CloudKit errors and retries")
struct CloudKitErrorTests {
    @Test("error dictionaries: the code, the reason, retryAfter, and what the message tells a person")
    func errorDictionaries() throws {
        let throttled = try #require(
            CloudKitServerError.parse(
                status: 429,
                body: Data(
                    #"{"uuid":"8a2b","serverErrorCode":"THROTTLED","reason":"request rate too high","retryAfter":5}"#
                        .utf8)))
        #expect(
            throttled.code == .throttled && throttled.retryAfter == 5 && throttled.isRetryable
                && throttled.category == .environment)
        #expect(throttled.description == "CloudKit answered THROTTLED (HTTP 429): request rate too high [request 8a2b]")
        let signIn = try #require(
            CloudKitServerError.parse(
                status: 421,
                body: Data(
                    #"{"uuid":"c1","serverErrorCode":"AUTHENTICATION_REQUIRED","reason":"request needs authorization","redirectURL":"https://idmsa.apple.com/x"}"#
                        .utf8)))
        #expect(
            !signIn.isRetryable && signIn.description.contains("sign in again")
                && signIn.description.contains("(CloudKit's sign-in page: https://idmsa.apple.com/x)")
                && signIn.category == .authentication)
        #expect(signIn.description.contains("30 minutes") && signIn.description.contains("Keep me signed in"))
        let conflict = CloudKitServerError(serverErrorCode: "CONFLICT", reason: "oplock error", recordName: "task-7")
        #expect(conflict.category == .invalidInput && !conflict.isRetryable)
        // Busy or failing servers come with or without retryAfter; both are worth another try.
        for (status, code) in [(503, "TRY_AGAIN_LATER"), (500, "INTERNAL_ERROR"), (429, "THROTTLED")] {
            let bare = try #require(
                CloudKitServerError.parse(
                    status: status, body: Data(#"{"uuid":"u","serverErrorCode":"\#(code)","reason":"r"}"#.utf8)))
            #expect(bare.retryAfter == nil && bare.isRetryable, "\(code)")
        }
        #expect(
            !CloudKitServerError(
                serverErrorCode: "BAD_REQUEST", reason: "Queried type is not marked indexable", status: 400
            ).isRetryable)
        // A sync token that no longer works, however the server words it; a zone that is gone.
        #expect(CloudKitServerError(serverErrorCode: "CHANGE_TOKEN_EXPIRED", status: 400).isExpiredSyncToken)
        #expect(
            CloudKitServerError(
                serverErrorCode: "BAD_REQUEST", reason: "client knowledge differs from server knowledge", status: 400
            ).isExpiredSyncToken)
        #expect(
            !CloudKitServerError(
                serverErrorCode: "BAD_REQUEST", reason: "Queried type is not marked indexable", status: 400
            ).isExpiredSyncToken)
        #expect(
            CloudKitServerError(serverErrorCode: "ZONE_NOT_FOUND", status: 404).isZoneGone
                && !CloudKitServerError(serverErrorCode: "NOT_FOUND", status: 404).isZoneGone)
        let refused = CloudKitServerError(
            serverErrorCode: "AUTHENTICATION_FAILED", reason: "Authentication failed", status: 401)
        #expect(refused.category == .authentication && refused.description.contains("sign in again"))
        #expect(
            conflict.description
                == "CloudKit answered CONFLICT for record 'task-7': oplock error; the record changed in CloudKit since its change tag was read"
        )
        #expect(CloudKitServerError.parse(status: 503, body: Data("<html>Service Unavailable</html>".utf8)) == nil)
        #expect(CloudKitServerError(serverErrorCode: "SOMETHING_NEW").category == .environment)
        #expect(CloudKitServerError.Code.allCases.count == 14)
    }

    @Test("retries: retryAfter honoured, backoff doubles with jitter up to a cap, final answers not retried")
    func retries() {
        let policy = RetryPolicy(maxAttempts: 5, baseDelay: 1, maxDelay: 10)
        let top = { 0.999999 }
        let bottom = { 0.0 }
        // Connection failures: 1, 2, 4, 8 seconds (to half that with jitter), then no more.
        #expect(
            [1, 2, 3, 4].map { policy.delay(after: $0, failure: .transport, random: top)!.rounded() } == [1, 2, 4, 8])
        #expect([1, 2, 3, 4].map { policy.delay(after: $0, failure: .transport, random: bottom)! } == [0.5, 1, 2, 4])
        #expect(policy.delay(after: 5, failure: .transport) == nil)
        // The server's retryAfter wins when it is longer than the backoff.
        #expect(policy.delay(after: 1, failure: .server(retryAfter: 7, busy: false), random: top) == 7)
        #expect(policy.delay(after: 4, failure: .server(retryAfter: 3, busy: false), random: top)!.rounded() == 8)
        // No retryAfter: final, unless the code says the server was busy or failed (THROTTLED,
        // TRY_AGAIN_LATER, INTERNAL_ERROR), which CloudKit sends without one too: then backoff.
        #expect(policy.delay(after: 1, failure: .server(retryAfter: nil, busy: false)) == nil)
        #expect(
            [1, 2, 3].map {
                policy.delay(after: $0, failure: .server(retryAfter: nil, busy: true), random: top)!.rounded()
            } == [1, 2, 4])
        // A retryAfter over the backoff's cap is waited out, up to the longest wait; beyond it, no retry.
        #expect(policy.delay(after: 1, failure: .server(retryAfter: 300, busy: true)) == 300)
        #expect(policy.delay(after: 1, failure: .server(retryAfter: 901, busy: true)) == nil)
        #expect(RetryPolicy(longestWait: 1200).delay(after: 1, failure: .server(retryAfter: 901, busy: true)) == 901)
        // The cap holds however many attempts.
        let long = RetryPolicy(maxAttempts: 50, baseDelay: 1, maxDelay: 10)
        #expect(long.delay(after: 40, failure: .transport, random: top)! <= 10)
    }

    @Test("records/modify batches: at most 200 operations and the byte budget each, in order, nothing lost")
    func batches() {
        var batcher = ModifyBatcher(byteBudget: 1_000)
        var batches: [[[UInt8]]] = []
        var sizes: [Int] = []
        for n in 0..<450 {
            let operation = [UInt8](repeating: UInt8(n % 251), count: n == 300 ? 5_000 : 4)
            sizes.append(operation.count)
            if let full = batcher.add(operation) { batches.append(full) }
        }
        if let last = batcher.finish() { batches.append(last) }
        #expect(batcher.finish() == nil)
        #expect(batches.flatMap { $0 }.map(\.count) == sizes)
        #expect(batches.allSatisfy { $0.count <= 200 })
        #expect(batches.allSatisfy { $0.count == 1 || $0.reduce(0) { $0 + $1.count } <= 1_000 })
        #expect(batches.map(\.count) == [200, 100, 1, 149])
    }
}

extension CloudKitEmulator {
    /// Records written as dictionary literals, loaded as the wire models they decode to: a
    /// record the models cannot read fails the test here.
    func load(
        _ records: [[String: Any]], environment: CloudKitDatabase.Environment = .development,
        scope: CloudKitDatabase.Scope = .private, zone: String = "_defaultZone"
    ) {
        let decoded = records.map { record in
            // A literal that is not a record is the test's own mistake.
            try! JSONDecoder().decode(
                CloudKitWire.Record.self, from: try! JSONSerialization.data(withJSONObject: record))
        }
        load(decoded, environment: environment, scope: scope, zone: zone)
    }
}
