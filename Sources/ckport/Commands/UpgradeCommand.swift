import ArgumentParser
import Foundation
import StoreCore

struct UpgradeCommand: AsyncParsableCommand {
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

    func run() async throws {
        let path = storeOptions.path
        let store = try StoreOptions.open(path, create: false, wait: storeOptions.wait, quiet: true)
        guard let versioned = store as? any VersionedStore else {
            print("\(Console.clean(path)) has no format of ckport's own; nothing to do")
            return
        }
        let format = versioned.formatVersion
        if let from = versioned.upgradedFrom {
            print("upgraded \(Console.clean(path)) from store format \(from) to \(format)")
        } else {
            print("\(Console.clean(path)) is already store format \(format); nothing to do")
        }
    }
}
