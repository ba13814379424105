import Foundation
import Records

/// The command line's words for the settings the library's messages mention: its flags.
/// Installed once, before any command runs.
enum CommandLineWords {
    static func install() {
        Wording.install(words)
    }

    @Sendable static func words(_ wording: Wording) -> String? {
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
