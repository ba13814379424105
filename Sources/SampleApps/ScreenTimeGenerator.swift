import Records

extension SampleGenerator {
    mutating func screenTimeRewards() throws {
        try groups(groupCount(perGroup: 10_000, smallDivisor: 40)) { g, f, end in try g.rewardsFamily(f, until: end) }
    }

    private mutating func token() -> String {
        Base64.encode(random.bytes(24))
    }

    private mutating func rewardsFamily(_ f: Int, until end: Int) throws {
        let parent = userRecordName()
        let zone = ZoneID(scope: .private, zoneName: "FamilyZone", ownerRecordName: parent)
        let parentDevices = ["parent-iphone-\(random.hex(6))", "parent-ipad-\(random.hex(6))"]
        let familyName = uuid()
        let familyRef = FieldValue.reference(Reference(recordName: familyName, action: .deleteSelf))
        let start = Self.epoch - 14 * Self.day + Int64(f) * Self.hour
        try emit(
            record(
                "Family", familyName, zone: zone, at: start, by: parent, modifiedAt: start + Self.day,
                [
                    "createdAt": .timestamp(start), "modifiedAt": .timestamp(start + Self.day),
                    "parentDeviceIds": .list(.string, parentDevices.map(FieldValue.string)),
                    "familyName": .string(Self.surnames[(f + 7) % Self.surnames.count] + " household"),
                ]))
        var children: [(name: String, ref: FieldValue, device: String)] = []
        for k in 0..<2 {
            let childName = uuid()
            let device = "child-ipad-\(random.hex(6))"
            let created = start + Int64(k + 1) * Self.hour
            children.append((childName, .reference(Reference(recordName: childName, action: .deleteSelf)), device))
            try emit(
                record(
                    "ChildContext", childName, zone: zone, at: created, by: parent,
                    [
                        "familyRef": familyRef, "childOpaqueId": .string(random.hex(40)),
                        "displayName": .string(Self.children[(f * 2 + k) % Self.children.count]),
                        "pairedDeviceIds": .list(.string, [.string(device)]),
                        "storeName": .string("child-store-\(random.hex(8))"),
                        "createdAt": .timestamp(created), "modifiedAt": .timestamp(created),
                    ]))
        }
        for child in children {
            for r in 0..<6 {
                let appToken = token()
                let isCategory = r == 5
                let modified = start + Int64(r + 3) * Self.hour
                var fields: RecordFields = [
                    "familyRef": familyRef, "childRef": child.ref, "appToken": .string(appToken),
                    "classification": .string(r < 3 ? "learning" : "reward"), "isCategory": .int64(isCategory ? 1 : 0),
                    "createdAt": .timestamp(modified), "modifiedAt": .timestamp(modified),
                    "modifiedBy": .string(parentDevices[r % 2]),
                ]
                if isCategory {
                    fields["categoryId"] = .string(
                        random.pick(["games", "education", "socialNetworking", "entertainment"]))
                }
                try emit(record("AppRule", "\(child.name):\(appToken)", zone: zone, at: modified, by: parent, fields))
            }
            let apps = (0..<random.int(8...16)).map { _ in FieldValue.string(token()) }
            let categories = (0..<random.int(2...4)).map { _ in FieldValue.string(token()) }
            try emit(
                record(
                    "ChildAppInventory", "\(child.name):\(child.device)", zone: zone, at: start + Self.day, by: parent,
                    [
                        "familyRef": familyRef, "childRef": child.ref, "deviceId": .string(child.device),
                        "appTokens": .list(.string, apps), "categoryTokens": .list(.string, categories),
                        "lastUpdated": .timestamp(start + Self.day),
                        "appCount": .int64(Int64(apps.count + categories.count)),
                    ]))
        }
        var n = 0
        while emitted < end {
            n += 1
            let child = children[n % 2]
            let time = Self.epoch + Int64(n) * 47 * Self.minute
            let roll = random.int(0...99)
            if roll < 75 {
                let type = roll < 55 ? "accrual" : roll < 70 ? "redemption" : "adjustment"
                let amount: Int64 =
                    type == "accrual"
                    ? Int64(random.int(1...6) * 10)
                    : type == "redemption" ? -Int64(random.int(3...12) * 10) : Int64(random.pick([-20, -10, 10, 25]))
                var fields: RecordFields = [
                    "familyRef": familyRef, "childRef": child.ref, "type": .string(type), "amount": .int64(amount),
                    "timestamp": .timestamp(time),
                    "deviceId": .string(type == "adjustment" ? parentDevices[0] : child.device),
                    "syncedAt": .timestamp(time + Int64(random.int(1...300)) * 1000),
                ]
                if type == "adjustment" {
                    fields["reason"] = .string(amount > 0 ? "Finished homework early" : "Screen time past bedtime")
                }
                try emit(record("PointsLedgerEntry", uuid(), zone: zone, at: time, by: parent, fields))
            } else if roll < 88 {
                let duration = Double(random.pick([900, 1800, 2700, 3600])) + (random.chance(0.2) ? 0.5 : 0)
                try emit(
                    record(
                        "RedemptionWindow", uuid(), zone: zone, at: time, by: parent,
                        [
                            "familyRef": familyRef, "childRef": child.ref, "startTime": .timestamp(time),
                            "durationSeconds": .double(duration),
                            "expiresAt": .timestamp(time + Int64(duration * 1000)),
                            "pointsSpent": .int64(Int64(duration / 30)), "isActive": .int64(0),
                            "deviceId": .string(child.device),
                            "createdAt": .timestamp(time),
                        ]))
            } else {
                let action = random.pick(["rule_changed", "points_adjusted", "redemption_started", "inventory_synced"])
                let metadata =
                    "{\"action\":\"\(action)\",\"by\":\"\(parentDevices[0])\",\"note\":\"weekday \\\"limit\\\" applied\"}"
                var fields: RecordFields = [
                    "familyRef": familyRef, "action": .string(action), "timestamp": .timestamp(time),
                    "actorDeviceId": .string(parentDevices[n % 2]), "metadata": .string(metadata),
                ]
                if action != "inventory_synced" { fields["childRef"] = .reference(Reference(recordName: child.name)) }
                try emit(record("AuditEntry", uuid(), zone: zone, at: time, by: parent, fields))
            }
        }
    }
}
