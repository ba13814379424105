import Foundation
import SQLiteStore
import StoreCore
import TestSupport
import Testing

/// Sharing on the command line: the shares command, and files of the format before records
/// had parent and share links (Tests/Fixtures/format-1, written by that ckport) still working.
@Suite("sharing and older files")
struct SharingCommandTests {
    static let fixtures = packageRoot.appendingPathComponent("Tests/Fixtures/format-1")
    func fixture(_ name: String) -> String { Self.fixtures.appendingPathComponent(name).path }

    @Test(
        "serve, which only reads, refuses a store of format 1 unchanged with the command that upgrades it (its path quoted for the shell), instead of upgrading it"
    )
    func serveDoesNotUpgrade() throws {
        let folder = Scratch()
        try FileManager.default.copyItem(
            atPath: fixture("family-todo.sqlite"), toPath: folder.path("old family.sqlite"))
        let before = folder.data("old family.sqlite")
        // Run aside, so that a serve that did start serving fails the test instead of hanging it.
        let serving = try RunningCKPort(["serve", "--store", "old family.sqlite", "--port", "0"], in: folder.url)
        let ended = eventually(60) { !serving.process.isRunning }
        if !ended { serving.process.terminate() }
        let run = serving.finish()
        #expect(ended, "serve started serving a store of format 1")
        #expect(run.status == 3, "\(run.stderr)")
        #expect(
            run.stderr.contains("was written by an older ckport (store format 1)")
                && run.stderr.contains("this command only reads")
                && run.stderr.contains("upgrade it first: ckport upgrade --store 'old family.sqlite'"), "\(run.stderr)")
        #expect(!run.stdout.contains("serving"))
        #expect(folder.data("old family.sqlite") == before)
        // Once upgraded, it is served.
        #expect(try ckport(["upgrade", "--store", "old family.sqlite"], in: folder.url).status == 0)
        let upgraded = try RecordStore(path: folder.path("old family.sqlite"), create: false, upgrade: false)
        #expect(upgraded.upgradedFrom == nil)
    }

    @Test(
        "a store of format 1 is upgraded in place by the first command that can write it, reading as before; one that cannot is refused, unchanged, with the command that upgrades it"
    )
    func oldStore() throws {
        let folder = Scratch()
        let expected = try String(contentsOfFile: fixture("family-todo.jsonl"), encoding: .utf8)
        try FileManager.default.copyItem(atPath: fixture("family-todo.sqlite"), toPath: folder.path("old.sqlite"))
        // Readable by a second user, writable only by its owner (in a folder anyone may write,
        // as SQLite's readers of a write-ahead log need).
        chmod(folder.url.path, 0o777)
        chmod(folder.path("old.sqlite"), 0o644)
        let before = folder.data("old.sqlite")
        let reader = try asNobody([ckportBinary.path, "stats", "--store", folder.path("old.sqlite")])
        let errors = Pipe()
        reader.standardError = errors
        try reader.run()
        reader.waitUntilExit()
        let refused = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(reader.terminationStatus == 3, "\(refused)")
        #expect(
            refused.contains("was written by an older ckport (store format 1)")
                && refused.contains("ckport upgrade --store \(folder.path("old.sqlite"))"), "\(refused)")
        #expect(folder.data("old.sqlite") == before)
        // Its owner's first command upgrades it, and says so; the records read as before.
        let export = try ckport(["export", "--store", "old.sqlite", "-o", "after.jsonl"], in: folder.url)
        #expect(
            export.status == 0 && export.stderr.contains("upgraded the store old.sqlite in place from format 1 to 2"),
            "\(export.stderr)")
        #expect(folder.text("after.jsonl") == expected)
        let again = try ckport(["upgrade", "--store", "old.sqlite"], in: folder.url)
        #expect(
            again.status == 0 && again.stdout == "old.sqlite is already store format 2; nothing to do\n",
            "\(again.stdout)\(again.stderr)")
        // Now the second user reads it too.
        let second = try asNobody([ckportBinary.path, "stats", "--store", folder.path("old.sqlite")])
        second.standardOutput = FileHandle.nullDevice
        second.standardError = FileHandle.nullDevice
        try second.run()
        second.waitUntilExit()
        #expect(second.terminationStatus == 0)
        // The upgraded store takes links like any other.
        #expect(
            try ckport(
                [
                    "import", sample("family-todo", "schema.ckdb"), sample("family-todo", "records.jsonl"), "--store",
                    "old.sqlite", "--mode", "replace", "-q",
                ], in: folder.url
            ).status == 0)
        let shares = try ckport(["shares", "--store", "old.sqlite"], in: folder.url)
        #expect(
            shares.status == 0
                && shares.stdout.contains("shares  Household household-1 and what lies under it: 39 records"),
            "\(shares.stdout)\(shares.stderr)")
        // Upgrading explicitly.
        try FileManager.default.copyItem(atPath: fixture("family-todo.sqlite"), toPath: folder.path("explicit.sqlite"))
        let upgrade = try ckport(["upgrade", "--store", "explicit.sqlite"], in: folder.url)
        #expect(
            upgrade.status == 0 && upgrade.stdout == "upgraded explicit.sqlite from store format 1 to 2\n",
            "\(upgrade.stdout)\(upgrade.stderr)")
    }

    @Test(
        "a store written by a newer ckport is refused by every command, unchanged, with what to do; upgrade does not touch it either"
    )
    func newerStore() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                [
                    "import", packageRoot.appendingPathComponent("samples/family-todo/schema.ckdb").path,
                    packageRoot.appendingPathComponent("samples/family-todo/records.jsonl").path, "--store",
                    "next.sqlite", "-q",
                ], in: folder.url
            ).status == 0)
        // The next format, as a later ckport would mark it.
        let marked = Process()
        marked.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        marked.arguments = [
            folder.path("next.sqlite"),
            "UPDATE _ck_meta SET value = '3' WHERE key = 'format'; PRAGMA wal_checkpoint(TRUNCATE);",
        ]
        try marked.run()
        marked.waitUntilExit()
        #expect(marked.terminationStatus == 0)
        let before = folder.data("next.sqlite")
        #expect(!before.isEmpty)
        for command in [
            ["stats"], ["export", "-o", "out.jsonl"],
            ["import", packageRoot.appendingPathComponent("samples/family-todo/records.jsonl").path], ["upgrade"],
        ] {
            let run = try ckport(command + ["--store", "next.sqlite"], in: folder.url)
            #expect(run.status == 3, "\(command): \(run.stderr)")
            #expect(
                run.stderr.contains(
                    "next.sqlite was written by a newer ckport (store format 3); upgrade ckport to read it"),
                "\(command): \(run.stderr)")
            #expect(folder.data("next.sqlite") == before, "\(command) changed the store")
        }
        #expect(!FileManager.default.fileExists(atPath: folder.path("out.jsonl")))
    }

    @Test(
        "bundles of format 1, plain and encrypted, restore as they were made; the JSON Lines export imports; inspect says the format"
    )
    func oldBundles() throws {
        let folder = Scratch()
        let expected = try String(contentsOfFile: fixture("family-todo.jsonl"), encoding: .utf8)
        let inspect = try ckport(["inspect", fixture("family-todo.ckbundle")], in: folder.url)
        #expect(inspect.status == 0 && inspect.stdout.contains("(format 1)"), "\(inspect.stdout)")
        #expect(
            try ckport(["restore", fixture("family-todo.ckbundle"), "--store", "plain.sqlite", "-q"], in: folder.url)
                .status == 0)
        #expect(try ckport(["export", "--store", "plain.sqlite", "-q"], in: folder.url).stdout == expected)
        let sealed = try ckport(
            ["restore", fixture("family-todo-encrypted.ckbundle"), "--store", "sealed.sqlite", "-q"], in: folder.url,
            environment: ["CKPORT_PASSPHRASE": "before sharing"])
        #expect(sealed.status == 0, "\(sealed.stderr)")
        #expect(try ckport(["export", "--store", "sealed.sqlite", "-q"], in: folder.url).stdout == expected)
        folder.write("schema.ckdb", try ckport(["schema", "export", "--store", "plain.sqlite"], in: folder.url).stdout)
        #expect(
            try ckport(
                ["import", "schema.ckdb", fixture("family-todo.jsonl"), "--store", "imported.sqlite", "-q"],
                in: folder.url
            ).status == 0)
        #expect(try ckport(["export", "--store", "imported.sqlite", "-q"], in: folder.url).stdout == expected)
        // A bundle made now is format 2, and keeps the links.
        #expect(
            try ckport(
                [
                    "import", sample("family-todo", "schema.ckdb"), sample("family-todo", "records.jsonl"), "--store",
                    "new.sqlite", "-q",
                ], in: folder.url
            ).status == 0)
        #expect(
            try ckport(["backup", "--store", "new.sqlite", "-o", "new.ckbundle", "-q"], in: folder.url).status == 0)
        #expect(try ckport(["inspect", "new.ckbundle"], in: folder.url).stdout.contains("(format 2)"))
        #expect(try ckport(["restore", "new.ckbundle", "--store", "back.sqlite", "-q"], in: folder.url).status == 0)
        let original = try ckport(["export", "--store", "new.sqlite", "-q"], in: folder.url).stdout
        #expect(
            original.contains(#""parent":{"recordName":"household-1"}"#) && original.contains(#""participants":[{"#))
        #expect(try ckport(["export", "--store", "back.sqlite", "-q"], in: folder.url).stdout == original)
    }

    @Test(
        "a chain of bundles restores the links as they were at its end: a share deleted between two bundles stays deleted, its root no longer names it"
    )
    func chainKeepsLinksCurrent() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                ["import", sample("family-todo", "schema.ckdb"), sample("family-todo", "records.jsonl"), "-q"],
                in: folder.url
            ).status == 0)
        #expect(try ckport(["backup", "-o", "full.ckbundle", "-q"], in: folder.url).status == 0)
        let share = "Share-E0BF9BE1-BA59-C5B6-17B2-5F9DCBC8832C"
        #expect(try ckport(["delete", share, "-q"], in: folder.url).status == 0)
        #expect(
            try ckport(["backup", "-o", "later.ckbundle", "--since", "full.ckbundle", "-q"], in: folder.url).status == 0
        )
        #expect(
            try ckport(
                ["restore", "full.ckbundle", "later.ckbundle", "--store", "restored.sqlite", "-q"], in: folder.url
            ).status == 0)
        let original = try ckport(["export", "-q"], in: folder.url).stdout
        #expect(!original.contains(share) && original.contains("Share-C5F036E1"))
        #expect(try ckport(["export", "--store", "restored.sqlite", "-q"], in: folder.url).stdout == original)
    }

    @Test(
        "the shares command: each share, its root and how many records it carries, who takes part with what permission; JSON for scripts"
    )
    func sharesCommand() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                ["import", sample("family-todo", "schema.ckdb"), sample("family-todo", "records.jsonl"), "-q"],
                in: folder.url
            ).status == 0)
        let table = try ckport(["shares"], in: folder.url)
        #expect(table.status == 0, "\(table.stderr)")
        let lines = table.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.contains("title   Smith Family To-Do"))
        #expect(lines.contains("shares  Household household-1 and what lies under it: 39 records"))
        #expect(lines.contains("public  NONE"))
        #expect(lines.contains { $0.hasPrefix("url     https://www.icloud.com/share/0") })
        #expect(lines.contains("  participant  email                    role   permission  status"), "\(table.stdout)")
        #expect(lines.contains("  Noah Smith   noah.smith@example.com   OWNER  READ_WRITE  ACCEPTED"))
        #expect(lines.contains("  Felix Smith  felix.smith@example.com  USER   READ_ONLY   ACCEPTED"))
        let json = try ckport(["shares", "--json"], in: folder.url)
        let shares = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(shares.count == 2)
        #expect(
            shares.map { ($0["root"] as? [String: Any])?["recordName"] as? String } == ["household-1", "household-2"])
        #expect(shares.map { $0["records"] as? Int } == [39, 39])
        let people = try #require(shares[1]["participants"] as? [[String: Any]])
        #expect(people.map { $0["name"] as? String } == ["Mateo García", "Amara García", "Omar García", "Hana García"])
        #expect(people.map { $0["permission"] as? String } == ["READ_WRITE", "READ_WRITE", "READ_WRITE", "READ_ONLY"])
        #expect(
            try ckport(["shares", "--scope", "private"], in: folder.url).stdout == "no shares in the private database\n"
        )
        // A zone share carries the whole zone.
        #expect(
            try ckport(
                [
                    "import", sample("family-calendar", "schema.ckdb"), sample("family-calendar", "records.jsonl"),
                    "--store", "cal.sqlite", "-q",
                ], in: folder.url
            ).status == 0)
        let calendar = try ckport(["shares", "--store", "cal.sqlite", "--zone", "family-1-zone"], in: folder.url).stdout
        #expect(
            calendar.contains("share   cloudkit.zoneshare in shared zone family-1-zone")
                && calendar.contains("shares  the whole zone: "), "\(calendar)")
        // Records by parent.
        let under = try ckport(
            [
                "export", "--store", "cal.sqlite", "--type", "EventParticipant", "--where", "parent == 'event-1-00001'",
                "-q",
            ], in: folder.url)
        #expect(
            under.status == 0 && !under.stdout.isEmpty
                && under.stdout.split(separator: "\n").allSatisfy {
                    $0.contains(#""parent":{"recordName":"event-1-00001"}"#)
                }, "\(under.stdout)\(under.stderr)")
        // Deleting a root takes its share along, and says why.
        let deleted = try ckport(["delete", "household-2", "--verbose"], in: folder.url)
        #expect(
            deleted.stderr.contains(
                "the share whose root 'household-2' is deleted: CloudKit deletes a share with its root")
                || deleted.stdout.contains("the share whose root 'household-2' is deleted"),
            "\(deleted.stdout)\(deleted.stderr)")
        #expect(
            try ckport(["shares", "--json"], in: folder.url).stdout.components(separatedBy: "\"recordName\":\"Share-")
                .count == 2)
    }
}
