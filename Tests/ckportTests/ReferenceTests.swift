import ArgumentParser
import Foundation
import Testing

@testable import ckport

/// docs/cli.md is the command tree's own help, command by command: a flag added, renamed or
/// explained anew changes it. `scripts/cli-reference.sh` writes it again.
@Suite("command-line reference")
struct ReferenceTests {
    /// Every command under `root`, as its words after `ckport` and its type.
    static func commands(_ root: ParsableCommand.Type, path: [String] = []) -> [([String], ParsableCommand.Type)] {
        let name = root.configuration.commandName ?? String(describing: root).lowercased()
        let here = path + [name]
        return [(here, root)] + root.configuration.subcommands.flatMap { commands($0, path: here) }
    }

    static func reference() -> String {
        var text = """
            # ckport command reference

            The help of every command, as `ckport COMMAND --help` prints it. Written by
            `scripts/cli-reference.sh` from the command tree; a test checks that it is current.
            Shell completion: `ckport --generate-completion-script bash` (or `zsh`, `fish`); see
            README's "Shell completion".


            """
        for (words, command) in commands(CKPortCommand.self) {
            text += "## \(words.joined(separator: " "))\n\n```\n"
            text += CKPortCommand.helpMessage(for: command, columns: 100).trimmingCharacters(
                in: .whitespacesAndNewlines)
            text += "\n```\n\n"
        }
        return text
    }

    @Test("docs/cli.md holds the help of every command, as the commands say it now")
    func referenceIsCurrent() throws {
        let path = packageRoot.appendingPathComponent("docs/cli.md").path
        let current = Self.reference()
        if ProcessInfo.processInfo.environment["CKPORT_WRITE_REFERENCE"] == "1" {
            // scripts/cli-reference.sh writes the file through this test; that is not a check,
            // and CI, which checks, never writes.
            #expect(
                ProcessInfo.processInfo.environment["CI"] == nil,
                "CKPORT_WRITE_REFERENCE=1 in CI would pass by writing what it compares")
            try current.write(toFile: path, atomically: true, encoding: .utf8)
            return
        }
        let committed = try String(contentsOfFile: path, encoding: .utf8)
        #expect(committed == current, "docs/cli.md is out of date: run scripts/cli-reference.sh")
        // Every command and subcommand has its section, and the sections name real flags.
        let words = Self.commands(CKPortCommand.self).map { $0.0.joined(separator: " ") }
        #expect(words.count >= 20 && words.contains("ckport migrate apply") && words.contains("ckport schema diff"))
        for command in words { #expect(committed.contains("## \(command)\n"), "\(command)") }
        #expect(committed.contains("--mapping <file>") && committed.contains("--rename-zone <old=new>"))
    }

    @Test("shell completion scripts come from the same tree")
    func completions() throws {
        for shell in ["bash", "zsh", "fish"] {
            let run = try ckport(["--generate-completion-script", shell], in: FileManager.default.temporaryDirectory)
            #expect(run.status == 0, "\(shell): \(run.stderr)")
            for word in ["import", "restore", "migrate", "rename-zone", "mapping", "spreadsheet-safe"] {
                #expect(run.stdout.contains(word), "\(shell) completion lacks \(word)")
            }
        }
    }
}
