import ArgumentParser
import Foundation
import Records
import SQLiteStore
import StoreCore

// Parse errors exit 1 (ArgumentParser's own default is 64); the library's errors are sorted
// into 2 (invalid input, nothing written) and 3 (anything else).
// Ctrl-C and SIGTERM are caught from the start: one that comes before the command runs waits
// for it (``runAndExit(_:)``), which then stops at once and cleanly.
Interruption.install()
let arguments = Array(CommandLine.arguments.dropFirst())
var command: ParsableCommand
do {
    command = try CKPortCommand.parseAsRoot(arguments)
} catch {
    let code = CKPortCommand.exitCode(for: error)
    let message = CKPortCommand.fullMessage(for: error)
    if code == .success {
        print(message)
        exit(0)
    }
    // A mistyped command or option gets the nearest real name instead of a guess.
    Console.error(Suggestions.check(arguments, root: CKPortCommand.self) ?? CKPortCommand.lowercased(message))
    exit(ExitStatus.usage.rawValue)
}
/// Runs the command and exits with its status. The command is one operation: Ctrl-C or
/// SIGTERM cancels it (and its task, so that what waits on the network stops waiting), and it
/// stops where it can stop cleanly.
func runAndExit(_ command: sending ParsableCommand) async -> Never {
    let operation = Cancellation(inside: nil)
    let work = Task {
        try await Cancellation.$current.withValue(operation) { try await run(command) }
    }
    Interruption.whenInterrupted { signal in
        operation.cancel(signal: signal)
        work.cancel()
    }
    do {
        try await work.value
        if operation.isCancelled { interrupted() }
        exit(0)
    } catch let exit as ExitCode {
        Foundation.exit(exit.rawValue)
    } catch {
        // Help and argument errors can surface here too (ArgumentParser's own help command).
        if !Failures.isLibraryError(error) {
            let code = CKPortCommand.exitCode(for: error)
            if code == .success {
                print(CKPortCommand.fullMessage(for: error))
                exit(0)
            }
            if code == .validationFailure {
                Console.error(CKPortCommand.lowercased(CKPortCommand.fullMessage(for: error)))
                exit(ExitStatus.usage.rawValue)
            }
        }
        if error is InterruptedError || operation.isCancelled { interrupted() }
        let (status, message) = Failures.classify(error)
        Console.error("error: " + message)
        exit(status.rawValue)
    }
}

/// Runs the command the arguments named: every command's `run` is asynchronous.
func run(_ command: ParsableCommand) async throws {
    var command = command
    if var asyncCommand = command as? AsyncParsableCommand {
        try await asyncCommand.run()
    } else {
        try command.run()
    }
}

/// Ctrl-C or SIGTERM: the work has stopped and cleaned up (a write rolled back, outputs
/// discarded); end the progress line, say what happened and exit 130, as shells expect.
func interrupted() -> Never {
    if Console.stderrIsTerminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    let words = arguments.filter { !$0.hasPrefix("-") }.prefix(2)
    let what: String
    switch words.first {
    case "import", "restore", "delete":
        what = "nothing was written; the store is as it was"
    case "schema" where words.dropFirst().first == "import":
        what = "the schema change was rolled back; the store is as it was"
    case "export", "backup", "generate":
        what = "no output was left behind"
    case "migrate" where words.dropFirst().first == "apply":
        what =
            "the migration that was running was rolled back; migrations applied before it stay ('ckport migrate status' shows the store's version)"
    default:
        what = "stopped"
    }
    Console.error("interrupted: " + what)
    exit(130)
}

extension CKPortCommand {
    /// ArgumentParser's "Error: …" as ckport's own errors say it: "error: …".
    static func lowercased(_ message: String) -> String {
        message.hasPrefix("Error: ") ? "error: " + message.dropFirst("Error: ".count) : message
    }
}

// Last, after every declaration above: it does not return.
await runAndExit(command)
