import Records

extension SampleGenerator {
    static let folders: [(name: String, color: [UInt8])] = [
        ("Personal", [0xFF, 0x9F, 0x0A]), ("Recipes", [0x34, 0xC7, 0x59]), ("Travel", [0x0A, 0x84, 0xFF]),
        ("Work", [0x8E, 0x8E, 0x93]),
    ]
    static let noteTemplates: [(title: String, content: String, folder: Int, tags: [String])] = [
        ("Grocery list", "Milk\nEggs\nSourdough\nAvocados 🥑\nOat milk for Zoe", 0, ["groceries", "weekly"]),
        (
            "Gift ideas for Mom", "Pottery class voucher\nThe new Murakami novel\nA framed photo from the lake", 0,
            ["gifts"]
        ),
        (
            "Lasagna",
            "Brown 500 g mince with onion and garlic.\nLayer: sauce, pasta, béchamel, cheese.\nBake 45 min at 180 °C.",
            1, ["dinner", "family favourite"]
        ),
        ("Pancakes", "2 eggs, 250 ml milk, 125 g flour, pinch of salt. Rest 20 min.", 1, ["breakfast"]),
        (
            "Lisbon itinerary", "Day 1: Alfama, tram 28\nDay 2: Belém — pastéis!\nDay 3: Sintra", 2,
            ["trip", "portugal"]
        ),
        ("Packing list", "Passports\nChargers\nSunscreen\nMotion-sickness bands for the kids", 2, ["trip"]),
        (
            "Q3 planning", "Hiring: 2 iOS engineers\nMigrate sync to CKSyncEngine\nFix the widget crash", 3,
            ["work", "planning"]
        ),
        ("1:1 notes", "Wants more ownership of the release process.\nFollow up on conference budget.", 3, ["work"]),
        ("Wi-Fi for guests", "Network: Garden-5G", 0, []),
        ("", "", 0, []),
    ]
    static let cities: [(latitude: Double, longitude: Double)] = [
        (38.7223, -9.1393), (52.52, 13.405), (40.7128, -74.006), (35.6762, 139.6503), (-33.8688, 151.2093),
        (51.5072, -0.1276),
    ]

    mutating func notes() throws {
        try run { g in
            let zone = ZoneID(scope: .private, zoneName: "Notes")
            let owner = g.userRecordName()
            var folderNames: [String] = []
            for (index, folder) in Self.folders.enumerated() {
                let name = "folder-\(folder.name.lowercased())"
                folderNames.append(name)
                try g.emit(
                    g.record(
                        "Folder", name, zone: zone, at: Self.epoch - Int64(100 - index) * Self.day, by: owner,
                        [
                            "name": .string(folder.name), "color": .bytes(folder.color),
                            "createdAt": .timestamp(Self.epoch - Int64(100 - index) * Self.day),
                        ]))
            }
            // A scanned letter from before 1970 keeps a timestamp older than the epoch.
            let letter: Int64 = -236_131_200_000  // 1962-07-09T00:00:00Z
            try g.emit(
                g.record(
                    "Note", "note-000000", zone: zone, at: Self.epoch - 90 * Self.day, by: owner,
                    [
                        "title": .string("Grandpa's letter (1962)"),
                        "content": .string("Dear Anna,\nThe harvest was good this year…"),
                        "folder": .reference(Reference(recordName: folderNames[0], action: .deleteSelf)),
                        "createdAt": .timestamp(letter),
                        "reminders": .list(.timestamp, [.timestamp(letter), .timestamp(Self.epoch + 200 * Self.day)]),
                        "tags": .list(.string, [.string("family history")]), "pinned": .int64(1),
                        "priorityLevel": .string("high"),
                        "_schemaVersion": .int64(2), "_appVersion": .string("2.1.0"),
                        "attachment": .asset(Asset(fileChecksum: "AUs4CRcY8lDp0Xoz5EGeUCjV2kGx", size: 2_483_112)),
                    ]))
            var n = 0
            var previous: [String] = []
            while true {
                n += 1
                let created = Self.epoch - 80 * Self.day + Int64(n) * 7 * Self.hour
                if n % 3 == 0 {
                    let template = g.random.pick(Self.noteTemplates)
                    try g.emit(
                        g.record(
                            "NoteV1", "legacy-\(Self.pad(n, 6))", zone: zone, at: created, by: owner,
                            [
                                "title": .string(template.title), "body": .string(template.content),
                                "priority": .int64(Int64(g.random.int(0...2))),
                                "createdAt": .timestamp(created),
                                "folder": .reference(
                                    Reference(recordName: folderNames[template.folder], action: .deleteSelf)),
                                "_schemaVersion": .int64(1), "_appVersion": .string("1.0.3"),
                            ]))
                    continue
                }
                let template = g.random.pick(Self.noteTemplates)
                let name = "note-\(Self.pad(n, 6))"
                var fields: RecordFields = [
                    "title": .string(template.title), "content": .string(template.content),
                    "folder": .reference(Reference(recordName: folderNames[template.folder], action: .deleteSelf)),
                    "tags": .list(.string, template.tags.map(FieldValue.string)), "createdAt": .timestamp(created),
                    "pinned": .int64(g.random.chance(0.15) ? 1 : 0),
                    "priorityLevel": .string(g.random.pick(["low", "medium", "medium", "high"])),
                    "_schemaVersion": .int64(2), "_appVersion": .string(g.random.pick(["2.0.0", "2.1.0"])),
                    "readingMinutes": .double(Double(template.content.count / 40 + 1) / 2),
                ]
                if template.title == "Wi-Fi for guests" { fields["secret"] = .string("password: sunflower-42!") }
                if g.random.chance(0.3) {
                    fields["privateTags"] = .list(.string, [.string("private"), .string("ünïcode ✓")])
                }
                if g.random.chance(0.4) {
                    let city = g.random.pick(Self.cities)
                    fields["location"] = .location(
                        Location(
                            latitude: city.latitude, longitude: city.longitude, horizontalAccuracy: 35.0,
                            altitude: g.random.chance(0.5) ? 12.5 : nil, timestamp: created))
                }
                if g.random.chance(0.1) {
                    let city = g.random.pick(Self.cities)
                    fields["visitedPlace"] = .location(Location(latitude: city.latitude, longitude: city.longitude))
                }
                if g.random.chance(0.3) { fields["thumbnail"] = .bytes(g.random.bytes(g.random.int(12...48))) }
                if g.random.chance(0.15) {
                    fields["attachment"] = .asset(
                        Asset(
                            fileChecksum: Base64.encode(g.random.bytes(21)),
                            size: Int64(g.random.int(20_000...4_000_000))))
                }
                if g.random.chance(0.3) {
                    let count = g.random.int(0...2)
                    fields["reminders"] = .list(
                        .timestamp,
                        (0..<count).map { _ in .timestamp(created + Int64(g.random.int(1...30)) * Self.day) })
                }
                if !previous.isEmpty && g.random.chance(0.25) {
                    fields["related"] = .list(.reference, [.reference(Reference(recordName: g.random.pick(previous)))])
                }
                try g.emit(
                    g.record(
                        "Note", name, zone: zone, at: created, by: owner, modifiedAt: created + 3 * Self.hour, fields))
                previous.append(name)
                if previous.count > 20 { previous.removeFirst() }
            }
        }
    }
}
