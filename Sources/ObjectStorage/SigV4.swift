import Crypto
import Foundation
import Records

/// An access key for AWS or an S3-compatible service. Its secret and session token are never
/// shown: `description` names the key's ID only.
public struct AWSCredentials: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var accessKeyID: String
    public var secretAccessKey: String
    /// A temporary key's session token (`AWS_SESSION_TOKEN`), sent with every request.
    public var sessionToken: String?

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    public var description: String { "access key \(accessKeyID)" }
    public var debugDescription: String { description }
    /// What `dump` and a debugger show: the key's ID, never its secret.
    public var customMirror: Mirror { Mirror(self, children: ["accessKeyID": accessKeyID]) }
}

/// AWS Signature Version 4 (`AWS4-HMAC-SHA256`), as AWS's published test suite
/// (awslabs/aws-c-auth, `tests/aws-signing-test-suite/v4`) checks it: the canonical request,
/// the string to sign, the signing key derived from the secret and the day, and the
/// `Authorization` header. Signing adds `X-Amz-Date`, the session token's
/// `X-Amz-Security-Token` and, when asked, `X-Amz-Content-SHA256`; every header the request has
/// is signed.
public struct SigV4Signer: Sendable {
    public var credentials: AWSCredentials
    public var region: String
    /// `s3` for object storage.
    public var service: String

    public init(credentials: AWSCredentials, region: String, service: String) {
        self.credentials = credentials
        self.region = region
        self.service = service
    }

    /// A request as it goes on the wire.
    public struct Request: Sendable {
        public var method: String
        /// The path as sent, percent-encoded (`/bucket/a%20key`).
        public var path: String
        /// The query's parameters, not encoded; the signer encodes them as SigV4 does, and the
        /// request should be sent with ``encodedQuery``.
        public var query: [(name: String, value: String)]
        /// Header names as they are sent; values as they are sent.
        public var headers: [(name: String, value: String)]

        public init(
            method: String, path: String, query: [(name: String, value: String)] = [],
            headers: [(name: String, value: String)] = []
        ) {
            self.method = method
            self.path = path
            self.query = query
            self.headers = headers
        }

        /// The query as sent: each name and value percent-encoded as SigV4 encodes them, in
        /// the order given.
        public var encodedQuery: String {
            query.map { SigV4Signer.encode($0.name) + "=" + SigV4Signer.encode($0.value) }.joined(separator: "&")
        }

        /// The value of the header named `name` (any case); several are joined with commas.
        public func header(_ name: String) -> String? {
            let values = headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
            return values.isEmpty ? nil : values.joined(separator: ",")
        }
    }

    /// How a service wants its requests signed.
    public struct Options: Sendable {
        /// Remove `.` and `..` segments and empty segments from the path before signing (every
        /// service but S3, whose keys may hold them).
        public var normalizePath = false
        /// Encode the already encoded path once more (every service but S3).
        public var encodePathAgain = false
        /// Send the payload's SHA-256 as `X-Amz-Content-SHA256` (S3 requires it).
        public var sendsPayloadHash = true
        /// Leave the session token out of the signature and add it after (as STS's older
        /// clients did); false signs it like any other header.
        public var tokenAfterSigning = false

        public init() {}

        /// S3's rules: the path as sent, the payload's hash in a header.
        public static let s3 = Options()
    }

    /// The SHA-256 of an empty payload.
    public static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// The hex SHA-256 of `payload`, as a request's payload hash.
    public static func payloadHash(_ payload: some DataProtocol) -> String { hex(SHA256.hash(data: payload)) }

    /// Signs `request` at `date` for a payload whose SHA-256 is `payloadHash`.
    public func sign(_ request: inout Request, payloadHash: String, date: Date, options: Options = .s3) {
        let stamp = SigV4Signer.stamp(date)
        request.headers.append((name: "X-Amz-Date", value: stamp))
        if options.sendsPayloadHash { request.headers.append((name: "X-Amz-Content-SHA256", value: payloadHash)) }
        if let token = credentials.sessionToken, !options.tokenAfterSigning {
            request.headers.append((name: "X-Amz-Security-Token", value: token))
        }
        let (canonical, signedHeaders) = canonicalRequest(request, payloadHash: payloadHash, options: options)
        let signature = signature(of: stringToSign(canonical, date: date), date: date)
        request.headers.append(
            (
                name: "Authorization",
                value:
                    "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope(date)), SignedHeaders=\(signedHeaders), Signature=\(signature)"
            ))
        if let token = credentials.sessionToken, options.tokenAfterSigning {
            request.headers.append((name: "X-Amz-Security-Token", value: token))
        }
    }

    /// The canonical request of `request` (its headers as they will be signed), and the names
    /// of its signed headers.
    public func canonicalRequest(_ request: Request, payloadHash: String, options: Options = .s3) -> (
        text: String, signedHeaders: String
    ) {
        var path = options.normalizePath ? SigV4Signer.normalized(request.path) : request.path
        if path.isEmpty { path = "/" }
        if options.encodePathAgain { path = SigV4Signer.encode(path, keepingSlashes: true) }
        let query = request.query.map { (SigV4Signer.encode($0.name), SigV4Signer.encode($0.value)) }
            .sorted {
                $0.0 != $1.0
                    ? $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) : $0.1.utf8.lexicographicallyPrecedes($1.1.utf8)
            }
            .map { "\($0.0)=\($0.1)" }.joined(separator: "&")
        // Header names in lower case, in order; a name given twice has its values joined with
        // commas in the order given; each value trimmed, its runs of spaces (and folded lines)
        // made one space.
        var headers: [(name: String, value: String)] = []
        for (name, value) in request.headers {
            let key = name.lowercased()
            let clean = value.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" })
                .joined(separator: " ")
            if let index = headers.firstIndex(where: { $0.name == key }) {
                headers[index].value += "," + clean
            } else {
                headers.append((key, clean))
            }
        }
        headers.sort { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        let signedHeaders = headers.map(\.name).joined(separator: ";")
        let text = [
            request.method, path, query, headers.map { "\($0.name):\($0.value)\n" }.joined(), signedHeaders,
            payloadHash,
        ].joined(separator: "\n")
        return (text, signedHeaders)
    }

    /// The string to sign for a canonical request at `date`.
    public func stringToSign(_ canonicalRequest: String, date: Date) -> String {
        [
            "AWS4-HMAC-SHA256", SigV4Signer.stamp(date), scope(date),
            SigV4Signer.hex(SHA256.hash(data: Data(canonicalRequest.utf8))),
        ].joined(separator: "\n")
    }

    /// The signature of `stringToSign` with the key of `date`'s day, region and service.
    public func signature(of stringToSign: String, date: Date) -> String {
        var key = SymmetricKey(data: Data("AWS4\(credentials.secretAccessKey)".utf8))
        for part in [SigV4Signer.day(date), region, service, "aws4_request"] {
            key = SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data(part.utf8), using: key)))
        }
        return SigV4Signer.hex(HMAC<SHA256>.authenticationCode(for: Data(stringToSign.utf8), using: key))
    }

    /// DAY/REGION/SERVICE/aws4_request.
    public func scope(_ date: Date) -> String { "\(SigV4Signer.day(date))/\(region)/\(service)/aws4_request" }

    // MARK: Pieces

    /// `20150830T123600Z`.
    static func stamp(_ date: Date) -> String {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let (year, month, day) = ISO8601.civil(fromDays: days)
        let inDay = seconds - days * 86_400
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let yearText = String(repeating: "0", count: max(0, 4 - String(year).count)) + String(year)
        return "\(yearText)\(two(month))\(two(day))T\(two(inDay / 3600))\(two(inDay / 60 % 60))\(two(inDay % 60))Z"
    }

    /// `20150830`.
    static func day(_ date: Date) -> String { String(stamp(date).prefix(8)) }

    /// `text` with every byte but the unreserved ones (A–Z, a–z, 0–9, `-._~`) as %XX (upper
    /// case); slashes kept when asked.
    public static func encode(_ text: String, keepingSlashes: Bool = false) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        let digits = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where keepingSlashes:
                out.append("/")
            default:
                out.unicodeScalars.append("%")
                out.unicodeScalars.append(Unicode.Scalar(digits[Int(byte >> 4)]))
                out.unicodeScalars.append(Unicode.Scalar(digits[Int(byte & 15)]))
            }
        }
        return out
    }

    /// A path without `.` and `..` segments or empty ones, keeping a final slash.
    static func normalized(_ path: String) -> String {
        var segments: [Substring] = []
        for segment in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch segment {
            case ".": continue
            case "..": if !segments.isEmpty { segments.removeLast() }
            default: segments.append(segment)
            }
        }
        let last = path.split(separator: "/", omittingEmptySubsequences: false).last
        let trailing = path.hasSuffix("/") || last == "." || last == ".."
        let joined = "/" + segments.joined(separator: "/")
        return trailing && !segments.isEmpty ? joined + "/" : joined
    }

    private static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
