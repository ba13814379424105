/// A point in a store's change history: `export --since TOKEN` yields what changed after it.
///
/// The text form is `ck1-<store id>-<sequence>`. Tokens are tied to the store that issued
/// them, so a token from another store is refused rather than silently misread.
public struct ChangeToken: Hashable, Sendable, CustomStringConvertible {
    public var storeID: String
    public var sequence: Int64

    public init(storeID: String, sequence: Int64) {
        self.storeID = storeID
        self.sequence = sequence
    }

    public init(parsing text: String) throws {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "ck1", !parts[1].isEmpty, let sequence = Int64(parts[2]), sequence >= 0
        else {
            throw StoreError.badToken(
                "'\(text)' is not a change token (tokens look like ck1-4f0c2a9e81b3-1520, as 'ckport export' and 'ckport stats' print them)"
            )
        }
        self.init(storeID: String(parts[1]), sequence: sequence)
    }

    public var description: String { "ck1-\(storeID)-\(sequence)" }
}
