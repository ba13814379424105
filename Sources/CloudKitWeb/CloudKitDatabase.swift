import Foundation
import Records

/// One database of a CloudKit container, as CloudKit Web Services addresses it:
/// `BASE/database/1/CONTAINER/ENVIRONMENT/DATABASE/OPERATION`.
public struct CloudKitDatabase: Sendable, Hashable, CustomStringConvertible {
    /// The container's environment.
    public enum Environment: String, Sendable, CaseIterable {
        /// Not reachable by apps in the App Store; its schema may change.
        case development
        /// What apps in the App Store use; its schema only grows.
        case production
    }

    /// Which of the container's databases.
    public enum Scope: String, Sendable, CaseIterable {
        /// Readable by every user of the app; the only one a server-to-server key reaches.
        case `public`
        /// The signed-in user's own records.
        case `private`
        /// Records other users shared with the signed-in user.
        case shared
    }

    /// Apple's CloudKit Web Services.
    public static let appleBaseURL = URL(string: "https://api.apple-cloudkit.com")!
    /// The protocol version in every path.
    public static let protocolVersion = 1

    public var container: String
    public var environment: Environment
    public var scope: Scope
    /// The server: Apple's, or another that speaks the same protocol (an emulator).
    public var baseURL: URL

    public init(container: String, environment: Environment, scope: Scope, baseURL: URL = CloudKitDatabase.appleBaseURL)
        throws
    {
        guard container.hasPrefix("iCloud."), container.count > "iCloud.".count,
            container.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) })
        else {
            throw CloudKitRequestError.invalidContainer(container)
        }
        self.container = container
        self.environment = environment
        self.scope = scope
        self.baseURL = baseURL
    }

    /// The path of an operation (`records/query`, `zones/list`…): what a server-to-server
    /// signature covers. `scope` overrides the database's own, for the operations CloudKit
    /// answers under one database only (`users/current` lives under `public`).
    public func path(_ operation: String, scope: Scope? = nil) -> String {
        "/database/\(CloudKitDatabase.protocolVersion)/\(container)/\(environment.rawValue)/\((scope ?? self.scope).rawValue)/\(operation)"
    }

    /// The full URL of an operation, with query items (an API token and a web auth token),
    /// each name and value percent-encoded whole: everything but letters, digits and `-._~`.
    /// A web auth token holds `+`, `/` and `=`, which CloudKit reads as a space, a path and a
    /// separator unless they come as `%2B`, `%2F` and `%3D` (Apple's "Composing Web Service
    /// Requests" asks for exactly that).
    public func url(_ operation: String, query: [URLQueryItem] = [], scope: Scope? = nil) -> URL {
        var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: false)!
        let prefix = components.path.hasSuffix("/") ? String(components.path.dropLast()) : components.path
        components.path = prefix + path(operation, scope: scope)
        if !query.isEmpty {
            components.percentEncodedQuery = query.map { item in
                CloudKitDatabase.percentEncoded(item.name)
                    + (item.value.map { "=" + CloudKitDatabase.percentEncoded($0) } ?? "")
            }.joined(separator: "&")
        }
        return components.url!
    }

    /// `text` with every byte but ASCII letters, digits and `-._~` written as `%XX`.
    public static func percentEncoded(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    public var description: String { "\(container) (\(environment.rawValue), \(scope.rawValue) database)" }
}

/// A request ckport refuses to make as it stands.
public enum CloudKitRequestError: CKPortError, Equatable {
    case invalidContainer(String)
    case unreadableKey(path: String, reason: String)
    case keyNeedsPublicDatabase(CloudKitDatabase.Scope)
    case unreadableToken(path: String)
    /// CloudKit did not answer a request without a user's token with a place to sign in.
    case signInNotOffered

    public var category: ErrorCategory {
        switch self {
        case .invalidContainer, .keyNeedsPublicDatabase: return .usage
        case .unreadableKey, .unreadableToken: return .invalidInput
        case .signInNotOffered: return .environment
        }
    }

    public var description: String {
        switch self {
        case .invalidContainer(let name):
            return
                "'\(name)' is not a container identifier: it starts with iCloud. and holds letters, digits, '.', '-' and '_' (iCloud.com.example.App)"
        case .unreadableKey(let path, let reason):
            return
                "\(path): not a server-to-server key: \(reason) (a PEM file with an EC P-256 private key, as 'openssl ecparam -name prime256v1 -genkey -noout' writes)"
        case .unreadableToken(let path):
            var info = stat()
            if stat(path, &info) != 0 {
                return
                    "\(path): \(errno == ENOENT ? "no such file" : String(cString: strerror(errno))) (a file whose first line is the token)"
            }
            if info.st_mode & S_IFMT == S_IFDIR { return "\(path): a folder, not a file whose first line is the token" }
            if access(path, R_OK) != 0 { return "\(path): cannot be read (\(String(cString: strerror(errno))))" }
            return "\(path): no token in its first line"
        case .signInNotOffered:
            return
                "the server answered a request without a user's token without offering a sign-in URL (is this a CloudKit Web Services server?)"
        case .keyNeedsPublicDatabase(let scope):
            return
                "a server-to-server key reaches the public database only; the \(scope.rawValue) database needs a user's web auth token"
        }
    }
}
