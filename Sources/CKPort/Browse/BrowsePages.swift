import Formats
import Foundation
import Migrations
import Records
import StoreCore

// The browser view's pages, as models: what each page shows, read from the store by
// ``BrowseSite``, with the JSON each encodes and the HTML each shows.

/// `/`: the store (or the bundles a view shows), its size and change token, its records
/// counted by scope, zone and type, and its schema.
struct OverviewPage: BrowsePage {
    let backend: String
    let store: String
    let bytes: Int64
    let token: String
    let records: Int
    let zones: [StoreStats.Entry]
    let schema: String
    /// Not in the JSON: what the HTML says besides.
    let deleted: Int
    let bundles: [String]
    let hasCalendar: Bool
    let migrationSet: String?

    var title: String { "Store" }
    var jsonAddress: String? { "/index.json" }

    private enum CodingKeys: String, CodingKey { case backend, store, bytes, token, records, zones, schema }

    func body() -> String {
        var body =
            bundles.isEmpty
            ? ""
            : "<p class=\"bundle\">A backup bundle, read-only: \(bundles.map { escape($0) }.joined(separator: " + ")) — <a href=\"/bundle\">its manifest\(bundles.count > 1 ? "s and the chain" : "")</a>. Its records are shown as a restore would bring them back.</p>"
        body += "<dl>" + item("backend", escape(backend)) + item(bundles.isEmpty ? "store" : "bundle", escape(store))
        body += item("size", "\(bytes) bytes") + item("change token", "<code>\(escape(token))</code>")
        body += item("records", "\(records) (\(deleted) deleted)") + "</dl>"
        body +=
            "<h2>Records by scope, zone and type</h2><table><tr><th>scope</th><th>zone</th><th>owner</th><th>type</th><th class=\"n\">records</th><th class=\"n\">deleted</th></tr>"
        for entry in zones {
            body +=
                "<tr><td>\(escape(entry.zone.scope.rawValue))</td><td>\(escape(entry.zone.zoneName))</td><td>\(escape(entry.zone.ownerRecordName))</td>"
            body +=
                "<td><a href=\"\(attribute(tableLink(entry.recordType, entry.zone)))\">\(escape(entry.recordType))</a></td><td class=\"n\">\(entry.records)</td><td class=\"n\">\(entry.tombstones)</td></tr>"
        }
        body += "</table><p><a href=\"/shares\">Shares</a>: each share, what it starts from, and who takes part.</p>"
        if hasCalendar {
            body +=
                "<p><a href=\"/calendar\">Calendar</a>: the month and the agenda of what the calendar mapping shows, recurring records expanded.</p>"
        }
        if let migrationSet {
            body +=
                "<p><a href=\"/migrations\">Migration rehearsal</a>: what the pending migrations of \(escape(migrationSet)) would change, record by record.</p>"
        }
        return body + "<h2>Schema</h2><pre>\(escape(schema))</pre>"
    }
}

/// `/records/TYPE?zone=…`: a page of a type's records in a zone, filtered, sorted and with the
/// fields the address asks for, and the address of the page after it.
struct RecordTablePage: BrowsePage {
    /// What the address asks for, as it gives it.
    struct Settings {
        var zone: String
        var whereText: String
        var fields: String
        var limit: String
        var sort: String
        var descending: Bool
        var after: String
    }

    let type: String
    let zone: ZoneID
    let settings: Settings
    /// Every setting of the address, for the page's JSON link.
    let query: [String: String]
    /// The fields shown, and those a heading may sort by.
    let fields: [String]
    let sortable: [String]
    let records: [Record]
    let codec: JSONRecordCodec?
    /// What the address asks for that cannot be (a predicate that does not parse, …).
    let problem: String?
    /// The last record shown, and its sort value, when there are more.
    let next: (recordName: String, value: String?)?
    /// Whether the calendar mapping shows this type (the table then downloads as iCalendar).
    let calendarMapped: Bool

    var status: Int { problem == nil ? 200 : 400 }
    var title: String { type }
    var jsonAddress: String? {
        "/records/\(component(type)).json?" + queryString(query.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
    }

    /// The address of this table with some of its settings changed.
    func address(_ changes: [(String, String?)], suffix: String = "") -> String {
        var items: [(String, String)] = [("zone", settings.zone)]
        for (name, value) in [
            ("where", settings.whereText), ("fields", settings.fields), ("limit", settings.limit),
            ("sort", settings.sort == "recordName" ? "" : settings.sort), ("desc", settings.descending ? "1" : ""),
        ] where !value.isEmpty {
            items.append((name, value))
        }
        for (name, value) in changes {
            items.removeAll { $0.0 == name }
            if let value { items.append((name, value)) }
        }
        return "/records/\(component(type))\(suffix)?" + queryString(items)
    }

    /// The next page's address (its JSON form's with `suffix` ".json").
    func nextAddress(suffix: String = "") -> String? {
        guard let next else { return nil }
        return address([("after", next.recordName)] + (next.value.map { [("afterValue", $0)] } ?? []), suffix: suffix)
    }

    private enum Key: String, CodingKey {
        case recordType, zone, status, error, records, next, nextValue, nextPage
    }

    func encode(to encoder: Encoder) throws {
        var out = encoder.container(keyedBy: Key.self)
        try out.encode(type, forKey: .recordType)
        try out.encode(settings.zone, forKey: .zone)
        if let problem {
            try out.encode(status, forKey: .status)
            try out.encode(problem, forKey: .error)
        }
        try out.encode(
            codec.map { codec in records.map { RecordJSON(record: $0, codec: codec) } } ?? [], forKey: .records)
        if let next {
            try out.encode(next.recordName, forKey: .next)
            try out.encodeIfPresent(next.value, forKey: .nextValue)
            try out.encodeIfPresent(nextAddress(suffix: ".json"), forKey: .nextPage)
        }
    }

    func body() -> String {
        var body =
            "<p><a href=\"/\">Store</a> › \(escape(zone.scope.rawValue)) › \(escape(zone.zoneName)) › \(escape(type))</p>"
        body +=
            "<form method=\"get\" action=\"/records/\(attribute(component(type)))\"><input type=\"hidden\" name=\"zone\" value=\"\(attribute(settings.zone))\">"
        if settings.sort != "recordName" {
            body += "<input type=\"hidden\" name=\"sort\" value=\"\(attribute(settings.sort))\">"
        }
        if settings.descending { body += "<input type=\"hidden\" name=\"desc\" value=\"1\">" }
        body +=
            "<label>where <input name=\"where\" size=\"60\" value=\"\(attribute(settings.whereText))\" placeholder=\"status != 'done' AND points > 3\"></label> "
        body +=
            "<label>fields <input name=\"fields\" size=\"30\" value=\"\(attribute(settings.fields))\" placeholder=\"all; or title,dueDate\"></label> <button>Show</button></form>"
        if let problem { body += "<p class=\"error\">\(escape(problem))</p>" }
        // Each sortable column's heading sorts by it; again, the other way.
        func heading(_ label: String, _ field: String) -> String {
            guard BrowseSite.systemSorts.contains(field) || sortable.contains(field) else {
                return "<th>\(escape(label))</th>"
            }
            let current = field == settings.sort
            let arrow = current ? (settings.descending ? " ↓" : " ↑") : ""
            let link = address([
                ("sort", field == "recordName" ? nil : field), ("desc", current && !settings.descending ? "1" : nil),
            ])
            return "<th><a href=\"\(attribute(link))\">\(escape(label))</a>\(arrow)</th>"
        }
        body +=
            "<table><tr>" + heading("record name", "recordName") + heading("modified", "modifiedTimestamp")
            + fields.map { heading($0, $0) }.joined() + "</tr>"
        for record in records {
            body +=
                "<tr><td><a href=\"\(attribute(recordLink(record)))\">\(escape(record.recordName))</a></td><td>\(escape(record.modified.map { ISO8601.format(milliseconds: $0.timestamp) } ?? ""))</td>"
            for field in fields {
                body += "<td>\(record.fields[field].map { cell($0, zone: record.zone) } ?? "")</td>"
            }
            body += "</tr>"
        }
        body += "</table>"
        if records.isEmpty && problem == nil {
            body += "<p>No records here" + (settings.after.isEmpty ? "" : " after \(escape(settings.after))") + ".</p>"
        }
        if let nextLink = nextAddress() {
            body += "<p><a rel=\"next\" href=\"\(attribute(nextLink))\">next page ›</a></p>"
        }
        var downloadQuery = [("zone", settings.zone)]
        if !settings.whereText.isEmpty { downloadQuery.append(("where", settings.whereText)) }
        let links = ([(".jsonl", "JSON Lines"), (".csv", "CSV")] + (calendarMapped ? [(".ics", "iCalendar")] : [])).map
        {
            suffix, label in
            "<a href=\"\(attribute("/records/\(component(type))\(suffix)?" + queryString(downloadQuery)))\">\(label)</a>"
        }
        return body + "<p>Download every record of this table (all pages): \(links.joined(separator: " · "))</p>"
    }
}

/// `/record/SCOPE/OWNER/ZONE/NAME`: one record, every field, and the first records that point
/// at it.
struct RecordPage: BrowsePage {
    /// A record that points at this one, and the field it points with.
    struct Pointer: Encodable {
        let record: Record
        let field: String

        private enum CodingKeys: String, CodingKey { case recordType, recordName, field }

        func encode(to encoder: Encoder) throws {
            var out = encoder.container(keyedBy: CodingKeys.self)
            try out.encode(record.recordType, forKey: .recordType)
            try out.encode(record.recordName, forKey: .recordName)
            try out.encode(field, forKey: .field)
        }
    }

    let record: Record
    let codec: JSONRecordCodec
    let pointers: [Pointer]
    /// More records point at it than ``pointers`` holds (at most `shown`).
    let morePointers: Bool
    let shown: Int

    var title: String { record.recordName }
    var jsonAddress: String? { idLink(record.id) + ".json" }

    private enum CodingKeys: String, CodingKey { case record, pointedToBy, morePointers }

    func encode(to encoder: Encoder) throws {
        var out = encoder.container(keyedBy: CodingKeys.self)
        try out.encode(RecordJSON(record: record, codec: codec), forKey: .record)
        try out.encode(pointers, forKey: .pointedToBy)
        if morePointers { try out.encode(true, forKey: .morePointers) }
    }

    func body() -> String {
        var body =
            "<p><a href=\"/\">Store</a> › <a href=\"\(attribute(tableLink(record.recordType, record.zone)))\">\(escape(record.recordType))</a> › \(escape(record.recordName))</p>"
        body += "<h2>System fields</h2><dl>"
        body += item("zone", escape(zoneKey(record.zone))) + item("change tag", escape(record.changeTag ?? ""))
        for (name, stamp) in [("created", record.created), ("modified", record.modified)] {
            guard let stamp else { continue }
            body += item(
                name,
                "\(escape(ISO8601.format(milliseconds: stamp.timestamp))) by \(escape(stamp.userRecordName ?? "?")) on \(escape(stamp.deviceID ?? "?"))"
            )
        }
        for (name, linked) in [("parent", record.parent), ("share", record.share)] {
            guard let linked else { continue }
            body += item(
                name,
                "<a href=\"\(attribute(idLink(RecordID(recordName: linked, zone: record.zone))))\">\(escape(linked))</a>"
            )
        }
        body += "</dl><h2>Fields</h2><table><tr><th>field</th><th>type</th><th>value</th></tr>"
        for entry in record.fields.entries {
            body +=
                "<tr><td>\(escape(entry.name))</td><td>\(escape(entry.value.type.description))</td><td>\(cell(entry.value, zone: record.zone))</td></tr>"
        }
        body += "</table><h2>Pointed to by</h2>"
        guard !pointers.isEmpty else { return body + "<p>No record points at this one.</p>" }
        body +=
            "<ul>"
            + pointers.map { pointer in
                "<li>\(escape(pointer.record.recordType)) <a href=\"\(attribute(recordLink(pointer.record)))\">\(escape(pointer.record.recordName))</a> (its \(escape(pointer.field)))</li>"
            }.joined() + "</ul>"
        if morePointers {
            body +=
                "<p>More records point at this one; the first \(shown) are shown. Its type's tables, filtered with a where box, list them all.</p>"
        }
        return body
    }
}

/// `/shares`: each share, what it starts from, and who takes part (the JSON: an array, as
/// `ckport shares --json` prints it).
struct SharesPage: BrowsePage {
    let shares: [StoredShare]

    var title: String { "Shares" }
    var jsonAddress: String? { "/shares.json" }

    func encode(to encoder: Encoder) throws {
        var out = encoder.singleValueContainer()
        try out.encode(shares)
    }

    func body() -> String {
        var body = "<p><a href=\"/\">Store</a> › shares</p>"
        if shares.isEmpty { body += "<p>Nothing in this store is shared.</p>" }
        for share in shares {
            body +=
                "<section><h2><a href=\"\(attribute(recordLink(share.record)))\">\(escape(share.title ?? share.record.recordName))</a></h2><dl>"
            body += item("zone", escape(zoneKey(share.zone)))
            if share.isZoneWide {
                body += item("shares", "the whole zone: \(share.recordCount) records")
            } else if let root = share.root {
                body += item(
                    "shares",
                    "\(escape(root.recordType)) <a href=\"\(attribute(idLink(RecordID(recordName: root.recordName, zone: share.zone))))\">\(escape(root.recordName))</a> and what lies under it: \(share.recordCount) records"
                )
            } else {
                body += item("shares", "a root record the store does not hold")
            }
            body += item("public", escape(share.details?.publicPermission ?? "not recorded"))
            if let url = share.details?.url { body += item("URL", escape(url)) }
            body += "</dl>"
            if share.participants.isEmpty {
                body += "<p>No participants recorded.</p>"
            } else {
                body +=
                    "<table><tr><th>participant</th><th>email</th><th>role</th><th>permission</th><th>acceptance</th></tr>"
                for person in share.participants {
                    body +=
                        "<tr><td>\(escape(person.displayName))</td><td>\(escape(person.emailAddress ?? ""))</td><td>\(escape(person.type ?? ""))</td>"
                    body +=
                        "<td>\(escape(person.permission ?? ""))</td><td>\(escape(person.acceptanceStatus ?? ""))</td></tr>"
                }
                body += "</table>"
            }
            body += "</section>"
        }
        return body
    }
}

/// `/bundle`: each bundle's manifest (who made it, when, from which store, up to which change
/// token, from which, what it holds, every member with its checksum), and how the chain links.
struct BundlePage: BrowsePage {
    let bundles: [BrowseSite.Bundle]

    var title: String { bundles.count > 1 ? "Bundles" : "Bundle" }
    var jsonAddress: String? { "/bundle.json" }

    func encode(to encoder: Encoder) throws {
        var out = encoder.singleValueContainer()
        try out.encode(bundles)
    }

    func body() -> String {
        var body = "<p><a href=\"/\">Store</a> › bundle</p>"
        if bundles.count > 1 {
            body += "<h2>The chain</h2><ol>"
            for bundle in bundles {
                let from = bundle.manifest.baseToken.map { "changes after <code>\(escape($0))</code>" } ?? "everything"
                body += "<li>\(escape(bundle.path)): \(from), up to <code>\(escape(bundle.manifest.token))</code></li>"
            }
            body += "</ol>"
        }
        for bundle in bundles {
            let manifest = bundle.manifest
            body += "<section><h2>\(escape(bundle.path))</h2><dl>"
            body += item(
                "made",
                "\(escape(manifest.created)) by ckport \(escape(manifest.ckportVersion)) (bundle format \(manifest.format))"
            )
            body += item("from store", escape(manifest.storeID))
            body += item("change token", "<code>\(escape(manifest.token))</code>")
            body += item(
                "holds",
                manifest.baseToken.map { "what changed after <code>\(escape($0))</code>" }
                    ?? "the whole store, or what its selection chose")
            body += item("records", "\(manifest.recordCount)")
            body += item("encrypted", bundle.encrypted ? "yes (AES-256-GCM)" : "no") + "</dl>"
            body +=
                "<table><tr><th>member</th><th>kind</th><th>type</th><th>zone</th><th class=\"n\">records</th><th class=\"n\">bytes</th><th>SHA-256</th></tr>"
            for member in manifest.members {
                let zone = member.zoneName.map { "\(member.scope ?? ""):\(member.ownerRecordName ?? ""):\($0)" } ?? ""
                body +=
                    "<tr><td>\(escape(member.path))</td><td>\(escape(member.kind))</td><td>\(escape(member.recordType ?? ""))</td><td>\(escape(zone))</td>"
                body +=
                    "<td class=\"n\">\(member.records.map(String.init) ?? "")</td><td class=\"n\">\(member.bytes)</td><td><code>\(escape(String(member.sha256.prefix(16))))…</code></td></tr>"
            }
            body += "</table></section>"
        }
        return body
    }
}

/// `/migrations`: the pending migrations of a set as `migrate plan` computes them (the store
/// is only read): per migration and type, how many records change, and the first records'
/// diffs, field by field.
struct RehearsalPage: BrowsePage {
    /// One migration's rehearsal.
    struct Migration: Encodable {
        struct Failure: Encodable {
            let recordName: String
            let recordType: String
            let step: String
            let message: String
        }

        let version: Int
        let description: String
        let file: String
        let counts: [String: MigrationCounts]
        let schemaChanges: [String]
        let failures: [Failure]
        let diffs: [RecordDiff]

        init(_ report: MigrationReport) {
            version = report.version
            description = report.description
            file = report.file
            counts = report.counts
            schemaChanges = report.schemaChanges
            failures = report.failures.map {
                Failure(
                    recordName: $0.recordName, recordType: $0.recordType, step: $0.step,
                    message: $0.message.description)
            }
            diffs = report.diffs
        }
    }

    let set: String
    let migrations: [Migration]

    var title: String { "Migration rehearsal" }
    var jsonAddress: String? { "/migrations.json" }

    func body() -> String {
        var body = "<p><a href=\"/\">Store</a> › migration rehearsal of \(escape(set)) (nothing is written)</p>"
        if migrations.isEmpty { body += "<p>No migration of this set is pending: the store is up to date.</p>" }
        for migration in migrations {
            body +=
                "<section><h2>\(migration.version): \(escape(migration.description))</h2><p><code>\(escape(migration.file))</code></p>"
            body +=
                "<table><tr><th>record type</th><th class=\"n\">scanned</th><th class=\"n\">changed</th><th class=\"n\">unchanged</th><th class=\"n\">failed</th><th class=\"n\">deleted</th></tr>"
            for (type, c) in migration.counts.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
                body +=
                    "<tr><td>\(escape(type))</td><td class=\"n\">\(c.scanned)</td><td class=\"n\">\(c.changed)</td><td class=\"n\">\(c.unchanged)</td><td class=\"n\">\(c.failed)</td><td class=\"n\">\(c.deleted)</td></tr>"
            }
            body += "</table>"
            if !migration.schemaChanges.isEmpty {
                body +=
                    "<p>Schema: " + migration.schemaChanges.map { "<code>\(escape($0))</code>" }.joined(separator: ", ")
                    + "</p>"
            }
            for failure in migration.failures {
                body +=
                    "<p class=\"error\">\(escape(failure.recordType)) \(escape(failure.recordName)): \(escape(failure.step)): \(escape(failure.message))</p>"
            }
            for diff in migration.diffs {
                body +=
                    "<h3>\(escape(diff.recordType)) <a href=\"\(attribute(diffLink(diff)))\">\(escape(diff.recordName))</a></h3><pre class=\"diff\">"
                for line in diff.lines {
                    let kind = line.hasPrefix("+") ? "add" : line.hasPrefix("-") ? "remove" : "same"
                    body += "<span class=\"\(kind)\">\(escape(line))</span>"
                }
                body += "</pre>"
            }
            body += "</section>"
        }
        return body
    }

    /// A diffed record's page, in its zone (the scope and owner of a diff written before they
    /// were kept: the private default owner's).
    private func diffLink(_ diff: RecordDiff) -> String {
        let zone = ZoneID(
            scope: diff.scope.flatMap(DatabaseScope.init(rawValue:)) ?? .private, zoneName: diff.zoneName,
            ownerRecordName: diff.ownerRecordName ?? ZoneID.defaultOwnerName)
        return idLink(RecordID(recordName: diff.recordName, zone: zone))
    }
}

/// A page of the calendar: the occurrences of a span of days in the viewer's zone (at most
/// ``BrowseSite/calendarLimit``, and whether there are more).
protocol CalendarPage: BrowsePage {
    var occurrences: [CalendarOccurrence] { get }
    var more: Bool { get }
    var zone: TimeZone { get }
    /// `?tz=` as the address gave it, for the page's links.
    var zoneQuery: [(String, String)] { get }
}

/// One occurrence in a calendar page's JSON.
private struct OccurrenceJSON: Encodable {
    let recordType: String
    let recordName: String
    let zone: String
    let component: String
    let title: String
    let start: String
    let end: String?
    let allDay: Bool
    let recurring: Bool

    init(_ occurrence: CalendarOccurrence) {
        recordType = occurrence.record.recordType
        recordName = occurrence.record.recordName
        zone = BrowseSite.zoneKey(occurrence.record.zone)
        component = occurrence.component
        title = occurrence.title
        start = ISO8601.format(milliseconds: occurrence.start)
        end = occurrence.end.map { ISO8601.format(milliseconds: $0) }
        allDay = occurrence.allDay
        recurring = occurrence.recurring
    }
}

private enum CalendarKey: String, CodingKey { case month, from, days, timeZone, occurrences, more }

extension CalendarPage {
    /// The keys every calendar page's JSON has: its zone, its occurrences and `more`.
    fileprivate func encodeOccurrences(to out: inout KeyedEncodingContainer<CalendarKey>) throws {
        try out.encode(zone.identifier, forKey: .timeZone)
        try out.encode(occurrences.map(OccurrenceJSON.init), forKey: .occurrences)
        try out.encode(more, forKey: .more)
    }

    /// The occurrences by day (a wall-clock day number in ``zone``).
    func byDay() -> [Int64: [CalendarOccurrence]] {
        var byDay: [Int64: [CalendarOccurrence]] = [:]
        for occurrence in occurrences {
            for day in days(of: occurrence) { byDay[day, default: []].append(occurrence) }
        }
        return byDay
    }

    /// The days (wall-clock dates in ``zone``) an occurrence covers: its start's, and each
    /// after it up to its end (an end at midnight ends the day before), at most 42.
    private func days(of occurrence: CalendarOccurrence) -> [Int64] {
        let first = ZoneResolver.wall(milliseconds: occurrence.start, in: zone).dayNumber
        guard let end = occurrence.end, end > occurrence.start else { return [first] }
        let last = ZoneResolver.wall(milliseconds: end - 1, in: zone).dayNumber
        return Array(first...max(first, min(last, first + 41)))
    }

    /// One occurrence as a line of a day: its time (unless all day) and its title, a link to
    /// its record.
    func line(_ occurrence: CalendarOccurrence) -> String {
        let time =
            occurrence.allDay
            ? "all day" : CalendarText.time(ZoneResolver.wall(milliseconds: occurrence.start, in: zone))
        let mark = occurrence.recurring ? " <span class=\"repeat\" title=\"recurring\">↻</span>" : ""
        return
            "<li><span class=\"time\">\(time)</span> <a href=\"\(attribute(recordLink(occurrence.record)))\">\(escape(occurrence.title))</a>\(mark)</li>"
    }

    /// What a page says when it shows only the first occurrences.
    var moreNote: String {
        more
            ? "<p>More than \(BrowseSite.calendarLimit) occurrences: the first \(BrowseSite.calendarLimit) are shown.</p>"
            : ""
    }
}

/// Days, months and times as a calendar page writes them.
enum CalendarText {
    static func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
    static func year(_ year: Int64) -> String {
        String(repeating: "0", count: max(0, 4 - String(year).count)) + String(year)
    }
    /// YYYY-MM-DD.
    static func day(_ day: LocalDateTime) -> String { "\(month(day))-\(two(day.day))" }
    /// YYYY-MM.
    static func month(_ day: LocalDateTime) -> String { "\(year(day.year))-\(two(day.month))" }
    /// HH:MM.
    static func time(_ wall: LocalDateTime) -> String { "\(two(wall.hour)):\(two(wall.minute))" }
    static let weekdays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
}

/// `/calendar?month=YYYY-MM&tz=ZONE`: a month, a week a row from Monday, each day with what
/// happens on it.
struct MonthPage: CalendarPage {
    /// The month's first day, and the first days of the months before and after it.
    let first: LocalDateTime
    let previous: LocalDateTime
    let next: LocalDateTime
    let zone: TimeZone
    let zoneQuery: [(String, String)]
    let occurrences: [CalendarOccurrence]
    let more: Bool

    var month: String { CalendarText.month(first) }
    var title: String { "Calendar \(month)" }
    var jsonAddress: String? { "/calendar.json?" + queryString([("month", month)] + zoneQuery) }

    func encode(to encoder: Encoder) throws {
        var out = encoder.container(keyedBy: CalendarKey.self)
        try out.encode(month, forKey: .month)
        try encodeOccurrences(to: &out)
    }

    func body() -> String {
        let byDay = byDay()
        func link(_ month: LocalDateTime) -> String {
            "/calendar?" + queryString([("month", CalendarText.month(month))] + zoneQuery)
        }
        let agenda =
            "/calendar/agenda?"
            + queryString(
                [("from", CalendarText.day(first)), ("days", "\(next.dayNumber - first.dayNumber)")] + zoneQuery)
        var body = "<p><a href=\"/\">Store</a> › calendar › \(escape(month)) (\(escape(zone.identifier)))</p>"
        body +=
            "<p class=\"nav\"><a rel=\"prev\" href=\"\(attribute(link(previous)))\">‹ \(CalendarText.month(previous))</a> · "
        body += "<a href=\"\(attribute(agenda))\">agenda</a> · "
        body += "<a rel=\"next\" href=\"\(attribute(link(next)))\">\(CalendarText.month(next)) ›</a></p>"
        body +=
            "<form method=\"get\" action=\"/calendar\"><input type=\"hidden\" name=\"month\" value=\"\(attribute(month))\">"
        body +=
            "<label>time zone <input name=\"tz\" value=\"\(attribute(zone.identifier))\"></label> <button>Show</button></form>"
        body += "<table class=\"month\"><tr>" + CalendarText.weekdays.map { "<th>\($0)</th>" }.joined() + "</tr>"
        var day = first.dayNumber - Int64(first.weekday)
        while day < next.dayNumber {
            body += "<tr>"
            for _ in 0..<7 {
                let date = LocalDateTime(wallSeconds: day * 86_400)
                let inMonth = date.month == first.month
                body += "<td class=\"\(inMonth ? "day" : "day other")\"><div class=\"date\">\(date.day)</div>"
                if inMonth, let items = byDay[day] {
                    body += "<ul>" + items.map(line).joined() + "</ul>"
                }
                body += "</td>"
                day += 1
            }
            body += "</tr>"
        }
        body += "</table>"
        if occurrences.isEmpty { body += "<p>Nothing happens in \(escape(month)).</p>" }
        return body + moreNote
    }
}

/// `/calendar/agenda?from=YYYY-MM-DD&days=N&tz=ZONE`: what happens, day by day.
struct AgendaPage: CalendarPage {
    let first: LocalDateTime
    let days: Int64
    let zone: TimeZone
    let zoneQuery: [(String, String)]
    let occurrences: [CalendarOccurrence]
    let more: Bool

    var title: String { "Agenda" }
    var jsonAddress: String? {
        "/calendar/agenda.json?" + queryString([("from", CalendarText.day(first)), ("days", "\(days)")] + zoneQuery)
    }

    func encode(to encoder: Encoder) throws {
        var out = encoder.container(keyedBy: CalendarKey.self)
        try out.encode(CalendarText.day(first), forKey: .from)
        try out.encode(days, forKey: .days)
        try encodeOccurrences(to: &out)
    }

    func body() -> String {
        let byDay = byDay()
        let month = "/calendar?" + queryString([("month", CalendarText.month(first))] + zoneQuery)
        var body =
            "<p><a href=\"/\">Store</a> › <a href=\"\(attribute(month))\">calendar</a> › agenda from \(escape(CalendarText.day(first))), \(days) days (\(escape(zone.identifier)))</p>"
        var any = false
        for day in first.dayNumber..<(first.dayNumber + days) {
            guard let items = byDay[day] else { continue }
            any = true
            let date = LocalDateTime(wallSeconds: day * 86_400)
            body +=
                "<h2>\(CalendarText.weekdays[date.weekday]) \(escape(CalendarText.day(date)))</h2><ul class=\"agenda\">"
                + items.map(line).joined() + "</ul>"
        }
        if !any { body += "<p>Nothing happens in these \(days) days.</p>" }
        body += moreNote
        let end = LocalDateTime(wallSeconds: (first.dayNumber + days) * 86_400)
        let later =
            "/calendar/agenda?" + queryString([("from", CalendarText.day(end)), ("days", "\(days)")] + zoneQuery)
        return body + "<p><a rel=\"next\" href=\"\(attribute(later))\">the \(days) days after ›</a></p>"
    }
}
