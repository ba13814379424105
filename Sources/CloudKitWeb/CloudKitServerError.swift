import Foundation
import Records

/// An error CloudKit Web Services answered with: its error dictionary (`serverErrorCode`,
/// `reason`, `uuid`, and `retryAfter` when a retry may succeed), with the HTTP status.
public struct CloudKitServerError: CKPortError, Sendable, Equatable, Decodable {
    /// The server codes the reference documents.
    public enum Code: String, Sendable, CaseIterable {
        case accessDenied = "ACCESS_DENIED"
        case atomicError = "ATOMIC_ERROR"
        case authenticationFailed = "AUTHENTICATION_FAILED"
        case authenticationRequired = "AUTHENTICATION_REQUIRED"
        case badRequest = "BAD_REQUEST"
        case conflict = "CONFLICT"
        case exists = "EXISTS"
        case internalError = "INTERNAL_ERROR"
        case notFound = "NOT_FOUND"
        case quotaExceeded = "QUOTA_EXCEEDED"
        case throttled = "THROTTLED"
        case tryAgainLater = "TRY_AGAIN_LATER"
        case validatingReferenceError = "VALIDATING_REFERENCE_ERROR"
        case zoneNotFound = "ZONE_NOT_FOUND"
    }

    /// The code as the server sent it (a code this version does not know is kept as text).
    public var serverErrorCode: String
    public var reason: String?
    public var uuid: String?
    /// Seconds to wait before a retry may succeed; nil: a retry would fail the same way.
    public var retryAfter: Double?
    /// Where a person signs in, with AUTHENTICATION_REQUIRED.
    public var redirectURL: String?
    /// The record a per-record error of `records/modify` or `records/lookup` is about.
    public var recordName: String?
    /// The HTTP status the error came with (0 for a per-record error inside a 200 answer).
    public var status: Int

    public init(
        serverErrorCode: String, reason: String? = nil, uuid: String? = nil, retryAfter: Double? = nil,
        redirectURL: String? = nil, recordName: String? = nil, status: Int = 0
    ) {
        self.serverErrorCode = serverErrorCode
        self.reason = reason
        self.uuid = uuid
        self.retryAfter = retryAfter
        self.redirectURL = redirectURL
        self.recordName = recordName
        self.status = status
    }

    enum CodingKeys: String, CodingKey {
        case serverErrorCode, reason, uuid, retryAfter, redirectURL, recordName
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        serverErrorCode = try container.decode(String.self, forKey: .serverErrorCode)
        reason = try container.decodeIfPresent(String.self, forKey: .reason)
        uuid = try container.decodeIfPresent(String.self, forKey: .uuid)
        retryAfter = try container.decodeIfPresent(Double.self, forKey: .retryAfter)
        redirectURL = try container.decodeIfPresent(String.self, forKey: .redirectURL)
        recordName = try container.decodeIfPresent(String.self, forKey: .recordName)
        status = 0
    }

    /// The error in an answer's body, if the body is an error dictionary.
    public static func parse(status: Int, body: Data) -> CloudKitServerError? {
        guard var error = try? JSONDecoder().decode(CloudKitServerError.self, from: body) else { return nil }
        error.status = status
        return error
    }

    public var code: Code? { Code(rawValue: serverErrorCode) }

    /// Whether waiting and asking again may succeed: the server said so with `retryAfter`, or
    /// the code says the server was busy or failed (THROTTLED, TRY_AGAIN_LATER, INTERNAL_ERROR),
    /// which CloudKit sends with or without `retryAfter`; so does a bare 429, 500, 502, 503 or 504.
    public var isRetryable: Bool {
        if retryAfter != nil { return true }
        switch code {
        case .throttled?, .tryAgainLater?, .internalError?: return true
        default: return [429, 500, 502, 503, 504].contains(status) && code == nil
        }
    }

    /// Whether the answer says a zone's sync token no longer works: it expired, or the zone
    /// was reset since it was issued. The reference lists no code for it; CloudKit's own
    /// framework calls it "change token expired" ("client knowledge differs from server
    /// knowledge"), so both the code and that wording are recognised.
    public var isExpiredSyncToken: Bool {
        if ["CHANGE_TOKEN_EXPIRED", "SYNC_TOKEN_EXPIRED"].contains(serverErrorCode) { return true }
        guard code == .badRequest, let reason = reason?.lowercased() else { return false }
        return reason.contains("client knowledge differs") || (reason.contains("token") && reason.contains("expired"))
    }

    /// Whether the answer says the zone asked about is gone (deleted, or purged by its user).
    public var isZoneGone: Bool {
        code == .zoneNotFound || ["USER_DELETED_ZONE", "ZONE_PURGED"].contains(serverErrorCode)
    }

    public var category: ErrorCategory {
        switch code {
        case .conflict?, .exists?, .validatingReferenceError?, .notFound?, .zoneNotFound?, .atomicError?, .badRequest?:
            return .invalidInput
        case .authenticationFailed?, .authenticationRequired?:
            return .authentication
        case .accessDenied?, .quotaExceeded?, .throttled?, .tryAgainLater?, .internalError?, nil:
            return .environment
        }
    }

    public var description: String { explanation.description }

    public var explanation: Message {
        var text: Message = "CloudKit answered \(serverErrorCode)"
        if status != 0 { text += " (HTTP \(status))" }
        if let recordName { text += " for record '\(recordName)'" }
        if let reason, !reason.isEmpty { text += ": \(reason)" }
        switch code {
        case .authenticationRequired?:
            text.append(
                "; the web auth token has expired (a sign-in lasts 30 minutes, or two weeks when \"Keep me signed in\" was ticked) or was never given"
            )
            text += "; \(Wording.signInAgain)"
            if let redirectURL { text += " (CloudKit's sign-in page: \(redirectURL))" }
        case .authenticationFailed?:
            text +=
                "; CloudKit did not accept the credentials: the API token, the web auth token (\(Wording.signInAgain)), or the server-to-server key ID and key"
        case .conflict?:
            text.append("; the record changed in CloudKit since its change tag was read")
        case .quotaExceeded?:
            text.append("; the iCloud account or container is out of space")
        default:
            break
        }
        if let uuid { text += " [request \(uuid)]" }
        return text
    }
}
