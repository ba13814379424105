import Foundation
import Testing

/// The nightly job as systemd runs it (packaging/systemd/ckport-nightly.service): its ExecStart,
/// with the settings of packaging/nightly.env, the directories systemd gives a unit with
/// StateDirectory= and LoadCredential=, and a CloudKit container on ckport-emulator.
@Suite("the nightly job's unit")
struct NightlyJobTests {
    static let packaging = packageRoot.appendingPathComponent("packaging")

    /// `KEY=value` lines of a systemd unit's section, or of an environment file.
    static func settings(_ text: String) -> [(String, String)] {
        text.split(separator: "\n").compactMap { line in
            let line = line.trimmingCharacters(in: .whitespaces)
            guard !line.hasPrefix("#"), !line.hasPrefix("["), let equals = line.firstIndex(of: "=") else { return nil }
            var value = String(line[line.index(after: equals)...])
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                value = String(value.dropFirst().dropLast())
            }
            return (String(line[..<equals]), value)
        }
    }

    @Test(
        "the service's command pulls every database and writes a dated bundle; with a passphrase credential the bundle is encrypted; the unit runs as a user of its own, hardened"
    )
    func runsTheDocumentedJob() throws {
        let unit = try String(
            contentsOf: Self.packaging.appendingPathComponent("systemd/ckport-nightly.service"), encoding: .utf8)
        let service = Dictionary(Self.settings(unit), uniquingKeysWith: { first, _ in first })
        let execStart = try #require(service["ExecStart"])
        #expect(execStart == "/usr/lib/ckport/ckport-nightly")
        for (key, value) in [
            ("DynamicUser", "yes"), ("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("PrivateTmp", "yes"),
            ("ProtectHome", "yes"), ("StateDirectory", "ckport"), ("EnvironmentFile", "/etc/ckport/nightly.env"),
        ] {
            #expect(service[key] == value, "\(key)=\(service[key] ?? "none")")
        }
        #expect(service["LoadCredential"] == "api-token:/etc/ckport/api-token")
        // The script the package installs at ExecStart's path is packaging/ckport-nightly.
        let script = Self.packaging.appendingPathComponent((execStart as NSString).lastPathComponent).path
        let folder = Scratch()
        let state = folder.path("state")
        let credentials = folder.path("credentials")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        try "api-1\n".write(toFile: credentials + "/api-token", atomically: true, encoding: .utf8)
        try "web-1\n".write(toFile: state + "/web-auth-token", atomically: true, encoding: .utf8)
        try "api-1\n".write(toFile: folder.path("api.txt"), atomically: true, encoding: .utf8)
        try "web-1\n".write(toFile: folder.path("web.txt"), atomically: true, encoding: .utf8)
        let emulator = try EmulatorProcess(
            [
                "--container", "iCloud.com.example.App", "--environment", "production",
                "--api-token-file", "api.txt", "--web-auth-token-file", "web.txt",
                "--schema", sample("notes", "schema.ckdb"), "--load", sample("notes", "records.jsonl"),
            ], in: folder.url)
        // The store needs the container's schema first, as the guide says.
        #expect(
            try ckport(
                ["schema", "import", sample("notes", "schema.ckdb"), "--store", state + "/store.sqlite", "-q"],
                in: folder.url
            ).status == 0)

        func run(passphrase: Bool) throws -> (Int32, String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: script)
            var environment: [String: String] = ["PATH": "/usr/bin:/bin"]
            for (key, value) in Self.settings(
                try String(contentsOf: Self.packaging.appendingPathComponent("nightly.env"), encoding: .utf8))
            {
                environment[key] = value
            }
            #expect(environment["CKPORT_CONTAINER"] != nil && environment["CKPORT_DATABASES"] == "private shared")
            environment["CKPORT_CONTAINER"] = "iCloud.com.example.App"
            environment["STATE_DIRECTORY"] = state
            environment["CREDENTIALS_DIRECTORY"] = credentials
            environment["CKPORT_BASE_URL"] = emulator.url
            environment["CKPORT"] = ckportBinary.path
            if passphrase {
                try "a passphrase of the family's\n".write(
                    toFile: credentials + "/backup-passphrase", atomically: true, encoding: .utf8)
            }
            process.environment = environment
            let output = folder.url.appendingPathComponent("nightly.out")
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
            let handle = try FileHandle(forWritingTo: output)
            process.standardOutput = handle
            process.standardError = handle
            try process.run()
            process.waitUntilExit()
            try handle.close()
            return (process.terminationStatus, folder.text("nightly.out"))
        }
        let (status, output) = try run(passphrase: false)
        #expect(status == 0, "\(output)")
        #expect(
            output.contains("from iCloud.com.example.App/production/private")
                && output.contains("from iCloud.com.example.App/production/shared"), "\(output)")
        let records = try ckport(["export", "--store", state + "/store.sqlite", "-q"], in: folder.url).stdout.split(
            separator: "\n"
        ).count
        let expected = try String(contentsOfFile: sample("notes", "records.jsonl"), encoding: .utf8).split(
            separator: "\n"
        ).count
        #expect(records == expected && records > 0)
        let today = ISO8601DateFormatter.string(from: Date(), timeZone: .current, formatOptions: [.withFullDate])
        let bundle = state + "/backups/app-\(today).ckbundle"
        let verify = try ckport(["verify", bundle], in: folder.url)
        #expect(verify.status == 0 && verify.stdout.contains("encrypted: no"), "\(verify.stdout) \(verify.stderr)")
        // The web auth token the job was given was turned over and kept in its state folder.
        #expect(folder.text("state/web-auth-token") != "web-1\n")

        try FileManager.default.removeItem(atPath: bundle)
        let (again, said) = try run(passphrase: true)
        #expect(again == 0, "\(said)")
        let sealed = try ckport(
            ["verify", bundle], in: folder.url, environment: ["CKPORT_PASSPHRASE": "a passphrase of the family's"])
        #expect(sealed.status == 0 && sealed.stdout.contains("encrypted: yes"), "\(sealed.stdout) \(sealed.stderr)")
    }
}
