import Foundation
import TestSupport
import Testing

/// The documentation a reader follows link by link: README.md, BENCHMARKS.md and docs/.
@Suite("documentation links")
struct DocumentationLinkTests {
    static var documents: [String] {
        let docs = packageRoot.appendingPathComponent("docs").path
        let guides = ((try? FileManager.default.contentsOfDirectory(atPath: docs)) ?? []).filter { $0.hasSuffix(".md") }
            .sorted().map { "docs/" + $0 }
        return ["README.md", "BENCHMARKS.md"] + guides
    }

    /// GitHub's anchor for a heading: lower case, punctuation other than '-' and '_' dropped,
    /// spaces as '-'.
    static func anchor(_ heading: String) -> String {
        var out = ""
        for character in heading.lowercased() {
            if character == " " {
                out.append("-")
            } else if character.isLetter || character.isNumber || character == "-" || character == "_" {
                out.append(character)
            }
        }
        return out
    }

    /// The anchors of a Markdown file's headings (outside code blocks), numbered as GitHub
    /// numbers repeats (`name`, `name-1`, …).
    static func anchors(of text: String) -> Set<String> {
        var found: Set<String> = []
        var seen: [String: Int] = [:]
        var fenced = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                fenced.toggle()
                continue
            }
            guard !fenced, line.hasPrefix("#"), let space = line.firstIndex(of: " "),
                line[..<space].allSatisfy({ $0 == "#" })
            else { continue }
            let base = anchor(String(line[line.index(after: space)...]))
            let count = seen[base, default: 0]
            seen[base] = count + 1
            found.insert(count == 0 ? base : "\(base)-\(count)")
        }
        return found
    }

    /// Every relative link target `[text](target)` outside code, with its line.
    static func links(in text: String) -> [(line: Int, target: String)] {
        var result: [(Int, String)] = []
        var fenced = false
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.hasPrefix("```") {
                fenced.toggle()
                continue
            }
            guard !fenced else { continue }
            // Inline code is not a link.
            var plain = ""
            var inCode = false
            for character in line {
                if character == "`" {
                    inCode.toggle()
                    continue
                }
                if !inCode { plain.append(character) }
            }
            var rest = plain[...]
            while let open = rest.range(of: "](") {
                let after = rest[open.upperBound...]
                guard let close = after.firstIndex(of: ")") else { break }
                let target = String(after[..<close])
                if !target.contains("://"), !target.hasPrefix("mailto:") { result.append((number + 1, target)) }
                rest = after[close...]
            }
        }
        return result
    }

    @Test("README is short: what ckport is, how to install and start, and where each guide is")
    func readmeIsShort() throws {
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false).count
        #expect(lines <= 250 && lines > 60, "README.md has \(lines) lines")
        for guide in Self.documents where guide.hasPrefix("docs/") && guide != "docs/cli.md" {
            #expect(readme.contains("](\(guide))"), "README does not link \(guide)")
        }
    }

    @Test("every relative link in README.md, BENCHMARKS.md and docs/ reaches a file, and its anchor a heading there")
    func linksResolve() throws {
        var checked = 0
        for document in Self.documents {
            let url = packageRoot.appendingPathComponent(document)
            let text = try String(contentsOf: url, encoding: .utf8)
            for (line, target) in Self.links(in: text) {
                checked += 1
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                let file = String(parts[0])
                let destination =
                    file.isEmpty
                    ? url : url.deletingLastPathComponent().appendingPathComponent(file).standardizedFileURL
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: destination.path, isDirectory: &isDirectory) else {
                    Issue.record("\(document):\(line): \(target): no such file")
                    continue
                }
                if parts.count == 2 {
                    guard !isDirectory.boolValue, let there = try? String(contentsOf: destination, encoding: .utf8)
                    else {
                        Issue.record("\(document):\(line): \(target): an anchor into something that is not a text file")
                        continue
                    }
                    #expect(
                        Self.anchors(of: there).contains(String(parts[1])),
                        "\(document):\(line): \(target): no heading with that anchor")
                }
            }
        }
        #expect(checked > 40, "only \(checked) links were found")
    }

    @Test("the anchor rule: GitHub's, for headings with code, punctuation and repeats")
    func anchorRule() {
        #expect(Self.anchor("`ckport schema import | export | check`") == "ckport-schema-import--export--check")
        #expect(Self.anchor("Several processes, one store") == "several-processes-one-store")
        #expect(Self.anchors(of: "# A\n## A\n```\n# not\n```\n") == ["a", "a-1"])
        #expect(
            Self.links(in: "see [x](docs/a.md#b) and `[y](no.md)` and [z](https://e.org)").map(\.target) == [
                "docs/a.md#b"
            ])
    }
}
