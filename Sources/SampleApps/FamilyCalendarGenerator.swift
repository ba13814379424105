import Records

extension SampleGenerator {
    static let events: [(title: String, category: String, location: String?, minutes: Int)] = [
        ("Soccer practice", "sports", "Riverside Park, field 3", 90),
        ("Piano lesson", "school", "Ms. Alvarez, 14 Elm Street", 45),
        ("Dentist check-up", "health", "Bright Smile Dental, Suite 200", 60),
        ("Grandma's birthday dinner", "family", "Trattoria Da Luca", 180),
        ("Parent-teacher conference", "school", "Lincoln Elementary, room 12", 30),
        ("Family movie night", "family", nil, 150),
        ("Swimming lesson", "sports", "Aquatic Centre, pool B", 45), ("Farmers market", "family", "Market Square", 120),
        ("School play: The Little Prince", "school", "Lincoln Elementary auditorium", 120),
        ("Vet appointment for Biscuit", "health", "Oakwood Vet Clinic", 30),
        ("Road trip to the lake", "family", "Lake Tahoe", 0), ("Book club", "social", "Café Müller", 90),
        ("Kids' dentist", "health", "Bright Smile Dental", 45), ("Football final 🏆", "sports", "City Stadium", 120),
    ]
    /// Where each family lives: their events are kept in its local time.
    static let homeZones = [
        "America/New_York", "Europe/Zurich", "America/Los_Angeles", "Europe/London", "Australia/Sydney",
    ]
    static let comments = [
        "I'll drive there, can someone pick up?", "Running 10 minutes late!", "Bring the shin guards 🙏",
        "Can we move this to 5pm?", "Grandma says she wants tiramisu.", "Tickets are in my email, I'll forward them.",
        "Who has the spare key?", "Don't forget the sunscreen ☀️",
    ]

    mutating func familyCalendar() throws {
        try groups(groupCount(perGroup: 10_000, smallDivisor: 40)) { g, f, end in try g.calendarFamily(f, until: end) }
    }

    private mutating func calendarFamily(_ f: Int, until end: Int) throws {
        let surname = Self.surnames[(f + 3) % Self.surnames.count]
        let owner = userRecordName()
        let privateZone = ZoneID(scope: .private)
        let zone = ZoneID(scope: .shared, zoneName: "family-\(f)-zone", ownerRecordName: owner)
        let start = Self.epoch - 20 * Self.day + Int64(f) * Self.hour
        var users: [String] = []
        var nicknames: [String] = []
        var participants: [ShareDetails.Participant] = []
        for k in 1...4 {
            let name = "user-\(f)-\(k)"
            let first =
                k <= 2 ? Self.adults[(f * 5 + k) % Self.adults.count] : Self.children[(f * 7 + k) % Self.children.count]
            users.append(name)
            nicknames.append(first)
            let ascii = (first + "." + surname).lowercased().asciiLetters()
            var fields: RecordFields = [
                "appleID": .string("\(ascii)@icloud.com"), "nickname": .string(first),
                "createdAt": .timestamp(start + Int64(k) * Self.hour),
                "lastLoginAt": .timestamp(Self.epoch + Int64(random.int(1...60)) * Self.day),
            ]
            if k <= 2 { fields["phoneNumber"] = .string("+1 555 01\(Self.pad(f * 4 + k, 2))") }
            if random.chance(0.5) { fields["avatarURL"] = .string("https://avatars.example.com/\(ascii).png") }
            participants.append(
                ShareDetails.Participant(
                    participantID: Self.stableUUID("participant/" + name),
                    userRecordName: k == 1 ? owner : "_" + Self.stableHex("user/" + name, 32),
                    givenName: first, familyName: surname, emailAddress: "\(ascii)@icloud.com",
                    type: k == 1 ? "OWNER" : "USER", acceptanceStatus: "ACCEPTED",
                    permission: k <= 2 ? "READ_WRITE" : "READ_ONLY"))
            try emit(record("User", name, zone: privateZone, at: start + Int64(k) * Self.hour, by: owner, fields))
        }
        let familyName = "family-\(f)"
        let familyRef = FieldValue.reference(Reference(recordName: familyName, action: .deleteSelf))
        try emit(
            record(
                "Family", familyName, zone: zone, at: start, by: owner,
                [
                    "name": .string("The \(surname)s"), "adminID": .string(users[0]),
                    "inviteCode": .string(random.hex(6).uppercased()),
                    "createdAt": .timestamp(start), "memberCount": .int64(4),
                ]))
        // The family's zone is shared whole (a zone share, named cloudkit.zoneshare) with the
        // family's members; within it, members and events hang under the family, and an
        // event's participants and comments under the event.
        try emit(
            Self.shareRecord(
                Record.zoneShareName, zone: zone, title: "The \(surname)s' calendar", at: start + Self.hour,
                owner: participants[0],
                participants: participants, current: participants[1],
                shortGUID: Self.shortGUID("share/" + zone.zoneName)))
        func under(_ parent: String, _ record: Record) -> Record {
            var record = record
            record.parent = parent
            return record
        }
        for k in 0..<4 {
            try emit(
                under(
                    familyName,
                    record(
                        "FamilyMember", "member-\(f)-\(k + 1)", zone: zone, at: start + Int64(k) * Self.day, by: owner,
                        [
                            "familyID": familyRef, "userID": .string(users[k]),
                            "role": .string(k == 0 ? "admin" : "member"),
                            "nickname": .string(k == 0 ? "Mom" : k == 1 ? "Dad" : nicknames[k]),
                            "joinedAt": .timestamp(start + Int64(k) * Self.day),
                            "notificationEnabled": .int64(k == 3 ? 0 : 1),
                        ])))
        }
        var e = 0
        while emitted < end {
            e += 1
            let template = random.pick(Self.events)
            let creator = random.int(0...3)
            let day = Int64((e * 97 + f * 13) % 150)
            let eventName = "event-\(f)-\(Self.pad(e, 5))"
            let created = Self.epoch - 10 * Self.day + day * Self.day / 2
            var fields: RecordFields = [
                "familyID": familyRef, "creatorID": .string(users[creator]), "title": .string(template.title),
                "category": .string(template.category), "isDeleted": .int64(random.chance(0.06) ? 1 : 0),
                "createdAt": .timestamp(created), "updatedAt": .timestamp(created + Self.hour),
            ]
            if template.minutes == 0 {
                let begin = Self.epoch + day * Self.day
                fields["timeZone"] = .string("date")
                fields["startDate"] = .timestamp(begin)
                fields["endDate"] = .timestamp(begin + Int64(random.int(1...3)) * Self.day)
            } else {
                fields["timeZone"] = .string(Self.homeZones[f % Self.homeZones.count])
                let begin =
                    Self.epoch + day * Self.day + Int64(random.int(8...19)) * Self.hour + Int64(random.int(0...3)) * 15
                    * Self.minute
                fields["startDate"] = .timestamp(begin)
                fields["endDate"] = .timestamp(begin + Int64(template.minutes) * Self.minute)
                if random.chance(0.6) {
                    fields["reminderTime"] = .timestamp(begin - Int64(random.pick([10, 15, 30, 60])) * Self.minute)
                }
            }
            if let location = template.location { fields["location"] = .string(location) }
            if random.chance(0.3) {
                fields["description"] = .string(
                    "Bring water bottles.\nCarpool: \(nicknames[random.int(0...3)]) drives.")
            }
            let eventRef = FieldValue.reference(Reference(recordName: eventName, action: .deleteSelf))
            try emit(
                under(
                    familyName,
                    record(
                        "Event", eventName, zone: zone, at: created, by: users[creator],
                        modifiedAt: created + Self.hour, fields)))
            for k in 0..<4 where k != creator || random.chance(0.5) {
                let statuses = ["pending", "accepted", "accepted", "declined", "tentative"]
                let status = random.pick(statuses)
                var participant: RecordFields = [
                    "eventID": eventRef, "userID": .string(users[k]), "status": .string(status),
                    "createdAt": .timestamp(created),
                ]
                if status != "pending" {
                    participant["respondedAt"] = .timestamp(created + Int64(random.int(1...48)) * Self.hour)
                }
                if status == "declined" { participant["comment"] = .string("Sorry, I have practice then.") }
                try emit(
                    under(
                        eventName,
                        record(
                            "EventParticipant", "participant-\(f)-\(Self.pad(e, 5))-\(k + 1)", zone: zone, at: created,
                            by: users[k], participant)))
            }
            if random.chance(0.4) {
                let author = random.int(0...3)
                try emit(
                    under(
                        eventName,
                        record(
                            "Comment", "comment-\(f)-\(Self.pad(e, 5))-1", zone: zone, at: created + 2 * Self.hour,
                            by: users[author],
                            [
                                "eventID": eventRef, "userID": .string(users[author]),
                                "content": .string(random.pick(Self.comments)),
                                "createdAt": .timestamp(created + 2 * Self.hour),
                            ])))
            }
            if random.chance(0.5) {
                let read = random.chance(0.6)
                var note: RecordFields = [
                    "userID": .string(users[0]), "type": .string("event_invite"),
                    "title": .string("New event: \(template.title)"),
                    "body": .string("\(nicknames[creator]) added \(template.title)."), "eventID": .string(eventName),
                    "isRead": .int64(read ? 1 : 0), "createdAt": .timestamp(created + Self.minute),
                ]
                if read { note["readAt"] = .timestamp(created + 3 * Self.hour) }
                try emit(
                    record(
                        "Notification", "notification-\(f)-\(Self.pad(e, 5))", zone: privateZone,
                        at: created + Self.minute, by: users[0], note))
            }
        }
    }
}

extension String {
    /// Letters of the name as ASCII, for e-mail addresses (`García` → `garcia`).
    func asciiLetters() -> String {
        let table: [Character: String] = [
            "á": "a", "é": "e", "í": "i", "ó": "o", "ú": "u", "ü": "u", "ö": "o", "ä": "a", "ç": "c", "ñ": "n", "'": "",
        ]
        return self.map { table[$0] ?? String($0) }.joined()
    }
}
