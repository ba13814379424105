import Foundation
import Testing

/// Programs the XML tests check ckport's output with: `xmllint` (libxml2-utils) and Python's
/// standard library. They are prerequisites of the tests (README, `.ci/run` installs them):
/// a missing one fails the test that needs it, never lets it pass.
enum ExternalTool {
    static func path(_ name: String) throws -> String {
        for folder in ["/usr/bin", "/usr/local/bin", "/bin"] where FileManager.default.isExecutableFile(atPath: folder + "/" + name) {
            return folder + "/" + name
        }
        Issue.record("\(name) is needed by this test and is not installed (apt-get install \(name == "xmllint" ? "libxml2-utils" : name))")
        throw CancellationError()
    }

    /// Runs a program; its exit status and what it printed (standard output and error).
    static func run(_ program: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        try run(executable: try path(program), arguments)
    }

    /// Runs the program at `executable`; its exit status and what it printed.
    static func run(executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-tool-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        process.waitUntilExit()
        try handle.close()
        return (process.terminationStatus, try String(contentsOf: output, encoding: .utf8))
    }
}
