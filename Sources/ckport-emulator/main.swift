import ArgumentParser
import CloudKitEmulator
import CloudKitWeb
import Foundation

/// CloudKit Web Services over an in-memory container, on a loopback port: for trying ckport
/// pull and push, or a script of your own, without reaching Apple.
struct EmulatorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ckport-emulator",
        abstract: "Serve an in-memory CloudKit container on 127.0.0.1, speaking CloudKit Web Services.",
        discussion: """
        Prints the URL it listens on, then answers until stopped. Load records as 'ckport export' \
        writes them (each goes into the zone its zoneID names). Sign in with the API token and \
        web auth token given (the web auth token changes with every answer, as CloudKit's does), \
        or with a server-to-server key whose public half is given here.

          ckport-emulator --container iCloud.com.example.Notes --port 8181 \\
              --api-token-file api.txt --web-auth-token-file web.txt \\
              --load samples/notes/records.jsonl
          ckport pull --base-url http://127.0.0.1:8181 --container iCloud.com.example.Notes \\
              --environment development --database private \\
              --api-token-file api.txt --web-auth-token-file web.txt
        """
    )

    @Option(help: "The container identifier (iCloud.…).")
    var container: String

    @Option(help: "The port on 127.0.0.1; 0 lets the system choose.")
    var port = 0

    @Option(help: ArgumentHelp("A file whose first line is the API token to accept.", valueName: "file"))
    var apiTokenFile: String?

    @Option(help: ArgumentHelp("A file whose first line is the web auth token that signs a user in.", valueName: "file"))
    var webAuthTokenFile: String?

    @Option(help: ArgumentHelp("The key ID of a server-to-server key (with --public-key).", valueName: "id"))
    var keyID: String?

    @Option(help: ArgumentHelp("The PEM file with the key's public half.", valueName: "file"))
    var publicKey: String?

    @Option(help: ArgumentHelp("Records to load (JSON Lines, as ckport export writes them); repeat for several.", valueName: "file"))
    var load: [String] = []

    @Option(help: "The environment loaded records go to.")
    var environment: String = "development"

    @Option(help: "The database loaded records go to: private, shared or public.")
    var database: String = "private"

    @Option(help: "Records per page of records/changes and records/query at most.")
    var pageSize = 200

    @Option(help: ArgumentHelp("Where the sign-in page sends a browser with a new web auth token (as an API token's URL Redirect callback), e.g. ckport cloud login's.", valueName: "url"))
    var signInCallback: String?

    func run() throws {
        guard let environment = CloudKitDatabase.Environment(rawValue: environment), let scope = CloudKitDatabase.Scope(rawValue: database) else {
            throw ValidationError("--environment is development or production; --database is private, shared or public")
        }
        _ = try CloudKitDatabase(container: container, environment: environment, scope: scope)
        let emulator = CloudKitEmulator(container: container)
        emulator.settings.pageSize = pageSize
        emulator.settings.signInCallback = signInCallback
        if let apiTokenFile, let webAuthTokenFile {
            emulator.registerUser(apiToken: try CloudKitCredentials.token(fromFile: apiTokenFile), webAuthToken: try CloudKitCredentials.token(fromFile: webAuthTokenFile))
        }
        if let keyID, let publicKey {
            emulator.registerKey(id: keyID, publicKeyPEM: try String(contentsOfFile: publicKey, encoding: .utf8))
        }
        for file in load {
            let text = try String(contentsOfFile: file, encoding: .utf8)
            let records = text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            emulator.load(records, environment: environment, scope: scope)
        }
        let server = try EmulatorServer(emulator: emulator, port: port)
        server.start()
        FileHandle.standardOutput.write(Data("ckport-emulator: \(container) on \(server.baseURL.absoluteString)\n".utf8))
        while true { sleep(3600) }
    }
}

// A parent may have started this process with signals blocked (a test harness's threads often
// do): unblock them, so that SIGTERM and SIGINT stop the emulator as they should.
var unblocked = sigset_t()
sigemptyset(&unblocked)
pthread_sigmask(SIG_SETMASK, &unblocked, nil)
EmulatorCommand.main()
