import CloudKitWeb
import Formats
import Foundation
import Records
import StoreCore

/// Moving records between a store and CloudKit itself.
public enum CloudSync {}

/// What a pull fetched from one zone.
public struct ZonePullResult: Sendable, Equatable {
    public var zone: ZoneID
    /// Whether the zone was read through its change feed (else by queries, per record type).
    public var incremental: Bool
    public var pages = 0
    public var saved = 0
    public var deleted = 0
    /// Records of the zone's pages that the store could not take and left out (each with its
    /// reason in the pull's rejects): a type or field the schema lacks, a value that does not fit.
    public var leftOut = 0
    /// Why the zone's change feed was read again from the start (its sync token expired, the
    /// zone was reset), or nil; the records CloudKit no longer held are counted in `removed`.
    public var refetched: String?
    /// Whether CloudKit says the zone is gone (deleted, or purged): its records went from the
    /// store, counted in `removed`, and the store forgot its sync token.
    public var gone = false
    /// Records deleted from the store because CloudKit no longer holds them (see `refetched`
    /// and `gone`); the store keeps their tombstones.
    public var removed = 0
    /// Records of such a zone that never came from CloudKit (no change tag: made or imported
    /// here), kept where they are.
    public var keptLocal = 0
    /// The sync token the store now holds for the zone.
    public var token: String?
}

/// Records of one type in one zone that a pull did not ask CloudKit for, or that CloudKit would
/// not give, and why.
public struct NotPulled: Sendable, Equatable {
    public var zone: ZoneID
    public var recordType: String
    public var reason: String
}

/// What a pull did.
public struct PullResult: Sendable {
    public var source: String
    public var zones: [ZonePullResult]
    /// Record types of zones read by queries that were not read, with the reason.
    public var notPulled: [NotPulled] = []
    /// Records left out, by record type (see ``ZonePullResult/leftOut``).
    public var leftOutByType: [String: Int] = [:]
    /// The first records left out, with why (all of them go to the pull's rejects).
    public var leftOutExamples: [InputIssue] = []
    /// Types and fields the schema gained (with `allowNewTypes`).
    public var schemaChanges: [String] = []
    /// The account pulled as, as CloudKit names it (the private database's owner, or the
    /// signed-in user of the shared one); nil for the public database.
    public var account: String?
    /// What the pull could not do and went on without (read `zones/changes`, say).
    public var notes: [String] = []
    public var saved: Int { zones.reduce(0) { $0 + $1.saved } }
    public var deleted: Int { zones.reduce(0) { $0 + $1.deleted } }
    public var leftOut: Int { zones.reduce(0) { $0 + $1.leftOut } }
    public var removed: Int { zones.reduce(0) { $0 + $1.removed } }
}

/// A pull asked for something CloudKit does not offer.
public struct PullRequestError: CKPortError, Sendable {
    public var category: ErrorCategory { .usage }
    public var description: String

    public init(description: String) { self.description = description }
}

extension CloudSync {
    /// The name a pull's sync tokens are kept under: container, environment and database.
    public static func source(_ database: CloudKitDatabase) -> String {
        "\(database.container)/\(database.environment.rawValue)/\(database.scope.rawValue)"
    }

    /// The most records CloudKit gives in one answer ("Data Size Limits": 200).
    public static let maxResultsLimit = 200

    /// Where the store keeps the token of a database's zone changes (`zones/changes`), beside
    /// its zones' sync tokens: a zone name CloudKit keeps for itself (it starts with `_`), so no
    /// zone of the user's can take it.
    public static let zoneChangesName = "_zoneChanges"

    /// What a zone's sync token is while its feed is read again from the start: a later pull
    /// that finds it starts over, so that a fetch cut off half way still ends with the records
    /// CloudKit no longer holds removed.
    static let refetchMarker = "ckport:fetch-again"

    /// What a zone's sync token is after a pull left some of its records out (a type or field
    /// the schema lacked): the next pull reads its feed again from the start, so that once the
    /// schema can take them they come in. (A feed asked from a later token would never bring
    /// them back; a zone read by queries is read whole every pull anyway.)
    static let leftOutMarker = "ckport:left-out"

    /// Pulls the database `client` speaks to into `store`.
    ///
    /// Custom zones of the private and shared databases come through their change feeds, from
    /// the sync token the store kept for each; each page and its token commit together, so a
    /// pull cut off anywhere resumes where it stopped. The public database and default zones
    /// have no change feed: they are read by queries per record type of the store's schema,
    /// only the types CloudKit answers queries for (a `___recordID` QUERYABLE, and not a
    /// system type such as `Users`); the others are listed in the result's `notPulled`, as
    /// are types CloudKit still refuses to query (BAD_REQUEST). Queries do not see deletions.
    ///
    /// Shares come with their zones: a `cloudkit.share` record is kept with its participants,
    /// permissions, owner and URL (CloudKit's share type joins the schema the first time), and
    /// every record keeps its `parent` and `share` links. In the shared database each zone is
    /// kept under its owner.
    ///
    /// A feed never stalls on what the store cannot take: a record of a type or with a field
    /// the schema lacks (a type added after the schema was exported), or whose value does not
    /// fit, is left out — counted, and given to `rejects` with its reason and its JSON — and
    /// the rest of its page and the zone's token are saved. With `allowNewTypes` new types and
    /// fields join the schema instead.
    ///
    /// Zones CloudKit says are gone (`zones/changes` in the private database; a zone that
    /// `zones/list` no longer lists) lose their records in the store, which keeps their
    /// tombstones, and their sync tokens. A zone whose sync token no longer works (it expired,
    /// or the zone was reset) is read again from the start, and its records CloudKit no longer
    /// holds are deleted from the store. Both happen only to zones earlier pulls fetched from
    /// this database: records that came into the store another way are not touched.
    ///
    /// Up to `concurrency` zones (or record types) are fetched at once, each a page at a time
    /// in order, while one writer saves the pages as they come, all that have arrived in one
    /// transaction; at most 48 pages (or twice `concurrency`, if more) are on their way or
    /// waiting at any moment, so memory stays flat.
    ///
    /// With `assets`, each asset a record names (ASSETID, or ASSETID_LIST elements) is
    /// downloaded and stored with the record's page, in the same transaction; without, the
    /// store keeps the asset's checksum and size.
    public static func pull(
        _ client: CloudKitClient, into store: some RecordStoring, resultsLimit: Int? = nil,
        concurrency: Int = 4, assets: Bool = false, allowNewTypes: Bool = false, rejects: RejectSink? = nil,
        progress: ProgressHandler? = nil
    ) async throws -> PullResult {
        if let resultsLimit, !(1...maxResultsLimit).contains(resultsLimit) {
            throw PullRequestError(
                description:
                    "CloudKit gives 1 to \(maxResultsLimit) records per answer; \(resultsLimit) records per page cannot be asked for"
            )
        }
        let staging: String? = assets ? try makeStagingDirectory() : nil
        defer { if let staging { PrivateFiles.removeFolder(staging) } }
        let database = client.database
        let source = source(database)
        let states = try await store.readSession { try $0.syncStates(source: source) }
        let plan = try await planZones(client, store: store, states: states, source: source)
        let zoneIDs = plan.zones
        let storeSchema = try store.loadSchema()
        // Shares are read as CloudKit's share type whether or not the store's schema has it
        // yet (a page that holds one adds it).
        var readingSchema = storeSchema
        if readingSchema.recordType(named: Record.shareType) == nil { readingSchema.recordTypes.append(.share) }
        let schema = readingSchema
        let feeds = { (zone: ZoneID) in database.scope != .public && zone.zoneName != ZoneID.defaultZoneName }
        var result = PullResult(source: source, zones: [])
        result.account = plan.account
        result.notes = plan.notes
        var results: [ZoneID: ZonePullResult] = [:]
        if !plan.gone.isEmpty || plan.metaToken != nil {
            let gone = plan.gone
            let metaToken = plan.metaToken
            let metaZone = plan.metaZone
            let removed = try await StoreThreads.run { () throws -> [ZoneID: (removed: Int, kept: Int)] in
                try store.writeSession { session in
                    var removed: [ZoneID: (removed: Int, kept: Int)] = [:]
                    for zone in gone {
                        removed[zone] = try removeZone(zone, session: session)
                        try session.saveSyncToken(nil, source: source, zone: zone)
                    }
                    if let metaToken { try session.saveSyncToken(metaToken, source: source, zone: metaZone) }
                    return removed
                }
            }
            for zone in gone {
                var entry = ZonePullResult(zone: zone, incremental: true)
                entry.gone = true
                entry.removed = removed[zone]?.removed ?? 0
                entry.keptLocal = removed[zone]?.kept ?? 0
                results[zone] = entry
            }
        }

        // What to fetch: a zone's change feed, or one record type of a zone by queries.
        var units: [PullUnit] = []
        for zone in zoneIDs {
            results[zone] = ZonePullResult(zone: zone, incremental: feeds(zone))
            if feeds(zone) {
                let token = plan.refetch.contains(zone) ? refetchMarker : states.first { $0.zone == zone }?.token
                units.append(PullUnit(zone: zone, recordType: nil, startToken: token))
                continue
            }
            for type in storeSchema.recordTypes.sorted(by: { $0.name < $1.name }) {
                if let reason = whyNotQueried(type) {
                    result.notPulled.append(NotPulled(zone: zone, recordType: type.name, reason: reason))
                } else {
                    units.append(PullUnit(zone: zone, recordType: type.name, startToken: nil))
                }
            }
        }
        let width = max(1, concurrency)
        // Pages on their way or waiting: enough that the fetchers keep fetching while the writer
        // saves what has arrived, and that a writer which falls behind commits many at once.
        let slots = PageSlots(max(2 * width, 48))
        let arrivals = PageQueue()
        let refused = RefusedQueries()
        let fetching = Task {
            // A fetch that fails stops the others from asking for more; each finishes the request
            // it has under way (cutting one would lose the web auth token its answer brings), then
            // the first failure ends the queue.
            let firstFailure = await withTaskGroup(of: Error?.self) { group -> Error? in
                var next = units.makeIterator()
                var first: Error?
                func start(_ unit: PullUnit) {
                    group.addTask {
                        do {
                            try await fetch(
                                unit, client: client, schema: schema, resultsLimit: resultsLimit, slots: slots,
                                staging: staging,
                                refused: refused
                            ) { await arrivals.put(unit, $0) }
                            return nil
                        } catch {
                            return error
                        }
                    }
                }
                for _ in 0..<width {
                    guard let unit = next.next() else { break }
                    start(unit)
                }
                while let outcome = await group.next() {
                    if let outcome, first == nil {
                        first = outcome
                        await slots.close()
                    }
                    if first == nil, let unit = next.next() { start(unit) }
                }
                return first
            }
            await arrivals.finish(firstFailure)
        }
        let refetches = Refetches()
        let leftOutZones = LeftOutZones()
        var total = 0
        var failure: Error?
        var importing = ImportOptions(mode: .replace, allowNewFields: allowNewTypes, skipInvalid: true)
        importing.assetDirectory = staging
        let options = importing
        do {
            // Every page that has arrived is saved in one transaction (each zone's newest token
            // with them): a writer that falls behind catches up with fewer, larger commits.
            while let batch = try await arrivals.take() {
                guard failure == nil else {
                    for _ in batch { await slots.release() }
                    continue
                }
                let pages = batch.map { PulledPage(unit: $0.0, page: $0.1) }
                for page in pages where page.page.kind.isFetched { results[page.unit.zone]!.pages += 1 }
                func commit(_ pages: [PulledPage]) async throws {
                    let saved = try await StoreThreads.run {
                        try save(
                            pages, into: store, source: source, options: options, rejects: rejects,
                            refetches: refetches, leftOut: leftOutZones)
                    }
                    for (entry, count) in zip(pages, saved.counts) {
                        let zone = entry.unit.zone
                        results[zone]!.saved += count.saved
                        results[zone]!.deleted += count.deleted
                        results[zone]!.leftOut += count.leftOut
                        results[zone]!.removed += count.removed
                        results[zone]!.keptLocal += count.kept
                        total += count.saved + count.deleted
                        switch entry.page.kind {
                        case .zoneGone:
                            results[zone]!.gone = true
                            results[zone]!.token = nil
                        case .refetch(_, let reason):
                            results[zone]!.refetched = reason
                            if !entry.page.moreComing { results[zone]!.token = entry.page.syncToken }
                        case .fetched where entry.unit.recordType == nil:
                            results[zone]!.token = entry.page.syncToken
                        case .fetched:
                            break
                        }
                    }
                    for (type, count) in saved.summary.counts where count.rejected > 0 {
                        result.leftOutByType[type, default: 0] += count.rejected
                    }
                    result.leftOutExamples += saved.summary.issues.prefix(max(0, 5 - result.leftOutExamples.count))
                    result.schemaChanges += saved.summary.schemaChanges
                    progress?(OperationProgress(records: total))
                }
                do {
                    defer { for entry in batch { for file in entry.1.stagedFiles { unlink(file) } } }
                    do {
                        try await commit(pages)
                    } catch  where pages.count > 1 {
                        // The pages before the one that failed are kept, each with its token, as
                        // if they had come one at a time; the failure is the first page's that fails.
                        for page in pages { try await commit([page]) }
                    }
                } catch {
                    // No new requests; the ones under way finish (see above).
                    failure = error
                    await slots.close()
                }
                for _ in batch { await slots.release() }
            }
        } catch {
            failure = failure ?? error
        }
        _ = await fetching.result
        result.notPulled += await refused.all
        result.zones = results.keys.sorted().map { results[$0]! }
        if let failure {
            // What the pages saved before the failure left out stays told (cloud status).
            var report = PullReport(result)
            report.failure = (failure as? CKPortError)?.description ?? "\(failure)"
            report.failureMessage = (failure as? CKPortError)?.explanation
            try? keep(report, in: store, source: source)
            throw failure
        }
        try keep(PullReport(result), in: store, source: source)
        return result
    }

    /// Why CloudKit would not answer queries for records of `type`, or nil when it would.
    static func whyNotQueried(_ type: RecordTypeDefinition) -> String? {
        if type.name == "Users" || type.name.hasPrefix("cloudkit.") || type.name.hasPrefix("_") {
            return "a system type: CloudKit does not answer queries for it"
        }
        guard type.field(named: "___recordID")?.options.contains(.queryable) == true else {
            return
                "its ___recordID is not QUERYABLE in the schema, and CloudKit answers queries only for types with that index (add it in CloudKit Console, deploy it, and export the schema again)"
        }
        return nil
    }

    /// Fetches one unit's pages in order, each when a slot is free, handing each to `deliver`.
    private static func fetch(
        _ unit: PullUnit, client: CloudKitClient, schema: Schema, resultsLimit: Int?, slots: PageSlots,
        staging: String?,
        refused: RefusedQueries, deliver: (CloudPage) async -> Void
    ) async throws {
        let codec = JSONRecordCodec(schema: schema, readStyle: .canonical, defaultZone: unit.zone)
        var number = 0
        // A zone's changes after a sync token, or (a zone that keeps no change feed) a query
        // of one type, page after page.
        var changesRequest = CloudKitWire.RecordChangesRequest(zoneID: wireZone(unit.zone), resultsLimit: resultsLimit)
        var queryRequest = unit.recordType.map {
            CloudKitWire.QueryRequest(
                zoneID: wireZone(unit.zone), query: .init(recordType: $0), resultsLimit: resultsLimit)
        }
        // A fetch from the start that a killed pull left unfinished starts over.
        var refetch: String? =
            unit.startToken == refetchMarker
            ? "a fetch from the start that an earlier pull began had not ended"
            : unit.startToken == leftOutMarker
                ? "an earlier pull left some of its records out, which this one asks for again" : nil
        var firstOfRefetch = refetch != nil
        if let token = unit.startToken, refetch == nil { changesRequest.syncToken = token }
        let operation = unit.recordType == nil ? "records/changes" : "records/query"
        while true {
            guard await slots.acquire() else { return }
            let body = try queryRequest.map(CloudKitWire.encode) ?? CloudKitWire.encode(changesRequest)
            var page: CloudPage
            do {
                do {
                    page = try CloudPage(try await client.send(operation, body: body), operation: operation)
                } catch let error as CloudKitServerError
                    where unit.recordType == nil && error.isExpiredSyncToken && refetch == nil
                    && changesRequest.syncToken != nil
                {
                    refetch =
                        "its sync token no longer works (CloudKit answered \(error.serverErrorCode)\(error.reason.map { ": \($0)" } ?? "")), so it was read again from the start"
                    firstOfRefetch = true
                    changesRequest.syncToken = nil
                    await slots.release()
                    continue
                } catch let error as CloudKitServerError where unit.recordType == nil && error.isZoneGone {
                    var gone = CloudPage()
                    gone.kind = .zoneGone
                    await deliver(gone)
                    return
                } catch let error as CloudKitServerError where unit.recordType != nil && error.code == .badRequest {
                    await refused.add(
                        NotPulled(
                            zone: unit.zone, recordType: unit.recordType!,
                            reason: "CloudKit would not query it: \(error.reason ?? error.serverErrorCode)"))
                    await slots.release()
                    return
                }
                if let staging { try await page.downloadAssets(client, into: staging) }
                // Decoded here, beside the writer, which then only saves.
                number += 1
                page.decode(
                    with: codec,
                    name:
                        "CloudKit page \(number) of \(unit.recordType.map { "type \($0) in " } ?? "")zone \(unit.zone.zoneName)",
                    zone: unit.zone)
                if let refetch {
                    page.kind = .refetch(begins: firstOfRefetch, reason: refetch)
                    firstOfRefetch = false
                }
                page.keepsUnchanged = unit.startToken == leftOutMarker
            } catch {
                await slots.release()
                throw error
            }
            await deliver(page)
            if unit.recordType == nil {
                guard page.moreComing, let token = page.syncToken else { return }
                changesRequest.syncToken = token
            } else {
                guard let marker = page.continuationMarker else { return }
                queryRequest?.continuationMarker = marker
            }
        }
    }

    /// What saving pages did to each.
    struct SavedPages {
        var counts: [(saved: Int, deleted: Int, leftOut: Int, removed: Int, kept: Int)]
        var summary: ImportSummary
    }

    /// Pages in one transaction: each page's records (checked against the schema, replacing
    /// what the store holds; what does not fit is left out, to `rejects`) in order, the
    /// deletions, then each change feed's newest sync token; a zone that is gone loses its
    /// records, and a zone read again from the start loses, at its last page, the records
    /// CloudKit no longer holds. A deletion a later page of the batch undoes (the record made
    /// again) is not applied; a record a later page deletes is deleted.
    static func save(
        _ batch: [PulledPage], into store: some RecordStoring, source: String, options: ImportOptions,
        rejects: RejectSink?, refetches: Refetches, leftOut: LeftOutZones = LeftOutZones()
    ) throws -> SavedPages {
        // The deletions left standing at the end of the batch, with the page that made each.
        var deletions: [RecordID: Int] = [:]
        for (index, entry) in batch.enumerated() {
            for case let name? in entry.page.records.map(\.name) {
                deletions[RecordID(recordName: name, zone: entry.unit.zone)] = nil
            }
            for name in entry.page.deletedNames { deletions[RecordID(recordName: name, zone: entry.unit.zone)] = index }
        }
        // The names CloudKit holds, for each zone read again from the start.
        for entry in batch {
            guard case .refetch(let begins, _) = entry.page.kind else { continue }
            if begins { try refetches.begin(entry.unit.zone) }
            try refetches.note(entry.page.records.compactMap(\.name), in: entry.unit.zone)
        }
        var counts = batch.map { _ in (saved: 0, deleted: 0, leftOut: 0, removed: 0, kept: 0) }
        // What is left out reaches `rejects` (and is synced) only once the transaction is about
        // to commit: a batch that fails and is saved again page by page hands nothing twice,
        // and a page whose token moved on has its left-out records kept first.
        let held = HeldRejects()
        // A zone that holds a share gives its cloudkit.share record with the rest: the store
        // keeps it under CloudKit's own share type, which joins the schema when it lacks it.
        let addingTypes = batch.contains { $0.page.holdsShares } ? [RecordTypeDefinition.share] : []
        let hooks = ImportHooks(
            rejects: held, addingTypes: addingTypes,
            finishing: { session in
                // A zone that left records out keeps a token that has its next pull read it again.
                let leaving = leftOut.adding(held.zones)
                func token(_ token: String?, of zone: ZoneID) -> String? {
                    leaving.contains(zone) ? leftOutMarker : token
                }
                try held.pass(to: rejects)
                let ordered = deletions.sorted { ($0.value, $0.key.recordName) < ($1.value, $1.key.recordName) }.map(
                    \.key)
                let present = try ordered.filter { try session.record($0) != nil }
                // A record deleted because it pointed at one (DELETE_SELF) counts with that one's page.
                var pageOf = deletions
                for gone in try session.delete(present) {
                    let page = gone.cause.flatMap { pageOf[$0] } ?? deletions[gone.id] ?? batch.count - 1
                    pageOf[gone.id] = page
                    counts[page].deleted += 1
                }
                for (index, entry) in batch.enumerated() {
                    let zone = entry.unit.zone
                    switch entry.page.kind {
                    case .zoneGone:
                        let (removed, kept) = try removeZone(zone, session: session)
                        counts[index].removed += removed
                        counts[index].kept += kept
                        try session.saveSyncToken(nil, source: source, zone: zone)
                    case .refetch where entry.page.moreComing:
                        // Until the last page, a later pull starts this fetch over.
                        try session.saveSyncToken(refetchMarker, source: source, zone: zone)
                    case .refetch:
                        let (removed, kept) = try refetches.sweep(zone, session: session)
                        counts[index].removed += removed
                        counts[index].kept += kept
                        try session.saveSyncToken(token(entry.page.syncToken, of: zone), source: source, zone: zone)
                    case .fetched where entry.unit.recordType == nil:
                        try session.saveSyncToken(token(entry.page.syncToken, of: zone), source: source, zone: zone)
                    case .fetched:
                        break
                    }
                }
            })
        // A zone read again for the records an earlier pull left out: those the store holds as
        // CloudKit has them are not saved again.
        var pages = batch.map(\.page)
        var skipped = batch.map { _ in 0 }
        for index in pages.indices where pages[index].keepsUnchanged {
            let tags: [(RecordID, String)] = pages[index].items.compactMap { item in
                guard case .record(let sourced) = item, let tag = sourced.record.changeTag else { return nil }
                return (sourced.record.id, tag)
            }
            let unchanged: Set<String> = try store.read { session in
                Set(try tags.compactMap { id, tag in try session.record(id)?.changeTag == tag ? id.recordName : nil })
            }
            guard !unchanged.isEmpty else { continue }
            pages[index].items.removeAll { item in
                if case .record(let sourced) = item { return unchanged.contains(sourced.record.recordName) }
                return false
            }
            skipped[index] = unchanged.count
        }
        let summary = try store.importRecords([PagesRecordSource(pages)], schema: nil, options: options, hooks: hooks)
        // Saved and left out, page by page: the import counts by type, so count the pages' items.
        var leftOutNames = Set(summary.issues.compactMap(\.recordName))
        for (index, entry) in batch.enumerated() {
            var leftOut = 0
            for case let name? in entry.page.records.map(\.name) where leftOutNames.remove(name) != nil { leftOut += 1 }
            counts[index].leftOut = leftOut
            counts[index].saved = entry.page.records.count - leftOut - skipped[index]
        }
        refetches.finished(
            batch.filter { if case .refetch = $0.page.kind { return !$0.page.moreComing } else { return false } }.map(
                \.unit.zone))
        return SavedPages(counts: counts, summary: summary)
    }

    /// Deletes the store's records of `zone` that came from CloudKit (the store keeps their
    /// tombstones); records with no change tag were made or imported here and are kept.
    /// Returns how many went and how many were kept.
    static func removeZone(_ zone: ZoneID, session: any RecordSession, keeping held: NameSet? = nil) throws -> (
        removed: Int, kept: Int
    ) {
        var ids: [RecordID] = []
        var kept = 0
        try session.forEach(RecordQuery(scope: zone.scope, zoneName: zone.zoneName)) { record in
            guard record.zone == zone else { return }
            if let held, try held.contains(record.recordName) { return }
            if record.changeTag == nil { kept += 1 } else { ids.append(record.id) }
        }
        return (try session.delete(ids).count, kept)
    }
}

/// What a pull sets out to do, from `zones/list` and `zones/changes`, before it fetches records.
struct ZonePlan {
    /// The zones to read, as the store names them.
    var zones: [ZoneID]
    /// Zones pulled before that CloudKit no longer has.
    var gone: [ZoneID]
    /// Zones pulled before that were deleted and made again: read again from the start.
    var refetch: Set<ZoneID>
    var metaZone: ZoneID
    var metaToken: String?
    var account: String?
    var notes: [String]
}

/// The store holds another account's data.
public struct AccountMismatch: CKPortError, Sendable {
    public var category: ErrorCategory { .usage }
    public var store: String
    public var source: String
    public var pulledAs: String
    public var signedInAs: String

    public var description: String {
        "\(store) holds \(source) as pulled by account \(pulledAs); these credentials sign in as \(signedInAs). Nothing was written: pull this account into a store of its own, or sign in as \(pulledAs)"
    }
}

extension CloudSync {
    /// Lists the zones and decides what becomes of each.
    ///
    /// - Zones of the private and public databases are told apart by name: the store names
    ///   them with the default owner, or with the owner CloudKit gave if an earlier pull stored
    ///   them so (ckport did until it kept the default owner), so that such a store goes on
    ///   where it stopped. Shared zones are their owners'.
    /// - The account the credentials sign in as must be the one the store was pulled as:
    ///   another account's zones are not ours to delete, or to mix in.
    /// - A private zone is gone only when `zones/changes` says it was deleted; a shared zone
    ///   when it is no longer listed (nobody shares it any more). A zone deleted and made again
    ///   is read again from the start.
    static func planZones(_ client: CloudKitClient, store: some RecordStoring, states: [SyncState], source: String)
        async throws -> ZonePlan
    {
        let scope = client.database.scope
        let storeScope = DatabaseScope(rawValue: scope.rawValue)!
        let entries = try await listedZones(client)
        var account: String?
        switch scope {
        case .private: account = entries.lazy.compactMap(\.ownerRecordName).first
        case .shared:
            account = try await client.currentUser()
        case .public: account = nil
        }
        // The account the store was pulled as: the last report's, else (a store an earlier ckport
        // pulled) the owner its private zones were kept under.
        let zoneStates = states.filter(isZoneState)
        var pulledAs = try lastPull(in: store, source: source)?.account
        if pulledAs == nil && scope == .private {
            pulledAs = zoneStates.map(\.zone.ownerRecordName).first { $0 != ZoneID.defaultOwnerName }
        }
        if let account, let pulledAs, account != pulledAs {
            throw AccountMismatch(store: store.location, source: source, pulledAs: pulledAs, signedInAs: account)
        }
        let stored = Set(try await store.readSession { $0.zones }.filter { $0.scope == storeScope })
        func resolve(_ wire: CloudKitWire.ZoneID) -> ZoneID? {
            guard let normal = zoneID(wire, in: scope) else { return nil }
            guard scope != .shared, let given = wire.ownerRecordName else { return normal }
            let legacy = ZoneID(scope: storeScope, zoneName: normal.zoneName, ownerRecordName: given)
            return stored.contains(legacy) || zoneStates.contains { $0.zone == legacy } ? legacy : normal
        }
        let zones = entries.compactMap(resolve).sorted()
        let listedNames = Set(zones.map(\.zoneName))
        var plan = ZonePlan(
            zones: zones, gone: [], refetch: [], metaZone: ZoneID(scope: storeScope, zoneName: zoneChangesName),
            metaToken: nil, account: account, notes: [])
        switch scope {
        case .shared:
            let listed = Set(zones)
            plan.gone = zoneStates.map(\.zone).filter { !listed.contains($0) }.sorted()
        case .private:
            let pulledBefore = Dictionary(
                zoneStates.map { ($0.zone.zoneName, $0.zone) }, uniquingKeysWith: { first, _ in first })
            let since = states.first { $0.zone == plan.metaZone }?.token
            var changes: [ZoneChange] = []
            do {
                (changes, plan.metaToken) = try await zoneChanges(client, since: since)
            } catch let error as CloudKitServerError
                where since != nil && !error.isRetryable && error.category != .authentication
            {
                // A token CloudKit no longer takes: ask again from the start.
                do {
                    (changes, plan.metaToken) = try await zoneChanges(client, since: nil)
                    plan.notes.append(
                        "the zone changes were read again from the start (CloudKit answered \(error.serverErrorCode) to the token kept)"
                    )
                } catch let again as CloudKitServerError where !again.isRetryable && again.category != .authentication {
                    plan.notes.append(
                        "deleted zones were not looked for: CloudKit answered \(again.serverErrorCode) to zones/changes"
                    )
                }
            } catch let error as CloudKitServerError where !error.isRetryable && error.category != .authentication {
                plan.notes.append(
                    "deleted zones were not looked for: CloudKit answered \(error.serverErrorCode) to zones/changes")
            }
            for change in changes where change.deleted || change.purged {
                guard let before = pulledBefore[change.zone.zoneName] else { continue }
                if listedNames.contains(change.zone.zoneName) {
                    plan.refetch.insert(before)
                } else {
                    plan.gone.append(before)
                }
            }
            plan.gone = Array(Set(plan.gone)).sorted()
        case .public:
            break
        }
        return plan
    }
}

/// The zones whose change feeds are being read again from the start, each with the names of
/// the records CloudKit holds (kept on disk: a zone may hold millions). Used by the writer only.
final class Refetches {
    private var names: [ZoneID: NameSet] = [:]

    func begin(_ zone: ZoneID) throws { names[zone] = try NameSet() }

    func note(_ recordNames: [String], in zone: ZoneID) throws {
        if names[zone] == nil { names[zone] = try NameSet() }
        try names[zone]!.insert(recordNames)
    }

    /// Deletes the records of `zone` CloudKit no longer holds (those that came from it: see
    /// ``CloudSync/removeZone(_:session:keeping:)``); returns how many went, and were kept.
    func sweep(_ zone: ZoneID, session: any RecordSession) throws -> (removed: Int, kept: Int) {
        guard let held = names[zone] else { return (0, 0) }
        return try CloudSync.removeZone(zone, session: session, keeping: held)
    }

    func finished(_ zones: [ZoneID]) {
        for zone in zones { names[zone] = nil }
    }
}

/// The zones a pull left records out of: their tokens stay at ``CloudSync/leftOutMarker`` to
/// the end of the pull. Used by the writer only.
final class LeftOutZones {
    private var zones: Set<ZoneID> = []

    /// Every zone left out of so far, `more` among them.
    func adding(_ more: Set<ZoneID>) -> Set<ZoneID> {
        zones.formUnion(more)
        return zones
    }
}

/// Rejected records held until their transaction is about to commit.
final class HeldRejects: RejectSink {
    private var held: [(InputIssue, [UInt8]?)] = []

    func reject(_ issue: InputIssue, raw: [UInt8]?) throws { held.append((issue, raw)) }

    /// The zones of the records held.
    var zones: Set<ZoneID> { Set(held.compactMap(\.0.zone)) }

    /// Hands the records over, and has them made durable. Each keeps its zone (CloudKit's
    /// record of a zone's feed names none): imported again, it goes back where it was.
    func pass(to sink: RejectSink?) throws {
        guard let sink else { return }
        for (issue, raw) in held {
            // The validator speaks of an import's remedy; a pull's is its own.
            var said = issue
            said.message = issue.message.replacing(.allowNewFields, with: .allowNewTypes)
            try sink.reject(said, raw: raw.map { HeldRejects.placed($0, in: issue.zone) })
        }
        held = []
        try sink.sync()
    }

    /// A record's JSON with the `scope` and `zoneID` of the zone the store keeps it in: a feed's
    /// records name their zone as CloudKit does (in the private database, the user's own record
    /// name as its owner, which the store keeps as the default owner) and no scope.
    static func placed(_ raw: [UInt8], in zone: ZoneID?) -> [UInt8] {
        guard let zone, case .object(let object)? = try? JSONParser.parse(raw) else { return raw }
        var out = JSONWriter(capacity: raw.count + 128)
        out.raw("{\"scope\":")
        out.string(zone.scope.rawValue)
        out.raw(",\"zoneID\":{\"zoneName\":")
        out.string(zone.zoneName)
        out.raw(",\"ownerRecordName\":")
        out.string(zone.ownerRecordName)
        out.raw("}")
        for member in object.members where member.key != "scope" && member.key != "zoneID" {
            out.raw(",")
            out.string(member.key)
            out.raw(":")
            out.value(member.value)
        }
        out.raw("}")
        return out.bytes
    }
}

/// Queries CloudKit refused, gathered from the fetching tasks.
actor RefusedQueries {
    private(set) var all: [NotPulled] = []
    func add(_ entry: NotPulled) { all.append(entry) }
}

/// A page as the writer saves it, and the unit it came from.
struct PulledPage: Sendable {
    var unit: PullUnit
    var page: CloudPage
}

/// What a page is to the writer.
enum PageKind: Sendable {
    /// Records (and deletions) of a feed or a query, as usual.
    case fetched
    /// A page of a change feed read again from the start; the first `begins` it.
    case refetch(begins: Bool, reason: String)
    /// No page: CloudKit says the zone is gone.
    case zoneGone

    /// Whether the page came from CloudKit (not a mark the fetcher left).
    var isFetched: Bool {
        if case .zoneGone = self { return false }
        return true
    }
}

/// The pages fetched and not yet taken by the writer, in the order they arrived.
actor PageQueue {
    private var pages: [(PullUnit, CloudPage)] = []
    private var finished = false
    private var failure: Error?
    private var waiter: CheckedContinuation<Void, Never>?

    func put(_ unit: PullUnit, _ page: CloudPage) {
        pages.append((unit, page))
        wake()
    }

    /// No more pages come; `failure` is thrown once the pages already here are taken.
    func finish(_ failure: Error?) {
        finished = true
        self.failure = failure
        wake()
    }

    /// Every page waiting (at least one, waiting for it if need be); nil when finished.
    func take() async throws -> [(PullUnit, CloudPage)]? {
        while pages.isEmpty, !finished { await withCheckedContinuation { waiter = $0 } }
        if !pages.isEmpty {
            defer { pages = [] }
            return pages
        }
        if let failure { throw failure }
        return nil
    }

    private func wake() {
        waiter?.resume()
        waiter = nil
    }
}

/// One thing a pull fetches: a zone's change feed (no record type), or a record type of a zone
/// by queries.
struct PullUnit: Sendable {
    var zone: ZoneID
    var recordType: String?
    var startToken: String?
}

/// A folder of its own, in this process's private folder, for the asset files a pull downloads
/// before it stores them.
func makeStagingDirectory() throws -> String {
    try PrivateFiles.makeFolder("pull-assets-")
}

/// Pages on their way or waiting to be saved, at most `limit`; once closed, no more are asked
/// for.
actor PageSlots {
    private let limit: Int
    private var used = 0
    private var closed = false
    private var waiting: [CheckedContinuation<Bool, Never>] = []

    init(_ limit: Int) { self.limit = limit }

    /// Waits for a free slot; false once closed.
    func acquire() async -> Bool {
        if closed { return false }
        if used < limit {
            used += 1
            return true
        }
        return await withCheckedContinuation { waiting.append($0) }
    }

    func release() {
        if !closed, !waiting.isEmpty {
            waiting.removeFirst().resume(returning: true)
        } else {
            used -= 1
        }
    }

    func close() {
        closed = true
        for waiter in waiting { waiter.resume(returning: false) }
        waiting = []
    }
}

/// What the last pull from a database left out, kept in the store beside its sync tokens (see
/// ``CloudSync/lastPull(in:source:)``), for `ckport cloud status` to show.
public struct PullReport: Codable, Sendable, Equatable {
    public struct Skipped: Codable, Sendable, Equatable {
        public var zone: String
        public var recordType: String
        public var reason: String
    }

    /// When the pull ended, in milliseconds since 1970.
    public var at: Int64
    public var saved: Int
    public var deleted: Int
    /// Records left out, by record type.
    public var leftOut: [String: Int]
    /// Record types of zones read by queries that were not read, and why.
    public var notPulled: [Skipped]
    /// Zones read again from the start, and zones gone from CloudKit.
    public var refetched: [String]
    public var gone: [String]
    /// Records deleted because CloudKit no longer holds them.
    public var removed: Int
    /// The account pulled as (the private database's owner), when known.
    public var account: String?
    /// Why the pull stopped, when it did not end.
    public var failure: String?
    /// The same, with the settings it mentions kept apart (a front end says them its way).
    public var failureMessage: Message?

    public init(_ result: PullResult, at: Date = Date()) {
        self.at = Int64(at.timeIntervalSince1970 * 1000)
        saved = result.saved
        deleted = result.deleted
        leftOut = result.leftOutByType
        notPulled = result.notPulled.map {
            Skipped(zone: $0.zone.zoneName, recordType: $0.recordType, reason: $0.reason)
        }
        refetched = result.zones.filter { $0.refetched != nil }.map(\.zone.zoneName)
        gone = result.zones.filter(\.gone).map(\.zone.zoneName)
        removed = result.removed
        account = result.account
    }
}

extension CloudSync {
    /// Where the store keeps a database's ``PullReport``: a zone name CloudKit keeps for itself.
    public static let pullReportName = "_lastPull"

    /// Keeps `report` as the last pull from `source`.
    public static func keep(_ report: PullReport, in store: some RecordStoring, source: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let text = String(decoding: try encoder.encode(report), as: UTF8.self)
        let scope = DatabaseScope(rawValue: String(source.split(separator: "/").last ?? "private")) ?? .private
        try store.writeSession {
            try $0.saveSyncToken(text, source: source, zone: ZoneID(scope: scope, zoneName: pullReportName))
        }
    }

    /// The last pull's report for `source`, if one was kept.
    public static func lastPull(in store: some RecordStoring, source: String) throws -> PullReport? {
        let states = try store.readSession { try $0.syncStates(source: source) }
        guard let text = states.first(where: { $0.zone.zoneName == pullReportName })?.token else { return nil }
        return try? JSONDecoder().decode(PullReport.self, from: Data(text.utf8))
    }

    /// Whether a sync state is a zone's token, not a database-wide entry (`_zoneChanges`,
    /// `_lastPull`).
    public static func isZoneState(_ state: SyncState) -> Bool {
        !state.zone.zoneName.hasPrefix("_")
    }
}
