import ArgumentParser
import CKPort
import CloudKitWeb
import Formats
import Foundation
import Records

struct PushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "Push the store's records to a CloudKit database.",
        discussion: """
            Sends the records the filters select (all of the database's scope by default), or what \
            changed after --since TOKEN, in records/modify requests of at most 200 operations. \
            Custom zones CloudKit lacks are created first, and the asset files the store holds are \
            uploaded (assets/upload) before the records that name them. Safe by default: with --mode create a \
            record CloudKit already holds is reported as EXISTS; with update or replace one changed \
            in CloudKit since the store pulled it (its change tag is stale) is reported as CONFLICT, \
            and one CloudKit lacks as NOT_FOUND. Nothing is overwritten unless --force. Deletions \
            (with --since) are sent only with --force: the store keeps no change tag for them.

            Turned-away records are listed per type and, with --rejects FILE, written as JSON Lines \
            with CloudKit's code and reason; the exit status is then 3. So are records ckport does \
            not send as the store holds them: an update or replace needs the change tag of a pulled \
            record, and an asset needs its bytes in the store (pull --assets), except that an update \
            leaves an asset field it cannot send as CloudKit has it. CloudKit gives pushed records \
            new change tags: pull before the next --mode update. Deletions carry the record's name \
            alone.

            Records go with their parent link, parents first. With --mode create, each share of a \
            record hierarchy is created again once its records are in, with its public permission, \
            inviting again everyone CloudKit gave an e-mail address or phone number for, with the \
            permission they had; they must each accept again (nobody can accept for them), and the \
            share's URL is new. The pushing account owns it: a store pulled by a participant makes \
            them the owner, and the owner before is invited like the others. A share of \
            a whole zone cannot be created through CloudKit Web Services, nor can anyone share a \
            zone of another owner (the shared database): the push says which shares were not \
            created, and whom to invite again from the app. Update and replace leave shares alone.

              ckport push --container iCloud.com.example.App --environment development \\
                  --api-token-file api.txt --web-auth-token-file web.txt
              ckport push --container iCloud.com.example.App --mode update --since ck1-… \\
                  --api-token-file api.txt --web-auth-token-file web.txt --rejects conflicts.jsonl
              ckport push --container iCloud.com.example.App --type Note --dry-run | jq .operationType
            """
    )

    @OptionGroup(title: "CloudKit") var cloud: CloudOptions

    @Option(help: "create (new records only), update (changed fields) or replace (whole records).")
    var mode: PushMode = .create

    @Flag(help: "Overwrite what CloudKit holds, and send deletions (forceUpdate, forceReplace, forceDelete).")
    var force = false

    @Flag(help: "Print the operations as JSON Lines instead of sending them; needs no credentials.")
    var dryRun = false

    @OptionGroup var filter: RecordFilterOptions

    @Option(help: ArgumentHelp("Push what changed after this change token, deletions included.", valueName: "token"))
    var since: String?

    @Option(
        help: ArgumentHelp(
            "Write the records CloudKit turned away, with its reasons, to this file (JSON Lines).", valueName: "file"))
    var rejects: String?

    @Option(
        help: ArgumentHelp(
            "Bytes of operations in one records/modify request at most (besides CloudKit's 200 operations).",
            valueName: "bytes"))
    var batchBytes = ModifyBatcher.defaultByteBudget

    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        if since != nil && filter.predicate != nil {
            throw ValidationError("--since pushes every change; it does not combine with --where")
        }
        if filter.predicate != nil && filter.recordTypes.isEmpty { throw ValidationError("--where needs --type") }
        if dryRun && rejects != nil {
            throw ValidationError("--rejects lists what CloudKit turned away; a dry run sends nothing")
        }
        guard batchBytes >= 1024 else { throw ValidationError("--batch-bytes is at least 1024") }
    }

    func run() async throws {
        let store = try storeOptions.open(create: false)
        let database = try cloud.cloudDatabase()
        var request = PushRequest(query: try filter.query(), mode: mode, force: force, byteBudget: batchBytes)
        if let since { request.since = try ChangeToken(parsing: since) }
        if dryRun {
            let output = try OutputFile(path: "-")
            var count = 0
            var zones = Set<String>()
            var notSent: [String: Int] = [:]
            var example: String?
            var shares: [ShareRestoration] = []
            try CloudSync.plan(
                store, request: request, database: database,
                notSent: { rejection in
                    notSent[rejection.reason.commandLine, default: 0] += 1
                    example = example ?? "record \(rejection.operation.recordName): \(rejection.reason.commandLine)"
                }, shares: { shares.append($0) },
                { operation in
                    var line = operation.json
                    line.removeLast()
                    line.append(contentsOf: Array(",\"zoneName\":".utf8))
                    var writer = JSONWriter(capacity: 64)
                    writer.string(operation.zone.zoneName)
                    line.append(contentsOf: writer.bytes)
                    line.append(contentsOf: Array("}\n".utf8))
                    try output.write(line)
                    count += 1
                    zones.insert(operation.zone.zoneName)
                })
            try output.commit()
            if count == 0, notSent.isEmpty,
                let hint = try PushCommand.otherScopes(store, filter: filter, since: since, database: database)
            {
                Console.error(hint)
            }
            if !storeOptions.quiet {
                Console.error(
                    "would send \(Console.count(count)) operations in \(zones.count) zone\(zones.count == 1 ? "" : "s") to \(CloudSync.source(database)) (nothing was sent)"
                )
                let held = notSent.values.reduce(0, +)
                if held > 0, let example {
                    Console.error(
                        "would not send \(Console.count(held)) record\(held == 1 ? "" : "s") as the store holds \(held == 1 ? "it" : "them"), e.g. \(example)"
                    )
                }
            }
            for share in shares { Console.error(PushCommand.describe(share)) }
            return
        }
        let progress = ProgressLine("pushing", quiet: storeOptions.quiet)
        let connection = try cloud.connect(quiet: storeOptions.quiet, progress: progress)
        let rejectsFile = try rejects.map { try OutputFile(path: $0) }
        let started = Date()
        let outcome: Result<PushResult, Error>
        do {
            let result = try await CloudSync.push(
                connection.client, from: store, request: request, progress: progress.handler
            ) { rejection in
                try rejectsFile?.write(PushCommand.rejectLine(rejection))
            }
            try await connection.finish()
            outcome = .success(result)
        } catch {
            try? await connection.finish()
            outcome = .failure(error)
        }
        progress.finish()
        try rejectsFile?.commit()
        let result = try outcome.get()
        let total = result.total
        if !storeOptions.quiet {
            for zone in result.zonesCreated { Console.error("created zone \(zone)") }
            for (type, counts) in result.byType.sorted(by: { $0.key < $1.key }) {
                Console.error("\(type): " + PushCommand.describe(counts))
            }
            Console.error(
                "pushed \(Console.count(total.saved)) records and \(Console.count(total.deleted)) deletions to \(result.destination) in \(result.requests) request\(result.requests == 1 ? "" : "s"), \(Console.seconds(Date().timeIntervalSince(started)))"
            )
        }
        if result.requests == 0, total.rejected == 0,
            let hint = try PushCommand.otherScopes(store, filter: filter, since: since, database: database)
        {
            Console.error(hint)
        }
        // What became of the shares is said even with --quiet: who shares what with whom is
        // what a restore most often cannot bring back whole.
        for share in result.shares { Console.error(PushCommand.describe(share)) }
        if total.rejected > 0 {
            let kept = rejects.map { "; they are in \($0)" } ?? " (--rejects FILE lists them)"
            throw CommandFailure(
                status: .failure,
                message: "CloudKit turned away \(total.rejected) record\(total.rejected == 1 ? "" : "s")\(kept)")
        }
    }

    /// When a push selects nothing because the store's records are in another scope than the
    /// target database's (a store pulled from the shared database, pushed to a private one), a
    /// note that says where they are and which --scope sends them.
    static func otherScopes(
        _ store: some RecordStoring, filter: RecordFilterOptions, since: String?, database: CloudKitDatabase
    ) throws -> String? {
        guard filter.scope == nil, since == nil, let target = DatabaseScope(rawValue: database.scope.rawValue) else {
            return nil
        }
        var query = try filter.query()
        var elsewhere: [(DatabaseScope, Int)] = []
        for scope in DatabaseScope.allCases where scope != target {
            query.scope = scope
            let count = try store.read { try $0.count(query) }
            if count > 0 { elsewhere.append((scope, count)) }
        }
        guard let first = elsewhere.first else { return nil }
        let places = elsewhere.map {
            "\(Console.count($0.1)) record\($0.1 == 1 ? "" : "s") in the \($0.0.rawValue) scope"
        }.joined(separator: ", ")
        return
            "note: nothing to send: a push takes the records of the target database's scope (\(target.rawValue)) unless --scope says otherwise, "
            + "and the store has none there that the filters select (\(places)); --scope \(first.0.rawValue) sends them to the \(target.rawValue) database"
    }

    /// A share's fate in a push, and who it invites again or cannot.
    static func describe(_ share: ShareRestoration) -> String {
        var what = "share \(Console.clean(share.shareName))"
        if let root = share.root {
            what += " of \(Console.clean(root))"
        } else if share.shareName == Record.zoneShareName {
            what += " of zone \(Console.clean(share.zone.zoneName))"
        }
        if let title = share.title { what += " (\"\(Console.clean(title))\")" }
        func person(_ p: ShareDetails.Participant) -> String {
            let reach = p.emailAddress ?? p.phoneNumber
            return Console.clean(p.displayName) + (reach.map { " <\(Console.clean($0))>" } ?? "")
                + (p.permission.map { " \($0)" } ?? "")
        }
        var lines: [String] = []
        switch share.state {
        case .created(let url):
            lines.append("\(what): created again\(url.map { ", \($0)" } ?? "")")
            if !share.invited.isEmpty {
                lines.append(
                    "  invited again, each to accept anew (CloudKit lets nobody accept for them): "
                        + share.invited.map(person).joined(separator: ", "))
            }
        case .wouldCreate:
            lines.append("\(what): would be created again")
            if !share.invited.isEmpty {
                lines.append(
                    "  would invite again, each to accept anew: " + share.invited.map(person).joined(separator: ", "))
            }
        case .notCreated(let why):
            lines.append("\(what): not created again: \(why.commandLine)")
            if !share.invited.isEmpty {
                lines.append("  to invite again from the app: " + share.invited.map(person).joined(separator: ", "))
            }
        case .leftAlone(let why):
            lines.append("\(what): left as CloudKit has it (\(why.commandLine))")
            return lines.joined(separator: "\n")
        }
        for (p, why) in share.notInvited { lines.append("  not invited again: \(person(p)): \(why)") }
        return lines.joined(separator: "\n")
    }

    static func describe(_ counts: PushCounts) -> String {
        var parts = ["\(Console.count(counts.saved)) saved"]
        if counts.deleted > 0 { parts.append("\(Console.count(counts.deleted)) deleted") }
        if counts.exists > 0 { parts.append("\(Console.count(counts.exists)) already there (EXISTS)") }
        if counts.conflicts > 0 { parts.append("\(Console.count(counts.conflicts)) changed in CloudKit (CONFLICT)") }
        if counts.missing > 0 { parts.append("\(Console.count(counts.missing)) not in CloudKit (NOT_FOUND)") }
        if counts.failed > 0 { parts.append("\(Console.count(counts.failed)) not saved") }
        return parts.joined(separator: ", ")
    }

    /// `{"error": "CODE: reason", "serverErrorCode": …, "zoneName": …, "operation": {…}}`
    static func rejectLine(_ rejection: PushRejection) -> [UInt8] {
        var out = JSONWriter(capacity: rejection.operation.json.count + 128)
        out.raw("{\"error\":")
        out.string("\(rejection.serverErrorCode): \(rejection.reason.commandLine)")
        out.raw(",\"serverErrorCode\":")
        out.string(rejection.serverErrorCode)
        out.raw(",\"zoneName\":")
        out.string(rejection.operation.zone.zoneName)
        out.raw(",\"operation\":")
        out.bytes.append(contentsOf: rejection.operation.json)
        out.raw("}\n")
        return out.bytes
    }
}

extension PushMode: ExpressibleByArgument {}
