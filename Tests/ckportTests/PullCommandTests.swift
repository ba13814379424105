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

@Suite("ckport push")
struct PushCommandTests {
    @Test("push a store into an empty container, pull it back into another: the same records; pushing again reports EXISTS per record")
    func pushThenPull() throws {
        let folder = Scratch()
        folder.write("api.txt", "api-1\n")
        folder.write("web.txt", "web-1\n")
        let emulator = try EmulatorProcess(["--container", "iCloud.com.example.Notes", "--api-token-file", "api.txt", "--web-auth-token-file", "web.txt", "--page-size", "25"], in: folder.url)
        let cloud = ["--base-url", emulator.url, "--container", "iCloud.com.example.Notes", "--api-token-file", "api.txt", "--web-auth-token-file", "web.txt"]
        #expect(try ckport(["import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl"), "--store", "src.sqlite", "-q"], in: folder.url).status == 0)
        // A dry run needs no credentials and sends nothing: the token file is not turned over.
        let dry = try ckport(["push", "--base-url", emulator.url, "--container", "iCloud.com.example.Notes", "--store", "src.sqlite", "--dry-run", "--type", "Folder"], in: folder.url)
        #expect(dry.status == 0 && dry.stderr.contains("would send 4 operations in 1 zone"), "\(dry.stderr)")
        let lines = dry.stdout.split(separator: "\n")
        #expect(lines.count == 4 && lines.allSatisfy { $0.hasPrefix(#"{"operationType":"create","record":{"recordName":"folder-"#) && $0.hasSuffix(#","zoneName":"Notes"}"#) })
        #expect(folder.text("web.txt") == "web-1\n")
        let push = try ckport(["push", "--store", "src.sqlite"] + cloud, in: folder.url)
        #expect(push.status == 0, "\(push.stderr)")
        #expect(push.stderr.contains("created zone Notes") && push.stderr.contains("Note: 38 saved") && push.stderr.contains("pushed 60 records and 0 deletions"), "\(push.stderr)")
        // Again: everything is there already; nothing is overwritten, each record is reported.
        let again = try ckport(["push", "--store", "src.sqlite", "--rejects", "rejects.jsonl"] + cloud, in: folder.url)
        #expect(again.status == 3 && again.stderr.contains("NoteV1: 0 saved, 18 already there (EXISTS)") && again.stderr.contains("turned away 60 records; they are in rejects.jsonl"), "\(again.stderr)")
        let rejected = folder.text("rejects.jsonl").split(separator: "\n")
        #expect(rejected.count == 60 && rejected.allSatisfy { $0.hasPrefix(#"{"error":"EXISTS: "#) && $0.contains(#""operation":{"operationType":"create""#) })
        // Pulled back into a second store: the same records (CloudKit keeps its own system fields).
        #expect(try ckport(["schema", "import", sample("notes", "schema.ckdb"), "--store", "dst.sqlite", "-q"], in: folder.url).status == 0)
        let pull = try ckport(["pull", "--store", "dst.sqlite"] + cloud, in: folder.url)
        #expect(pull.status == 0 && pull.stderr.contains("Notes: 60 records saved"), "\(pull.stderr)")
        let system = try Regex(#""recordChangeTag":"[^"]*",|"(created|modified)":\{[^}]*\},"#)
        let original = try ckport(["export", "--store", "src.sqlite", "-q"], in: folder.url).stdout.replacing(system, with: "")
        let roundTripped = try ckport(["export", "--store", "dst.sqlite", "-q"], in: folder.url).stdout.replacing(system, with: "")
        #expect(original == roundTripped && original.split(separator: "\n").count == 60)
    }
}
