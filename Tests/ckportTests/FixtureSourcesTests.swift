import Foundation
import TestSupport
import Testing

/// Every fixture says where it comes from: each folder of test fixtures holds a SOURCES file
/// (`SOURCES.md` or `SOURCES.tsv`) that names each of its files, so a reader can tell what was
/// observed (another program's output, a specification's example, a public capture) from what
/// was written here.
@Suite("fixture sources")
struct FixtureSourcesTests {
    /// The folders of fixtures: every folder under Tests/Fixtures, Tests/*/Fixtures and the
    /// schema corpus that holds files (a Core Data model folder is one fixture, named by its
    /// parent).
    static func folders() -> [URL] {
        let tests = packageRoot.appendingPathComponent("Tests")
        var roots = [tests.appendingPathComponent("Fixtures"), tests.appendingPathComponent("StoreTests/SchemaCorpus")]
        for target in (try? FileManager.default.contentsOfDirectory(atPath: tests.path)) ?? [] {
            let fixtures = tests.appendingPathComponent(target).appendingPathComponent("Fixtures")
            if target != "Fixtures", FileManager.default.fileExists(atPath: fixtures.path) { roots.append(fixtures) }
        }
        var found: [URL] = []
        func walk(_ folder: URL) {
            guard !["xcdatamodel", "xcdatamodeld"].contains(folder.pathExtension),
                folder.lastPathComponent != "LICENSES"
            else { return }
            let entries = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).sorted()
            var hasFiles = false
            for entry in entries {
                var isFolder: ObjCBool = false
                _ = FileManager.default.fileExists(
                    atPath: folder.appendingPathComponent(entry).path, isDirectory: &isFolder)
                if isFolder.boolValue { walk(folder.appendingPathComponent(entry)) } else { hasFiles = true }
            }
            if hasFiles { found.append(folder) }
        }
        roots.forEach(walk)
        return found
    }

    @Test("every fixture folder has a SOURCES file that names each of its files and folders")
    func everyFolder() throws {
        let folders = Self.folders()
        #expect(folders.count >= 12, "only \(folders.count) fixture folders found")
        for folder in folders {
            let name = folder.path.replacingOccurrences(of: packageRoot.path + "/", with: "")
            let sources = ["SOURCES.md", "SOURCES.tsv"].map { folder.appendingPathComponent($0) }.first {
                FileManager.default.fileExists(atPath: $0.path)
            }
            guard let sources else {
                Issue.record("\(name) has no SOURCES.md or SOURCES.tsv")
                continue
            }
            let text = try String(contentsOf: sources, encoding: .utf8)
            let entries = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { entry in
                !entry.hasPrefix("SOURCES.") && !entry.hasPrefix("LICENSE")
                    && !["README.md", "FACTS.md"].contains(entry)
            }
            for entry in entries where !text.contains(entry) {
                Issue.record("\(name)/\(sources.lastPathComponent) does not say where \(entry) comes from")
            }
        }
    }
}
