import CloudKitWeb
import Foundation
import Records
import SampleApps
import StoreCore
import Synchronization
import TestSupport
import Testing

@testable import CKPort

/// Publishing and pulling against Xandikos through a transport that answers some requests
/// itself (a 503, a 507, a REPORT the server "does not have", a multistatus cut short), every
/// other request going to the real server.
@Suite("CalDAV under faults", .enabled(if: CalDAVTestServers.enabled))
struct CalDAVFaultTests {
    /// The real server's transport, but for the requests `fault` answers.
    final class FaultyTransport: CloudKitTransport, Sendable {
        let real = HTTPClientTransport(timeout: 60)
        let fault: @Sendable (CloudKitHTTPRequest, Int) -> CloudKitHTTPResponse?
        let count = Mutex(0)

        init(_ fault: @escaping @Sendable (CloudKitHTTPRequest, Int) -> CloudKitHTTPResponse?) { self.fault = fault }

        func send(_ request: CloudKitHTTPRequest) async throws -> CloudKitHTTPResponse {
            let number = count.withLock {
                $0 += 1
                return $0
            }
            if let answer = fault(request, number) { return answer }
            return try await real.send(request)
        }
    }

    static let quick = RetryPolicy(maxAttempts: 3, baseDelay: 0.01, maxDelay: 0.05)

    func definition() throws -> Feeds.Definition {
        Feeds.Definition(
            predicate: "familyID == 'family-1'", mapping: try #require(SampleApp.familyCalendar.calendarMappingText),
            mappingSource: "family-calendar mapping")
    }

    @Test(
        "a DELETE answered 412 for an event gone from the server too is a deletion both sides agree on, not a conflict")
    func deletedOnBothSides() async throws {
        let store = try Scratch().sampleStore(.familyCalendar)
        let calendar = try CalDAVTestServers.Server.xandikos.newCalendar("bothgone")
        _ = try await CalendarPublishing.publish(
            from: store, request: .init(url: calendar, definition: try definition()),
            client: CalDAVClient(credentials: nil))
        _ = try Deletes.records(named: ["event-1-00004"], in: store)
        // RFC 9110 lets If-Match on nothing answer 412: the event is gone from the server too.
        let gone = FaultyTransport { request, _ in
            guard request.url.path.hasSuffix("/event-1-00004.ics") else { return nil }
            return request.method == "DELETE"
                ? CloudKitHTTPResponse(status: 412, body: Data())
                : request.method == "GET" ? CloudKitHTTPResponse(status: 404, body: Data()) : nil
        }
        let result = try await CalendarPublishing.publish(
            from: store, request: .init(url: calendar, definition: nil),
            client: CalDAVClient(transport: gone, credentials: nil, retry: Self.quick))
        #expect(result.deleted == 1 && result.conflicts.isEmpty, "\(result)")
    }

    @Test(
        "503s and 423s (Xandikos's answer while its own git index is locked) are retried with backoff and the publish completes; a 507 that stays is a clear error naming the request, with what was published noted"
    )
    func retries() async throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyCalendar)
        let calendar = try CalDAVTestServers.Server.xandikos.newCalendar("faults")
        let busy = Mutex(0)
        let flaky = FaultyTransport { request, _ in
            guard request.method == "PUT" else { return nil }
            return busy.withLock { count in
                count += 1
                // Every third PUT is answered 503 once, the fifth 423.
                return count % 3 == 0
                    ? CloudKitHTTPResponse(status: 503, headers: [("Retry-After", "0")], body: Data())
                    : count == 5 ? CloudKitHTTPResponse(status: 423, body: Data()) : nil
            }
        }
        let client = CalDAVClient(transport: flaky, credentials: nil, retry: Self.quick)
        let result = try await CalendarPublishing.publish(
            from: store, request: .init(url: calendar, definition: try definition()), client: client)
        #expect(result.created == 9 && result.conflicts.isEmpty)
        #expect(client.methodsSent.filter { $0 == "PUT" }.count >= 9 + 5, "the 503s and the 423 were sent again")

        // A full server: 507 to every PUT, after the retries a clear error.
        _ = try store.write(dryRun: false) { session in
            var record = try #require(try session.record(named: "event-1-00002", ofType: "Event"))
            record["title"] = .string("Moved")
            record.modified = RecordStamp(timestamp: 1_790_000_000_000, userRecordName: "user-1-1")
            return try session.save(record, mode: .replace)
        }
        let full = CalDAVClient(
            transport: FaultyTransport { request, _ in
                request.method == "PUT" ? CloudKitHTTPResponse(status: 507, body: Data("quota".utf8)) : nil
            }, credentials: nil, retry: Self.quick)
        await #expect {
            _ = try await CalendarPublishing.publish(
                from: store, request: .init(url: calendar, definition: nil), client: full)
        } throws: { error in
            let error = try #require(error as? CalDAVError)
            return error.kind == .unavailable && error.status == 507 && error.request.hasPrefix("PUT ")
                && error.request.contains("event-1-00002.ics")
        }
        // The server still has the old event, and the next publish (the server has room again) sends it.
        let again = try await CalendarPublishing.publish(
            from: store, request: .init(url: calendar, definition: nil), client: CalDAVClient(credentials: nil))
        #expect(again.updated == 1 && again.unchanged == 8, "\(again)")
    }

    @Test(
        "Retry-After as an HTTP date: one past is a retry at once, one an hour ahead ends the attempts with a clear error"
    )
    func retryAfterDates() async throws {
        let calendar = try CalDAVTestServers.Server.xandikos.newCalendar("retry-after")
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let past = formatter.string(from: Date(timeIntervalSinceNow: -3600))
        let ahead = formatter.string(from: Date(timeIntervalSinceNow: 3600))
        let puts = Mutex(0)
        let once = FaultyTransport { request, _ in
            guard request.method == "PUT" else { return nil }
            let first = puts.withLock { count in
                count += 1
                return count == 1
            }
            return first ? CloudKitHTTPResponse(status: 503, headers: [("Retry-After", past)], body: Data()) : nil
        }
        let store = try Scratch().sampleStore(.familyCalendar)
        let client = CalDAVClient(transport: once, credentials: nil, retry: Self.quick)
        let result = try await CalendarPublishing.publish(
            from: store, request: .init(url: calendar, definition: try definition(), concurrency: 1), client: client)
        #expect(result.created == 9 && client.methodsSent.filter { $0 == "PUT" }.count == 10)

        let later = try CalDAVTestServers.Server.xandikos.newCalendar("retry-after-later")
        let busy = CalDAVClient(
            transport: FaultyTransport { request, _ in
                request.method == "PUT"
                    ? CloudKitHTTPResponse(status: 503, headers: [("Retry-After", ahead)], body: Data("busy".utf8))
                    : nil
            }, credentials: nil, retry: Self.quick)
        await #expect {
            _ = try await CalendarPublishing.publish(
                from: store, request: .init(url: later, definition: try definition(), concurrency: 1), client: busy)
        } throws: { error in
            let error = try #require(error as? CalDAVError)
            return error.kind == .unavailable && error.status == 503
                && error.description.contains("gave up after 1 attempt (it asked for a wait of")
        }
        #expect(busy.methodsSent.filter { $0 == "PUT" }.count == 1)
    }

    @Test(
        "a server without sync-collection is pulled by ETags; a multistatus cut short and a collection that is not a calendar are clear errors, and nothing is written"
    )
    func noSyncAndBadAnswers() async throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyCalendar)
        let calendar = try CalDAVTestServers.Server.xandikos.newCalendar("nosync")
        // A calendar with what a publish of another store put there.
        let source = try Scratch().sampleStore(.familyCalendar)
        _ = try await CalendarPublishing.publish(
            from: source, request: .init(url: calendar, definition: try definition()),
            client: CalDAVClient(credentials: nil))
        let noSync = FaultyTransport { request, _ in
            request.method == "REPORT" && String(decoding: request.body, as: UTF8.self).contains("sync-collection")
                ? CloudKitHTTPResponse(status: 501, body: Data("not implemented".utf8)) : nil
        }
        let client = CalDAVClient(transport: noSync, credentials: nil, retry: Self.quick)
        let request = CalendarPulling.Request(
            url: calendar, mapping: try #require(SampleApp.familyCalendar.calendarMappingText),
            mappingSource: "family-calendar mapping", fixedFields: [("familyID", "family-9")],
            zone: ZoneID(scope: .private, zoneName: "pulled"))
        let first = try await CalendarPulling.pull(into: store, request: request, client: client)
        #expect(first.fetched == 9 && first.inserted == 9 && !first.bySyncToken, "\(first)")
        #expect(client.methodsSent.contains("PROPFIND"))
        let second = try await CalendarPulling.pull(into: store, request: request, client: client)
        #expect(second.fetched == 0 && second.deleted == 0, "\(second)")
        #expect(try CalendarPulling.pulls(in: store).first?.syncToken == nil)
        // A publish into a server without sync-collection, or one that forbids it (403), goes
        // on without it: what changed on the server alone is then not asked for.
        for status in [501, 403] {
            let refusing = FaultyTransport { request, _ in
                request.method == "REPORT" && String(decoding: request.body, as: UTF8.self).contains("sync-collection")
                    ? CloudKitHTTPResponse(status: status, body: Data("no".utf8)) : nil
            }
            let target = try CalDAVTestServers.Server.xandikos.newCalendar("nosync-publish-\(status)")
            let published = try await CalendarPublishing.publish(
                from: source, request: .init(url: target, definition: try definition()),
                client: CalDAVClient(transport: refusing, credentials: nil, retry: Self.quick))
            #expect(published.created == 9 && published.conflicts.isEmpty, "\(status): \(published)")
        }

        // A multistatus cut in the middle of an element.
        let before = try CalendarPulling.pulls(in: store)
        let beforeEvents = try store.read { try $0.count(RecordQuery(recordTypes: ["Event"])) }
        let broken = FaultyTransport { request, _ in
            request.method == "REPORT"
                ? CloudKitHTTPResponse(
                    status: 207,
                    body: Data(#"<?xml version="1.0"?><D:multistatus xmlns:D="DAV:"><D:response><D:hr"#.utf8))
                : nil
        }
        await #expect {
            _ = try await CalendarPulling.pull(
                into: store, request: request,
                client: CalDAVClient(transport: broken, credentials: nil, retry: Self.quick))
        } throws: { error in
            let error = try #require(error as? CalDAVError)
            return error.kind == .badAnswer && error.description.contains("not well-formed XML")
                && error.request.hasPrefix("REPORT ")
        }
        #expect(try CalendarPulling.pulls(in: store) == before)
        #expect(try store.read { try $0.count(RecordQuery(recordTypes: ["Event"])) } == beforeEvents)

        // A collection that is not a calendar (the account's calendar home).
        let root = try #require(CalDAVTestServers.Server.xandikos.url)
        let home = try #require(URL(string: "user/calendars/", relativeTo: root))
        await #expect {
            _ = try await CalendarPulling.pull(
                into: store,
                request: CalendarPulling.Request(url: home.absoluteURL, mapping: request.mapping, mappingSource: "m"),
                client: CalDAVClient(credentials: nil))
        } throws: { error in
            (error as? CalDAVError)?.kind == .notACalendar && "\(error)".contains("not a calendar collection")
        }
        #expect(try CalendarPulling.pulls(in: store) == before)
    }
    @Test(
        "a server that hands out its changes in parts (the collection answering 507, RFC 6578 §3.6) is asked again with each part's token until every change has come"
    )
    func changesInParts() async throws {
        let calendar = try CalDAVTestServers.Server.xandikos.newCalendar("parts")
        let real = CalDAVClient(credentials: nil)
        // The empty calendar's token, then nine events published into it.
        try await real.makeCalendar(calendar, displayName: "parts")
        guard case .changes(_, let empty) = try await real.syncCollection(calendar, token: nil) else {
            Issue.record("Xandikos has sync-collection")
            return
        }
        _ = try await CalendarPublishing.publish(
            from: try Scratch().sampleStore(.familyCalendar),
            request: .init(url: calendar, definition: try definition()), client: real)
        guard case .changes(let all, _) = try await real.syncCollection(calendar, token: nil) else {
            Issue.record("Xandikos has sync-collection")
            return
        }
        let members = all.filter { $0.href.hasSuffix(".ics") }
        #expect(members.count == 9)
        // The first answer: three members, and the collection's 507 with the empty calendar's
        // token, from which the server itself then hands out all nine.
        let responses = members.prefix(3).map { member in
            "<D:response><D:href>\(member.href)</D:href><D:propstat><D:prop><D:getetag>\(member.etag ?? "")</D:getetag>"
                + "</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>"
        }.joined()
        let truncated =
            #"<?xml version="1.0" encoding="utf-8"?><D:multistatus xmlns:D="DAV:">"# + responses
            + "<D:response><D:href>\(calendar.path)</D:href><D:status>HTTP/1.1 507 Insufficient Storage</D:status>"
            + "</D:response><D:sync-token>\(empty)</D:sync-token></D:multistatus>"
        let reports = Mutex(0)
        let parted = FaultyTransport { request, _ in
            guard request.method == "REPORT", String(decoding: request.body, as: UTF8.self).contains("sync-collection")
            else { return nil }
            let first = reports.withLock { count in
                count += 1
                return count == 1
            }
            return first ? CloudKitHTTPResponse(status: 207, body: Data(truncated.utf8)) : nil
        }
        let store = try Scratch().sampleStore(.familyCalendar)
        let client = CalDAVClient(transport: parted, credentials: nil, retry: Self.quick)
        let pulled = try await CalendarPulling.pull(
            into: store,
            request: CalendarPulling.Request(
                url: calendar, mapping: try #require(SampleApp.familyCalendar.calendarMappingText),
                mappingSource: "family-calendar mapping", fixedFields: [("familyID", "family-9")],
                zone: ZoneID(scope: .private, zoneName: "pulled")),
            client: client)
        #expect(pulled.fetched == 9 && pulled.inserted == 9, "\(pulled)")
        #expect(reports.withLock { $0 } == 2, "the second part was asked for")
        #expect(
            try store.read {
                try $0.count(RecordQuery(recordTypes: ["Event"], scope: .private, zoneName: "pulled"))
            } == 9)
    }
}

/// An event a server hands back, compared with the one ckport put there: the same, whatever
/// the server's folds and order (RFC 4791 §5.3.4 lets a server rewrite what it stores).
@Suite("An event as a server hands it back")
struct ServerRewriteTests {
    @Test("other folds, another order and a new DTSTAMP are the same event; another SUMMARY or one more line is not")
    func sameEvent() throws {
        let long = "DESCRIPTION:" + String(repeating: "Bring the costume, the script and the snacks. ", count: 4)
        var folded: [String] = []
        var rest = Substring(long)
        while !rest.isEmpty {
            folded.append((folded.isEmpty ? "" : " ") + rest.prefix(folded.isEmpty ? 75 : 74))
            rest = rest.dropFirst(folded.count == 1 ? 75 : 74)
        }
        let component =
            ["BEGIN:VEVENT", "UID:event-1-00002", "DTSTAMP:20260101T000000Z", "SEQUENCE:3", "SUMMARY:School play"]
            + folded + [
                "DTSTART:20260320T180000Z", #"ATTENDEE;CN="Hana; Theo";PARTSTAT=ACCEPTED:mailto:hana@example.org"#,
                "BEGIN:VALARM", "ACTION:DISPLAY", "TRIGGER:-PT30M", "DESCRIPTION:Leave", "END:VALARM",
                "BEGIN:VALARM", "ACTION:AUDIO", "TRIGGER:-PT5M", "END:VALARM", "END:VEVENT",
            ]
        let resource = CalendarResource(
            uid: "event-1-00002", header: ["VERSION:2.0", "PRODID:-//ckport//test//EN"], zones: [],
            component: component,
            sequence: 3, hash: CalendarResource.hash(of: component))
        #expect(resource.isSame(asResource: resource.text(sequence: 4)))
        // Folded at 60 octets, its properties in another order, a DTSTAMP of its own, LF ends.
        var refolded: [String] = []
        rest = Substring(long)
        while !rest.isEmpty {
            refolded.append((refolded.isEmpty ? "" : " ") + rest.prefix(60))
            rest = rest.dropFirst(60)
        }
        // Its VTIMEZONE first, as ckport writes it (what is inside one is not the event).
        func server(_ lines: [String]) -> String {
            let zone = [
                "BEGIN:VTIMEZONE", "TZID:Europe/Zurich", "BEGIN:STANDARD", "DTSTART:20251026T030000",
                "TZOFFSETFROM:+0200", "TZOFFSETTO:+0100", "END:STANDARD", "END:VTIMEZONE",
            ]
            return (["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//Server//EN"] + zone + lines + ["END:VCALENDAR"])
                .joined(separator: "\n") + "\n"
        }
        let rewritten = server(
            [
                "BEGIN:VEVENT", "DTSTART:20260320T180000Z",
                #"attendee;PARTSTAT=ACCEPTED;CN="Hana; Theo":mailto:hana@example.org"#,
                "SUMMARY:School play",
            ] + refolded + [
                "UID:event-1-00002", "BEGIN:VALARM", "TRIGGER:-PT5M", "ACTION:AUDIO", "END:VALARM",
                "BEGIN:VALARM", "DESCRIPTION:Leave", "ACTION:DISPLAY", "TRIGGER:-PT30M", "END:VALARM",
                "DTSTAMP:20261207T101500Z", "SEQUENCE:4", "END:VEVENT",
            ])
        #expect(refolded.count > folded.count && refolded != folded)
        #expect(resource.isSame(asResource: rewritten))
        #expect(!resource.isSame(asResource: rewritten.replacingOccurrences(of: "School play", with: "Play")))
        #expect(
            !resource.isSame(
                asResource: rewritten.replacingOccurrences(of: "END:VEVENT", with: "LOCATION:Hall\nEND:VEVENT")))
        #expect(!resource.isSame(asResource: server([])))
        // The alarms' triggers swapped: each alarm's lines are its own.
        let swapped = rewritten.replacingOccurrences(of: "TRIGGER:-PT5M", with: "TRIGGER:-PTX")
            .replacingOccurrences(of: "TRIGGER:-PT30M", with: "TRIGGER:-PT5M").replacingOccurrences(
                of: "TRIGGER:-PTX", with: "TRIGGER:-PT30M")
        #expect(swapped != rewritten && !resource.isSame(asResource: swapped))
        // One occurrence moved on a phone: a second component, the first as it was.
        let moved = rewritten.replacingOccurrences(
            of: "END:VCALENDAR",
            with:
                "BEGIN:VEVENT\nUID:event-1-00002\nRECURRENCE-ID:20260327T180000Z\nDTSTART:20260328T180000Z\nSUMMARY:School play\nEND:VEVENT\nEND:VCALENDAR"
        )
        #expect(!resource.isSame(asResource: moved))
        #expect(
            !resource.isSame(
                asResource: rewritten.replacingOccurrences(of: "PARTSTAT=ACCEPTED", with: "PARTSTAT=DECLINED")))
        #expect(
            CalendarResource.normalized(#"x-a;B="1;2:3";a=b:v:w;x"#) == #"X-A;B="1;2:3";a=b:v:w;x"#
                && CalendarResource.normalized(#"X-A;a=b;B="1;2:3":v:w;x"#) == #"X-A;B="1;2:3";a=b:v:w;x"#)
    }
}

/// What a pull imports of a server's calendar data: lines unfolded with CRLF ends, ckport's own
/// properties and parameters gone in any case, and everything else byte for byte.
@Suite("Calendar data as a pull takes it")
struct PulledDataTests {
    @Test(
        "folds joined, LF or CRLF, X-CKPORT-* properties and parameters dropped in any case, other lines kept as they are"
    )
    func sanitized() {
        let data = [
            "BEGIN:VCALENDAR", "BEGIN:VEVENT", "UID:swim@school.example", "x-ckport-zone:family-2-zone",
            "SUMMARY:Swim practice with a title long enough to be fo", " lded here",
            "ATTENDEE;x-CkPort-Record=anna;CN=\"Anna; Mom\":mailto:anna@example.org",
            "X-CKPORT-RECORD-NAME:", " folded-too", "DESCRIPTION:Bring an x-ckport-free towel: é", "END:VEVENT",
            "END:VCALENDAR", "",
        ]
        let expected = [
            "BEGIN:VCALENDAR", "BEGIN:VEVENT", "UID:swim@school.example",
            "SUMMARY:Swim practice with a title long enough to be folded here",
            "ATTENDEE;CN=\"Anna; Mom\":mailto:anna@example.org", "DESCRIPTION:Bring an x-ckport-free towel: é",
            "END:VEVENT", "END:VCALENDAR", "",
        ].joined(separator: "\r\n")
        #expect(CalendarPulling.sanitized(data.joined(separator: "\r\n")) == expected)
        #expect(CalendarPulling.sanitized(data.joined(separator: "\n")) == expected)
        #expect(CalendarPulling.uids(in: expected) == ["swim@school.example"])
    }
}
