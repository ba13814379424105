import Foundation
import Records

/// An input a reader is made from: a file, standard input, or bytes in memory. A reader that
/// needs two passes (a calendar whose recurring events are expanded finds the overridden
/// occurrences first) opens it twice; standard input, which can be read once, is first kept
/// in a temporary file for that (see ``reopenable()``).
public struct RecordInput {
    /// The input's name in messages: its path, `-` for standard input.
    public let name: String
    /// Whether ``open()`` may be called more than once.
    public let isReopenable: Bool
    private let opener: () throws -> ByteInput
    /// Keeps a temporary copy of standard input alive while the input is in use.
    let spool: TemporarySpool?

    /// A file, or standard input for `-`.
    public static func file(_ path: String) -> RecordInput {
        RecordInput(name: path, isReopenable: path != "-", opener: { try ByteInput(path: path) }, spool: nil)
    }

    /// Bytes in memory.
    public static func bytes(_ bytes: [UInt8], name: String) -> RecordInput {
        RecordInput(name: name, isReopenable: true, opener: { ByteInput(name: name, bytes: bytes) }, spool: nil)
    }

    /// An input whose bytes `open` makes (another format's text converted as it is read, say).
    public static func converted(name: String, isReopenable: Bool, open: @escaping () throws -> ByteInput)
        -> RecordInput
    {
        RecordInput(name: name, isReopenable: isReopenable, opener: open, spool: nil)
    }

    /// Opens the input for reading from its start.
    public func open() throws -> ByteInput { try opener() }

    /// The input itself when it can be read twice; else (standard input) its bytes kept in a
    /// temporary file, in this process's private folder, that goes away with the last copy of
    /// the returned input (or, if this process is killed, with a later run's clean-up).
    public func reopenable() throws -> RecordInput {
        if isReopenable { return self }
        let spool = try TemporarySpool(copying: try open(), suffix: ".ics")
        let path = spool.path
        return RecordInput(name: name, isReopenable: true, opener: { try ByteInput(path: path) }, spool: spool)
    }
}

/// A temporary file holding a copy of an input, in this process's private folder; removed
/// when the last reference goes.
final class TemporarySpool {
    let path: String

    init(copying input: ByteInput, suffix: String) throws {
        let fd: Int32
        do {
            (fd, path) = try PrivateFiles.create("stdin-")
        } catch let error as PrivateFileError {
            throw OutputError(path: error.path, message: error.reason)
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        defer { try? handle.close() }
        do {
            repeat {
                if input.end > input.position {
                    try handle.write(contentsOf: Data(input.bytes(input.position, input.end)))
                    input.position = input.end
                }
            } while try input.fill()
        } catch {
            unlink(path)
            throw error
        }
    }

    deinit { unlink(path) }
}
