import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

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
            throw CocoaError(
                .fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "ckport-emulator did not say where it listens"])
        }
        url = String(line[range.upperBound...]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// Reads a pipe on a thread of its own until a line satisfies a test, so a caller can stop
/// waiting.
final class LineWaiter: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var line: String?

    init(_ handle: FileHandle, until wanted: @escaping @Sendable (String) -> Bool = { _ in true }) {
        Thread.detachNewThread { [self] in
            var text = ""
            while line == nil {
                let data = handle.availableData
                if data.isEmpty { break }
                text += String(decoding: data, as: UTF8.self)
                while let end = text.firstIndex(of: "\n") {
                    let candidate = String(text[..<end])
                    text = String(text[text.index(after: end)...])
                    if wanted(candidate) {
                        line = candidate
                        break
                    }
                }
            }
            done.signal()
        }
    }

    func firstLine(within seconds: Double) -> String? {
        done.wait(timeout: .now() + seconds) == .success ? line : nil
    }
}

/// A port nothing listens on now.
func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    _ = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

@Suite("ckport pull")
struct PullCommandTests {
    @Test("the emulator's --load names the file and line of a record that is not JSON, and serves nothing")
    func emulatorLoadRefusesBrokenLines() throws {
        let folder = Scratch()
        folder.write("api.txt", "api-1\n")
        folder.write("web.txt", "web-1\n")
        folder.write(
            "bad.jsonl",
            #"{"recordName":"a","recordType":"Note","fields":{}}"# + "\n\n"
                + #"{"recordName":"b","recordType":"Note","fields":{"title":}}"# + "\n")
        let emulator = Process()
        emulator.executableURL = ckportBinary.deletingLastPathComponent().appendingPathComponent("ckport-emulator")
        emulator.arguments = [
            "--container", "iCloud.com.example.Notes", "--api-token-file", "api.txt", "--web-auth-token-file",
            "web.txt", "--load", "bad.jsonl",
        ]
        emulator.currentDirectoryURL = folder.url
        let said = Pipe()
        emulator.standardError = said
        emulator.standardOutput = FileHandle.nullDevice
        try emulator.run()
        let text = String(decoding: said.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        emulator.waitUntilExit()
        #expect(emulator.terminationStatus != 0)
        #expect(
            text.contains("bad.jsonl, line 3") && text.contains("byte 56: unexpected '}'") && !text.contains("Usage"),
            "\(text)")
    }

    @Test(
        "pull from the emulator gives the sample's records, field for field; the next pull fetches nothing; the token file turns over"
    )
    func pullFromEmulator() throws {
        let folder = Scratch()
        folder.write("api.txt", "api-1\n")
        folder.write("web.txt", "web-1\n")
        let emulator = try EmulatorProcess(
            [
                "--container", "iCloud.com.example.Notes", "--api-token-file", "api.txt", "--web-auth-token-file",
                "web.txt",
                "--load", sample("notes", "records.jsonl"), "--page-size", "7",
            ], in: folder.url)
        let pull = [
            "pull", "--base-url", emulator.url, "--container", "iCloud.com.example.Notes", "--database", "private",
            "--api-token-file", "api.txt", "--web-auth-token-file", "web.txt",
        ]
        // No schema yet: refused, with what to do.
        let noStore = try ckport(pull, in: folder.url)
        #expect(noStore.status == 3 || noStore.status == 2, "\(noStore.stderr)")
        #expect(try ckport(["schema", "import", sample("notes", "schema.ckdb")], in: folder.url).status == 0)
        let first = try ckport(pull, in: folder.url)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(
            first.stderr.contains("Notes: 60 records saved, 0 deleted, in 9 pages (change feed)"), "\(first.stderr)")
        #expect(folder.text("web.txt") != "web-1\n" && folder.text("web.txt").hasSuffix("\n"))
        let second = try ckport(pull, in: folder.url)
        #expect(
            second.status == 0 && second.stderr.contains("Notes: 0 records saved, 0 deleted, in 1 page (change feed)"),
            "\(second.stderr)")
        // The records are the sample's, change tags aside (CloudKit gives its own).
        #expect(
            try ckport(
                [
                    "import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl"), "--store", "ref.sqlite",
                    "-q",
                ], in: folder.url
            ).status == 0)
        let pulled = try ckport(["export", "-q"], in: folder.url).stdout
        let reference = try ckport(["export", "--store", "ref.sqlite", "-q"], in: folder.url).stdout
        let untagged = try Regex(#""recordChangeTag":"[^"]*","#)
        #expect(pulled.replacing(untagged, with: "") == reference.replacing(untagged, with: ""))
        #expect(pulled.split(separator: "\n").count == 60)
        // The token file turned over, and says when CloudKit last answered.
        #expect(
            folder.text("web.txt").split(separator: "\n").count == 2
                && folder.text("web.txt").contains("\n# last answer: 20"), "\(folder.text("web.txt"))")
        // An older token of the same sign-in still works (CloudKit's answers show as much).
        folder.write("web.txt", "web-1\n")
        #expect(try ckport(pull, in: folder.url).status == 0)
        // Secrets never come from the command line.
        let bare = try ckport(
            ["pull", "--base-url", emulator.url, "--container", "iCloud.com.example.Notes"], in: folder.url,
            environment: ["CKPORT_CK_API_TOKEN": "", "CKPORT_CK_WEB_AUTH_TOKEN": ""])
        #expect(
            bare.status == 1 && bare.stderr.contains("--api-token-file FILE or $CKPORT_CK_API_TOKEN"), "\(bare.stderr)")
    }
}

@Suite("ckport pull, signed out")
struct PullSignedOutTests {
    @Test(
        "a sign-in past its end: exit status 4, CloudKit's sign-in address, nothing written to the store, the rejects file or the token file"
    )
    func expired() throws {
        let folder = Scratch()
        folder.write("api.txt", "api-1\n")
        folder.write("web.txt", "web-1\n")
        // The sign-in began 31 minutes ago, without "Keep me signed in".
        let emulator = try EmulatorProcess(
            [
                "--container", "iCloud.com.example.Notes", "--api-token-file", "api.txt", "--web-auth-token-file",
                "web.txt",
                "--load", sample("notes", "records.jsonl"), "--signed-in-ago", "1860",
            ], in: folder.url)
        #expect(try ckport(["schema", "import", sample("notes", "schema.ckdb"), "-q"], in: folder.url).status == 0)
        let before = try ckport(["export", "-q"], in: folder.url).stdout
        let pull = try ckport(
            [
                "pull", "--base-url", emulator.url, "--container", "iCloud.com.example.Notes", "--api-token-file",
                "api.txt",
                "--web-auth-token-file", "web.txt", "--rejects", "left-out.jsonl",
            ], in: folder.url)
        #expect(pull.status == 4, "\(pull.stderr)")
        #expect(
            pull.stderr.contains("AUTHENTICATION_REQUIRED")
                && pull.stderr.contains("sign in again with 'ckport cloud login'"), "\(pull.stderr)")
        // CloudKit's sign-in address is quoted, the API token in it hidden.
        #expect(
            pull.stderr.contains("(CloudKit's sign-in page: \(emulator.url)/signin?ckAPIToken=…)")
                && !pull.stderr.contains("api-1"), "\(pull.stderr)")
        #expect(pull.stderr.contains("30 minutes") && pull.stderr.contains("Keep me signed in"), "\(pull.stderr)")
        #expect(try ckport(["export", "-q"], in: folder.url).stdout == before)
        #expect(!FileManager.default.fileExists(atPath: folder.path("left-out.jsonl")))
        #expect(folder.text("web.txt") == "web-1\n")
        #expect(try ckport(["cloud", "status"], in: folder.url).stdout.contains("pulled: nothing yet"))
        // Push stops the same way, before sending anything.
        let push = try ckport(
            [
                "push", "--base-url", emulator.url, "--container", "iCloud.com.example.Notes", "--api-token-file",
                "api.txt",
                "--web-auth-token-file", "web.txt", "--type", "Folder",
            ], in: folder.url)
        #expect(push.status == 4 && push.stderr.contains("AUTHENTICATION_REQUIRED"), "\(push.stderr)")
    }
}

@Suite("ckport push")
struct PushCommandTests {
    @Test(
        "push a store into an empty container, pull it back into another: the same records; pushing again reports EXISTS per record"
    )
    func pushThenPull() throws {
        let folder = Scratch()
        folder.write("api.txt", "api-1\n")
        folder.write("web.txt", "web-1\n")
        let emulator = try EmulatorProcess(
            [
                "--container", "iCloud.com.example.Notes", "--api-token-file", "api.txt", "--web-auth-token-file",
                "web.txt", "--page-size", "25",
            ], in: folder.url)
        let cloud = [
            "--base-url", emulator.url, "--container", "iCloud.com.example.Notes", "--api-token-file", "api.txt",
            "--web-auth-token-file", "web.txt",
        ]
        #expect(
            try ckport(
                [
                    "import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl"), "--store", "src.sqlite",
                    "-q",
                ], in: folder.url
            ).status == 0)
        // A dry run needs no credentials and sends nothing: the token file is not turned over.
        let dry = try ckport(
            [
                "push", "--base-url", emulator.url, "--container", "iCloud.com.example.Notes", "--store", "src.sqlite",
                "--dry-run", "--type", "Folder",
            ], in: folder.url)
        #expect(dry.status == 0 && dry.stderr.contains("would send 4 operations in 1 zone"), "\(dry.stderr)")
        let lines = dry.stdout.split(separator: "\n")
        #expect(
            lines.count == 4
                && lines.allSatisfy {
                    $0.hasPrefix(#"{"operationType":"create","record":{"recordName":"folder-"#)
                        && $0.hasSuffix(#","zoneName":"Notes"}"#)
                })
        #expect(folder.text("web.txt") == "web-1\n")
        // Four notes name an asset whose bytes the store does not hold (the sample keeps its
        // checksum and size only): CloudKit would take it only with an upload's receipt, so
        // those four are not sent, and say why.
        let push = try ckport(["push", "--store", "src.sqlite", "--rejects", "not-sent.jsonl"] + cloud, in: folder.url)
        #expect(push.status == 3, "\(push.stderr)")
        #expect(
            push.stderr.contains("created zone Notes") && push.stderr.contains("Note: 34 saved, 4 not saved")
                && push.stderr.contains("pushed 56 records and 0 deletions"), "\(push.stderr)")
        let notSent = folder.text("not-sent.jsonl").split(separator: "\n")
        #expect(
            notSent.count == 4
                && notSent.allSatisfy {
                    $0.hasPrefix(#"{"error":"NOT_SENT: the store holds no bytes of asset attachment"#)
                })
        // Again: everything is there already; nothing is overwritten, each record is reported.
        let again = try ckport(["push", "--store", "src.sqlite", "--rejects", "rejects.jsonl"] + cloud, in: folder.url)
        #expect(
            again.status == 3 && again.stderr.contains("NoteV1: 0 saved, 18 already there (EXISTS)")
                && again.stderr.contains("turned away 60 records; they are in rejects.jsonl"), "\(again.stderr)")
        let rejected = folder.text("rejects.jsonl").split(separator: "\n")
        #expect(
            rejected.filter {
                $0.hasPrefix(#"{"error":"EXISTS: "#) && $0.contains(#""operation":{"operationType":"create""#)
            }.count == 56)
        #expect(rejected.filter { $0.hasPrefix(#"{"error":"NOT_SENT: "#) }.count == 4)
        // Pulled back into a second store: the same records (CloudKit keeps its own system fields).
        #expect(
            try ckport(
                ["schema", "import", sample("notes", "schema.ckdb"), "--store", "dst.sqlite", "-q"], in: folder.url
            ).status == 0)
        let pull = try ckport(["pull", "--store", "dst.sqlite"] + cloud, in: folder.url)
        #expect(pull.status == 0 && pull.stderr.contains("Notes: 56 records saved"), "\(pull.stderr)")
        let system = try Regex(#""recordChangeTag":"[^"]*",|"(created|modified)":\{[^}]*\},"#)
        let unsent = Set(
            notSent.map { line in String(line.split(separator: #""recordName":""#)[1].prefix { $0 != "\"" }) })
        let original =
            try ckport(["export", "--store", "src.sqlite", "-q"], in: folder.url).stdout.replacing(system, with: "")
            .split(separator: "\n").filter { line in !unsent.contains { line.hasPrefix(#"{"recordName":"\#($0)""#) } }
            .joined(separator: "\n") + "\n"
        let roundTripped = try ckport(["export", "--store", "dst.sqlite", "-q"], in: folder.url).stdout.replacing(
            system, with: "")
        #expect(unsent.count == 4 && original == roundTripped && original.split(separator: "\n").count == 56)
    }
}

@Suite("ckport cloud")
struct CloudCommandTests {
    @Test(
        "cloud login: the sign-in URL, the browser's return to the loopback callback, a checked token kept for the owner alone; cloud status shows it all"
    )
    func loginAndStatus() throws {
        let folder = Scratch()
        folder.write("api.txt", "api-1\n")
        folder.write("someone.txt", "web-of-someone-else\n")
        let port = freePort()
        let emulator = try EmulatorProcess(
            [
                "--container", "iCloud.com.example.Notes", "--api-token-file", "api.txt", "--web-auth-token-file",
                "someone.txt",
                "--load", sample("notes", "records.jsonl"), "--sign-in-callback", "http://127.0.0.1:\(port)/callback",
            ], in: folder.url)
        let cloud = [
            "--base-url", emulator.url, "--container", "iCloud.com.example.Notes", "--api-token-file", "api.txt",
            "--web-auth-token-file", "web.txt",
        ]
        let login = ckportProcess(["cloud", "login", "--port", "\(port)", "--timeout", "30"] + cloud, in: folder.url)
        let said = Pipe()
        login.standardError = said
        login.standardOutput = FileHandle.nullDevice
        try login.run()
        defer { if login.isRunning { kill(login.processIdentifier, SIGKILL) } }
        let line = LineWaiter(said.fileHandleForReading) { $0.contains("/start?state=") }.firstLine(within: 30)
        let signIn = try #require(
            line.map { $0.trimmingCharacters(in: .whitespaces) }, "ckport cloud login printed no sign-in URL")
        #expect(signIn.hasPrefix("http://127.0.0.1:\(port)/start?state="))
        // The browser: it follows the sign-in page's redirect to ckport's callback.
        let page = try fetch(URL(string: signIn)!)
        #expect(page.contains("Signed in"), "\(page)")
        login.waitUntilExit()
        #expect(login.terminationStatus == 0)
        let token = folder.text("web.txt")
        #expect(token.count > 30 && token.hasSuffix("\n"))
        let mode =
            (try FileManager.default.attributesOfItem(atPath: folder.path("web.txt"))[.posixPermissions] as? NSNumber)?
            .intValue
        #expect(mode == 0o600)
        // The token works, and status tells what was pulled.
        #expect(try ckport(["schema", "import", sample("notes", "schema.ckdb"), "-q"], in: folder.url).status == 0)
        #expect(try ckport(["cloud", "status"], in: folder.url).stdout.contains("pulled: nothing yet"))
        let pull = try ckport(["pull", "-q"] + cloud, in: folder.url)
        #expect(pull.status == 0, "\(pull.stderr)")
        let status = try ckport(["cloud", "status", "--check"] + cloud, in: folder.url)
        #expect(status.status == 0, "\(status.stderr)")
        #expect(
            status.stdout.contains("pulled from iCloud.com.example.Notes/development/private:\n  Notes: token "),
            "\(status.stdout)")
        #expect(
            status.stdout.contains("  last pull 20") && status.stdout.contains(": 60 records saved, 0 deleted\n"),
            "\(status.stdout)")
        // The sign-in: when it began, and until when its tokens last (30 minutes, or two weeks
        // with "Keep me signed in": ckport cannot tell which yet).
        #expect(
            status.stdout.contains("  API token: from api.txt\n  web auth token: from web.txt, signed in 20"),
            "\(status.stdout)")
        #expect(
            status.stdout.contains(" from now (or two weeks after the sign-in, with \"Keep me signed in\")"),
            "\(status.stdout)")
        #expect(status.stdout.contains("  signed in: yes (as _user)"), "\(status.stdout)")
        #expect(
            folder.text("web.txt").contains("\n# signed in: 20")
                && folder.text("web.txt").contains("\n# last answer: 20"))
        #expect(status.stdout.contains("    Notes: pulled\n    _defaultZone: read by queries"), "\(status.stdout)")
        #expect(!status.stdout.contains("api-1") && !status.stdout.contains(token.trimmingCharacters(in: .newlines)))
        // Nobody comes back: a clear error, no token file.
        let lonely = try ckport(
            ["cloud", "login", "--port", "\(freePort())", "--timeout", "1", "--web-auth-token-file", "other.txt"]
                + cloud.prefix(6), in: folder.url)
        #expect(
            lonely.status == 3 && lonely.stderr.contains("no sign-in came back")
                && !FileManager.default.fileExists(atPath: folder.path("other.txt")), "\(lonely.stderr)")
    }

    func fetch(_ url: URL) throws -> String {
        nonisolated(unsafe) var text = ""
        let done = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: url) { data, _, _ in
            text = String(decoding: data ?? Data(), as: UTF8.self)
            done.signal()
        }.resume()
        _ = done.wait(timeout: .now() + 30)
        return text
    }
}

@Suite("ckport pull, killed")
struct PullKilledTests {
    static let schema = """
        DEFINE SCHEMA
            RECORD TYPE Note (
                "___recordID" REFERENCE QUERYABLE,
                title         STRING QUERYABLE,
                GRANT WRITE TO "_creator",
                GRANT READ TO "_world"
            );
        """

    /// Signs in as `ckport cloud login` does, with the emulator's sign-in page as the browser.
    func signIn(_ folder: Scratch, port: Int, cloud: [String]) throws {
        let login = ckportProcess(["cloud", "login", "--port", "\(port)", "--timeout", "30"] + cloud, in: folder.url)
        let said = Pipe()
        login.standardError = said
        login.standardOutput = FileHandle.nullDevice
        try login.run()
        defer { if login.isRunning { kill(login.processIdentifier, SIGKILL) } }
        let line = try #require(
            LineWaiter(said.fileHandleForReading) { $0.contains("/start?state=") }.firstLine(within: 30))
        _ = try CloudCommandTests().fetch(URL(string: line.trimmingCharacters(in: .whitespaces))!)
        login.waitUntilExit()
        try #require(login.terminationStatus == 0)
    }

    @Test(
        "kill -9 at any moment: whole pages with their token, or nothing; the next pull fetches only the rest",
        arguments: [150_000, 400_000] as [useconds_t])
    func killed(after delay: useconds_t) throws {
        let folder = Scratch()
        let total = 30_000
        folder.write("api.txt", "api-1\n")
        folder.write("web.txt", "web-1\n")
        folder.write("schema.ckdb", Self.schema)
        folder.write(
            "notes.jsonl",
            (1...total).map { n in
                #"{"recordName":"n-\#(String(format: "%05d", n))","recordType":"Note","zoneID":{"zoneName":"Notes"},"fields":{"title":{"value":"Note \#(n)","type":"STRING"}}}"#
            }.joined(separator: "\n") + "\n")
        let port = freePort()
        let emulator = try EmulatorProcess(
            [
                "--container", "iCloud.com.example.Notes", "--api-token-file", "api.txt", "--web-auth-token-file",
                "web.txt",
                "--load", "notes.jsonl", "--page-size", "50", "--sign-in-callback", "http://127.0.0.1:\(port)/callback",
            ], in: folder.url)
        let cloud = [
            "--base-url", emulator.url, "--container", "iCloud.com.example.Notes", "--api-token-file", "api.txt",
            "--web-auth-token-file", "web.txt",
        ]
        #expect(try ckport(["schema", "import", "schema.ckdb", "-q"], in: folder.url).status == 0)
        let pull = ckportProcess(["pull", "-q"] + cloud, in: folder.url)
        pull.standardError = FileHandle.nullDevice
        try pull.run()
        usleep(delay)
        kill(pull.processIdentifier, SIGKILL)
        pull.waitUntilExit()
        // What the store holds: whole pages, and the token of the last one.
        let held = try ckport(["export", "-q"], in: folder.url).stdout.split(separator: "\n").count
        let status = try ckport(["cloud", "status"], in: folder.url).stdout
        #expect(held % 50 == 0 && held < total, "a killed pull left \(held) records")
        if held > 0 {
            // The emulator's sync tokens name the last change they cover ("zone|epoch|sequence"
            // in base64): the token kept is the one of the last page kept.
            let token = try #require(
                status.split(separator: "\n").first { $0.hasPrefix("  Notes: token ") }.map {
                    String($0.dropFirst(15).prefix { $0 != "," })
                })
            let said = String(decoding: Data(base64Encoded: token) ?? Data(), as: UTF8.self)
            #expect(said.hasPrefix("Notes|") && said.hasSuffix(".0|\(held)"), "\(status)")
        } else {
            #expect(status.contains("pulled: nothing yet"), "\(status)")
        }
        // The token file holds a token of the sign-in (every answer's token works while it lasts).
        let resumed = try ckport(["pull"] + cloud, in: folder.url)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let rest = (total - held).formatted(.number.grouping(.automatic).locale(Locale(identifier: "en_US")))
        #expect(resumed.stderr.contains("Notes: \(rest) records saved"), "held \(held); \(resumed.stderr)")
        let names = try ckport(["export", "-q"], in: folder.url).stdout.split(separator: "\n").map { line in
            String(line.split(separator: ",")[0].dropFirst(#"{"recordName":""#.count).dropLast())
        }
        #expect(names == (1...total).map { "n-\(String(format: "%05d", $0))" })
        #expect(leftoverTemporaries(folder).isEmpty)
    }

    @Test("kill -9 with records left out: each one whose page was saved is already in the rejects file, synced")
    func killedWithRejects() throws {
        let folder = Scratch()
        let total = 30_000
        folder.write("api.txt", "api-1\n")
        folder.write("web.txt", "web-1\n")
        chmod(folder.path("api.txt"), 0o600)
        chmod(folder.path("web.txt"), 0o600)
        folder.write("schema.ckdb", Self.schema)
        // Every hundredth record is of a type the schema lacks.
        folder.write(
            "notes.jsonl",
            (1...total).map { n in
                #"{"recordName":"n-\#(String(format: "%05d", n))","recordType":"\#(n % 100 == 0 ? "Gadget" : "Note")","zoneID":{"zoneName":"Notes"},"fields":{"title":{"value":"Note \#(n)","type":"STRING"}}}"#
            }.joined(separator: "\n") + "\n")
        let emulator = try EmulatorProcess(
            [
                "--container", "iCloud.com.example.Notes", "--api-token-file", "api.txt", "--web-auth-token-file",
                "web.txt",
                "--load", "notes.jsonl", "--page-size", "50",
            ], in: folder.url)
        let cloud = [
            "--base-url", emulator.url, "--container", "iCloud.com.example.Notes", "--api-token-file", "api.txt",
            "--web-auth-token-file", "web.txt",
        ]
        #expect(try ckport(["schema", "import", "schema.ckdb", "-q"], in: folder.url).status == 0)
        let pull = ckportProcess(["pull", "-q", "--rejects", "left-out.jsonl"] + cloud, in: folder.url)
        pull.standardError = FileHandle.nullDevice
        try pull.run()
        // Killed once two pages or more are saved (so that a record left out, every hundredth,
        // is among them), long before the last of 600. (The zone's token says only that records
        // were left out, ckport:left-out: the store's records say how far it got.)
        func savedThrough() throws -> Int? {
            let last = try ckport(["export", "--type", "Note", "-q"], in: folder.url).stdout.split(separator: "\n").last
            return last.flatMap { line in
                line.range(of: #""recordName":"n-"#).flatMap { Int(line[$0.upperBound...].prefix { $0 != "\"" }) }
            }
        }
        for _ in 0..<600 where (try savedThrough() ?? 0) < 100 {
            usleep(20_000)
        }
        kill(pull.processIdentifier, SIGKILL)
        pull.waitUntilExit()
        let status = try ckport(["cloud", "status"], in: folder.url).stdout
        #expect(status.contains("  Notes: records were left out"), "\(status)")
        let saved = try #require(try savedThrough(), "the pull was killed before its first page: \(status)")
        #expect(saved > 0 && saved < total, "\(saved)")
        let rejected = Set(
            folder.text("left-out.jsonl").split(separator: "\n").compactMap { line -> String? in
                guard let range = line.range(of: #""recordName":""#) else { return nil }
                return String(line[range.upperBound...].prefix { $0 != "\"" })
            })
        let expected = Set(stride(from: 100, through: saved, by: 100).map { "n-\(String(format: "%05d", $0))" })
        #expect(
            !expected.isEmpty && expected.isSubset(of: rejected),
            "saved through \(saved); missing \(expected.subtracting(rejected).sorted().prefix(5))")
        // The rest come with the next pull, appended to the same file.
        let resumed = try ckport(["pull", "--rejects", "left-out.jsonl"] + cloud, in: folder.url)
        #expect(resumed.status == 3 && resumed.stderr.contains("left out"), "\(resumed.stderr)")
        let all = folder.text("left-out.jsonl").split(separator: "\n").count
        #expect(all >= total / 100, "\(all)")
        let mode =
            (try FileManager.default.attributesOfItem(atPath: folder.path("left-out.jsonl"))[.posixPermissions]
            as? NSNumber)?.intValue
        #expect(mode == 0o600)
    }

    func leftoverTemporaries(_ folder: Scratch) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder.url.path)) ?? []).filter { $0.hasSuffix(".tmp") }
    }
}
