import ArgumentParser
import Foundation
import PostgresStore
import Store

struct UpgradeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upgrade",
        abstract: "Upgrade a store written by an older ckport to this ckport's format, in place.",
        discussion: """
              ckport upgrade --store family.sqlite

            Every command but serve upgrades the store it opens when it can write it, so this is \
            needed for a store that the user who reads it cannot write (run it once as its owner), \
            before serve (which only reads, and refuses an older store), or to upgrade at a time of \
            your choosing. The upgrade is one transaction: it finishes, or the \
            store stays as it was. Nothing is rewritten: format 2 adds the columns for records' \
            parent and share links and a share's details, empty until a pull, an import or a restore \
            fills them. An older ckport then refuses the store rather than drop them.
            """
    )

    @OptionGroup var storeOptions: StoreOptions

    func run() throws {
        let path = storeOptions.path
        let store = try StoreOptions.open(path, create: false, wait: storeOptions.wait, quiet: true)
        let format: Int
        let from: Int?
        if let sqlite = store as? RecordStore {
            (format, from) = (RecordStore.formatVersion, sqlite.upgradedFrom)
        } else if let postgres = store as? PostgresStore {
            (format, from) = (PostgresStore.format, postgres.upgradedFrom)
        } else {
            (format, from) = (RecordStore.formatVersion, nil)
        }
        if let from {
            print("upgraded \(Console.clean(path)) from store format \(from) to \(format)")
        } else {
            print("\(Console.clean(path)) is already store format \(format); nothing to do")
        }
    }
}
