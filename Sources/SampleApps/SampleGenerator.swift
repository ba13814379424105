import Records

/// SplitMix64: small, fast, and the same sequence on every machine (tests build their random
/// data on it too).
public struct SeededRandom: Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }

    /// Starts from this exact state.
    public init(state: UInt64) { self.state = state }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.count))
    }

    mutating func chance(_ probability: Double) -> Bool {
        Double(next() >> 11) / Double(1 << 53) < probability
    }

    /// True with `probability`, counted in thousandths: the tests' dice. (Their fixed regression
    /// seeds depend on this exact rule, so it is not ``chance(_:)``'s finer one.)
    public mutating func roll(_ probability: Double) -> Bool {
        Double(next() % 1000) / 1000 < probability
    }

    /// A number in 0..<n.
    public mutating func below(_ n: Int) -> Int {
        Int(next() % UInt64(n))
    }

    public mutating func pick<T>(_ items: [T]) -> T {
        items[below(items.count)]
    }

    mutating func hex(_ count: Int) -> String {
        var out = ""
        for _ in 0..<count { out.append("0123456789abcdef".randomCharacter(Int(next() % 16))) }
        return out
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) }
    }
}

extension String {
    fileprivate func randomCharacter(_ index: Int) -> Character { self[self.index(startIndex, offsetBy: index)] }
}

/// Sentinel thrown when the requested number of records has been emitted.
struct GenerationComplete: Error {}

/// Generates the records of the sample apps. Times start on Monday 2026-01-05 and move forward
/// by fixed steps, so output never depends on the clock.
struct SampleGenerator {
    static let day: Int64 = 86_400_000
    static let hour: Int64 = 3_600_000
    static let minute: Int64 = 60_000
    /// 2026-01-05T00:00:00Z, a Monday.
    static let epoch: Int64 = 1_767_571_200_000

    var random: SeededRandom
    let limit: Int
    var emitted = 0
    let emitRecord: (Record) throws -> Void

    init(seed: UInt64, limit: Int, emit: @escaping (Record) throws -> Void) {
        random = SeededRandom(seed: seed)
        self.limit = limit
        emitRecord = emit
    }

    var remaining: Int { limit - emitted }

    mutating func emit(_ record: Record) throws {
        guard emitted < limit else { throw GenerationComplete() }
        try emitRecord(record)
        emitted += 1
    }

    /// Runs a generator until it is done or the limit is reached.
    mutating func run(_ body: (inout SampleGenerator) throws -> Void) throws {
        do {
            try body(&self)
        } catch is GenerationComplete {}
    }

    /// Generates `count` groups (families, couples…), group `n` running until `until` records
    /// are out; the last group runs until the limit.
    mutating func groups(_ count: Int, _ body: (inout SampleGenerator, _ index: Int, _ until: Int) throws -> Void)
        throws
    {
        let budget = limit / count
        try run { g in
            for index in 1...count {
                try body(&g, index, index == count ? Int.max : index * budget)
            }
        }
    }

    /// How many groups a data set of `limit` records has: one per `perGroup` records at large
    /// sizes, one or two for a sample.
    func groupCount(perGroup: Int, smallDivisor: Int) -> Int {
        limit >= 20_000 ? limit / perGroup : max(1, min(2, limit / smallDivisor))
    }

    mutating func record(
        _ type: String, _ name: String, zone: ZoneID, at time: Int64, by user: String,
        modifiedAt: Int64? = nil, _ fields: RecordFields
    ) -> Record {
        let device = Self.deviceID(of: user)
        return Record(
            id: RecordID(recordName: name, zone: zone), recordType: type, fields: fields,
            changeTag: random.hex(8),
            created: RecordStamp(timestamp: time, userRecordName: user, deviceID: device),
            modified: RecordStamp(timestamp: modifiedAt ?? time, userRecordName: user, deviceID: device))
    }

    mutating func userRecordName() -> String { "_" + random.hex(32) }

    /// A stable device identifier per user (FNV-1a of the name, so it never depends on the run).
    static func deviceID(of user: String) -> String {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in user.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
        let models = ["iPhone", "iPad", "Mac"]
        return models[Int(hash % 3)] + "-" + String(hash >> 40, radix: 16, uppercase: true)
    }

    /// `count` hex digits that depend on `seed` alone (FNV-1a, chained): identifiers that do not
    /// draw from the random stream, so that the records after them keep the values they had.
    static func stableHex(_ seed: String, _ count: Int) -> String {
        var out = ""
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        var round = 0
        while out.count < count {
            for byte in "\(seed)#\(round)".utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
            let digits = String(hash, radix: 16)
            out += String(repeating: "0", count: 16 - digits.count) + digits
            round += 1
        }
        return String(out.prefix(count))
    }

    /// A UUID in CloudKit's upper-case form, from `seed` alone.
    static func stableUUID(_ seed: String) -> String {
        let c = Array(stableHex(seed, 32).uppercased())
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-"
            + String(c[20..<32])
    }

    /// A share's short GUID (the last part of its URL): 25 letters and digits, from `seed`.
    static func shortGUID(_ seed: String) -> String {
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        let hex = Array(stableHex(seed, 50))
        return "0"
            + String((0..<24).map { i in alphabet[Int(String(hex[2 * i...2 * i + 1]), radix: 16)! % alphabet.count] })
    }

    /// A share record (`cloudkit.share`) as CloudKit gives it: its title, the self-link CloudKit
    /// puts on it, and its details — who may open it by URL, its participants, its owner, the
    /// participant who pulled it, its short GUID. Built from `name` alone, without drawing from
    /// the random stream.
    static func shareRecord(
        _ name: String, zone: ZoneID, title: String, at time: Int64, owner: ShareDetails.Participant,
        participants: [ShareDetails.Participant], current: ShareDetails.Participant, shortGUID: String
    ) -> Record {
        let device = deviceID(of: owner.userRecordName ?? name)
        var details = JSONObject()
        details.members.append(.init(key: "publicPermission", value: .string("NONE")))
        details.members.append(.init(key: "participants", value: .array(participants.map(\.json))))
        details.members.append(.init(key: "owner", value: owner.json))
        details.members.append(.init(key: "currentUserParticipant", value: current.json))
        details.members.append(.init(key: "shortGUID", value: .string(shortGUID)))
        return Record(
            id: RecordID(recordName: name, zone: zone), recordType: Record.shareType,
            fields: ["cloudkit.title": .string(title)], changeTag: stableHex(name + "/tag", 8),
            created: RecordStamp(timestamp: time, userRecordName: owner.userRecordName, deviceID: device),
            modified: RecordStamp(timestamp: time, userRecordName: owner.userRecordName, deviceID: device),
            share: name, shareDetails: ShareDetails(details).text)
    }

    static func pad(_ n: Int, _ width: Int) -> String {
        let text = String(n)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }

    // MARK: Vocabulary

    static let surnames = [
        "Smith", "García", "Nguyen", "Okafor", "Müller", "Rossi", "Kowalski", "Tanaka", "Haddad", "Johansson",
        "O'Brien", "Patel", "Silva", "Dubois", "Kim", "Andersen", "Novak", "Mensah", "Lindqvist", "Moreau",
    ]
    static let adults = [
        "Emma", "Liam", "Olivia", "Noah", "Sofia", "Mateo", "Amara", "Jonas", "Priya", "Daniel", "Chloé", "Marco",
        "Yuki", "Fatima", "Grace", "Tomás", "Ingrid", "Kwame", "Leila", "Ravi",
    ]
    static let children = [
        "Mia", "Leo", "Zoe", "Ethan", "Ava", "Lucas", "Nora", "Felix", "Isla", "Omar", "Hana", "Theo", "Lina", "Sami",
    ]
}
