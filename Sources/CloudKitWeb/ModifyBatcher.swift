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

    /// The bytes of operations a request carries by default: under a megabyte. A capture of
    /// the service shows a records/modify of 1.17 MB answered 401 AUTHENTICATION_FAILED, as if
    /// the request were not signed in; CloudKit's own frameworks send at most 2 MB.
    public static let defaultByteBudget = 900_000

    public init(byteBudget: Int = ModifyBatcher.defaultByteBudget, maxOperations: Int = ModifyBatcher.maxOperations) {
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
        defer {
            pending = []
            pendingBytes = 0
        }
        return pending
    }
}
