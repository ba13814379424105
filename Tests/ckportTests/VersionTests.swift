import Formats
import Foundation
import PostgresStore
import Records
import SQLiteStore
import StoreCore
import Testing

/// One version, everywhere ckport states it: `--version`, the bundles it writes, the library,
/// and the top of CHANGELOG.md.
@Suite("ckport's version")
struct VersionTests {
    @Test(
        "the version is MAJOR.MINOR.PATCH, printed by --version, written into every bundle's manifest, and CHANGELOG.md has an entry for it with the formats it writes"
    )
    func oneVersion() throws {
        let version = CKPortVersion.current
        let parts = version.split(separator: ".", omittingEmptySubsequences: false)
        #expect(
            parts.count == 3
                && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) && ($0 == "0" || !$0.hasPrefix("0")) },
            "\(version)")
        let folder = Scratch()
        let printed = try ckport(["--version"], in: folder.url)
        let lines = printed.stdout.split(separator: "\n").map(String.init)
        #expect(printed.status == 0 && lines.count == 3 && lines[0] == "ckport \(version)", "\(printed.stdout)")
        // The commit (a release build's), or why it is not known; the formats it writes.
        #expect(
            lines[1].range(
                of: #"^commit ([0-9a-f]{12,40}|unknown \(built from source; scripts/release\.sh records it\))$"#,
                options: .regularExpression) != nil, "\(lines)")
        #expect(
            lines[2]
                == "writes SQLite store format \(RecordStore.formatVersion), PostgreSQL store format \(PostgresStore.format), backup bundle format \(BundleManifest.currentFormat)",
            "\(lines)")
        try ckport(
            ["import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl"), "--store", "s.sqlite", "-q"],
            in: folder.url)
        try ckport(["backup", "-o", "b.ckbundle", "--store", "s.sqlite", "-q"], in: folder.url)
        let inspected = try ckport(["inspect", "b.ckbundle"], in: folder.url)
        #expect(inspected.stdout.contains("by ckport \(version) (format 2)"), "\(inspected.stdout)")
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(readme.contains("`ckport --version` (\(version),"))
        // The install commands name this version's archive and package.
        #expect(
            readme.contains("./ckport_\(version)_amd64.deb")
                && readme.contains("ckport-\(version)-linux-x86_64.tar.gz.sha256"))
        let changelog = try String(contentsOf: packageRoot.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let entry = try #require(
            changelog.components(separatedBy: "\n## \(version) — ").dropFirst().first,
            "CHANGELOG.md has no entry for \(version)")
        #expect(
            entry.contains("Formats: store \(RecordStore.formatVersion), bundle \(BundleManifest.currentFormat)."),
            "\(entry.prefix(200))")
        #expect(
            changelog.contains(
                "| \(version)  | \(RecordStore.formatVersion)            | \(PostgresStore.format)                | \(BundleManifest.currentFormat)             |"
            ))
    }
}
