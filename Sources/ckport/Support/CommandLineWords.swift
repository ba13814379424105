import Foundation
import Records

/// The command line's words for the settings the library's messages mention: its flags. Said
/// where a message is shown (``Records/Message/commandLine``), once.
enum CommandLineWords {
    static func words(_ wording: Wording) -> String? {
        switch wording {
        case .allowNewFields: return "use --allow-new-fields to add it to the schema"
        case .allowNewTypes: return "use --allow-new-types to add it to the schema"
        case .startNewChangeChain: return "export without --since to start a new chain"
        case .createStore(let path): return "create one with 'ckport schema import schema.ckdb --store \(path)'"
        case .updatingModes: return "mode insert adds new records only; use --mode upsert, replace or newer"
        case .predicate(let text): return "--where \"\(text)\""
        case .predicateWord: return "--where"
        case .sortField(let field): return "--sort \(field)"
        case .chooseRecordTypes: return "pick the record types with --type"
        case .chooseModelVersion: return "name one with --version"
        case .skipInvalid: return "use --skip-invalid --rejects FILE to import the valid records"
        case .expansionWindow: return "--expand"
        case .expandForOccurrences: return "pass --expand FROM..TO for their occurrences, or map RRULE to a field"
        case .importWithoutExpanding:
            return "import without --expand to keep the component with its rule, or with --mapping archive"
        case .keepWholeOrRefuse: return "--mapping archive keeps a calendar whole; --strict refuses the import"
        case .importIntoArchive: return "import .ics files with --mapping archive first"
        case .fixedField(let field, let text): return "--set \(field)=\(text)"
        case .passphraseSource: return " (--passphrase-file FILE, or $CKPORT_PASSPHRASE)"
        case .sourceChoice: return " with --source STORE-ID (the store ids 'ckport snapshots' shows)"
        case .defaultRecordType: return "or pass --type"
        case .giveRecordType: return "give --type"
        case .fieldList: return "--fields"
        case .mapColumn(let header): return "rename it with --map \"\(header)=field\" or pass --ignore-columns"
        case .remapColumn(let header): return "give --map \"\(header)=field\" one of those fields"
        case .nameTemplate(let text): return "--name-template \"\(text)\""
        case .nameTemplateWord: return "--name-template"
        case .repairHistory: return "or pass --repair to accept the edit on purpose"
        case .forceAppendOnly: return "--force to do it anyway"
        case .signInAgain:
            return
                "sign in again with 'ckport cloud login' (the same --container, --environment, --api-token-file and --web-auth-token-file)"
        case .allowUnencrypted:
            return "if it is the one you meant, pass --allow-unencrypted (or leave out the passphrase)"
        case .createOrForcePush: return "push it with --mode create, or overwrite with --force"
        case .upgradeStore(let path):
            return "upgrade it once as a user who can write it: ckport upgrade --store \(shellWord(path))"
        case .upgradeStoreFirst(let path): return "upgrade it first: ckport upgrade --store \(shellWord(path))"
        case .pushMode(let mode): return "a push with --mode \(mode)"
        case .storeWait: return "--wait"
        case .waitLonger: return "--wait SECONDS waits longer"
        case .restoreBaseFirst:
            return "restore the full bundle it builds on first, or pass --mode to apply it to a store restored earlier"
        case .restoreModes: return "pass --mode upsert, replace or newer to restore into it"
        case .storeOfItsOwn: return "restore it into a store of its own (--store NEW.sqlite)"
        case .encryptionNeedsPassphrase:
            return "--encrypt needs a passphrase: --passphrase-file FILE, or $CKPORT_PASSPHRASE"
        case .giveSchema:
            return
                "Import a schema first ('ckport schema import schema.ckdb'), or name the schema file beside the records ('ckport import schema.ckdb records.jsonl'), or let the records build one with --allow-new-fields"
        case .strictImport: return "--strict"
        case .keepWhole: return "--mapping archive keeps a calendar whole"
        case .plainStyle: return "--style plain"
        case .canonicalStyle: return "--style canonical"
        case .chooseZone: return "pick one with --zone and --scope"
        case .giveRowsZone(let zone):
            let flags =
                "--zone \(zone.zoneName)" + (zone.scope == .private ? "" : " --scope \(zone.scope.rawValue)")
                + (zone.ownerRecordName == ZoneID.defaultOwnerName ? "" : " --owner \(zone.ownerRecordName)")
            return "give the rows' zone, \(flags), or export with --system, whose columns name each row's zone"
        case .keepAssetBytes:
            return "pull with --assets to keep them; --mode update leaves CloudKit's copy of such a field as it is"
        }
    }

    /// A path or URL as one word of a shell command, given as an option's value: as it is
    /// when no shell would change it, else in single quotes (a store's URL holds `?` and `&`).
    /// A relative path that begins with `-` gets `./` before it, so that it is not read as an
    /// option.
    static func shellWord(_ text: String) -> String {
        let text = text.hasPrefix("-") ? "./" + text : text
        let plain =
            !text.isEmpty && !text.hasPrefix("=") && !text.hasPrefix("~")
            && text.unicodeScalars.allSatisfy { scalar in
                scalar.isASCII
                    && (CharacterSet.alphanumerics.contains(scalar) || "_./:@%+=,-".unicodeScalars.contains(scalar))
            }
        return plain ? text : "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}

extension Message {
    /// The message as the command line says it: each setting it mentions by its flag.
    var commandLine: String { worded(CommandLineWords.words) }
}

extension CKPortError {
    /// The error as the command line says it.
    var commandLine: String { explanation.commandLine }
}
