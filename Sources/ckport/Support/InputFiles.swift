import Foundation

/// One voice for an input file that cannot be what a command expects: the same words and the
/// same exit status (2) whichever command it was given to.
enum InputFiles {
    /// Checks that `path` is a readable file that could be `kind` ("a schema", "JSON", "a
    /// bundle"…); throws `error: PATH: what is wrong` otherwise. Standard input passes.
    static func check(_ path: String, as kind: String, binary: Bool = false) throws {
        guard path != "-" else { return }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw CommandFailure.invalid("\(path): no such file")
        }
        if isDirectory.boolValue { throw CommandFailure.invalid("\(path): is a folder, not \(kind)") }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CommandFailure.invalid("\(path): cannot be read (\(String(cString: strerror(errno))))") }
        defer { close(fd) }
        var head = [UInt8](repeating: 0, count: 8192)
        let count = head.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count >= 0 else { throw CommandFailure.invalid("\(path): cannot be read (\(String(cString: strerror(errno))))") }
        head.removeSubrange(count...)
        if binary {
            // A bundle is gzip data, or ckport's encrypted form of it.
            let gzip = head.starts(with: [0x1F, 0x8B])
            let encrypted = head.starts(with: Array("CKPORT-ENCRYPTED-BUNDLE".utf8))
            if count == 0 { throw CommandFailure.invalid("\(path): is empty, not \(kind)") }
            if !gzip && !encrypted { throw CommandFailure.invalid("\(path): not \(kind) (a bundle is the gzip-compressed tar 'ckport backup' writes)") }
            return
        }
        if looksBinary(head) { throw CommandFailure.invalid("\(path): not \(kind): it holds binary data") }
    }

    /// Text holds no NUL byte and is UTF-8 (a sequence cut at the end of the sample is fine).
    static func looksBinary(_ bytes: [UInt8]) -> Bool {
        if bytes.contains(0) { return true }
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            let length: Int
            switch b {
            case 0x00...0x7F: length = 1
            case 0xC2...0xDF: length = 2
            case 0xE0...0xEF: length = 3
            case 0xF0...0xF4: length = 4
            default: return true
            }
            if i + length > bytes.count { return false }
            for j in 1..<length where bytes[i + j] & 0xC0 != 0x80 { return true }
            i += length
        }
        return false
    }
}
