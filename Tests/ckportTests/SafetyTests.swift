import Foundation
import Testing

/// Every file under `folder` whose bytes contain `text`.
func filesContaining(_ text: String, under folder: String) -> [String] {
    let needle = Data(text.utf8)
    guard let walker = FileManager.default.enumerator(atPath: folder) else { return [] }
    var found: [String] = []
    for case let name as String in walker {
        let path = (folder as NSString).appendingPathComponent(name)
        if let data = FileManager.default.contents(atPath: path), data.range(of: needle) != nil { found.append(name) }
    }
    return found
}

@Suite("safety of backups and temporary files")
struct SafetyTests {
    @Test("an encrypted backup killed at any moment leaves no file holding a record's text")
    func encryptedBackupLeavesNoPlaintext() throws {
        let folder = Folder()
        try FileManager.default.createDirectory(atPath: folder.path("store"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: folder.path("out"), withIntermediateDirectories: true)
        #expect(try ckport(["generate", "--app", "notes", "--schema", "-o", "schema.ckdb"], in: folder.url).status == 0)
        #expect(try ckport(["generate", "--app", "notes", "--records", "20000", "-o", "notes.jsonl"], in: folder.url).status == 0)
        #expect(try ckport(["import", "schema.ckdb", "notes.jsonl", "--store", "store/notes.sqlite", "-q"], in: folder.url).status == 0)
        // A record name from the middle of the data: if it is anywhere in out/, plaintext leaked.
        let lines = folder.text("notes.jsonl").split(separator: "\n")
        let marker = try #require(lines[lines.count / 2].split(separator: "\"").dropFirst(3).first.map(String.init))
        #expect(marker.count >= 6)
        folder.write("passphrase", "correct horse battery staple\n")
        let environment = ["TMPDIR": folder.path("out")]
        let arguments = ["backup", "--store", "store/notes.sqlite", "-o", "out/notes.ckbundle", "--encrypt", "--passphrase-file", "passphrase", "-q"]
        for delay in [60_000, 150_000, 250_000, 400_000, 700_000] as [useconds_t] {
            let running = try RunningCKPort(arguments, in: folder.url, environment: environment)
            usleep(delay / 2)
            #expect(filesContaining(marker, under: folder.path("out")) == [], "while running, after \(delay / 2) µs")
            usleep(delay / 2)
            kill(running.process.processIdentifier, SIGKILL)
            _ = running.finish()
            #expect(filesContaining(marker, under: folder.path("out")) == [], "killed after \(delay) µs")
        }
        let finished = try ckport(arguments, in: folder.url, environment: environment)
        #expect(finished.status == 0, "\(finished.stderr)")
        #expect(filesContaining(marker, under: folder.path("out")) == [])
        // What is left is the bundle alone: the killed runs' temporary files are gone.
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path("out")) == ["notes.ckbundle"])
        var info = stat()
        #expect(stat(folder.path("out/notes.ckbundle"), &info) == 0)
        let verified = try ckport(["verify", "out/notes.ckbundle", "--passphrase-file", "passphrase"], in: folder.url)
        #expect(verified.status == 0, "\(verified.stderr)")
    }
}
