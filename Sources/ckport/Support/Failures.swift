import ArgumentParser
import Formats
import Migrations
import Records
import Store

/// The exit statuses ckport promises.
enum ExitStatus: Int32 {
    case done = 0
    case usage = 1
    case invalidInput = 2
    case failure = 3
}

/// An error that already knows its exit status and message.
struct CommandFailure: Error, CustomStringConvertible {
    var status: ExitStatus
    var message: String
    var description: String { message }

    static func invalid(_ message: String) -> CommandFailure { CommandFailure(status: .invalidInput, message: message) }
    static func usage(_ message: String) -> CommandFailure { CommandFailure(status: .usage, message: message) }
}

enum Failures {
    /// Whether the error comes from ckport rather than from argument parsing.
    static func isLibraryError(_ error: Error) -> Bool {
        error is CommandFailure || error is ImportFailure || error is InputIssue || error is SchemaError
            || error is OutputError || error is StoreError || error is ArchiveError || error is BundleError
            || error is MigrationError || error is RecordFailure || error is AssetError || error is SaveRefusal
    }

    /// How an error from the library reads, and the status it exits with.
    static func classify(_ error: Error) -> (ExitStatus, String) {
        switch error {
        case let failure as CommandFailure: return (failure.status, failure.message)
        case let failure as ImportFailure: return (.invalidInput, failure.description)
        case let issue as InputIssue: return (.invalidInput, issue.description)
        case let error as SchemaError: return (.invalidInput, error.description)
        case let error as OutputError: return (.failure, error.description)
        case let error as ArchiveError: return (.invalidInput, error.description)
        case let error as BundleError: return (.invalidInput, error.description)
        case let error as MigrationError: return (.invalidInput, error.description)
        case let failure as RecordFailure: return (.invalidInput, "\(failure)\nthe migration was rolled back: the store is as it was before it")
        case let error as AssetError: return (.invalidInput, error.description)
        case let refusal as SaveRefusal: return (.invalidInput, refusal.message)
        case let error as StoreError:
            switch error {
            case .badQuery, .badToken, .deleteRefused, .schemaChangeRefused: return (.invalidInput, error.description)
            case .busy: return (.failure, error.description + " (--wait SECONDS waits longer)")
            default: return (.failure, error.description)
            }
        default: return (.failure, "\(error)")
        }
    }
}
