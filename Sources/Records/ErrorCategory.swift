/// What kind of failure an error is. A program decides from it how to react; the command line
/// maps it to an exit status (usage 1, invalid input 2, environment and internal 3,
/// authentication 4).
public enum ErrorCategory: String, Sendable, CaseIterable {
    /// The request contradicts itself or asks for something that does not exist (an unknown
    /// record type, a query a schema cannot answer, settings that cannot go together).
    case usage
    /// The data is wrong: a file, a schema, a bundle, a record, a migration. Nothing was written.
    case invalidInput
    /// Something outside the data stood in the way: the disk, permissions, another process,
    /// an interruption.
    case environment
    /// The store is damaged or ckport itself is wrong.
    case `internal`
    /// A server refused who the request says it comes from: a web auth token that expired or
    /// was never valid, a key it does not know. Signing in again is the remedy; nothing was
    /// written.
    case authentication
}

/// An error of the ckport library: it says what went wrong in terms of the data (never of
/// command-line flags) and which kind of failure it is.
public protocol CKPortError: Error, CustomStringConvertible {
    var category: ErrorCategory { get }
    /// What the error says, with the settings and remedies it mentions kept apart from its
    /// words (``Wording``): ``description`` is it in the library's words, and a front end says
    /// it its own way with ``Message/worded(_:)``. An error that mentions none need not
    /// provide it.
    var explanation: Message { get }
}
