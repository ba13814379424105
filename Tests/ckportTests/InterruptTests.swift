import Foundation
import Testing

@Suite("Ctrl-C and SIGTERM")
struct InterruptTests {
    /// Sends `signal` to a run of `arguments` after each delay until one lands while the work is
    /// under way; returns that run (exit 130), after checking that runs that finished first
    /// exited 0.
    func interrupt(
        _ arguments: [String], in folder: Scratch, signal: Int32 = SIGINT,
        delays: [useconds_t] = [300_000, 700_000, 150_000, 1_200_000],
        reset: () throws -> Void
    ) throws -> Run? {
        for delay in delays {
            try reset()
            let running = try RunningCKPort(arguments, in: folder.url)
            usleep(delay)
            kill(running.process.processIdentifier, signal)
            let run = running.finish()
            if run.status == 130 { return run }
            #expect(run.status == 0, "\(arguments) after \(delay) µs: \(run.stderr)")
        }
        Issue.record("\(arguments): every run finished before the signal")
        return nil
    }

    func leftovers(_ folder: Scratch) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder.url.path)) ?? []).filter {
            $0.contains(".tmp") || $0.contains("ckport-") || $0.hasSuffix("-wal") || $0.hasSuffix("-journal")
        }
    }

    @Test(
        "import, export, backup, restore and migrate stop cleanly: rolled back, nothing left behind, a message, exit 130"
    )
    func signals() throws {
        let folder = Scratch()
        #expect(
            try ckport(
                ["generate", "--app", "family-todo", "--records", "100000", "-o", "many.jsonl", "-q"], in: folder.url
            ).status == 0)
        #expect(
            try ckport(["generate", "--app", "family-todo", "--schema", "-o", "schema.ckdb"], in: folder.url).status
                == 0)
        #expect(
            try ckport(["import", "schema.ckdb", sample("family-todo", "records.jsonl"), "-q"], in: folder.url).status
                == 0)
        let before = try ckport(["export"], in: folder.url).stdout

        // An import into a store that holds records: rolled back.
        if let run = try interrupt(["import", "many.jsonl"], in: folder, reset: {}) {
            #expect(run.stderr.contains("interrupted: nothing was written; the store is as it was"), "\(run.stderr)")
            #expect(try ckport(["export"], in: folder.url).stdout == before)
        }
        // An import into a new store: no store file at all.
        if let run = try interrupt(
            ["import", "schema.ckdb", "many.jsonl", "--store", "new.sqlite"], in: folder, signal: SIGTERM,
            reset: { try? FileManager.default.removeItem(atPath: folder.path("new.sqlite")) })
        {
            #expect(run.stderr.contains("interrupted: nothing was written"), "\(run.stderr)")
            #expect(!FileManager.default.fileExists(atPath: folder.path("new.sqlite")))
        }
        #expect(leftovers(folder) == [])
        #expect(
            try ckport(["import", "schema.ckdb", "many.jsonl", "--store", "big.sqlite", "-q"], in: folder.url).status
                == 0)

        // Exports and backups: no output, no temporary file.
        for arguments in [
            ["export", "--store", "big.sqlite", "-o", "out.jsonl"],
            ["backup", "--store", "big.sqlite", "-o", "out.ckbundle"],
            [
                "backup", "--store", "big.sqlite", "-o", "secret.ckbundle", "--encrypt", "--passphrase-file",
                "schema.ckdb",
            ],
        ] {
            if let run = try interrupt(
                arguments, in: folder,
                reset: {
                    for name in ["out.jsonl", "out.ckbundle", "secret.ckbundle"] {
                        try? FileManager.default.removeItem(atPath: folder.path(name))
                    }
                })
            {
                #expect(run.stderr.contains("interrupted: no output was left behind"), "\(run.stderr)")
                #expect(!FileManager.default.fileExists(atPath: folder.path(arguments[4])), "\(arguments)")
            }
            #expect(leftovers(folder) == [], "\(arguments)")
        }

        // A restore into an existing store: rolled back.
        #expect(
            try ckport(["backup", "--store", "big.sqlite", "-o", "big.ckbundle", "-q"], in: folder.url).status == 0)
        if let run = try interrupt(["restore", "big.ckbundle", "--mode", "upsert"], in: folder, reset: {}) {
            #expect(run.stderr.contains("interrupted: nothing was written; the store is as it was"), "\(run.stderr)")
            #expect(try ckport(["export"], in: folder.url).stdout == before)
        }
        #expect(leftovers(folder) == [])

        // A migration: the running one rolled back, the store at the version it had.
        let migrations = packageRoot.appendingPathComponent("migrations/family-todo").path
        if let run = try interrupt(
            ["migrate", "apply", "--dir", migrations, "--store", "mig.sqlite", "--no-backup"], in: folder,
            delays: [200_000, 400_000, 100_000, 50_000],
            reset: {
                try? FileManager.default.removeItem(atPath: folder.path("mig.sqlite"))
                try FileManager.default.copyItem(atPath: folder.path("big.sqlite"), toPath: folder.path("mig.sqlite"))
            })
        {
            #expect(run.stderr.contains("interrupted: the migration that was running was rolled back"), "\(run.stderr)")
            let status = try ckport(
                ["migrate", "status", "--dir", migrations, "--store", "mig.sqlite"], in: folder.url)
            #expect(status.stdout.contains("at version 0"), "\(status.stdout)")
        }
        #expect(leftovers(folder) == [])
    }
}
