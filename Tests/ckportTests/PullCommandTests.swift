import Foundation
import Testing

/// A ckport-emulator process on a port of its own, stopped when the value goes.
final class EmulatorProcess {
    let process = Process()
    let url: String

    init(_ arguments: [String], in directory: URL) throws {
        process.executableURL = ckportBinary.deletingLastPathComponent().appendingPathComponent("ckport-emulator")
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        // Its first line names the URL; a process that never says it is stopped, not waited for.
        let said = LineWaiter(out.fileHandleForReading)
        guard let line = said.firstLine(within: 30), let range = line.range(of: " on ") else {
            kill(process.processIdentifier, SIGKILL)
            throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "ckport-emulator did not say where it listens"])
        }
        url = String(line[range.upperBound...]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// Reads a pipe's first line on a thread of its own, so a caller can stop waiting.
final class LineWaiter: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var line: String?

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            var text = ""
            while !text.contains("\n") {
                let data = handle.availableData
                if data.isEmpty { break }
                text += String(decoding: data, as: UTF8.self)
            }
            line = text.split(separator: "\n").first.map(String.init)
            done.signal()
        }
    }

    func firstLine(within seconds: Double) -> String? {
        done.wait(timeout: .now() + seconds) == .success ? line : nil
    }
}

@Suite("ckport pull")
struct PullCommandTests {
    @Test("pull from the emulator gives the sample's records, field for field; the next pull fetches nothing; the token file turns over")
    func pullFromEmulator() throws {
        let folder = Scratch()
        folder.write("api.txt", "api-1\n")
        folder.write("web.txt", "web-1\n")
        let emulator = try EmulatorProcess(["--container", "iCloud.com.example.Notes", "--api-token-file", "api.txt", "--web-auth-token-file", "web.txt",
                                            "--load", sample("notes", "records.jsonl"), "--page-size", "7"], in: folder.url)
        let pull = ["pull", "--base-url", emulator.url, "--container", "iCloud.com.example.Notes", "--database", "private",
                    "--api-token-file", "api.txt", "--web-auth-token-file", "web.txt"]
        // No schema yet: refused, with what to do.
        let noStore = try ckport(pull, in: folder.url)
        #expect(noStore.status == 3 || noStore.status == 2, "\(noStore.stderr)")
        #expect(try ckport(["schema", "import", sample("notes", "schema.ckdb")], in: folder.url).status == 0)
        let first = try ckport(pull, in: folder.url)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("Notes: 60 records saved, 0 deleted, in 9 pages (change feed)"), "\(first.stderr)")
        #expect(folder.text("web.txt") != "web-1\n" && folder.text("web.txt").hasSuffix("\n"))
        let second = try ckport(pull, in: folder.url)
        #expect(second.status == 0 && second.stderr.contains("Notes: 0 records saved, 0 deleted, in 1 page (change feed)"), "\(second.stderr)")
        // The records are the sample's, change tags aside (CloudKit gives its own).
        #expect(try ckport(["import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl"), "--store", "ref.sqlite", "-q"], in: folder.url).status == 0)
        let pulled = try ckport(["export", "-q"], in: folder.url).stdout
        let reference = try ckport(["export", "--store", "ref.sqlite", "-q"], in: folder.url).stdout
        let untagged = try Regex(#""recordChangeTag":"[^"]*","#)
        #expect(pulled.replacing(untagged, with: "") == reference.replacing(untagged, with: ""))
        #expect(pulled.split(separator: "\n").count == 60)
        // A spent token: CloudKit's own words, and how to get a new one.
        folder.write("web.txt", "web-1\n")
        let spent = try ckport(pull, in: folder.url)
        #expect(spent.status == 3 && spent.stderr.contains("AUTHENTICATION_REQUIRED"), "\(spent.stderr)")
        // Secrets never come from the command line.
        let bare = try ckport(["pull", "--base-url", emulator.url, "--container", "iCloud.com.example.Notes"], in: folder.url, environment: ["CKPORT_CK_API_TOKEN": "", "CKPORT_CK_WEB_AUTH_TOKEN": ""])
        #expect(bare.status == 1 && bare.stderr.contains("--api-token-file FILE or $CKPORT_CK_API_TOKEN"), "\(bare.stderr)")
    }
}
