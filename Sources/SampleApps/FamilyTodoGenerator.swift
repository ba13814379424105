import Records

extension SampleGenerator {
    static let areas: [(name: String, icon: String)] = [
        ("Kitchen", "fork.knife"), ("Bathroom", "shower"), ("Living Room", "sofa"),
        ("Bedroom", "bed.double"), ("Garden", "leaf"), ("Repairs", "wrench"),
    ]
    static let chores: [(title: String, type: String, day: Int?, dayOfMonth: Int?, area: Int)] = [
        ("Take out the trash", "weekly", 1, nil, 0), ("Wash the dishes", "daily", nil, nil, 0),
        ("Clean the bathroom", "biweekly", 6, nil, 1), ("Water the plants", "weekly", 3, nil, 4),
        ("Pay the rent", "monthly", nil, 1, 5), ("Change the bed sheets", "biweekly", 7, nil, 3),
        ("Replace the air filter", "monthly", nil, 31, 5), ("Vacuum the living room", "weekly", 5, nil, 2),
    ]
    /// The chore's next date after `last` that its rule allows, at the same time of day, so
    /// that an exported RRULE starts on one of its own occurrences: the next day; the next
    /// `weekday` (1 = Monday … 7 = Sunday), a week later for biweekly; `dayOfMonth` of the
    /// next month, or that month's last day when it is shorter.
    static func nextScheduled(after last: Int64, type: String, weekday: Int?, dayOfMonth: Int?) -> Int64 {
        let days = ISO8601.floorDiv(last, day)
        let timeOfDay = last - days * day
        switch type {
        case "weekly", "biweekly":
            let today = (days + 3) % 7 + 1  // 1970-01-01 was a Thursday
            var ahead = (Int64(weekday ?? Int(today)) - today + 7) % 7
            if ahead == 0 { ahead = 7 }
            return last + (ahead + (type == "biweekly" ? 7 : 0)) * day
        case "monthly":
            let date = ISO8601.civil(fromDays: days)
            let (year, month) = date.month == 12 ? (date.year + 1, Int64(1)) : (date.year, date.month + 1)
            let target = min(Int64(dayOfMonth ?? Int(date.day)), ISO8601.daysInMonth(year: year, month: month))
            return ISO8601.days(year: year, month: month, day: target) * day + timeOfDay
        default:
            return last + day
        }
    }

    static let taskTitles: [(title: String, area: Int?)] = [
        ("Take out the trash", 0), ("Empty the dishwasher", 0), ("Wipe the kitchen counters", 0),
        ("Clean the fridge", 0),
        ("Descale the kettle", 0), ("Scrub the bathtub", 1), ("Restock toilet paper", 1),
        ("Clean the bathroom mirror", 1),
        ("Vacuum the living room", 2), ("Dust the bookshelves", 2), ("Fold the laundry", 3),
        ("Change the bed sheets", 3),
        ("Mow the lawn", 4), ("Water the tomatoes", 4), ("Rake the leaves", 4), ("Fix the leaking tap", 5),
        ("Replace the smoke detector battery", 5), ("Oil the squeaky door", 5), ("Buy groceries", nil),
        ("Walk the dog", nil),
        ("Book a dentist appointment", nil), ("Pay the electricity bill", nil), ("Return library books", nil),
        ("Feed the cat", nil),
    ]
    static let taskNotes = [
        "Bins go out Sunday night; recycling is the blue one ♻️", "Use the eco programme, not the quick one.",
        "Spare batteries are in the drawer under the microwave.", "Ask Oma for the recipe first.",
        "Plumber's number is on the fridge: 0176 555 0142", "Only the green bags — the paper ones tear.",
        "Kids' rooms first, then the hallway.", "Check the \"best before\" dates while you're at it.",
        "Mehl, Eier, Milch, Äpfel", "Don't forget the receipt for the warranty.",
    ]

    mutating func uuid() -> String {
        let h = random.hex(32).uppercased()
        let c = Array(h)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-"
            + String(c[20..<32])
    }

    mutating func familyTodo() throws {
        let households = groupCount(perGroup: 10_000, smallDivisor: 30)
        // A household, its share, 4 members, 6 areas and 5 chores.
        let fixed = 17
        let tasksTotal = max(0, limit - households * fixed)
        try run { g in
            for h in 1...households {
                let tasks = tasksTotal / households + (h <= tasksTotal % households ? 1 : 0)
                try g.todoHousehold(h, tasks: tasks)
            }
        }
    }

    private mutating func todoHousehold(_ h: Int, tasks: Int) throws {
        let surname = Self.surnames[(h - 1) % Self.surnames.count]
        let familyName = surname + " Family" + (h > Self.surnames.count ? " \(h)" : "")
        let owner = userRecordName()
        let zone = ZoneID(scope: .shared, zoneName: "household-\(h)", ownerRecordName: owner)
        let start = Self.epoch - 30 * Self.day + Int64(h) * Self.hour
        let householdName = "household-\(h)"
        let householdRef = FieldValue.reference(Reference(recordName: householdName, action: .deleteSelf))
        // The household is the root of the share that carries everything else to its members:
        // every other record names it as its parent.
        let shareName = "Share-" + Self.stableUUID("share/" + householdName)
        let shortGUID = Self.shortGUID("share/" + householdName)
        var household = record(
            "Household", householdName, zone: zone, at: start, by: owner, modifiedAt: start + 2 * Self.day,
            [
                "id": .string(uuid()), "name": .string(familyName), "ownerId": .string(owner),
                "createdAt": .timestamp(start), "updatedAt": .timestamp(start + 2 * Self.day),
            ])
        household.share = shareName
        household.shareDetails = "{\"shortGUID\":\"\(shortGUID)\"}"
        try emit(household)
        func underHousehold(_ record: Record) -> Record {
            var record = record
            record.parent = householdName
            return record
        }

        var memberNames: [String] = []
        var memberUsers: [String] = []
        var participants: [ShareDetails.Participant] = []
        for k in 1...4 {
            let user = k == 1 ? owner : userRecordName()
            let first =
                k <= 2 ? Self.adults[(h * 2 + k) % Self.adults.count] : Self.children[(h * 3 + k) % Self.children.count]
            let name = "member-\(h)-\(k)"
            let joined = start + Int64(k - 1) * Self.day
            memberNames.append(name)
            memberUsers.append(user)
            try emit(
                underHousehold(
                    record(
                        "Member", name, zone: zone, at: joined, by: user,
                        [
                            "id": .string(uuid()), "householdId": householdRef, "userId": .string(user),
                            "displayName": .string(first), "role": .string(k == 1 ? "owner" : "member"),
                            "joinedAt": .timestamp(joined), "isActive": .int64(k == 4 && h % 3 == 0 ? 0 : 1),
                        ])))
            participants.append(
                ShareDetails.Participant(
                    participantID: Self.stableUUID("participant/" + name), userRecordName: user, givenName: first,
                    familyName: surname,
                    emailAddress: (first + "." + surname).lowercased().asciiLetters() + "@example.com",
                    type: k == 1 ? "OWNER" : "USER",
                    // The member who left is REMOVED; the youngest may only look.
                    acceptanceStatus: k == 4 && h % 3 == 0 ? "REMOVED" : "ACCEPTED",
                    permission: k == 4 ? "READ_ONLY" : "READ_WRITE"))
        }
        // "Smith Family To-Do", private to the invited members (publicPermission NONE), as the
        // second adult's pull of the shared database sees it.
        try emit(
            Self.shareRecord(
                shareName, zone: zone, title: "\(familyName) To-Do", at: start + Self.hour, owner: participants[0],
                participants: participants, current: participants[1], shortGUID: shortGUID))

        var areaNames: [String] = []
        for (index, area) in Self.areas.enumerated() {
            let name = "area-\(h)-\(area.name.lowercased().replacingSpaces())"
            areaNames.append(name)
            try emit(
                underHousehold(
                    record(
                        "Area", name, zone: zone, at: start + Int64(index) * Self.minute, by: owner,
                        [
                            "id": .string(uuid()), "householdId": householdRef, "name": .string(area.name),
                            "icon": .string(area.icon), "sortOrder": .int64(Int64(index)),
                            "createdAt": .timestamp(start + Int64(index) * Self.minute),
                        ])))
        }

        var choreNames: [String] = []
        let offset = h % Self.chores.count
        for c in 0..<5 {
            let chore = Self.chores[(offset + c) % Self.chores.count]
            let name = "chore-\(h)-\(c + 1)"
            choreNames.append(name)
            let created = start + 3 * Self.day + Int64(c) * Self.hour
            let last = Self.epoch + Int64(random.int(0...6)) * Self.day
            var fields: RecordFields = [
                "id": .string(uuid()), "householdId": householdRef, "title": .string(chore.title),
                "recurrenceType": .string(chore.type),
                "areaId": .reference(Reference(recordName: areaNames[chore.area])),
                "isActive": .int64(c == 4 && h % 2 == 0 ? 0 : 1), "lastGeneratedDate": .timestamp(last),
                "timeZone": .string("date"),
                "nextScheduledDate": .timestamp(
                    Self.nextScheduled(after: last, type: chore.type, weekday: chore.day, dayOfMonth: chore.dayOfMonth)),
                "createdAt": .timestamp(created), "updatedAt": .timestamp(created + Self.day),
            ]
            if let day = chore.day { fields["recurrenceDay"] = .int64(Int64(day)) }
            if let dayOfMonth = chore.dayOfMonth { fields["recurrenceDayOfMonth"] = .int64(Int64(dayOfMonth)) }
            if random.chance(0.6) {
                fields["defaultAssigneeId"] = .reference(Reference(recordName: random.pick(memberNames)))
            }
            if c == 0 { fields["notes"] = .string("Rotates between everyone who is home that week.") }
            try emit(
                underHousehold(
                    record(
                        "RecurringChore", name, zone: zone, at: created, by: owner, modifiedAt: created + Self.day,
                        fields)))
        }

        guard tasks > 0 else { return }
        for t in 1...tasks {
            let template = random.pick(Self.taskTitles)
            let author = random.int(0...3)
            let created = Self.epoch + Int64(t) * 37 * Self.minute % (120 * Self.day) + Int64(h) * Self.minute
            let roll = random.int(0...99)
            let status = roll < 45 ? "backlog" : roll < 70 ? "next" : "done"
            var fields: RecordFields = [
                "id": .string(uuid()), "householdId": householdRef, "title": .string(template.title),
                "status": .string(status), "createdAt": .timestamp(created),
            ]
            if random.chance(0.75) {
                fields["assigneeId"] = .reference(Reference(recordName: memberNames[random.int(0...3)]))
            }
            if let area = template.area ?? (random.chance(0.3) ? random.int(0...5) : nil) {
                fields["areaId"] = .reference(Reference(recordName: areaNames[area]))
            }
            if random.chance(0.8) {
                fields["dueDate"] = .timestamp(
                    created + Int64(random.int(1...14)) * Self.day + 18 * Self.hour - created % Self.day)
            }
            var updated = created
            if status == "done" {
                updated = created + Int64(random.int(1...72)) * Self.hour
                fields["completedAt"] = .timestamp(updated)
                fields["completedById"] = .string(memberUsers[random.int(0...3)])
            }
            if random.chance(0.2) {
                fields["taskType"] = .string("recurring")
                fields["recurringChoreId"] = .reference(Reference(recordName: choreNames[random.int(0...4)]))
            } else {
                fields["taskType"] = .string("one-off")
            }
            if random.chance(0.25) { fields["notes"] = .string(random.pick(Self.taskNotes)) }
            fields["updatedAt"] = .timestamp(updated)
            try emit(
                underHousehold(
                    record(
                        "Task", "task-\(h)-\(Self.pad(t, 6))", zone: zone, at: created, by: memberUsers[author],
                        modifiedAt: updated, fields)))
        }
    }
}

extension String {
    func replacingSpaces() -> String { String(map { $0 == " " ? "-" : $0 }) }
}
