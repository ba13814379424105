import Foundation
import ObjectStorage
import Records
import TestSupport
import Testing

/// `forget`'s rules against restic's own cases (see Fixtures/restic-forget-policy/SOURCES.md):
/// over restic's list of snapshot times, each policy keeps exactly the snapshots restic keeps.
@Suite("retention policy, as restic keeps snapshots")
struct RetentionPolicyTests {
    static let folder = packageRoot.appendingPathComponent("Tests/ObjectStorageTests/Fixtures/restic-forget-policy")

    static func times() throws -> [Int64] {
        let text = try String(contentsOf: folder.appendingPathComponent("snapshot-times.txt"), encoding: .utf8)
        return try text.split(separator: "\n").map { line in
            try #require(ISO8601.parse(String(line)), "\(line)")
        }
    }

    struct Case: CustomStringConvertible, Sendable {
        var number: Int
        var policy: RetentionPolicy
        var kept: [Int64]
        var description: String { "case \(number)" }
    }

    static func cases() throws -> [Case] {
        let text = try String(contentsOf: folder.appendingPathComponent("cases.tsv"), encoding: .utf8)
        return try text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { line in
            let columns = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            var policy = RetentionPolicy()
            for rule in columns[1].split(separator: " ") {
                let parts = rule.split(separator: "=")
                let count = try #require(Int(parts[1]))
                switch parts[0] {
                case "last": policy.last = count
                case "hourly": policy.hourly = count
                case "daily": policy.daily = count
                case "weekly": policy.weekly = count
                case "monthly": policy.monthly = count
                case "yearly": policy.yearly = count
                default: Issue.record("unknown rule \(rule)")
                }
            }
            let kept = try columns[2].split(separator: ",").map { try #require(ISO8601.parse(String($0))) }
            return Case(number: try #require(Int(columns[0])), policy: policy, kept: kept)
        }
    }

    @Test("restic's cases: the same snapshots kept", arguments: try cases())
    func restic(_ example: Case) throws {
        let times = try Self.times()
        #expect(times.count == 103)
        let decided = example.policy.apply(times, time: { $0 }, timeZone: TimeZone(identifier: "UTC")!)
        let kept = decided.filter { !$0.reasons.isEmpty }.map(\.item).sorted(by: >)
        #expect(!example.kept.isEmpty)
        #expect(kept == example.kept, "\(example)")
    }

    @Test("the cases are all there: 21 policies, none of them keeping nothing")
    func fixture() throws {
        let cases = try Self.cases()
        #expect(cases.count == 21)
        #expect(cases.allSatisfy { !$0.policy.isEmpty && !$0.kept.isEmpty })
    }

    @Test("reasons name the rules, the oldest one too; days are the time zone's")
    func reasons() throws {
        let day: Int64 = 86_400_000
        let base = try #require(ISO8601.parse("2026-11-01T23:30:00Z"))
        let times = (0..<5).map { base + Int64($0) * day }
        let decided = RetentionPolicy(last: 1, daily: 10).apply(
            times, time: { $0 }, timeZone: TimeZone(identifier: "UTC")!)
        #expect(decided.last!.reasons == ["last snapshot", "daily snapshot"])
        #expect(decided.first!.reasons == ["daily snapshot"])
        // In UTC+1 the 23:30 snapshots fall on the next day: two that were a day apart are still
        // on different days, but 23:30 and 00:10 UTC become one day.
        let close = [base, base + 40 * 60_000]
        let utc = RetentionPolicy(daily: 5).apply(close, time: { $0 }, timeZone: TimeZone(identifier: "UTC")!)
        let paris = RetentionPolicy(daily: 1).apply(
            close, time: { $0 }, timeZone: TimeZone(identifier: "Europe/Paris")!)
        #expect(utc.allSatisfy { !$0.reasons.isEmpty })
        #expect(paris.filter { !$0.reasons.isEmpty }.count == 1)
    }
}
