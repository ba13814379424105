import Foundation
import StoreCore

// Connector state as the calendar connectors keep it: JSON values, one head entry (key "")
// per feed or calendar and its entries under a key prefix.
extension RecordSession {
    /// The head entry of `kind`/`name`, decoded; nil when there is none.
    func connectorHead<Value: Decodable>(_ type: Value.Type, kind: String, name: String) throws -> Value? {
        try connectorState(kind: kind, name: name, key: "").map {
            try JSONDecoder().decode(Value.self, from: Data($0.utf8))
        }
    }

    /// Every head entry of `kind`, decoded, by name.
    func connectorHeads<Value: Decodable>(_ type: Value.Type, kind: String) throws -> [Value] {
        try connectorStateNames(kind: kind).compactMap { try connectorHead(Value.self, kind: kind, name: $0) }
    }

    /// The entries of `kind`/`name` whose keys start with `prefix`, decoded, by the rest of
    /// their key.
    func connectorEntries<Value: Decodable>(_ type: Value.Type, kind: String, name: String, prefix: String) throws
        -> [(key: String, value: Value)]
    {
        var found: [(key: String, value: Value)] = []
        try forEachConnectorState(kind: kind, name: name) { entry in
            guard entry.key.hasPrefix(prefix) else { return }
            found.append(
                (
                    String(entry.key.dropFirst(prefix.count)),
                    try JSONDecoder().decode(Value.self, from: Data(entry.value.utf8))
                ))
        }
        return found
    }
}
