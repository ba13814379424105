/// How far a long operation has come, reported through an operation's `progress` callback a
/// few times a second at most.
public struct OperationProgress: Sendable, Equatable {
    /// Records handled so far.
    public var records: Int
    /// Work done, in the unit of `total`: bytes read of the input's bytes, or records of the
    /// records the operation will meet. Nil when the operation cannot say.
    public var done: Int64?
    /// The whole work in the unit of `done`, when it is known in advance.
    public var total: Int64?

    public init(records: Int, done: Int64? = nil, total: Int64? = nil) {
        self.records = records
        self.done = done
        self.total = total
    }

    /// The share of the work done, 0 to 1, when both ends are known.
    public var fraction: Double? {
        guard let done, let total, total > 0 else { return nil }
        return min(1, Double(done) / Double(total))
    }
}

/// Receives an operation's progress on the thread that runs the operation.
public typealias ProgressHandler = (OperationProgress) -> Void
