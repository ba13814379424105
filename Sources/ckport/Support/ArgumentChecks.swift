import ArgumentParser
import Foundation

/// Checks and conversions that several commands' options share.
enum ArgumentChecks {
    /// `--tz NAME` as a time zone; nil when not given.
    static func timeZone(_ name: String?) throws -> TimeZone? {
        guard let name else { return nil }
        guard let zone = TimeZone(identifier: name) else {
            throw ValidationError("unknown time zone '\(name)' (use a name such as Europe/Berlin)")
        }
        return zone
    }

    /// `--delimiter C` as a byte; nil when not given.
    static func delimiter(_ text: String?) throws -> UInt8? {
        guard let text else { return nil }
        guard text.utf8.count == 1, let byte = text.utf8.first, byte != UInt8(ascii: "\""), byte != 0x0A, byte != 0x0D
        else {
            throw ValidationError(
                "--delimiter is one ASCII character other than '\"' and line ends, such as ';' or '|'")
        }
        return byte
    }
}
