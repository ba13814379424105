import Foundation
import Records
import Testing

@testable import Formats

/// Parent and share links and a share's details in every format that carries system fields.
/// The shapes come from answers CloudKit gave: a root record's `share` with its zone and its
/// short GUID and stable URL, a share naming itself in `share` (an iCloud Drive
/// `records/resolve` answer), the share record of BennyKJohnson/OpenCloudKit e6cd4511
/// Tests/OpenCloudKitTests/Supporting/sharemetadata.json, and `parent` as the reference's Record
/// Dictionary has it (a single `recordName`).
@Suite("parent, share and share details in every format")
struct SharingFormatTests {
    static let schema: Schema = {
        var schema = try! SchemaParser.parse(
            """
            DEFINE SCHEMA
                RECORD TYPE Centre (name STRING, GRANT READ TO "_world");
                RECORD TYPE Room (name STRING, GRANT READ TO "_world");
            """)
        schema.recordTypes.append(.share)
        return schema
    }()
    static let owner = "_8e1c7debce61157051ce0aef01e83c7d"

    static let root = """
        {"recordName":"D06A308D","recordType":"Centre","fields":{"name":{"value":"My centre","type":"STRING"}},"recordChangeTag":"d",\
        "created":{"timestamp":1476619372877,"userRecordName":"\(owner)","deviceID":"1"},"modified":{"timestamp":1476619372877,"userRecordName":"\(owner)","deviceID":"iPad"},\
        "pluginFields":{},"share":{"recordName":"Share-C1FB","zoneID":{"zoneName":"Central","ownerRecordName":"\(owner)","zoneType":"REGULAR_CUSTOM_ZONE"}},\
        "stableUrl":{"routingKey":"0NE","displayedHostname":"www.icloud.com"},"shortGUID":"0NEa3AEPXwK71VM4gHFnvh2kw","deleted":false,\
        "zoneID":{"zoneName":"Central","ownerRecordName":"\(owner)","zoneType":"REGULAR_CUSTOM_ZONE"}}
        """
    static let share = """
        {"recordName":"Share-C1FB","recordType":"cloudkit.share","fields":{"cloudkit.title":{"value":"Centre","type":"STRING"}},"recordChangeTag":"e",\
        "created":{"timestamp":1476619372869,"userRecordName":"\(owner)","deviceID":"1"},"modified":{"timestamp":1476619374676,"userRecordName":"\(owner)","deviceID":"iPad"},\
        "share":{"recordName":"Share-C1FB","zoneID":{"zoneName":"Central","ownerRecordName":"\(owner)"}},\
        "publicPermission":"READ_WRITE","participants":[{"userIdentity":{"userRecordName":"\(owner)","nameComponents":{"givenName":"Benjamin","familyName":"Johnson"},\
        "lookupInfo":{"emailAddress":"benjamin@example.com"}},"type":"OWNER","acceptanceStatus":"ACCEPTED","permission":"READ_WRITE"},\
        {"participantId":"P-2","userIdentity":{"lookupInfo":{"phoneNumber":"+15550100"},"nameComponents":{}},"type":"USER","acceptanceStatus":"INVITED","permission":"READ_ONLY","orgUser":false,\
        "protectionInfo":{"bytes":"AAE=","pcsChangeTag":"x"},"outOfNetworkPrivateKey":{"bytes":"c2VjcmV0"}}],"invitedPCS":{"bytes":"AAI=","pcsChangeTag":"y"},\
        "owner":{"userIdentity":{"userRecordName":"\(owner)"},"type":"OWNER","acceptanceStatus":"ACCEPTED","permission":"READ_WRITE"},\
        "currentUserParticipant":{"userIdentity":{"userRecordName":"\(owner)"},"type":"OWNER","acceptanceStatus":"ACCEPTED","permission":"READ_WRITE"},\
        "shortGUID":"0NEa3AEPXwK71VM4gHFnvh2kw","pluginFields":{},"deleted":false,\
        "zoneID":{"zoneName":"Central","ownerRecordName":"\(owner)","zoneType":"REGULAR_CUSTOM_ZONE"}}
        """
    /// A root as a change feed gives it when its `share` names the share alone: the direct
    /// reader's case.
    static let bareRoot = """
        {"recordName":"D06A308E","recordType":"Centre","zoneID":{"zoneName":"Central","ownerRecordName":"\(owner)"},\
        "share":{"recordName":"Share-C1FC"},"parent":{"recordName":"D06A308D"},"fields":{"name":{"value":"Annex","type":"STRING"}}}
        """
    static let child = """
        {"recordName":"room-1","recordType":"Room","parent":{"recordName":"D06A308D"},"fields":{"name":{"value":"Kitchen","type":"STRING"}},\
        "zoneID":{"zoneName":"Central","ownerRecordName":"\(owner)"}}
        """

    func decode(_ text: String, style: ValueStyle? = nil) throws -> Record {
        try JSONRecordCodec(schema: Self.schema, readStyle: style).decode(try JSONParser.parse(text))
    }

    func encode(_ record: Record, style: ValueStyle) -> String {
        var out = JSONWriter()
        JSONRecordCodec(schema: Self.schema).encode(record, style: style, to: &out)
        return out.text
    }

    @Test(
        "CloudKit's answers read: parent and share by name, a share's details whole and in order, a root's short GUID and stable URL"
    )
    func readsAnswers() throws {
        let root = try decode(Self.root)
        #expect(root.share == "Share-C1FB" && root.parent == nil)
        #expect(
            root.shareDetails
                == #"{"stableUrl":{"routingKey":"0NE","displayedHostname":"www.icloud.com"},"shortGUID":"0NEa3AEPXwK71VM4gHFnvh2kw"}"#
        )
        let share = try decode(Self.share)
        #expect(share.isShare && share.share == "Share-C1FB" && share["cloudkit.title"] == .string("Centre"))
        let details = try #require(share.shareDetails.flatMap(ShareDetails.init(json:)))
        #expect(
            details.object.keys == ["publicPermission", "participants", "owner", "currentUserParticipant", "shortGUID"])
        #expect(details.publicPermission == "READ_WRITE" && details.shortGUID == "0NEa3AEPXwK71VM4gHFnvh2kw")
        #expect(details.url == "https://www.icloud.com/share/0NEa3AEPXwK71VM4gHFnvh2kw")
        #expect(details.participants.map(\.displayName) == ["Benjamin Johnson", "+15550100"])
        #expect(
            details.participants.map(\.acceptanceStatus) == ["ACCEPTED", "INVITED"]
                && details.participants[1].permission == "READ_ONLY")
        #expect(details.owner?.userRecordName == Self.owner && details.currentUserParticipant?.type == "OWNER")
        // What ckport does not model is kept as CloudKit gave it; the keys CloudKit protects a
        // share with are not kept anywhere.
        #expect(share.shareDetails!.contains(#""permission":"READ_ONLY","orgUser":false}"#), "\(share.shareDetails!)")
        for key in ["protectionInfo", "outOfNetworkPrivateKey", "invitedPCS"] {
            #expect(!share.shareDetails!.contains(key))
        }
        let child = try decode(Self.child)
        #expect(child.parent == "D06A308D" && child.share == nil && child.shareDetails == nil)
    }

    @Test(
        "written back in CloudKit's shape, the links and details read again as the same record; the direct reader agrees"
    )
    func canonicalRoundTrip() throws {
        // The direct reader takes links in their usual form itself.
        let scanner = CanonicalRecordScanner(
            fieldTypes: ["Centre": ["name": .string], "Room": ["name": .string]], defaultRecordType: nil,
            defaultZone: .defaultZone)
        for text in [Self.bareRoot, Self.child] {
            let scanned = try #require(
                Array(text.utf8).withUnsafeBytes { scanner.scan($0) }, "the direct reader gave up on \(text)")
            #expect(scanned == (try decode(text)))
            #expect(scanned.parent != nil)
        }
        #expect(try decode(Self.bareRoot).share == "Share-C1FC")
        for text in [Self.root, Self.share, Self.child, Self.bareRoot] {
            let record = try decode(text)
            let written = encode(record, style: .canonical)
            let again = try decode(written)
            #expect(again == record, "\(written)")
            #expect(encode(again, style: .canonical) == written)
            let (fast, _) = try Array(written.utf8).withUnsafeBytes {
                try JSONRecordCodec(schema: Self.schema).decode(bytes: $0)
            }
            #expect(fast == record)
        }
        let child = encode(try decode(Self.child), style: .canonical)
        #expect(child.contains(#""parent":{"recordName":"D06A308D"},"fields":"#), "\(child)")
        let share = encode(try decode(Self.share), style: .canonical)
        #expect(
            share.contains(
                #""share":{"recordName":"Share-C1FB"},"fields":{"cloudkit.title":{"value":"Centre","type":"STRING"}},"publicPermission":"READ_WRITE","participants":[{"#
            ), "\(share)")
        // A tombstone carries no links.
        var gone = try decode(Self.child)
        gone.isDeleted = true
        #expect(!encode(gone, style: .canonical).contains("parent"))
    }

    @Test("the plain shape names them parentRecordName, shareRecordName and shareDetails, and reads them back")
    func plainRoundTrip() throws {
        for text in [Self.root, Self.share, Self.child] {
            let record = try decode(text)
            let plain = encode(record, style: .plain)
            #expect(try decode(plain, style: .plain) == record, "\(plain)")
        }
        let plain = encode(try decode(Self.root), style: .plain)
        #expect(plain.contains(#""shareRecordName":"Share-C1FB","shareDetails":{"stableUrl":"#), "\(plain)")
        #expect(
            JSONRecordCodec.plainCollisions(
                in: try SchemaParser.parse("DEFINE SCHEMA RECORD TYPE T (parentRecordName STRING);")) == [
                    "T.parentRecordName"
                ])
    }

    @Test(
        "bad links are refused with the record, the key and the reason",
        arguments: [
            (
                #"{"recordName":"r","recordType":"Room","parent":"D06A308D","fields":{}}"#,
                "record 'r', parent: parent must be an object {\"recordName\": …}, found the string \"D06A308D\""
            ),
            (
                #"{"recordName":"r","recordType":"Room","parent":{"name":"x"},"fields":{}}"#,
                "record 'r', parent.recordName: parent needs the record name of the parent record as text"
            ),
            (
                #"{"recordName":"r","recordType":"Room","share":{"recordName":"s","zoneID":{"zoneName":"Other"}},"fields":{}}"#,
                "record 'r', share.zoneID: share is in zone 'Other', but CloudKit keeps a record's share in the record's own zone ('_defaultZone')"
            ),
            (
                #"{"recordName":"r","recordType":"Room","parentRecordName":"x","shareDetails":{"recordName":"y"}}"#,
                "record 'r', shareDetails.recordName: shareDetails holds what a share says beyond its record; 'recordName' belongs to the record itself"
            ),
        ])
    func refusals(_ text: String, _ message: String) {
        do {
            _ = try decode(text)
            Issue.record("taken: \(text)")
        } catch {
            #expect("\(error)" == message)
        }
    }

    @Test("a property list carries the links as strings and a share's details as their JSON text, and reads them back")
    func plist() throws {
        let records = try [Self.root, Self.share, Self.child].map { try decode($0) }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ckport-share-\(UUID().uuidString).plist"
        ).path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = PlistRecordWriter(output: try OutputFile(path: path))
        for record in records { try writer.write(record) }
        try writer.finish()
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains("<key>parentRecordName</key>\n\t\t<string>D06A308D</string>"), "\(text)")
        let reader = try PlistRecordReader(
            input: ByteInput(name: "s.plist", bytes: Array(text.utf8)),
            codec: JSONRecordCodec(schema: Self.schema, readStyle: .plain, defaultZone: records[0].zone))
        var read: [Record] = []
        while let item = try reader.next() {
            guard case .record(let sourced) = item else {
                Issue.record("\(item)")
                continue
            }
            read.append(sourced.record)
        }
        #expect(read == records)
    }

    @Test("CSV with system columns carries them too, and reads them back")
    func csv() throws {
        let share = try decode(Self.share)
        let text = try writeCSV(
            [share], type: "cloudkit.share", schema: Self.schema, options: CSVWriteOptions(includeSystem: true))
        let header = text.components(separatedBy: "\r\n")[0]
        #expect(header.hasSuffix(",modifiedDevice,parentRecordName,shareRecordName,shareDetails"), "\(header)")
        let items = try csvRecords(
            text, schema: Self.schema, options: CSVReadOptions(defaultRecordType: "cloudkit.share"))
        guard case .record(let sourced)? = items.first else {
            Issue.record("\(items)")
            return
        }
        #expect(sourced.record == share)
        let bad = text.replacingOccurrences(of: "\"{\"\"publicPermission", with: "\"[\"\"publicPermission")
        let refused = try csvRecords(
            bad, schema: Self.schema, options: CSVReadOptions(defaultRecordType: "cloudkit.share"))
        guard case .invalid(let issue, _)? = refused.first else {
            Issue.record("\(refused)")
            return
        }
        #expect(
            issue.message.description.hasPrefix("shareDetails is a JSON object of what CloudKit says of a share"),
            "\(issue.message)")
    }
}
