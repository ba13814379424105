import ArgumentParser
import CKPort
import Foundation
import Records
import SQLiteStore
import StoreCore

struct SharesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shares",
        abstract:
            "List what is shared: each share, the record it starts from, and who takes part with what permission.",
        discussion: """
              ckport shares
              ckport shares --scope shared --json | jq '.[].participants[].name'

            A share is a record of type cloudkit.share in the zone of what it shares. A share of a \
            hierarchy starts from a root record and carries every record whose parent chain leads \
            to it; a share of a zone (named cloudkit.zoneshare) carries the whole zone. For each \
            share ckport shows its title, the root, how many records it carries, who besides the \
            participants may open it (public), its URL when CloudKit gave one, and every \
            participant: name, role, permission and whether they accepted.
            """
    )

    @Option(help: "Only this database scope: private, shared or public.")
    var scope: DatabaseScope?

    @Option(help: "Only zones with this name.")
    var zone: String?

    @Flag(help: "Print JSON for scripts.")
    var json = false

    @OptionGroup var storeOptions: StoreOptions

    func run() async throws {
        let store = try storeOptions.open(create: false)
        let shares = try await store.readSession { try Shares.list($0, scope: scope, zoneName: zone) }
        if json {
            var out = JSONWriter()
            try out.encoded(shares)
            print(out.text)
            return
        }
        guard !shares.isEmpty else {
            print(
                "no shares\(scope.map { " in the \($0.rawValue) database" } ?? "")\(zone.map { " in zones named \(Console.clean($0))" } ?? "")"
            )
            return
        }
        for (index, share) in shares.enumerated() {
            if index > 0 { print("") }
            print(SharesCommand.describe(share))
        }
    }

    static func describe(_ share: StoredShare) -> String {
        var lines: [String] = []
        let zone = share.zone
        lines.append(
            "share   \(Console.clean(share.record.recordName)) in \(zone.scope.rawValue) zone \(Console.clean(zone.zoneName)) (owner \(Console.clean(zone.ownerRecordName)))"
        )
        if let title = share.title { lines.append("title   \(Console.clean(title))") }
        if share.isZoneWide {
            lines.append(
                "shares  the whole zone: \(Console.count(share.recordCount)) record\(share.recordCount == 1 ? "" : "s")"
            )
        } else if let root = share.root {
            lines.append(
                "shares  \(Console.clean(root.recordType)) \(Console.clean(root.recordName)) and what lies under it: \(Console.count(share.recordCount)) record\(share.recordCount == 1 ? "" : "s")"
            )
        } else {
            lines.append("shares  a root record the store does not hold")
        }
        lines.append("public  \(share.details?.publicPermission.map(Console.clean) ?? "not recorded")")
        if let url = share.details?.url { lines.append("url     \(Console.clean(url))") }
        let participants = share.participants
        if participants.isEmpty {
            lines.append("participants: none recorded")
        } else {
            let rows = participants.map { person in
                [
                    Console.clean(person.displayName), Console.clean(person.emailAddress ?? ""), person.type ?? "",
                    person.permission ?? "", person.acceptanceStatus ?? "",
                ]
            }
            let table = Console.table(["participant", "email", "role", "permission", "status"], rows, numeric: [])
            lines.append(
                table.split(separator: "\n", omittingEmptySubsequences: false).map { "  " + $0 }.joined(separator: "\n")
            )
        }
        return lines.joined(separator: "\n")
    }
}
