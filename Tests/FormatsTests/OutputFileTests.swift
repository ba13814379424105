import Foundation
import Testing
@testable import Formats

@Suite("output files")
struct OutputFileTests {
    @Test("a file appears only when committed; a discarded one leaves nothing")
    func commitAndDiscard() throws {
        let scratch = Scratch()
        let output = try OutputFile(path: scratch.path("out.jsonl"))
        try output.write("one\n")
        #expect(!FileManager.default.fileExists(atPath: scratch.path("out.jsonl")))
        try output.commit()
        #expect(try String(contentsOfFile: scratch.path("out.jsonl"), encoding: .utf8) == "one\n")
        let discarded = try OutputFile(path: scratch.path("other.jsonl"))
        try discarded.write("two\n")
        discarded.discard()
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.url.path) == ["out.jsonl"])
    }

    @Test("temporary files of a ckport that was killed are cleared, whatever output they were for; a running one's are kept")
    func staleTemporaries() throws {
        let scratch = Scratch()
        let finished = Process()
        finished.executableURL = URL(fileURLWithPath: "/bin/true")
        try finished.run()
        finished.waitUntilExit()
        let dead = finished.processIdentifier
        let stale = scratch.path(".out.jsonl.ckport-\(dead)-42.tmp")
        let alive = scratch.path(".out.jsonl.ckport-\(getppid())-43.tmp")
        let otherOutput = scratch.path(".X.ckbundle.ckport-\(dead)-44.tmp")
        let spool = scratch.path(".ckport-spool-\(dead)-6F0C2A4E")
        let staged = scratch.path("ckport-asset-\(dead)-6F0C2A4E")
        let users = [scratch.path("notes.txt"), scratch.path(".notes.ckport-x.tmp"), scratch.path("my-ckport-\(dead)-1.tmp")]
        for path in [stale, alive, otherOutput, spool, staged] + users { _ = FileManager.default.createFile(atPath: path, contents: Data("partial".utf8)) }
        let output = try OutputFile(path: scratch.path("out.jsonl"))
        try output.write("done\n")
        try output.commit()
        for path in [stale, otherOutput, spool, staged] { #expect(!FileManager.default.fileExists(atPath: path), "\(path)") }
        #expect(FileManager.default.fileExists(atPath: alive))
        for path in users { #expect(FileManager.default.fileExists(atPath: path), "\(path)") }
    }

    @Test("an output is readable by its owner only until it is complete, then gets the usual mode")
    func temporaryMode() throws {
        let scratch = Scratch()
        let output = try OutputFile(path: scratch.path("secret.jsonl"))
        try output.write("a record\n")
        try output.flush()
        let temporary = try #require(try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).first { $0.hasSuffix(".tmp") })
        var info = stat()
        #expect(stat(scratch.path(temporary), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        try output.commit()
        #expect(stat(scratch.path("secret.jsonl"), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o666 & ~OutputFile.umask)
    }
}
