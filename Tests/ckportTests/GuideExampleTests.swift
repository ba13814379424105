import ArgumentParser
import Foundation
import TestSupport
import Testing

@testable import ckport

/// Every `ckport …` line of the shell examples in README.md, BENCHMARKS.md and docs/ is a
/// command this ckport takes: the command and subcommand exist, every flag and option does,
/// required arguments are there, and the command's own checks of its arguments pass (but for
/// the files an example names, which are on the reader's machine). A flag renamed or a
/// command moved fails here, before a reader finds the guide wrong. The quick start's
/// commands are run, by `scripts/quickstart.sh`.
@Suite("the guides' examples")
struct GuideExampleTests {
    /// The words of a shell command line, as the shell splits them (quotes, backslash escapes),
    /// up to the first pipe, redirection, `&&`, `;` or `&`.
    static func words(_ line: String) -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        var quote: Character?
        var characters = Array(line)
        var index = 0
        func finish() {
            if inWord { words.append(current) }
            current = ""
            inWord = false
        }
        while index < characters.count {
            let c = characters[index]
            if let q = quote {
                if c == q {
                    quote = nil
                } else if c == "\\" && q == "\"" && index + 1 < characters.count {
                    index += 1
                    current.append(characters[index])
                } else {
                    current.append(c)
                }
            } else if c == "'" || c == "\"" {
                quote = c
                inWord = true
            } else if c == "\\" && index + 1 < characters.count {
                index += 1
                current.append(characters[index])
                inWord = true
            } else if c == " " || c == "\t" {
                finish()
            } else if "|<>;&".contains(c) || (c == "#" && !inWord) {
                finish()
                break
            } else {
                current.append(c)
                inWord = true
            }
            index += 1
        }
        if quote == nil { finish() }
        characters.removeAll()
        return words
    }

    /// Each `ckport` command line in the ```sh blocks of a Markdown text, continuations joined,
    /// with the line it starts on.
    static func examples(in text: String) -> [(line: Int, words: [String])] {
        var found: [(Int, [String])] = []
        var inShell = false
        var pending: (line: Int, text: String)?
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(raw)
            if line.hasPrefix("```") {
                inShell = !inShell && (line == "```sh" || line == "```bash" || line == "```shell")
                pending = nil
                continue
            }
            guard inShell else { continue }
            var text = line
            var start = number + 1
            if let earlier = pending {
                text = earlier.text + " " + line.trimmingCharacters(in: .whitespaces)
                start = earlier.line
            }
            if text.hasSuffix("\\") {
                pending = (start, String(text.dropLast()))
                continue
            }
            pending = nil
            var words = Self.words(text.trimmingCharacters(in: .whitespaces))
            // Variables set for the command (`CKPORT_STORE=… ckport …`) come first.
            while let first = words.first, first.contains("="), !first.hasPrefix("-") { words.removeFirst() }
            guard let first = words.first, first == "ckport" || first.hasSuffix("/ckport") else { continue }
            found.append((start, Array(words.dropFirst())))
        }
        return found
    }

    @Test("every ckport command line in README.md, BENCHMARKS.md and docs/ parses as this ckport's command line")
    func examplesParse() throws {
        var checked = 0
        for document in DocumentationLinkTests.documents where document != "docs/cli.md" {
            let text = try String(contentsOf: packageRoot.appendingPathComponent(document), encoding: .utf8)
            for (line, words) in Self.examples(in: text) {
                // A shell variable's value is the reader's ($C, $database in a loop).
                if words.contains(where: { $0.contains("$") }) { continue }
                checked += 1
                do {
                    _ = try CKPortCommand.parseAsRoot(words)
                } catch {
                    // --help and --version are answers, not errors; a file or folder the
                    // example names is on the reader's machine, not here.
                    let message = CKPortCommand.message(for: error)
                    if CKPortCommand.exitCode(for: error) == .success || message.contains("no such") { continue }
                    Issue.record("\(document):\(line): ckport \(words.joined(separator: " ")): \(message)")
                }
            }
        }
        #expect(checked > 60, "only \(checked) examples were found")
    }

    @Test("the example reader splits as a shell does, and stops at a pipe or a comment")
    func splitting() {
        #expect(
            Self.words(#"ckport export --where "a == 'b c'" -o x.jsonl | gzip"#) == [
                "ckport", "export", "--where", "a == 'b c'", "-o", "x.jsonl",
            ])
        #expect(Self.words("ckport stats   # what the store holds") == ["ckport", "stats"])
        #expect(
            Self.examples(
                in:
                    "```sh\nCKPORT_STORE=x.sqlite ckport import a.jsonl \\\n    --mode upsert\nls\n```\n```\nckport not-shell\n```\n"
            ).map(\.words)
                == [["import", "a.jsonl", "--mode", "upsert"]])
    }
}
