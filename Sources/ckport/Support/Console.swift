import CKPort
import CloudKitWeb
import Formats
import Foundation
import Synchronization

/// Messages for people go to standard error, so standard output stays clean for data.
enum Console {
    static func error(_ text: String) {
        let clean = clean(text)
        FileHandle.standardError.write(Data((clean.hasSuffix("\n") ? clean : clean + "\n").utf8))
    }

    /// Text as it may reach a terminal, whoever wrote what it quotes (a record, a zone somebody
    /// shared, a server's error page): control characters but newline and tab escaped (`\x1B`),
    /// so that none can move the cursor, retitle the window or ring the bell; the values of
    /// `ckAPIToken=` and `ckWebAuthToken=` hidden, should a server's page echo an address; and
    /// a line longer than a screenful shortened, the number of characters left out said.
    static func clean(_ text: String) -> String {
        let out = CloudKitCredentials.redactingTokens(escapingControls(text))
        let lines = out.split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.contains(where: { $0.count > maxLine }) else { return out }
        return lines.map { line in
            line.count > maxLine
                ? "\(line.prefix(maxLine - 200))… (\(line.count - maxLine + 120) characters left out) …\(line.suffix(80))"
                : String(line)
        }.joined(separator: "\n")
    }

    static let maxLine = 4000

    static var stderrIsTerminal: Bool { isatty(2) != 0 }

    /// Warns when a file holding a secret (`what`: "the API token") can be read or written by
    /// other users, as libpq does for .pgpass; the secret is still used.
    static func warnIfShared(_ path: String, _ what: String) {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & 0o077 != 0 else { return }
        error(
            "warning: \(path), which holds \(what), can be read by other users (mode \(String(info.st_mode & 0o777, radix: 8))): chmod 600 \(path)"
        )
    }

    /// `1234567` → `1,234,567`.
    static func count(_ n: Int) -> String { Counts.grouped(n) }

    static func bytes(_ n: Int64) -> String {
        let units = ["B", "KB", "MB", "GB", "TB"]
        var value = Double(n)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(n) B" : String(format: "%.1f %@", value, units[unit])
    }

    static func seconds(_ s: Double) -> String {
        s < 10
            ? String(format: "%.2f s", s)
            : s < 120 ? String(format: "%.0f s", s) : String(format: "%d:%02d", Int(s) / 60, Int(s) % 60)
    }

    /// Left-aligned text columns, right-aligned number columns.
    static func table(_ header: [String], _ rows: [[String]], numeric: Set<Int>) -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        return all.map { row in
            row.enumerated().map { column, cell in
                let pad = String(repeating: " ", count: widths[column] - cell.count)
                return numeric.contains(column) ? pad + cell : cell + pad
            }.joined(separator: "  ").trimmingTrailingSpaces()
        }.joined(separator: "\n")
    }
}

/// A one-line progress display on standard error: shown only on a terminal, only once the
/// work has lasted a second, and redrawn at most a few times a second. Safe to update from
/// several threads.
final class ProgressLine: Sendable {
    private let label: String
    private let enabled: Bool
    private let start = Date()
    /// When the line was last drawn, whether it is on the screen, the records it shows, and a
    /// word about a wait (CloudKit throttling), shown at the end of the line until the next
    /// progress.
    private let state = Mutex<(lastDraw: Date, drawn: Bool, records: Int, note: String?)>(
        (.distantPast, false, 0, nil))

    init(_ label: String, quiet: Bool) {
        self.label = label
        enabled = !quiet && Console.stderrIsTerminal
    }

    var isEnabled: Bool { enabled }

    func update(records: Int, total: Int?) {
        update(records: records, bytesDone: total.map { _ in Int64(records) }, bytesTotal: total.map(Int64.init))
    }

    /// Shows `text` at the end of the line now (a wait the server asked for); it goes with the
    /// next progress. False when there is no line to show it on.
    @discardableResult
    func note(_ text: String) -> Bool {
        guard enabled else { return false }
        let records = state.withLock { state in
            state.note = Console.clean(text)
            state.lastDraw = .distantPast
            return state.records
        }
        draw(records: records, bytesDone: nil, bytesTotal: nil, force: true)
        return true
    }

    /// Redraws the line; `bytesDone` of `bytesTotal` (any unit) gives the percentage and ETA.
    func update(records: Int, bytesDone: Int64? = nil, bytesTotal: Int64? = nil) {
        guard enabled else { return }
        state.withLock { state in
            if records != state.records { state.note = nil }
            state.records = records
        }
        draw(records: records, bytesDone: bytesDone, bytesTotal: bytesTotal, force: false)
    }

    private func draw(records: Int, bytesDone: Int64?, bytesTotal: Int64?, force: Bool) {
        state.withLock { state in
            let now = Date()
            let elapsed = now.timeIntervalSince(start)
            guard force || (elapsed >= 1 && now.timeIntervalSince(state.lastDraw) >= 0.25) else { return }
            state.lastDraw = now
            var line =
                "\(label) \(Console.count(records)) records · \(Console.count(Int(Double(records) / elapsed)))/s"
            if let done = bytesDone, let total = bytesTotal, total > 0, done > 0 {
                let fraction = min(1, Double(done) / Double(total))
                line += String(format: " · %.0f%%", fraction * 100)
                if fraction > 0.01 { line += " · ETA " + Console.seconds(elapsed / fraction - elapsed) }
            }
            if let note = state.note { line += " · " + note }
            FileHandle.standardError.write(Data(("\r\u{1B}[K" + line).utf8))
            state.drawn = true
        }
    }

    func finish() {
        state.withLock { state in
            if state.drawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            state.drawn = false
        }
    }

    var elapsed: Double { Date().timeIntervalSince(start) }
}

extension AssetFolderWriter {
    /// One line about the asset files written, on standard error.
    func report() {
        guard let directory else { return }
        if written + alreadyThere > 0 {
            let kept = alreadyThere > 0 ? " (\(Console.count(alreadyThere)) already there)" : ""
            Console.error(
                "wrote \(Console.count(written)) asset files (\(Console.bytes(bytesWritten))) to \(directory)\(kept)")
        }
        if !missing.isEmpty {
            Console.error(
                "warning: \(Console.count(missing.count)) assets the records name are not held by the store, so no file was written for them (e.g. \(missing.prefix(2).joined(separator: ", ")))"
            )
        }
    }
}

extension String {
    /// The text without the spaces at its end (a table's last column is not padded).
    func trimmingTrailingSpaces() -> String {
        var end = endIndex
        while end > startIndex, self[index(before: end)] == " " { end = index(before: end) }
        return String(self[..<end])
    }
}

extension ProgressLine {
    /// The line as an operation's progress callback; nil when it is not shown, so that the
    /// operation does no work for it.
    var handler: ProgressHandler? {
        guard isEnabled else { return nil }
        return { [self] step in update(records: step.records, bytesDone: step.done, bytesTotal: step.total) }
    }
}

/// What the command line prints on standard output for people (a table, a status) goes through
/// here, in place of the standard library's `print`: control characters a record, a bundle or a
/// server put into the text are escaped, so that none reaches the terminal as a command. (Data
/// goes out through `OutputFile`, untouched; JSON escapes control characters itself.)
func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
    let text = items.map { "\($0)" }.joined(separator: separator)
    Swift.print(Console.escapingControls(text), terminator: terminator)
}

extension Console {
    /// Control characters but newline and tab, escaped (`\x1B`).
    static func escapingControls(_ text: String) -> String {
        guard
            text.unicodeScalars.contains(where: {
                ($0.value < 0x20 && $0.value != 0x0A && $0.value != 0x09) || (0x7F..<0xA0).contains($0.value)
            })
        else {
            return text
        }
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x0A, 0x09: out.unicodeScalars.append(scalar)
            case 0x00..<0x20, 0x7F, 0x80..<0xA0: out += String(format: "\\x%02X", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
