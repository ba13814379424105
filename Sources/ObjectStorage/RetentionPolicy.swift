import Foundation

/// Which snapshots to keep, by restic's rules: the newest `last`, and the newest snapshot of
/// each of the newest `hourly` hours, `daily` days, `weekly` ISO weeks, `monthly` months and
/// `yearly` years that have one (-1: every one). A snapshot any rule keeps is kept. A rule
/// whose count is not used up by the oldest snapshot keeps that one too ("oldest daily
/// snapshot"), as restic does, so that the history reaches as far back as the rule allows.
public struct RetentionPolicy: Sendable, Equatable {
    public var last = 0
    public var hourly = 0
    public var daily = 0
    public var weekly = 0
    public var monthly = 0
    public var yearly = 0

    public init(last: Int = 0, hourly: Int = 0, daily: Int = 0, weekly: Int = 0, monthly: Int = 0, yearly: Int = 0) {
        self.last = last
        self.hourly = hourly
        self.daily = daily
        self.weekly = weekly
        self.monthly = monthly
        self.yearly = yearly
    }

    /// Whether it keeps nothing (a forget with it would remove every snapshot).
    public var isEmpty: Bool { [last, hourly, daily, weekly, monthly, yearly].allSatisfy { $0 == 0 } }

    /// What the policy decides for each item: kept (with the rules that keep it) or not, in
    /// the order given. Items are taken newest first by `time` (milliseconds since 1970; equal
    /// times keep their order); hours, days, weeks, months and years are those of `timeZone`.
    public func apply<Item>(_ items: [Item], time: (Item) -> Int64, timeZone: TimeZone) -> [(
        item: Item, reasons: [String]
    )] {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        var iso = Calendar(identifier: .iso8601)
        iso.timeZone = timeZone
        let ordered = items.enumerated().sorted { a, b in
            let (ta, tb) = (time(a.element), time(b.element))
            return ta != tb ? ta > tb : a.offset < b.offset
        }
        var buckets: [RetentionBucket] = [
            RetentionBucket(count: last, reason: "last snapshot") { _, number in number },
            RetentionBucket(count: hourly, reason: "hourly snapshot") { date, _ in
                let c = calendar.dateComponents([.year, .month, .day, .hour], from: date)
                return c.year! * 1_000_000 + c.month! * 10_000 + c.day! * 100 + c.hour!
            },
            RetentionBucket(count: daily, reason: "daily snapshot") { date, _ in
                let c = calendar.dateComponents([.year, .month, .day], from: date)
                return c.year! * 10_000 + c.month! * 100 + c.day!
            },
            RetentionBucket(count: weekly, reason: "weekly snapshot") { date, _ in
                let c = iso.dateComponents([.yearForWeekOfYear, .weekOfYear], from: date)
                return c.yearForWeekOfYear! * 100 + c.weekOfYear!
            },
            RetentionBucket(count: monthly, reason: "monthly snapshot") { date, _ in
                let c = calendar.dateComponents([.year, .month], from: date)
                return c.year! * 100 + c.month!
            },
            RetentionBucket(count: yearly, reason: "yearly snapshot") { date, _ in calendar.component(.year, from: date)
            },
        ]
        var decided: [(offset: Int, item: Item, reasons: [String])] = []
        for (number, entry) in ordered.enumerated() {
            let date = Date(timeIntervalSince1970: Double(time(entry.element)) / 1000)
            let oldest = number == ordered.count - 1
            var reasons: [String] = []
            for index in buckets.indices where buckets[index].count > 0 || buckets[index].count == -1 {
                let key = buckets[index].key(date, number)
                guard key != buckets[index].last || oldest else { continue }
                reasons.append((key == buckets[index].last ? "oldest " : "") + buckets[index].reason)
                buckets[index].last = key
                if buckets[index].count > 0 { buckets[index].count -= 1 }
            }
            decided.append((entry.offset, entry.element, reasons))
        }
        return decided.sorted { $0.offset < $1.offset }.map { ($0.item, $0.reasons) }
    }
}

/// One rule of a policy as it is applied: how many it may still keep, and the last period kept.
private struct RetentionBucket {
    var count: Int
    var reason: String
    var key: (Date, Int) -> Int
    var last = Int.min

    init(count: Int, reason: String, key: @escaping (Date, Int) -> Int) {
        self.count = count
        self.reason = reason
        self.key = key
    }
}
