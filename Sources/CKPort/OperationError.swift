/// Why an operation refused its request. Each case says it in terms of the data; a program or
/// the command line may say it in its own words (the command line names the flag to use).
public enum OperationError: CKPortError, Equatable {
    /// A bundle failed its check: the problems found, at most a screenful.
    case bundleNotSound(bundle: String, problems: [String])
    /// A restore was asked for with no bundle.
    case noBundles
    /// A chain starts with an incremental bundle but the store is not one an earlier restore
    /// filled (the restore was not given a write mode).
    case chainStartsIncremental(bundle: String, base: String)
    /// A full bundle follows another in a chain.
    case chainFullBundleInside(bundle: String, previous: String)
    /// Two bundles of a chain come from different stores.
    case chainFromOtherStore(bundle: String, store: String, previous: String, previousStore: String)
    /// A bundle does not start where the one before it ended; `missing` says whether one is
    /// missing between them (rather than the two being out of order or of other chains).
    case chainBroken(bundle: String, base: String, previous: String, previousEnd: String, missing: Bool)
    /// The store already holds records and the restore was given no write mode.
    case storeNotEmpty(store: String, records: Int)
    /// The bundle's schema lacks record types the store holds records of.
    case bundleOfAnotherSchema(bundle: String, missingTypes: [String], store: String)
    /// Encryption was asked for without a passphrase.
    case noPassphrase
    /// Records were to be checked against a schema, and there is none.
    case noSchema(store: String, storeExists: Bool)
    /// A strict import met what the records would not keep (a calendar mapping has no place for it).
    case inputNotKept([String])
    /// A record type that the schema does not define.
    case unknownRecordType(String, known: [String])
    /// Plain-style JSON cannot carry these fields, whose names are system keys of plain records.
    case plainStyleCollisions([String])
    /// A migration plan found records that would fail.
    case recordsWouldFail
    /// A record name that is live in several zones, none of them named.
    case ambiguousRecordName(String, zones: [String])
    /// A folder holds no migration files.
    case noMigrations(directory: String)
    /// A format cannot hold what the request asks of it.
    case formatCannotHold(format: String, what: String)

    public var category: ErrorCategory {
        switch self {
        case .noBundles, .storeNotEmpty, .noPassphrase, .formatCannotHold: return .usage
        default: return .invalidInput
        }
    }

    public var description: String { explanation.description }

    public var explanation: Message {
        switch self {
        case .bundleNotSound(let bundle, let problems):
            return Message(problems.joined(separator: "\n") + "\n\(bundle) is not sound")
        case .noBundles:
            return "name a bundle to restore"
        case .chainStartsIncremental(let bundle, let base):
            return
                "\(bundle) is incremental (it starts at \(base)); \(Wording.restoreBaseFirst)"
        case .chainFullBundleInside(let bundle, let previous):
            return "\(bundle) is a full bundle; only incremental bundles can follow \(previous) in a chain"
        case .chainFromOtherStore(let bundle, let store, let previous, let previousStore):
            return "\(bundle) comes from store \(store), \(previous) from \(previousStore): they are not one chain"
        case .chainBroken(let bundle, let base, let previous, let previousEnd, let missing):
            let what =
                missing
                ? "a bundle is missing between them (the one that starts at \(previousEnd))"
                : "they are in the wrong order, or \(bundle) belongs to another chain"
            return "\(bundle) starts at \(base), but \(previous) ends at \(previousEnd): \(what)"
        case .storeNotEmpty(let store, let records):
            return "the store \(store) already holds \(Counts.grouped(records)) records; \(Wording.restoreModes)"
        case .bundleOfAnotherSchema(let bundle, let missing, let store):
            return
                "\(bundle)'s schema has no record type \(missing.joined(separator: ", ")), which \(store) holds records of: it is the backup of another app or of another schema. Nothing was changed; \(Wording.storeOfItsOwn)"
        case .noPassphrase:
            return Message(.encryptionNeedsPassphrase)
        case .noSchema(let store, let exists):
            return
                "\(exists ? "the store \(store) has no schema yet" : "there is no store at \(store) yet"), so the records cannot be checked against one. "
                + "\(Wording.giveSchema). Nothing was written."
        case .inputNotKept(let items):
            return
                "\(Wording.strictImport): the mapping would not keep \(items.joined(separator: ", ")); nothing was imported (\(Wording.keepWhole))"
        case .unknownRecordType(let name, let known):
            return "unknown record type '\(name)' (the schema has \(known.joined(separator: ", ")))"
        case .plainStyleCollisions(let fields):
            return
                "\(Wording.plainStyle) cannot carry \(fields.joined(separator: ", ")): those field names are plain records' system keys; use \(Wording.canonicalStyle)"
        case .formatCannotHold(let format, let what):
            return "\(format) cannot hold \(what)"
        case .ambiguousRecordName(let name, let zones):
            return "'\(name)' is in several zones (\(zones.joined(separator: ", "))); \(Wording.chooseZone)"
        case .noMigrations(let directory):
            return
                "\(directory): no migration files found (a set is files named NNNN_description.yaml, such as migrations/notes/0001_baseline.yaml)"
        case .recordsWouldFail:
            return "some records would fail: apply would stop at the first of them and change nothing in that migration"
        }
    }
}
