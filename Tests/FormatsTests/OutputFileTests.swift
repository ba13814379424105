import Foundation
import Testing

@testable import Formats

/// The type of the file system `path` is on, from the longest mount point above it in
/// /proc/mounts (the path resolved first).
private func fileSystem(of path: String) -> String? {
    let real = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    guard let mounts = try? String(contentsOfFile: "/proc/mounts", encoding: .utf8) else { return nil }
    var best: (point: String, type: String)?
    for line in mounts.split(separator: "\n") {
        let fields = line.split(separator: " ")
        guard fields.count >= 3 else { continue }
        let point = String(fields[1])
        let within = point == "/" || real == point || real.hasPrefix(point + "/")
        if within, point.count >= (best?.point.count ?? -1) { best = (point, String(fields[2])) }
    }
    return best?.type
}

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

    @Test(
        "what is not a regular file is written to, never replaced: a FIFO, a link to a device; a link to a file has its file replaced and stays a link"
    )
    func notRegularFiles() throws {
        let scratch = Scratch()
        // A FIFO with a reader: the bytes go through it, and it stays a FIFO.
        #expect(mkfifo(scratch.path("pipe"), 0o600) == 0)
        let reader = Process()
        reader.executableURL = URL(fileURLWithPath: "/bin/sh")
        reader.arguments = ["-c", "cat \"$0\" > \"$1\"", scratch.path("pipe"), scratch.path("read.txt")]
        try reader.run()
        let throughPipe = try OutputFile(path: scratch.path("pipe"))
        try throughPipe.write("through the pipe\n")
        try throughPipe.commit()
        reader.waitUntilExit()
        #expect(scratch.text("read.txt") == "through the pipe\n")
        var info = stat()
        #expect(lstat(scratch.path("pipe"), &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO)
        // A link to a character device: written to, and the link and the device stay.
        #expect(symlink("/dev/null", scratch.path("null")) == 0)
        let toNull = try OutputFile(path: scratch.path("null"))
        try toNull.write("gone\n")
        try toNull.commit()
        #expect(lstat(scratch.path("null"), &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK)
        #expect(stat("/dev/null", &info) == 0 && (info.st_mode & S_IFMT) == S_IFCHR)
        // A link to a regular file: the file gets the new bytes, the link stays a link.
        _ = scratch.write("real.txt", "old\n")
        #expect(symlink(scratch.path("real.txt"), scratch.path("alias.txt")) == 0)
        let viaLink = try OutputFile(path: scratch.path("alias.txt"))
        try viaLink.write("new\n")
        try viaLink.commit()
        #expect(lstat(scratch.path("alias.txt"), &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK)
        #expect(scratch.text("real.txt") == "new\n")
    }

    @Test(
        "temporary files of a ckport that was killed are cleared, whatever output they were for; a running one's are kept"
    )
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
        let users = [
            scratch.path("notes.txt"), scratch.path(".notes.ckport-x.tmp"), scratch.path("my-ckport-\(dead)-1.tmp"),
        ]
        for path in [stale, alive, otherOutput, spool, staged] + users {
            _ = FileManager.default.createFile(atPath: path, contents: Data("partial".utf8))
        }
        let output = try OutputFile(path: scratch.path("out.jsonl"))
        try output.write("done\n")
        try output.commit()
        for path in [stale, otherOutput, spool, staged] {
            #expect(!FileManager.default.fileExists(atPath: path), "\(path)")
        }
        #expect(FileManager.default.fileExists(atPath: alive))
        for path in users { #expect(FileManager.default.fileExists(atPath: path), "\(path)") }
    }

    @Test(
        "a large output is written behind: its bytes are exact, and what is on disk has left the page cache before the commit"
    )
    func writeBehind() throws {
        // Only file systems that keep files on a disk drop clean pages when asked (tmpfs keeps
        // them, as it must): the output goes to a scratch folder on one, or beside the build
        // (which always is), and a machine with neither fails the test rather than skip it.
        let dropping: Set<String> = ["ext2", "ext3", "ext4", "xfs", "btrfs", "overlay", "f2fs"]
        let scratch = Scratch()
        var folder = scratch.url.path
        if !dropping.contains(fileSystem(of: folder) ?? "") {
            folder = packageRoot.appendingPathComponent(".build/write-behind-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        defer { if folder != scratch.url.path { try? FileManager.default.removeItem(atPath: folder) } }
        try #require(
            dropping.contains(fileSystem(of: folder) ?? ""),
            "neither the scratch folder nor the build folder is on a file system that keeps files on a disk (\(fileSystem(of: folder) ?? "unknown"))"
        )
        let path = folder + "/large.jsonl"
        let output = try OutputFile(path: path)
        // 100 MB in uneven pieces, some through the buffer and some straight to the file.
        var state: UInt64 = 7
        var written: [UInt8] = []
        written.reserveCapacity(101 << 20)
        while written.count < 100 << 20 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let piece = [UInt8](
                repeating: UInt8(truncatingIfNeeded: state >> 56), count: Int(state >> 40) % (3 << 19) + 1)
            try output.write(piece)
            written += piece
        }
        try output.flush()
        // The temporary file beside the output: its first 32 MB went to the disk and were let go
        // of once the next 32 MB had been written.
        let temporary = try #require(
            try FileManager.default.contentsOfDirectory(atPath: folder).first { $0.hasSuffix(".tmp") })
        do {
            let fd = open(folder + "/" + temporary, O_RDONLY)
            defer { close(fd) }
            let length = 32 << 20
            let map = try #require(mmap(nil, length, PROT_READ, MAP_SHARED, fd, 0))
            defer { munmap(map, length) }
            let page = Int(sysconf(Int32(_SC_PAGESIZE)))
            var resident = [UInt8](repeating: 0, count: length / page)
            #expect(mincore(map, length, &resident) == 0)
            let kept = resident.filter { $0 & 1 != 0 }.count
            #expect(
                kept < resident.count / 10, "\(kept) of \(resident.count) pages of the first 32 MB are still cached")
        }
        try output.commit()
        let back = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(back.count == written.count)
        #expect(Array(back) == written)
    }

    @Test("an output is readable by its owner only until it is complete, then gets the usual mode")
    func temporaryMode() throws {
        let scratch = Scratch()
        let output = try OutputFile(path: scratch.path("secret.jsonl"))
        try output.write("a record\n")
        try output.flush()
        let temporary = try #require(
            try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).first { $0.hasSuffix(".tmp") })
        var info = stat()
        #expect(stat(scratch.path(temporary), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        try output.commit()
        #expect(stat(scratch.path("secret.jsonl"), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o666 & ~OutputFile.umask)
    }
}
