import Foundation

/// The PostgreSQL server the tests use: `CKPORT_TEST_POSTGRES`, a store URL whose password is in
/// `PGPASSWORD`, as `.ci/run` sets them after starting a throwaway cluster
/// (`scripts/postgres-cluster.sh`). Outside CI, tests that need it are skipped without it; in CI
/// (`CI` set) they run, and fail when it is missing.
public enum PostgresTestServer {
    public static var url: String? { ProcessInfo.processInfo.environment["CKPORT_TEST_POSTGRES"] }
    public static var enabled: Bool { url != nil || ProcessInfo.processInfo.environment["CI"] != nil }

    /// The authority that signed the test server's certificate (`CKPORT_TEST_POSTGRES_CA`:
    /// `scripts/postgres-cluster.sh` writes it to DIR/ca.crt), for the tests of TLS.
    public static var authority: String? { ProcessInfo.processInfo.environment["CKPORT_TEST_POSTGRES_CA"] }

    /// A store URL in a namespace of its own, for one test; nil (and the test fails) when no
    /// server is configured.
    public static func store(_ tag: String) -> String? {
        guard let url else { return nil }
        return url + (url.contains("?") ? "&" : "?") + "schema=t_\(tag)_\(UUID().uuidString.prefix(8).lowercased())"
    }
}
