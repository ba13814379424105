import CloudKitWeb
import Formats
import Foundation
import Migrations
import Records
import StoreCore

/// A read-only web view of a store, as CloudKit's console is for a live container: the store's
/// overview (backend, size, change token, counts per scope, zone and type, the schema), a
/// table of records per type and zone with keyset paging and a predicate box, and each
/// record with every field, its references as links and what points at it. Every page has a
/// JSON form (its path with `.json`).
///
/// Hostile data stays data: every value is escaped, and ``BrowseServer`` gives every answer a
/// Content-Security-Policy that allows no script at all. Each page reads in a transaction of
/// its own, so it is one committed state of the store, and memory holds one page of records at
/// a time. ``BrowseServer``'s routes call the pages; ``BrowseSites`` runs each on the serial
/// queue of a free site.
public final class BrowseSite: Sendable {
    public let store: any RecordStoring
    /// What the overview calls the store ("SQLite", "PostgreSQL").
    public let backend: String
    /// Records per page of a record table.
    public let pageSize: Int
    /// A migration set whose rehearsal `/migrations` shows, as `migrate plan` computes it.
    public let migrations: MigrationSet?

    /// The calendar mapping whose components `/calendar` shows, month by month and as an
    /// agenda; nil shows no calendar.
    public let calendar: CalendarMapping?
    /// The zone the calendar is shown in unless a page names another (`?tz=`).
    public let timeZone: TimeZone

    /// A backup bundle the view shows (its records are in ``store``).
    public struct Bundle: Sendable {
        public var path: String
        public var manifest: BundleManifest
        public var encrypted: Bool

        public init(path: String, manifest: BundleManifest, encrypted: Bool) {
            self.path = path
            self.manifest = manifest
            self.encrypted = encrypted
        }
    }

    /// The bundles whose records ``store`` holds, the full one first: `/bundle` shows their
    /// manifests and the chain. Empty when the view shows a store.
    public let bundles: [Bundle]

    public init(
        store: any RecordStoring, backend: String, pageSize: Int = 50, migrations: MigrationSet? = nil,
        calendar: CalendarMapping? = nil, timeZone: TimeZone = .current, bundles: [Bundle] = []
    ) {
        self.bundles = bundles
        self.store = store
        self.backend = backend
        self.pageSize = pageSize
        self.migrations = migrations
        self.calendar = calendar
        self.timeZone = timeZone
    }

    /// The headers every answer carries: no script may run, nothing may frame the page, and
    /// the browser may not guess another content type.
    public static let securityHeaders: [(name: String, value: String)] = [
        (
            "Content-Security-Policy",
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
        ),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("Cache-Control", "no-store"),
    ]

    /// The query as a form sends it (`+` is a space, then %XX); nil when it is not UTF-8 text.
    static func formQuery(_ raw: String?) -> [String: String]? {
        var query: [String: String] = [:]
        for pair in (raw ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                String($0).replacingOccurrences(of: "+", with: " ")
            }
            guard let name = parts[0].removingPercentEncoding,
                let value = (parts.count > 1 ? parts[1] : "").removingPercentEncoding
            else { return nil }
            query[name] = value
        }
        return query
    }

    // MARK: Pages

    func overview(json: Bool) throws -> CloudKitHTTPResponse {
        let (stats, schema) = try store.readSession { session in (try session.stats(), session.schema) }
        if json {
            var out = JSONWriter()
            out.raw("{\"backend\":")
            out.string(backend)
            out.raw(",\"store\":")
            out.string(shownPath(stats))
            out.raw(",\"bytes\":")
            out.int(shownSize(stats))
            out.raw(",\"token\":")
            out.string(shownToken(stats))
            out.raw(",\"records\":")
            out.int(Int64(stats.totalRecords))
            out.raw(",\"zones\":")
            stats.writeEntriesJSON(to: &out)
            out.raw(",\"schema\":")
            out.string(SchemaPrinter.print(schema))
            out.raw("}")
            return answer(200, json: out.text)
        }
        var body =
            bundles.isEmpty
            ? ""
            : "<p class=\"bundle\">A backup bundle, read-only: \(bundles.map { escape($0.path) }.joined(separator: " + ")) — <a href=\"/bundle\">its manifest\(bundles.count > 1 ? "s and the chain" : "")</a>. Its records are shown as a restore would bring them back.</p>"
        body +=
            "<dl><dt>backend</dt><dd>\(escape(backend))</dd><dt>\(bundles.isEmpty ? "store" : "bundle")</dt><dd>\(escape(shownPath(stats)))</dd>"
        body +=
            "<dt>size</dt><dd>\(shownSize(stats)) bytes</dd><dt>change token</dt><dd><code>\(escape(shownToken(stats)))</code></dd>"
        body += "<dt>records</dt><dd>\(stats.totalRecords) (\(stats.totalTombstones) deleted)</dd></dl>"
        body +=
            "<h2>Records by scope, zone and type</h2><table><tr><th>scope</th><th>zone</th><th>owner</th><th>type</th><th class=\"n\">records</th><th class=\"n\">deleted</th></tr>"
        for entry in stats.entries {
            let link = "/records/\(component(entry.recordType))?zone=\(component(zoneKey(entry.zone)))"
            body +=
                "<tr><td>\(escape(entry.zone.scope.rawValue))</td><td>\(escape(entry.zone.zoneName))</td><td>\(escape(entry.zone.ownerRecordName))</td>"
            body +=
                "<td><a href=\"\(attribute(link))\">\(escape(entry.recordType))</a></td><td class=\"n\">\(entry.records)</td><td class=\"n\">\(entry.tombstones)</td></tr>"
        }
        body += "</table><p><a href=\"/shares\">Shares</a>: each share, what it starts from, and who takes part.</p>"
        if calendar != nil {
            body +=
                "<p><a href=\"/calendar\">Calendar</a>: the month and the agenda of what the calendar mapping shows, recurring records expanded.</p>"
        }
        if let migrations {
            body +=
                "<p><a href=\"/migrations\">Migration rehearsal</a>: what the pending migrations of \(escape(migrations.name)) would change, record by record.</p>"
        }
        body += "<h2>Schema</h2><pre>\(escape(SchemaPrinter.print(schema)))</pre>"
        return answer(200, html: page("Store", body, json: "/index.json"))
    }

    /// The system fields a table can be sorted by, besides the type's own sortable fields.
    static let systemSorts = ["recordName", "modifiedTimestamp", "createdTimestamp"]

    /// A record's value of a sort field, as a predicate writes it (nil when it has none).
    private func sortValue(_ record: Record, _ field: String, definition: RecordTypeDefinition) -> PredicateValue? {
        // A type's own field of a system field's name wins, as the stores sort by it.
        let system =
            field == "recordName"
            || (BrowseSite.systemSorts.contains(field) && definition.field(named: field).map { $0.isSystem } ?? true)
        switch system ? field : "" {
        case "recordName": return .string(record.recordName)
        case "modifiedTimestamp": return record.modified.map { .date(ISO8601.format(milliseconds: $0.timestamp)) }
        case "createdTimestamp": return record.created.map { .date(ISO8601.format(milliseconds: $0.timestamp)) }
        default:
            switch record.fields[field] {
            case .string(let text)?: return .string(text)
            case .reference(let reference)?: return .string(reference.recordName)
            case .int64(let n)?: return .number(String(n))
            case .double(let d)?: return .number("\(d)")
            case .timestamp(let ms)?: return .date(ISO8601.format(milliseconds: ms))
            default: return nil
            }
        }
    }

    /// A sort value's text in an address (`afterValue=`), and back for a field of `type`.
    private func valueText(_ value: PredicateValue) -> String {
        switch value {
        case .string(let text), .number(let text), .date(let text): return text
        default: return value.description
        }
    }

    private func sortLiteral(_ text: String, field: String, definition: RecordTypeDefinition) -> PredicateValue {
        if field == "recordName" { return .string(text) }
        if BrowseSite.systemSorts.contains(field) && definition.field(named: field).map({ $0.isSystem }) ?? true {
            return .date(text)
        }
        switch definition.field(named: field)?.type.primitive {
        case .int64?, .double?, .number?: return .number(text)
        case .timestamp?: return .date(text)
        default: return .string(text)
        }
    }

    /// What the overview names: the store, or the bundles (their files, their sizes, the
    /// newest one's change token) rather than the scratch store that holds their records.
    private func shownPath(_ stats: StoreStats) -> String {
        bundles.isEmpty ? stats.path : bundles.map(\.path).joined(separator: " + ")
    }
    private func shownSize(_ stats: StoreStats) -> Int64 {
        bundles.isEmpty
            ? stats.fileSize
            : bundles.reduce(0) {
                $0 + ((try? FileManager.default.attributesOfItem(atPath: $1.path)[.size] as? Int64) ?? 0)
            }
    }
    private func shownToken(_ stats: StoreStats) -> String { bundles.last?.manifest.token ?? stats.token.description }

    func records(type: String, query: [String: String], json: Bool) throws -> CloudKitHTTPResponse {
        guard let zoneText = query["zone"], let zone = zoneID(zoneText) else {
            return notFound(json, "give the zone: ?zone=SCOPE:OWNER:ZONE")
        }
        let after = query["after"] ?? ""
        let whereText = (query["where"] ?? "").trimmingCharacters(in: .whitespaces)
        // Records a page: ?limit=N (1 to 1,000), else the site's.
        var pageSize = self.pageSize
        if let text = query["limit"], !text.isEmpty {
            guard let n = Int(text), (1...1000).contains(n) else {
                return problem(json, 400, "Not a page size", "limit takes 1 to 1000 records a page, not \(text)")
            }
            pageSize = n
        }
        let sort = (query["sort"] ?? "").isEmpty ? "recordName" : query["sort"]!
        let descending = query["desc"] == "1"
        let fieldsText = (query["fields"] ?? "").trimmingCharacters(in: .whitespaces)
        var problems: [String] = []
        var fields: [FieldDefinition] = []
        var sortable: [String] = []
        var found: [Record] = []
        var codec: JSONRecordCodec?
        // One read session: the type's definition and its page come from one snapshot.
        let definition: RecordTypeDefinition? = try store.readSession { session in
            guard let definition = session.schema.recordType(named: type) else { return nil }
            // The sort: ?sort=FIELD (a field that sorts, or recordName, modifiedTimestamp,
            // createdTimestamp), ?desc=1 going down.
            sortable = definition.userFields.filter {
                !$0.type.isList && ![.asset, .location, .bytes].contains($0.type.primitive)
            }.map(\.name)
            if !BrowseSite.systemSorts.contains(sort) && !sortable.contains(sort) {
                problems.append(
                    "\(type) cannot be sorted by '\(sort)' (it sorts by \((BrowseSite.systemSorts + sortable.sorted { RecordFields.precedes($0, $1) }).joined(separator: ", ")))"
                )
            }
            // The fields shown: ?fields=a,b,c (in that order), else every field.
            fields = definition.userFields.sorted { RecordFields.precedes($0.name, $1.name) }
            if !fieldsText.isEmpty {
                let names = fieldsText.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                    !$0.isEmpty
                }
                let unknown = names.filter { definition.field(named: $0).map { $0.isSystem } ?? true }
                if unknown.isEmpty {
                    fields = names.compactMap { definition.field(named: $0) }
                } else {
                    problems.append(
                        "\(type) has no field \(unknown.map { "'\($0)'" }.joined(separator: ", ")) to show (its fields: \(fields.map(\.name).joined(separator: ", ")))"
                    )
                }
            }
            var conditions: [Condition] = []
            if !whereText.isEmpty {
                do { conditions = try RecordPredicate.parse(whereText).conditions } catch {
                    problems.append("\(error)")
                }
            }
            guard problems.isEmpty else { return definition }
            codec = JSONRecordCodec(schema: session.schema)
            var request = RecordQuery(
                recordTypes: [type], scope: zone.scope, zoneName: zone.zoneName, ownerRecordName: zone.ownerRecordName,
                predicate: conditions.isEmpty ? nil : RecordPredicate(conditions),
                predicateText: whereText.isEmpty ? nil : whereText)
            request.sortField = sort
            request.descending = descending
            // Keyset paging: the page after the last record shown (its sort value and
            // name), so that a far page costs what the first does.
            if !after.isEmpty {
                let value =
                    sort == "recordName"
                    ? .string(after) : query["afterValue"].map { sortLiteral($0, field: sort, definition: definition) }
                request.after = RecordKey(value: value, recordName: after)
            }
            request.limit = pageSize + 1
            do {
                try session.forEach(request) { record in
                    found.append(record)
                    if found.count > pageSize { throw PageFull() }
                }
            } catch is PageFull {
            } catch {
                problems.append("\(error)")
            }
            return definition
        }
        guard let definition else { return notFound(json, "no record type \(type)") }
        let problem = problems.isEmpty ? nil : problems.joined(separator: "\n")
        let more = found.count > pageSize
        if more { found.removeLast() }
        let next = more ? found.last : nil
        // The address of this table with some of its settings changed.
        func address(_ changes: [(String, String?)], suffix: String = "") -> String {
            var settings: [(String, String)] = [("zone", zoneText)]
            for (name, value) in [
                ("where", whereText), ("fields", fieldsText), ("limit", query["limit"] ?? ""),
                ("sort", sort == "recordName" ? "" : sort), ("desc", descending ? "1" : ""),
            ] where !value.isEmpty {
                settings.append((name, value))
            }
            for (name, value) in changes {
                settings.removeAll { $0.0 == name }
                if let value { settings.append((name, value)) }
            }
            return "/records/\(component(type))\(suffix)?" + queryString(settings)
        }
        var nextLink: String?
        if let next {
            let value = sort == "recordName" ? nil : sortValue(next, sort, definition: definition)
            nextLink = address([("after", next.recordName)] + (value.map { [("afterValue", valueText($0))] } ?? []))
        }
        if json {
            var out = JSONWriter()
            out.raw("{\"recordType\":")
            out.string(type)
            out.raw(",\"zone\":")
            out.string(zoneText)
            if let problem {
                out.raw(",\"status\":400,\"error\":")
                out.string(problem)
            }
            out.raw(",\"records\":[")
            for (index, record) in found.enumerated() {
                if index > 0 { out.raw(",") }
                codec?.encode(record, style: .canonical, to: &out)
            }
            out.raw("]")
            if let next {
                out.raw(",\"next\":")
                out.string(next.recordName)
                if sort != "recordName", let value = sortValue(next, sort, definition: definition) {
                    out.raw(",\"nextValue\":")
                    out.string(valueText(value))
                }
                if let nextLink {
                    out.raw(",\"nextPage\":")
                    out.string(
                        nextLink.replacingOccurrences(
                            of: "/records/\(component(type))?", with: "/records/\(component(type)).json?"))
                }
            }
            out.raw("}")
            return answer(problem == nil ? 200 : 400, json: out.text)
        }
        var body =
            "<p><a href=\"/\">Store</a> › \(escape(zone.scope.rawValue)) › \(escape(zone.zoneName)) › \(escape(type))</p>"
        body +=
            "<form method=\"get\" action=\"/records/\(attribute(component(type)))\"><input type=\"hidden\" name=\"zone\" value=\"\(attribute(zoneText))\">"
        if sort != "recordName" { body += "<input type=\"hidden\" name=\"sort\" value=\"\(attribute(sort))\">" }
        if descending { body += "<input type=\"hidden\" name=\"desc\" value=\"1\">" }
        body +=
            "<label>where <input name=\"where\" size=\"60\" value=\"\(attribute(whereText))\" placeholder=\"status != 'done' AND points > 3\"></label> "
        body +=
            "<label>fields <input name=\"fields\" size=\"30\" value=\"\(attribute(fieldsText))\" placeholder=\"all; or title,dueDate\"></label> <button>Show</button></form>"
        if let problem { body += "<p class=\"error\">\(escape(problem))</p>" }
        // Each sortable column's heading sorts by it; again, the other way.
        func heading(_ label: String, _ field: String?) -> String {
            guard let field, BrowseSite.systemSorts.contains(field) || sortable.contains(field) else {
                return "<th>\(escape(label))</th>"
            }
            let current = field == sort
            let arrow = current ? (descending ? " ↓" : " ↑") : ""
            let link = address([
                ("sort", field == "recordName" ? nil : field), ("desc", current && !descending ? "1" : nil),
            ])
            return "<th><a href=\"\(attribute(link))\">\(escape(label))</a>\(arrow)</th>"
        }
        body +=
            "<table><tr>" + heading("record name", "recordName") + heading("modified", "modifiedTimestamp")
            + fields.map { heading($0.name, $0.name) }.joined() + "</tr>"
        for record in found {
            body +=
                "<tr><td><a href=\"\(attribute(recordLink(record)))\">\(escape(record.recordName))</a></td><td>\(escape(record.modified.map { ISO8601.format(milliseconds: $0.timestamp) } ?? ""))</td>"
            for field in fields {
                body += "<td>\(record.fields[field.name].map { cell($0, zone: record.zone, type: type) } ?? "")</td>"
            }
            body += "</tr>"
        }
        body += "</table>"
        if found.isEmpty && problem == nil {
            body += "<p>No records here" + (after.isEmpty ? "" : " after \(escape(after))") + ".</p>"
        }
        if let nextLink { body += "<p><a rel=\"next\" href=\"\(attribute(nextLink))\">next page ›</a></p>" }
        var downloadQuery = [("zone", zoneText)]
        if !whereText.isEmpty { downloadQuery.append(("where", whereText)) }
        let mapped = calendar?.components.contains { $0.recordType == type } == true
        let links = ([(".jsonl", "JSON Lines"), (".csv", "CSV")] + (mapped ? [(".ics", "iCalendar")] : [])).map {
            suffix, label in
            "<a href=\"\(attribute("/records/\(component(type))\(suffix)?" + queryString(downloadQuery)))\">\(label)</a>"
        }
        body += "<p>Download every record of this table (all pages): \(links.joined(separator: " · "))</p>"
        let jsonLink =
            "/records/\(component(type)).json?"
            + queryString(query.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        return answer(problem == nil ? 200 : 400, html: page(type, body, json: jsonLink))
    }

    func record(id: RecordID, json: Bool) throws -> CloudKitHTTPResponse {
        let found: (record: Record, pointers: [(record: Record, field: String)], more: Bool, codec: JSONRecordCodec)? =
            try store.readSession { session in
                guard let record = try session.record(id) else { return nil }
                // What points at it, in its zone: each REFERENCE field, each LIST<REFERENCE> that
                // holds it, and each record whose parent it is — the first page of them.
                var pointers: [(record: Record, field: String)] = []
                var more = false
                do {
                    for candidate in session.schema.recordTypes.sorted(by: { RecordFields.precedes($0.name, $1.name) })
                    {
                        var links = candidate.fields.filter {
                            $0.type.primitive == .reference && !$0.name.hasPrefix("___")
                        }
                        .map { (name: $0.name, op: $0.type.isList ? ComparisonOperator.contains : .equal) }
                        if candidate.field(named: "parent") == nil { links.append((name: "parent", op: .equal)) }
                        for link in links {
                            let condition = Condition(
                                field: link.name, op: link.op, value: .string(id.recordName), fieldColumn: 0,
                                valueColumn: 0)
                            var request = RecordQuery(
                                recordTypes: [candidate.name], scope: id.zone.scope, zoneName: id.zone.zoneName,
                                ownerRecordName: id.zone.ownerRecordName, predicate: RecordPredicate([condition]))
                            request.limit = pageSize + 1 - pointers.count
                            try session.forEach(request) { pointer in
                                guard pointers.count < pageSize else {
                                    more = true
                                    throw PageFull()
                                }
                                pointers.append((pointer, link.name))
                            }
                        }
                    }
                } catch is PageFull {}
                return (record, pointers, more, JSONRecordCodec(schema: session.schema))
            }
        guard let found else { return notFound(json, "no record \(id.recordName) in that zone") }
        let record = found.record
        let codec = found.codec
        if json {
            var out = JSONWriter()
            out.raw("{\"record\":")
            codec.encode(record, style: .canonical, to: &out)
            out.raw(",\"pointedToBy\":[")
            for (index, pointer) in found.pointers.enumerated() {
                if index > 0 { out.raw(",") }
                out.raw("{\"recordType\":")
                out.string(pointer.record.recordType)
                out.raw(",\"recordName\":")
                out.string(pointer.record.recordName)
                out.raw(",\"field\":")
                out.string(pointer.field)
                out.raw("}")
            }
            out.raw("]")
            if found.more { out.raw(",\"morePointers\":true") }
            out.raw("}")
            return answer(200, json: out.text)
        }
        var body =
            "<p><a href=\"/\">Store</a> › <a href=\"\(attribute("/records/\(component(record.recordType))?zone=\(component(zoneKey(record.zone)))"))\">\(escape(record.recordType))</a> › \(escape(record.recordName))</p>"
        body += "<h2>System fields</h2><dl>"
        body +=
            "<dt>zone</dt><dd>\(escape(zoneKey(record.zone)))</dd><dt>change tag</dt><dd>\(escape(record.changeTag ?? ""))</dd>"
        for (name, stamp) in [("created", record.created), ("modified", record.modified)] {
            guard let stamp else { continue }
            body +=
                "<dt>\(name)</dt><dd>\(escape(ISO8601.format(milliseconds: stamp.timestamp))) by \(escape(stamp.userRecordName ?? "?")) on \(escape(stamp.deviceID ?? "?"))</dd>"
        }
        if let parent = record.parent {
            body +=
                "<dt>parent</dt><dd><a href=\"\(attribute(idLink(RecordID(recordName: parent, zone: record.zone))))\">\(escape(parent))</a></dd>"
        }
        if let share = record.share {
            body +=
                "<dt>share</dt><dd><a href=\"\(attribute(idLink(RecordID(recordName: share, zone: record.zone))))\">\(escape(share))</a></dd>"
        }
        body += "</dl><h2>Fields</h2><table><tr><th>field</th><th>type</th><th>value</th></tr>"
        for entry in record.fields.entries {
            body +=
                "<tr><td>\(escape(entry.name))</td><td>\(escape(entry.value.type.description))</td><td>\(cell(entry.value, zone: record.zone, type: record.recordType))</td></tr>"
        }
        body += "</table><h2>Pointed to by</h2>"
        if found.pointers.isEmpty {
            body += "<p>No record points at this one.</p>"
        } else {
            body +=
                "<ul>"
                + found.pointers.map { pointer in
                    "<li>\(escape(pointer.record.recordType)) <a href=\"\(attribute(recordLink(pointer.record)))\">\(escape(pointer.record.recordName))</a> (its \(escape(pointer.field)))</li>"
                }.joined() + "</ul>"
            if found.more {
                body +=
                    "<p>More records point at this one; the first \(pageSize) are shown. Its type's tables, filtered with a where box, list them all.</p>"
            }
        }
        return answer(200, html: page(record.recordName, body, json: idLink(record.id) + ".json"))
    }

    func shares(json: Bool) throws -> CloudKitHTTPResponse {
        let shares = try store.readSession { try Shares.list($0, scope: nil, zoneName: nil) }
        if json {
            var out = JSONWriter()
            out.raw("[")
            for (index, share) in shares.enumerated() {
                if index > 0 { out.raw(",") }
                share.writeJSON(to: &out)
            }
            out.raw("]")
            return answer(200, json: out.text)
        }
        var body = "<p><a href=\"/\">Store</a> › shares</p>"
        if shares.isEmpty { body += "<p>Nothing in this store is shared.</p>" }
        for share in shares {
            body +=
                "<section><h2><a href=\"\(attribute(recordLink(share.record)))\">\(escape(share.title ?? share.record.recordName))</a></h2><dl>"
            body += "<dt>zone</dt><dd>\(escape(zoneKey(share.zone)))</dd>"
            if share.isZoneWide {
                body += "<dt>shares</dt><dd>the whole zone: \(share.recordCount) records</dd>"
            } else if let root = share.root {
                body +=
                    "<dt>shares</dt><dd>\(escape(root.recordType)) <a href=\"\(attribute(idLink(RecordID(recordName: root.recordName, zone: share.zone))))\">\(escape(root.recordName))</a> and what lies under it: \(share.recordCount) records</dd>"
            } else {
                body += "<dt>shares</dt><dd>a root record the store does not hold</dd>"
            }
            body += "<dt>public</dt><dd>\(escape(share.details?.publicPermission ?? "not recorded"))</dd>"
            if let url = share.details?.url { body += "<dt>URL</dt><dd>\(escape(url))</dd>" }
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
        return answer(200, html: page("Shares", body, json: "/shares.json"))
    }

    // MARK: Bundle

    /// `/bundle`: each bundle's manifest (who made it, when, from which store, up to which
    /// change token, from which, what it holds, every member with its checksum), and how
    /// the chain links.
    func bundlePage(json: Bool) -> CloudKitHTTPResponse {
        guard !bundles.isEmpty else { return notFound(json, "this view shows a store, not a backup bundle") }
        if json {
            var out = JSONWriter()
            out.raw("[")
            for (index, bundle) in bundles.enumerated() {
                if index > 0 { out.raw(",") }
                out.raw("{\"path\":")
                out.string(bundle.path)
                out.raw(",\"encrypted\":")
                out.bool(bundle.encrypted)
                out.raw(",\"manifest\":")
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                let data = (try? encoder.encode(bundle.manifest)) ?? Data("null".utf8)
                out.bytes.append(contentsOf: data)
                out.raw("}")
            }
            out.raw("]")
            return answer(200, json: out.text)
        }
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
            body +=
                "<dt>made</dt><dd>\(escape(manifest.created)) by ckport \(escape(manifest.ckportVersion)) (bundle format \(manifest.format))</dd>"
            body +=
                "<dt>from store</dt><dd>\(escape(manifest.storeID))</dd><dt>change token</dt><dd><code>\(escape(manifest.token))</code></dd>"
            body +=
                "<dt>holds</dt><dd>"
                + (manifest.baseToken.map { "what changed after <code>\(escape($0))</code>" }
                    ?? "the whole store, or what its selection chose") + "</dd>"
            body +=
                "<dt>records</dt><dd>\(manifest.recordCount)</dd><dt>encrypted</dt><dd>\(bundle.encrypted ? "yes (AES-256-GCM)" : "no")</dd></dl>"
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
        return answer(200, html: page(bundles.count > 1 ? "Bundles" : "Bundle", body, json: "/bundle.json"))
    }

    // MARK: Calendar

    /// Occurrences in a month or an agenda at most: a page says when there are more.
    static let calendarLimit = 2_000

    /// The zone a calendar page is shown in: `?tz=`, else the site's.
    private func viewerZone(_ query: [String: String]) -> TimeZone? {
        guard let name = query["tz"], !name.isEmpty else { return timeZone }
        return TimeZone(identifier: name)
    }

    /// The 400 for a `?tz=` that names no zone.
    private func notAZone(_ query: [String: String], json: Bool) -> CloudKitHTTPResponse {
        problem(
            json, 400, "Not a time zone", "\(query["tz"] ?? "") is not a time zone (an IANA name such as Europe/Berlin)"
        )
    }

    private static func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
    private static func yearText(_ year: Int64) -> String {
        String(repeating: "0", count: max(0, 4 - String(year).count)) + String(year)
    }
    private static func dayText(_ day: LocalDateTime) -> String { "\(monthText(day))-\(two(day.day))" }
    private static func monthText(_ day: LocalDateTime) -> String { "\(yearText(day.year))-\(two(day.month))" }
    private static func timeText(_ wall: LocalDateTime) -> String { "\(two(wall.hour)):\(two(wall.minute))" }
    private static let weekdays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]

    /// The occurrences of `from..<to` in `zone`, as JSON or as a page built by `html`.
    private func occurrences(from: Int64, to: Int64, zone: TimeZone) throws -> (
        occurrences: [CalendarOccurrence], more: Bool
    ) {
        guard let calendar else { return ([], false) }
        return try store.readSession { session in
            try CalendarOccurrences.find(
                in: session, mapping: calendar, from: from, to: to, zone: zone, limit: BrowseSite.calendarLimit)
        }
    }

    private func occurrencesJSON(
        _ found: (occurrences: [CalendarOccurrence], more: Bool), zone: TimeZone, head: (inout JSONWriter) -> Void
    ) -> CloudKitHTTPResponse {
        var out = JSONWriter()
        out.raw("{")
        head(&out)
        out.raw(",\"timeZone\":")
        out.string(zone.identifier)
        out.raw(",\"occurrences\":[")
        for (index, occurrence) in found.occurrences.enumerated() {
            if index > 0 { out.raw(",") }
            out.raw("{\"recordType\":")
            out.string(occurrence.record.recordType)
            out.raw(",\"recordName\":")
            out.string(occurrence.record.recordName)
            out.raw(",\"zone\":")
            out.string(zoneKey(occurrence.record.zone))
            out.raw(",\"component\":")
            out.string(occurrence.component)
            out.raw(",\"title\":")
            out.string(occurrence.title)
            out.raw(",\"start\":")
            out.string(ISO8601.format(milliseconds: occurrence.start))
            if let end = occurrence.end {
                out.raw(",\"end\":")
                out.string(ISO8601.format(milliseconds: end))
            }
            out.raw(",\"allDay\":")
            out.bool(occurrence.allDay)
            out.raw(",\"recurring\":")
            out.bool(occurrence.recurring)
            out.raw("}")
        }
        out.raw("],\"more\":")
        out.bool(found.more)
        out.raw("}")
        return answer(200, json: out.text)
    }

    /// One occurrence as a line of a day: its time (unless all day) and its title, a link to
    /// its record.
    private func occurrenceItem(_ occurrence: CalendarOccurrence, zone: TimeZone) -> String {
        let time =
            occurrence.allDay
            ? "all day" : BrowseSite.timeText(ZoneResolver.wall(milliseconds: occurrence.start, in: zone))
        let mark = occurrence.recurring ? " <span class=\"repeat\" title=\"recurring\">↻</span>" : ""
        return
            "<li><span class=\"time\">\(time)</span> <a href=\"\(attribute(recordLink(occurrence.record)))\">\(escape(occurrence.title))</a>\(mark)</li>"
    }

    /// The days (wall-clock dates in `zone`) an occurrence covers: its start's, and each
    /// after it up to its end (an end at midnight ends the day before), at most 42.
    private func days(of occurrence: CalendarOccurrence, zone: TimeZone) -> [Int64] {
        let first = ZoneResolver.wall(milliseconds: occurrence.start, in: zone).dayNumber
        guard let end = occurrence.end, end > occurrence.start else { return [first] }
        let last = ZoneResolver.wall(milliseconds: end - 1, in: zone).dayNumber
        return Array(first...max(first, min(last, first + 41)))
    }

    /// `/calendar?month=YYYY-MM&tz=ZONE`: a month, a week a row from Monday, each day with what
    /// happens on it.
    func month(query: [String: String], json: Bool) throws -> CloudKitHTTPResponse {
        guard calendar != nil else {
            return notFound(
                json,
                "this view has no calendar: the store's types are not a sample app's, and no mapping was given")
        }
        guard let zone = viewerZone(query) else { return notAZone(query, json: json) }
        let today = ZoneResolver.wall(milliseconds: Int64(Date().timeIntervalSince1970 * 1000), in: zone)
        var year = today.year
        var monthNumber = today.month
        if let text = query["month"], !text.isEmpty {
            let parts = text.split(separator: "-")
            guard parts.count == 2, let y = Int64(parts[0]), let m = Int64(parts[1]), (1...9999).contains(y),
                (1...12).contains(m), parts[1].count == 2
            else {
                return problem(json, 400, "Not a month", "\(text) is not a month (YYYY-MM, such as 2026-03)")
            }
            (year, monthNumber) = (y, m)
        }
        let first = LocalDateTime(year: year, month: monthNumber, day: 1)
        let next =
            monthNumber == 12
            ? LocalDateTime(year: year + 1, month: 1, day: 1)
            : LocalDateTime(year: year, month: monthNumber + 1, day: 1)
        let previous =
            monthNumber == 1
            ? LocalDateTime(year: year - 1, month: 12, day: 1)
            : LocalDateTime(year: year, month: monthNumber - 1, day: 1)
        let monthText = BrowseSite.monthText(first)
        let found = try occurrences(
            from: ZoneResolver.midnight(first, in: zone), to: ZoneResolver.midnight(next, in: zone), zone: zone)
        if json {
            return occurrencesJSON(found, zone: zone) {
                $0.raw("\"month\":")
                $0.string(monthText)
            }
        }
        var byDay: [Int64: [CalendarOccurrence]] = [:]
        for occurrence in found.occurrences {
            for day in days(of: occurrence, zone: zone) { byDay[day, default: []].append(occurrence) }
        }
        let zoneQuery = query["tz"].map { [("tz", $0)] } ?? []
        func link(_ month: LocalDateTime) -> String {
            "/calendar?" + queryString([("month", BrowseSite.monthText(month))] + zoneQuery)
        }
        var body = "<p><a href=\"/\">Store</a> › calendar › \(escape(monthText)) (\(escape(zone.identifier)))</p>"
        body +=
            "<p class=\"nav\"><a rel=\"prev\" href=\"\(attribute(link(previous)))\">‹ \(BrowseSite.monthText(previous))</a> · "
        body +=
            "<a href=\"\(attribute("/calendar/agenda?" + queryString([("from", BrowseSite.dayText(first)), ("days", "\(next.dayNumber - first.dayNumber)")] + zoneQuery)))\">agenda</a> · "
        body += "<a rel=\"next\" href=\"\(attribute(link(next)))\">\(BrowseSite.monthText(next)) ›</a></p>"
        body +=
            "<form method=\"get\" action=\"/calendar\"><input type=\"hidden\" name=\"month\" value=\"\(attribute(monthText))\">"
        body +=
            "<label>time zone <input name=\"tz\" value=\"\(attribute(zone.identifier))\"></label> <button>Show</button></form>"
        body += "<table class=\"month\"><tr>" + BrowseSite.weekdays.map { "<th>\($0)</th>" }.joined() + "</tr>"
        var day = first.dayNumber - Int64(first.weekday)
        while day < next.dayNumber {
            body += "<tr>"
            for _ in 0..<7 {
                let date = LocalDateTime(wallSeconds: day * 86_400)
                let inMonth = date.month == monthNumber
                body += "<td class=\"\(inMonth ? "day" : "day other")\"><div class=\"date\">\(date.day)</div>"
                if inMonth, let items = byDay[day] {
                    body += "<ul>" + items.map { occurrenceItem($0, zone: zone) }.joined() + "</ul>"
                }
                body += "</td>"
                day += 1
            }
            body += "</tr>"
        }
        body += "</table>"
        if found.occurrences.isEmpty { body += "<p>Nothing happens in \(escape(monthText)).</p>" }
        if found.more {
            body +=
                "<p>More than \(BrowseSite.calendarLimit) occurrences: the first \(BrowseSite.calendarLimit) are shown.</p>"
        }
        return answer(
            200,
            html: page(
                "Calendar \(monthText)", body, json: "/calendar.json?" + queryString([("month", monthText)] + zoneQuery)
            ))
    }

    /// `/calendar/agenda?from=YYYY-MM-DD&days=N&tz=ZONE`: what happens, day by day.
    func agenda(query: [String: String], json: Bool) throws -> CloudKitHTTPResponse {
        guard calendar != nil else {
            return notFound(
                json,
                "this view has no calendar: the store's types are not a sample app's, and no mapping was given")
        }
        guard let zone = viewerZone(query) else { return notAZone(query, json: json) }
        var first = ZoneResolver.wall(milliseconds: Int64(Date().timeIntervalSince1970 * 1000), in: zone)
        first = LocalDateTime(year: first.year, month: first.month, day: first.day)
        if let text = query["from"], !text.isEmpty {
            guard text.count == 10, let ms = ISO8601.parse(text, timeZone: TimeZone(identifier: "UTC")) else {
                return problem(json, 400, "Not a day", "\(text) is not a day (YYYY-MM-DD, such as 2026-03-01)")
            }
            first = LocalDateTime(wallSeconds: ISO8601.floorDiv(ms, 1000))
        }
        var count: Int64 = 14
        if let text = query["days"], !text.isEmpty {
            guard let n = Int64(text), (1...366).contains(n) else {
                return problem(json, 400, "Not a number of days", "days takes 1 to 366, not \(text)")
            }
            count = n
        }
        let end = LocalDateTime(wallSeconds: (first.dayNumber + count) * 86_400)
        let found = try occurrences(
            from: ZoneResolver.midnight(first, in: zone), to: ZoneResolver.midnight(end, in: zone), zone: zone)
        if json {
            return occurrencesJSON(found, zone: zone) { out in
                out.raw("\"from\":")
                out.string(BrowseSite.dayText(first))
                out.raw(",\"days\":")
                out.int(count)
            }
        }
        var byDay: [Int64: [CalendarOccurrence]] = [:]
        for occurrence in found.occurrences {
            for day in days(of: occurrence, zone: zone) { byDay[day, default: []].append(occurrence) }
        }
        let zoneQuery = query["tz"].map { [("tz", $0)] } ?? []
        var body =
            "<p><a href=\"/\">Store</a> › <a href=\"\(attribute("/calendar?" + queryString([("month", BrowseSite.monthText(first))] + zoneQuery)))\">calendar</a> › agenda from \(escape(BrowseSite.dayText(first))), \(count) days (\(escape(zone.identifier)))</p>"
        var any = false
        for day in first.dayNumber..<(first.dayNumber + count) {
            guard let items = byDay[day] else { continue }
            any = true
            let date = LocalDateTime(wallSeconds: day * 86_400)
            body +=
                "<h2>\(BrowseSite.weekdays[date.weekday]) \(escape(BrowseSite.dayText(date)))</h2><ul class=\"agenda\">"
                + items.map { occurrenceItem($0, zone: zone) }.joined() + "</ul>"
        }
        if !any { body += "<p>Nothing happens in these \(count) days.</p>" }
        if found.more {
            body +=
                "<p>More than \(BrowseSite.calendarLimit) occurrences: the first \(BrowseSite.calendarLimit) are shown.</p>"
        }
        let later =
            "/calendar/agenda?" + queryString([("from", BrowseSite.dayText(end)), ("days", "\(count)")] + zoneQuery)
        body += "<p><a rel=\"next\" href=\"\(attribute(later))\">the \(count) days after ›</a></p>"
        return answer(
            200,
            html: page(
                "Agenda", body,
                json: "/calendar/agenda.json?"
                    + queryString([("from", BrowseSite.dayText(first)), ("days", "\(count)")] + zoneQuery)))
    }

    /// Every record a table selects (all its pages), written by the same writer `ckport export`
    /// uses into a private temporary file, which the server sends a piece at a time and removes.
    func download(type: String, query: [String: String], format: RecordFormat, json: Bool = false) throws
        -> CloudKitHTTPResponse
    {
        guard let zoneText = query["zone"], let zone = zoneID(zoneText) else {
            return notFound(json, "give the zone: ?zone=SCOPE:OWNER:ZONE")
        }
        let whereText = (query["where"] ?? "").trimmingCharacters(in: .whitespaces)
        let predicate: RecordPredicate?
        do { predicate = whereText.isEmpty ? nil : try RecordPredicate.parse(whereText) } catch {
            return problem(json, 400, "Not a predicate", "\(error)")
        }
        guard try store.readSession({ $0.schema.recordType(named: type) }) != nil else {
            return notFound(json, "no record type \(type)")
        }
        var request = RecordQuery(
            recordTypes: [type], scope: zone.scope, zoneName: zone.zoneName, ownerRecordName: zone.ownerRecordName,
            predicate: predicate, predicateText: whereText.isEmpty ? nil : whereText)
        request.sortField = "recordName"
        var settings = FormatSettings()
        if format == .iCalendar {
            // Through the calendar mapping, in the viewer's zone, as `export --tz` writes it.
            guard let calendar, calendar.components.contains(where: { $0.recordType == type }) else {
                return notFound(
                    json,
                    "the calendar mapping has no component for \(type): its records have no iCalendar form here")
            }
            guard let zone = viewerZone(query) else { return notAZone(query, json: json) }
            settings[CalendarWriteSettings.self] = CalendarWriteSettings(
                mapping: calendar, options: ICalExportOptions(timeZone: zone))
        }
        let folder = try PrivateFiles.folder()
        let (fd, path) = try PrivateFiles.create("download", in: folder)
        close(fd)
        do {
            _ = try Exports.records(
                from: store, to: .file(path), request: ExportRequest(query: request, format: format, settings: settings)
            )
        } catch {
            unlink(path)
            // A predicate that names what the type does not have is the asker's to fix.
            if case StoreError.badQuery(let message)? = error as? StoreError {
                return problem(json, 400, "Not a predicate", message.description)
            }
            throw error
        }
        let (suffix, contentType) =
            format == .csv
            ? (".csv", "text/csv; charset=utf-8")
            : format == .iCalendar
                ? (".ics", "text/calendar; charset=utf-8") : (".jsonl", "application/jsonl; charset=utf-8")
        let name = type + suffix
        var response = CloudKitHTTPResponse(
            status: 200,
            headers: [
                ("Content-Type", contentType),
                (
                    "Content-Disposition",
                    "attachment; filename=\"\(name.filter { $0.isLetter || $0.isNumber || ".-_".contains($0) })\""
                ),
            ], body: Data())
        response.bodyFile = path
        response.removesBodyFile = true
        return response
    }

    /// The pending migrations of ``migrations`` as `migrate plan` computes them (the store is
    /// only read): per migration and type, how many records change, and each of the first
    /// records' diffs, field by field.
    func rehearsal(json: Bool) throws -> CloudKitHTTPResponse {
        guard let migrations else { return notFound(json, "this view was started without a migration set to rehearse") }
        let reports = try SchemaMigrations.plan(
            migrations, in: store, options: MigrationRunOptions(diffLimit: pageSize))
        if json {
            var list: [[String: Any]] = []
            for report in reports {
                var counts: [String: Any] = [:]
                for (type, c) in report.counts {
                    counts[type] = [
                        "scanned": c.scanned, "changed": c.changed, "unchanged": c.unchanged, "failed": c.failed,
                        "deleted": c.deleted,
                    ]
                }
                list.append([
                    "version": report.version, "description": report.description, "file": report.file, "counts": counts,
                    "schemaChanges": report.schemaChanges,
                    "failures": report.failures.map {
                        [
                            "recordName": $0.recordName, "recordType": $0.recordType, "step": $0.step,
                            "message": $0.message,
                        ]
                    },
                    "diffs": report.diffs.map {
                        [
                            "recordName": $0.recordName, "recordType": $0.recordType, "zoneName": $0.zoneName,
                            "lines": $0.lines,
                        ]
                    },
                ])
            }
            let data = try JSONSerialization.data(
                withJSONObject: ["set": migrations.name, "migrations": list], options: [.sortedKeys])
            return answer(200, json: String(decoding: data, as: UTF8.self))
        }
        var body =
            "<p><a href=\"/\">Store</a> › migration rehearsal of \(escape(migrations.name)) (nothing is written)</p>"
        if reports.isEmpty { body += "<p>No migration of this set is pending: the store is up to date.</p>" }
        for report in reports {
            body +=
                "<section><h2>\(report.version): \(escape(report.description))</h2><p><code>\(escape(report.file))</code></p>"
            body +=
                "<table><tr><th>record type</th><th class=\"n\">scanned</th><th class=\"n\">changed</th><th class=\"n\">unchanged</th><th class=\"n\">failed</th><th class=\"n\">deleted</th></tr>"
            for (type, c) in report.counts.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
                body +=
                    "<tr><td>\(escape(type))</td><td class=\"n\">\(c.scanned)</td><td class=\"n\">\(c.changed)</td><td class=\"n\">\(c.unchanged)</td><td class=\"n\">\(c.failed)</td><td class=\"n\">\(c.deleted)</td></tr>"
            }
            body += "</table>"
            if !report.schemaChanges.isEmpty {
                body +=
                    "<p>Schema: " + report.schemaChanges.map { "<code>\(escape($0))</code>" }.joined(separator: ", ")
                    + "</p>"
            }
            for failure in report.failures {
                body +=
                    "<p class=\"error\">\(escape(failure.recordType)) \(escape(failure.recordName)): \(escape(failure.step)): \(escape(failure.message.description))</p>"
            }
            for diff in report.diffs {
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
        return answer(200, html: page("Migration rehearsal", body, json: "/migrations.json"))
    }

    /// A diffed record's page, when its zone is one the store can name from the diff alone
    /// (the default zone's owner); otherwise the record table of its type.
    private func diffLink(_ diff: RecordDiff) -> String {
        // The record itself, in its zone (the scope and owner of a diff written before they
        // were kept: the private default owner's).
        let zone = ZoneID(
            scope: diff.scope.flatMap(DatabaseScope.init(rawValue:)) ?? .private, zoneName: diff.zoneName,
            ownerRecordName: diff.ownerRecordName ?? ZoneID.defaultOwnerName)
        return idLink(RecordID(recordName: diff.recordName, zone: zone))
    }

    // MARK: Pieces

    /// A value as a table cell: text escaped, references as links into the same zone.
    private func cell(_ value: FieldValue, zone: ZoneID, type: String) -> String {
        switch value {
        case .reference(let reference):
            return
                "<a href=\"\(attribute(idLink(RecordID(recordName: reference.recordName, zone: zone))))\">\(escape(reference.recordName))</a>"
        case .list(_, let items)
        where items.contains(where: { if case .reference = $0 { return true } else { return false } }):
            return items.map { cell($0, zone: zone, type: type) }.joined(separator: ", ")
        case .string(let string):
            return escape(string.count > 200 ? String(string.prefix(200)) + "…" : string)
        case .timestamp(let milliseconds):
            return escape(ISO8601.format(milliseconds: milliseconds))
        default:
            var out = JSONWriter()
            FieldValueJSON.write(value, style: .plain, to: &out)
            var text = out.text
            if text.count > 200 { text = String(text.prefix(200)) + "…" }
            return escape(text)
        }
    }

    private func recordLink(_ record: Record) -> String { idLink(record.id) }

    private func idLink(_ id: RecordID) -> String {
        "/record/\(component(id.zone.scope.rawValue))/\(component(id.zone.ownerRecordName))/\(component(id.zone.zoneName))/\(component(id.recordName))"
    }

    /// A page's worth of records was read.
    private struct PageFull: Error {}

    /// `name=value&…`, each part percent-encoded (a '+' too, which a form would read as a space).
    private func queryString(_ items: [(String, String)]) -> String {
        items.map { component($0.0) + "=" + component($0.1) }.joined(separator: "&")
    }

    /// A zone as the record table's `zone` parameter: SCOPE:OWNER:ZONE.
    private func zoneKey(_ zone: ZoneID) -> String { "\(zone.scope.rawValue):\(zone.ownerRecordName):\(zone.zoneName)" }

    private func zoneID(_ key: String) -> ZoneID? {
        let parts = key.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let scope = DatabaseScope(rawValue: parts[0]) else { return nil }
        return ZoneID(scope: scope, zoneName: parts[2], ownerRecordName: parts[1])
    }

    /// An error's answer, as a page or as JSON (`{"status":404,"error":"…"}`) for a `.json` path.
    func problem(
        _ json: Bool, _ status: Int, _ title: String, _ message: String, extra: [(name: String, value: String)] = []
    )
        -> CloudKitHTTPResponse
    {
        guard json else {
            return answer(
                status,
                html: page(
                    title, "<p class=\"error\">\(escape(message))</p><p><a href=\"/\">Back to the store</a></p>"),
                extra: extra)
        }
        var out = JSONWriter()
        out.raw("{\"status\":")
        out.int(Int64(status))
        out.raw(",\"error\":")
        out.string(message)
        out.raw("}")
        var response = answer(status, json: out.text)
        response.headers.insert(contentsOf: extra, at: 0)
        return response
    }

    func notFound(_ json: Bool, _ why: String) -> CloudKitHTTPResponse {
        problem(json, 404, "Not found", why)
    }

    private func answer(_ status: Int, html: String, extra: [(name: String, value: String)] = [])
        -> CloudKitHTTPResponse
    {
        CloudKitHTTPResponse(
            status: status,
            headers: extra + [("Content-Type", "text/html; charset=utf-8")],
            body: Data(html.utf8))
    }

    private func answer(_ status: Int, json: String) -> CloudKitHTTPResponse {
        CloudKitHTTPResponse(
            status: status, headers: [("Content-Type", "application/json; charset=utf-8")],
            body: Data(json.utf8))
    }

    private func page(_ title: String, _ body: String, json: String? = nil) -> String {
        var html =
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>\(escape(title)) · ckport</title>"
        html +=
            "<link rel=\"stylesheet\" href=\"/style.css\"></head><body><header><a href=\"/\">ckport</a> · read-only</header><main><h1>\(escape(title))</h1>"
        html += body
        if let json { html += "<p class=\"json\"><a href=\"\(attribute(json))\">this page as JSON</a></p>" }
        return html + "</main></body></html>\n"
    }

    /// Text as HTML shows it in a text node or an attribute's value: `&`, `<`, `>`, `"` and `'`
    /// escaped, everything else as it is.
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private func escape(_ text: String) -> String { BrowseSite.escape(text) }
    private func attribute(_ text: String) -> String { BrowseSite.escape(text) }

    /// A path component or query value, percent-encoded.
    private func component(_ text: String) -> String {
        var allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        allowed.insert(charactersIn: "-_~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    static let style = """
        body { font: 14px/1.4 -apple-system, "Segoe UI", sans-serif; margin: 0; color: #222; }
        header { background: #1c3d5a; color: white; padding: 6px 16px; }
        header a { color: white; font-weight: bold; text-decoration: none; }
        main { padding: 8px 16px; }
        table { border-collapse: collapse; margin: 8px 0; }
        th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
        td { max-width: 32em; overflow-wrap: anywhere; }
        th { background: #f3f5f7; white-space: nowrap; }
        td.n, th.n { text-align: right; }
        pre { background: #f7f7f7; padding: 8px; overflow: auto; }
        dl { display: grid; grid-template-columns: max-content auto; gap: 2px 12px; }
        dt { font-weight: bold; }
        .error { color: #b00020; white-space: pre-wrap; }
        .json { font-size: 12px; }
        pre.diff .add { color: #1b5e20; background: #e8f5e9; display: block; }
        pre.diff .remove { color: #b71c1c; background: #ffebee; display: block; }
        table.month { table-layout: fixed; width: 100%; }
        table.month td { height: 6.5em; width: 14%; max-width: none; }
        table.month td.other { background: #fafafa; color: #aaa; }
        table.month .date { font-weight: bold; font-size: 12px; }
        table.month ul, ul.agenda { list-style: none; margin: 2px 0; padding: 0; font-size: 12px; }
        .time { color: #555; font-variant-numeric: tabular-nums; }
        .repeat { color: #1c3d5a; }

        """
}
