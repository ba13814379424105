/// Groups `records/modify` operations into requests CloudKit accepts: at most 200 operations
/// each, and at most `byteBudget` bytes of encoded operations (a record with large fields
/// fills a request sooner). An operation larger than the budget goes alone.
public struct ModifyBatcher: Sendable {
    /// CloudKit's limit on operations in one `records/modify` request.
    public static let maxOperations = 200

    public let byteBudget: Int
    public let maxOperations: Int
    private var pending: [[UInt8]] = []
    private var pendingBytes = 0

    public init(byteBudget: Int = 2 << 20, maxOperations: Int = ModifyBatcher.maxOperations) {
        precondition(byteBudget > 0 && maxOperations > 0 && maxOperations <= ModifyBatcher.maxOperations)
        self.byteBudget = byteBudget
        self.maxOperations = maxOperations
    }

    /// Adds an encoded operation; returns the batch it closed, if it did not fit beside the
    /// ones waiting.
    public mutating func add(_ operation: [UInt8]) -> [[UInt8]]? {
        var full: [[UInt8]]?
        if !pending.isEmpty && (pending.count == maxOperations || pendingBytes + operation.count > byteBudget) {
            full = pending
            pending = []
            pendingBytes = 0
        }
        pending.append(operation)
        pendingBytes += operation.count
        return full
    }

    /// The last batch, if any operations wait.
    public mutating func finish() -> [[UInt8]]? {
        guard !pending.isEmpty else { return nil }
        defer { pending = []; pendingBytes = 0 }
        return pending
    }
}
