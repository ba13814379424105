import Foundation
import Records
import SampleApps
import Testing

@testable import Formats
@testable import SQLiteStore
@testable import StoreCore

/// A bundle taken apart into its members and put back together, for building damaged ones.
private struct Unpacked {
    var members: [(path: String, bytes: [UInt8])]

    init(_ path: String) throws {
        let gzip = try GzipReader(path: path)
        let tar = TarReadAhead(name: path) { try gzip.read(into: $0) }
        members = []
        while let entry = try tar.next() {
            members.append((entry.path, try tar.readAll(limit: Int(entry.size))))
        }
    }

    func write(_ path: String) throws {
        var tar: [UInt8] = []
        for (name, bytes) in members {
            tar += Tar.header(path: name, size: Int64(bytes.count)) + bytes + Tar.padding(Int64(bytes.count))
        }
        tar += Tar.end
        try Data(GzipCompressor.member(tar)).write(to: URL(fileURLWithPath: path))
    }

    var manifestText: String {
        get { String(decoding: members[0].bytes, as: UTF8.self) }
        set { members[0].bytes = Array(newValue.utf8) }
    }
}

private func everything(_ store: RecordStore) throws -> [Record] {
    try store.read { session in
        var all: [Record] = []
        try session.forEach(RecordQuery()) { all.append($0) }
        return all
    }
}

/// Restores a bundle into a fresh store the way `ckport restore` does.
private func restore(_ bundle: String, into path: String) throws -> RecordStore {
    let reader = try BundleReader(path: bundle)
    let store = try RecordStore(path: path)
    try store.importSchema(reader.schema)
    _ = try RecordImporter(store: store, options: ImportOptions()).run([reader])
    return store
}

/// Reads a whole bundle, as `ckport verify` does; the error text, or nil when sound.
private func verify(_ bundle: String, engine: GzipReader.Engine = .fastest) -> String? {
    do {
        let reader = try BundleReader(path: bundle, engine: engine)
        while let item = try reader.next() {
            if case .invalid(let issue, _) = item { return issue.description }
        }
        return nil
    } catch {
        return "\(error)"
    }
}

@Suite("backup bundles")
struct BundleTests {
    @Test(
        "store → bundle → new store gives back every record, and tar and gzip accept the bundle",
        arguments: SampleApp.allCases)
    func roundTrip(app: SampleApp) throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(app)
        let bundle = scratch.path("\(app.rawValue).ckbundle")
        let summary = try BundleWriter().write(store, to: bundle)
        let original = try everything(store)
        #expect(summary.manifest.recordCount == original.count)
        #expect(summary.manifest.members.first?.path == "schema.ckdb")
        let copy = try restore(bundle, into: scratch.path("copy.sqlite"))
        #expect(try everything(copy) == original)
        #expect(SchemaPrinter.print(copy.schema) == SchemaPrinter.print(store.schema))
        #expect(try Conformance.run("/bin/gzip", ["-t", bundle]).0 == 0)
        let (status, listing) = try Conformance.run("/bin/tar", ["-tzf", bundle])
        #expect(status == 0)
        #expect(
            listing.split(separator: "\n").map(String.init) == ["manifest.json"] + summary.manifest.members.map(\.path))
        #expect(verify(bundle) == nil)
    }

    @Test(
        "each record member holds its zone's records of its type as canonical JSON Lines, whether its type's rows are written straight or through records",
        arguments: SampleApp.allCases)
    func membersFromRows(app: SampleApp) throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(app)
        // A second zone, so that members split by zone as well as by type.
        let moved = try everything(store).prefix(7).map { record -> Record in
            var copy = record
            copy.id = RecordID(
                recordName: record.recordName + "-shared",
                zone: ZoneID(scope: .shared, zoneName: "Shared;Zone", ownerRecordName: "_owner"))
            return copy
        }
        _ = try RecordImporter(store: store, options: ImportOptions()).run([ArrayRecordSource(moved)])
        let bundle = scratch.path("\(app.rawValue).ckbundle")
        _ = try BundleWriter().write(store, to: bundle)
        let codec = JSONRecordCodec(schema: store.schema)
        var expected: [(path: String, bytes: [UInt8])] = []
        var rowTypes = 0
        try store.read { session in
            rowTypes = try session.recordTypeNames(RecordQuery()).filter {
                session.canReadRows(RecordQuery(recordTypes: [$0]))
            }.count
            var out = JSONWriter()
            try session.forEach(RecordQuery()) { record in
                let path = BundleWriter.memberPath(record.zone, record.recordType)
                if expected.last?.path != path {
                    if !expected.isEmpty { expected[expected.count - 1].bytes = out.bytes }
                    out = JSONWriter()
                    expected.append((path, []))
                }
                codec.encode(record, style: .canonical, to: &out)
                out.byte(0x0A)
            }
            if !expected.isEmpty { expected[expected.count - 1].bytes = out.bytes }
        }
        #expect(rowTypes > 0)
        let members = try Unpacked(bundle).members.filter { $0.path.hasPrefix("records/") }
        #expect(members.map(\.path) == expected.map(\.path))
        for (member, wanted) in zip(members, expected) {
            #expect(member.bytes == wanted.bytes, "\(member.path)")
        }
        #expect(verify(bundle) == nil)
    }

    @Test(
        "members many compression chunks long, plain and encrypted: the same members and records come back, and gzip, tar and Python read the plain bundle"
    )
    func largeMembers() throws {
        let scratch = Scratch()
        let schema = try String(
            contentsOf: packageRoot.appendingPathComponent("samples/family-todo/schema.ckdb"), encoding: .utf8)
        let store = try scratch.store(schema, name: "large.sqlite")
        var records: [Record] = []
        try SampleApp.familyTodo.generate(records: 6_000, seed: 11) { records.append($0) }
        _ = try RecordImporter(store: store, options: ImportOptions()).run([ArrayRecordSource(records)])
        let original = try everything(store)
        for passphrase in [nil, "correct horse battery staple"] {
            let bundle = scratch.path(passphrase == nil ? "large.ckbundle" : "large-sealed.ckbundle")
            let summary = try BundleWriter().write(store, to: bundle, passphrase: passphrase)
            let largest = try #require(summary.manifest.members.filter { $0.kind == "records" }.map(\.bytes).max())
            // Compressed on several threads in 256 KiB chunks: the largest member spans many.
            #expect(largest > 4 << 18)
            // Each inflater built in reads the same records (zlib, and ISA-L where it is).
            for engine in GzipReader.Engine.available {
                let reader = try BundleReader(path: bundle, passphrase: passphrase, engine: engine)
                let copy = try RecordStore(
                    path: scratch.path("copy-\(engine)\(passphrase == nil ? "" : "-sealed").sqlite"))
                _ = try RecordImporter(store: copy, options: ImportOptions()).run([reader], schema: reader.schema)
                #expect(try everything(copy) == original, "read by \(engine)")
            }
            guard passphrase == nil else { continue }
            #expect(verify(bundle) == nil)
            #expect(try Conformance.run("/bin/gzip", ["-t", bundle]).0 == 0)
            let (status, listing) = try Conformance.run("/bin/tar", ["-tzf", bundle])
            #expect(status == 0)
            #expect(
                listing.split(separator: "\n").map(String.init) == ["manifest.json"]
                    + summary.manifest.members.map(\.path))
            // Every member's bytes as Python's tarfile reads them: the sizes and SHA-256s the
            // manifest names.
            let script =
                "import hashlib, sys, tarfile\nwith tarfile.open(sys.argv[1], 'r:gz') as t:\n    for m in t:\n        print(m.name, m.size, hashlib.sha256(t.extractfile(m).read()).hexdigest())"
            let (pythonStatus, printed) = try Conformance.run("/usr/bin/python3", ["-c", script, bundle])
            #expect(pythonStatus == 0, "\(printed)")
            let lines = printed.split(separator: "\n").map(String.init)
            #expect(
                lines.dropFirst() == ArraySlice(summary.manifest.members.map { "\($0.path) \($0.bytes) \($0.sha256)" }))
        }
    }

    @Test("every value type survives, assets included, and a selection backs up only itself")
    func valuesAndSelection() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.notes)
        let query = RecordQuery(recordTypes: ["Note"], predicate: try RecordPredicate.parse("tags CONTAINS 'trip'"))
        let bundle = scratch.path("trip.ckbundle")
        let summary = try BundleWriter().write(store, query: query, to: bundle)
        let expected = try store.read { session in
            var found: [Record] = []
            try session.forEach(query) { found.append($0) }
            return found
        }
        #expect(summary.manifest.recordCount == expected.count && expected.count > 0)
        let copy = try restore(bundle, into: scratch.path("trip.sqlite"))
        #expect(try everything(copy) == expected)
        let types = Set(expected.flatMap { $0.fields.map { $0.value.type.primitive } })
        #expect(
            types.contains(.asset) && types.contains(.location) && types.contains(.bytes) && types.contains(.double))
    }

    /// A store whose records name real asset files: an empty one, a 2.5 MB one (several
    /// chunks), one shared by two records, and a list of assets.
    private func assetStore(_ scratch: Scratch) throws -> (RecordStore, [String: [UInt8]]) {
        let store = try RecordStore(path: scratch.path("assets.sqlite"))
        try store.importSchema(
            SchemaParser.parse("DEFINE SCHEMA RECORD TYPE Photo (title STRING, cover ASSET, pages LIST<ASSET>);"))
        var generator = SystemRandomNumberGenerator()
        let files: [String: [UInt8]] = [
            "empty": [],
            "big": (0..<2_500_000).map { _ in UInt8.random(in: 0...255, using: &generator) },
            "small": Array("a page of a family recipe book".utf8),
            "other": Array("another page".utf8),
        ]
        for (name, bytes) in files { try Data(bytes).write(to: URL(fileURLWithPath: scratch.path(name))) }
        func asset(_ name: String) -> FieldValue {
            .asset(Asset(fileChecksum: "ck-\(name)", size: Int64(files[name]!.count), localPath: name))
        }
        let lines = [
            ("p1", ["cover": asset("big"), "pages": .list(.asset, [asset("small"), asset("other")])]),
            ("p2", ["cover": asset("small"), "title": .string("shares a file with p1")]),
            ("p3", ["cover": asset("empty")]),
            ("p4", ["title": .string("no assets")]),
        ].map { name, fields in
            Record(id: RecordID(recordName: name), recordType: "Photo", fields: RecordFields(fields))
        }
        var options = ImportOptions()
        options.assetDirectory = scratch.url.path
        let summary = try RecordImporter(store: store, options: options).run([ArrayRecordSource(lines)])
        #expect(summary.assets == 4)
        return (store, files)
    }

    private func assetBytes(_ store: RecordStore) throws -> [String: [UInt8]] {
        try store.read { session in
            var found: [String: [UInt8]] = [:]
            try session.forEach(RecordQuery()) { record in
                record.forEachAsset { _, asset in
                    guard let sha256 = asset.sha256 else { return }
                    var bytes: [UInt8] = []
                    if (try? session.readAsset(sha256) { bytes += $0 }) == true { found[sha256] = bytes }
                }
            }
            return found
        }
    }

    @Test("asset files go into the store on import and travel in the bundle as assets/<sha256>")
    func assetFiles() throws {
        let scratch = Scratch()
        let (store, files) = try assetStore(scratch)
        let stored = try assetBytes(store)
        #expect(Set(stored.values) == Set(files.values))
        let p1 = try #require(try store.read { try $0.record(RecordID(recordName: "p1")) })
        guard case .asset(let cover)? = p1.fields["cover"] else {
            Issue.record("p1 has no cover")
            return
        }
        #expect(cover.size == 2_500_000 && stored[cover.sha256!] == files["big"])

        let bundle = scratch.path("photos.ckbundle")
        let summary = try BundleWriter().write(store, to: bundle)
        let assetMembers = summary.manifest.members.filter { $0.kind == "asset" }
        #expect(assetMembers.count == 4)
        #expect(
            assetMembers.allSatisfy { $0.path == "assets/" + $0.sha256 && stored[$0.sha256]?.count == Int($0.bytes) })
        let (status, listing) = try Conformance.run("/bin/tar", ["-tzf", bundle])
        #expect(status == 0 && listing.contains("assets/\(cover.sha256!)"))
        #expect(verify(bundle) == nil)

        let copy = try restore(bundle, into: scratch.path("copy.sqlite"))
        #expect(try everything(copy) == everything(store))
        #expect(try assetBytes(copy) == stored)
        #expect(try copy.read { try $0.assetTotals() } == store.read { try $0.assetTotals() })

        // A selection carries only the files its records name.
        let part = scratch.path("p2.ckbundle")
        let partSummary = try BundleWriter().write(
            store, query: RecordQuery(predicate: try RecordPredicate.parse("title = 'shares a file with p1'")), to: part
        )
        #expect(
            partSummary.manifest.members.filter { $0.kind == "asset" }.map(\.sha256) == [
                stored.first { $0.value == files["small"] }!.key
            ])
    }

    @Test("a damaged or misnamed asset member is refused and restores nothing")
    func damagedAssets() throws {
        let scratch = Scratch()
        let (store, _) = try assetStore(scratch)
        let bundle = scratch.path("photos.ckbundle")
        _ = try BundleWriter().write(store, to: bundle)
        let unpacked = try Unpacked(bundle)
        let index = try #require(unpacked.members.firstIndex { $0.path.hasPrefix("assets/") && $0.bytes.count > 1000 })

        var flipped = unpacked
        flipped.members[index].bytes[1234] ^= 0x40
        let flippedPath = scratch.path("flipped.ckbundle")
        try flipped.write(flippedPath)
        #expect(verify(flippedPath)?.contains("\(unpacked.members[index].path)): its SHA-256 does not match") == true)
        #expect(throws: BundleError.self) { _ = try restore(flippedPath, into: scratch.path("never.sqlite")) }
        let never = try RecordStore(path: scratch.path("never.sqlite"))
        #expect(try never.read { try $0.assetTotals().count } == 0 && everything(never).isEmpty)

        var dropped = unpacked
        let droppedPath = unpacked.members[index].path
        dropped.members.remove(at: index)
        let droppedFile = scratch.path("dropped.ckbundle")
        try dropped.write(droppedFile)
        #expect(verify(droppedFile)?.contains("\(droppedPath)): is in the manifest but not in the bundle") == true)

        // The manifest renamed to a path that is not the member's own SHA-256.
        var renamed = unpacked
        let sha = String(unpacked.members[index].path.dropFirst("assets/".count))
        let fake = String(repeating: "0", count: 64)
        renamed.manifestText = renamed.manifestText.replacingOccurrences(of: "assets/\(sha)", with: "assets/\(fake)")
        renamed.members[index].path = "assets/\(fake)"
        let renamedFile = scratch.path("renamed.ckbundle")
        try renamed.write(renamedFile)
        #expect(verify(renamedFile)?.contains("must be named after its SHA-256") == true)
    }

    @Test("import --assets refuses a file that is not the bytes the value names, and climbing out of the folder")
    func assetImportErrors() throws {
        let scratch = Scratch()
        let store = try RecordStore(path: scratch.path("a.sqlite"))
        try store.importSchema(SchemaParser.parse("DEFINE SCHEMA RECORD TYPE Photo (cover ASSET);"))
        try Data("twelve bytes".utf8).write(to: URL(fileURLWithPath: scratch.path("f")))
        var options = ImportOptions()
        options.assetDirectory = scratch.url.path
        func run(_ asset: Asset) -> String? {
            let record = Record(id: RecordID(recordName: "p"), recordType: "Photo", fields: ["cover": .asset(asset)])
            do {
                _ = try RecordImporter(store: store, options: options).run([ArrayRecordSource([record])])
                return nil
            } catch { return "\(error)" }
        }
        #expect(
            run(Asset(fileChecksum: "x", size: 13, localPath: "f"))?.contains("the asset is 12 bytes; 13 were expected")
                == true)
        #expect(
            run(Asset(fileChecksum: "x", size: 12, localPath: "nope"))?.contains(
                "names no file inside the assets folder") == true)
        // Nothing outside the folder is read, and the refusal says nothing about what is there:
        // an absolute path, a climb out, and links out of the folder to a file, to a folder and
        // to nothing at all get the same words, never the outside file's size.
        let outside = Scratch()
        try Data("secret outside the folder".utf8).write(to: URL(fileURLWithPath: outside.path("secret")))
        try FileManager.default.createDirectory(atPath: scratch.path("inner"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: scratch.path("inner/link-file"), withDestinationPath: outside.path("secret"))
        try FileManager.default.createSymbolicLink(
            atPath: scratch.path("inner/link-folder"), withDestinationPath: outside.url.path)
        try FileManager.default.createSymbolicLink(
            atPath: scratch.path("inner/link-nothing"), withDestinationPath: outside.path("nothing"))
        options.assetDirectory = scratch.path("inner")
        for path in [
            outside.path("secret"), "../f", "link-file", "link-folder/secret", "link-nothing", "/etc/hostname",
        ] {
            let message = run(Asset(fileChecksum: "x", size: 3, localPath: path))
            #expect(
                message?.contains("the asset path '\(path)' names no file inside the assets folder") == true,
                "\(path): \(message ?? "accepted")")
            #expect(
                message?.contains("25 bytes") == false && message?.contains("is 25") == false
                    && message?.contains(" bytes") == false, "\(path): \(message ?? "")")
        }
        options.assetDirectory = scratch.url.path
        #expect(
            run(Asset(fileChecksum: "x", size: 12, sha256: String(repeating: "a", count: 64)))?.contains(
                "no file for asset") == true)
        #expect(try store.read { try $0.assetTotals().count } == 0 && everything(store).isEmpty)
        #expect(run(Asset(fileChecksum: "x", size: -1, localPath: "f")) == nil)
        let record = try #require(try store.read { try $0.record(RecordID(recordName: "p")) })
        let (_, sum) = try Conformance.run("/usr/bin/sha256sum", [scratch.path("f")])
        #expect(
            record.fields["cover"]
                == .asset(Asset(fileChecksum: "x", size: 12, localPath: "f", sha256: String(sum.prefix(64)))))
    }

    @Test("truncation and flipped bytes anywhere are refused, by each inflater")
    func damage() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyTodo)
        let bundle = scratch.path("b.ckbundle")
        _ = try BundleWriter().write(store, to: bundle)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: bundle)))
        for cut in [5, 100, bytes.count / 4, bytes.count / 2, bytes.count - 20, bytes.count - 2] {
            let damaged = scratch.path("cut-\(cut).ckbundle")
            try Data(bytes[..<cut]).write(to: URL(fileURLWithPath: damaged))
            for engine in GzipReader.Engine.available {
                #expect(verify(damaged, engine: engine) != nil, "cut at \(cut), read by \(engine)")
            }
        }
        for position in stride(from: 20, to: bytes.count - 8, by: bytes.count / 15) {
            var flipped = bytes
            flipped[position] ^= 0x01
            let damaged = scratch.path("flip-\(position).ckbundle")
            try Data(flipped).write(to: URL(fileURLWithPath: damaged))
            for engine in GzipReader.Engine.available {
                #expect(verify(damaged, engine: engine) != nil, "flipped byte \(position), read by \(engine)")
            }
        }
    }

    @Test("a manifest that lies, a missing member, an extra member, a damaged member are refused by name")
    func lies() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyTodo)
        let bundle = scratch.path("b.ckbundle")
        let summary = try BundleWriter().write(store, to: bundle)
        let task = try #require(summary.manifest.members.first { $0.recordType == "Task" })
        var cases: [(String, Unpacked, String)] = []

        var wrongSum = try Unpacked(bundle)
        wrongSum.manifestText = wrongSum.manifestText.replacingOccurrences(
            of: task.sha256, with: String(task.sha256.reversed()))
        cases.append(("wrong checksum", wrongSum, "\(task.path)): its SHA-256 does not match the manifest"))

        var wrongCount = try Unpacked(bundle)
        var lyingManifest = try JSONDecoder().decode(BundleManifest.self, from: Data(wrongCount.members[0].bytes))
        let taskIndex = try #require(lyingManifest.members.firstIndex { $0.path == task.path })
        lyingManifest.members[taskIndex].records = task.records! + 1
        wrongCount.members[0].bytes = Array(try JSONEncoder().encode(lyingManifest))
        cases.append(
            ("wrong count", wrongCount, "holds \(task.records!) records; the manifest says \(task.records! + 1)"))

        var missing = try Unpacked(bundle)
        missing.members.removeAll { $0.path == task.path }
        cases.append(("missing member", missing, "\(task.path)): is in the manifest but not in the bundle"))

        var extra = try Unpacked(bundle)
        extra.members.append(("records/private/_defaultZone/Task.jsonl", Array("{}\n".utf8)))
        cases.append(("extra member", extra, "is not in the manifest"))

        var edited = try Unpacked(bundle)
        let index = try #require(edited.members.firstIndex { $0.path == task.path })
        edited.members[index].bytes = Array(
            String(decoding: edited.members[index].bytes, as: UTF8.self).replacingOccurrences(
                of: "Take out the trash", with: "Take out the trasH"
            ).utf8)
        cases.append(("edited member", edited, "\(task.path)): its SHA-256 does not match the manifest"))

        var noManifest = try Unpacked(bundle)
        noManifest.members.removeFirst()
        cases.append(("no manifest", noManifest, "manifest.json is not its first member"))

        for (what, unpacked, words) in cases {
            let path = scratch.path("\(what).ckbundle")
            try unpacked.write(path)
            let message = verify(path)
            #expect(message?.contains(words) == true, "\(what): \(message ?? "accepted")")
            // A reader that has refused the bundle keeps refusing it: read on after the error,
            // it never ends as if the bundle were whole.
            if let reader = try? BundleReader(path: path) {
                var first: String?
                do { while try reader.next() != nil {} } catch { first = "\(error)" }
                var again: String?
                do { _ = try reader.next() } catch { again = "\(error)" }
                #expect(
                    first?.contains(words) == true && again == first,
                    "\(what): \(first ?? "accepted"), then \(again ?? "the end")")
            }
            // And a restore writes nothing.
            let target = scratch.path("\(what).sqlite")
            #expect(throws: (any Error).self) { _ = try restore(path, into: target) }
            if FileManager.default.fileExists(atPath: target) {
                #expect(try everything(try RecordStore(path: target)).isEmpty, "\(what)")
            }
        }
    }

    @Test(
        "checked after reading: a damaged records member is found by the second reading, the file opened is read again whatever becomes of its path, a file changed in place is refused, an encrypted bundle is checked as it is read"
    )
    func checkedAfterReading() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.familyTodo)
        let bundle = scratch.path("b.ckbundle")
        let summary = try BundleWriter().write(store, to: bundle)
        let task = try #require(summary.manifest.members.first { $0.recordType == "Task" })
        let total = summary.manifest.members.compactMap(\.records).reduce(0, +)
        #expect(total > 50)
        /// Reads every record; the records read, or the error.
        func readAll(_ reader: BundleReader) -> Result<Int, Error> {
            Result {
                var records = 0
                while let item = try reader.next() { if case .record = item { records += 1 } }
                return records
            }
        }

        // Sound: every record, and the second reading finds nothing.
        let sound = try BundleReader(path: bundle, checkRecordsAfterReading: true)
        #expect(sound.checksRecordsAfterReading)
        #expect(try readAll(sound).get() == total)
        #expect(sound.damageFound() == nil)
        try sound.finishChecks()

        // A records member edited (its gzip sound, its SHA-256 not the manifest's): every record
        // reads, since the member was not hashed on the way; the second reading names it, again
        // on a second call; read as it is, the same bundle is refused at the member.
        var edited = try Unpacked(bundle)
        let index = try #require(edited.members.firstIndex { $0.path == task.path })
        edited.members[index].bytes = Array(
            String(decoding: edited.members[index].bytes, as: UTF8.self)
                .replacingOccurrences(of: "Take out the trash", with: "Take out the trasH").utf8)
        let editedPath = scratch.path("edited.ckbundle")
        try edited.write(editedPath)
        let later = try BundleReader(path: editedPath, checkRecordsAfterReading: true)
        #expect(try readAll(later).get() == total)
        let words = "\(task.path)): its SHA-256 does not match the manifest"
        // For a consumer that failed after the end: the damage, the same at every call.
        for call in 1...2 {
            #expect(later.damageFound().map { "\($0)" }?.contains(words) == true, "call \(call)")
        }
        for call in 1...2 {
            #expect(throws: (any Error).self) { try later.finishChecks() }
            do { try later.finishChecks() } catch { #expect("\(error)".contains(words), "call \(call): \(error)") }
        }
        let atOnce = try BundleReader(path: editedPath)
        #expect(!atOnce.checksRecordsAfterReading)
        #expect(throws: (any Error).self) { _ = try readAll(atOnce).get() }
        #expect(throws: (any Error).self) { try atOnce.finishChecks() }

        // A reader stopped before the end has checked nothing, and says so.
        let early = try BundleReader(path: bundle, checkRecordsAfterReading: true)
        _ = try early.next()
        do {
            try early.finishChecks()
            Issue.record("a reader stopped early passed its checks")
        } catch {
            #expect("\(error)".contains("was not read to its end"), "\(error)")
        }

        // Whatever becomes of the path once the bundle is open — another bundle renamed over
        // it, or nothing left there — the second reading reads the file the first one opened.
        for what in ["another bundle put in its place", "the path removed"] {
            let moving = scratch.path("moving.ckbundle")
            try? FileManager.default.removeItem(atPath: moving)
            try FileManager.default.copyItem(atPath: bundle, toPath: moving)
            let reader = try BundleReader(path: moving, checkRecordsAfterReading: true)
            _ = try reader.next()
            if what == "the path removed" {
                try FileManager.default.removeItem(atPath: moving)
            } else {
                let swap = scratch.path("swap.ckbundle")
                try? FileManager.default.removeItem(atPath: swap)
                try FileManager.default.copyItem(atPath: editedPath, toPath: swap)
                #expect(rename(swap, moving) == 0)
            }
            #expect(try readAll(reader).get() == total - 1, "\(what)")
            #expect(throws: Never.self, "\(what)") { try reader.finishChecks() }
        }

        // The file changed in place between the readings (a byte in its middle, or cut short):
        // the second reading does not find the bytes of the first.
        let length = try #require(try FileManager.default.attributesOfItem(atPath: bundle)[.size] as? NSNumber).intValue
        for change in ["a byte in the middle", "cut short"] {
            let changing = scratch.path("changing.ckbundle")
            try? FileManager.default.removeItem(atPath: changing)
            try FileManager.default.copyItem(atPath: bundle, toPath: changing)
            let first = try HashingFileReader(path: changing, hashing: true)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while try buffer.withUnsafeMutableBytes({ try first.read(into: $0) }) > 0 {}
            let digest = try #require(first.digest)
            #expect(first.bytes == Int64(length))
            func secondReading() -> Error? {
                do {
                    try SecondReading(
                        file: try HashingFileReader(secondReadingOf: first), limits: DecompressionLimits(),
                        engine: .fastest,
                        expected: [task.path: task.sha256], first: (digest, first.bytes)
                    ).wait()
                    return nil
                } catch {
                    return error
                }
            }
            #expect(secondReading() == nil, "\(change): the file as it was")
            let handle = try #require(FileHandle(forUpdatingAtPath: changing))
            if change == "cut short" {
                try handle.truncate(atOffset: UInt64(length - 3))
            } else {
                try handle.seek(toOffset: UInt64(length / 2))
                let byte = try #require(try handle.read(upToCount: 1)).first!
                try handle.seek(toOffset: UInt64(length / 2))
                try handle.write(contentsOf: [byte ^ 0x01])
            }
            try handle.close()
            let message = secondReading().map { "\($0)" } ?? "accepted"
            #expect(message.contains("changing.ckbundle: changed while it was being read"), "\(change): \(message)")
        }
        // The second reading checks the members it is given against the digests it is given.
        let whole = try HashingFileReader(path: bundle, hashing: true)
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while try chunk.withUnsafeMutableBytes({ try whole.read(into: $0) }) > 0 {}
        let wrongDigest = SecondReading(
            file: try HashingFileReader(secondReadingOf: whole), limits: DecompressionLimits(), engine: .fastest,
            expected: [task.path: String(task.sha256.reversed())], first: (try #require(whole.digest), whole.bytes))
        do {
            try wrongDigest.wait()
            Issue.record("a wrong digest was accepted")
        } catch {
            #expect("\(error)".contains(words), "\(error)")
        }

        // An encrypted bundle is checked as it is read (its chunks are authenticated too).
        let secret = scratch.path("secret.ckbundle")
        _ = try BundleWriter().write(store, to: secret, passphrase: "p")
        let encrypted = try BundleReader(path: secret, passphrase: "p", checkRecordsAfterReading: true)
        #expect(!encrypted.checksRecordsAfterReading)
        #expect(try readAll(encrypted).get() == total)
    }

    @Test("encrypted bundles: round trip, a wrong passphrase, any changed, dropped or moved byte is refused")
    func encryption() throws {
        let scratch = Scratch()
        let store = try scratch.sampleStore(.relationshipCheckin)
        let bundle = scratch.path("secret.ckbundle")
        _ = try BundleWriter().write(store, to: bundle, passphrase: "correct horse battery staple")
        #expect(BundleEncryption.isEncrypted(path: bundle))
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: bundle)))
        // The records are not readable in the file.
        #expect(!String(decoding: bytes, as: UTF8.self).contains("DailyEntry_"))
        #expect(throws: BundleError.self) { _ = try BundleReader(path: bundle) }
        let reader = try BundleReader(path: bundle, passphrase: "correct horse battery staple")
        let copy = try RecordStore(path: scratch.path("copy.sqlite"))
        _ = try RecordImporter(store: copy, options: ImportOptions()).run([reader], schema: reader.schema)
        #expect(try everything(copy) == (try everything(store)))
        let wrong =
            "\((try? BundleReader(path: bundle, passphrase: "Correct horse battery staple")).map { _ in "accepted" } ?? "")"
        #expect(wrong.isEmpty)
        do { _ = try BundleReader(path: bundle, passphrase: "wrong") } catch {
            #expect("\(error)".contains("passphrase is wrong"))
        }
        func read(_ damaged: [UInt8]) -> String? {
            let path = scratch.path("damaged.ckbundle")
            try? Data(damaged).write(to: URL(fileURLWithPath: path))
            do {
                let reader = try BundleReader(path: path, passphrase: "correct horse battery staple")
                while try reader.next() != nil {}
                return nil
            } catch {
                return "\(error)"
            }
        }
        for position in stride(from: 30, to: bytes.count, by: max(1, bytes.count / 12)) {
            var damaged = bytes
            damaged[position] ^= 0x20
            #expect(read(damaged) != nil, "changed byte \(position)")
        }
        #expect(read(Array(bytes.dropLast(5)))?.contains("cut short") == true)

        // Chunks moved or dropped: several small chunks through the encryptor directly.
        var sealed: [UInt8] = []
        var header = BundleEncryption.newHeader(chunkSize: 1000)
        header.n = 1 << 10
        let plain = (0..<5500).map { UInt8($0 % 251) }
        let encryptor = try BundleEncryptor(passphrase: "p", header: header) { sealed += $0 }
        try encryptor.write(plain)
        try encryptor.finish()
        func decrypt(_ file: [UInt8]) -> Result<[UInt8], Error> {
            let path = scratch.path("chunks.bin")
            try? Data(file).write(to: URL(fileURLWithPath: path))
            return Result {
                let decryptor = try BundleDecryptor(path: path, passphrase: "p")
                var out: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 700)
                while true {
                    let n = try buffer.withUnsafeMutableBytes { try decryptor.read(into: $0) }
                    if n == 0 { return out }
                    out += buffer[0..<n]
                }
            }
        }
        #expect((try? decrypt(sealed).get()) == plain)
        let headerLength = sealed.firstIndex(of: 0x0A, after: BundleEncryption.magic.count)! + 1
        let chunkLength = 4 + 1000 + 16
        var swapped = Array(sealed[..<headerLength])
        swapped += sealed[(headerLength + chunkLength)..<(headerLength + 2 * chunkLength)]
        swapped += sealed[headerLength..<(headerLength + chunkLength)]
        swapped += sealed[(headerLength + 2 * chunkLength)...]
        #expect((try? decrypt(swapped).get()) == nil, "swapped chunks")
        let dropped = Array(sealed[..<headerLength]) + Array(sealed[(headerLength + chunkLength)...])
        #expect((try? decrypt(dropped).get()) == nil, "dropped first chunk")
        let cut = Array(sealed[..<(headerLength + 2 * chunkLength)])
        if case .failure(let error) = decrypt(cut) {
            #expect("\(error)".contains("cut short"))
        } else {
            Issue.record("a cut after a whole chunk was accepted")
        }
    }
}

extension Array where Element == UInt8 {
    fileprivate func firstIndex(of byte: UInt8, after start: Int) -> Int? {
        self[start...].firstIndex(of: byte)
    }
}

@Suite("encrypted bundle headers")
struct EncryptionHeaderTests {
    @Test("a crafted header's scrypt cost or chunk size is refused before any work")
    func craftedHeaders() throws {
        let scratch = Scratch()
        let path = scratch.path("crafted.ckbundle")
        var generous = BundleEncryption.newHeader()
        #expect(BundleEncryption.checkLimits(generous) == nil)
        for (change, expected) in [
            ({ (h: inout BundleEncryption.Header) in h.n = 1 << 22 }, "N = 4194304"),
            ({ h in h.r = 32 }, "r = 32"),
            ({ h in h.p = 16 }, "p = 16"),
            ({ h in h.n = 3 << 12 }, "N = 12288"),
            ({ h in h.chunkSize = 64 << 20 }, "chunks of 67108864 bytes"),
        ] as [((inout BundleEncryption.Header) -> Void, String)] {
            var header = BundleEncryption.newHeader()
            change(&header)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            try Data(BundleEncryption.magic + Array(try encoder.encode(header)) + [0x0A]).write(
                to: URL(fileURLWithPath: path))
            do {
                _ = try BundleDecryptor(path: path, passphrase: "x")
                Issue.record("accepted \(expected)")
            } catch {
                #expect("\(error)".contains(expected) && "\(error)".contains("refused before any work"), "\(error)")
            }
        }
        generous.n = BundleEncryption.maximumCost
        #expect(BundleEncryption.checkLimits(generous) == nil)
    }
}
