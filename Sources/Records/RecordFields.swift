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

    @inline(__always) static func precedes(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }
    /// Field names, sorted.
    public var names: [String] { entries.map(\.name) }

    public subscript(name: String) -> FieldValue? {
        get {
            for entry in entries where entry.name == name { return entry.value }
            return nil
        }
        set {
            if let index = entries.firstIndex(where: { $0.name == name }) {
                if let newValue { entries[index].value = newValue } else { entries.remove(at: index) }
                return
            }
            guard let newValue else { return }
            // Fields usually arrive in order: append when the name sorts last.
            if let last = entries.last, !RecordFields.precedes(last.name, name) {
                let index = entries.firstIndex { RecordFields.precedes(name, $0.name) } ?? entries.count
                entries.insert(Entry(name: name, value: newValue), at: index)
            } else {
                entries.append(Entry(name: name, value: newValue))
            }
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
        let copy = copy name
        if self[copy] != nil { return false }
        self[copy] = value
        return true
    }

    @discardableResult
    public mutating func removeValue(forName name: String) -> FieldValue? {
        guard let index = entries.firstIndex(where: { $0.name == name }) else { return nil }
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
