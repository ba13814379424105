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
    /// The content hash a publish's entry gets when a pull took the server's version of the
    /// event: the next publish takes it as published, sending nothing.
    static let pulledMark = "pulled"

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
        /// The zone the records went to: a later pull into another is refused.
        public var zone: ZoneID?
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
        let (found, _) = try await CalendarPublishing.findCollection(
            request.url, calendar: request.calendar, client: client, create: false)
        let collection = CalDAVClient.canonical(found)
        let name = CalDAVClient.shown(collection)
        var result = Result(collection: collection)
        // What the last pull and the publishes into the same collection noted.
        let (known, members, published, publishedUIDs) = try await store.readSession {
            session -> (PullState?, [String: Member], [String: CalendarPublishing.EventState], Set<String>) in
            let known = try session.connectorHead(PullState.self, kind: stateKind, name: name)
            var members: [String: Member] = [:]
            for (href, member) in try session.connectorEntries(
                Member.self, kind: stateKind, name: name, prefix: memberPrefix)
            {
                members[href] = member
            }
            var published: [String: CalendarPublishing.EventState] = [:]
            var uids: Set<String> = []
            for (uid, state) in try session.connectorEntries(
                CalendarPublishing.EventState.self, kind: CalendarPublishing.stateKind, name: name,
                prefix: CalendarPublishing.eventPrefix)
            {
                published[Self.path(state.href, collection)] = state
                uids.insert(uid)
            }
            return (known, members, published, uids)
        }
        // What changed: by the sync token, else by listing every member's ETag.
        var listed: [(href: String, etag: String?)] = []
        var removed: [String] = []
        var newToken: String?
        var full = true
        if let known, let zone = known.zone, zone != request.zone {
            throw PullError.otherZone(collection: name, pulledInto: zone.description, asked: request.zone.description)
        }
        var sentToken = known?.syncToken
        var answer = try await client.syncChanges(collection, token: sentToken)
        if case .tokenExpired = answer {
            // The server forgot the token: everything again, and what it no longer lists goes.
            sentToken = nil
            answer = try await client.syncChanges(collection, token: nil)
        }
        switch answer {
        case .changes(let resources, let token):
            newToken = token
            full = sentToken == nil
            result.bySyncToken = !full
            for resource in resources {
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
            for resource in resources where CalDAVClient.isMember(resource.href, of: collection) {
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
        // The members' calendar data, `multigetBatch` at a time, kept in a private file until the
        // import reads it (a large calendar is never held whole).
        let mapping = try CalendarMapping.parse(request.mapping, file: request.mappingSource, schema: store.schema)
        let spool = try Spool()
        var fetched: [(href: String, etag: String?, uid: String, type: String, text: Spool.Range)] = []
        var start = 0
        while start < wanted.count {
            let batch = Array(wanted[start..<min(start + Self.multigetBatch, wanted.count)])
            start += batch.count
            for resource in try await client.multiget(collection, hrefs: batch) {
                guard let data = resource.properties["calendar-data"]?.text, !data.isEmpty else { continue }
                // XML reads CRLF as LF: calendar data gets its line ends back. Where the records
                // go is the pull's to say: a zone another ckport wrote into the event
                // (X-CKPORT-ZONE) is not followed.
                let text = Self.sanitized(data)
                let uids = Self.uids(in: text)
                guard uids.count == 1, let uid = uids.first, !uid.isEmpty else {
                    result.notes.append(
                        Message(
                            "\(resource.href) holds \(uids.isEmpty ? "no component with a UID" : "components of \(uids.count) UIDs (RFC 4791 allows one)"): left out"
                        ))
                    continue
                }
                let type = Self.recordType(of: text, mapping: mapping) ?? mapping.components.first?.recordType ?? ""
                fetched.append((Self.path(resource.href, collection), resource.etag, uid, type, try spool.append(text)))
            }
        }
        // A member the server listed but did not hand out is asked for again next time: the
        // sync token stays where it was.
        let returned = Set(fetched.map(\.href))
        let missing = wanted.filter { !returned.contains($0) }
        if !missing.isEmpty {
            newToken = known?.syncToken
            result.notes.append(
                Message(
                    "\(missing.count) event\(missing.count == 1 ? "" : "s") listed by the server could not be fetched (\(missing.prefix(3).joined(separator: ", "))): asked for again by the next pull"
                ))
        }
        // The guard: a UID that names a record the collection did not bring stays as it is.
        let brought = Set(members.values.map(\.uid)).union(publishedUIDs)
        var accepted: [(href: String, etag: String?, uid: String, type: String, text: Spool.Range)] = []
        var refused: [String] = []
        try await store.readSession { session in
            for item in fetched {
                if let existing = try session.record(RecordID(recordName: item.uid, zone: request.zone)),
                    !brought.contains(item.uid) || existing.recordType != item.type
                {
                    refused.append(item.uid)
                    continue
                }
                accepted.append(item)
            }
        }
        result.refused = refused.sorted()
        result.fetched = accepted.count
        // One transaction: the records, the deletions, and where the pull got to.
        let removedMembers = removed.compactMap { href in members[href].map { (href, $0) } }
        let state = PullState(
            collection: name, syncToken: newToken, pulled: Int64(Date().timeIntervalSince1970 * 1000),
            members: members.count - removedMembers.count + accepted.filter { members[$0.href] == nil }.count,
            mappingSource: request.mappingSource, zone: request.zone)
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
                    mine.hash = Self.pulledMark
                    mine.editedOnServer = nil
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
                    let name = CalDAVClient.resolve(item.href, against: collection).map(CalDAVClient.shown) ?? item.href
                    return ImportInput(
                        .converted(name: name, isReopenable: true) {
                            ByteInput(name: name, bytes: try spool.read(item.text))
                        }, format: .iCalendar)
                }, defaultZone: zone, timeZone: request.timeZone,
                settings: settings)
            importRequest.finishing = { deleted = try finishing($0) }
            importRequest.oneReaderAtATime = true
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

    /// Members asked for in one calendar-multiget: few enough that an answer stays a few
    /// megabytes, enough that a server's cost for each request (Xandikos reads its whole index)
    /// does not dominate.
    static let multigetBatch = 500

    /// Fetched calendar data in a private file, each member's bytes read back when the import
    /// opens it; the file goes with the last reference.
    final class Spool {
        struct Range { var offset: Int64, length: Int }
        private let descriptor: Int32
        private let path: String
        private var size: Int64 = 0

        init() throws {
            (descriptor, path) = try PrivateFiles.create("pull", in: try PrivateFiles.folder())
        }

        deinit {
            close(descriptor)
            unlink(path)
        }

        func append(_ text: String) throws -> Range {
            let bytes = Array(text.utf8)
            var written = 0
            while written < bytes.count {
                let count = bytes.withUnsafeBytes {
                    pwrite(descriptor, $0.baseAddress! + written, bytes.count - written, off_t(size) + off_t(written))
                }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { throw failure(errno, doing: "write") }
                written += count
            }
            defer { size += Int64(bytes.count) }
            return Range(offset: size, length: bytes.count)
        }

        func read(_ range: Range) throws -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: range.length)
            var got = 0
            while got < range.length {
                let count = bytes.withUnsafeMutableBytes {
                    pread(descriptor, $0.baseAddress! + got, range.length - got, off_t(range.offset) + off_t(got))
                }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { throw failure(errno, doing: "read") }
                got += count
            }
            return bytes
        }

        private func failure(_ code: Int32, doing verb: String) -> OutputError {
            OutputError(path: path, message: "could not \(verb) the fetched events: \(String(cString: strerror(code)))")
        }
    }

    /// A member's address as a path in ckport's one spelling (servers give paths or whole
    /// addresses, and encode differently).
    static func path(_ href: String, _ collection: URL) -> String {
        CalDAVClient.canonicalPath(href, base: collection)
    }

    /// Calendar data as the pull imports it: lines unfolded, CRLF line ends, and nothing of
    /// what ckport writes to say where a record lives or what it is named (`X-CKPORT-*`
    /// properties, an attendee's `X-CKPORT-RECORD`, in any case): the pull says where records
    /// go, and names them from the UID it checked.
    static func sanitized(_ data: String) -> String {
        var out: [UInt8] = []
        var first = true
        for line in unfoldedLines(data) {
            if first { first = false } else { out += [0x0D, 0x0A] }
            guard mentionsCKPort(line) else {
                out += line
                continue
            }
            // The rare line that names ckport: the slow way, in characters.
            guard let kept = sanitizedLine(String(decoding: line, as: UTF8.self)) else {
                // Dropped: so is the line end written for it.
                if !out.isEmpty { out.removeLast(2) } else { first = true }
                continue
            }
            out += Array(kept.utf8)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A calendar text's content lines, LF or CRLF ended, with their folds joined.
    static func unfoldedLines(_ text: String) -> [[UInt8]] {
        var lines: [[UInt8]] = []
        var line: [UInt8] = []
        var previousEnded = false
        var atLineStart = true
        func end() {
            if line.last == 0x0D { line.removeLast() }
            lines.append(line)
            line = []
        }
        for byte in text.utf8 {
            if atLineStart, previousEnded, byte == 0x20 || byte == 0x09, !lines.isEmpty {
                // A fold: the line goes on where the previous one stopped.
                line = lines.removeLast()
                atLineStart = false
                continue
            }
            atLineStart = false
            if byte == 0x0A {
                end()
                previousEnded = true
                atLineStart = true
                continue
            }
            line.append(byte)
        }
        end()
        return lines
    }

    /// Whether a line holds `X-CKPORT-` in any case.
    static func mentionsCKPort(_ line: [UInt8]) -> Bool {
        let pattern = Array("x-ckport-".utf8)
        guard line.count >= pattern.count else { return false }
        for start in 0...(line.count - pattern.count) where line[start] | 0x20 == 0x78 {
            var index = 1
            while index < pattern.count, line[start + index] | (pattern[index] >= 0x61 ? 0x20 : 0) == pattern[index] {
                index += 1
            }
            if index == pattern.count { return true }
        }
        return false
    }

    /// A line without ckport's own property (nil) or parameters.
    static func sanitizedLine(_ line: String) -> String? {
        let (head, value) = split(line)
        let name = head.prefix { $0 != ";" }.uppercased()
        if name.hasPrefix("X-CKPORT-") { return nil }
        guard head.uppercased().contains(";X-CKPORT-") else { return line }
        // Parameters other than ckport's own stay.
        let kept = splitParameters(String(head.dropFirst(name.count))).filter {
            !$0.uppercased().hasPrefix("X-CKPORT-")
        }
        return String(head.prefix(name.count)) + kept.map { ";" + $0 }.joined() + (value.map { ":" + $0 } ?? "")
    }

    /// A content line's name and parameters, and its value (after the first colon outside quotes).
    static func split(_ line: String) -> (head: String, value: String?) {
        var quoted = false
        for index in line.indices {
            if line[index] == "\"" { quoted.toggle() }
            if line[index] == ":" && !quoted {
                return (String(line[..<index]), String(line[line.index(after: index)...]))
            }
        }
        return (line, nil)
    }

    /// `;A=1;B="x;y"` as `["A=1", "B=\"x;y\""]`.
    static func splitParameters(_ text: String) -> [String] {
        var out: [String] = []
        var current = ""
        var quoted = false
        for character in text {
            if character == "\"" { quoted.toggle() }
            if character == ";" && !quoted {
                if !current.isEmpty { out.append(current) }
                current = ""
            } else {
                current.append(character)
            }
        }
        if !current.isEmpty { out.append(current) }
        return out
    }

    /// The UIDs of a resource's components (VTIMEZONE aside), each once, in order; a UID of a
    /// component inside another (an alarm's) is not one.
    static func uids(in text: String) -> [String] {
        var depth = 0
        var topLevel = false
        var found: [String] = []
        for bytes in unfoldedLines(text) {
            // Only the start of a line is compared: its first few characters, in upper case.
            var line: String { String(decoding: bytes, as: UTF8.self) }
            let upper = String(decoding: bytes.prefix(16), as: UTF8.self).uppercased()
            if upper.hasPrefix("BEGIN:") {
                depth += 1
                if depth == 2 { topLevel = line.uppercased() != "BEGIN:VTIMEZONE" }
                continue
            }
            if upper.hasPrefix("END:") {
                depth -= 1
                continue
            }
            if depth == 2, topLevel, upper.hasPrefix("UID:") || upper.hasPrefix("UID;") {
                let uid = split(line).value ?? ""
                if !found.contains(uid) { found.append(uid) }
            }
        }
        return found
    }

    /// The record type the mapping gives the resource's first component.
    static func recordType(of text: String, mapping: CalendarMapping) -> String? {
        for bytes in unfoldedLines(text) where bytes.starts(with: Array("BEGIN:".utf8)) {
            let component = String(decoding: bytes.dropFirst(6), as: UTF8.self)
            if let match = mapping.components.first(where: { $0.component == component }) { return match.recordType }
        }
        return nil
    }

    /// Every pull the store keeps, by collection.
    public static func pulls(in store: some RecordStoring) throws -> [PullState] {
        try store.readSession { try $0.connectorHeads(PullState.self, kind: stateKind) }
    }
}

/// Why a pull stopped before changing anything.
public enum PullError: CKPortError, Equatable {
    /// The pull would delete most of what the collection brought.
    case wouldDeleteMost(collection: String, deleting: Int, of: Int)
    /// The collection was pulled into another zone before.
    case otherZone(collection: String, pulledInto: String, asked: String)

    public var category: ErrorCategory { .usage }

    public var description: String {
        switch self {
        case .otherZone(let collection, let pulledInto, let asked):
            "\(collection) is pulled into \(pulledInto), not \(asked): its records are there, and a pull elsewhere would make copies and lose track of them. Pull it into the same zone"
        case .wouldDeleteMost(let collection, let deleting, let of):
            "\(collection) no longer holds \(deleting) of the \(of) events it brought: pulling would delete their records. Nothing was changed; if the calendar was emptied on purpose, pull again allowing it"
        }
    }
}
