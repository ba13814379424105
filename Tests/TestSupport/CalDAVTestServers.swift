import Foundation

/// The CalDAV servers the tests publish to and pull from, started by the README's test command
/// (`scripts/caldav-server.sh`): Radicale (`CKPORT_TEST_RADICALE`, its user and password in
/// `CKPORT_TEST_RADICALE_DIR/user` and `/password`) and Xandikos (`CKPORT_TEST_XANDIKOS`, no
/// authentication; its calendar home is /user/calendars/), with the python `caldav` client in
/// the venv `CKPORT_TEST_VENV`. Outside CI, tests that need them are skipped without them; in
/// CI (`CI` set) they run, and fail when they are missing.
public enum CalDAVTestServers {
    public enum Server: String, CaseIterable, Sendable, CustomStringConvertible {
        case radicale, xandikos
        public var description: String { rawValue }

        /// The server's root.
        public var url: URL? {
            ProcessInfo.processInfo.environment["CKPORT_TEST_\(rawValue.uppercased())"].flatMap(URL.init(string:))
        }

        /// Where a test's own calendar goes: the account's calendar home and a name of its own.
        public func newCalendar(_ tag: String) throws -> URL {
            guard let url else { throw CalDAVTestServerMissing() }
            let name = "t-\(tag)-\(UUID().uuidString.prefix(8).lowercased())/"
            switch self {
            case .radicale: return URL(string: "\(try user() ?? "")/\(name)", relativeTo: url)!.absoluteURL
            case .xandikos: return URL(string: "user/calendars/\(name)", relativeTo: url)!.absoluteURL
            }
        }

        /// The user to sign in as (Radicale's), or nil.
        public func user() throws -> String? {
            guard self == .radicale else { return nil }
            guard let folder = ProcessInfo.processInfo.environment["CKPORT_TEST_RADICALE_DIR"] else {
                throw CalDAVTestServerMissing()
            }
            return try String(contentsOfFile: folder + "/user", encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines)
        }

        /// The file holding the password (Radicale's), or nil.
        public var passwordFile: String? {
            guard self == .radicale else { return nil }
            return ProcessInfo.processInfo.environment["CKPORT_TEST_RADICALE_DIR"].map { $0 + "/password" }
        }
    }

    public static var enabled: Bool {
        Server.allCases.allSatisfy { $0.url != nil } || ProcessInfo.processInfo.environment["CI"] != nil
    }

    /// The python of the venv that holds the `caldav` client and vdirsyncer.
    public static var python: String {
        (ProcessInfo.processInfo.environment["CKPORT_TEST_VENV"] ?? (NSHomeDirectory() + "/.cache/ckport-test-venv"))
            + "/bin/python"
    }
}

public struct CalDAVTestServerMissing: Error, CustomStringConvertible {
    public init() {}
    public var description: String {
        "CI runs the CalDAV tests: set CKPORT_TEST_RADICALE, CKPORT_TEST_RADICALE_DIR and CKPORT_TEST_XANDIKOS (see scripts/caldav-server.sh)"
    }
}
