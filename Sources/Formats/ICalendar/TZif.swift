import Foundation
import Synchronization

/// Time-zone abbreviations ("CET", "CEST", "EDT") as the system's zone database has them,
/// read from its TZif files (RFC 8536). Foundation on Linux answers "GMT+1" instead, which no
/// calendar shows its users.
enum TZif {
    private struct Zone {
        /// Transition times (seconds since 1970) and the local time type each one starts.
        var transitions: [(at: Int64, type: Int)]
        var types: [(offset: Int32, isDST: Bool, abbreviation: String)]
        /// The POSIX TZ string for times after the last transition ("CET-1CEST,M3.5.0,M10.5.0/3").
        var footer: String
    }

    /// Zones read so far (nil for a name without a file), for every thread.
    private static let cache = Mutex<[String: Zone?]>([:])

    /// The abbreviation in force at `seconds` in zone `identifier`, nil when the system has no
    /// TZif file for it (or the file cannot be read).
    static func abbreviation(_ identifier: String, at seconds: Int64, isDST: Bool) -> String? {
        guard let zone = load(identifier) else { return nil }
        if let lastTransition = zone.transitions.last, seconds < lastTransition.at {
            guard let current = zone.transitions.last(where: { $0.at <= seconds }) else {
                return zone.types.first { !$0.isDST }?.abbreviation ?? zone.types.first?.abbreviation
            }
            return zone.types[current.type].abbreviation
        }
        // After the last transition the footer's rule holds.
        if let names = footerNames(zone.footer) { return isDST ? (names.dst ?? names.std) : names.std }
        if let last = zone.transitions.last { return zone.types[last.type].abbreviation }
        return zone.types.first?.abbreviation
    }

    /// The standard and daylight names of a POSIX TZ string: `CET-1CEST,…` or `<+03>-3`.
    static func footerNames(_ footer: String) -> (std: String, dst: String?)? {
        var rest = Substring(footer)
        func name() -> String? {
            if rest.hasPrefix("<") {
                guard let close = rest.firstIndex(of: ">") else { return nil }
                let text = String(rest[rest.index(after: rest.startIndex)..<close])
                rest = rest[rest.index(after: close)...]
                return text
            }
            let letters = rest.prefix { $0.isLetter }
            guard letters.count >= 3 else { return nil }
            rest = rest.dropFirst(letters.count)
            return String(letters)
        }
        guard let std = name() else { return nil }
        rest = rest.drop { $0 == "+" || $0 == "-" || $0.isNumber || $0 == ":" }
        return (std, rest.isEmpty || rest.hasPrefix(",") ? nil : name())
    }

    private static func load(_ identifier: String) -> Zone? {
        if let cached = cache.withLock({ $0[identifier] }) { return cached }
        let folder = ProcessInfo.processInfo.environment["TZDIR"] ?? "/usr/share/zoneinfo"
        var zone: Zone?
        // Names come from the zone database's own list of names, never from a path.
        if !identifier.contains(".."), !identifier.hasPrefix("/"),
            let data = FileManager.default.contents(atPath: folder + "/" + identifier)
        {
            zone = parse([UInt8](data))
        }
        cache.withLock { $0[identifier] = zone }
        return zone
    }

    private static func parse(_ bytes: [UInt8]) -> Zone? {
        var offset = 0
        func u32(_ at: Int) -> Int? {
            guard at + 4 <= bytes.count else { return nil }
            return Int(
                UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8
                    | UInt32(bytes[at + 3]))
        }
        func header(_ at: Int) -> (version: UInt8, isut: Int, isstd: Int, leap: Int, time: Int, type: Int, char: Int)? {
            guard at + 44 <= bytes.count, bytes[at..<(at + 4)].elementsEqual("TZif".utf8) else { return nil }
            guard let isut = u32(at + 20), let isstd = u32(at + 24), let leap = u32(at + 28), let time = u32(at + 32),
                let type = u32(at + 36), let char = u32(at + 40)
            else { return nil }
            return (bytes[at + 4], isut, isstd, leap, time, type, char)
        }
        guard let first = header(0) else { return nil }
        var timeSize = 4
        var h = first
        if first.version >= UInt8(ascii: "2") {
            // Skip the 32-bit block; the 64-bit one follows with a header of its own.
            offset = 44 + first.time * 5 + first.type * 6 + first.char + first.leap * 8 + first.isstd + first.isut
            guard let second = header(offset) else { return nil }
            h = second
            timeSize = 8
        }
        var at = offset + 44
        let end = at + h.time * timeSize + h.time + h.type * 6 + h.char + h.leap * (timeSize + 4) + h.isstd + h.isut
        guard end <= bytes.count, h.type > 0 else { return nil }
        var times: [Int64] = []
        for _ in 0..<h.time {
            var value: Int64 = 0
            for i in 0..<timeSize { value = value << 8 | Int64(bytes[at + i]) }
            if timeSize == 4 { value = Int64(Int32(truncatingIfNeeded: value)) }
            times.append(value)
            at += timeSize
        }
        var indices: [Int] = []
        for _ in 0..<h.time {
            indices.append(Int(bytes[at]))
            at += 1
        }
        var rawTypes: [(Int32, Bool, Int)] = []
        for _ in 0..<h.type {
            let utoff = Int32(bitPattern: UInt32(u32(at) ?? 0))
            rawTypes.append((utoff, bytes[at + 4] != 0, Int(bytes[at + 5])))
            at += 6
        }
        let chars = Array(bytes[at..<(at + h.char)])
        func text(_ index: Int) -> String {
            guard index < chars.count else { return "" }
            return String(decoding: chars[index...].prefix { $0 != 0 }, as: UTF8.self)
        }
        let types = rawTypes.map { ($0.0, $0.1, text($0.2)) }
        guard indices.allSatisfy({ $0 < types.count }) else { return nil }
        var footer = ""
        if timeSize == 8, end < bytes.count, bytes[end] == 0x0A, let close = bytes[(end + 1)...].firstIndex(of: 0x0A) {
            footer = String(decoding: bytes[(end + 1)..<close], as: UTF8.self)
        }
        return Zone(
            transitions: zip(times, indices).map { ($0, $1) },
            types: types.map { (offset: $0.0, isDST: $0.1, abbreviation: $0.2) }, footer: footer)
    }
}
