import Foundation
import TestSupport
import Testing

/// Every shell example of README.md and the guides in docs/ that runs ckport is run, as a
/// reader would paste it, in a folder of its own: with `set -e`, so a command that fails fails
/// the example. What the reader already has (a store of a sample app, a backup, a calendar
/// file, a CloudKit container, a PostgreSQL server) is set up first by the scene the Markdown
/// names in a comment just above the block (`<!-- example: SCENE -->`); the scenes are shell
/// functions in `Tests/Fixtures/guides/scenes.sh`. A block that cannot run here says why
/// instead (`<!-- example: not run, REASON -->`). What stands in for the reader's machine —
/// their server's name, their folders — is replaced as the table below says, and nothing else
/// of a block is changed.
@Suite("the guides' examples, run", .serialized)
struct GuideRunTests {
    /// A shell block of a Markdown text that runs ckport.
    struct Block {
        var line: Int
        /// The scene named above it; nil when none is named, "not run, …" when it is not run.
        var scene: String?
        var text: String
        /// `<!-- example: SCENE; unchanged -->` (or `unchanged=STORE`): the block must leave the
        /// store's records as they were, byte for byte in its export (default `ckport.sqlite`).
        var unchanged: String?
        /// `<!-- check: COMMAND -->` lines just below the block: shell tests of the data after
        /// it (counts, zones, owners), each of which must succeed.
        var checks: [String] = []
    }

    /// `<!-- NAME: VALUE -->` on a line of its own: VALUE, else nil.
    static func directive(_ name: String, _ line: String) -> String? {
        let line = line.trimmingCharacters(in: .whitespaces)
        guard line.hasPrefix("<!-- \(name):"), line.hasSuffix("-->") else { return nil }
        return line.dropFirst("<!-- \(name):".count).dropLast(3).trimmingCharacters(in: .whitespaces)
    }

    static func blocks(in markdown: String) -> [Block] {
        var found: [Block] = []
        var current: Block?
        var previous = ""
        var checking: Int?
        var skipping = false
        for (number, raw) in markdown.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(raw)
            defer { if !line.isEmpty { previous = line } }
            if let index = checking {
                if let check = directive("check", line) {
                    found[index].checks.append(check)
                    continue
                }
                checking = nil
            }
            if line.hasPrefix("```") {
                if let block = current {
                    if !GuideExampleTests.examples(in: "```sh\n" + block.text + "```\n").isEmpty {
                        found.append(block)
                        checking = found.count - 1
                    }
                    current = nil
                } else if line == "```sh" || line == "```bash" || line == "```shell" {
                    // A scene's own block (`<!-- scene: NAME -->`) sets the scene up; it is not an example.
                    if directive("scene", previous) != nil {
                        current = nil
                        skipping = true
                        continue
                    }
                    var block = Block(line: number + 1, scene: nil, text: "")
                    if let value = directive("example", previous) {
                        let parts = value.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
                        block.scene = parts[0]
                        for part in parts.dropFirst() where part.hasPrefix("unchanged") {
                            block.unchanged =
                                part.contains("=")
                                ? String(part.split(separator: "=", maxSplits: 1)[1]) : "ckport.sqlite"
                        }
                    }
                    current = block
                }
                if skipping { skipping = false }
                continue
            }
            if skipping { continue }
            current?.text += line + "\n"
        }
        return found
    }

    /// The scenes a Markdown text sets up itself: `<!-- scene: NAME -->` above a shell block,
    /// the commands a reader runs to have what the examples of that scene start from.
    static func sceneBlocks(in markdown: String) -> [String: String] {
        var scenes: [String: String] = [:]
        var name: String?
        var text = ""
        var previous = ""
        for raw in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = String(raw)
            defer { if !line.isEmpty { previous = line } }
            if line.hasPrefix("```") {
                if let open = name {
                    scenes[open] = text
                    name = nil
                } else if let scene = directive("scene", previous), line == "```sh" {
                    name = scene
                    text = ""
                }
                continue
            }
            if name != nil { text += line + "\n" }
        }
        return scenes
    }

    /// Scenes that stand for the reader's machine rather than files a guide makes: the package's
    /// folder, and what `scripts/quickstart.sh` leaves. Every other scene a guide names is one
    /// it shows (`<!-- scene: NAME -->`), so that every file an example uses is made by a step
    /// the reader sees.
    static let machineScenes: Set<String> = ["repo", "quickstart"]

    /// README.md and the guides (docs/cli.md is generated from `--help`).
    static var guides: [String] {
        DocumentationLinkTests.documents.filter { $0 != "docs/cli.md" && $0 != "BENCHMARKS.md" }
    }

    /// The test server's URL without its query (`CKPORT_TEST_POSTGRES`).
    static let postgres: String =
        ProcessInfo.processInfo.environment["CKPORT_TEST_POSTGRES"].map { String($0.split(separator: "?")[0]) } ?? ""

    /// What stands for the reader's machine in a guide, and what stands for it here: their
    /// server and folders.
    static let replacements: [(document: String, from: String, to: String)] = [
        ("docs/postgresql.md", "export PGPASSWORD=…", "# PGPASSWORD is set for the test server"),
        ("docs/postgresql.md", "postgresql://ckport@db.example:5432/mirror", postgres),
        ("docs/browsing.md", "postgresql://me@db.example/ckport", postgres),
        ("docs/cloudkit.md", "/srv/backups", "$PWD/srv/backups"),
        (
            "docs/cloudkit.md", "--container iCloud.com.example.App",
            "--base-url $GUIDE_CLOUDKIT --container iCloud.com.example.App"
        ),
        ("docs/import-export.md", "--records 1000000", "--records 2000"),
        // The reader's CalDAV account is Radicale's (scenes.sh's machine_caldav), the calendars
        // this run's own.
        ("docs/calendars.md", "https://dav.example.org/", "$CKPORT_TEST_RADICALE"),
        ("docs/calendars.md", "--user anna", "--user \"$GUIDE_CALDAV_USER\""),
        ("docs/calendars.md", "~/.config/ckport/dav-password", "\"$CKPORT_TEST_RADICALE_DIR/password\""),
        ("docs/calendars.md", "--calendar family-school", "--calendar \"$GUIDE_CALDAV_NAME-school\""),
        ("docs/calendars.md", "--calendar family", "--calendar \"$GUIDE_CALDAV_NAME\""),
        // The reader's S3 server is SeaweedFS (CKPORT_TEST_S3); the bucket is the run's own
        // (scenes.sh's machine_s3), and "last Tuesday" is after the snapshot just made.
        ("docs/backup-and-restore.md", "https://nas.local:9000", "$CKPORT_TEST_S3"),
        ("docs/backup-and-restore.md", "s3://family-backups/", "s3://$GUIDE_S3_BUCKET/"),
        ("docs/backup-and-restore.md", "--at \"2026-11-24 18:00\"", "--at \"2999-01-01 00:00\""),
        // The reader's remote is a folder of the scene, through the rclone the tests installed.
        (
            "docs/backup-and-restore.md",
            "RCLONE_CONFIG_NAS_TYPE=sftp RCLONE_CONFIG_NAS_HOST=nas.local RCLONE_CONFIG_NAS_USER=family",
            "RCLONE_CONFIG_NAS_TYPE=local CKPORT_RCLONE=\"$CKPORT_TEST_RCLONE\" RCLONE_CONFIG=/dev/null"
        ),
    ]

    @Test(
        "every example of README.md and docs/ that runs ckport runs, in the scene named above it, and leaves the data as the guide says",
        arguments: guides)
    func run(_ document: String) throws {
        let text = try String(contentsOf: packageRoot.appendingPathComponent(document), encoding: .utf8)
        let blocks = Self.blocks(in: text)
        let scenes = Self.sceneBlocks(in: text)
        for block in blocks {
            guard let scene = block.scene else {
                Issue.record(
                    "\(document):\(block.line): an example without a scene: name one above it (<!-- example: SCENE -->, Tests/Fixtures/guides/scenes.sh)"
                )
                continue
            }
            if scene.hasPrefix("not run") {
                #expect(
                    scene.count > "not run, ".count + 10, "\(document):\(block.line): say why the example is not run")
                continue
            }
            // As the PostgreSQL store's own tests: run where a server is given, and always in CI.
            if ["browsing", "postgresql"].contains(scene) && Self.postgres.isEmpty
                && ProcessInfo.processInfo.environment["CI"] == nil
            {
                continue
            }
            if scene == "s3" && !S3TestServer.enabled { continue }
            if scene == "caldav" && !CalDAVTestServers.enabled { continue }
            // rclone is the tests' own (the README's test command installs it; CI always has it).
            if scene == "rclone" && ProcessInfo.processInfo.environment["CKPORT_TEST_RCLONE"] == nil
                && ProcessInfo.processInfo.environment["CI"] == nil
            {
                continue
            }
            let setup = scenes[scene]
            if setup == nil && !Self.machineScenes.contains(scene) {
                Issue.record(
                    "\(document):\(block.line): scene \(scene) is not shown in \(document): show the reader how to make what the example starts from (<!-- scene: \(scene) --> above a shell block)"
                )
                continue
            }
            let result = try Self.runScript(
                Self.replaced(block.text, in: document), scene: scene,
                setup: setup.map { Self.replaced($0, in: document) },
                unchanged: block.unchanged, checks: block.checks)
            #expect(
                result.status == 0,
                "\(document):\(block.line) (scene \(scene)) ended with \(result.status):\n\(result.output)")
        }
    }

    /// A guide's text with what stands for the reader's machine replaced (``replacements``).
    static func replaced(_ text: String, in document: String) -> String {
        var script = text
        for replacement in replacements where replacement.document == document {
            script = script.replacingOccurrences(of: replacement.from, with: replacement.to)
        }
        return script
    }

    @Test(
        "every scene a guide names is one it shows, or the reader's machine; the blocks that must change nothing say so"
    )
    func scenesShown() throws {
        var unchanged = 0
        var checks = 0
        for document in Self.guides {
            let text = try String(contentsOf: packageRoot.appendingPathComponent(document), encoding: .utf8)
            let scenes = Self.sceneBlocks(in: text)
            for block in Self.blocks(in: text) + Self.transcripts(in: text) {
                guard let scene = block.scene, !scene.hasPrefix("not run") else { continue }
                #expect(
                    scenes[scene] != nil || Self.machineScenes.contains(scene),
                    "\(document):\(block.line): scene \(scene) is not shown in the guide")
                if block.unchanged != nil { unchanged += 1 }
                checks += block.checks.count
            }
        }
        // The round trips the guides show (calendar, xCal, property list, spreadsheet) and
        // checks of counts, zones and owners after the blocks that change the store.
        #expect(unchanged >= 4, "only \(unchanged) blocks are checked to change nothing")
        #expect(checks >= 12, "only \(checks) checks of the data after a block")
    }

    @Test("the guides have examples to run, and every one of them is run")
    func counted() throws {
        var run = 0
        var notRun: [String] = []
        for document in Self.guides {
            let text = try String(contentsOf: packageRoot.appendingPathComponent(document), encoding: .utf8)
            for block in Self.blocks(in: text) {
                if block.scene?.hasPrefix("not run") == true {
                    notRun.append("\(document):\(block.line)")
                } else {
                    run += 1
                }
            }
        }
        #expect(run >= 22, "only \(run) examples")
        #expect(notRun.isEmpty, "not run: \(notRun)")
    }

    /// A transcript in a guide: a plain block whose commands start with `$ ckport`, each
    /// followed by what it prints.
    static func transcripts(in markdown: String) -> [Block] {
        var found: [Block] = []
        var current: Block?
        var indent = 0
        var inFence = false
        var previous = ""
        for (number, raw) in markdown.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(raw)
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            defer { if !trimmed.isEmpty { previous = trimmed } }
            if trimmed.hasPrefix("```") {
                defer { inFence.toggle() }
                if inFence {
                    if let block = current,
                        block.text.split(separator: "\n").contains(where: { $0.hasPrefix("$ ckport ") })
                    {
                        found.append(block)
                    }
                    current = nil
                } else if trimmed == "```" {
                    var scene: String?
                    if previous.hasPrefix("<!-- example:"), previous.hasSuffix("-->") {
                        scene = previous.dropFirst("<!-- example:".count).dropLast(3).trimmingCharacters(
                            in: .whitespaces)
                    }
                    indent = line.prefix { $0 == " " }.count
                    current = Block(line: number + 1, scene: scene, text: "")
                }
                continue
            }
            current?.text += String(line.dropFirst(min(indent, line.prefix { $0 == " " }.count))) + "\n"
        }
        return found
    }

    /// What differs from run to run, made the same: durations, rates, times, sizes, store IDs.
    static func steady(_ text: String) -> String {
        var out = text
        for (pattern, replacement) in [
            (#"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"#, "<time>"), (#"\d+(\.\d+)? s\b"#, "<n> s"),
            (#"\([\d,]+/s\)"#, "(<rate>)"), (#"[\d.]+ (KB|MB|GB|bytes)"#, "<size>"),
            (#"ck1-[0-9a-f]{12}-"#, "ck1-<store>-"),
        ] {
            out = out.replacingOccurrences(of: pattern, with: replacement, options: .regularExpression)
        }
        // A blank line a guide puts before the next command, for the eye, is not output.
        var lines: [String] = []
        for line in out.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = line.replacingOccurrences(of: #"\s+$"#, with: "", options: .regularExpression)
            if line.hasPrefix("$ "), lines.last == "" { lines.removeLast() }
            lines.append(line)
        }
        return lines.joined(separator: "\n").trimmingCharacters(in: .newlines)
    }

    @Test(
        "every transcript in the guides (`$ ckport …` and what it prints) prints what it shows, but for times, sizes and store IDs",
        arguments: guides)
    func transcript(_ document: String) throws {
        let text = try String(contentsOf: packageRoot.appendingPathComponent(document), encoding: .utf8)
        for block in Self.transcripts(in: text) {
            let scene = try #require(
                block.scene,
                "\(document):\(block.line): a transcript without a scene: name one above it (<!-- example: SCENE -->)")
            var script = ""
            for line in block.text.split(separator: "\n") where line.hasPrefix("$ ") {
                let command = String(line.dropFirst(2))
                // Line by line, as a terminal shows standard output and error together.
                script += "echo \(Self.singleQuoted("$ " + command))\nstdbuf -oL -eL \(command) 2>&1 || true\n"
            }
            let result = try Self.runScript(
                script, scene: scene, setup: Self.sceneBlocks(in: text)[scene].map { Self.replaced($0, in: document) },
                trace: false)
            #expect(result.status == 0, "\(document):\(block.line): \(result.output)")
            let shown = Self.steady(block.text)
            let printed = Self.steady(result.output)
            #expect(printed == shown, "\(document):\(block.line) (scene \(scene)) printed:\n\(result.output)")
        }
    }

    static func singleQuoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }

    /// Runs a block after its scene, in a new folder with its own HOME; ckport and
    /// ckport-emulator are the ones built beside the tests (`serve` runs until its first page
    /// has answered). The scene is the machine's part (`machine_SCENE` in scenes.sh when there
    /// is one, else the package's folder) and then the guide's own `setup`, or, for the
    /// reader's machine, the function `scene_SCENE`. With `unchanged`, the store's export
    /// before and after the block must be the same bytes; then each check runs. Its status,
    /// and its output with the script's trace.
    static func runScript(
        _ block: String, scene: String, setup: String? = nil, unchanged: String? = nil, checks: [String] = [],
        trace: Bool = true
    ) throws -> (status: Int32, output: String) {
        let scratch = Scratch()
        let bin = scratch.url.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(
            at: scratch.url.appendingPathComponent("home"), withIntermediateDirectories: true)
        let wrapper = bin.appendingPathComponent("ckport")
        try """
        #!/usr/bin/env bash
        # ckport as built for the tests. A server (serve) runs until its first page answers
        # (with --feeds-only, until /feeds/ answers its plain 404: it serves nothing else).
        real=\(ckportBinary.path)
        [ "${1:-}" = serve ] || exec "$real" "$@"
        args=("$@")
        feeds=0
        case " $* " in *" --feeds-only "*) feeds=1 ;; esac
        case " $* " in *" --port "*) ;; *) args+=(--port 0) ;; esac
        "$real" "${args[@]}" > serve.out 2>&1 &
        server=$!
        for _ in $(seq 100); do grep -q 'http://' serve.out && break; sleep 0.1; done
        url=$(grep -o 'http://[^ ]*/' serve.out | head -1)
        # The first page, asked up to three times on a loaded machine; each miss is said.
        status=1
        for attempt in 1 2 3; do
          [ -n "$url" ] || break
          code=$(curl -s -o serve.page -w '%{http_code}' --max-time 20 "$url") || true
          if [ $feeds = 1 ]; then
            if [ "$code" = 404 ] && grep -qx 'not found' serve.page; then status=0; break; fi
          elif [ "$code" = 200 ] && grep -q '<html' serve.page; then status=0; break; fi
          echo "first page, attempt $attempt: HTTP ${code:-none}: $(head -c 300 serve.page 2>/dev/null)" >> serve.miss
          sleep 1
        done
        kill -INT $server; wait $server
        [ ! -f serve.miss ] || cat serve.miss
        cat serve.out
        exit $status
        """.write(to: wrapper, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: wrapper.path)
        let emulator = ckportBinary.deletingLastPathComponent().appendingPathComponent("ckport-emulator")
        try FileManager.default.createSymbolicLink(
            at: bin.appendingPathComponent("ckport-emulator"), withDestinationURL: emulator)
        let name = scene.replacingOccurrences(of: "-", with: "_")
        let prepare =
            setup.map { "if declare -F machine_\(name) >/dev/null; then machine_\(name); else scene_repo; fi\n" + $0 }
            ?? "scene_\(name)"
        var before = ""
        var after = ""
        if let store = unchanged {
            before = """
                test -s "\(store)" || { echo "guide check: no store \(store) to compare" >&2; exit 1; }
                ckport export --store '\(store)' -o .guide-before.jsonl -q
                test -s .guide-before.jsonl || { echo "guide check: the store \(store) holds no records to compare" >&2; exit 1; }
                """
            after = """
                ckport export --store '\(store)' -o .guide-after.jsonl -q
                cmp -s .guide-before.jsonl .guide-after.jsonl || { echo "guide check: the block changed the records of \(store):" >&2; diff .guide-before.jsonl .guide-after.jsonl | head -20 >&2; exit 1; }
                """
        }
        for check in checks {
            after += "\n( \(check) ) || { echo \(singleQuoted("guide check failed: " + check)) >&2; exit 1; }"
        }
        let script = """
            set -e
            export HOME="$PWD/home" PATH="$PWD/bin:$PATH" GUIDE_REPO='\(packageRoot.path)' GUIDE_POSTGRES='\(postgres)'
            unset CKPORT_STORE
            # The scene's own output is shown only when it fails: what the example prints is the example's.
            exec 3>&1 4>&2 > .guide-setup.log 2>&1
            trap 'status=$?; exec 1>&3 2>&4; [ -f .guide-setup.done ] || { echo "the scene failed:"; cat .guide-setup.log; }; jobs -p | xargs -r kill 2>/dev/null || true; exit $status' EXIT
            source "$GUIDE_REPO/Tests/Fixtures/guides/scenes.sh"
            \(prepare)
            exec 1>&3 2>&4
            touch .guide-setup.done
            \(trace ? "set -x" : "")
            \(before)
            \(block)
            set +x
            \(after)
            """
        try script.write(to: scratch.url.appendingPathComponent("example.sh"), atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["example.sh"]
        process.currentDirectoryURL = scratch.url
        var environment = ProcessInfo.processInfo.environment
        environment["CKPORT_STORE"] = nil
        process.environment = environment
        let output = scratch.url.appendingPathComponent("output.txt")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try handle.close()
        return (process.terminationStatus, String(decoding: try Data(contentsOf: output), as: UTF8.self))
    }
}
