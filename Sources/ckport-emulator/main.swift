import ArgumentParser
import CloudKitEmulator
import CloudKitWeb
import Foundation
import Records

/// CloudKit Web Services over an in-memory container, on a loopback port: for trying ckport
/// pull and push, or a script of your own, without reaching Apple.
struct EmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ckport-emulator",
        abstract: "Serve an in-memory CloudKit container on 127.0.0.1, speaking CloudKit Web Services.",
        discussion: """
            Prints the URL it listens on, then answers until stopped. Load records as 'ckport export' \
            writes them (each goes into the zone its zoneID names). Sign in with the API token and \
            web auth token given (the web auth token changes with every answer, as CloudKit's does), \
            or with a server-to-server key whose public half is given here. A sign-in lasts 30 \
            minutes (two weeks with --keep-signed-in); every answer carries a new token of it.

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

    @Option(
        help: ArgumentHelp("A file whose first line is the web auth token that signs a user in.", valueName: "file"))
    var webAuthTokenFile: String?

    @Option(help: ArgumentHelp("The key ID of a server-to-server key (with --public-key).", valueName: "id"))
    var keyID: String?

    @Option(help: ArgumentHelp("The PEM file with the key's public half.", valueName: "file"))
    var publicKey: String?

    @Option(
        help: ArgumentHelp(
            "Records to load (JSON Lines, as ckport export writes them); repeat for several.", valueName: "file"))
    var load: [String] = []

    @Option(help: "The environment loaded records go to.")
    var environment: String = "development"

    @Option(help: "The database loaded records go to: private, shared or public.")
    var database: String = "private"

    @Option(help: "Records per page of records/changes and records/query at most.")
    var pageSize = 200

    @Option(
        help: ArgumentHelp(
            "Where the sign-in page sends a browser with a new web auth token (as an API token's URL Redirect callback), e.g. ckport cloud login's.",
            valueName: "url"))
    var signInCallback: String?

    @Flag(help: "Sign-ins tick \"Keep me signed in\": they last two weeks instead of 30 minutes.")
    var keepSignedIn = false

    @Option(
        help: ArgumentHelp(
            "How long ago the sign-in of --web-auth-token-file's token began (past its end, the token is refused as an expired one is).",
            valueName: "seconds"))
    var signedInAgo: Double = 0

    @Option(
        help: ArgumentHelp(
            "The container's schema (cktool export-schema's language): queries then go only to types whose ___recordID is QUERYABLE, and encrypted fields take only values marked encrypted.",
            valueName: "file"))
    var schema: String?

    func run() async throws {
        guard let environment = CloudKitDatabase.Environment(rawValue: environment),
            let scope = CloudKitDatabase.Scope(rawValue: database)
        else {
            throw ValidationError("--environment is development or production; --database is private, shared or public")
        }
        _ = try CloudKitDatabase(container: container, environment: environment, scope: scope)
        let emulator = CloudKitEmulator(container: container)
        emulator.settings.pageSize = pageSize
        emulator.settings.signInCallback = signInCallback
        emulator.settings.keepSignedIn = keepSignedIn
        if let apiTokenFile, let webAuthTokenFile {
            emulator.registerUser(
                apiToken: try CloudKitCredentials.token(fromFile: apiTokenFile),
                webAuthToken: try CloudKitCredentials.token(fromFile: webAuthTokenFile),
                keepSignedIn: keepSignedIn, signedInAgo: signedInAgo)
        }
        if let schema {
            guard let text = try? String(contentsOfFile: schema, encoding: .utf8) else {
                throw LoadError(description: "cannot read \(schema)")
            }
            do {
                emulator.defineSchema(try SchemaParser.parse(text, file: schema))
            } catch {
                throw LoadError(description: "\(error)")
            }
        }
        if let keyID, let publicKey {
            emulator.registerKey(id: keyID, publicKeyPEM: try String(contentsOfFile: publicKey, encoding: .utf8))
        }
        for file in load {
            // Read a few megabytes at a time, a thousand records to a load: memory holds the
            // records as the emulator keeps them, not the file.
            guard let handle = FileHandle(forReadingAtPath: file) else {
                throw LoadError(description: "cannot read \(file)")
            }
            defer { try? handle.close() }
            var pending = Data()
            var records: [JSONValue] = []
            var line = 0
            func take(_ text: Data) throws {
                line += 1
                guard !text.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") }) else { return }
                let record: JSONValue
                do {
                    record = try text.withUnsafeBytes { bytes throws(JSONSyntaxError) in try JSONParser.parse(bytes) }
                } catch {
                    throw LoadError(description: "\(file), line \(line): \(error)")
                }
                guard case .object = record else {
                    throw LoadError(description: "\(file), line \(line): not a record (a JSON object)")
                }
                records.append(record)
                if records.count == 1000 {
                    emulator.load(json: records, environment: environment, scope: scope)
                    records = []
                }
            }
            while let chunk = try handle.read(upToCount: 4 << 20), !chunk.isEmpty {
                pending.append(chunk)
                var start = pending.startIndex
                while let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                    try take(pending[start..<newline])
                    start = newline + 1
                }
                pending = Data(pending[start...])
            }
            if !pending.isEmpty { try take(pending) }
            emulator.load(json: records, environment: environment, scope: scope)
        }
        let server = try await EmulatorServer.start(emulator, port: port)
        FileHandle.standardOutput.write(
            Data("ckport-emulator: \(container) on \(server.baseURL.absoluteString)\n".utf8))
        while true { try await Task.sleep(for: .seconds(3600)) }
    }
}

// A parent may have started this process with signals blocked (a test harness's threads often
// do): unblock them, so that SIGTERM and SIGINT stop the emulator as they should.
var unblocked = sigset_t()
sigemptyset(&unblocked)
pthread_sigmask(SIG_SETMASK, &unblocked, nil)
/// The command's asynchronous run (it awaits the server), as ArgumentParser's main calls it.
func runAsync(_ command: AsyncParsableCommand) async throws {
    var command = command
    try await command.run()
}
do {
    try await runAsync(try EmulatorCommand.parse())
} catch {
    EmulatorCommand.exit(withError: error)
}

/// A file given to --load that cannot be loaded.
struct LoadError: Error, CustomStringConvertible {
    var description: String
}
