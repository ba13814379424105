import ArgumentParser
import CKPort
import CloudKitWeb
import Foundation
import Formats

struct CloudCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cloud",
        abstract: "Sign in to CloudKit, and see what the store last pulled.",
        subcommands: [CloudLoginCommand.self, CloudStatusCommand.self]
    )
}

struct CloudLoginCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Get a web auth token for your own Apple ID, for pull and push of the private and shared databases.",
        discussion: """
        In CloudKit Console, give the container's API token the sign-in callback "URL Redirect" \
        to http://127.0.0.1:PORT/callback (8642 unless --port says otherwise). ckport then \
        listens there, prints the URL where you sign in, and waits; when you have signed in, \
        CloudKit sends your browser back to ckport with the token, which ckport checks and \
        writes to --web-auth-token-file, readable by you alone. The token changes with every \
        request: ckport pull and push keep the file current.

          ckport cloud login --container iCloud.com.example.App --environment production \\
              --api-token-file api.txt --web-auth-token-file web.txt
        """
    )

    @OptionGroup(title: "CloudKit") var cloud: CloudOptions

    @Option(help: "The loopback port the sign-in callback comes back to.")
    var port = 8642

    @Option(help: ArgumentHelp("How long to wait for the sign-in, in seconds.", valueName: "seconds"))
    var timeout = 300

    @Flag(name: .shortAndLong, help: "Print only errors.")
    var quiet = false

    func validate() throws {
        guard cloud.webAuthTokenFile != nil else { throw ValidationError("--web-auth-token-file FILE says where the token goes") }
        guard cloud.keyID == nil else { throw ValidationError("a server-to-server key needs no sign-in: pull and push use it as it is") }
        guard (1...65535).contains(port) else { throw ValidationError("--port is between 1 and 65535") }
        guard timeout > 0 else { throw ValidationError("--timeout is a number of seconds above 0") }
    }

    func run() throws {
        let database = try cloud.cloudDatabase()
        let apiToken = try cloud.apiToken()
        let callback = try SignInCallback(port: port)
        callback.start()
        defer { callback.stop() }
        let transport = HTTPClientTransport()
        let signInURL = try blocking { try await CloudKitSignIn.signInURL(database: database, apiToken: apiToken, transport: transport) }
        Console.error("""
            Open this address in a browser and sign in with your Apple ID:

              \(signInURL)

            ckport waits for CloudKit to send the browser back to \(callback.callbackURL.absoluteString)
            (the API token's sign-in callback must be "URL Redirect" to that address).
            """)
        guard let token = callback.wait(seconds: Double(timeout)) else {
            throw CommandFailure(status: .failure, message: "no sign-in came back to \(callback.callbackURL.absoluteString) within \(timeout) s (is it the API token's sign-in callback?)")
        }
        // The token is checked at once; the answer turns it over, and the new one is kept.
        let client = try CloudKitClient(database: database, credentials: .webToken(apiToken: apiToken, webAuthToken: token), transport: transport)
        let user = try blocking { () async throws -> String in
            let answer = try await client.send("users/current")
            let object = try JSONSerialization.jsonObject(with: answer) as? [String: Any]
            return object?["userRecordName"] as? String ?? "?"
        }
        let next = try blocking { await client.webAuthToken } ?? token
        let file = try OutputFile(path: cloud.webAuthTokenFile!, ownerOnly: true)
        try file.write(next + "\n")
        try file.commit()
        if !quiet { Console.error("signed in as \(user); the web auth token is in \(cloud.webAuthTokenFile!)") }
    }
}

struct CloudStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show which CloudKit databases the store was pulled from, zone by zone, and what is configured.",
        discussion: """
        Lists each database the store holds sync tokens for, with each zone's token and when it \
        was saved. With --container (and --environment, --database) it also says which \
        credentials pull and push would use, without showing them; --check then asks CloudKit \
        who they sign in as and which zones it has, marking those no pull has reached yet.

          ckport cloud status
          ckport cloud status --container iCloud.com.example.App --api-token-file api.txt \\
              --web-auth-token-file web.txt --check
        """
    )

    @OptionGroup(title: "CloudKit") var cloud: CloudOptions

    @Flag(help: "Ask CloudKit whether the credentials work, and which zones it has.")
    var check = false

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        if check && cloud.container == nil { throw ValidationError("--check needs --container") }
    }

    func run() throws {
        let store = try storeOptions.open(create: false)
        var lines: [String] = ["store: \(storeOptions.path)"]
        let sources = try store.readSession { try $0.syncSources() }
        var states: [String: [SyncState]] = [:]
        for source in sources { states[source] = try store.readSession { try $0.syncStates(source: source) } }
        if sources.isEmpty { lines.append("pulled: nothing yet (ckport pull keeps a sync token per zone here)") }
        for source in sources {
            lines.append("pulled from \(source):")
            for state in states[source]! {
                let saved = Date(timeIntervalSince1970: Double(state.savedAt) / 1000)
                lines.append("  \(state.zone.zoneName)\(state.zone.ownerRecordName == ZoneID.defaultOwnerName ? "" : " (owner \(state.zone.ownerRecordName))"): token \(state.token), saved \(ISO8601DateFormatter().string(from: saved))")
            }
        }
        guard cloud.container != nil else {
            print(lines.joined(separator: "\n"))
            return
        }
        let cloud = self.cloud
        let database = try cloud.cloudDatabase()
        let environmentVariables = ProcessInfo.processInfo.environment
        lines.append("configured: \(CloudSync.source(database)) at \(database.baseURL.absoluteString)")
        if let keyID = cloud.keyID {
            lines.append("  server-to-server key \(keyID) from \(cloud.keyFile ?? "?")")
        } else {
            let api = cloud.apiTokenFile.map { "from \($0)" } ?? (environmentVariables["CKPORT_CK_API_TOKEN"].map { $0.isEmpty ? nil : "from $CKPORT_CK_API_TOKEN" } ?? nil) ?? "none"
            let web = cloud.webAuthTokenFile.map { "from \($0)" } ?? (environmentVariables["CKPORT_CK_WEB_AUTH_TOKEN"].map { $0.isEmpty ? nil : "from $CKPORT_CK_WEB_AUTH_TOKEN" } ?? nil) ?? "none (ckport cloud login gets one)"
            lines.append("  API token: \(api)")
            lines.append("  web auth token: \(web)")
        }
        let pulled = Set((states[CloudSync.source(database)] ?? []).map(\.zone.zoneName))
        if check {
            let client = try cloud.client(quiet: storeOptions.quiet)
            let quiet = storeOptions.quiet
            let (user, zones): (String?, [ZoneID]) = try blocking {
                do {
                    var user: String?
                    if database.scope != .public {
                        let answer = try JSONSerialization.jsonObject(with: try await client.send("users/current")) as? [String: Any]
                        user = answer?["userRecordName"] as? String
                    }
                    let zones = try await CloudSync.zones(client)
                    try await cloud.keep(client, quiet: quiet)
                    return (user, zones)
                } catch {
                    try? await cloud.keep(client, quiet: quiet)
                    throw error
                }
            }
            lines.append("  signed in: yes\(user.map { " (as \($0))" } ?? "")")
            lines.append("  zones in CloudKit:")
            for zone in zones.sorted() {
                let note = zone.zoneName == ZoneID.defaultZoneName || database.scope == .public ? "read by queries" : pulled.contains(zone.zoneName) ? "pulled" : "not pulled yet"
                lines.append("    \(zone.zoneName): \(note)")
            }
        }
        print(lines.joined(separator: "\n"))
    }
}
