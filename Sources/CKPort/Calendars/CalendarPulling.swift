import Formats
import Foundation
import Records
import StoreCore

/// Pulling a CalDAV calendar into the store through a calendar mapping, incrementally: the
/// collection's sync token (RFC 6578 sync-collection) says what changed since the last pull;
/// where a server has none, each member's ETag does. Members changed or added are fetched
/// (calendar-multiget) and imported as `ckport import` imports a calendar file; members gone
/// take with them the records that came from them — only those.
///
/// Rules that keep a family's data safe:
/// - An event whose UID names a record the collection did not bring (nor a publish into the
///   same collection put there) is never rewritten: another family's event, or a record of
///   another kind, keeps what it has, and the pull names it.
/// - A pull that would delete most of what the collection brought (a wrong or emptied
///   collection) stops, unless told that this is meant.
/// - An event this store published into the collection comes back as itself, not as a change
///   (its ETag is the one the publish noted). When it was changed on the server, the pull takes
///   the server's version, and the next publish writes it back in the store's words without a
///   conflict. So a change made on both sides ends as the server's, unless a publish with
///   the store preferred ran first.
///
/// Where the pull got to (the sync token) and what each member brought (its UID, record type
/// and ETag) are connector state of kind `caldav-pull`, committed with the records.
public enum CalendarPulling {
    public static let stateKind = "caldav-pull"
    static let memberPrefix = "member:"

    public struct Request: Sendable {
        public var url: URL
        public var calendar: String?
        /// The calendar mapping's text, where it came from, and import settings.
        public var mapping: String
        public var mappingSource: String
        /// Field values new records get (`familyID` = `family-1`), as `--set` gives them.
        public var fixedFields: [(field: String, text: String)]
        /// The zone records go to.
        public var zone: ZoneID
        public var timeZone: TimeZone?
        /// Go on when the pull would delete most of what the collection brought.
        public var allowDeletingMost: Bool

        public init(
            url: URL, calendar: String? = nil, mapping: String, mappingSource: String,
            fixedFields: [(field: String, text: String)] = [], zone: ZoneID = .defaultZone, timeZone: TimeZone? = nil,
            allowDeletingMost: Bool = false
        ) {
            self.url = url
            self.calendar = calendar
            self.mapping = mapping
            self.mappingSource = mappingSource
            self.fixedFields = fixedFields
            self.zone = zone
            self.timeZone = timeZone
            self.allowDeletingMost = allowDeletingMost
        }
    }

    /// What the store keeps of a pull.
    public struct PullState: Codable, Sendable, Equatable {
        public var collection: String
        public var syncToken: String?
        public var pulled: Int64
        public var members: Int
        public var mappingSource: String
    }

    /// One member of the collection, as the store keeps it.
    public struct Member: Codable, Sendable, Equatable {
        public var uid: String
        public var etag: String?
        public var recordType: String
    }

    public struct Result: Sendable {
        public var collection: URL
        /// Members fetched and imported; their records inserted and updated.
        public var fetched = 0
        public var inserted = 0
        public var updated = 0
        public var unchanged = 0
        public var deleted = 0
        /// Events this store published, seen again unchanged.
        public var echoes = 0
        /// UIDs that name records the collection did not bring, left as they are.
        public var refused: [String] = []
        /// How the changes were found: the sync token, a full listing (first pull, expired
        /// token, or a server without sync-collection).
        public var bySyncToken = false
        public var requests: [String] = []
        public var notes: [Message] = []
    }

    public static func pull(
        into store: some RecordStoring, request: Request, client: CalDAVClient
    ) async throws -> Result {
        let (collection, _) = try await CalendarPublishing.findCollection(
            request.url, calendar: request.calendar, client: client, create: false)
        let name = CalDAVClient.shown(collection)
        var result = Result(collection: collection)
        // What the last pull and the publishes into the same collection noted.
        let (known, members, published, publishedUIDs) = try await store.readSession {
            session -> (PullState?, [String: Member], [String: CalendarPublishing.EventState], Set<String>) in
            let known = try session.connectorState(kind: stateKind, name: name, key: "").map {
                try JSONDecoder().decode(PullState.self, from: Data($0.utf8))
            }
            var members: [String: Member] = [:]
            try session.forEachConnectorState(kind: stateKind, name: name) { entry in
                guard entry.key.hasPrefix(memberPrefix) else { return }
                members[String(entry.key.dropFirst(memberPrefix.count))] = try JSONDecoder().decode(
                    Member.self, from: Data(entry.value.utf8))
            }
            var published: [String: CalendarPublishing.EventState] = [:]
            var uids: Set<String> = []
            try session.forEachConnectorState(kind: CalendarPublishing.stateKind, name: name) { entry in
                guard entry.key.hasPrefix(CalendarPublishing.eventPrefix) else { return }
                let state = try JSONDecoder().decode(CalendarPublishing.EventState.self, from: Data(entry.value.utf8))
                published[Self.path(state.href, collection)] = state
                uids.insert(String(entry.key.dropFirst(CalendarPublishing.eventPrefix.count)))
            }
            return (known, members, published, uids)
        }
        // What changed: by the sync token, else by listing every member's ETag.
        var listed: [(href: String, etag: String?)] = []
        var removed: [String] = []
        var newToken: String?
        var full = true
        var answer = try await client.syncCollection(collection, token: known?.syncToken)
        if case .tokenExpired = answer {
            answer = try await client.syncCollection(collection, token: nil)
        }
        let collectionPath = collection.path
        func isMember(_ href: String) -> Bool {
            guard let url = CalDAVClient.resolve(href, against: collection) else { return false }
            return url.path != collectionPath && url.path != collectionPath + "/"
                && url.path + "/" != collectionPath
        }
        switch answer {
        case .changes(let resources, let token):
            newToken = token
            full = known?.syncToken == nil
            result.bySyncToken = !full
            for resource in resources where isMember(resource.href) {
                let href = Self.path(resource.href, collection)
                if resource.status == 404 || resource.status == 410 {
                    removed.append(href)
                } else {
                    listed.append((href, resource.etag))
                }
            }
        case .unsupported, .tokenExpired:
            guard
                let resources = try await client.propfind(
                    collection, depth: 1, props: [(CalDAVClient.dav, "getetag")])
            else {
                throw CalDAVError(
                    kind: .notACalendar, request: "PROPFIND \(name)", status: 404, detail: "the calendar is gone")
            }
            for resource in resources where isMember(resource.href) {
                listed.append((Self.path(resource.href, collection), resource.etag))
            }
        }
        if full {
            let present = Set(listed.map(\.href))
            removed = members.keys.filter { !present.contains($0) }
        }
        removed = removed.filter { members[$0] != nil }.sorted()
        // Members to fetch: new or changed, not this store's own publish coming back.
        var wanted: [String] = []
        for (href, etag) in listed {
            // This store's own publish, as it left it: not a change.
            if let mine = published[href], mine.etag != nil, mine.etag == etag {
                result.echoes += 1
                continue
            }
            if let member = members[href], member.etag != nil, member.etag == etag { continue }
            wanted.append(href)
        }
        if !removed.isEmpty && removed.count * 2 > members.count && members.count >= 2 && !request.allowDeletingMost {
            throw PullError.wouldDeleteMost(collection: name, deleting: removed.count, of: members.count)
        }
        // The members' calendar data, a hundred at a time.
        var fetched: [(href: String, etag: String?, uid: String, text: String)] = []
        var start = 0
        while start < wanted.count {
            let batch = Array(wanted[start..<min(start + 100, wanted.count)])
            start += batch.count
            for resource in try await client.multiget(collection, hrefs: batch) {
                guard let data = resource.properties["calendar-data"]?.text, !data.isEmpty else { continue }
                // XML reads CRLF as LF: calendar data gets its line ends back. Where the records
                // go is the pull's to say: a zone another ckport wrote into the event
                // (X-CKPORT-ZONE) is not followed.
                let text = Self.withoutZones(data)
                guard let uid = Self.uid(in: text) else {
                    result.notes.append(Message("\(resource.href) holds no component with a UID: left out"))
                    continue
                }
                fetched.append((Self.path(resource.href, collection), resource.etag, uid, text))
            }
        }
        // The guard: a UID that names a record the collection did not bring stays as it is.
        let mapping = try CalendarMapping.parse(request.mapping, file: request.mappingSource, schema: store.schema)
        let brought = Set(members.values.map(\.uid)).union(publishedUIDs)
        var accepted: [(href: String, etag: String?, uid: String, text: String, type: String)] = []
        var refused: [String] = []
        try await store.readSession { session in
            for item in fetched {
                let type =
                    Self.recordType(of: item.text, mapping: mapping) ?? mapping.components.first?.recordType ?? ""
                if let existing = try session.record(RecordID(recordName: item.uid, zone: request.zone)),
                    !brought.contains(item.uid) || existing.recordType != type
                {
                    refused.append(item.uid)
                    continue
                }
                accepted.append((item.href, item.etag, item.uid, item.text, type))
            }
        }
        result.refused = refused.sorted()
        result.fetched = accepted.count
        // One transaction: the records, the deletions, and where the pull got to.
        let removedMembers = removed.compactMap { href in members[href].map { (href, $0) } }
        let state = PullState(
            collection: name, syncToken: newToken, pulled: Int64(Date().timeIntervalSince1970 * 1000),
            members: members.count - removedMembers.count + accepted.filter { members[$0.href] == nil }.count,
            mappingSource: request.mappingSource)
        let zone = request.zone
        let finishing: (any RecordSession) throws -> Int = { session in
            var deleted = 0
            for (href, member) in removedMembers {
                let id = RecordID(recordName: member.uid, zone: zone)
                if let record = try session.record(id), record.recordType == member.recordType {
                    deleted += try session.delete([id]).count
                }
                try session.saveConnectorState(nil, kind: stateKind, name: name, key: memberPrefix + href)
            }
            for item in accepted {
                try session.saveConnectorState(
                    try Feeds.json(Member(uid: item.uid, etag: item.etag, recordType: item.type)), kind: stateKind,
                    name: name, key: memberPrefix + item.href)
                // A published event changed on the server: the next publish writes it back
                // over the version it now knows, without a conflict.
                if var mine = published[item.href] {
                    mine.etag = item.etag
                    mine.hash = "pulled"
                    try session.saveConnectorState(
                        try Feeds.json(mine), kind: CalendarPublishing.stateKind, name: name,
                        key: CalendarPublishing.eventPrefix + item.uid)
                }
            }
            try session.saveConnectorState(try Feeds.json(state), kind: stateKind, name: name, key: "")
            return deleted
        }
        if accepted.isEmpty {
            result.deleted = try await store.writeSession(dryRun: false) { try finishing($0) }
        } else {
            var settings = FormatSettings()
            settings[CalendarReadSettings.self] = CalendarReadSettings(
                mapping: mapping, fixedFields: request.fixedFields)
            var deleted = 0
            var importRequest = ImportRequest(
                // Each member an input named by its address, so that a message names the event.
                inputs: accepted.map { item in
                    ImportInput(
                        .bytes(
                            Array(item.text.utf8),
                            name: CalDAVClient.resolve(item.href, against: collection).map(CalDAVClient.shown)
                                ?? item.href),
                        format: .iCalendar)
                }, defaultZone: zone, timeZone: request.timeZone,
                settings: settings)
            importRequest.finishing = { deleted = try finishing($0) }
            let summary = try Imports.run(importRequest, into: store)
            result.deleted = deleted
            // The components' records (their participants are counted with them).
            for type in Set(accepted.map(\.type)) {
                guard let counts = summary.counts[type] else { continue }
                result.inserted += counts.inserted
                result.updated += counts.updated
                result.unchanged += counts.unchanged
            }
            // Each event is an input of its own: the same note from many is said once.
            var seen: [String: Int] = [:]
            var order: [Message] = []
            for note in summary.notes {
                if seen[note.description] == nil { order.append(note) }
                seen[note.description, default: 0] += 1
            }
            result.notes += order.map { note in
                let count = seen[note.description] ?? 1
                return count == 1 ? note : Message("\(note) (so in \(count) events)")
            }
        }
        result.requests = client.methodsSent
        return result
    }

    /// A member's address as a path (servers give paths or whole addresses).
    static func path(_ href: String, _ collection: URL) -> String {
        CalDAVClient.resolve(href, against: collection)?.path ?? href
    }

    /// Calendar data with CRLF line ends and without X-CKPORT-ZONE lines (their folds too).
    static func withoutZones(_ data: String) -> String {
        var lines: [Substring] = []
        var dropping = false
        for line in data.replacingOccurrences(of: "\r\n", with: "\n").split(
            separator: "\n", omittingEmptySubsequences: false)
        {
            if line.hasPrefix(" ") || line.hasPrefix("\t") {
                if !dropping { lines.append(line) }
                continue
            }
            dropping =
                line.hasPrefix(CalendarMapping.zoneProperty + ":") || line.hasPrefix(CalendarMapping.zoneProperty + ";")
            if !dropping { lines.append(line) }
        }
        return lines.joined(separator: "\r\n")
    }

    /// The first UID of a calendar resource's components.
    static func uid(in text: String) -> String? {
        var inside = false
        for line in text.split(separator: "\r\n") {
            if line.hasPrefix("BEGIN:"), line != "BEGIN:VCALENDAR", line != "BEGIN:VTIMEZONE" { inside = true }
            if inside, line.hasPrefix("UID:") { return String(line.dropFirst(4)) }
        }
        return nil
    }

    /// The record type the mapping gives the resource's first component.
    static func recordType(of text: String, mapping: CalendarMapping) -> String? {
        for line in text.split(separator: "\r\n") where line.hasPrefix("BEGIN:") {
            let component = String(line.dropFirst(6))
            if let match = mapping.components.first(where: { $0.component == component }) { return match.recordType }
        }
        return nil
    }

    /// Every pull the store keeps, by collection.
    public static func pulls(in store: some RecordStoring) throws -> [PullState] {
        try store.readSession { session in
            try session.connectorStateNames(kind: stateKind).compactMap { name in
                try session.connectorState(kind: stateKind, name: name, key: "").map {
                    try JSONDecoder().decode(PullState.self, from: Data($0.utf8))
                }
            }
        }
    }
}

/// Why a pull stopped before changing anything.
public enum PullError: CKPortError, Equatable {
    /// The pull would delete most of what the collection brought.
    case wouldDeleteMost(collection: String, deleting: Int, of: Int)

    public var category: ErrorCategory { .usage }

    public var description: String {
        switch self {
        case .wouldDeleteMost(let collection, let deleting, let of):
            "\(collection) no longer holds \(deleting) of the \(of) events it brought: pulling would delete their records. Nothing was changed; if the calendar was emptied on purpose, pull again allowing it"
        }
    }
}
