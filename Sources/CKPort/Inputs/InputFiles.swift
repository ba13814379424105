import Foundation
import Records
import StoreCore

/// A file that cannot be what it was given as: missing, a folder, unreadable, binary where
/// text was expected, or a schema with problems.
public struct InputFileError: CKPortError, Sendable {
    public var path: String
    /// One line each, without the path.
    public var problems: [String]
    public var category: ErrorCategory { .invalidInput }
    public var description: String { problems.map { "\(path): \($0)" }.joined(separator: "\n") }

    public init(path: String, _ problems: String...) {
        self.path = path
        self.problems = problems
    }
}

/// One voice for an input file that cannot be what an operation expects: the same words
/// whichever operation it was given to.
public enum InputFiles {
    /// Checks that `path` is a readable file that could be `kind` ("a schema", "JSON", "a
    /// bundle"…); throws ``InputFileError`` otherwise. Standard input (`-`) passes.
    public static func check(_ path: String, as kind: String, binary: Bool = false) throws {
        guard path != "-" else { return }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw InputFileError(path: path, "no such file")
        }
        if isDirectory.boolValue { throw InputFileError(path: path, "is a folder, not \(kind)") }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw InputFileError(path: path, "cannot be read (\(String(cString: strerror(errno))))") }
        defer { close(fd) }
        var head = [UInt8](repeating: 0, count: 8192)
        let count = head.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count >= 0 else {
            throw InputFileError(path: path, "cannot be read (\(String(cString: strerror(errno))))")
        }
        head.removeSubrange(count...)
        if binary {
            // A bundle is gzip data, or ckport's encrypted form of it.
            let gzip = head.starts(with: [0x1F, 0x8B])
            let encrypted = head.starts(with: Array("CKPORT-ENCRYPTED-BUNDLE".utf8))
            if count == 0 { throw InputFileError(path: path, "is empty, not \(kind)") }
            if !gzip && !encrypted {
                throw InputFileError(
                    path: path, "not \(kind) (a bundle is the gzip-compressed tar 'ckport backup' writes)")
            }
            return
        }
        if looksBinary(head) { throw InputFileError(path: path, "not \(kind): it holds binary data") }
    }

    /// Text holds no NUL byte and is UTF-8 (a sequence cut at the end of the sample is fine).
    public static func looksBinary(_ bytes: [UInt8]) -> Bool {
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

    /// The schema in a file (cktool's `DEFINE SCHEMA` text) and ckport's warnings about it:
    /// advice on a schema CloudKit accepts. A schema with errors, or one the store could not
    /// hold, throws.
    public static func readSchema(_ path: String) throws -> (schema: Schema, warnings: [SchemaDiagnostic]) {
        try check(path, as: "a schema")
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw InputFileError(path: path, "not a schema: it is not UTF-8 text")
        }
        let (schema, warnings) = try SchemaParser.check(text, file: path)
        let oversized = RecordStore.schemaProblems(schema)
        guard oversized.isEmpty else { throw InputFileError(path: path, problems: oversized) }
        return (schema, warnings)
    }
}

extension InputFileError {
    public init(path: String, problems: [String]) {
        self.path = path
        self.problems = problems
    }
}
