import Foundation

/// The S3 server the tests use: `CKPORT_TEST_S3`, the endpoint of a throwaway SeaweedFS that
/// checks signatures, and `CKPORT_TEST_S3_DIR`, the folder `scripts/seaweedfs.sh` keeps its keys
/// in (`credentials`: may do everything; `read-only-credentials`: may read and list). The
/// README's test command starts it. Outside CI, tests that need it are skipped without it; in
/// CI (`CI` set) they run, and fail when it is missing.
public enum S3TestServer {
    public static var endpoint: URL? {
        ProcessInfo.processInfo.environment["CKPORT_TEST_S3"].flatMap(URL.init(string:))
    }
    public static var enabled: Bool { endpoint != nil || ProcessInfo.processInfo.environment["CI"] != nil }

    /// The keys of `file` in the server's folder (`credentials`, `read-only-credentials`):
    /// (access key ID, secret).
    public static func keys(_ file: String = "credentials") throws -> (id: String, secret: String) {
        try keys(in: "CKPORT_TEST_S3_DIR", file)
    }

    /// moto's S3 server, the second implementation (`CKPORT_TEST_MOTO`, its key in
    /// `CKPORT_TEST_MOTO_DIR/credentials`), started by the README's test command beside
    /// SeaweedFS; required where SeaweedFS is.
    public static var motoEndpoint: URL? {
        ProcessInfo.processInfo.environment["CKPORT_TEST_MOTO"].flatMap(URL.init(string:))
    }

    public static func motoKeys() throws -> (id: String, secret: String) { try keys(in: "CKPORT_TEST_MOTO_DIR") }

    /// The AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY lines of `file` in the folder the
    /// environment variable `folder` names.
    static func keys(in folder: String, _ file: String = "credentials") throws -> (id: String, secret: String) {
        guard let folder = ProcessInfo.processInfo.environment[folder] else { throw S3TestServerMissing() }
        var values: [String: String] = [:]
        for line in try String(contentsOfFile: folder + "/" + file, encoding: .utf8).split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { values[parts[0]] = parts[1] }
        }
        guard let id = values["AWS_ACCESS_KEY_ID"], let secret = values["AWS_SECRET_ACCESS_KEY"] else {
            throw S3TestServerMissing()
        }
        return (id, secret)
    }

    /// A bucket name of its own, for one test.
    public static func bucket(_ tag: String) -> String { "t-\(tag)-\(UUID().uuidString.prefix(8).lowercased())" }
}

public struct S3TestServerMissing: Error, CustomStringConvertible {
    public init() {}
    public var description: String {
        "CI runs the object storage tests: set CKPORT_TEST_S3 and CKPORT_TEST_S3_DIR (see scripts/seaweedfs.sh), and CKPORT_TEST_MOTO and CKPORT_TEST_MOTO_DIR (scripts/moto.sh)"
    }
}
