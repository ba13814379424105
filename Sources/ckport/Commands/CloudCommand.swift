import ArgumentParser
import CKPort
import CloudKitWeb
import Formats
import Foundation
import Records
import SQLiteStore
import StoreCore

struct CloudCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cloud",
        abstract: "Sign in to CloudKit, and see what the store last pulled.",
        subcommands: [CloudLoginCommand.self, CloudStatusCommand.self]
    )
}

struct CloudLoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Get a web auth token for your own Apple ID, for pull and push of the private and shared databases.",
        discussion: """
            In CloudKit Console, give the container's API token the sign-in callback "URL Redirect" \
            to http://127.0.0.1:PORT/callback (8642 unless --port says otherwise). ckport then \
            listens there, prints the URL where you sign in, and waits; when you have signed in, \
            CloudKit sends your browser back to ckport with the token, which ckport checks and \
            writes to --web-auth-token-file, readable by you alone.

            The sign-in lasts 30 minutes, or two weeks if you tick "Keep me signed in" on Apple's \
            page: tick it for a nightly pull. CloudKit hands out a new token with every answer; pull \
            and push keep the file current, and 'ckport cloud status' says when the sign-in ends. \
            Once it has, pull and push stop with exit status 4: sign in again.

              ckport cloud login --container iCloud.com.example.App --environment production \\
                  --api-token-file api.txt --web-auth-token-file web.txt
            """
    )

    @OptionGroup(title: "CloudKit") var cloud: CloudOptions

    @Option(help: "The loopback port the sign-in callback comes back to.")
    var port = 8642

    @Option(help: ArgumentHelp("How long to wait for the sign-in, in seconds.", valueName: "seconds"))
    var timeout = 300

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        guard cloud.webAuthTokenFile != nil else {
            throw ValidationError("--web-auth-token-file FILE says where the token goes")
        }
        guard cloud.keyID == nil else {
            throw ValidationError("a server-to-server key needs no sign-in: pull and push use it as it is")
        }
        guard (1...65535).contains(port) else { throw ValidationError("--port is between 1 and 65535") }
        guard timeout > 0 else { throw ValidationError("--timeout is a number of seconds above 0") }
    }

    func run() async throws {
        let database = try cloud.cloudDatabase()
        let apiToken = try cloud.apiToken()
        let quiet = storeOptions.quiet
        let transport = HTTPClientTransport()
        let signInURL = try await CloudKitSignIn.signInURL(
            database: database, apiToken: apiToken, transport: transport)
        let callback = try await SignInCallback.start(port: port, signInURL: { signInURL })
        // The browser goes to CloudKit through ckport's own page, which gives it this sign-in's
        // state: a token that comes back without it is refused.
        Console.error(
            """
            Open this address in a browser and sign in with your Apple ID:

              \(callback.startURL.absoluteString)

            It takes your browser to Apple's sign-in page. Tick "Keep me signed in" there if the
            token is to serve more than the next 30 minutes (a nightly pull): with it the sign-in
            lasts two weeks, without it 30 minutes.

            ckport waits for CloudKit to send the browser back to \(callback.callbackURL.absoluteString)
            (the API token's sign-in callback must be "URL Redirect" to that address).
            """)
        let arrived = await callback.wait(seconds: Double(timeout))
        // The browser has been answered: the port is let go of before anything else.
        await callback.stop()
        guard let token = arrived else {
            let refused =
                callback.refusedCount > 0
                ? "; \(callback.refusedCount) token\(callback.refusedCount == 1 ? "" : "s") came without this sign-in's state and were refused"
                : ""
            throw CommandFailure(
                status: .failure,
                message:
                    "no sign-in came back to \(callback.callbackURL.absoluteString) within \(timeout) s (is it the API token's sign-in callback?)\(refused)"
            )
        }
        let signedIn = Date()
        // The token is checked at once; the answer turns it over, and the new one is kept.
        let client = try CloudKitClient(
            database: database, credentials: .webToken(apiToken: apiToken, webAuthToken: token), transport: transport)
        let user = try await client.currentUser() ?? "?"
        let next = await client.webAuthToken ?? token
        let path = cloud.webAuthTokenFile!
        try WebAuthTokenFile.write(
            WebAuthTokenFile.Contents(token: next, signedIn: signedIn, lastAnswer: Date()), to: path)
        if !quiet {
            Console.error(
                """
                signed in as \(Console.clean(user)); the web auth token is in \(path).
                The sign-in lasts until \(CloudStatusCommand.moment(signedIn.addingTimeInterval(WebAuthTokenLifetime.standard))), \
                or until \(CloudStatusCommand.moment(signedIn.addingTimeInterval(WebAuthTokenLifetime.keptSignedIn))) if you ticked "Keep me signed in"; \
                'ckport cloud status' shows where it stands.
                """)
        }
        // The account the store was last pulled as, beside the one just signed in.
        if StoreOptions.exists(storeOptions.path, wait: storeOptions.wait),
            let store = try? storeOptions.open(create: false)
        {
            var privateDatabase = database
            privateDatabase.scope = .private
            if let pulled = try CloudSync.lastPull(in: store, source: CloudSync.source(privateDatabase))?.account {
                if pulled == user {
                    if !quiet {
                        Console.error(
                            "\(storeOptions.path) was last pulled as the same account (\(Console.clean(pulled)))")
                    }
                } else {
                    Console.error(
                        "warning: \(storeOptions.path) was last pulled from \(CloudSync.source(privateDatabase)) as \(Console.clean(pulled)), not as \(Console.clean(user)): a pull now would bring another account's records into it"
                    )
                }
            }
        }
    }
}

struct CloudStatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract:
            "Show which CloudKit databases the store was pulled from, what the last pull left out, and where the sign-in stands.",
        discussion: """
            Lists each database the store holds sync tokens for, with each zone's token and when it \
            was saved, and what the last pull left out: record types it could not query, records \
            the store could not take, zones fetched again or gone. With --container (and \
            --environment, --database) it also says which credentials pull and push would use, \
            without showing them, and when the web auth token's sign-in ends (30 minutes after it, \
            or two weeks with "Keep me signed in"). --check asks CloudKit who the credentials sign \
            in as and which zones it has; a token CloudKit no longer takes exits with status 4.

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

    /// `2026-11-26 14:05 UTC`
    static func moment(_ date: Date) -> String {
        let text = ISO8601DateFormatter().string(from: date)
        return String(text.prefix(10)) + " " + String(text.dropFirst(11).prefix(5)) + " UTC"
    }

    /// `3 h 10 min`, `12 days`: how far away a moment is.
    static func span(_ seconds: TimeInterval) -> String {
        let s = abs(seconds)
        if s < 120 { return "\(Int(s)) s" }
        if s < 7200 { return "\(Int(s / 60)) min" }
        if s < 172_800 { return "\(Int(s / 3600)) h \(Int(s.truncatingRemainder(dividingBy: 3600) / 60)) min" }
        return "\(Int(s / 86400)) days"
    }

    /// Where a web auth token file's sign-in stands, in a line.
    static func standing(_ contents: WebAuthTokenFile.Contents, now: Date = Date()) -> String {
        let lastAnswer = contents.lastAnswer.map { "; CloudKit last answered with it \(moment($0))" } ?? ""
        switch WebAuthTokenLifetime.standing(signedIn: contents.signedIn, lastAnswer: contents.lastAnswer, now: now) {
        case .unknown:
            return
                "signed in: not known (the file does not say; 'ckport cloud login' writes it)\(lastAnswer); --check asks CloudKit"
        case .valid(let until, let kept):
            let how =
                kept == true
                ? " (\"Keep me signed in\": it answered over 30 minutes after the sign-in)"
                : kept == nil ? " (or two weeks after the sign-in, with \"Keep me signed in\")" : ""
            return
                "signed in \(moment(contents.signedIn!)); valid until \(moment(until)), \(span(until.timeIntervalSince(now))) from now\(how)\(lastAnswer)"
        case .expiredUnlessKept(let at, let keptUntil):
            return
                "signed in \(moment(contents.signedIn!)); expired at \(moment(at)) unless \"Keep me signed in\" was ticked (then valid until \(moment(keptUntil)))\(lastAnswer); --check asks CloudKit"
        case .expired(let at):
            return
                "signed in \(moment(contents.signedIn!)); EXPIRED at \(moment(at)): sign in again with 'ckport cloud login'\(lastAnswer)"
        }
    }

    func run() async throws {
        let store = try storeOptions.open(create: false)
        var lines: [String] = ["store: \(storeOptions.path)"]
        let sources = try await store.readSession { try $0.syncSources() }
        var any = false
        var zoneStates: [String: [SyncState]] = [:]
        for source in sources {
            let states = try await store.readSession { try $0.syncStates(source: source) }
            zoneStates[source] = states.filter(CloudSync.isZoneState)
            let report = try CloudSync.lastPull(in: store, source: source)
            guard !zoneStates[source]!.isEmpty || report != nil else { continue }
            any = true
            lines.append("pulled from \(source):")
            for state in zoneStates[source]! {
                let saved = Date(timeIntervalSince1970: Double(state.savedAt) / 1000)
                let token =
                    state.token == "ckport:fetch-again"
                    ? "being fetched again from the start (the next pull finishes it)"
                    : state.token == "ckport:left-out"
                        ? "records were left out (the next pull reads the zone again from the start and asks for them)"
                        : "token \(state.token)"
                lines.append(
                    "  \(state.zone.zoneName)\(state.zone.ownerRecordName == ZoneID.defaultOwnerName ? "" : " (owner \(state.zone.ownerRecordName))"): \(token), saved \(CloudStatusCommand.moment(saved))"
                )
            }
            if let report { lines += CloudStatusCommand.describe(report) }
        }
        if !any { lines.append("pulled: nothing yet (ckport pull keeps a sync token per zone here)") }
        guard cloud.container != nil else {
            print(Console.clean(lines.joined(separator: "\n")))
            return
        }
        let cloud = self.cloud
        let database = try cloud.cloudDatabase()
        let environmentVariables = ProcessInfo.processInfo.environment
        lines.append("configured: \(CloudSync.source(database)) at \(database.baseURL.absoluteString)")
        if let keyID = cloud.keyID {
            lines.append("  server-to-server key \(keyID) from \(cloud.keyFile ?? "?")")
        } else {
            let api =
                cloud.apiTokenFile.map { "from \($0)" }
                ?? (environmentVariables["CKPORT_CK_API_TOKEN"].map { $0.isEmpty ? nil : "from $CKPORT_CK_API_TOKEN" }
                    ?? nil) ?? "none"
            lines.append("  API token: \(api)")
            if let file = cloud.webAuthTokenFile {
                if let contents = WebAuthTokenFile(path: file).read() {
                    lines.append("  web auth token: from \(file), \(CloudStatusCommand.standing(contents))")
                } else {
                    lines.append("  web auth token: \(file) holds none (ckport cloud login gets one)")
                }
            } else if let token = environmentVariables["CKPORT_CK_WEB_AUTH_TOKEN"], !token.isEmpty {
                lines.append(
                    "  web auth token: from $CKPORT_CK_WEB_AUTH_TOKEN (when it was signed in is not known; --check asks CloudKit)"
                )
            } else {
                lines.append("  web auth token: none (ckport cloud login gets one)")
            }
        }
        let pulled = Set((zoneStates[CloudSync.source(database)] ?? []).map(\.zone))
        if check {
            let connection = try cloud.connect(quiet: storeOptions.quiet)
            let client = connection.client
            let outcome: Result<(String?, [ZoneID]), Error>
            do {
                var user: String?
                if cloud.keyID == nil {
                    user = try await client.currentUser()
                }
                let zones = try await CloudSync.zones(client)
                try await connection.finish()
                outcome = .success((user, zones))
            } catch {
                try? await connection.finish()
                outcome = .failure(error)
            }
            switch outcome {
            case .success(let (user, zones)):
                lines.append("  signed in: yes\(user.map { " (as \($0))" } ?? "")")
                lines.append("  zones in CloudKit:")
                for zone in zones.sorted() {
                    let pulledHere =
                        pulled.contains(zone)
                        || (database.scope != .shared && pulled.contains { $0.zoneName == zone.zoneName })
                    let note =
                        zone.zoneName == ZoneID.defaultZoneName || database.scope == .public
                        ? "read by queries" : pulledHere ? "pulled" : "not pulled yet"
                    lines.append(
                        "    \(zone.zoneName)\(zone.ownerRecordName == ZoneID.defaultOwnerName ? "" : " (owner \(zone.ownerRecordName))"): \(note)"
                    )
                }
            case .failure(let error as CloudKitServerError) where error.category == .authentication:
                lines.append("  signed in: NO: \(error.commandLine)")
                print(Console.clean(lines.joined(separator: "\n")))
                throw CommandFailure(
                    status: .signIn,
                    message: "CloudKit no longer takes the credentials: sign in again (ckport cloud login …)")
            case .failure(let error):
                throw error
            }
        }
        print(Console.clean(lines.joined(separator: "\n")))
    }

    /// What a pull report says, as status lines.
    static func describe(_ report: PullReport) -> [String] {
        let at = Date(timeIntervalSince1970: Double(report.at) / 1000)
        var lines = [
            "  last pull \(moment(at)): \(Console.count(report.saved)) records saved, \(Console.count(report.deleted)) deleted"
        ]
        if let failure = report.failureMessage?.commandLine ?? report.failure {
            lines.append("    it stopped: \(failure)")
        }
        if let account = report.account { lines.append("    pulled as \(account)") }
        for (type, count) in report.leftOut.sorted(by: { $0.key < $1.key }) {
            lines.append(
                "    left out: \(Console.count(count)) \(type) record\(count == 1 ? "" : "s") (the store could not take them; that pull's --rejects file holds them)"
            )
        }
        for entry in report.notPulled {
            lines.append("    not pulled: \(entry.recordType) in \(entry.zone): \(entry.reason)")
        }
        for zone in report.refetched { lines.append("    fetched again from the start: \(zone)") }
        for zone in report.gone { lines.append("    gone from CloudKit: \(zone)") }
        if report.removed > 0 {
            lines.append("    \(Console.count(report.removed)) records CloudKit no longer holds were deleted here")
        }
        return lines
    }
}
