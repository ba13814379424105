import Crypto
import Foundation

/// A server-to-server key: an EC P-256 private key whose public half is registered in the
/// CloudKit dashboard under a key ID. Each request carries three headers: the key ID, the
/// date (ISO 8601, UTC, whole seconds) and a signature — base64 of the DER-encoded ECDSA
/// (SHA-256) signature of `DATE:BASE64(SHA-256(BODY)):PATH`.
public struct ServerToServerKey: Sendable {
    public static let keyIDHeader = "X-Apple-CloudKit-Request-KeyID"
    public static let dateHeader = "X-Apple-CloudKit-Request-ISO8601Date"
    public static let signatureHeader = "X-Apple-CloudKit-Request-SignatureV1"

    public let keyID: String
    private let key: P256.Signing.PrivateKey

    /// The key from PEM text: SEC 1 (`BEGIN EC PRIVATE KEY`) or PKCS #8 (`BEGIN PRIVATE KEY`).
    public init(keyID: String, pem: String, file: String = "the key") throws {
        guard !keyID.isEmpty, keyID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw CloudKitRequestError.unreadableKey(
                path: file, reason: "the key ID '\(keyID)' is not the dashboard's hexadecimal ID")
        }
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw CloudKitRequestError.unreadableKey(path: file, reason: "\(error)")
        }
        self.keyID = keyID
    }

    /// The key in `path`.
    public init(keyID: String, file path: String) throws {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw CloudKitRequestError.unreadableKey(path: path, reason: "it cannot be read as text")
        }
        try self.init(keyID: keyID, pem: text, file: path)
    }

    /// The public half, as PEM: what the dashboard holds.
    public var publicKeyPEM: String { key.publicKey.pemRepresentation }

    /// The date as the date header says it: `2026-11-24T07:30:00Z`.
    public static func dateString(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02dZ", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!)
    }

    /// What the signature covers.
    public static func message(date: String, body: Data, path: String) -> Data {
        let bodyHash = Data(SHA256.hash(data: body)).base64EncodedString()
        return Data("\(date):\(bodyHash):\(path)".utf8)
    }

    /// The three headers of a request to `path` with `body`, signed at `date`.
    public func headers(body: Data, path: String, date: Date = Date()) throws -> [(name: String, value: String)] {
        let dateText = ServerToServerKey.dateString(date)
        let signature = try key.signature(for: ServerToServerKey.message(date: dateText, body: body, path: path))
        return [
            (ServerToServerKey.keyIDHeader, keyID), (ServerToServerKey.dateHeader, dateText),
            (ServerToServerKey.signatureHeader, signature.derRepresentation.base64EncodedString()),
        ]
    }

    /// Whether `signature` (base64 DER) is `publicKey`'s signature of the request: how a server
    /// checks one.
    public static func verify(signature: String, publicKeyPEM: String, date: String, body: Data, path: String) -> Bool {
        guard let der = Data(base64Encoded: signature),
            let parsed = try? P256.Signing.ECDSASignature(derRepresentation: der),
            let publicKey = try? P256.Signing.PublicKey(pemRepresentation: publicKeyPEM)
        else { return false }
        return publicKey.isValidSignature(parsed, for: message(date: date, body: body, path: path))
    }
}
