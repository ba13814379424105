import Foundation
import Testing

/// Programs the XML tests check ckport's output with: `xmllint` (libxml2-utils) and Python's
/// standard library. They are prerequisites of the tests (README, `.ci/run` installs them):
/// a missing one fails the test that needs it, never lets it pass.
public enum ExternalTool {
    public static func path(_ name: String) throws -> String {
        for folder in ["/usr/bin", "/usr/local/bin", "/bin"]
        where FileManager.default.isExecutableFile(atPath: folder + "/" + name) {
            return folder + "/" + name
        }
        Issue.record(
            "\(name) is needed by this test and is not installed (apt-get install \(name == "xmllint" ? "libxml2-utils" : name))"
        )
        throw CancellationError()
    }

    /// Runs a program; its exit status and what it printed (standard output and error).
    public static func run(_ program: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        try run(executable: try path(program), arguments)
    }

    /// Runs the program at `executable`; its exit status and what it printed.
    public static func run(executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
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

/// The independent RFC 5545 checker beside the package (../shared/conformance), with its venv.
public enum Conformance {
    public static var python: String? {
        let venv =
            ProcessInfo.processInfo.environment["ICAL_CHECK_VENV"] ?? (NSHomeDirectory() + "/.cache/ical-check-venv")
        let path = venv + "/bin/python"
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }

    public static var checker: String? {
        let path = packageRoot.deletingLastPathComponent().appendingPathComponent("shared/conformance/ical_check.py")
            .path
        return FileManager.default.fileExists(atPath: path) ? path : nil
    }

    public static func run(_ python: String, _ arguments: [String]) throws -> (Int32, String) {
        try ExternalTool.run(executable: python, arguments)
    }

    /// CI sets CKPORT_CONFORMANCE=required once it has set the checker up, so that a missing
    /// checker fails there instead of skipping.
    public static var required: Bool { ProcessInfo.processInfo.environment["CKPORT_CONFORMANCE"] == "required" }

    /// Runs the checker on a file. When the checker is not set up here, the test stops as
    /// cancelled — shown as skipped, with the reason, never as passed — or, where CI requires the
    /// checker, fails.
    public static func check(_ path: String) throws -> (Int32, String)? {
        guard let python, let checker else {
            try missing()
        }
        return try run(python, [checker, "--quiet", path])
    }

    /// Python with icalendar (the checker's venv), or the test stops as ``check(_:)`` says.
    public static func requirePython() throws -> String {
        guard let python else { try missing() }
        return python
    }

    private static func missing() throws -> Never {
        if required {
            Issue.record("CKPORT_CONFORMANCE=required, but the RFC 5545 checker or its venv is missing")
            throw CancellationError()
        }
        try Test.cancel("the RFC 5545 checker is not set up here (../shared/conformance/setup.sh); skipped")
    }
}
