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
    // A mistyped command or option gets the nearest real name instead of a guess.
    Console.error(Suggestions.check(arguments, root: CKPortCommand.self) ?? message)
    exit(ExitStatus.usage.rawValue)
}
do {
    try command.run()
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
            Console.error(CKPortCommand.fullMessage(for: error))
            exit(ExitStatus.usage.rawValue)
        }
    }
    let (status, message) = Failures.classify(error)
    Console.error("error: " + message)
    exit(status.rawValue)
}
