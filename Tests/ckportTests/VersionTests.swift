import Foundation
import Formats
import PostgresStore
import Records
import Store
import Testing

/// One version, everywhere ckport states it: `--version`, the bundles it writes, the library,
/// and the top of CHANGELOG.md.
@Suite("ckport's version")
struct VersionTests {
    @Test("the version is MAJOR.MINOR.PATCH, printed by --version, written into every bundle's manifest, and CHANGELOG.md has an entry for it with the formats it writes")
    func oneVersion() throws {
        let version = CKPortVersion.current
        let parts = version.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) && ($0 == "0" || !$0.hasPrefix("0")) }, "\(version)")
        let folder = Scratch()
        let printed = try ckport(["--version"], in: folder.url)
        #expect(printed.status == 0 && printed.stdout == version + "\n")
        try ckport(["import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl"), "--store", "s.sqlite", "-q"], in: folder.url)
        try ckport(["backup", "-o", "b.ckbundle", "--store", "s.sqlite", "-q"], in: folder.url)
        let inspected = try ckport(["inspect", "b.ckbundle"], in: folder.url)
        #expect(inspected.stdout.contains("by ckport \(version) (format 2)"), "\(inspected.stdout)")
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(readme.contains("`ckport --version` (\(version))"))
        let changelog = try String(contentsOf: packageRoot.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let entry = try #require(changelog.components(separatedBy: "\n## \(version) — ").dropFirst().first, "CHANGELOG.md has no entry for \(version)")
        #expect(entry.contains("Formats: store \(RecordStore.formatVersion), bundle \(BundleManifest.currentFormat)."), "\(entry.prefix(200))")
        #expect(changelog.contains("| \(version)  | \(RecordStore.formatVersion)            | \(PostgresStore.format)                | \(BundleManifest.currentFormat)             |"))
    }
}
