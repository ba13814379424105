import Foundation

/// A setting or a remedy a message mentions, kept apart from the message's words: the library
/// says it in terms of the data (``dataText``: "allow new fields to add it to the schema"); a
/// front end that names its settings otherwise — the command line, with its flags — says it
/// its own way when it shows the message (``Message/worded(_:)``).
public enum Wording: Sendable, Hashable, Codable {
    /// A field the schema lacks could be added.
    case allowNewFields
    /// A record a pull met names a field or type the schema lacks: a pull could add it.
    case allowNewTypes
    /// A change token of another store: start again from everything.
    case startNewChangeChain
    /// There is no store at `path` yet.
    case createStore(path: String)
    /// An insert met a record that exists.
    case updatingModes
    /// The predicate `text` given to select records.
    case predicate(String)
    /// A predicate, as the subject of a sentence.
    case predicateWord
    /// Sorting by `field`.
    case sortField(String)
    /// Record types to choose from.
    case chooseRecordTypes
    /// A Core Data model with several versions and none marked current.
    case chooseModelVersion
    /// Invalid records could be skipped.
    case skipInvalid
    /// The window recurring events are expanded in.
    case expansionWindow
    /// A recurring component was kept once: it could be expanded instead.
    case expandForOccurrences
    /// A rule ckport cannot expand: import it without expanding.
    case importWithoutExpanding
    /// Calendars could be kept whole (the archive mapping), or a strict import would refuse.
    case keepWholeOrRefuse
    /// The archive mapping keeps a calendar whole.
    case keepWhole
    /// The archive holds nothing yet: import calendars through the archive mapping first.
    case importIntoArchive
    /// The value `field=text` every imported record gets.
    case fixedField(field: String, text: String)
    /// Where an encrypted bundle's passphrase comes from (empty by default).
    case passphraseSource
    /// Records that name no record type could be given one.
    case defaultRecordType
    /// The same, for CSV rows.
    case giveRecordType
    /// The fields a CSV export writes.
    case fieldList
    /// A CSV column that is not a field: map it, or let it pass.
    case mapColumn(header: String)
    /// How to send a column the column map already renames to a field that exists.
    case remapColumn(header: String)
    /// The template `text` record names are made from.
    case nameTemplate(String)
    /// The name template, as the subject of a sentence.
    case nameTemplateWord
    /// An applied migration file was edited: accept the edit on purpose.
    case repairHistory
    /// A migration would change append-only records: do it anyway.
    case forceAppendOnly
    /// A record CloudKit never saw cannot be updated there: create it, or overwrite.
    case createOrForcePush
    /// Asset bytes the store lacks: pull them, or update without them.
    case keepAssetBytes
    /// A passphrase was given for a bundle that is not encrypted.
    case allowUnencrypted
    /// A web auth token expired or was refused: sign in for a new one.
    case signInAgain
    /// A store of an older format that this user cannot upgrade: upgrade it as its owner.
    case upgradeStore(path: String)
    /// A store of an older format opened only to read: upgrade it first.
    case upgradeStoreFirst(path: String)
    /// A push in a mode that changes records only (`mode` is update or replace).
    case pushMode(String)
    /// How long a write or read waits for a lock another holds.
    case storeWait
    /// Another writer held the store longer than this one waited: wait longer.
    case waitLonger
    /// An incremental bundle restored first: restore its base, or apply it with a write mode.
    case restoreBaseFirst
    /// A restore into a store that holds records needs a write mode.
    case restoreModes
    /// A bundle of another schema goes into a store of its own.
    case storeOfItsOwn
    /// Encryption asked for without a passphrase.
    case encryptionNeedsPassphrase
    /// Records checked against a schema the store does not have: where one can come from.
    case giveSchema
    /// A strict import, which refuses what the records would not keep.
    case strictImport
    /// Plain-style JSON records.
    case plainStyle
    /// Canonical-style JSON records.
    case canonicalStyle
    /// A record name in several zones: name the zone and scope.
    case chooseZone
    /// Rows whose file names no zone, of a record the store holds in `zone`: name it.
    case giveRowsZone(ZoneID)
    /// A repository holds snapshots of several stores: choose one by its store id.
    case sourceChoice

    /// The library's own words, which speak of the data.
    public var dataText: String {
        switch self {
        case .allowNewFields: return "allow new fields to add it to the schema"
        case .allowNewTypes: return "pull again allowing new types to add it to the schema"
        case .startNewChangeChain: return "export everything, without a change token, to start a new chain"
        case .createStore: return "create one by importing a schema into it"
        case .updatingModes: return "the insert mode adds new records only; upsert, replace or newer update them"
        case .predicate(let text): return "predicate \"\(text)\""
        case .predicateWord: return "the predicate"
        case .sortField(let field): return "sorting by \(field)"
        case .chooseRecordTypes: return "choose the record types"
        case .chooseModelVersion: return "name the version to read"
        case .skipInvalid: return "skip invalid records, keeping them in a rejects file, to import the valid ones"
        case .signInAgain: return "sign in again for a new web auth token"
        case .allowUnencrypted:
            return "read it without a passphrase, or allow unencrypted bundles, if it is the one you meant"
        case .createOrForcePush: return "push it as a new record, or overwrite what CloudKit holds"
        case .keepAssetBytes:
            return "pull with the asset files to keep them; an update leaves CloudKit's copy of such a field as it is"
        case .expansionWindow: return "the expansion window"
        case .expandForOccurrences: return "expand them in a window for their occurrences, or map RRULE to a field"
        case .importWithoutExpanding:
            return "import without expanding to keep the component with its rule, or through the archive mapping"
        case .keepWholeOrRefuse:
            return "the archive mapping keeps a calendar whole; a strict import refuses what the mapping would not keep"
        case .keepWhole: return "a calendar is kept whole by the archive mapping"
        case .importIntoArchive: return "import calendars through the archive mapping first"
        case .fixedField(let field, let text): return "the value \(field)=\(text) given to every record"
        case .passphraseSource: return ""
        case .sourceChoice: return " by its store id"
        case .defaultRecordType: return "or a default record type"
        case .giveRecordType: return "name a default record type"
        case .fieldList: return "the fields to write"
        case .mapColumn: return "map it to a field, or let columns that are not fields pass"
        case .remapColumn: return "map it to one of those fields"
        case .nameTemplate(let text): return "the name template \"\(text)\""
        case .nameTemplateWord: return "the name template"
        case .repairHistory: return "or repair the history to accept the edit on purpose"
        case .forceAppendOnly: return "force the migration to do it anyway"
        case .upgradeStore: return "open it once as a user who can write it, which upgrades it"
        case .upgradeStoreFirst: return "upgrade it first, by opening it once to write"
        case .pushMode(let mode): return "a push in \(mode) mode"
        case .storeWait: return "the store's wait"
        case .waitLonger: return "a longer wait may outlast it"
        case .restoreBaseFirst:
            return
                "restore the full bundle it builds on first, or apply it to a store restored earlier (with a write mode)"
        case .restoreModes: return "restoring into it needs a write mode (upsert, replace or newer)"
        case .storeOfItsOwn: return "restore it into a store of its own"
        case .encryptionNeedsPassphrase: return "an encrypted bundle needs a passphrase"
        case .giveSchema:
            return
                "Import a schema first, or give the schema with the records, or let the records build one (new fields allowed)"
        case .strictImport: return "a strict import"
        case .plainStyle: return "plain-style records"
        case .canonicalStyle: return "the canonical style"
        case .chooseZone: return "name its zone and scope"
        case .giveRowsZone(let zone):
            return
                "name the rows' zone (the \(zone.scope.rawValue) zone \(zone.zoneName)), or export with the system columns, which name each row's zone"
        }
    }
}

extension DefaultStringInterpolation {
    /// A wording's words are chosen where a message is shown: it goes into a ``Message``, never
    /// into a string (deprecated rather than unavailable, which would only make the compiler
    /// pick the generic interpolation instead; warnings are errors in CI).
    @available(*, deprecated, message: "interpolate a Wording into a Message, which a front end words")
    public mutating func appendInterpolation(_ wording: Wording) {
        appendLiteral(wording.dataText)
    }
}
