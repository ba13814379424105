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
    /// decides the status; the command line adds what only it can say (the flag to use).
    static func classify(_ error: Error) -> (ExitStatus, String) {
        switch error {
        case let failure as CommandFailure:
            return (failure.status, failure.message)
        case let failure as RecordFailure:
            return (
                ExitStatus(failure.category),
                "\(failure)\nthe migration was rolled back: the store is as it was before it"
            )
        case let error as StoreError:
            if case .busy = error {
                return (ExitStatus(error.category), error.description + " (--wait SECONDS waits longer)")
            }
            return (ExitStatus(error.category), error.description)
        case let error as OperationError:
            return (ExitStatus(error.category), commandLineMessage(error))
        case let error as RecordInAnotherZone:
            let zone = error.stored
            let flags =
                "--zone \(zone.zoneName)" + (zone.scope == .private ? "" : " --scope \(zone.scope.rawValue)")
                + (zone.ownerRecordName == ZoneID.defaultOwnerName ? "" : " --owner \(zone.ownerRecordName)")
            return (
                ExitStatus(error.category),
                error.description
                    + " (give the rows' zone, \(flags), or export with --system, whose columns name each row's zone)"
            )
        case let error as any CKPortError:
            return (ExitStatus(error.category), error.description)
        default:
            return (.failure, "\(error)")
        }
    }
}

extension Failures {
    /// An operation's refusal as the command line says it: where the library speaks of a
    /// setting, the command line names its flag.
    static func commandLineMessage(_ error: OperationError) -> String {
        switch error {
        case .chainStartsIncremental(let bundle, let base):
            return
                "\(bundle) is incremental (it starts at \(base)); restore the full bundle it builds on first, or pass --mode to apply it to a store restored earlier"
        case .storeNotEmpty(let store, let records):
            return
                "the store \(store) already holds \(Console.count(records)) records; pass --mode upsert, replace or newer to restore into it"
        case .bundleOfAnotherSchema:
            return error.description + " (--store NEW.sqlite)"
        case .noPassphrase:
            return "--encrypt needs a passphrase: --passphrase-file FILE, or $CKPORT_PASSPHRASE"
        case .noSchema(let store, let exists):
            return
                "\(exists ? "the store \(store) has no schema yet" : "there is no store at \(store) yet"), so the records cannot be checked against one. "
                + "Import a schema first ('ckport schema import schema.ckdb'), or name the schema file beside the records "
                + "('ckport import schema.ckdb records.jsonl'), or let the records build one with --allow-new-fields. Nothing was written."
        case .inputNotKept(let items):
            return "--strict: the mapping would not keep " + items.joined(separator: ", ")
                + "; nothing was imported (--mapping archive keeps a calendar whole)"
        case .plainStyleCollisions(let fields):
            return
                "--style plain cannot export \(fields.joined(separator: ", ")): those field names are plain records' system keys; use --style canonical"
        case .ambiguousRecordName(let name, let zones):
            return "'\(name)' is in several zones (\(zones.joined(separator: ", "))); pick one with --zone and --scope"
        default:
            return error.description
        }
    }
}
