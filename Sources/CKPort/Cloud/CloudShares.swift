import CloudKitWeb
import Foundation
import Records
import StoreCore

/// A share a push met, and the record that roots it (nil for a zone share, or when the store
/// holds no root).
struct SharePlan: Sendable {
    var share: Record
    var root: String?
}

/// What a push made of one share the store holds.
///
/// CloudKit Web Services creates a share of a record hierarchy (`forRecord`: the root record and
/// its current change tag, in an atomic request), with its public permission and the people it
/// invites by e-mail address or phone number. It cannot create a share of a whole zone, and
/// nobody can accept an invitation for somebody else: everyone invited again is INVITED until
/// they accept, and the share's URL is new unless the root record kept its short GUID.
public struct ShareRestoration: Sendable {
    public enum State: Sendable, Equatable {
        /// Created again in CloudKit; the URL its answer gives, if it gave one.
        case created(url: String?)
        /// Would be created (a dry run).
        case wouldCreate
        /// Not created, and why (what to do instead).
        case notCreated(Message)
        /// Not touched: the push does not change existing shares (update and replace).
        case leftAlone(Message)
    }

    public var zone: ZoneID
    public var shareName: String
    /// The record the share starts from, nil for a zone share.
    public var root: String?
    public var title: String?
    public var state: State
    /// The people the share invites again (or would).
    public var invited: [ShareDetails.Participant]
    /// The people it cannot invite again, each with the reason.
    public var notInvited: [(participant: ShareDetails.Participant, why: String)]
    /// What changes for people it invites, or for the one who pushes (roles, ownership).
    public var notes: [(participant: ShareDetails.Participant, why: String)]
}

extension CloudSync {
    /// Who a re-created share can invite, and how; who it cannot, with the reason; and what
    /// changes for those it invites.
    ///
    /// The share is created by the account that pushes, which owns it. The participant who
    /// pulled the store (`currentUserParticipant`) is taken to be that account: when they were
    /// the owner, nobody else changes; when they were a participant, they become the owner and
    /// the former owner is invited like anyone else. Everyone else is invited by e-mail address
    /// or phone number, with the permission they had (READ_ONLY or READ_WRITE); administrators
    /// come back as plain participants.
    static func invitations(_ details: ShareDetails?)
        -> (
            invite: [ShareDetails.Participant], skip: [(participant: ShareDetails.Participant, why: String)],
            notes: [(participant: ShareDetails.Participant, why: String)]
        )
    {
        var invite: [ShareDetails.Participant] = []
        var skip: [(participant: ShareDetails.Participant, why: String)] = []
        var notes: [(participant: ShareDetails.Participant, why: String)] = []
        let pusher = details?.currentUserParticipant
        let pusherOwned = pusher == nil || pusher?.type == "OWNER"
        for person in details?.participants ?? [] {
            if let pusher, person.isSamePerson(as: pusher) {
                if !pusherOwned {
                    notes.append(
                        (
                            person,
                            "pulled this store, and owns the share made again (it is made by the account that pushes)"
                        ))
                }
                continue
            }
            var invited = person
            invited.type = "USER"
            switch (person.type ?? "", person.acceptanceStatus ?? "") {
            case ("OWNER", _):
                if pusherOwned { continue }
                invited.permission = "READ_WRITE"
                notes.append(
                    (
                        person,
                        "owned the share; the share made again is the pushing account's, and invites them with READ_WRITE"
                    ))
            case (_, "REMOVED"), (_, "UNSUBSCRIBED"):
                skip.append((person, "had left the share (\(person.acceptanceStatus!))"))
                continue
            case ("PUBLIC_USER", _):
                skip.append(
                    (person, "joined by the share's URL, not by invitation; anyone with the new URL can join again"))
                continue
            default:
                guard person.permission == "READ_ONLY" || person.permission == "READ_WRITE" else {
                    skip.append(
                        (
                            person,
                            "had the permission \(person.permission ?? "none recorded"), which an invitation cannot give"
                        ))
                    continue
                }
                if person.type == "ADMINISTRATOR" {
                    notes.append(
                        (
                            person,
                            "was an administrator; invited as a participant, to be made administrator again in the app"
                        ))
                }
            }
            if person.emailAddress != nil || person.phoneNumber != nil {
                invite.append(invited)
            } else {
                skip.append(
                    (
                        person,
                        "CloudKit gave no e-mail address or phone number to invite them by; invite them again from the app"
                    ))
            }
        }
        return (invite, skip, notes)
    }

    /// What a push will do with a share, decided without asking CloudKit: nil when it is to be
    /// created (then asked).
    static func shareDecision(_ plan: SharePlan, request: PushRequest, scope: CloudKitDatabase.Scope)
        -> ShareRestoration.State?
    {
        if request.mode != .create {
            return .leftAlone(
                "\(Wording.pushMode(request.mode.rawValue)) changes records, not shares: CloudKit keeps this share and everyone who accepted it"
            )
        }
        if scope == .shared {
            return .notCreated(
                "this zone belongs to \(plan.share.zone.ownerRecordName): only its owner can share its records (from the app)"
            )
        }
        if plan.share.zone.zoneName == ZoneID.defaultZoneName {
            return .notCreated(
                "the default zone does not support sharing: move the records into a zone of their own in the app, and share them there"
            )
        }
        if plan.share.recordName == Record.zoneShareName {
            return .notCreated(
                "CloudKit Web Services cannot create a share of a whole zone: share the zone again from the app, and invite the people listed again"
            )
        }
        guard plan.root != nil else {
            return .notCreated(
                "the store holds no record whose share this is (its root), and CloudKit creates a share only for a root record"
            )
        }
        return nil
    }

    static func restoration(_ plan: SharePlan, state: ShareRestoration.State) -> ShareRestoration {
        let details = plan.share.shareDetails.flatMap(ShareDetails.init(json:))
        let (invite, skip, notes) = invitations(details)
        var title: String?
        if case .string(let text)? = plan.share.fields["cloudkit.title"] { title = text }
        return ShareRestoration(
            zone: plan.share.zone, shareName: plan.share.recordName, root: plan.root, title: title, state: state,
            invited: invite, notInvited: skip, notes: notes)
    }

    /// The `records/modify` operation that creates a share again: the share's fields, its
    /// root (`forRecord`, with the change tag CloudKit holds now), who may open it by URL, and
    /// everyone it invites again, INVITED. CloudKit names the share, as in the flow seen
    /// working live (brightdigit/MistKit 0375d099, CloudKitService+CreateShare.swift).
    static func shareCreation(
        _ plan: SharePlan, rootTag: String, invite: [ShareDetails.Participant], codec: JSONRecordCodec
    ) -> [UInt8] {
        let details = plan.share.shareDetails.flatMap(ShareDetails.init(json:))
        var out = JSONWriter(capacity: 512)
        // CloudKit's own spelling: the reference's `cloudKit.share` is refused.
        out.raw(
            "{\"operationType\":\"create\",\"record\":{\"recordType\":\"cloudkit.share\",\"forRecord\":{\"recordName\":"
        )
        out.string(plan.root ?? "")
        out.raw(",\"recordChangeTag\":")
        out.string(rootTag)
        out.raw("},\"publicPermission\":")
        out.string(details?.publicPermission ?? "NONE")
        out.raw(",\"participants\":[")
        for (index, person) in invite.enumerated() {
            if index > 0 { out.byte(UInt8(ascii: ",")) }
            var lookup = JSONObject()
            if let email = person.emailAddress {
                lookup.members.append(.init(key: "emailAddress", value: .string(email)))
            } else if let phone = person.phoneNumber {
                lookup.members.append(.init(key: "phoneNumber", value: .string(phone)))
            }
            out.raw("{\"type\":\"USER\",\"permission\":")
            out.string(person.permission ?? "READ_ONLY")
            out.raw(",\"acceptanceStatus\":\"INVITED\",\"userIdentity\":{\"lookupInfo\":")
            out.value(.object(lookup))
            out.raw("}}")
        }
        out.raw("]")
        var fieldsOnly = plan.share
        fieldsOnly.parent = nil
        var fields = JSONWriter(capacity: 256)
        codec.encodeForModify(fieldsOnly, withChangeTag: false, to: &fields)
        // `,"fields":{…}` from the record's encoding: everything after its type.
        if let range = fields.text.range(of: ",\"fields\":") {
            let tail = fields.text[range.lowerBound...].dropLast()
            out.bytes.append(contentsOf: Array(tail.utf8))
        }
        out.raw("}}")
        return out.bytes
    }

    /// Creates the shares a push met again, where CloudKit allows it, once their records are in.
    static func restoreShares(
        _ plans: [SharePlan], client: CloudKitClient, request: PushRequest, codec: JSONRecordCodec,
        result: inout PushResult, rejected: (PushRejection) throws -> Void
    ) async throws {
        for plan in plans {
            if let state = shareDecision(plan, request: request, scope: client.database.scope) {
                result.shares.append(restoration(plan, state: state))
                continue
            }
            var outcome = restoration(plan, state: .wouldCreate)
            let zone = plan.share.zone
            var operation = PushOperation(
                zone: zone, recordType: Record.shareType, recordName: plan.share.recordName, operationType: "create",
                json: [])
            func fail(_ code: String, _ reason: Message) throws {
                outcome.state = .notCreated("\(code): \(reason)")
                result.byType[Record.shareType, default: PushCounts()].failed += 1
                try rejected(PushRejection(operation: operation, serverErrorCode: code, reason: reason))
            }
            // The root's change tag as CloudKit holds it now: saving its children changed it.
            let lookup = try CloudKitWire.encode(
                CloudKitWire.LookupRequest(records: [.init(recordName: plan.root!)], zoneID: wireZone(zone)))
            let found: CloudKitWire.Outcomes
            do {
                found = try CloudKitWire.decode(
                    CloudKitWire.Outcomes.self, from: try await client.send("records/lookup", body: lookup),
                    operation: "records/lookup")
                result.requests += 1
            } catch let error as CloudKitServerError
                where error.code != .authenticationRequired && error.code != .authenticationFailed
            {
                // One share CloudKit will not look at does not stop the others.
                result.requests += 1
                try fail(error.serverErrorCode, Message(error.reason ?? "CloudKit did not answer for its root record"))
                result.shares.append(outcome)
                continue
            }
            let rootAnswer = found.records.first
            guard let rootTag = rootAnswer?.recordChangeTag else {
                let code = rootAnswer?.serverErrorCode ?? "NOT_FOUND"
                try fail(
                    code,
                    "its root record \(plan.root!) is not in CloudKit, and a share is created only for a root that is")
                result.shares.append(outcome)
                continue
            }
            operation.json = shareCreation(plan, rootTag: rootTag, invite: outcome.invited, codec: codec)
            var body = JSONWriter(capacity: operation.json.count + 128)
            // CloudKit creates a share only in an atomic request.
            body.raw("{\"atomic\":true,\"operations\":[")
            body.bytes.append(contentsOf: operation.json)
            body.raw("],\"zoneID\":")
            body.bytes.append(contentsOf: try CloudKitWire.encode(wireZone(zone)))
            body.raw("}")
            let answer: Data
            do {
                answer = try await client.send("records/modify", body: Data(body.bytes))
                result.requests += 1
            } catch let error as CloudKitServerError
                where error.code != .authenticationRequired && error.code != .authenticationFailed
            {
                result.requests += 1
                try fail(error.serverErrorCode, Message(error.reason ?? "CloudKit refused to create it"))
                result.shares.append(outcome)
                continue
            }
            let records = try CloudKitWire.decode(CloudKitWire.Outcomes.self, from: answer, operation: "records/modify")
                .records
            let created = records.first { $0.recordType == Record.shareType } ?? records.first
            if let code = created?.serverErrorCode {
                try fail(code, Message(created?.reason ?? ""))
            } else if created == nil {
                try fail("NO_ANSWER", "CloudKit's answer did not mention the share")
            } else {
                let shortGUID = created?.shortGUID
                outcome.state = .created(url: shortGUID.map { "https://www.icloud.com/share/\($0)" })
                result.byType[Record.shareType, default: PushCounts()].saved += 1
            }
            result.shares.append(outcome)
        }
    }
}
