/// A record's field values, kept sorted by name (byte order of the UTF-8).
///
/// Records hold a handful to a few dozen fields, where a sorted array beats a hash table: no
/// hashing, one allocation, and iteration already in the order ckport writes fields in —
/// which is what makes exports deterministic.
public struct RecordFields: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public struct Entry: Sendable, Hashable {
        public var name: String
        public var value: FieldValue

        public init(name: String, value: FieldValue) {
            self.name = name
            self.value = value
        }
    }

    public private(set) var entries: [Entry]

    public init() {
        entries = []
    }

    public init(minimumCapacity: Int) {
        entries = []
        entries.reserveCapacity(minimumCapacity)
    }

    /// Takes entries already sorted by name, without checking (the store's decoder).
    public init(sortedEntries: [Entry]) {
        entries = sortedEntries
    }

    public init(_ dictionary: [String: FieldValue]) {
        entries = dictionary.map { Entry(name: $0.key, value: $0.value) }
        entries.sort { RecordFields.precedes($0.name, $1.name) }
    }

    public init(dictionaryLiteral elements: (String, FieldValue)...) {
        self.init()
        for (name, value) in elements { self[name] = value }
    }

    /// Whether `a` sorts before `b` in the byte order of their UTF-8, the order fields are kept in.
    @inlinable @inline(__always) public static func precedes(_ a: String, _ b: String) -> Bool {
        var a = a
        var b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                for index in 0..<Swift.min(x.count, y.count) where x[index] != y[index] { return x[index] < y[index] }
                return x.count < y.count
            }
        }
    }

    /// Whether `a` is `b`, whose UTF-8 is `count` bytes long: names of other lengths, most of
    /// those a scan passes, are told apart without comparing their bytes. (Field names are
    /// identifiers, ASCII, where equal text is equal bytes; the order is by bytes too.)
    @inline(__always) static func same(_ a: String, _ b: String, _ count: Int) -> Bool {
        a.utf8.count == count && a == b
    }

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }
    /// Field names, sorted.
    public var names: [String] { entries.map(\.name) }

    /// Where `name` stands or would stand: the first entry that does not sort before it.
    @inline(__always) private func position(of name: String) -> Int {
        var low = 0
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if RecordFields.precedes(entries[middle].name, name) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    public subscript(name: String) -> FieldValue? {
        get {
            // A scan: for a record's handful of fields, equal names (the common question)
            // compare fastest this way. By index, so that only the name is read of the others.
            let count = name.utf8.count
            for index in entries.indices where RecordFields.same(entries[index].name, name, count) {
                return entries[index].value
            }
            return nil
        }
        set {
            // Fields usually arrive in order: a name that sorts after the last is new and goes last.
            let count = entries.count
            if count == 0 || RecordFields.precedes(entries[count - 1].name, name) {
                if let newValue { entries.append(Entry(name: name, value: newValue)) }
                return
            }
            let length = name.utf8.count
            if let index = entries.firstIndex(where: { RecordFields.same($0.name, name, length) }) {
                if let newValue { entries[index].value = newValue } else { entries.remove(at: index) }
                return
            }
            guard let newValue else { return }
            entries.insert(Entry(name: name, value: newValue), at: position(of: name))
        }
    }

    /// Adds a field that is not there yet; false when it is (the caller decides what a
    /// duplicate means). Appending in name order costs one comparison.
    public mutating func insertNew(_ name: consuming String, _ value: consuming FieldValue) -> Bool {
        let count = entries.count
        if count == 0 || RecordFields.precedes(entries[count - 1].name, name) {
            entries.append(Entry(name: name, value: value))
            return true
        }
        let index = position(of: name)
        if index < count && entries[index].name == name { return false }
        entries.insert(Entry(name: name, value: value), at: index)
        return true
    }

    @discardableResult
    public mutating func removeValue(forName name: String) -> FieldValue? {
        let index = position(of: name)
        guard index < entries.count && entries[index].name == name else { return nil }
        return entries.remove(at: index).value
    }

    public func makeIterator() -> some IteratorProtocol<(name: String, value: FieldValue)> {
        entries.lazy.map { ($0.name, $0.value) }.makeIterator()
    }

    /// Sets each field of `other` here, keeping the fields `other` does not have.
    public mutating func merge(_ other: RecordFields) {
        for entry in other.entries { self[entry.name] = entry.value }
    }
}
