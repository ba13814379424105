import CKPort
import CloudKitWeb
import Formats
import Foundation
import Migrations
import SQLiteStore
import SampleApps
import TestSupport
import Testing
import WebServing

/// The read-only web view of a store, page by page, as a browser and a script would ask for it.
@Suite("browsing a store")
struct BrowseSiteTests {
    /// The answer to one request, through the view's server on a loopback port: its route
    /// table, its middleware and HTTP.
    func get(_ site: BrowseSite, _ path: String, method: String = "GET", host: String? = nil) async throws -> (
        status: Int, headers: [(name: String, value: String)], text: String
    ) {
        let server = try await BrowseServer.start(BrowseSites([site]))
        do {
            let answer = try await HTTPClientTransport(timeout: 60).send(
                CloudKitHTTPRequest(
                    method: method, url: URL(string: server.baseURL.absoluteString + path)!,
                    headers: host.map { [("Host", $0)] } ?? [], body: Data()))
            await server.stop()
            return (answer.status, answer.headers, String(decoding: answer.body, as: UTF8.self))
        } catch {
            await server.stop()
            throw error
        }
    }

    func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    static let familyZone = "shared:_4f00e3e229b648635c6f63dca8da05ef:family-1-zone"

    @Test(
        "the overview: backend, token and counts per scope, zone and type as stats gives them, each type linked to its records; the schema in cktool's words"
    )
    func overview() async throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyCalendar)
        let site = BrowseSite(store: store, backend: "SQLite")
        let page = try await get(site, "/")
        #expect(page.status == 200)
        let stats = try store.read { try $0.stats() }
        #expect(
            page.text.contains("<dd>\(stats.token.description)</code>")
                || page.text.contains("<code>\(stats.token.description)</code>"))
        #expect(
            page.text.contains(
                "<a href=\"/records/Event?zone=shared%3A_4f00e3e229b648635c6f63dca8da05ef%3Afamily-1-zone\">Event</a>"),
            "\(page.text.prefix(3000))")
        #expect(page.text.contains("RECORD TYPE EventParticipant ("))
        let data = try await json(get(site, "/index.json").text)
        #expect(data["records"] as? Int == stats.totalRecords && stats.totalRecords > 100)
        #expect((data["zones"] as? [[String: Any]])?.count == stats.entries.count)
        // The counts are kept while the change token stays; a deletion through another handle
        // (as another process would make it) moves the token, and the next overview counts again.
        let other = try RecordStore(path: store.path, create: false)
        let gone = try other.write { session in
            let first = try #require(try session.record(named: "event-1-00001", ofType: "Event"))
            return try session.delete([first.id]).count
        }
        // The event, and its participants with it (their references delete themselves).
        #expect(gone > 1)
        let after = try await json(get(site, "/index.json").text)
        #expect(after["records"] as? Int == stats.totalRecords - gone, "\(after["records"] ?? "none")")
        #expect(after["token"] as? String != data["token"] as? String)
    }

    @Test(
        "a type's records in a zone, a page at a time: the pages together hold each record once, in name order, however far they go"
    )
    func paging() async throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyCalendar)
        let site = BrowseSite(store: store, backend: "SQLite", pageSize: 2)
        var expected: [String] = []
        try store.read { session in
            try session.forEach(RecordQuery(recordTypes: ["Event"], scope: .shared, zoneName: "family-1-zone")) {
                expected.append($0.recordName)
            }
        }
        expected.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        var seen: [String] = []
        var path: String? = "/records/Event.json?zone=\(Self.familyZone)"
        var pages = 0
        while let next = path, pages < 100 {
            let data = try await json(get(site, next).text)
            let records = try #require(data["records"] as? [[String: Any]])
            #expect(records.count <= 2)
            seen += records.compactMap { $0["recordName"] as? String }
            path = (data["next"] as? String).map { "/records/Event.json?zone=\(Self.familyZone)&after=\($0)" }
            pages += 1
        }
        #expect(expected.count > 4 && seen == expected, "\(seen.count) of \(expected.count)")
        #expect(pages == (expected.count + 1) / 2)
        // The HTML page links the next one.
        #expect(
            try await get(site, "/records/Event?zone=\(Self.familyZone)").text.contains(
                "rel=\"next\" href=\"/records/Event?zone=shared%3A_4f00e3e229b648635c6f63dca8da05ef%3Afamily-1-zone&amp;after=\(expected[1])\""
            ))
        // ?limit= chooses the page's size, and the next page keeps it.
        let three = try await json(get(site, "/records/Event.json?zone=\(Self.familyZone)&limit=3").text)
        #expect(
            (three["records"] as? [[String: Any]])?.compactMap { $0["recordName"] as? String }
                == Array(expected.prefix(3)) && three["next"] as? String == expected[2])
        #expect(
            try await get(site, "/records/Event?zone=\(Self.familyZone)&limit=3").text.contains(
                "limit=3&amp;after=\(expected[2])\""))
        for bad in ["0", "1001", "many"] {
            #expect(
                try await get(site, "/records/Event.json?zone=\(Self.familyZone)&limit=\(bad)").status == 400, "\(bad)")
        }
    }

    @Test("the predicate box takes what --where takes; a predicate that does not parse is shown in place, with a 400")
    func predicates() async throws {
        let scratch = Scratch()
        let site = BrowseSite(store: try scratch.sampleStore(.familyCalendar), backend: "SQLite")
        // As a browser's form sends it: spaces as '+'.
        let form = try json(
            try await get(site, "/records/Event.json?zone=\(Self.familyZone)&where=category+%3D%3D+%27school%27").text)
        let formRecords = try #require(form["records"] as? [[String: Any]])
        #expect(!formRecords.isEmpty && form["error"] == nil, "\(form)")
        let school = try json(
            try await get(site, "/records/Event.json?zone=\(Self.familyZone)&where=category%20%3D%3D%20'school'").text)
        let records = try #require(school["records"] as? [[String: Any]])
        #expect(
            !records.isEmpty
                && records.allSatisfy {
                    (($0["fields"] as? [String: Any])?["category"] as? [String: Any])?["value"] as? String == "school"
                })
        let bad = try await get(site, "/records/Event?zone=\(Self.familyZone)&where=category%20%3D%3D")
        #expect(
            bad.status == 400 && bad.text.contains("<p class=\"error\">") && bad.text.contains("value=\"category ==\""),
            "\(bad.text.suffix(800))")
    }

    @Test("a record: every field and system field, references as links, and the records that point at it")
    func record() async throws {
        let scratch = Scratch()
        let site = BrowseSite(store: try scratch.sampleStore(.familyCalendar), backend: "SQLite")
        let page = try await get(site, "/record/shared/_4f00e3e229b648635c6f63dca8da05ef/family-1-zone/event-1-00001")
        #expect(page.status == 200)
        #expect(
            page.text.contains(
                "<td>familyID</td><td>REFERENCE</td><td><a href=\"/record/shared/_4f00e3e229b648635c6f63dca8da05ef/family-1-zone/family-1\">family-1</a></td>"
            ))
        #expect(
            page.text.contains(
                "EventParticipant <a href=\"/record/shared/_4f00e3e229b648635c6f63dca8da05ef/family-1-zone/participant-1-00001-1\">"
            ))
        let data = try json(
            try await get(site, "/record/shared/_4f00e3e229b648635c6f63dca8da05ef/family-1-zone/event-1-00001.json")
                .text)
        let pointers = try #require(data["pointedToBy"] as? [[String: Any]])
        // Each participant twice: by its eventID reference and as the event's child (parent).
        let participants = pointers.filter { $0["recordType"] as? String == "EventParticipant" }
        #expect(Set(participants.compactMap { $0["recordName"] as? String }).count == 3 && participants.count == 6)
        #expect(Set(participants.compactMap { $0["field"] as? String }) == ["eventID", "parent"], "\(participants)")
        #expect(
            try await get(site, "/record/shared/_4f00e3e229b648635c6f63dca8da05ef/family-1-zone/no-such-record").status
                == 404)
    }

    @Test(
        "a record in a page's JSON is the export's canonical record byte for byte: its keys in the export's order, a DOUBLE of 3.0 still 3.0"
    )
    func recordJSONIsTheExports() async throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore("screen-time-rewards")
        let zone = ZoneID(scope: .private, zoneName: "_defaultZone", ownerRecordName: ZoneID.defaultOwnerName)
        var window = Record(id: RecordID(recordName: "window-3", zone: zone), recordType: "RedemptionWindow")
        window["durationSeconds"] = .double(3.0)
        let saved = try store.write { session in
            _ = try session.save(window, mode: .insert)
            return try #require(try session.record(window.id))
        }
        var out = JSONWriter()
        JSONRecordCodec(schema: try store.read { $0.schema }).encode(saved, style: .canonical, to: &out)
        #expect(out.text.contains("3.0"), "\(out.text)")
        let site = BrowseSite(store: store, backend: "SQLite")
        let page = try await get(site, "/record/private/__defaultOwner__/_defaultZone/window-3.json")
        #expect(page.status == 200 && page.text.contains(out.text), "\(page.text)")
        let table = try await get(site, "/records/RedemptionWindow.json?zone=private:__defaultOwner__:_defaultZone")
        #expect(table.text.contains(out.text), "\(table.text.prefix(400))")
        #expect(try json(table.text)["records"] as? [[String: Any]] != nil)
    }

    @Test(
        "what points at a record: its references, lists of references that hold it and records whose parent it is; a page of them, saying when there are more"
    )
    func pointers() async throws {
        let scratch = Scratch()
        let calendar = try scratch.sampleStore(.familyCalendar)
        let family = "/record/shared/_4f00e3e229b648635c6f63dca8da05ef/family-1-zone/family-1.json"
        let all = try await json(get(BrowseSite(store: calendar, backend: "SQLite", pageSize: 1000), family).text)
        let every = try #require(all["pointedToBy"] as? [[String: Any]])
        #expect(
            every.contains { $0["recordName"] as? String == "member-1-1" && $0["field"] as? String == "parent" },
            "\(every)")
        #expect(every.contains { $0["recordType"] as? String == "Event" && $0["field"] as? String == "familyID" })
        #expect(all["morePointers"] == nil)
        let few = try await json(get(BrowseSite(store: calendar, backend: "SQLite", pageSize: 5), family).text)
        let first = try #require(few["pointedToBy"] as? [[String: Any]])
        #expect(every.count > 5 && first.count == 5 && few["morePointers"] as? Bool == true)
        #expect(first.map { $0["recordName"] as? String } == every.prefix(5).map { $0["recordName"] as? String })
        let page = try await get(
            BrowseSite(store: calendar, backend: "SQLite", pageSize: 5), String(family.dropLast(".json".count)))
        #expect(page.text.contains("More records point at this one; the first 5 are shown."))
        // A note named in another note's LIST<REFERENCE>.
        let notes = try scratch.sampleStore(.notes)
        let note = try json(
            try await get(
                BrowseSite(store: notes, backend: "SQLite"), "/record/private/__defaultOwner__/Notes/note-000002.json"
            )
            .text)
        let pointers = try #require(note["pointedToBy"] as? [[String: Any]])
        #expect(
            pointers.contains { $0["recordName"] as? String == "note-000004" && $0["field"] as? String == "related" },
            "\(pointers)")
    }

    @Test(
        "the shares: each share with what it carries, its public permission and URL, and every participant with role, permission and acceptance"
    )
    func shares() async throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyCalendar)
        let site = BrowseSite(store: store, backend: "SQLite")
        let listed = try store.read { try Shares.list($0, scope: nil, zoneName: nil) }
        let people = listed.flatMap(\.participants)
        #expect(listed.count == 2 && people.count > 4)
        let page = try await get(site, "/shares")
        #expect(page.status == 200)
        for person in people {
            #expect(
                page.text.contains(
                    "<tr><td>\(BrowseSite.escape(person.displayName))</td><td>\(BrowseSite.escape(person.emailAddress ?? ""))</td><td>\(person.type ?? "")</td><td>\(person.permission ?? "")</td><td>\(person.acceptanceStatus ?? "")</td></tr>"
                ), "\(person.displayName)")
        }
        #expect(page.text.contains("<dt>shares</dt><dd>the whole zone: \(listed[0].recordCount) records</dd>"))
        let data = try #require(
            try JSONSerialization.jsonObject(with: Data(try await get(site, "/shares.json").text.utf8))
                as? [[String: Any]])
        #expect(
            data.count == 2 && data.flatMap { ($0["participants"] as? [[String: Any]]) ?? [] }.count == people.count)
        #expect(try await get(site, "/").text.contains("<a href=\"/shares\">Shares</a>"))
    }

    @Test(
        "a migration set's rehearsal: per migration and type what would change, and each record's diff, as migrate plan computes it, with nothing written"
    )
    func rehearsal() async throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.notes)
        let set = try MigrationSet.load(directory: packageRoot.appendingPathComponent("migrations/notes").path)
        let site = BrowseSite(store: store, backend: "SQLite", migrations: set)
        // The file and its write-ahead log: a write would land in the log first.
        let before = fileBytes(store.path)
        let page = try await get(site, "/migrations")
        #expect(page.status == 200)
        let reports = try SchemaMigrations.plan(set, in: store, options: MigrationRunOptions(diffLimit: 50))
        #expect(reports.count >= 2 && reports.contains { $0.totals.changed > 0 })
        for report in reports {
            #expect(
                page.text.contains("<h2>\(report.version): \(BrowseSite.escape(report.description))</h2>"),
                "\(report.version)")
            for (type, counts) in report.counts {
                #expect(
                    page.text.contains(
                        "<tr><td>\(type)</td><td class=\"n\">\(counts.scanned)</td><td class=\"n\">\(counts.changed)</td>"
                    ), "\(report.version) \(type)")
            }
            for diff in report.diffs {
                for line in diff.lines {
                    #expect(page.text.contains(BrowseSite.escape(line)), "\(diff.recordName): \(line)")
                }
            }
        }
        #expect(page.text.contains("<span class=\"add\">+ content: "))
        // Each diff links to its record, in its own zone.
        let first = try #require(reports.flatMap(\.diffs).first)
        #expect(first.scope == "private" && first.ownerRecordName == "__defaultOwner__")
        #expect(
            page.text.contains("href=\"/record/private/__defaultOwner__/\(first.zoneName)/\(first.recordName)\""),
            "\(first.recordName)")
        let data = try #require(
            try JSONSerialization.jsonObject(with: Data(try await get(site, "/migrations.json").text.utf8))
                as? [String: Any])
        #expect((data["migrations"] as? [[String: Any]])?.count == reports.count)
        #expect(fileBytes(store.path) == before)
        #expect(try await get(BrowseSite(store: store, backend: "SQLite"), "/migrations").status == 404)
    }

    @Test(
        "sorted by a field, either way, a page at a time: every record once, in (value, name) order with records without a value first going up and last going down, ties and a where box included; the fields shown are chosen; a field that does not sort is refused"
    )
    func sorting() async throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyCalendar)
        let zone = ZoneID(
            scope: .shared, zoneName: "family-1-zone", ownerRecordName: "_4f00e3e229b648635c6f63dca8da05ef")
        // Records without a start, and several that start at the same moment as another.
        try store.write { session in
            for n in 0..<5 {
                var record = Record(id: RecordID(recordName: "no-start-\(n)", zone: zone), recordType: "Event")
                record["title"] = .string("undated \(n)")
                _ = try session.save(record, mode: .insert)
                var tie = Record(id: RecordID(recordName: "tie-\(n)", zone: zone), recordType: "Event")
                tie["title"] = .string("tie \(n)")
                tie["startDate"] = .timestamp(1_772_530_000_000)
                _ = try session.save(tie, mode: .insert)
            }
        }
        var all: [Record] = []
        try store.read { session in
            try session.forEach(RecordQuery(recordTypes: ["Event"], scope: .shared, zoneName: "family-1-zone")) {
                all.append($0)
            }
        }
        func start(_ record: Record) -> Int64? {
            if case .timestamp(let t)? = record.fields["startDate"] { return t }
            return nil
        }
        func order(_ a: Record, _ b: Record) -> Bool {
            switch (start(a), start(b)) {
            case (nil, nil): return RecordFields.precedes(a.recordName, b.recordName)
            case (nil, _): return true
            case (_, nil): return false
            case (let x?, let y?): return x != y ? x < y : RecordFields.precedes(a.recordName, b.recordName)
            }
        }
        let up = all.sorted(by: order).map(\.recordName)
        let site = BrowseSite(store: store, backend: "SQLite", pageSize: 3)
        for (descending, expected) in [(false, up), (true, Array(up.reversed()))] {
            var seen: [String] = []
            var path: String? =
                "/records/Event.json?zone=\(Self.familyZone)&sort=startDate" + (descending ? "&desc=1" : "")
            var pages = 0
            while let next = path, pages < 100 {
                let data = try await json(get(site, next).text)
                seen += (data["records"] as? [[String: Any]] ?? []).compactMap { $0["recordName"] as? String }
                path = data["nextPage"] as? String
                pages += 1
            }
            #expect(expected.count > 15 && seen == expected, "descending \(descending): \(seen) against \(expected)")
        }
        // With a where box, and by a text field.
        let school = try json(
            try await get(
                site,
                "/records/Event.json?zone=\(Self.familyZone)&sort=title&desc=1&where=isDeleted%20%3D%3D%20false&limit=100"
            ).text)
        let titles = (school["records"] as? [[String: Any]] ?? []).compactMap {
            (($0["fields"] as? [String: Any])?["title"] as? [String: Any])?["value"] as? String
        }
        #expect(
            titles.count >= 5 && titles == titles.sorted { RecordFields.precedes($1, $0) }
                && !titles.contains { $0.hasPrefix("tie ") }, "\(titles)")
        // The chosen fields, in the order given; a heading sorts by its field.
        let page = try await get(site, "/records/Event?zone=\(Self.familyZone)&fields=title,startDate&sort=startDate")
        #expect(
            page.text.contains(
                "<th><a href=\"/records/Event?zone=shared%3A_4f00e3e229b648635c6f63dca8da05ef%3Afamily-1-zone&amp;fields=title%2CstartDate&amp;sort=title\">title</a></th><th><a href=\"/records/Event?zone=shared%3A_4f00e3e229b648635c6f63dca8da05ef%3Afamily-1-zone&amp;fields=title%2CstartDate&amp;sort=startDate&amp;desc=1\">startDate</a> ↑</th></tr>"
            ), "\(page.text.prefix(3000))")
        #expect(!page.text.contains("<th>location</th>"))
        for (path, message) in [
            ("&sort=location%3F", "cannot be sorted by 'location?'"),
            ("&fields=title,nope", "has no field 'nope' to show"),
        ] {
            let refused = try await get(site, "/records/Event?zone=\(Self.familyZone)" + path)
            #expect(
                refused.status == 400 && refused.text.contains(BrowseSite.escape(message)),
                "\(path): \(refused.text.suffix(600))")
        }
    }

    @Test(
        "zones of different owners that share a name: each one's table pages through its own records only, none skipped"
    )
    func sameZoneNameOtherOwners() async throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyCalendar)
        // A zone named as family-1's, of another owner, whose records sort first.
        try store.write { session in
            for n in 0..<60 {
                var record = Record(
                    id: RecordID(
                        recordName: String(format: "a-%03d", n),
                        zone: ZoneID(scope: .shared, zoneName: "family-1-zone", ownerRecordName: "_another")),
                    recordType: "Event")
                record["title"] = .string("not family-1's")
                _ = try session.save(record, mode: .insert)
            }
        }
        let site = BrowseSite(store: store, backend: "SQLite", pageSize: 4)
        var seen: [String] = []
        var after: String?
        for _ in 0..<20 {
            let data = try json(
                try await get(
                    site, "/records/Event.json?zone=\(Self.familyZone)" + (after.map { "&after=\($0)" } ?? "")
                ).text)
            seen += (data["records"] as? [[String: Any]] ?? []).compactMap { $0["recordName"] as? String }
            after = data["next"] as? String
            if after == nil { break }
        }
        #expect(seen.count == 9 && seen.allSatisfy { $0.hasPrefix("event-1-") }, "\(seen)")
        // The downloads of the table hold the zone's records, not the other owner's.
        let lines = try await get(site, "/records/Event.jsonl?zone=\(Self.familyZone)").text.split(separator: "\n")
        #expect(
            lines.count == 9
                && lines.allSatisfy { $0.contains("\"recordName\":\"event-1-") && !$0.contains("_another") }, "\(lines)"
        )
        let sheet = try await get(site, "/records/Event.csv?zone=\(Self.familyZone)").text
        #expect(
            sheet.components(separatedBy: "\r\nevent-1-").count == 10 && !sheet.contains("not family-1's"), "\(sheet)")
    }

    @Test("a page's JSON form answers its errors in JSON, with the status and why; the page itself in HTML")
    func jsonErrors() async throws {
        let scratch = Scratch()
        let site = BrowseSite(store: try scratch.sampleStore(.familyCalendar), backend: "SQLite")
        for (path, method, status, why) in [
            ("/records/Nope.json?zone=\(Self.familyZone)", "GET", 404, "no record type Nope"),
            ("/records/Event.json", "GET", 404, "give the zone"),
            ("/nowhere.json", "GET", 404, "no page at /nowhere"),
            ("/index.json", "POST", 405, "POST is not answered"),
            (
                "/records/Event.json?zone=\(Self.familyZone)&where=title%20%3D%3D", "GET", 400,
                "column 9: expected a value"
            ),
            (
                "/records/Event.jsonl.json?zone=\(Self.familyZone)&where=nope%20%3D%3D%201", "GET", 400,
                "has no field 'nope'"
            ),
        ] {
            let answer = try await get(site, path, method: method)
            #expect(answer.status == status, "\(path)")
            #expect(
                answer.headers.contains { $0.name == "Content-Type" && $0.value.hasPrefix("application/json") },
                "\(path)")
            let data = try json(answer.text)
            #expect((data["error"] as? String)?.contains(why) == true, "\(path): \(answer.text)")
            #expect(data["status"] as? Int == status, "\(path)")
        }
        #expect(try await get(site, "/index.json", method: "POST").headers.contains { $0.name == "Allow" })
        let csv = try await get(site, "/records/Event.csv?zone=\(Self.familyZone)&where=nope%20%3D%3D%201")
        #expect(
            csv.status == 400 && csv.text.contains("has no field &#39;nope&#39;"),
            "\(csv.status) \(csv.text.suffix(400))")
        let page = try await get(site, "/records/Nope?zone=\(Self.familyZone)")
        #expect(page.status == 404 && page.text.contains("<p class=\"error\">no record type Nope</p>"))
    }

    @Test(
        "the calendar: a month from Monday with each occurrence on its day at the viewer's time, its JSON, the agenda; bad months, days and zones are refused; no mapping, no calendar"
    )
    func calendar() async throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyTodo)
        let mapping = try CalendarMapping.parse(
            SampleApp.familyTodo.calendarMappingText!, file: "mapping", schema: store.schema)
        let site = BrowseSite(
            store: store, backend: "SQLite", calendar: mapping, timeZone: TimeZone(identifier: "Europe/Berlin")!)
        let berlin = try await json(get(site, "/calendar.json?month=2026-03").text)
        let tokyo = try await json(get(site, "/calendar.json?month=2026-03&tz=Asia/Tokyo").text)
        let found = try #require(berlin["occurrences"] as? [[String: Any]])
        #expect(
            berlin["timeZone"] as? String == "Europe/Berlin" && tokyo["timeZone"] as? String == "Asia/Tokyo"
                && berlin["more"] as? Bool == false)
        #expect(
            found.count > 10 && found.contains { $0["recurring"] as? Bool == true }
                && found.contains { $0["component"] as? String == "VTODO" })
        // The same records whichever zone shows them, but for the month's edges (wall-clock
        // times and recurring chores keep their clock, so their instants move with the zone).
        let inside = { (list: [[String: Any]]) in
            Set(
                list.filter {
                    ($0["start"] as? String ?? "") >= "2026-03-02" && ($0["start"] as? String ?? "") < "2026-03-30"
                }.compactMap { $0["recordName"] as? String })
        }
        #expect(inside(found) == inside(try #require(tokyo["occurrences"] as? [[String: Any]])))
        let page = try await get(site, "/calendar?month=2026-03")
        #expect(page.status == 200 && page.text.contains("<th>Mon</th><th>Tue</th>"))
        // March 2026 starts on a Sunday: the grid starts on Monday 23 February.
        #expect(page.text.contains("<tr><td class=\"day other\"><div class=\"date\">23</div></td>"))
        let first = try #require(found.first)
        let name = try #require(first["recordName"] as? String)
        let title = try #require(first["title"] as? String)
        #expect(page.text.contains(">\(BrowseSite.escape(title))</a>") && page.text.contains("/\(name)\""))
        let agenda = try await json(get(site, "/calendar/agenda.json?from=2026-03-01&days=31").text)
        #expect((agenda["occurrences"] as? [[String: Any]])?.count == found.count)
        for (path, status) in [
            ("/calendar?month=2026-13", 400), ("/calendar?month=March", 400), ("/calendar?tz=Mars/Olympus", 400),
            ("/calendar/agenda?from=2026-02-30&days=3", 400), ("/calendar/agenda?days=0", 400),
            ("/calendar/agenda?days=400", 400),
            ("/calendar/elsewhere", 404),
        ] {
            #expect(try await get(site, path).status == status, "\(path)")
        }
        #expect(try await get(BrowseSite(store: store, backend: "SQLite"), "/calendar").status == 404)
        // Years before 1000 keep four digits, and their links work.
        let early = try await get(site, "/calendar?month=0999-12")
        #expect(
            early.status == 200 && early.text.contains("<h1>Calendar 0999-12</h1>")
                && early.text.contains("month=1000-01"), "\(early.text.prefix(800))")
        #expect(try await get(site, "/calendar/agenda?from=0999-12-01&days=3").status == 200)
    }

    @Test(
        "only requests that name this server are answered: another site's name that resolves here (DNS rebinding) is not"
    )
    func hostNames() async throws {
        #expect(HostCheck.allows("127.0.0.1:8642", port: 8642, bound: "127.0.0.1"))
        #expect(HostCheck.allows("LOCALHOST:8642", port: 8642, bound: "127.0.0.1"))
        #expect(HostCheck.allows("192.168.1.5:8642", port: 8642, bound: "192.168.1.5"))
        #expect(!HostCheck.allows("evil.example:8642", port: 8642, bound: "127.0.0.1"))
        #expect(!HostCheck.allows("127.0.0.1:9999", port: 8642, bound: "127.0.0.1"))
        // Bound to every interface: any address of the machine by number, still no name.
        #expect(HostCheck.allows("192.168.1.5:8642", port: 8642, bound: "0.0.0.0"))
        #expect(HostCheck.allows("localhost:8642", port: 8642, bound: "0.0.0.0"))
        #expect(!HostCheck.allows("evil.example:8642", port: 8642, bound: "0.0.0.0"))
        #expect(!HostCheck.allows("192.168.1.5:9999", port: 8642, bound: "0.0.0.0"))
        #expect(!HostCheck.allows("1.2.3.4.5:8642", port: 8642, bound: "0.0.0.0"))
        #expect(!HostCheck.allows("192.168.1.500:8642", port: 8642, bound: "0.0.0.0"))
        #expect(!HostCheck.allows(nil, port: 8642, bound: "127.0.0.1"))
        // Digits of another script are no address (and no crash).
        #expect(!HostCheck.allows("\u{661}.0.0.1:8642", port: 8642, bound: "0.0.0.0"))
        #expect(!HostCheck.allows("\u{BD}.0.0.1:8642", port: 8642, bound: "0.0.0.0"))
        // The view's server refuses a Host that names another site, and answers its own.
        let scratch = Scratch()
        let site = BrowseSite(store: try scratch.sampleStore(.familyTodo), backend: "SQLite")
        #expect(try await get(site, "/", host: "evil.example").status == 421)
        #expect(try await get(site, "/index.json").status == 200)
    }

    @Test(
        "hostile data stays data: markup in a value shows as text, no page runs a script, nothing is written, and no path leads outside the store"
    )
    func hostile() async throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyCalendar)
        let hostile = "<script>alert('x')</script><img src=x onerror=alert(1)>\"'&"
        try store.write { session in
            var record = Record(
                id: RecordID(
                    recordName: "event-hostile",
                    zone: ZoneID(
                        scope: .shared, zoneName: "family-1-zone", ownerRecordName: "_4f00e3e229b648635c6f63dca8da05ef")
                ), recordType: "Event")
            record["title"] = .string(hostile)
            record["category"] = .string("</td></tr></table><script>")
            _ = try session.save(record, mode: .insert)
        }
        let site = BrowseSite(store: store, backend: "SQLite")
        // The file and its write-ahead log: a write would land in the log first.
        let before = fileBytes(store.path)
        for path in [
            "/records/Event?zone=\(Self.familyZone)&after=event-5",
            "/record/shared/_4f00e3e229b648635c6f63dca8da05ef/family-1-zone/event-hostile",
            "/records/Event?zone=\(Self.familyZone)&where=title%20%3D%3D%20'%3Cscript%3E'",
        ] {
            let page = try await get(site, path)
            #expect(!page.text.lowercased().contains("<script") && !page.text.contains("<img"), "\(path)")
            #expect(
                page.headers.contains {
                    $0.name == "Content-Security-Policy" && $0.value.hasPrefix("default-src 'none';")
                        && !$0.value.contains("script-src")
                })
        }
        #expect(
            try await get(site, "/record/shared/_4f00e3e229b648635c6f63dca8da05ef/family-1-zone/event-hostile").text
                .contains(
                    "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;")
        )
        let posted = try await get(site, "/", method: "POST")
        #expect(posted.status == 405 && posted.headers.contains { $0.name == "Allow" && $0.value == "GET, HEAD" })
        #expect(try await get(site, "/index.json", method: "DELETE").status == 405)
        for path in [
            "/../../etc/passwd", "/records/..%2F..%2Fetc%2Fpasswd", "/style.css/../../etc/passwd", "/records/Event",
            "/records", "/records/Event/more", "/record/shared/owner/zone", "/calendar/nothing",
        ] {
            let page = try await get(site, path)
            #expect(page.status == 404 && !page.text.contains("root:"), "\(path): \(page.status)")
            #expect(page.text.contains("<title>Not found · ckport</title>"), "\(path): the router's blank 404")
        }
        #expect(fileBytes(store.path) == before)
    }
}
