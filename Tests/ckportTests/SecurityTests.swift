import Foundation
import TestSupport
import Testing

/// Runs a program as the user `nobody` (a second local user): through setpriv as root, else
/// through `sudo -n`. A machine that allows neither fails the test that needs it.
func asNobody(_ arguments: [String], environment: [String: String] = [:]) throws -> Process {
    let process = Process()
    let switcher = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
    if getuid() == 0 {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = switcher + arguments
    } else {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sudo")
        process.arguments = ["-n", "/usr/bin/setpriv"] + switcher + arguments
    }
    var env = ProcessInfo.processInfo.environment
    for (name, value) in environment { env[name] = value }
    process.environment = env
    return process
}

/// A second user who watches a folder with inotify and opens everything that appears in it
/// (and in any folder in it they can enter), looking for `marker` in what they read.
let watcherScript = #"""
    import ctypes, os, select, struct, sys, time
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    fd = libc.inotify_init1(0)
    mask = 0x100 | 0x80 | 0x2 | 0x8 | 0x20   # create, moved to, modify, close-write, open
    watched = {}
    def watch(path):
        wd = libc.inotify_add_watch(fd, path.encode(), mask)
        if wd >= 0:
            watched[wd] = path
            return True
        return False
    watch(sys.argv[1])
    marker = sys.argv[2].encode()
    seconds = float(sys.argv[3])
    opened, leaks, refused, folders, closed = set(), set(), set(), set(), set()
    print("watching", flush=True)
    end = time.time() + seconds
    while time.time() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if not ready:
            continue
        data = os.read(fd, 1 << 16)
        i = 0
        while i < len(data):
            wd, _, _, length = struct.unpack_from("iIII", data, i)
            name = data[i + 16:i + 16 + length].rstrip(b"\0").decode(errors="replace")
            i += 16 + length
            if not name:
                continue   # an event on a watched folder itself
            path = os.path.join(watched.get(wd, "?"), name)
            if os.path.isdir(path):
                folders.add(path)
                if not watch(path):
                    closed.add(path)
                continue
            try:
                with open(path, "rb") as f:
                    opened.add(path)
                    if marker in f.read():
                        leaks.add(path)
            except OSError:
                refused.add(path)
    print("opened %d refused %d folders %d closed %d leaks %d" % (len(opened), len(refused), len(folders), len(closed), len(leaks)), flush=True)
    for path in sorted(leaks):
        print("LEAK " + path, flush=True)
    for kind, paths in (("FOLDER", folders), ("REFUSED", refused), ("OPENED", opened)):
        for path in sorted(paths):
            print(kind + " " + path, flush=True)
    """#

/// What the watcher saw: nothing opened, nothing leaked, and every entry that appeared was one
/// of ckport's private folders (`ckport-PID-XXXXXX`), whatever state it was in when looked at.
func onlyPrivateFolders(_ report: String) -> Bool {
    guard report.contains("opened 0 "), report.contains("leaks 0") else { return false }
    let seen = report.split(separator: "\n").filter {
        $0.hasPrefix("FOLDER ") || $0.hasPrefix("REFUSED ") || $0.hasPrefix("OPENED ")
    }
    return !seen.isEmpty
        && seen.allSatisfy { line in
            let name = line.split(separator: "/").last.map(String.init) ?? ""
            return !line.hasPrefix("OPENED ") && name.wholeMatch(of: /ckport-[0-9]+-[A-Za-z0-9]{6}/) != nil
        }
}

@Suite("another user on the machine")
struct SecondUserTests {
    /// A store with a note whose attachment holds `marker`, backed up encrypted.
    func encryptedBackup(_ folder: Scratch, marker: String) throws {
        folder.write(
            "schema.ckdb",
            """
            DEFINE SCHEMA
                RECORD TYPE Note (
                    "___recordID" REFERENCE QUERYABLE,
                    title         STRING,
                    attachment    ASSET,
                    GRANT READ TO "_world"
                );
            """)
        folder.write("photo.bin", String(repeating: marker, count: 40_000))
        folder.write(
            "notes.jsonl",
            (0..<3).map { n in
                #"{"recordName":"note-\#(n)","recordType":"Note","fields":{"title":{"value":"Note \#(n)","type":"STRING"},"attachment":{"value":{"fileChecksum":"c\#(n)","size":-1,"localPath":"photo.bin"},"type":"ASSETID"}}}"#
            }.joined(separator: "\n") + "\n")
        folder.write("pass.txt", "correct horse battery staple\n")
        chmod(folder.path("pass.txt"), 0o600)
        #expect(
            try ckport(
                ["import", "schema.ckdb", "notes.jsonl", "--assets", ".", "--store", "source.sqlite", "-q"],
                in: folder.url
            ).status == 0)
        #expect(
            try ckport(
                [
                    "backup", "-o", "notes.ckbundle", "--encrypt", "--passphrase-file", "pass.txt", "--store",
                    "source.sqlite", "-q",
                ], in: folder.url
            ).status == 0)
    }

    @Test(
        "restoring an encrypted bundle: a second user watching TMPDIR with inotify opens nothing, and no file there ever holds an asset's clear bytes"
    )
    func restoreStagesNothingReadable() throws {
        let folder = Scratch()
        let marker = "SECRET-\(UUID().uuidString)-"
        try encryptedBackup(folder, marker: marker)
        // A TMPDIR anybody may write to, as /tmp is.
        let shared = folder.path("shared-tmp")
        try FileManager.default.createDirectory(
            atPath: shared, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o1777])
        chmod(shared, 0o1777)
        chmod(folder.url.path, 0o755)
        folder.write("watch.py", watcherScript)
        chmod(folder.path("watch.py"), 0o644)
        for round in 0..<3 {
            let watcher = try asNobody(["/usr/bin/python3", folder.path("watch.py"), shared, marker, "6"])
            let said = Pipe()
            watcher.standardOutput = said
            try watcher.run()
            let ready = LineWaiter(said.fileHandleForReading) { $0.hasPrefix("watching") }.firstLine(within: 20)
            try #require(ready != nil, "the watcher (as nobody) did not start")
            let restore = try ckport(
                [
                    "restore", "notes.ckbundle", "--passphrase-file", "pass.txt", "--store", "restored-\(round).sqlite",
                    "-q",
                ],
                in: folder.url, environment: ["TMPDIR": shared])
            #expect(restore.status == 0, "\(restore.stderr)")
            watcher.waitUntilExit()
            let report = String(decoding: said.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            // The watcher saw ckport's private folder appear and could not enter it.
            #expect(onlyPrivateFolders(report), "\(report)")
        }
        // Nothing is left in TMPDIR, and nothing anywhere under it ever held the clear bytes.
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: shared)) ?? ["?"]).isEmpty)
        var back = Data()
        let exported = try ckport(["export", "--store", "restored-0.sqlite", "--assets", "out", "-q"], in: folder.url)
        #expect(exported.status == 0)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path("out"))) ?? [] {
            back = try Data(contentsOf: folder.url.appendingPathComponent("out/" + name))
        }
        #expect(String(decoding: back, as: UTF8.self).hasPrefix(marker))
    }

    @Test("a restore killed half way leaves no clear asset bytes behind, and the next run clears what it left")
    func killedRestoreLeavesNothing() throws {
        let folder = Scratch()
        let marker = "KILLED-\(UUID().uuidString)-"
        try encryptedBackup(folder, marker: marker)
        let tmp = folder.path("tmp")
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: false)
        for delay in [30_000, 120_000, 300_000] as [useconds_t] {
            let restore = ckportProcess(
                ["restore", "notes.ckbundle", "--passphrase-file", "pass.txt", "--store", "r-\(delay).sqlite", "-q"],
                in: folder.url, environment: ["TMPDIR": tmp])
            restore.standardError = FileHandle.nullDevice
            try restore.run()
            usleep(delay)
            kill(restore.processIdentifier, SIGKILL)
            restore.waitUntilExit()
            let leftovers = FileManager.default.enumerator(atPath: tmp)?.compactMap { $0 as? String } ?? []
            for name in leftovers {
                let bytes = (try? Data(contentsOf: URL(fileURLWithPath: tmp + "/" + name))) ?? Data()
                #expect(
                    !String(decoding: bytes, as: UTF8.self).contains(marker), "\(name) holds an asset's clear bytes")
            }
        }
        // The next ckport that uses TMPDIR removes the folders the killed ones left.
        #expect(
            try ckport(
                ["restore", "notes.ckbundle", "--passphrase-file", "pass.txt", "--store", "final.sqlite", "-q"],
                in: folder.url, environment: ["TMPDIR": tmp]
            ).status == 0)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? ["?"]).isEmpty)
    }

    @Test(
        "stale clean-up removes only this user's regular files and ckport's own folders: never another user's file, never through a link"
    )
    func staleCleanUp() throws {
        let folder = Scratch()
        let tmp = folder.path("tmp")
        try FileManager.default.createDirectory(
            atPath: tmp, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o1777])
        chmod(tmp, 0o1777)
        chmod(folder.url.path, 0o755)
        // What a dead ckport (pid 999999 does not run) would have left, and what looks like it.
        let deadPid = 999_999
        folder.write("tmp/ckport-asset-\(deadPid)-x", "mine")
        folder.write("precious.txt", "someone else's")
        symlink(folder.path("precious.txt"), tmp + "/.report.csv.ckport-\(deadPid)-0.tmp")
        try FileManager.default.createDirectory(
            atPath: tmp + "/ckport-\(deadPid)-abcdef/inner", withIntermediateDirectories: true)
        folder.write("tmp/ckport-\(deadPid)-abcdef/inner/file", "mine too")
        // Another user's file named like ckport's, and their folder.
        let theirs = try asNobody([
            "/bin/sh", "-c",
            "echo theirs > \(tmp)/ckport-stdin-\(deadPid)-y && mkdir \(tmp)/ckport-\(deadPid)-zzzzzz && echo theirs > \(tmp)/ckport-\(deadPid)-zzzzzz/f",
        ])
        try theirs.run()
        theirs.waitUntilExit()
        try #require(theirs.terminationStatus == 0, "could not act as nobody")
        // Any ckport that sets something aside in TMPDIR clears stale temporaries first: an xCal
        // export spools its calendar there.
        #expect(
            try ckport(
                [
                    "import", sample("family-calendar", "schema.ckdb"), sample("family-calendar", "records.jsonl"),
                    "--store", "c.sqlite", "-q",
                ],
                in: folder.url
            ).status == 0)
        let export = try ckport(
            [
                "export", "--store", "c.sqlite", "--format", "xcal", "--mapping",
                sample("family-calendar", "calendar.yaml"), "-o", "out.xml", "-q",
            ],
            in: folder.url, environment: ["TMPDIR": tmp])
        #expect(export.status == 0, "\(export.stderr)")
        let left = Set((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? [])
        #expect(!left.contains("ckport-asset-\(deadPid)-x") && !left.contains("ckport-\(deadPid)-abcdef"), "\(left)")
        #expect(left.contains("ckport-stdin-\(deadPid)-y") && left.contains("ckport-\(deadPid)-zzzzzz"), "\(left)")
        #expect(folder.text("tmp/ckport-\(deadPid)-zzzzzz/f") == "theirs\n")
        #expect(folder.text("precious.txt") == "someone else's")
    }
}

@Suite("files ckport makes")
struct FileModeTests {
    @Test(
        "a new store and a new bundle are their owner's alone (0600) whatever the umask; a replaced bundle keeps its mode; secrets files readable by others are warned about"
    )
    func modes() throws {
        let folder = Scratch()
        let old = umask(0o022)
        defer { umask(old) }
        #expect(
            try ckport(
                [
                    "import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl"), "--store", "n.sqlite",
                    "-q",
                ], in: folder.url
            ).status == 0)
        func mode(_ name: String) -> Int? {
            (try? FileManager.default.attributesOfItem(atPath: folder.path(name))[.posixPermissions] as? NSNumber)?
                .intValue
        }
        #expect(mode("n.sqlite") == 0o600)
        #expect(try ckport(["backup", "-o", "n.ckbundle", "--store", "n.sqlite", "-q"], in: folder.url).status == 0)
        #expect(mode("n.ckbundle") == 0o600)
        chmod(folder.path("n.ckbundle"), 0o640)
        #expect(try ckport(["backup", "-o", "n.ckbundle", "--store", "n.sqlite", "-q"], in: folder.url).status == 0)
        #expect(mode("n.ckbundle") == 0o640)
        folder.write("pass.txt", "a passphrase\n")
        chmod(folder.path("pass.txt"), 0o644)
        let warned = try ckport(
            ["backup", "-o", "e.ckbundle", "--encrypt", "--passphrase-file", "pass.txt", "--store", "n.sqlite", "-q"],
            in: folder.url)
        #expect(
            warned.status == 0
                && warned.stderr.contains(
                    "warning: pass.txt, which holds a bundle's passphrase, can be read by other users (mode 644): chmod 600 pass.txt"
                ), "\(warned.stderr)")
        folder.write("api.txt", "api-1\n")
        chmod(folder.path("api.txt"), 0o604)
        let pull = try ckport(
            [
                "pull", "--base-url", "http://127.0.0.1:9", "--container", "iCloud.com.example.Notes",
                "--api-token-file", "api.txt",
                "--key-id", "abc", "--key-file", "api.txt", "--store", "n.sqlite",
            ], in: folder.url)
        #expect(
            pull.stderr.contains("warning: api.txt, which holds a server-to-server key, can be read by other users"),
            "\(pull.stderr)")
    }

    @Test(
        "a passphrase with a bundle that is not encrypted is refused unless asked for; verify and inspect say whether a bundle is encrypted"
    )
    func encryptionNotStripped() throws {
        let folder = Scratch()
        folder.write("pass.txt", "a passphrase\n")
        chmod(folder.path("pass.txt"), 0o600)
        #expect(
            try ckport(
                [
                    "import", sample("notes", "schema.ckdb"), sample("notes", "records.jsonl"), "--store", "n.sqlite",
                    "-q",
                ], in: folder.url
            ).status == 0)
        #expect(
            try ckport(
                [
                    "backup", "-o", "sealed.ckbundle", "--encrypt", "--passphrase-file", "pass.txt", "--store",
                    "n.sqlite", "-q",
                ], in: folder.url
            ).status == 0)
        // Someone swaps in a plain bundle of their own making under the encrypted one's name.
        #expect(
            try ckport(["backup", "-o", "forged.ckbundle", "--store", "n.sqlite", "-q"], in: folder.url).status == 0)
        for command in [["verify"], ["inspect"], ["restore", "--store", "x.sqlite"]] {
            let run = try ckport(command + ["forged.ckbundle", "--passphrase-file", "pass.txt"], in: folder.url)
            #expect(
                run.status == 2 && run.stderr.contains("the bundle is not encrypted, though a passphrase was given")
                    && run.stderr.contains("--allow-unencrypted"), "\(command): \(run.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: folder.path("x.sqlite")))
        let allowed = try ckport(
            ["verify", "forged.ckbundle", "--passphrase-file", "pass.txt", "--allow-unencrypted"], in: folder.url)
        #expect(allowed.status == 0 && allowed.stdout.contains("encrypted: no"), "\(allowed.stdout)")
        let sealed = try ckport(["verify", "sealed.ckbundle", "--passphrase-file", "pass.txt"], in: folder.url)
        #expect(sealed.status == 0 && sealed.stdout.contains("encrypted: yes"), "\(sealed.stdout)")
        #expect(
            try ckport(["inspect", "sealed.ckbundle", "--passphrase-file", "pass.txt"], in: folder.url).stdout
                .hasPrefix("bundle   sealed.ckbundle (encrypted)"))
    }

    @Test(
        "the xCal export's iCalendar spool is never in TMPDIR for others: only ckport's own 0700 folder appears there, and it is gone afterwards"
    )
    func xcalSpool() throws {
        let folder = Scratch()
        let tmp = folder.path("tmp")
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: false)
        #expect(
            try ckport(
                [
                    "import", sample("family-calendar", "schema.ckdb"), sample("family-calendar", "records.jsonl"),
                    "--store", "c.sqlite", "-q",
                ], in: folder.url
            ).status == 0)
        folder.write("watch.py", watcherScript)
        chmod(folder.url.path, 0o755)
        chmod(tmp, 0o1777)
        chmod(folder.path("watch.py"), 0o644)
        // Another user watches what appears in TMPDIR, and opens it if they can.
        let watcher = try asNobody(["/usr/bin/python3", folder.path("watch.py"), tmp, "BEGIN:VCALENDAR", "5"])
        let said = Pipe()
        watcher.standardOutput = said
        try watcher.run()
        _ = LineWaiter(said.fileHandleForReading) { $0.hasPrefix("watching") }.firstLine(within: 20)
        let export = try ckport(
            [
                "export", "--store", "c.sqlite", "--format", "xcal", "--mapping",
                sample("family-calendar", "calendar.yaml"), "-o", "out.xml", "-q",
            ],
            in: folder.url, environment: ["TMPDIR": tmp])
        #expect(export.status == 0, "\(export.stderr)")
        watcher.waitUntilExit()
        let report = String(decoding: said.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        // One folder appeared at the top (ckport's own, made 0700 by mkdtemp), which they could
        // not enter; no spool file appeared where they could see it.
        #expect(onlyPrivateFolders(report), "\(report)")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? ["?"]).isEmpty)
        #expect(folder.text("out.xml").contains("<vcalendar>"))
    }
}

@Suite("what reaches the terminal")
struct TerminalTests {
    @Test("control characters from a file reach the terminal escaped; a long value is shortened")
    func controlCharacters() throws {
        let folder = Scratch()
        folder.write(
            "schema.ckdb",
            "DEFINE SCHEMA\n    RECORD TYPE Note (\n        \"___recordID\" REFERENCE QUERYABLE,\n        count INT64,\n        GRANT READ TO \"_world\"\n    );\n"
        )
        let hostile = "evil\u{1B}]0;owned\u{07}\u{1B}[2J"
        let huge = String(repeating: "9", count: 100_000)
        folder.write(
            "bad.jsonl",
            #"{"recordName":"\#(hostile.unicodeScalars.map { $0.value < 0x20 ? String(format: "\\u%04x", $0.value) : String($0) }.joined())","recordType":"Note","fields":{"count":{"value":"x\u001b[31m","type":"INT64"}}}"#
                + "\n"
                + #"{"recordName":"big","recordType":"Note","fields":{"count":{"value":\#(huge),"type":"INT64"}}}"#
                + "\n")
        let run = try ckport(["import", "schema.ckdb", "bad.jsonl", "--store", "s.sqlite"], in: folder.url)
        #expect(run.status == 2)
        #expect(!run.stderr.contains("\u{1B}") && !run.stderr.contains("\u{07}"), "\(run.stderr.debugDescription)")
        #expect(run.stderr.contains("evil\\x1B]0;owned\\x07\\x1B[2J"), "\(run.stderr)")
        #expect(run.stderr.count < 20_000 && run.stderr.contains("(100000 digits)"), "\(run.stderr.count)")
    }
}
