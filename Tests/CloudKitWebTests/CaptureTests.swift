import CloudKitEmulator
import CloudKitWeb
import Foundation
import Records
import TestSupport
import Testing

@testable import CKPort

/// The emulator against Fixtures/captures.json: what public captures of CloudKit's real
/// answers (and, where none exist, the reference's examples) show, each case with its source.
@Suite("the emulator against public captures of CloudKit's answers")
struct CaptureTests {
    nonisolated(unsafe) static let fixture: [String: Any] = {
        let url = packageRoot.appendingPathComponent("Tests/CloudKitWebTests/Fixtures/captures.json")
        return (try? JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any]) ?? [:]
    }()
    nonisolated(unsafe) static let cases = fixture["cases"] as? [[String: Any]] ?? []
    static let container = "iCloud.com.example.Family"

    @Test("every case names its source, and there are cases for each thing the issue lists")
    func sources() {
        #expect(Self.cases.count == 20)
        for entry in Self.cases {
            let source = entry["source"] as? [String: Any] ?? [:]
            let named =
                (source["repository"] != nil && (source["commit"] as? String)?.count == 40 && source["path"] != nil)
                || source["page"] != nil
            #expect(named, "\(entry["name"] ?? "?"): no repository, commit and path, nor a page")
            #expect(
                ["live", "shaped", "reference"].contains(entry["kind"] as? String ?? ""), "\(entry["name"] ?? "?")")
        }
    }

    @Test(
        "each case: the emulator answers with the status, keys, values and patterns the capture shows",
        arguments: cases.indices)
    func answer(_ index: Int) async throws {
        let entry = Self.cases[index]
        let name = entry["name"] as? String ?? "?"
        let emulator = CloudKitEmulator(container: Self.container)
        emulator.defineSchema(try SchemaParser.parse(Self.fixture["schema"] as? String ?? ""))
        // A token with a '+' in it, as most of Apple's are: one sent unencoded then shows.
        var token = emulator.signIn(apiToken: "api-1")
        for _ in 0..<20 where !token.contains("+") { token = emulator.signIn(apiToken: "api-1") }
        let first = token
        let scope = CloudKitDatabase.Scope(rawValue: entry["database"] as? String ?? "private")!
        let database = try CloudKitDatabase(container: Self.container, environment: .development, scope: scope)
        func send(_ operation: String, body: Any?, method: String? = nil, tokenMode: String = "current") throws
            -> CloudKitHTTPResponse
        {
            let verb = method ?? (operation == "zones/list" || operation == "users/current" ? "GET" : "POST")
            var url: URL
            switch tokenMode {
            case "none": url = database.url(operation, query: [URLQueryItem(name: "ckAPIToken", value: "api-1")])
            case "unencoded":
                url = URL(string: database.url(operation).absoluteString + "?ckAPIToken=api-1&ckWebAuthToken=" + token)!
            case "first":
                url = database.url(
                    operation,
                    query: [
                        URLQueryItem(name: "ckAPIToken", value: "api-1"),
                        URLQueryItem(name: "ckWebAuthToken", value: first),
                    ])
            default:
                url = database.url(
                    operation,
                    query: [
                        URLQueryItem(name: "ckAPIToken", value: "api-1"),
                        URLQueryItem(name: "ckWebAuthToken", value: token),
                    ])
            }
            let data = try body.map { try JSONSerialization.data(withJSONObject: $0) } ?? Data()
            let response = try emulator.respond(
                CloudKitHTTPRequest(method: verb, url: url, headers: [], body: verb == "GET" ? Data() : data))
            if let next = response.header("X-Apple-CloudKit-Web-Auth-Token") { token = next }
            return response
        }
        for step in entry["before"] as? [[String: Any]] ?? [] {
            let response = try send(step["operation"] as! String, body: step["body"])
            #expect(response.status == 200, "\(name): a step before answered \(response.status)")
        }
        if entry["scenario"] as? String == "share" {
            _ = try send(
                "zones/modify",
                body: ["operations": [["operationType": "create", "zone": ["zoneID": ["zoneName": "Family"]]]]])
            _ = try send(
                "records/modify",
                body: [
                    "zoneID": ["zoneName": "Family"],
                    "operations": [
                        [
                            "operationType": "create",
                            "record": [
                                "recordName": "household-1", "recordType": "Chore",
                                "fields": ["title": ["value": "Smith Family", "type": "STRING"]],
                            ],
                        ],
                        [
                            "operationType": "create",
                            "record": [
                                "recordName": "chore-a", "recordType": "Chore", "parent": ["recordName": "household-1"],
                            ],
                        ],
                    ],
                ])
            #expect(
                emulator.share(
                    "household-1", zone: "Family", title: "Smith Family To-Do",
                    participants: [("_grandma", "READ_WRITE", true)]) != nil)
        }
        var body = entry["body"]
        if entry["scenario"] as? String == "root" {
            // A zone and a root record to share (asking for its short GUID, as a client that
            // will share it does); "$tag:NAME" in the body is NAME's change tag now.
            _ = try send(
                "zones/modify",
                body: ["operations": [["operationType": "create", "zone": ["zoneID": ["zoneName": "Family"]]]]])
            _ = try send(
                "records/modify",
                body: [
                    "zoneID": ["zoneName": "Family"],
                    "operations": [
                        [
                            "operationType": "create",
                            "record": [
                                "recordName": "household-1", "recordType": "Chore", "createShortGUID": true,
                                "fields": ["title": ["value": "Smith Family", "type": "STRING"]],
                            ],
                        ]
                    ],
                ])
            func tag(_ name: String) throws -> String {
                let found = try send(
                    "records/lookup", body: ["zoneID": ["zoneName": "Family"], "records": [["recordName": name]]])
                let object = try JSONSerialization.jsonObject(with: found.body) as? [String: Any]
                return ((object?["records"] as? [[String: Any]])?.first?["recordChangeTag"] as? String) ?? "?"
            }
            func substitute(_ value: Any) throws -> Any {
                if let text = value as? String, text.hasPrefix("$tag:") { return try tag(String(text.dropFirst(5))) }
                if let object = value as? [String: Any] { return try object.mapValues(substitute) }
                if let array = value as? [Any] { return try array.map(substitute) }
                return value
            }
            body = try body.map(substitute)
        }
        // A second request first, so that the case's token mode "first" names an older token.
        if entry["token"] as? String == "first" { _ = try send("zones/list", body: nil) }
        let response = try send(
            entry["operation"] as! String, body: body, method: entry["method"] as? String,
            tokenMode: entry["token"] as? String ?? "current")
        #expect(
            response.status == entry["status"] as? Int,
            "\(name): HTTP \(response.status) \(String(decoding: response.body.prefix(400), as: UTF8.self))")
        for (header, pattern) in entry["headerPatterns"] as? [String: String] ?? [:] {
            let value = response.header(header) ?? ""
            #expect(value.wholeMatch(of: try Regex(pattern)) != nil, "\(name): \(header) is \(value.prefix(80))…")
        }
        let answer = try JSONSerialization.jsonObject(with: response.body, options: [.fragmentsAllowed])
        for path in entry["keys"] as? [[Any]] ?? [] {
            #expect(
                jsonValue(at: path, in: answer) != nil,
                "\(name): no \(path) in \(String(decoding: response.body.prefix(800), as: UTF8.self))")
        }
        for path in entry["absent"] as? [[Any]] ?? [] {
            #expect(jsonValue(at: path, in: answer) == nil, "\(name): \(path) should not be there")
        }
        for (dotted, expected) in entry["values"] as? [String: String] ?? [:] {
            let found = jsonValue(at: Self.path(dotted), in: answer)
            #expect(
                found.map(Self.render) == expected,
                "\(name): \(dotted) is \(found.map(Self.render) ?? "missing"), the capture shows \(expected)")
        }
        for (dotted, pattern) in entry["patterns"] as? [String: String] ?? [:] {
            let found = jsonValue(at: Self.path(dotted), in: answer).map(Self.render) ?? ""
            #expect(found.wholeMatch(of: try Regex(pattern)) != nil, "\(name): \(dotted) is \(found)")
        }
    }

    @Test(
        "the answers' shapes as captured read the way ckport reads them: owners, zone types, plugin fields, references with their zone, encrypted and empty lists"
    )
    func clientReadsCapturedShapes() throws {
        let schema = try SchemaParser.parse(
            """
            DEFINE SCHEMA
                RECORD TYPE Note (
                    "___recordID" REFERENCE QUERYABLE,
                    title     STRING,
                    secret    ENCRYPTED STRING,
                    blob      ENCRYPTED BYTES,
                    tags      LIST<STRING>,
                    labels    LIST<STRING>,
                    folder    REFERENCE,
                    photo     ASSET,
                    GRANT READ TO "_world"
                );
            """)
        let owner = "_aca0fa3547ae9f9cd1f7e25fed948a20"
        // The keys of a live records/query answer (brightdigit/MistKit 967818493c…), a shaped
        // change feed's encrypted values and deletions (timlaing/pyicloud afd5d57d…), UNKNOWN_LIST
        // (agilebits/AgileCloudSDK#26) beside a typed empty list (brightdigit/MistKit#481).
        let answer = """
            {"records":[{"recordName":"n-1","recordType":"Note","fields":{
               "title":{"value":"Finish the video","type":"STRING"},
               "secret":{"value":"under the mat","type":"STRING","isEncrypted":true},
               "blob":{"value":"AQID","type":"ENCRYPTED_BYTES"},
               "tags":{"value":[],"type":"UNKNOWN_LIST"},
               "labels":{"value":[],"type":"STRING_LIST"},
               "folder":{"value":{"recordName":"f-1","action":"NONE","zoneID":{"zoneName":"Notes","ownerRecordName":"\(owner)","zoneType":"REGULAR_CUSTOM_ZONE"}},"type":"REFERENCE"},
               "photo":{"value":{"fileChecksum":"AUs4CRcY","size":3,"downloadURL":"https://cvws.icloud-content.com/B/x"},"type":"ASSETID"}},
             "pluginFields":{},"recordChangeTag":"kf3z2sxt",
             "created":{"timestamp":1600175332906,"userRecordName":"\(owner)","deviceID":"2"},
             "modified":{"timestamp":1600175404558,"userRecordName":"\(owner)","deviceID":"2"},
             "deleted":false,"zoneID":{"zoneName":"Notes","ownerRecordName":"\(owner)","zoneType":"REGULAR_CUSTOM_ZONE"}},
             {"recordName":"n-0","deleted":true}],
             "syncToken":"AQAAAaBJidqD","moreComing":false}
            """
        let zone = ZoneID(scope: .private, zoneName: "Notes")
        var page = try CloudPage(Data(answer.utf8), operation: "records/changes")
        page.decode(
            with: JSONRecordCodec(schema: schema, readStyle: .canonical, defaultZone: zone), name: "page", zone: zone)
        #expect(page.deletedNames == ["n-0"] && page.syncToken == "AQAAAaBJidqD")
        guard case .record(let sourced)? = page.items.first else {
            Issue.record("\(page.items)")
            return
        }
        let record = sourced.record
        // In the private database the owner CloudKit names is the signed-in user: the store
        // keeps the zone under the default owner, so the records can go to another account.
        #expect(record.zone == zone && record.zone.ownerRecordName == ZoneID.defaultOwnerName)
        #expect(record["secret"] == .string("under the mat") && record["blob"] == .bytes([1, 2, 3]))
        #expect(record["tags"] == .list(.string, []) && record["labels"] == .list(.string, []))
        #expect(record["folder"] == .reference(Reference(recordName: "f-1")) && record.changeTag == "kf3z2sxt")
        guard case .asset(let photo)? = record["photo"] else {
            Issue.record("no asset")
            return
        }
        #expect(photo.downloadURL == "https://cvws.icloud-content.com/B/x" && photo.size == 3)
        // zones/list as captured: the private database's owner is dropped, the shared one's kept.
        let entry = try JSONDecoder().decode(
            CloudKitWire.ZoneID.self,
            from: Data(#"{"zoneName":"Notes","ownerRecordName":"\#(owner)","zoneType":"REGULAR_CUSTOM_ZONE"}"#.utf8))
        #expect(CloudSync.zoneID(entry, in: .private) == zone)
        #expect(
            CloudSync.zoneID(entry, in: .shared) == ZoneID(scope: .shared, zoneName: "Notes", ownerRecordName: owner))
        let publicZone = try JSONDecoder().decode(
            CloudKitWire.ZoneID.self,
            from: Data(
                #"{"zoneName":"_defaultZone","ownerRecordName":"ffffffffffffffff","zoneType":"DEFAULT_ZONE"}"#.utf8))
        #expect(CloudSync.zoneID(publicZone, in: .public) == ZoneID(scope: .public, zoneName: "_defaultZone"))
    }

    static func path(_ dotted: String) -> [Any] {
        dotted.split(separator: ".").map { Int($0).map { $0 as Any } ?? String($0) }
    }

    /// A value as the fixture writes it: text as it is, anything else as JSON.
    static func render(_ value: Any) -> String {
        if let text = value as? String { return text }
        guard let data = try? JSONSerialization.data(withJSONObject: [value]) else { return "\(value)" }
        return String(decoding: data.dropFirst().dropLast(), as: UTF8.self)
    }

}

/// The value at a path of keys and indexes (`["zones", 0, "zoneID"]`) in parsed JSON, if any.
func jsonValue(at path: [Any], in json: Any) -> Any? {
    var current: Any? = json
    for step in path {
        if let key = step as? String {
            current = (current as? [String: Any])?[key]
        } else if let index = step as? Int, let array = current as? [Any] {
            current = array.indices.contains(index) ? array[index] : nil
        } else {
            return nil
        }
    }
    return current
}
