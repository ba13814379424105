import Foundation
import Testing
@testable import Formats

@Suite("output files")
struct OutputFileTests {
    @Test("a file appears only when committed; a discarded one leaves nothing")
    func commitAndDiscard() throws {
        let scratch = CalendarScratch()
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

    @Test("temporary files of a ckport that was killed are cleared; a running one's are kept")
    func staleTemporaries() throws {
        let scratch = CalendarScratch()
        let finished = Process()
        finished.executableURL = URL(fileURLWithPath: "/bin/true")
        try finished.run()
        finished.waitUntilExit()
        let dead = finished.processIdentifier
        let stale = scratch.path(".out.jsonl.ckport-\(dead)-42.tmp")
        let alive = scratch.path(".out.jsonl.ckport-\(getppid())-43.tmp")
        let unrelated = scratch.path(".notes.txt.ckport-\(dead)-44.tmp")
        for path in [stale, alive, unrelated] { FileManager.default.createFile(atPath: path, contents: Data("partial".utf8)) }
        let output = try OutputFile(path: scratch.path("out.jsonl"))
        try output.write("done\n")
        try output.commit()
        #expect(!FileManager.default.fileExists(atPath: stale))
        #expect(FileManager.default.fileExists(atPath: alive))
        #expect(FileManager.default.fileExists(atPath: unrelated))
    }
}
