import Records

/// Errors of the record store itself (input errors are `InputError`).
public enum StoreError: CKPortError, Sendable {
    public var category: ErrorCategory {
        switch self {
        case .badQuery, .badToken, .deleteRefused, .schemaChangeRefused: return .invalidInput
        case .missing, .notAStore, .unsupportedFormat, .needsUpgrade, .readOnlyNeedsUpgrade, .cannotWrite, .busy,
            .unavailable:
            return .environment
        case .corrupt: return .internal
        }
    }

    /// No store at the path, for a command that only reads.
    case missing(path: String)
    /// The file exists but is not a ckport store.
    case notAStore(path: String, reason: String)
    /// The store was written by a newer ckport.
    case unsupportedFormat(path: String, version: Int)
    /// The store was written by an older ckport and must be upgraded, which needs write access.
    case needsUpgrade(path: String, version: Int, reason: String)
    /// A store of an older format opened only to read (an upgrade would write).
    case readOnlyNeedsUpgrade(path: String, version: Int)
    /// The store holds something it should not; the message says what.
    case corrupt(String)
    /// A schema change the stored records do not allow.
    case schemaChangeRefused([String])
    /// A change token that does not belong to this store or is not a token.
    case badToken(Message)
    /// A delete refused by a VALIDATE reference.
    case deleteRefused(String)
    /// A query that cannot run against this schema; `position` is a column in the query text.
    case badQuery(Message)
    /// The store file could not be written (a full disk, a file size limit, an I/O error);
    /// the transaction was rolled back.
    case cannotWrite(path: String, reason: String)
    /// Another process kept writing to the store for longer than this one would wait.
    case busy(path: String, seconds: Double)
    /// The store cannot be opened or written for a reason outside it (permissions, a missing
    /// folder).
    case unavailable(path: String, reason: String)

    public var description: String { explanation.description }

    public var explanation: Message {
        switch self {
        case .missing(let path):
            return "no store at \(path) (\(Wording.createStore(path: path)))"
        case .notAStore(let path, let reason):
            return "\(path) is not a ckport store: \(reason)"
        case .unsupportedFormat(let path, let version):
            return "\(path) was written by a newer ckport (store format \(version)); upgrade ckport to read it"
        case .needsUpgrade(let path, let version, let reason):
            return
                "\(path) was written by an older ckport (store format \(version)) and is upgraded in place when opened, but \(reason); "
                + Message(.upgradeStore(path: path))
        case .readOnlyNeedsUpgrade(let path, let version):
            return
                "\(path) was written by an older ckport (store format \(version)), and this command only reads, while an upgrade writes; "
                + Message(.upgradeStoreFirst(path: path))
        case .corrupt(let message):
            return "the store is damaged: \(message)"
        case .schemaChangeRefused(let reasons):
            return Message(
                "the schema change is refused; nothing was changed:\n"
                    + reasons.map { "  - " + $0 }.joined(separator: "\n"))
        case .badToken(let message):
            return message
        case .deleteRefused(let message):
            return Message(message)
        case .badQuery(let message):
            return message
        case .cannotWrite(let path, let reason):
            return
                "cannot write to the store \(path) (\(reason)): the disk may be full, or a file size limit reached. The change was rolled back; the store is as it was before it."
        case .busy(let path, let seconds):
            return
                "another process is still writing to the store \(path) after \(seconds < 10 ? String(format: "%.1f", seconds) : String(Int(seconds))) s of waiting; nothing was changed (\(Wording.waitLonger))"
        case .unavailable(let path, let reason):
            return "cannot use the store \(path): \(reason)"
        }
    }
}
