import ArgumentParser
import Foundation

// Parse errors exit 1 (ArgumentParser's own default is 64); the library's errors are sorted
// into 2 (invalid input, nothing written) and 3 (anything else).
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
    Console.error(message)
    exit(ExitStatus.usage.rawValue)
}
do {
    try command.run()
    exit(0)
} catch let exit as ExitCode {
    Foundation.exit(exit.rawValue)
} catch {
    let (status, message) = Failures.classify(error)
    Console.error("error: " + message)
    exit(status.rawValue)
}
