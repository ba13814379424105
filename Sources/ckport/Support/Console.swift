import Foundation
import CKPort
import Formats

/// Messages for people go to standard error, so standard output stays clean for data.
enum Console {
    static func error(_ text: String) {
        FileHandle.standardError.write(Data((text.hasSuffix("\n") ? text : text + "\n").utf8))
    }

    static var stderrIsTerminal: Bool { isatty(2) != 0 }

    /// `1234567` → `1,234,567`.
    static func count(_ n: Int) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (index, character) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(character)
        }
        return n < 0 ? "-" + out : out
    }

    static func bytes(_ n: Int64) -> String {
        let units = ["B", "KB", "MB", "GB", "TB"]
        var value = Double(n)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        return unit == 0 ? "\(n) B" : String(format: "%.1f %@", value, units[unit])
    }

    static func seconds(_ s: Double) -> String {
        s < 10 ? String(format: "%.2f s", s) : s < 120 ? String(format: "%.0f s", s) : String(format: "%d:%02d", Int(s) / 60, Int(s) % 60)
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
final class ProgressLine: @unchecked Sendable {
    private let label: String
    private let enabled: Bool
    private let start = Date()
    private var lastDraw = Date.distantPast
    private var drawn = false
    private let lock = NSLock()
    private var records = 0
    /// A word about a wait (CloudKit throttling), shown at the end of the line until the next
    /// progress.
    private var note: String?

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
        lock.lock()
        note = text
        lastDraw = .distantPast
        let records = self.records
        lock.unlock()
        draw(records: records, bytesDone: nil, bytesTotal: nil, force: true)
        return true
    }

    /// Redraws the line; `bytesDone` of `bytesTotal` (any unit) gives the percentage and ETA.
    func update(records: Int, bytesDone: Int64? = nil, bytesTotal: Int64? = nil) {
        guard enabled else { return }
        lock.lock()
        if records != self.records { note = nil }
        self.records = records
        lock.unlock()
        draw(records: records, bytesDone: bytesDone, bytesTotal: bytesTotal, force: false)
    }

    private func draw(records: Int, bytesDone: Int64?, bytesTotal: Int64?, force: Bool) {
        lock.lock()
        defer { lock.unlock() }
        let now = Date()
        let elapsed = now.timeIntervalSince(start)
        guard force || (elapsed >= 1 && now.timeIntervalSince(lastDraw) >= 0.25) else { return }
        lastDraw = now
        var line = "\(label) \(Console.count(records)) records · \(Console.count(Int(Double(records) / elapsed)))/s"
        if let done = bytesDone, let total = bytesTotal, total > 0, done > 0 {
            let fraction = min(1, Double(done) / Double(total))
            line += String(format: " · %.0f%%", fraction * 100)
            if fraction > 0.01 { line += " · ETA " + Console.seconds(elapsed / fraction - elapsed) }
        }
        if let note { line += " · " + note }
        FileHandle.standardError.write(Data(("\r\u{1B}[K" + line).utf8))
        drawn = true
    }

    func finish() {
        lock.lock()
        defer { lock.unlock() }
        if drawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        drawn = false
    }

    var elapsed: Double { Date().timeIntervalSince(start) }
}

extension AssetFolderWriter {
    /// One line about the asset files written, on standard error.
    func report() {
        guard let directory else { return }
        if written + alreadyThere > 0 {
            let kept = alreadyThere > 0 ? " (\(Console.count(alreadyThere)) already there)" : ""
            Console.error("wrote \(Console.count(written)) asset files (\(Console.bytes(bytesWritten))) to \(directory)\(kept)")
        }
        if !missing.isEmpty {
            Console.error("warning: \(Console.count(missing.count)) assets the records name are not held by the store, so no file was written for them (e.g. \(missing.prefix(2).joined(separator: ", ")))")
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
