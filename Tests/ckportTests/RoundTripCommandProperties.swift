import Foundation
import SampleApps
import Testing

/// What the guides promise of ckport's own exports, checked the way a user meets it: a store's
/// records exported and imported into the same store again change nothing — in every format
/// that can hold them, through the command line — for every sample app's bundled records and
/// for stores generated from seeds (a fixed one, and a new one each run, named in any failure so
/// that it can be run again with CKPORT_ROUND_TRIP_SEED). A `--set` on a calendar import never
/// changes a record that holds another value, and the import says how many kept their own.
@Suite("round trips through the command line, into the same store")
struct RoundTripCommandProperties {
    /// The store's records, as the export compares them.
    static func records(_ directory: URL) throws -> String {
        let run = try ckport(["export", "-q"], in: directory)
        try #require(run.status == 0, "\(run.stderr)")
        return run.stdout
    }

    /// Runs ckport, requiring it to succeed; its standard error.
    @discardableResult
    static func must(_ arguments: [String], in directory: URL, _ context: String) throws -> String {
        let run = try ckport(arguments, in: directory)
        try #require(
            run.status == 0,
            "\(context): ckport \(arguments.joined(separator: " ")) ended with \(run.status): \(run.stderr)")
        return run.stderr
    }

    /// The field a calendar import of the app's components may fill with `--set`, and a value.
    static func fixedField(_ app: SampleApp) -> (field: String, value: String, types: [String])? {
        switch app {
        case .familyCalendar: return ("familyID", "family-1", ["Event"])
        case .familyTodo: return ("householdId", "household-1", ["Task", "RecurringChore"])
        case .relationshipCheckin: return ("couple", "couple-1", ["DailyEntry"])
        default: return nil
        }
    }

    static let seeds: [UInt64] = {
        if let given = ProcessInfo.processInfo.environment["CKPORT_ROUND_TRIP_SEED"].flatMap(UInt64.init) {
            return [given]
        }
        return [0, 7, UInt64.random(in: 1...UInt64(Int32.max))]
    }()

    @Test(
        "export, then import into the same store: JSON, JSON Lines, plist, CSV with --system, iCalendar and xCal (with --tz too)",
        arguments: SampleApp.allCases, seeds)
    func roundTrips(_ app: SampleApp, _ seed: UInt64) throws {
        let scratch = Scratch()
        let folder = scratch.url
        let context = "\(app.rawValue), seed \(seed) (CKPORT_ROUND_TRIP_SEED=\(seed) runs it again)"
        let records =
            seed == 0 ? sample(app.rawValue, "records.jsonl") : folder.appendingPathComponent("records.jsonl").path
        if seed != 0 {
            try Self.must(
                ["generate", "--app", app.rawValue, "--records", "120", "--seed", String(seed), "-o", records, "-q"],
                in: folder, context)
        }
        try Self.must(["import", sample(app.rawValue, "schema.ckdb"), records, "-q"], in: folder, context)
        let before = try Self.records(folder)
        #expect(before.split(separator: "\n").count > 20, "\(context): too few records to say anything")

        func same(_ what: String) throws {
            let after = try Self.records(folder)
            #expect(after == before, "\(context): \(what) changed the store")
        }
        for file in ["all.json", "all.jsonl", "all.plist"] {
            // A plain record's keys cannot hold a field named as a system key (screen-time's
            // AppRule.modifiedBy): a property list of such a type is refused, saying so.
            let export = try ckport(["export", "-o", file, "-q"], in: folder)
            if file.hasSuffix(".plist"), export.status == 2,
                export.stderr.contains("those field names are plain records' system keys")
            {
                continue
            }
            try #require(export.status == 0, "\(context): export -o \(file): \(export.stderr)")
            try Self.must(["import", file, "-q"], in: folder, context)
            try same(file)
        }
        try Self.must(["export", "-o", "sheets/", "--system", "-q"], in: folder, context)
        let sheets = try FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("sheets").path)
            .sorted()
        #expect(!sheets.isEmpty)
        for sheet in sheets {
            try Self.must(
                ["import", "sheets/" + sheet, "--type", String(sheet.dropLast(4)), "-q"], in: folder, context)
        }
        try same("CSV with --system")

        guard let fixed = Self.fixedField(app) else { return }
        var generator = SystemRandomNumberGenerator()
        let zone = ["Europe/Berlin", "America/Los_Angeles", "Asia/Kolkata", "Pacific/Chatham", "UTC"].randomElement(
            using: &generator)!
        for tz in [nil, zone] {
            for file in ["cal.ics", "cal.xcal"] {
                let label = file + (tz.map { " --tz \($0)" } ?? "")
                try Self.must(
                    ["export", "-o", file, "--include-deleted", "-q"] + (tz.map { ["--tz", $0] } ?? []), in: folder,
                    "\(context), \(label)")
                if file.hasSuffix(".ics"),
                    let (status, output) = try Conformance.check(folder.appendingPathComponent(file).path)
                {
                    #expect(status == 0, "\(context), \(label): the RFC 5545 checker: \(output)")
                }
                try Self.must(["import", file, "-q"], in: folder, "\(context), \(label)")
                try same(label)
            }
        }
        // --set: the records that hold another value keep it, and the import counts them.
        try Self.must(["export", "-o", "set.ics", "--include-deleted", "-q", "--tz", zone], in: folder, context)
        let exported = try String(contentsOf: folder.appendingPathComponent("set.ics"), encoding: .utf8)
        let uids = Set(
            exported.replacingOccurrences(of: "\r\n ", with: "").split(separator: "\r\n").filter {
                $0.hasPrefix("UID:")
            }.map { String($0.dropFirst(4)) })
        #expect(!uids.isEmpty, "\(context): the calendar holds nothing")
        var holdingOther = 0
        for line in before.split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            guard let type = object["recordType"] as? String, fixed.types.contains(type),
                let recordName = object["recordName"] as? String, uids.contains(recordName),
                let fields = object["fields"] as? [String: Any], let value = fields[fixed.field] as? [String: Any]
            else { continue }
            let name = (value["value"] as? [String: Any])?["recordName"] as? String ?? value["value"] as? String
            if name != fixed.value { holdingOther += 1 }
        }
        let said = try Self.must(
            ["import", "set.ics", "--set", "\(fixed.field)=\(fixed.value)"], in: folder, "\(context), --set")
        try same("--set \(fixed.field)=\(fixed.value)")
        var counted = 0
        for line in said.split(separator: "\n")
        where line.hasPrefix("note: --set \(fixed.field)=\(fixed.value) fills new records only: ") {
            let words = line.split(separator: " ")
            counted += Int(words[7].replacingOccurrences(of: ",", with: "")) ?? -1_000_000
        }
        #expect(
            counted == holdingOther,
            "\(context): \(holdingOther) records hold another \(fixed.field), the import said \(counted):\n\(said)")
        if app == .familyCalendar || seed == 0 {
            #expect(holdingOther > 0, "\(context): no record to keep its own value")
        }
    }
}
