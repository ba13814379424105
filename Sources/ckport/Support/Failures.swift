import ArgumentParser
import CKPort
import Formats
import Migrations
import Records
import SQLiteStore
import StoreCore

/// The exit statuses ckport promises.
enum ExitStatus: Int32 {
    case done = 0
    case usage = 1
    case invalidInput = 2
    case failure = 3
    /// CloudKit refused the credentials: sign in again (`ckport cloud login`).
    case signIn = 4
}

/// An error that already knows its exit status and message.
struct CommandFailure: Error, CustomStringConvertible {
    var status: ExitStatus
    var message: String
    var description: String { message }

    static func invalid(_ message: String) -> CommandFailure { CommandFailure(status: .invalidInput, message: message) }
    static func usage(_ message: String) -> CommandFailure { CommandFailure(status: .usage, message: message) }
}

extension ExitStatus {
    /// The exit status of a library error's category.
    init(_ category: ErrorCategory) {
        switch category {
        case .usage: self = .usage
        case .invalidInput: self = .invalidInput
        case .environment, .internal: self = .failure
        case .authentication: self = .signIn
        }
    }
}

enum Failures {
    /// Whether the error comes from ckport rather than from argument parsing.
    static func isLibraryError(_ error: Error) -> Bool {
        error is CommandFailure || error is any CKPortError
    }

    /// How an error from the library reads, and the status it exits with: its category
    /// decides the status; the settings it mentions are said as the command line's flags.
    static func classify(_ error: Error) -> (ExitStatus, String) {
        switch error {
        case let failure as CommandFailure:
            return (failure.status, failure.message)
        case let failure as RecordFailure:
            return (
                ExitStatus(failure.category),
                "\(failure.commandLine)\nthe migration was rolled back: the store is as it was before it"
            )
        case let error as any CKPortError:
            return (ExitStatus(error.category), error.commandLine)
        default:
            return (.failure, "\(error)")
        }
    }
}
