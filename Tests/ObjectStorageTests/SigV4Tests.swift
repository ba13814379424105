import Foundation
import ObjectStorage
import TestSupport
import Testing

/// The signer against AWS's published Signature Version 4 test suite (awslabs/aws-c-auth,
/// commit 495329c, `tests/aws-signing-test-suite/v4`; copied with its licence into
/// `Fixtures/aws-signing-test-suite`, see SOURCES.md there), and against S3's own example.
@Suite("Signature Version 4")
struct SigV4Tests {
    static let suite = packageRoot.appendingPathComponent("Tests/ObjectStorageTests/Fixtures/aws-signing-test-suite/v4")

    /// Every case of the suite, by name.
    static let cases: [String] = (try? FileManager.default.contentsOfDirectory(atPath: suite.path).sorted()) ?? []

    /// A case's request as `request.txt` writes it: `METHOD PATH?QUERY HTTP/1.1`, then
    /// `Name:value` lines (a line that starts with white space continues the one before), a
    /// blank line and the body.
    static func request(_ text: String) throws -> (SigV4Signer.Request, body: Data) {
        let (head, body) =
            text.range(of: "\n\n").map { (String(text[..<$0.lowerBound]), String(text[$0.upperBound...])) }
            ?? (text, "")
        var lines = head.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let first = lines.removeFirst()
        let method = String(first.prefix { $0 != " " })
        let target = String(first.dropFirst(method.count + 1).dropLast(" HTTP/1.1".count))
        let (path, queryText) =
            target.firstIndex(of: "?").map { (String(target[..<$0]), String(target[target.index(after: $0)...])) }
            ?? (target, "")
        let query = queryText.split(separator: "&").map { pair -> (name: String, value: String) in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            return (
                parts[0].removingPercentEncoding ?? parts[0],
                (parts.count > 1 ? parts[1] : "").removingPercentEncoding ?? ""
            )
        }
        var headers: [(name: String, value: String)] = []
        for line in lines where !line.isEmpty {
            if line.first == " " || line.first == "\t" {
                headers[headers.count - 1].value += "\n" + line
            } else {
                let colon = try #require(line.firstIndex(of: ":"), "\(line)")
                headers.append((String(line[..<colon]), String(line[line.index(after: colon)...])))
            }
        }
        return (SigV4Signer.Request(method: method, path: path, query: query, headers: headers), Data(body.utf8))
    }

    struct Context: Decodable {
        struct Credentials: Decodable {
            var accessKeyId: String
            var secretAccessKey: String
            var token: String?
        }
        var credentials: Credentials
        var region: String
        var service: String
        var timestamp: String
        var normalize: Bool
        var signBody: Bool
        var omitSessionToken: Bool?
    }

    @Test("the suite has its cases")
    func suiteIsThere() {
        #expect(Self.cases.count == 38, "\(Self.cases)")
    }

    @Test(
        "each case of AWS's suite: the canonical request, the string to sign, the signature and the signed headers",
        arguments: cases)
    func awsSuite(_ name: String) throws {
        let folder = Self.suite.appendingPathComponent(name)
        func file(_ name: String) throws -> String {
            try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
        }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let context = try decoder.decode(Context.self, from: Data(try file("context.json").utf8))
        var (request, body) = try Self.request(try file("request.txt"))
        let date = try #require(ISO8601DateFormatter().date(from: context.timestamp))
        let signer = SigV4Signer(
            credentials: AWSCredentials(
                accessKeyID: context.credentials.accessKeyId, secretAccessKey: context.credentials.secretAccessKey,
                sessionToken: context.credentials.token),
            region: context.region, service: context.service)
        // The suite's service is not S3: its paths are normalized when it says so and encoded
        // once more.
        var options = SigV4Signer.Options()
        options.normalizePath = context.normalize
        options.encodePathAgain = true
        options.sendsPayloadHash = context.signBody
        options.tokenAfterSigning = context.omitSessionToken ?? false
        let hash = SigV4Signer.payloadHash(body)
        signer.sign(&request, payloadHash: hash, date: date, options: options)

        // The canonical request of the headers as signed (the Authorization header and a token
        // added after signing are not part of it).
        var signed = request
        signed.headers.removeAll {
            $0.name == "Authorization" || (options.tokenAfterSigning && $0.name == "X-Amz-Security-Token")
        }
        let canonical = signer.canonicalRequest(signed, payloadHash: hash, options: options).text
        #expect(canonical == (try file("header-canonical-request.txt")))
        let toSign = signer.stringToSign(canonical, date: date)
        #expect(toSign == (try file("header-string-to-sign.txt")))
        #expect(signer.signature(of: toSign, date: date) == (try file("header-signature.txt")))
        // Every header of the signed request the suite writes, ours the same (in any order).
        let (expected, _) = try Self.request(try file("header-signed-request.txt"))
        func lines(_ headers: [(name: String, value: String)]) -> [String] {
            headers.map { "\($0.name.lowercased()):\($0.value)" }.sorted()
        }
        #expect(lines(request.headers) == lines(expected.headers))
        #expect(request.header("authorization")?.hasPrefix("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/") == true)
    }

    @Test("S3's own example (GET of a range, the payload hash in a header): the documented signature")
    func s3Example() throws {
        // AWS, Amazon S3 API Reference, "Signature Calculations for the Authorization Header:
        // Transferring Payload in a Single Chunk", example GET Object; the same figures are in
        // cloudyr/aws.signature's tests/testthat/test-v4.R.
        let signer = SigV4Signer(
            credentials: AWSCredentials(
                accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            region: "us-east-1", service: "s3")
        var request = SigV4Signer.Request(
            method: "GET", path: "/test.txt",
            headers: [("Host", "examplebucket.s3.amazonaws.com"), ("Range", "bytes=0-9")])
        let date = try #require(ISO8601DateFormatter().date(from: "2013-05-24T00:00:00Z"))
        signer.sign(&request, payloadHash: SigV4Signer.emptyPayloadHash, date: date)
        #expect(
            request.header("Authorization")
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        )
        #expect(request.header("x-amz-date") == "20130524T000000Z")
    }

    @Test("the time stamp and the scope's day: four-digit years, days before 1970")
    func stamps() throws {
        let signer = SigV4Signer(
            credentials: AWSCredentials(accessKeyID: "a", secretAccessKey: "b"), region: "r", service: "s3")
        // Seconds since 1970 (Python's datetime, the proleptic Gregorian calendar ISO 8601 uses;
        // Foundation's formatter reads years before 1582 as Julian).
        for (seconds, stamp) in [
            (1_440_938_160.0, "20150830T123600Z"), (-1, "19691231T235959Z"), (-30_641_662_555, "09990102T030405Z"),
            (1_709_164_800, "20240229T000000Z"),
        ] {
            let date = Date(timeIntervalSince1970: seconds)
            let text = "\(seconds)"
            var request = SigV4Signer.Request(method: "GET", path: "/", headers: [("Host", "h")])
            signer.sign(&request, payloadHash: SigV4Signer.emptyPayloadHash, date: date)
            #expect(request.header("x-amz-date") == stamp, "\(text)")
            #expect(signer.scope(date) == "\(stamp.prefix(8))/r/s3/aws4_request")
        }
    }

    @Test("the secret and the session token are never in the credentials' description, nor in what dump shows")
    func secretsStayOut() {
        let credentials = AWSCredentials(
            accessKeyID: "AKID", secretAccessKey: "s3cr3t-value", sessionToken: "t0ken-value")
        var dumped = ""
        dump(credentials, to: &dumped)
        for text in ["\(credentials)", String(describing: credentials), String(reflecting: credentials), dumped] {
            #expect(!text.contains("s3cr3t") && !text.contains("t0ken") && text.contains("AKID"), "\(text)")
        }
    }
}
