import Crypto
import Formats
import Foundation
import Records
import StoreCore

/// Publishing a selection of the store into a CalDAV calendar collection: each event a
/// resource of its own, the collection made when missing, and on later runs only what changed
/// sent — a new event with `If-None-Match: *`, a changed one with `If-Match` and the ETag the
/// server gave it, a deleted or cancelled one deleted. An event changed or deleted on the
/// server since the last publish is never overwritten silently: the server answers 412 to the
/// conditional request, and the event is reported and left as the server has it, unless the
/// store is preferred. An event changed on the server alone is found through the collection's
/// sync token (RFC 6578) and reported the same way, on every publish until the store is
/// preferred or a pull takes the server's version in.
///
/// What was published where (the collection, the selection, the store's change token, each
/// event's address, ETag, content hash and SEQUENCE) is connector state of kind
/// `caldav-publish`, named by the collection's address, so it lives in the store.
public enum CalendarPublishing {
    public static let stateKind = "caldav-publish"
    static let eventPrefix = "event:"

    /// Who wins when the server changed an event that the store changed too.
    public enum Preference: String, Sendable, CaseIterable {
        /// The server's version stays, and the event is reported (the default).
        case server
        /// The store's version is written over the server's.
        case store
    }

    public struct Request: Sendable {
        /// The calendar collection, or an address to discover the account's calendar home from.
        public var url: URL
        /// The collection's name in the calendar home, when `url` is not the collection.
        public var calendar: String?
        /// What to publish; nil: what the last publish to the collection published.
        public var definition: Feeds.Definition?
        public var prefer: Preference
        /// Requests in flight at once.
        public var concurrency: Int

        public init(
            url: URL, calendar: String? = nil, definition: Feeds.Definition?, prefer: Preference = .server,
            concurrency: Int = 6
        ) {
            self.url = url
            self.calendar = calendar
            self.definition = definition
            self.prefer = prefer
            self.concurrency = concurrency
        }
    }

    /// The state of a publication, as the store keeps it.
    public struct Publication: Codable, Sendable, Equatable {
        public var collection: String
        public var definition: Feeds.Definition
        /// The store's change token the last publish read.
        public var token: String?
        /// The collection's sync token when the last publish began: what changed on the server
        /// since is asked for from it. Nil where the server has no sync-collection.
        public var syncToken: String?
        public var published: Int64
        public var events: Int
        public var conflicts: Int
    }

    /// One published event, as the store keeps it.
    public struct EventState: Codable, Sendable, Equatable {
        public var href: String
        public var etag: String?
        /// SHA-256 of the event as published, its DTSTAMP and SEQUENCE aside.
        public var hash: String
        public var sequence: Int64
        /// Found changed (or deleted) on the server since it was published: reported, and
        /// never written over, until the store is preferred or a pull takes it in.
        public var editedOnServer: Bool?
    }

    /// An event left as the server has it.
    public struct Conflict: Sendable, Equatable {
        public enum Reason: String, Sendable {
            case changedOnServer = "changed on the server since the last publish"
            case deletedOnServer = "deleted on the server since the last publish"
            case existsOnServer = "already on the server, not published by this store"
            case refusedByServer = "refused by the server (it holds the UID elsewhere, or does not take the event)"
        }

        public var uid: String
        public var href: String
        public var reason: Reason
    }

    public struct Result: Sendable {
        public var collection: URL
        public var madeCollection = false
        public var created = 0
        public var updated = 0
        public var deleted = 0
        public var unchanged = 0
        public var conflicts: [Conflict] = []
        /// Neither the store nor the calendar had changed since the last publish: nothing was sent.
        public var upToDate = false
    }

    // MARK: Publishing

    public static func publish(
        from store: some RecordStoring, request: Request, client: CalDAVClient,
        progress: (@Sendable (_ done: Int, _ total: Int) -> Void)? = nil
    ) async throws -> Result {
        let (found, made) = try await findCollection(request.url, calendar: request.calendar, client: client)
        let collection = CalDAVClient.canonical(found)
        let name = CalDAVClient.shown(collection)
        let (known, current) = try await store.readSession { session -> (Publication?, String) in
            (try session.connectorHead(Publication.self, kind: stateKind, name: name), session.currentToken.description)
        }
        guard let definition = request.definition ?? known?.definition else {
            throw Feeds.FeedError.noDefinition(name)
        }
        if let known, let asked = request.definition, !asked.selectsSame(as: known.definition) {
            throw PublishError.definedOtherwise(collection: name)
        }
        let storeUnchanged = known.map { $0.token == current && !made && $0.conflicts == 0 } ?? false
        // The calendar as export writes it, one resource per component; when the store changed,
        // made while the server answers what changed on its side.
        let folder = try PrivateFiles.folder()
        let (descriptor, path) = try PrivateFiles.create("publish", in: folder)
        close(descriptor)
        defer { unlink(path) }
        let exporting: Task<Exported, any Error>? =
            storeUnchanged ? nil : Task.detached { try Exported(Feeds.write(definition, from: store, to: path)) }
        do {
            return try await publish(
                from: store, definition: definition, known: known, storeUnchanged: storeUnchanged,
                exporting: exporting, path: path, collection: collection, made: made, request: request,
                client: client, progress: progress)
        } catch {
            // The export is done with before its file goes.
            _ = try? await exporting?.value
            throw error
        }
    }

    /// What the export of a publish wrote: the store's change token it read, and how many events.
    struct Exported: Sendable {
        var token: String
        var events: Int

        init(_ result: ExportResult) {
            token = result.token.description
            events = result.records
        }
    }

    /// The rest of a publish, once its collection and what the store last published are known.
    private static func publish(
        from store: some RecordStoring, definition: Feeds.Definition, known: Publication?, storeUnchanged: Bool,
        exporting: Task<Exported, any Error>?, path: String, collection: URL, made: Bool, request: Request,
        client: CalDAVClient, progress: (@Sendable (_ done: Int, _ total: Int) -> Void)?
    ) async throws -> Result {
        let name = CalDAVClient.shown(collection)
        var result = Result(collection: collection, madeCollection: made)
        // What changed on the server since the last publish began (all of it, the first time
        // or when the server forgot the token): an event whose ETag is not the one published
        // was changed there by someone else.
        let onServer = try await serverChanges(collection, since: made ? nil : known?.syncToken, client: client)
        if let known, storeUnchanged, onServer.changes.isEmpty, !onServer.listedAll {
            result.upToDate = true
            result.unchanged = known.events
            if onServer.token != known.syncToken {
                var moved = known
                moved.syncToken = onServer.token
                try await store.writeSession(dryRun: false) { session in
                    try session.saveConnectorState(try Feeds.json(moved), kind: stateKind, name: name, key: "")
                }
            }
            return result
        }
        // What was published, by UID; and what a pull of the same calendar brought, by UID
        // (its address and ETag), which is on the server already.
        var published: [String: EventState] = [:]
        var pulled: [String: (href: String, etag: String?)] = [:]
        try await store.readSession { session in
            for (uid, state) in try session.connectorEntries(
                EventState.self, kind: stateKind, name: name, prefix: eventPrefix)
            {
                published[uid] = state
            }
            for (href, member) in try session.connectorEntries(
                CalendarPulling.Member.self, kind: CalendarPulling.stateKind, name: name,
                prefix: CalendarPulling.memberPrefix)
            {
                pulled[member.uid] = (href, member.etag)
            }
        }
        let saver = StateSaver(store: store, name: name)
        let edited = editedOnServer(published, onServer, collection: collection)
        for (uid, state) in edited {
            published[uid] = state
            try saver.save(uid: uid, state: state)
        }
        if let known, storeUnchanged, !published.values.contains(where: { $0.editedOnServer == true }) {
            result.upToDate = true
            result.unchanged = known.events
            var moved = known
            moved.syncToken = onServer.token
            try saver.finish(moved)
            return result
        }
        // An empty selection is a calendar of no events: every published event goes.
        let exported = try await exporting?.value ?? Exported(Feeds.write(definition, from: store, to: path))
        let token = exported.token
        // The file is read a component at a time; what was published and is not among them
        // goes, once they are all read.
        var seen = Set<String>()
        seen.reserveCapacity(exported.events)
        var total = exported.events
        var done = 0
        // Each event's outcome, a few requests in flight at once.
        let pending = try CalendarResource.Reader(path: path)
        try await withThrowingTaskGroup(of: Outcome.self) { group in
            var gone: IndexingIterator<[String]>?
            func next() throws -> Bool {
                while let resource = try pending.next() {
                    seen.insert(resource.uid)
                    let before = published[resource.uid]
                    if let before, before.hash == resource.hash, before.editedOnServer != true {
                        // Nothing to ask: counted here, no task (most events, most nights).
                        result.unchanged += 1
                        done += 1
                        progress?(done, total)
                        continue
                    } else if let before, before.hash == CalendarPulling.pulledMark, before.editedOnServer != true {
                        // The server's version, as a pull took it into the store: published
                        // as it is, nothing sent (writing the store's words back would drop
                        // what the mapping does not keep).
                        let adopted = EventState(
                            href: before.href, etag: before.etag, hash: resource.hash, sequence: before.sequence)
                        group.addTask { .adopted(uid: resource.uid, state: adopted) }
                    } else if before == nil, let member = pulled[resource.uid] {
                        // An event a pull brought from this calendar: it is there already.
                        let adopted = EventState(
                            href: member.href, etag: member.etag, hash: resource.hash, sequence: resource.sequence)
                        group.addTask { .adopted(uid: resource.uid, state: adopted) }
                    } else {
                        let href = before?.href ?? hrefPath(for: resource.uid, in: collection)
                        group.addTask {
                            try await put(
                                resource, href: href, before: before, collection: collection, client: client,
                                prefer: request.prefer)
                        }
                    }
                    return true
                }
                if gone == nil {
                    let goneUIDs = published.keys.filter { !seen.contains($0) }.sorted()
                    total = seen.count + goneUIDs.count
                    gone = goneUIDs.makeIterator()
                }
                if let uid = gone?.next(), let state = published[uid] {
                    group.addTask {
                        try await delete(
                            uid: uid, state: state, collection: collection, client: client, prefer: request.prefer)
                    }
                    return true
                }
                return false
            }
            do {
                for _ in 0..<max(1, request.concurrency) where try next() {}
                while let outcome = try await group.next() {
                    switch outcome {
                    case .adopted(let uid, let state):
                        result.unchanged += 1
                        try saver.save(uid: uid, state: state)
                    case .written(let uid, let state, let created):
                        if created { result.created += 1 } else { result.updated += 1 }
                        try saver.save(uid: uid, state: state)
                    case .deleted(let uid, let href):
                        result.deleted += 1
                        try saver.save(uid: uid, state: nil, href: href)
                    case .conflict(let conflict):
                        result.conflicts.append(conflict)
                    }
                    done += 1
                    progress?(done, total)
                    _ = try next()
                }
            } catch {
                // What was done is noted before the error goes on: the next publish starts there.
                group.cancelAll()
                while let outcome = try? await group.next() {
                    switch outcome {
                    case .written(let uid, let state, _), .adopted(let uid, let state):
                        try? saver.save(uid: uid, state: state)
                    case .deleted(let uid, let href): try? saver.save(uid: uid, state: nil, href: href)
                    case .conflict: break
                    }
                }
                try? saver.flush()
                throw error
            }
        }
        result.conflicts.sort { $0.uid < $1.uid }
        let publication = Publication(
            collection: name, definition: definition, token: token, syncToken: onServer.token,
            published: Int64(Date().timeIntervalSince1970 * 1000),
            events: result.created + result.updated + result.unchanged
                + result.conflicts.filter { $0.reason != .deletedOnServer }.count,
            conflicts: result.conflicts.count)
        try saver.finish(publication)
        return result
    }

    enum Outcome: Sendable {
        case adopted(uid: String, state: EventState)
        case written(uid: String, state: EventState, created: Bool)
        case deleted(uid: String, href: String)
        case conflict(Conflict)
    }

    /// Puts one event: a new one only where nothing is (If-None-Match), a changed one only
    /// over what was published (If-Match). A 412 whose resource on the server is already this
    /// event (a publish stopped before it noted the ETag) is taken as published.
    static func put(
        _ resource: CalendarResource, href: String, before: EventState?, collection: URL, client: CalDAVClient,
        prefer: Preference
    ) async throws -> Outcome {
        guard let url = CalDAVClient.resolve(href, against: collection) else {
            throw CalDAVError(kind: .badAnswer, request: "PUT", status: nil, detail: "\(href) is not an address")
        }
        var sequence = resource.sequence
        if let before { sequence = max(sequence, before.sequence + 1) }
        let body = Data(resource.text(sequence: sequence).utf8)
        let condition: (String, String) =
            if let etag = before?.etag { ("If-Match", etag) } else { ("If-None-Match", "*") }
        var answer = try await client.send(
            "PUT", url, headers: [("Content-Type", "text/calendar; charset=utf-8"), condition], body: body,
            forbiddenIsAnswer: true)
        if answer.status == 412 || (answer.status == 404 && before != nil) {
            let (onServer, serverTag) = try await fetch(url, client: client)
            if let onServer, let serverTag, resource.isSame(asResource: onServer) {
                // There already, as this store has it (another publish of the same store, or one
                // stopped before it noted the ETag): counted as unchanged.
                let state = EventState(href: href, etag: serverTag, hash: resource.hash, sequence: sequence)
                return .adopted(uid: resource.uid, state: state)
            }
            let reason: Conflict.Reason =
                before == nil ? .existsOnServer : onServer == nil ? .deletedOnServer : .changedOnServer
            guard prefer == .store else {
                return .conflict(Conflict(uid: resource.uid, href: href, reason: reason))
            }
            let override: (String, String) =
                if let serverTag { ("If-Match", serverTag) } else { ("If-None-Match", "*") }
            answer = try await client.send(
                "PUT", url, headers: [("Content-Type", "text/calendar; charset=utf-8"), override], body: body,
                forbiddenIsAnswer: true)
        }
        // A UID the server holds at another address (CALDAV:no-uid-conflict), calendar data it
        // does not take: this event is reported, the others go on.
        if [400, 403, 409, 415, 422].contains(answer.status) {
            return .conflict(Conflict(uid: resource.uid, href: href, reason: .refusedByServer))
        }
        guard (200...299).contains(answer.status) else {
            throw CalDAVError(
                kind: answer.status == 507 ? .unavailable : .failed, request: "PUT \(CalDAVClient.shown(url))",
                status: answer.status,
                detail: answer.status == 507
                    ? "the server has no room for it"
                    : "the event \(resource.uid) was refused: \(CalDAVClient.excerpt(answer.body))"
            )
        }
        var etag = answer.header("ETag")
        if etag == nil {
            etag = try await client.propfind(url, depth: 0, props: [(CalDAVClient.dav, "getetag")])?.first?.etag
        }
        return .written(
            uid: resource.uid, state: EventState(href: href, etag: etag, hash: resource.hash, sequence: sequence),
            created: before == nil)
    }

    /// Deletes a published event the store no longer selects, only as it was published.
    static func delete(
        uid: String, state: EventState, collection: URL, client: CalDAVClient, prefer: Preference
    ) async throws -> Outcome {
        guard let url = CalDAVClient.resolve(state.href, against: collection) else {
            return .deleted(uid: uid, href: state.href)
        }
        var answer = try await client.send(
            "DELETE", url, headers: state.etag.map { [("If-Match", $0)] } ?? [])
        if answer.status == 412 {
            // Deleted on the server too (RFC 9110 lets If-Match on nothing answer 412): both
            // sides agree.
            if try await fetch(url, client: client).0 == nil { return .deleted(uid: uid, href: state.href) }
            guard prefer == .store else {
                return .conflict(Conflict(uid: uid, href: state.href, reason: .changedOnServer))
            }
            answer = try await client.send("DELETE", url)
        }
        guard (200...299).contains(answer.status) || answer.status == 404 else {
            throw CalDAVError(
                kind: .failed, request: "DELETE \(CalDAVClient.shown(url))", status: answer.status,
                detail: CalDAVClient.excerpt(answer.body))
        }
        return .deleted(uid: uid, href: state.href)
    }

    /// What changed in a collection since a sync token: members changed or gone, the token to
    /// ask from next time, and whether the answer lists every member (no token was sent, or the
    /// server forgot it), so that a member it does not list is gone. Nothing, and no token,
    /// where the server has no sync-collection.
    struct ServerChanges: Sendable {
        struct Change: Sendable {
            var href: String
            var etag: String?
            var gone: Bool
        }

        var token: String?
        var changes: [Change] = []
        var listedAll = false
    }

    static func serverChanges(_ collection: URL, since token: String?, client: CalDAVClient) async throws
        -> ServerChanges
    {
        var sent = token
        var answer: CalDAVClient.SyncAnswer
        do {
            answer = try await client.syncChanges(collection, token: sent)
            if case .tokenExpired = answer {
                sent = nil
                answer = try await client.syncChanges(collection, token: nil)
            }
        } catch let error as CalDAVError where error.kind == .refused && error.status == 403 {
            // A server that lets this account write but not ask for its changes: publish as
            // without sync-collection (a wrong password is 401, and stops the publish).
            return ServerChanges()
        }
        guard case .changes(let resources, let next) = answer else { return ServerChanges() }
        return ServerChanges(
            token: next,
            changes: resources.map {
                .init(
                    href: CalDAVClient.canonicalPath($0.href, base: collection), etag: $0.etag,
                    gone: $0.status == 404 || $0.status == 410)
            }, listedAll: sent == nil)
    }

    /// The published events the server changed or deleted since they were published (their
    /// ETag is not the one published, or they are gone), marked so: by UID.
    static func editedOnServer(_ published: [String: EventState], _ server: ServerChanges, collection: URL)
        -> [(uid: String, state: EventState)]
    {
        guard !server.changes.isEmpty || server.listedAll else { return [] }
        // Published addresses are kept in their canonical form (``CalDAVClient/canonicalPath(_:base:)``,
        // as the changes' are): compared as they are.
        var byHref: [String: String] = [:]
        byHref.reserveCapacity(published.count)
        for (uid, state) in published { byHref[state.href] = uid }
        var edited: [(uid: String, state: EventState)] = []
        var listed = Set<String>()
        // One already marked stays marked. (One a pull took in has the ETag the pull saw: a
        // change since is the server's too.)
        func mark(_ uid: String) {
            guard var state = published[uid], state.editedOnServer != true else { return }
            state.editedOnServer = true
            edited.append((uid, state))
        }
        for change in server.changes {
            listed.insert(change.href)
            guard let uid = byHref[change.href], let state = published[uid] else { continue }
            if change.gone || change.etag != state.etag { mark(uid) }
        }
        if server.listedAll {
            for (href, uid) in byHref where !listed.contains(href) { mark(uid) }
        }
        return edited.sorted { $0.uid < $1.uid }
    }

    /// The resource at `url` and its ETag; nil when there is none.
    static func fetch(_ url: URL, client: CalDAVClient) async throws -> (String?, String?) {
        let answer = try await client.send("GET", url)
        if answer.status == 404 || answer.status == 410 { return (nil, nil) }
        guard answer.status == 200 else {
            throw CalDAVError(
                kind: .failed, request: "GET \(CalDAVClient.shown(url))", status: answer.status,
                detail: CalDAVClient.excerpt(answer.body))
        }
        return (String(decoding: answer.body, as: UTF8.self), answer.header("ETag"))
    }

    /// The address of a new event: the collection's path and its UID, every byte but the
    /// unreserved ones percent-encoded, `.ics` after it.
    static func hrefPath(for uid: String, in collection: URL) -> String {
        var path = CalDAVClient.canonicalPath(collection.absoluteString, base: collection)
        if !path.hasSuffix("/") { path += "/" }
        return path + (uid.addingPercentEncoding(withAllowedCharacters: CalDAVClient.unreserved) ?? "event") + ".ics"
    }

    /// Saves event states a batch at a time (one transaction per batch), and the publication
    /// last: a publish stopped half-way leaves what it did noted, up to its last batch.
    final class StateSaver {
        let store: any RecordStoring
        let name: String
        var batch: [(String, EventState?, String?)] = []
        var last = Date()

        init(store: any RecordStoring, name: String) {
            self.store = store
            self.name = name
        }

        /// Saves `uid`'s state; a deletion (`state` nil) at `href` also forgets what a pull of
        /// the same calendar noted there, so that the pull does not take the deletion for the
        /// server's and delete the record.
        func save(uid: String, state: EventState?, href: String? = nil) throws {
            batch.append((uid, state, href))
            if batch.count >= 200 || Date().timeIntervalSince(last) > 1 { try flush() }
        }

        func flush() throws {
            guard !batch.isEmpty else { return }
            // In one order, kind and key, whoever writes: two publishes of one store at once
            // (PostgreSQL locks each entry it writes until the end of the transaction) then wait
            // for each other instead of meeting in a deadlock.
            var writes: [(kind: String, key: String, value: String?)] = []
            for (uid, state, href) in batch {
                writes.append((stateKind, eventPrefix + uid, try state.map { try Feeds.json($0) }))
                if state == nil, let href {
                    writes.append((CalendarPulling.stateKind, CalendarPulling.memberPrefix + href, nil))
                }
            }
            // An entry written twice in a batch: the later write is the one.
            var seen = Set<[String]>()
            writes = writes.reversed().filter { seen.insert([$0.kind, $0.key]).inserted }
            writes.sort { ($0.kind, $0.key) < ($1.kind, $1.key) }
            batch = []
            last = Date()
            try store.writeSession(dryRun: false) { session in
                for write in writes {
                    try session.saveConnectorState(write.value, kind: write.kind, name: name, key: write.key)
                }
            }
        }

        func finish(_ publication: Publication) throws {
            try flush()
            try store.writeSession(dryRun: false) { session in
                try session.saveConnectorState(try Feeds.json(publication), kind: stateKind, name: name, key: "")
            }
        }
    }

    // MARK: Finding the collection

    /// The calendar collection to publish into: `url` itself when it is one; made there when
    /// nothing is there; with `calendar`, that collection in the account's calendar home
    /// (found from `url` through `/.well-known/caldav`, current-user-principal and
    /// calendar-home-set), made when missing.
    public static func findCollection(_ url: URL, calendar: String?, client: CalDAVClient, create: Bool = true)
        async throws -> (URL, Bool)
    {
        let props: [(namespace: String, name: String)] = [
            (CalDAVClient.dav, "resourcetype"), (CalDAVClient.dav, "current-user-principal"),
            (CalDAVClient.caldav, "calendar-home-set"),
        ]
        let shown = CalDAVClient.shown(url)
        if let calendar {
            let home = try await calendarHome(url, client: client, props: props)
            let target = home.appendingPathComponent(calendar, isDirectory: true)
            guard let found = try await client.propfind(target, depth: 0, props: props)?.first else {
                guard create else { throw Self.nothingThere(target) }
                try await client.makeCalendar(target, displayName: calendar)
                return (target, true)
            }
            guard found.isCalendar else {
                throw CalDAVError(
                    kind: .notACalendar, request: "PROPFIND \(CalDAVClient.shown(target))", status: 207,
                    detail: "it is not a calendar collection")
            }
            return (target, false)
        }
        guard let found = try await client.propfind(url, depth: 0, props: props) else {
            guard create else { throw Self.nothingThere(url) }
            try await client.makeCalendar(url, displayName: url.lastPathComponent)
            return (url, true)
        }
        if let first = found.first, first.isCalendar { return (url, false) }
        throw CalDAVError(
            kind: .notACalendar, request: "PROPFIND \(shown)", status: 207,
            detail:
                "it is not a calendar collection (an account or a folder): name the calendar to publish into, and it is made in the account's calendar home when missing"
        )
    }

    static func nothingThere(_ url: URL) -> CalDAVError {
        CalDAVError(
            kind: .notACalendar, request: "PROPFIND \(CalDAVClient.shown(url))", status: 404,
            detail: "there is no calendar at this address")
    }

    /// The account's calendar home: calendar-home-set of `url`, or of its principal, trying
    /// `/.well-known/caldav` (RFC 6764) when `url` says nothing.
    static func calendarHome(_ url: URL, client: CalDAVClient, props: [(namespace: String, name: String)])
        async throws -> URL
    {
        var tried: [URL] = [url]
        if let wellKnown = URL(string: "/.well-known/caldav", relativeTo: url)?.absoluteURL {
            tried.append(wellKnown)
        }
        for start in tried {
            guard let found = try await client.propfind(start, depth: 0, props: props)?.first else { continue }
            if let home = found.properties["calendar-home-set"]?.hrefs.first,
                let resolved = CalDAVClient.resolve(home, against: start)
            {
                return resolved
            }
            if let principal = found.properties["current-user-principal"]?.hrefs.first,
                let principalURL = CalDAVClient.resolve(principal, against: start),
                let home = try await client.propfind(principalURL, depth: 0, props: props)?.first?.properties[
                    "calendar-home-set"]?.hrefs.first,
                let resolved = CalDAVClient.resolve(home, against: principalURL)
            {
                return resolved
            }
        }
        throw CalDAVError(
            kind: .notACalendar, request: "PROPFIND \(CalDAVClient.shown(url))", status: nil,
            detail: "no calendar home found there (neither calendar-home-set nor current-user-principal)")
    }

    // MARK: Status

    /// Every publication the store keeps, by collection.
    public static func publications(in store: some RecordStoring) throws -> [Publication] {
        try store.readSession { try $0.connectorHeads(Publication.self, kind: stateKind) }
    }
}

/// Why a publish refused.
public enum PublishError: CKPortError, Equatable {
    /// The collection was published into with another selection.
    case definedOtherwise(collection: String)

    public var category: ErrorCategory { .usage }

    public var description: String {
        switch self {
        case .definedOtherwise(let collection):
            "\(collection) was published into with another selection: publish with the same one (or none, which repeats it), or into another calendar"
        }
    }
}

/// One component of an exported calendar as a calendar resource of its own (RFC 4791 §4.1:
/// one UID per resource): the calendar's own properties, the VTIMEZONEs the component names,
/// the component.
struct CalendarResource: Sendable {
    var uid: String
    var header: [String]
    var zones: [String]
    var component: [String]
    /// The SEQUENCE the export wrote.
    var sequence: Int64
    var hash: String

    func text(sequence: Int64) -> String {
        var lines = ["BEGIN:VCALENDAR"] + header + zones
        for line in component {
            lines.append(line.hasPrefix("SEQUENCE:") ? "SEQUENCE:\(sequence)" : line)
        }
        lines.append("END:VCALENDAR")
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    /// The hash of a component's lines, DTSTAMP and SEQUENCE aside (they move without the
    /// event changing).
    static func hash(of lines: some Sequence<String>) -> String {
        var hasher = SHA256()
        for line in lines where !line.hasPrefix("DTSTAMP") && !line.hasPrefix("SEQUENCE") {
            hasher.update(data: Data(line.utf8))
            hasher.update(data: Data([0x0A]))
        }
        return hasher.finalize().hexDigits
    }

    /// The lines of a resource's components (not its VTIMEZONEs, nor what is inside them), as
    /// they are: every one of them (a phone that moves one occurrence of a repeating event adds
    /// a component with RECURRENCE-ID beside the first). Nil when there is none.
    static func componentLines(ofResource text: String) -> [String]? {
        var inside = false
        var inZone = false
        var name = ""
        var lines: [String] = []
        for line in text.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" }).map(String.init) {
            if !inside, line == "BEGIN:VTIMEZONE" || inZone {
                inZone = line != "END:VTIMEZONE"
                continue
            }
            if !inside, line.hasPrefix("BEGIN:"), line != "BEGIN:VCALENDAR" {
                name = String(line.dropFirst(6))
                inside = true
                lines.append(line)
                continue
            }
            if inside {
                lines.append(line)
                if line == "END:\(name)" { inside = false }
            }
        }
        return lines.isEmpty ? nil : lines
    }

    /// Whether the resource a server hands back is this event: the same lines, or, where the
    /// server rewrote what it stored (RFC 4791 §5.3.4 lets it; Xandikos 0.4.10 writes every
    /// event again, its properties and their parameters in another order and folded anew),
    /// the same properties with the same parameters and values, in any order within each
    /// component, and the same components inside (an alarm's lines stay its own). DTSTAMP and
    /// SEQUENCE aside, either way. A resource with a component more (an occurrence moved on a
    /// phone) is not the same.
    func isSame(asResource text: String) -> Bool {
        guard let theirs = Self.componentLines(ofResource: text) else { return false }
        if Self.hash(of: theirs) == hash { return true }
        return Self.canonical(theirs) == Self.canonical(component)
    }

    /// Components as one text that is the same whatever the order of their properties and of
    /// their inner components, their folding and their parameters' order: each component's
    /// normalized lines sorted, its inner components (each so made) sorted after them.
    static func canonical(_ lines: [String]) -> String {
        var stack: [(lines: [String], inner: [String])] = [([], [])]
        for line in unfolded(lines).map(normalized) {
            if line.hasPrefix("BEGIN:") {
                stack.append(([line], []))
            } else if line.hasPrefix("END:"), stack.count > 1 {
                let done = stack.removeLast()
                let text = ([done.lines[0]] + done.lines.dropFirst().sorted() + done.inner.sorted() + [line])
                    .joined(separator: "\n")
                stack[stack.count - 1].inner.append(text)
            } else if !line.hasPrefix("DTSTAMP:"), !line.hasPrefix("DTSTAMP;"), !line.hasPrefix("SEQUENCE:") {
                stack[stack.count - 1].lines.append(line)
            }
        }
        // Unclosed components count as they stand.
        while stack.count > 1 {
            let open = stack.removeLast()
            stack[stack.count - 1].inner.append((open.lines + open.inner).joined(separator: "\n"))
        }
        return (stack[0].lines.sorted() + stack[0].inner.sorted()).joined(separator: "\n")
    }

    /// A content line with its name in capitals and its parameters sorted (RFC 5545 §3.2: their
    /// order carries no meaning); the value as it is.
    static func normalized(_ line: String) -> String {
        let bytes = Array(line.utf8)
        var parts: [String] = []
        var start = 0
        var quoted = false
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "\""): quoted.toggle()
            case UInt8(ascii: ";") where !quoted:
                parts.append(String(decoding: bytes[start..<index], as: UTF8.self))
                start = index + 1
            case UInt8(ascii: ":") where !quoted:
                parts.append(String(decoding: bytes[start..<index], as: UTF8.self))
                let value = String(decoding: bytes[(index + 1)...], as: UTF8.self)
                return ([parts[0].uppercased()] + parts.dropFirst().sorted()).joined(separator: ";") + ":" + value
            default: break
            }
        }
        return line
    }

    /// Reads an exported calendar file a component at a time, each as a resource: the file is
    /// never held whole, only the calendar's own properties and its VTIMEZONEs (export writes
    /// them before the components). Folded lines stay as they are; component boundaries are
    /// never folded.
    final class Reader {
        private let input: ByteInput
        private var header: [String] = []
        private var zones: [String: [String]] = [:]
        private var zoneOrder: [String] = []
        private var seenComponent = false

        init(path: String) throws { input = try ByteInput(path: path) }

        /// The next component's resource; nil at the end of the file. Without `full`, its UID
        /// alone (no hash, zones or lines).
        func next(full: Bool = true) throws -> CalendarResource? {
            var block: [String] = []
            var blockName: String?
            while let bytes = try input.nextLine() {
                let line = String(decoding: bytes, as: UTF8.self)
                if line.isEmpty { continue }
                if let name = blockName {
                    block.append(line)
                    guard line == "END:\(name)" else { continue }
                    blockName = nil
                    if name == "VTIMEZONE" {
                        let tzid = block.first { $0.hasPrefix("TZID:") }.map { String($0.dropFirst(5)) } ?? ""
                        zones[tzid] = block
                        zoneOrder.append(tzid)
                        block = []
                        continue
                    }
                    let lines = unfolded(block)
                    let uid = lines.first { $0.hasPrefix("UID:") }.map { String($0.dropFirst(4)) } ?? ""
                    guard full else {
                        return CalendarResource(uid: uid, header: [], zones: [], component: [], sequence: 0, hash: "")
                    }
                    let named = Set(lines.compactMap(CalendarResource.zoneNamed))
                    let sequence = block.first { $0.hasPrefix("SEQUENCE:") }.flatMap { Int64($0.dropFirst(9)) } ?? 0
                    return CalendarResource(
                        uid: uid, header: header,
                        zones: zoneOrder.filter(named.contains).flatMap { zones[$0] ?? [] }, component: block,
                        sequence: sequence, hash: hash(of: block))
                }
                if line == "BEGIN:VCALENDAR" || line == "END:VCALENDAR" { continue }
                if line.hasPrefix("BEGIN:") {
                    blockName = String(line.dropFirst(6))
                    if blockName != "VTIMEZONE" { seenComponent = true }
                    block = [line]
                    continue
                }
                if !seenComponent && zoneOrder.isEmpty { header.append(line) }
            }
            return nil
        }
    }

    static let tzidPattern: [UInt8] = Array(";TZID=".utf8)

    /// The zone a content line's TZID parameter names, if any.
    static func zoneNamed(in line: String) -> String? {
        var line = line
        let pattern = tzidPattern
        return line.withUTF8 { bytes -> String? in
            guard bytes.count > pattern.count,
                let found = (0...(bytes.count - pattern.count)).first(where: { at in
                    bytes[at] == pattern[0] && pattern.indices.allSatisfy { bytes[at + $0] == pattern[$0] }
                })
            else { return nil }
            let start = found + pattern.count
            var end = start
            while end < bytes.count, bytes[end] != UInt8(ascii: ":"), bytes[end] != UInt8(ascii: ";") { end += 1 }
            return String(decoding: bytes[start..<end], as: UTF8.self)
        }
    }

    /// Lines with their folds joined.
    static func unfolded(_ lines: [String]) -> [String] {
        var out: [String] = []
        for line in lines {
            if line.hasPrefix(" ") || line.hasPrefix("\t"), !out.isEmpty {
                out[out.count - 1] += line.dropFirst()
            } else {
                out.append(line)
            }
        }
        return out
    }
}

/// What `calendar status --json` prints: the feeds and the publications.
public struct CalendarStatus: Encodable, Sendable {
    public struct Publication: Encodable, Sendable {
        public var collection: String
        public var events: Int
        public var published: String
        public var token: String?
        public var conflicts: Int
        public var mapping: String
        public var `where`: String?

        public init(_ publication: CalendarPublishing.Publication) {
            collection = publication.collection
            events = publication.events
            published = ISO8601.format(milliseconds: publication.published)
            token = publication.token
            conflicts = publication.conflicts
            mapping = publication.definition.mappingSource
            `where` = publication.definition.predicate
        }
    }

    public struct Pull: Encodable, Sendable {
        public var collection: String
        public var events: Int
        public var pulled: String
        public var syncToken: String?
        public var mapping: String

        public init(_ pull: CalendarPulling.PullState) {
            collection = pull.collection
            events = pull.members
            pulled = ISO8601.format(milliseconds: pull.pulled)
            syncToken = pull.syncToken
            mapping = pull.mappingSource
        }
    }

    public var feeds: [Feeds.Listing]
    public var publications: [Publication]
    public var pulls: [Pull]

    public init(feeds: [Feeds.Listing], publications: [Publication], pulls: [Pull] = []) {
        self.feeds = feeds
        self.publications = publications
        self.pulls = pulls
    }
}
