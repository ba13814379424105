import CloudKitWeb
import Foundation
import Records
import Testing

@Suite("CloudKit's messages as models")
struct WireTests {
    /// A record as CloudKit answered it in OpenCloudKit's capture of a share in a change feed
    /// (BennyKJohnson/OpenCloudKit), with a key no model names and a field key of a later API.
    static let share = #"""
        {"recordName":"Share-1","recordType":"cloudkit.share","recordChangeTag":"kf3z2sxt",
         "fields":{"cloudkit.title":{"value":"Chores","type":"STRING"},
                   "count":{"value":3,"type":"INT64","futureKey":{"a":[1,2.5,null,true]}}},
         "pluginFields":{},"created":{"timestamp":1764982860000,"userRecordName":"_a1","deviceID":"2"},
         "zoneID":{"zoneName":"Family","ownerRecordName":"_a1","zoneType":"REGULAR_CUSTOM_ZONE"},
         "publicPermission":"NONE","shortGUID":"0abc",
         "participants":[{"participantId":"p1","type":"OWNER","acceptanceStatus":"ACCEPTED","permission":"READ_WRITE",
                          "userIdentity":{"userRecordName":"_a1","nameComponents":{}}}],
         "displayedHostname":"www.icloud.com","deleted":false}
        """#

    @Test("a record decodes to its model, keeps keys no model names, and says the same again")
    func roundTrip() throws {
        let record = try JSONDecoder().decode(CloudKitWire.Record.self, from: Data(Self.share.utf8))
        #expect(record.recordName == "Share-1" && record.recordType == "cloudkit.share")
        #expect(record.fields?["cloudkit.title"]?.value == .string("Chores"))
        #expect(record.fields?["count"]?.value == .number("3") && record.fields?["count"]?.type == "INT64")
        #expect(
            record.fields?["count"]?.other["futureKey"]
                == .object(
                    JSONObject([.init(key: "a", value: .array([.number("1"), .number("2.5"), .null, .bool(true)]))])))
        #expect(record.other == ["displayedHostname": .string("www.icloud.com")])
        #expect(record.participants?.first?.type == "OWNER" && record.zoneID?.ownerRecordName == "_a1")
        #expect(record.created?.timestamp == 1_764_982_860_000)
        // Written again and read again, it is the same record, unknown keys and all.
        let again = try JSONDecoder().decode(CloudKitWire.Record.self, from: try CloudKitWire.encode(record))
        #expect(again == record)
        let text = String(decoding: try CloudKitWire.encode(record), as: UTF8.self)
        #expect(text.contains(#""displayedHostname":"www.icloud.com""#) && text.contains(#""futureKey""#))
    }

    @Test("an answer that is not the message it should be is CloudKit's BAD_ANSWER, naming the operation")
    func badAnswer() throws {
        #expect {
            _ = try CloudKitWire.decode(
                CloudKitWire.Zones.self, from: Data(#"{"zones":{}}"#.utf8), operation: "zones/list")
        } throws: { error in
            guard let error = error as? CloudKitServerError else { return false }
            return error.serverErrorCode == "BAD_ANSWER" && error.description.contains("zones/list")
        }
        // What a client reads of a modify answer: an error for one record, a record for another.
        let outcomes = try CloudKitWire.decode(
            CloudKitWire.Outcomes.self,
            from: Data(
                #"{"records":[{"recordName":"a","serverErrorCode":"EXISTS","reason":"exists"},{"recordName":"b","recordChangeTag":"x1","fields":{"t":{"value":"v"}}}]}"#
                    .utf8), operation: "records/modify")
        #expect(outcomes.records.map(\.serverErrorCode) == ["EXISTS", nil])
        #expect(outcomes.records[1].recordChangeTag == "x1")
    }

    @Test("requests carry the zone's owner only where it is somebody else's")
    func zoneOwner() throws {
        let request = CloudKitWire.RecordChangesRequest(
            zoneID: CloudKitWire.ZoneID(ZoneID(scope: .private, zoneName: "Family")), syncToken: "t")
        #expect(
            String(decoding: try CloudKitWire.encode(request), as: UTF8.self)
                == #"{"syncToken":"t","zoneID":{"zoneName":"Family"}}"#)
    }

    @Test("an answer that leaves out its list names nothing, and a zone without a name is left out, as before")
    func lenientLists() throws {
        #expect(
            try CloudKitWire.decode(CloudKitWire.Outcomes.self, from: Data("{}".utf8), operation: "m").records.isEmpty)
        #expect(try CloudKitWire.decode(CloudKitWire.Zones.self, from: Data("{}".utf8), operation: "z").zones.isEmpty)
        let changes = try CloudKitWire.decode(
            CloudKitWire.ZoneChanges.self, from: Data(#"{"moreComing":false}"#.utf8), operation: "zones/changes")
        #expect(changes.zones.isEmpty && changes.moreComing == false)
        let listing = try CloudKitWire.decode(
            CloudKitWire.Zones.self,
            from: Data(#"{"zones":[{"zoneID":{"ownerRecordName":"_a"}},{"zoneID":{"zoneName":"Family"}}]}"#.utf8),
            operation: "zones/list")
        #expect(listing.zones.count == 2 && listing.zones[0].zoneID?.zoneName == nil)
    }

    @Test("a message travels as data: its wordings come back as wordings, to be said by whoever shows it")
    func messageCodable() throws {
        let zone = ZoneID(scope: .shared, zoneName: "household-1", ownerRecordName: "_a1")
        let message: Message =
            "CloudKit answered AUTHENTICATION_REQUIRED; \(Wording.signInAgain) (\(Wording.giveRowsZone(zone)))"
        let back = try JSONDecoder().decode(Message.self, from: try JSONEncoder().encode(message))
        #expect(back == message && back.mentions(.signInAgain) && back.mentions(.giveRowsZone(zone)))
    }

}
