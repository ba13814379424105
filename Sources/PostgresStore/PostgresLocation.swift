import Foundation
import Records

/// Where a PostgreSQL store is: `postgresql://USER@HOST:PORT/DATABASE?schema=NAME`.
///
/// One PostgreSQL schema (a namespace) holds one ckport store; `schema` defaults to `ckport`.
/// The URL never carries a password — a store URL is shown in messages, lands in shell
/// history and in `ps` — so one is refused; the password comes from `PGPASSWORD`, from the
/// file `passfile=` names, or from `~/.pgpass` (or `PGPASSFILE`), as libpq reads them.
///
/// Query parameters: `schema`, `sslmode` and `sslrootcert` (as libpq takes them: `disable`;
/// `allow` and `prefer`, TLS when the server offers it; `require`, TLS always; `verify-ca`, TLS
/// with the server's certificate checked against trusted roots — `sslrootcert=FILE`, else the
/// system's; `verify-full`, its host name too. Only the last two check who the server is, and
/// `require` with `sslrootcert` checks as `verify-ca` does. The default is `prefer`, except on
/// loopback, where it is `disable`), `passfile`, `host` (a directory holding the server's Unix
/// socket, libpq's way of saying "not over TCP").
public struct PostgresLocation: Sendable, Equatable, CustomStringConvertible {
    public enum TLSMode: String, Sendable {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"

        /// Whether the server's certificate is checked against trusted roots.
        public var verifiesCertificate: Bool { self == .verifyCA || self == .verifyFull }
    }

    public var user: String
    public var host: String
    public var port: Int
    public var database: String
    public var schema: String
    public var tls: TLSMode
    /// A directory holding the server's Unix socket (`.s.PGSQL.PORT`), when not over TCP.
    public var socketDirectory: String?
    public var passfile: String?
    /// The certificates (PEM) of the authorities trusted to sign the server's certificate.
    public var rootCertificates: String?

    /// Whether `text` names a PostgreSQL store rather than a file.
    public static func isURL(_ text: String) -> Bool {
        text.hasPrefix("postgresql://") || text.hasPrefix("postgres://")
    }

    public init(_ text: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        func bad(_ why: String) -> PostgresStoreError {
            PostgresStoreError.badLocation("\(PostgresLocation.redacted(text)): \(why)")
        }
        guard PostgresLocation.isURL(text), let components = URLComponents(string: text) else {
            throw bad("not a URL of the form postgresql://USER@HOST:PORT/DATABASE?schema=NAME")
        }
        if components.password != nil {
            throw bad(
                "a password does not go in the URL, where shell history and process lists keep it; use PGPASSWORD, ~/.pgpass or passfile=FILE"
            )
        }
        url = text
        var query: [String: String] = [:]
        for item in components.queryItems ?? [] {
            guard query[item.name] == nil else { throw bad("'\(item.name)' is given twice") }
            query[item.name] = item.value ?? ""
        }
        let known: Set<String> = ["schema", "sslmode", "sslrootcert", "passfile", "host"]
        if let unknown = query.keys.sorted().first(where: { !known.contains($0) }) {
            throw bad("unknown parameter '\(unknown)' (known: schema, sslmode, sslrootcert, passfile, host)")
        }
        user =
            components.user.flatMap { $0.removingPercentEncoding } ?? environment["PGUSER"] ?? environment["USER"] ?? ""
        guard !user.isEmpty else { throw bad("no user: write postgresql://USER@HOST/DATABASE") }
        socketDirectory = query["host"].flatMap { $0.isEmpty ? nil : $0 }
        if let socketDirectory, !socketDirectory.hasPrefix("/") {
            throw bad("host=\(socketDirectory) is not a directory path (a Unix socket's directory starts with /)")
        }
        host = components.host.flatMap { $0.removingPercentEncoding } ?? ""
        if host.isEmpty && socketDirectory == nil { host = "localhost" }
        port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw bad("port \(port) is out of range") }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = path.removingPercentEncoding ?? path
        if database.isEmpty { database = user }
        guard !database.contains("/") else { throw bad("the database name '\(database)' holds '/'") }
        schema = query["schema"] ?? "ckport"
        guard PostgresLocation.isPlainName(schema) else {
            throw bad("schema=\(schema) is not a plain name (a letter or _, then letters, digits or _; at most 63)")
        }
        let loopback = socketDirectory != nil || ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host)
        if let mode = query["sslmode"] {
            guard let parsed = TLSMode(rawValue: mode) else {
                throw bad("sslmode=\(mode) is not one of disable, allow, prefer, require, verify-ca, verify-full")
            }
            tls = parsed
        } else {
            tls = loopback ? .disable : .prefer
        }
        if [.require, .verifyCA, .verifyFull].contains(tls) && socketDirectory != nil {
            throw bad("sslmode=\(tls.rawValue) over a Unix socket: TLS is for TCP connections")
        }
        rootCertificates = query["sslrootcert"].flatMap { $0.isEmpty ? nil : $0 }
        if let rootCertificates, !FileManager.default.isReadableFile(atPath: rootCertificates) {
            throw bad("sslrootcert=\(rootCertificates) cannot be read")
        }
        passfile = query["passfile"]
    }

    /// The URL as it was given (it never holds a password: one there is refused), for a
    /// command to run again on the same store.
    public let url: String

    /// The namespace as SQL names it: quoted, so that a reserved word (`user`, `order`) is a
    /// name too.
    public var quotedSchema: String { "\"" + schema + "\"" }

    /// A plain lower-case name (quoted where SQL names it, so reserved words are names too):
    /// the store's own names need no quoting rules of their own.
    static func isPlainName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.utf8.count <= 63 else { return false }
        guard first == "_" || ("a"..."z").contains(first) else { return false }
        return name.unicodeScalars.allSatisfy { $0 == "_" || ("a"..."z").contains($0) || ("0"..."9").contains($0) }
    }

    /// The URL without any secret, for messages.
    public var description: String {
        var text = "postgresql://\(user)@\(host):\(port)/\(database)?schema=\(schema)"
        if let socketDirectory { text += "&host=\(socketDirectory)" }
        if tls.verifiesCertificate { text += "&sslmode=\(tls.rawValue)" }
        return text
    }

    /// `text` with any password in it blanked, for an error about the URL itself — whether or
    /// not the rest of it parses: whatever stands between `USER:` and the last `@` before the
    /// host is hidden.
    static func redacted(_ text: String) -> String {
        guard let scheme = text.range(of: "://") else { return text }
        let rest = text[scheme.upperBound...]
        // The authority ends at the first '/', '?' or '#' after the last '@' that precedes it.
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        var authority = rest[rest.startIndex..<authorityEnd]
        if let at = authority.lastIndex(of: "@") {
            // A password may itself hold '/' or '?': then the '@' comes after them.
            authority = rest[rest.startIndex..<at]
        } else if let at = rest.lastIndex(of: "@") {
            authority = rest[rest.startIndex..<at]
        } else {
            return text
        }
        guard let colon = authority.firstIndex(of: ":") else { return text }
        return String(text[..<authority.index(after: colon)]) + "***" + String(text[authority.endIndex...])
    }

    /// The password for this location: `PGPASSWORD`, else the first matching line of the
    /// password file (`passfile=`, `PGPASSFILE` or `~/.pgpass`), else none (the server may not
    /// ask for one).
    public func password(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String? {
        if let password = environment["PGPASSWORD"] { return password }
        let file: String
        var named = false
        if let passfile {
            file = passfile
            named = true
        } else if let given = environment["PGPASSFILE"] {
            file = given
            named = true
        } else {
            file = (environment["HOME"] ?? NSHomeDirectory()) + "/.pgpass"
        }
        guard let data = FileManager.default.contents(atPath: file) else {
            if named { throw PostgresStoreError.badLocation("\(self): cannot read the password file \(file)") }
            return nil
        }
        // libpq ignores a password file others can read; so does ckport, saying why.
        if let attributes = try? FileManager.default.attributesOfItem(atPath: file),
            let mode = attributes[.posixPermissions] as? Int, mode & 0o077 != 0
        {
            throw PostgresStoreError.badLocation(
                "\(self): the password file \(file) can be read by others (mode \(String(mode, radix: 8))); chmod 600 it"
            )
        }
        let hostField = socketDirectory ?? host
        for line in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline) {
            if line.hasPrefix("#") { continue }
            let fields = PostgresLocation.passfileFields(String(line))
            guard fields.count == 5 else { continue }
            let wanted = [hostField, String(port), database, user]
            if zip(fields.prefix(4), wanted).allSatisfy({
                $0 == "*" || $0 == $1 || ($0 == "localhost" && hostField.hasPrefix("/"))
            }) {
                return fields[4]
            }
        }
        return nil
    }

    /// A password file line's fields: separated by `:`, with `\:` and `\\` escaped.
    static func passfileFields(_ line: String) -> [String] {
        var fields: [String] = []
        var current = ""
        var escaped = false
        for character in line {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == ":" && fields.count < 4 {
                fields.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        fields.append(current)
        return fields
    }
}

/// What goes wrong with a PostgreSQL store.
public enum PostgresStoreError: CKPortError, Equatable {
    /// The store URL or its password cannot be used.
    case badLocation(String)
    /// The server cannot be reached or refused the connection.
    case unreachable(String)
    /// The server answered an error.
    case server(Message)
    /// The namespace holds something that is not a ckport store, or a store of a format this
    /// ckport does not read.
    case notAStore(String)
    /// The namespace holds no ckport store (nothing, or other tables), and the store was not to
    /// be made.
    case noStore(String)

    public var category: ErrorCategory {
        switch self {
        case .badLocation: .usage
        case .unreachable, .server: .environment
        case .notAStore, .noStore: .invalidInput
        }
    }

    public var description: String { explanation.description }

    public var explanation: Message {
        switch self {
        case .badLocation(let text), .unreachable(let text), .notAStore(let text), .noStore(let text):
            Message(text)
        case .server(let message):
            message
        }
    }
}
