import Records

extension SampleGenerator {
    static let morningNeeds = [
        "A hug before work", "Ten quiet minutes with coffee", "Help with the kids' lunches", "A text at lunchtime",
        "Patience — big presentation today", "Someone else to walk the dog", "Just a kind word 💛",
    ]
    static let gratitudes = [
        "Thank you for making dinner", "You listened when I needed it", "Thanks for fixing the bike",
        "You made me laugh after a long day", "Thank you for handling bedtime", "Merci pour le petit-déjeuner ☕",
    ]
    static let tomorrowGreats = [
        "A walk after dinner", "Phones away at the table", "Leaving work on time", "Pancakes!",
        "Calling my sister together", "An early night",
    ]

    mutating func relationshipCheckin() throws {
        try groups(groupCount(perGroup: 20_000, smallDivisor: 20)) { g, c, end in try g.checkinCouple(c, until: end) }
    }

    private mutating func checkinCouple(_ c: Int, until end: Int) throws {
        let owner = userRecordName()
        let partner = userRecordName()
        let zone = ZoneID(scope: .private, zoneName: "RelationshipZone", ownerRecordName: owner)
        let coupleName = "couple-\(c)"
        let created = Self.epoch - 60 * Self.day + Int64(c) * Self.hour
        try emit(
            record(
                "Couple", coupleName, zone: zone, at: created, by: owner, modifiedAt: created + Self.day,
                [
                    "ownerUserRecordID": .reference(Reference(recordName: owner)),
                    "partnerUserRecordID": .reference(Reference(recordName: partner)),
                ]))
        var day: Int64 = 0
        while emitted < end {
            let midnight = Self.epoch + day * Self.day
            let date = ISO8601.formatDate(milliseconds: midnight)
            for user in [owner, partner] where !random.chance(0.1) {
                var fields: RecordFields = [
                    "date": .timestamp(midnight),
                    "authorUserRecordID": .reference(Reference(recordName: user)),
                    "couple": .reference(Reference(recordName: coupleName, action: .validate)),
                ]
                let morning = midnight + Int64(random.int(6...9)) * Self.hour + Int64(random.int(0...59)) * Self.minute
                var last = morning
                if random.chance(0.85) { fields["morningNeed"] = .string(random.pick(Self.morningNeeds)) }
                if random.chance(0.8) {
                    last = midnight + Int64(random.int(18...22)) * Self.hour
                    fields["eveningMood"] = .int64(Int64(random.int(0...9) < 6 ? 0 : random.int(1...2)))
                    fields["gratitude"] = .string(random.pick(Self.gratitudes))
                    if random.chance(0.7) { fields["tomorrowGreat"] = .string(random.pick(Self.tomorrowGreats)) }
                }
                try emit(
                    record(
                        "DailyEntry", "DailyEntry_\(date)_\(user)", zone: zone, at: morning, by: user, modifiedAt: last,
                        fields))
            }
            day += 1
        }
    }
}
