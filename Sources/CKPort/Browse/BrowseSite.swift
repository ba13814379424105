import CloudKitWeb
import Formats
import Foundation
import Migrations
import Records
import StoreCore
import Synchronization

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
    public struct Bundle: Sendable, Encodable {
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

    /// The overview's counts, kept while the store's change token stays where it was: counting
    /// a large store is the overview's slow part, and a token that has not moved means no
    /// record was saved or deleted since, by this process or another.
    private let counted = Mutex<StoreStats?>(nil)

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
    //
    // Each reads the store in one session (one committed state) and returns the page's model,
    // or a ``ProblemPage`` saying what the address asks for that cannot be.

    func overview() throws -> any BrowsePage {
        let (stats, schema) = try store.readSession { session in
            let token = session.currentToken
            if let kept = counted.withLock({ $0 }), kept.token == token { return (kept, session.schema) }
            let stats = try session.stats()
            counted.withLock { $0 = stats }
            return (stats, session.schema)
        }
        return OverviewPage(
            backend: backend, store: shownPath(stats), bytes: shownSize(stats), token: shownToken(stats),
            records: stats.totalRecords, zones: stats.entries, schema: SchemaPrinter.print(schema),
            deleted: stats.totalTombstones, bundles: bundles.map(\.path), hasCalendar: calendar != nil,
            migrationSet: migrations?.name)
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

    func records(type: String, query: [String: String]) throws -> any BrowsePage {
        guard let zoneText = query["zone"], let zone = zoneID(zoneText) else {
            return ProblemPage.notFound("give the zone: ?zone=SCOPE:OWNER:ZONE")
        }
        let after = query["after"] ?? ""
        let whereText = (query["where"] ?? "").trimmingCharacters(in: .whitespaces)
        // Records a page: ?limit=N (1 to 1,000), else the site's.
        var pageSize = self.pageSize
        if let text = query["limit"], !text.isEmpty {
            guard let n = Int(text), (1...1000).contains(n) else {
                return ProblemPage(400, "Not a page size", "limit takes 1 to 1000 records a page, not \(text)")
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
        guard let definition else { return ProblemPage.notFound("no record type \(type)") }
        let more = found.count > pageSize
        if more { found.removeLast() }
        // The last record shown, and its sort value, when there are more.
        let next = (more ? found.last : nil).map { last in
            (
                recordName: last.recordName,
                value: sort == "recordName" ? nil : sortValue(last, sort, definition: definition).map(valueText)
            )
        }
        return RecordTablePage(
            type: type, zone: zone,
            settings: RecordTablePage.Settings(
                zone: zoneText, whereText: whereText, fields: fieldsText, limit: query["limit"] ?? "", sort: sort,
                descending: descending, after: after),
            query: query, fields: fields.map(\.name), sortable: sortable, records: found, codec: codec,
            problem: problems.isEmpty ? nil : problems.joined(separator: "\n"), next: next,
            calendarMapped: calendar?.components.contains { $0.recordType == type } == true)
    }

    func record(id: RecordID) throws -> any BrowsePage {
        let found: RecordPage? = try store.readSession { session in
            guard let record = try session.record(id) else { return nil }
            // What points at it, in its zone: each REFERENCE field, each LIST<REFERENCE> that
            // holds it, and each record whose parent it is — the first page of them.
            var pointers: [RecordPage.Pointer] = []
            var more = false
            do {
                for candidate in session.schema.recordTypes.sorted(by: { RecordFields.precedes($0.name, $1.name) }) {
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
                            pointers.append(RecordPage.Pointer(record: pointer, field: link.name))
                        }
                    }
                }
            } catch is PageFull {}
            return RecordPage(
                record: record, codec: JSONRecordCodec(schema: session.schema), pointers: pointers, morePointers: more,
                shown: pageSize)
        }
        return found ?? ProblemPage.notFound("no record \(id.recordName) in that zone")
    }

    func shares() throws -> any BrowsePage {
        SharesPage(shares: try store.readSession { try Shares.list($0, scope: nil, zoneName: nil) })
    }

    func bundlePage() -> any BrowsePage {
        bundles.isEmpty
            ? ProblemPage.notFound("this view shows a store, not a backup bundle") : BundlePage(bundles: bundles)
    }

    func rehearsal() throws -> any BrowsePage {
        guard let migrations else {
            return ProblemPage.notFound("this view was started without a migration set to rehearse")
        }
        let reports = try SchemaMigrations.plan(
            migrations, in: store, options: MigrationRunOptions(diffLimit: pageSize))
        return RehearsalPage(set: migrations.name, migrations: reports.map(RehearsalPage.Migration.init))
    }

    // MARK: Calendar

    /// Occurrences in a month or an agenda at most: a page says when there are more.
    static let calendarLimit = 2_000

    /// The page for a view without a calendar.
    private static let noCalendar = ProblemPage.notFound(
        "this view has no calendar: the store's types are not a sample app's, and no mapping was given")

    /// The zone a calendar page is shown in: `?tz=`, else the site's.
    private func viewerZone(_ query: [String: String]) -> TimeZone? {
        guard let name = query["tz"], !name.isEmpty else { return timeZone }
        return TimeZone(identifier: name)
    }

    /// The 400 for a `?tz=` that names no zone.
    private func notAZone(_ query: [String: String]) -> ProblemPage {
        ProblemPage(
            400, "Not a time zone", "\(query["tz"] ?? "") is not a time zone (an IANA name such as Europe/Berlin)")
    }

    /// The occurrences of `from..<to` in `zone`.
    private func occurrences(from: Int64, to: Int64, zone: TimeZone) throws -> (
        occurrences: [CalendarOccurrence], more: Bool
    ) {
        guard let calendar else { return ([], false) }
        return try store.readSession { session in
            try CalendarOccurrences.find(
                in: session, mapping: calendar, from: from, to: to, zone: zone, limit: BrowseSite.calendarLimit)
        }
    }

    func month(query: [String: String]) throws -> any BrowsePage {
        guard calendar != nil else { return BrowseSite.noCalendar }
        guard let zone = viewerZone(query) else { return notAZone(query) }
        let today = ZoneResolver.wall(milliseconds: Int64(Date().timeIntervalSince1970 * 1000), in: zone)
        var year = today.year
        var monthNumber = today.month
        if let text = query["month"], !text.isEmpty {
            let parts = text.split(separator: "-")
            guard parts.count == 2, let y = Int64(parts[0]), let m = Int64(parts[1]), (1...9999).contains(y),
                (1...12).contains(m), parts[1].count == 2
            else {
                return ProblemPage(400, "Not a month", "\(text) is not a month (YYYY-MM, such as 2026-03)")
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
        let found = try occurrences(
            from: ZoneResolver.midnight(first, in: zone), to: ZoneResolver.midnight(next, in: zone), zone: zone)
        return MonthPage(
            first: first, previous: previous, next: next, zone: zone, zoneQuery: query["tz"].map { [("tz", $0)] } ?? [],
            occurrences: found.occurrences, more: found.more)
    }

    func agenda(query: [String: String]) throws -> any BrowsePage {
        guard calendar != nil else { return BrowseSite.noCalendar }
        guard let zone = viewerZone(query) else { return notAZone(query) }
        var first = ZoneResolver.wall(milliseconds: Int64(Date().timeIntervalSince1970 * 1000), in: zone)
        first = LocalDateTime(year: first.year, month: first.month, day: first.day)
        if let text = query["from"], !text.isEmpty {
            guard text.count == 10, let ms = ISO8601.parse(text, timeZone: TimeZone(identifier: "UTC")) else {
                return ProblemPage(400, "Not a day", "\(text) is not a day (YYYY-MM-DD, such as 2026-03-01)")
            }
            first = LocalDateTime(wallSeconds: ISO8601.floorDiv(ms, 1000))
        }
        var count: Int64 = 14
        if let text = query["days"], !text.isEmpty {
            guard let n = Int64(text), (1...366).contains(n) else {
                return ProblemPage(400, "Not a number of days", "days takes 1 to 366, not \(text)")
            }
            count = n
        }
        let end = LocalDateTime(wallSeconds: (first.dayNumber + count) * 86_400)
        let found = try occurrences(
            from: ZoneResolver.midnight(first, in: zone), to: ZoneResolver.midnight(end, in: zone), zone: zone)
        return AgendaPage(
            first: first, days: count, zone: zone, zoneQuery: query["tz"].map { [("tz", $0)] } ?? [],
            occurrences: found.occurrences, more: found.more)
    }

    // MARK: Downloads

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
            guard let zone = viewerZone(query) else { return notAZone(query).rendered(json: json) }
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

    // MARK: Pieces

    /// A page's worth of records was read.
    private struct PageFull: Error {}

    private func zoneID(_ key: String) -> ZoneID? {
        let parts = key.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let scope = DatabaseScope(rawValue: parts[0]) else { return nil }
        return ZoneID(scope: scope, zoneName: parts[2], ownerRecordName: parts[1])
    }

    /// An error's answer, as a page or as JSON (`{"status":404,"error":"…"}`) for a `.json` path.
    func problem(
        _ json: Bool, _ status: Int, _ title: String, _ message: String, extra: [(name: String, value: String)] = []
    ) -> CloudKitHTTPResponse {
        ProblemPage(status, title, message).rendered(json: json, extra: extra)
    }

    func notFound(_ json: Bool, _ why: String) -> CloudKitHTTPResponse {
        problem(json, 404, "Not found", why)
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
