import Formats
import Foundation
import Records
import Synchronization
import Testing

@testable import SQLiteStore
@testable import StoreCore

@Suite("Store")
struct StoreTests {
    @Test("a schema built in code that the schema language would refuse is refused, and the store keeps its own")
    func invalidSchemaFromCode() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema)
        let before = FileManager.default.contents(atPath: store.path)
        var schema = store.schema
        schema.addField(FieldDefinition(name: "photo", type: FieldType(.reference, encrypted: true)), toType: "Task")
        #expect(throws: SchemaError.self) { try store.importSchema(schema) }
        #expect(FileManager.default.contents(atPath: store.path) == before)
        #expect(store.schema.recordType(named: "Task")?.field(named: "photo") == nil)
    }

    @Test("queries select and sort with CloudKit's predicate subset")
    func queries() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema)
        let input = [
            task(
                "a",
                #""title":{"value":"Trash"},"status":{"value":"next"},"priority":{"value":2},"due":{"value":1768208400000},"tags":{"value":["home","weekly"]}"#
            ),
            task(
                "b",
                #""title":{"value":"Dishes"},"status":{"value":"done"},"priority":{"value":1},"due":{"value":1767571200000},"tags":{"value":[]}"#
            ),
            task(
                "c",
                #""title":{"value":"Taxes"},"status":{"value":"backlog"},"priority":{"value":3},"due":{"value":1772323200000}"#
            ),
            task("d", #""title":{"value":"Tidy"},"status":{"value":"next"}"#),
        ].joined(separator: "\n")
        _ = try importText(input, into: store)
        func names(_ predicate: String? = nil, sort: String? = nil, desc: Bool = false) throws -> [String] {
            let query = RecordQuery(
                recordTypes: ["Task"], predicate: try predicate.map { try RecordPredicate.parse($0) },
                predicateText: predicate, sortField: sort, descending: desc)
            return try allRecords(store, query).map(\.recordName)
        }
        #expect(try names() == ["a", "b", "c", "d"])
        #expect(try names("status == 'next'") == ["a", "d"])
        #expect(try names("status != 'next'") == ["b", "c"])
        #expect(try names("priority >= 2") == ["a", "c"])
        #expect(try names("priority < 2 AND status == 'done'") == ["b"])
        #expect(try names("status IN ['done', 'backlog']") == ["b", "c"])
        #expect(try names("title BEGINSWITH 'T'") == ["a", "c", "d"])
        #expect(try names("tags CONTAINS 'weekly'") == ["a"])
        #expect(try names("due >= 2026-01-12") == ["a", "c"])
        #expect(try names("due < 2026-01-12T09:00:00Z") == ["b"])
        #expect(try names("recordName BEGINSWITH 'c'") == ["c"])
        #expect(try names(sort: "due") == ["d", "b", "a", "c"])
        #expect(try names("priority > 0", sort: "priority", desc: true) == ["c", "a", "b"])
        #expect(
            try store.read {
                try $0.count(
                    RecordQuery(recordTypes: ["Task"], predicate: try RecordPredicate.parse("status == 'next'")))
            } == 2)
        #expect(throws: StoreError.self) { try names("due == 'soon'") }
        #expect(throws: StoreError.self) { try names("tags == 'x'") }
        #expect(throws: StoreError.self) { try names("nope == 1") }
    }

    @Test("an indexed query uses the index, as SQLite's query plan shows")
    func queryPlan() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore("family-calendar")
        let query = RecordQuery(
            recordTypes: ["Event"],
            predicate: try RecordPredicate.parse(
                "familyID == 'family-1' AND startDate >= 2026-03-01 AND isDeleted == false"), sortField: "startDate")
        let plans = try store.read { try $0.queryPlan(query) }
        #expect(plans.count == 1)
        let plan = plans[0].plan.joined(separator: "\n")
        #expect(plan.contains("USING INDEX Event."), "\(plan)")
        #expect(!plan.contains("SCAN Event"), "\(plan)")
        // An unindexed field needs a scan: the plan says so too.
        let scan = try store.read {
            try $0.queryPlan(
                RecordQuery(
                    recordTypes: ["Event"], predicate: try RecordPredicate.parse("title == 'Piano lesson'"),
                    sortField: "title"))
        }
        #expect(scan[0].plan.joined().contains("SCAN Event"))
        let selected = try allRecords(store, query)
        #expect(!selected.isEmpty)
        #expect(
            selected.allSatisfy {
                $0.fields["familyID"] == .reference(Reference(recordName: "family-1", action: .deleteSelf))
                    && $0.fields["isDeleted"] == .int64(0)
            })
        let starts = selected.compactMap {
            if case .timestamp(let t)? = $0.fields["startDate"] { return t } else { return nil }
        }
        #expect(starts == starts.sorted())
        #expect(starts.allSatisfy { $0 >= ISO8601.parse("2026-03-01")! })
    }

    @Test("deleting a family cascades through DELETE_SELF references, transitively")
    func cascade() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore("family-calendar")
        let before = try store.read { try $0.stats() }
        let familyZone = try #require(try store.read { $0.zones }.first { $0.zoneName == "family-1-zone" })
        // The zone's share (a share of the whole zone) belongs to no record: it stays.
        let family1 = try allRecords(store).filter { $0.zone == familyZone && !$0.isShare }
        let deleted = try store.write { try $0.delete([RecordID(recordName: "family-1", zone: familyZone)]) }
        // Everything else in the family's zone pointed, directly or through its event, at the family.
        #expect(Set(deleted.map(\.id)) == Set(family1.map(\.id)))
        #expect(
            try store.read { try $0.record(RecordID(recordName: Record.zoneShareName, zone: familyZone)) }?.isShare
                == true)
        let participant = try #require(deleted.first { $0.recordType == "EventParticipant" })
        #expect(participant.field == "eventID")
        #expect(participant.cause?.recordName.hasPrefix("event-1-") == true)
        let after = try store.read { try $0.stats() }
        #expect(after.totalRecords == before.totalRecords - family1.count)
        #expect(after.totalTombstones == family1.count)
        // The private records (users, notifications) are untouched.
        #expect(
            try allRecords(store, RecordQuery(scope: .private)).count
                == before.entries.filter { $0.zone.scope == .private }.reduce(0) { $0 + $1.records })
    }

    @Test("a VALIDATE reference blocks the delete, and nothing is deleted")
    func validate() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore("relationship-checkin")
        let zone = try #require(try allRecords(store).first { $0.recordName == "couple-1" }?.zone)
        let before = fileBytes(store.path)
        do {
            _ = try store.write { try $0.delete([RecordID(recordName: "couple-1", zone: zone)]) }
            Issue.record("the delete should be refused")
        } catch StoreError.deleteRefused(let message) {
            #expect(message.hasPrefix("nothing was deleted: "))
            #expect(message.contains("DailyEntry 'DailyEntry_2026-01-05__"))
            #expect(message.contains("through couple (VALIDATE)"))
        }
        #expect(fileBytes(store.path) == before)
        // Deleting the entries first lets the couple go.
        let entries = try allRecords(store, RecordQuery(recordTypes: ["DailyEntry"])).filter { $0.zone == zone }.map(
            \.id)
        let deleted = try store.write { try $0.delete(entries + [RecordID(recordName: "couple-1", zone: zone)]) }
        #expect(deleted.count == entries.count + 1)
    }

    @Test("a missing record name is an error that deletes nothing")
    func deleteMissing() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema)
        _ = try importText(task("a", #""title":{"value":"x"}"#), into: store)
        #expect(throws: StoreError.self) {
            try store.write { try $0.delete([RecordID(recordName: "a"), RecordID(recordName: "zzz")]) }
        }
        #expect(try allRecords(store).count == 1)
    }

    @Test("change tokens follow inserts, updates and deletes")
    func changeTokens() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema)
        func changes(since token: ChangeToken) throws -> [String] {
            try store.read { session in
                var out: [String] = []
                try session.forEachChange(since: token) { out.append(($0.isDeleted ? "-" : "+") + $0.recordName) }
                return out
            }
        }
        let start = try store.read { $0.currentToken }
        #expect(start.sequence == 0)
        _ = try importText(
            [
                task("a", #""title":{"value":"1"}"#), task("b", #""title":{"value":"1"}"#),
                task("c", #""title":{"value":"1"}"#),
            ].joined(separator: "\n"), into: store)
        let t1 = try store.read { $0.currentToken }
        #expect(try changes(since: start) == ["+a", "+b", "+c"])
        #expect(try changes(since: t1).isEmpty)
        _ = try importText(
            task("b", #""title":{"value":"2"}"#) + "\n" + task("c", #""title":{"value":"1"}"#), into: store)
        let t2 = try store.read { $0.currentToken }
        #expect(try changes(since: t1) == ["+b"])
        try store.write { _ = try $0.delete([RecordID(recordName: "a")]) }
        #expect(try changes(since: t2) == ["-a"])
        #expect(try changes(since: t1) == ["+b", "-a"])
        #expect(try changes(since: start) == ["+c", "+b", "-a"])
        let token = try ChangeToken(parsing: t2.description)
        #expect(token == t2)
        // A tombstone import deletes; re-inserting after a delete counts as an insert.
        _ = try importText(task("a", #""title":{"value":"back"}"#), into: store)
        #expect(try changes(since: t2) == ["+a"])
        let tombstone = #"{"recordName":"b","recordType":"Task","zoneID":{"zoneName":"_defaultZone"},"deleted":true}"#
        #expect(try importText(tombstone, into: store).totals.deleted == 1)
        #expect(try allRecords(store).map(\.recordName) == ["a", "c"])
        // Tokens from elsewhere or from the future are refused.
        let other = ChangeToken(storeID: "000000000000", sequence: 1)
        #expect(throws: StoreError.self) { try changes(since: other) }
        #expect(throws: StoreError.self) { try changes(since: ChangeToken(storeID: store.storeID, sequence: 999)) }
        #expect(throws: StoreError.self) { try ChangeToken(parsing: "yesterday") }
    }

    @Test("schema changes: additions apply, removals and retyping wait until no value is in the way")
    func schemaChanges() throws {
        let scratch = Scratch()
        let store = try scratch.store(taskSchema)
        _ = try importText(task("a", #""title":{"value":"x"},"priority":{"value":1}"#), into: store)
        let grown =
            taskSchema.replacingOccurrences(of: "notes STRING", with: "notes STRING, colour STRING QUERYABLE")
            + "\n RECORD TYPE Note (text STRING);"
        let change = try store.importSchema(try SchemaParser.parse(grown))
        #expect(change.summary == ["+ record type Note (1 fields)", "+ Task.colour STRING"])
        let before = fileBytes(store.path)
        let withoutPriority = grown.replacingOccurrences(of: "priority INT64,", with: "")
        do {
            try store.importSchema(try SchemaParser.parse(withoutPriority))
            Issue.record("accepted")
        } catch StoreError.schemaChangeRefused(let reasons) {
            #expect(
                reasons == [
                    "field Task.priority would go away, but 1 stored record holds a value for it (CloudKit never removes a field from a production schema either)"
                ])
        }
        let retyped = grown.replacingOccurrences(of: "priority INT64", with: "priority STRING")
        do {
            try store.importSchema(try SchemaParser.parse(retyped))
            Issue.record("accepted")
        } catch StoreError.schemaChangeRefused(let reasons) {
            #expect(reasons[0].contains("would change from INT64 to STRING"))
        }
        #expect(fileBytes(store.path) == before)
        // Empty columns and types can go.
        let smaller = grown.replacingOccurrences(of: ", colour STRING QUERYABLE", with: "").replacingOccurrences(
            of: "\n RECORD TYPE Note (text STRING);", with: "")
        let shrink = try store.importSchema(try SchemaParser.parse(smaller))
        #expect(shrink.summary == ["- record type Note", "- Task.colour STRING"])
        #expect(try allRecords(store)[0].fields == ["title": .string("x"), "priority": .int64(1)])
    }

    @Test("a store reopens with its schema, zones and token; other files are refused")
    func reopen() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore("notes")
        let token = try store.read { $0.currentToken }
        let reopened = try RecordStore(path: store.path, create: false)
        #expect(reopened.schema.isEquivalent(to: store.schema))
        #expect(try reopened.read { $0.currentToken } == token)
        #expect(try allRecords(reopened) == allRecords(store))
        #expect(throws: StoreError.self) { try RecordStore(path: scratch.path("missing.sqlite"), create: false) }
        let text = scratch.write("notes.txt", "hello, this is not a database, just words that go on for a while")
        #expect(throws: StoreError.self) { try RecordStore(path: text, create: false) }
    }

    @Test(
        "a new store appears whole: a process watching the path never finds a file without ckport's tables, and nothing is left beside it"
    )
    func newStoreAppearsWhole() throws {
        let scratch = Scratch()
        let done = Atomic(false)
        let sightings = Mutex<[String]>([])
        // What a process that is gone left while it made s0.sqlite goes; what a live one (this
        // test's parent) is making stays.
        scratch.write(".s0.sqlite.ckport-999999999-0123456789ab.tmp", "")
        scratch.write(".s0.sqlite.ckport-\(getppid())-ba9876543210.tmp", "")
        for round in 0..<20 {
            let path = scratch.path("s\(round).sqlite")
            done.store(false, ordering: .sequentiallyConsistent)
            // A watcher looks at the path as fast as it can while the store is made: whatever it
            // finds there must already be a database with ckport's tables in its main file (a
            // store made in place is an empty file at first, its tables only in the log).
            let watcher = Thread {
                var seen = false
                while !done.load(ordering: .sequentiallyConsistent) || !seen {
                    guard let bytes = FileManager.default.contents(atPath: path) else {
                        if done.load(ordering: .sequentiallyConsistent) { break }
                        continue
                    }
                    seen = true
                    let header = Array("SQLite format 3\0".utf8)
                    if bytes.count < 2 * 16384 || Array(bytes.prefix(16)) != header
                        || bytes.range(of: Data("_ck_record".utf8)) == nil
                    {
                        sightings.withLock { $0.append("round \(round): \(bytes.count) bytes without the tables") }
                        break
                    }
                }
            }
            watcher.start()
            let store = try RecordStore(path: path)
            #expect(try store.read { $0.currentToken.sequence } == 0)
            done.store(true, ordering: .sequentiallyConsistent)
            while !watcher.isFinished { usleep(100) }
        }
        #expect(sightings.withLock { $0 } == [])
        let left = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).filter { $0.contains(".tmp") }
        #expect(left == [".s0.sqlite.ckport-\(getppid())-ba9876543210.tmp"])
        let names = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).filter {
            $0.hasSuffix(".sqlite")
        }
        #expect(names.count == 20)
    }

    @Test(
        "a path that is a link to a store not made yet: the store is made where the link points, its owner's alone, and the link stays a link"
    )
    func linkToNewStore() throws {
        let scratch = Scratch()
        try FileManager.default.createDirectory(atPath: scratch.path("elsewhere"), withIntermediateDirectories: true)
        // A relative link, through a second link, to a file that does not exist yet.
        try FileManager.default.createSymbolicLink(
            atPath: scratch.path("family.sqlite"), withDestinationPath: "hop.sqlite")
        try FileManager.default.createSymbolicLink(
            atPath: scratch.path("hop.sqlite"), withDestinationPath: "elsewhere/family.sqlite")
        let store = try RecordStore(path: scratch.path("family.sqlite"))
        #expect(try store.read { $0.currentToken.sequence } == 0)
        let target = scratch.path("elsewhere/family.sqlite")
        let attributes = try FileManager.default.attributesOfItem(atPath: target)
        #expect(attributes[.type] as? FileAttributeType == .typeRegular)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: scratch.path("family.sqlite")) == "hop.sqlite")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: scratch.path("elsewhere")).filter {
                $0.contains(".tmp")
            } == [])
        // Opened again through the link, it is the same store.
        #expect(try RecordStore(path: scratch.path("family.sqlite")).storeID == store.storeID)
    }

    @Test(
        "eight creators of one new store at the same moment: one store, the same for all, its owner's alone, nothing left beside it"
    )
    func creatorsAtOnce() throws {
        let scratch = Scratch()
        // Twenty rounds: a creator that met another's switch to write-ahead logging was once
        // refused as busy in about one round in a hundred.
        for round in 0..<20 {
            let path = scratch.path("shared\(round).sqlite")
            let ids = Mutex<[String]>([])
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { _ in
                do {
                    let store = try RecordStore(path: path)
                    ids.withLock { $0.append(store.storeID) }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            #expect(failures.withLock { $0 } == [])
            let seen = ids.withLock { $0 }
            #expect(seen.count == 8 && Set(seen).count == 1, "\(seen)")
            let mode = (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?
                .intValue
            #expect(mode == 0o600)
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).filter {
            !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm")
        }.sorted()
        #expect(names == (0..<20).map { "shared\($0).sqlite" }.sorted())
    }

    /// The notes sample's schema and records, as the sample app writes them.
    static func notesSample() throws -> (schema: Schema, records: [Record]) {
        let schema = try SchemaParser.parse(
            try String(contentsOf: packageRoot.appendingPathComponent("samples/notes/schema.ckdb"), encoding: .utf8))
        let reader = JSONRecordReader(
            input: try ByteInput(path: sample("notes", "records.jsonl")), layout: .lines,
            codec: JSONRecordCodec(schema: schema))
        var records: [Record] = []
        while let item = try reader.next() {
            if case .record(let sourced) = item { records.append(sourced.record) }
        }
        return (schema, records)
    }

    /// The names in `folder` of files on their way (`.NAME.ckport-PID-N.tmp` and SQLite's files beside them).
    static func sideFiles(_ folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.contains(".ckport-") }.sorted()
    }

    @Test(
        "a new store built aside: nothing at the path until the load commits, then the whole store there, in WAL mode, the same as one loaded in place; nothing left beside it"
    )
    func builtAside() throws {
        let scratch = Scratch()
        let (schema, records) = try StoreTests.notesSample()
        #expect(records.count > 10)
        let path = scratch.path("aside.sqlite")
        let store = try RecordStore(path: path, buildAside: true)
        #expect(store.isBuiltAside && !FileManager.default.fileExists(atPath: path))
        var seenDuringLoad: Bool?
        // The file's header as it is given its name: SQLite's bytes 18 and 19 are 2 in WAL
        // mode, 1 in rollback-journal mode. The store is in WAL mode from the moment it
        // appears, before this instance opens it there again.
        let header = Mutex<[UInt8]>([])
        store.willPublish = { file in
            header.withLock { $0 = Array(FileManager.default.contents(atPath: file)?.prefix(20) ?? Data()) }
        }
        var hooks = ImportHooks()
        hooks.finishing = { _ in seenDuringLoad = FileManager.default.fileExists(atPath: path) }
        let summary = try store.importRecords(
            [ArrayRecordSource(records)], schema: schema, options: ImportOptions(), hooks: hooks)
        #expect(seenDuringLoad == false)
        #expect(summary.totals.inserted == records.count)
        #expect(!store.isBuiltAside)
        let published = header.withLock { $0 }
        #expect(published.count == 20 && published[18] == 2 && published[19] == 2, "\(published)")
        #expect(
            (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        // The same store as a load in place, and the instance goes on writing to it there.
        let inPlace = try scratch.store(SchemaPrinter.print(schema), name: "in-place.sqlite")
        _ = try inPlace.importRecords(
            [ArrayRecordSource(records)], schema: nil, options: ImportOptions(), hooks: ImportHooks())
        let reopened = try RecordStore(path: path, create: false)
        #expect(try allRecords(reopened) == allRecords(inPlace))
        #expect(try reopened.read { $0.currentToken.sequence } == inPlace.read { $0.currentToken.sequence })
        #expect(try store.integrityCheck() == ["ok"])
        let deleted = try store.write { session in try session.delete([records[0].id]) }
        #expect(!deleted.isEmpty)
        #expect(try allRecords(reopened).count == records.count - deleted.count)
        #expect(try StoreTests.sideFiles(scratch.url.path) == [])
    }

    @Test(
        "a store built aside that never commits leaves nothing: a failed load, a dry run, a store let go of unwritten")
    func builtAsideLeavesNothing() throws {
        let scratch = Scratch()
        let (schema, records) = try StoreTests.notesSample()
        let failing = try RecordStore(path: scratch.path("failed.sqlite"), buildAside: true)
        #expect(failing.isBuiltAside)
        var hooks = ImportHooks()
        hooks.finishing = { _ in throw StoreError.corrupt("stopped on purpose") }
        #expect(throws: StoreError.self) {
            try failing.importRecords(
                [ArrayRecordSource(records)], schema: schema, options: ImportOptions(), hooks: hooks)
        }
        #expect(!FileManager.default.fileExists(atPath: scratch.path("failed.sqlite")))
        #expect(try StoreTests.sideFiles(scratch.url.path) == [])
        do {
            let dry = try RecordStore(path: scratch.path("dry.sqlite"), buildAside: true)
            let summary = try dry.importRecords(
                [ArrayRecordSource(records)], schema: schema, options: ImportOptions(dryRun: true), hooks: ImportHooks()
            )
            #expect(summary.totals.inserted == records.count)
            // While the instance lives, its file is beside the path; the path stays free.
            #expect(try StoreTests.sideFiles(scratch.url.path).count == 1)
            let unwritten = try RecordStore(path: scratch.path("unwritten.sqlite"), buildAside: true)
            #expect(try unwritten.read { $0.currentToken.sequence } == 0)
        }
        #expect(
            !FileManager.default.fileExists(atPath: scratch.path("dry.sqlite"))
                && !FileManager.default.fileExists(atPath: scratch.path("unwritten.sqlite")))
        #expect(try StoreTests.sideFiles(scratch.url.path) == [])
    }

    @Test(
        "another process makes the store while it is built aside: theirs stays as it was, this load fails saying so, and nothing is left beside it"
    )
    func builtAsideMeetsAnotherStore() throws {
        let scratch = Scratch()
        let (schema, records) = try StoreTests.notesSample()
        let path = scratch.path("raced.sqlite")
        let aside = try RecordStore(path: path, buildAside: true)
        var other: RecordStore?
        var hooks = ImportHooks()
        hooks.finishing = { _ in
            other = try RecordStore(path: path)
            try other!.importSchema(schema)
        }
        do {
            _ = try aside.importRecords(
                [ArrayRecordSource(records)], schema: schema, options: ImportOptions(), hooks: hooks)
            Issue.record("the load went over another store")
        } catch let error as StoreError {
            #expect("\(error)".contains("something appeared there while this store was being built"), "\(error)")
        }
        let theirs = try RecordStore(path: path, create: false)
        #expect(theirs.storeID == other?.storeID && theirs.storeID != aside.storeID)
        #expect(try allRecords(theirs).isEmpty && theirs.schema.isEquivalent(to: schema))
        #expect(try StoreTests.sideFiles(scratch.url.path) == [])
    }

    @Test(
        "a loop of links at the path is not built aside: it fails at once, naming the path, and leaves nothing beside it"
    )
    func linkLoopNotBuiltAside() throws {
        let scratch = Scratch()
        try FileManager.default.createSymbolicLink(atPath: scratch.path("a.sqlite"), withDestinationPath: "b.sqlite")
        try FileManager.default.createSymbolicLink(atPath: scratch.path("b.sqlite"), withDestinationPath: "a.sqlite")
        do {
            _ = try RecordStore(path: scratch.path("a.sqlite"), buildAside: true)
            Issue.record("a store was opened through a loop of links")
        } catch let error as StoreError {
            #expect("\(error)".contains(scratch.path("a.sqlite")), "\(error)")
        }
        #expect(try StoreTests.sideFiles(scratch.url.path) == [])
    }

    @Test("the journal, log and log index beside a file on its way are a dead process's to remove as well")
    func sideFileNames() {
        for suffix in ["", "-journal", "-wal", "-shm"] {
            #expect(PrivateFiles.temporaryFileOwner(".family.sqlite.ckport-4242-0123456789ab.tmp" + suffix) == 4242)
        }
        #expect(PrivateFiles.temporaryFileOwner(".family.sqlite.ckport-4242-0123456789ab.tmp-other") == nil)
        #expect(PrivateFiles.temporaryFileOwner("family.sqlite-journal") == nil)
    }

    @Test("every value type survives the store unchanged")
    func storeRoundTrip() throws {
        let scratch = Scratch()
        let store = try scratch.store(
            """
            DEFINE SCHEMA RECORD TYPE Thing (s STRING, i INT64, d DOUBLE, t TIMESTAMP, b BYTES, r REFERENCE, a ASSET, l LOCATION,
              n NUMBER, ls LIST<STRING>, li LIST<INT64>, lt LIST<TIMESTAMP>, lr LIST<REFERENCE>, ld LIST<DOUBLE>);
            """)
        var thing = Record(
            id: RecordID(recordName: "x", zone: ZoneID(scope: .public, zoneName: "Z", ownerRecordName: "_o")),
            recordType: "Thing",
            changeTag: "tag", created: RecordStamp(timestamp: -5, userRecordName: "u", deviceID: "d"),
            modified: RecordStamp(timestamp: Int64.max))
        thing.fields = [
            "s": .string(""), "i": .int64(Int64.min), "d": .double(-0.0), "t": .timestamp(Int64.min), "b": .bytes([]),
            "r": .reference(Reference(recordName: "_user", action: .validate)),
            "a": .asset(Asset(fileChecksum: "c", size: 0)),
            "l": .location(Location(latitude: 1.5, longitude: -2.25, course: 0)), "n": .double(2.0),
            "ls": .list(.string, []), "li": .list(.int64, [.int64(Int64.max)]),
            "lt": .list(.timestamp, [.timestamp(-1)]),
            "lr": .list(.reference, [.reference(Reference(recordName: "y", action: .deleteSelf))]),
            "ld": .list(.double, [.double(0.1)]),
        ]
        var other = Record(id: RecordID(recordName: "y", zone: thing.zone), recordType: "Thing")
        other.fields = ["n": .int64(2), "s": .string("😀")]
        let outcomes = try store.write { session in
            [
                try session.save(thing, mode: .insert), try session.save(other, mode: .insert),
                try session.save(thing, mode: .upsert),
            ]
        }
        #expect(outcomes.map { "\($0)" } == ["inserted", "inserted", "unchanged"])
        let read = try allRecords(store)
        for (name, value) in thing.fields { #expect(read.first?.fields[name] == value, "field \(name)") }
        #expect(read == [thing, other])
        #expect(read[0].fields["n"] == .double(2.0))
        #expect(read[1].fields["n"] == .int64(2))
        // The list reference cascades too.
        let deleted = try store.write { try $0.delete([other.id]) }
        #expect(deleted.map(\.id.recordName) == ["y", "x"])
    }
}
