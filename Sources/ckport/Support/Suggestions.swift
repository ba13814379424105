import ArgumentParser

/// "Did you mean …?" for a mistyped command or option, by edit distance over the names the
/// command tree really has (ArgumentParser's own guess for options can pick a far one, and it
/// has none for commands).
enum Suggestions {
    /// A usage message for the first mistyped command or option in `arguments`, nil when every
    /// name is known (or too far from any to guess).
    static func check(_ arguments: [String], root: ParsableCommand.Type) -> String? {
        var command = root
        var path = [root._commandName]
        var index = 0
        // Walk down the subcommands named at the front.
        while index < arguments.count, !arguments[index].hasPrefix("-") {
            let word = arguments[index]
            let subcommands = command.configuration.subcommands
            guard !subcommands.isEmpty else { break }
            if let next = subcommands.first(where: { $0._commandName == word }) {
                command = next
                path.append(word)
                index += 1
                continue
            }
            if word == "help" { return nil }
            let names = subcommands.map { $0._commandName }
            if let near = nearest(word, in: names) {
                return
                    "error: '\(word)' is not a command of \(path.joined(separator: " ")). Did you mean '\(near)'?\n(\(path.joined(separator: " ")) --help lists them: \(names.joined(separator: ", ")))"
            }
            return nil
        }
        let options = optionNames(of: command, root: root)
        for argument in arguments[index...] {
            if argument == "--" { break }
            guard argument.hasPrefix("--"), argument.count > 2 else { continue }
            let name = String(argument.prefix { $0 != "=" })
            if options.contains(name) { continue }
            let command = path.joined(separator: " ")
            if let near = nearest(name, in: options.sorted()) {
                return "error: unknown option '\(name)' for \(command). Did you mean '\(near)'?"
            }
            // The options most commands share, where this one has no use for them.
            if ["--store", "--wait"].contains(name) {
                return
                    "error: unknown option '\(name)' for \(command): it opens no store (\(command) --help lists its options)"
            }
            return "error: unknown option '\(name)' for \(command) (\(command) --help lists its options)"
        }
        return nil
    }

    /// The long option names a command's help lists.
    static func optionNames(of command: ParsableCommand.Type, root: ParsableCommand.Type) -> Set<String> {
        let help = command == root ? root.helpMessage(columns: 10_000) : root.helpMessage(for: command, columns: 10_000)
        var names: Set<String> = ["--help", "--version"]
        var i = help.startIndex
        while let range = help.range(of: "--", range: i..<help.endIndex) {
            var end = range.upperBound
            while end < help.endIndex, help[end].isLetter || help[end].isNumber || help[end] == "-" {
                end = help.index(after: end)
            }
            if end > range.upperBound { names.insert(String(help[range.lowerBound..<end])) }
            i = end > range.upperBound ? end : range.upperBound
        }
        return names
    }

    /// The closest name, when it is close enough to be what was meant: at most a third of the
    /// word's letters (and at least one, at most three) changed.
    static func nearest(_ word: String, in names: [String]) -> String? {
        let limit = min(3, max(1, word.count / 3))
        let scored = names.map { ($0, distance(word.lowercased(), $0.lowercased())) }.filter { $0.1 <= limit }
        return scored.min { $0.1 != $1.1 ? $0.1 < $1.1 : $0.0 < $1.0 }?.0
    }

    /// Levenshtein distance, with a swap of two neighbours counting once.
    static func distance(_ a: String, _ b: String) -> Int {
        let x = Array(a)
        let y = Array(b)
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        var table = [[Int]](repeating: [Int](repeating: 0, count: y.count + 1), count: x.count + 1)
        for i in 0...x.count { table[i][0] = i }
        for j in 0...y.count { table[0][j] = j }
        for i in 1...x.count {
            for j in 1...y.count {
                let cost = x[i - 1] == y[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, x[i - 1] == y[j - 2], x[i - 2] == y[j - 1] {
                    table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[x.count][y.count]
    }
}
