import Foundation

/// When to ask CloudKit again: after the `retryAfter` it gave, else after an exponential
/// backoff with jitter, up to a cap and a number of attempts. An answer without `retryAfter`
/// is final; a connection that failed before an answer came is retried with backoff.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts in all, the first included.
    public var maxAttempts: Int
    /// The first backoff, in seconds; each further one doubles it.
    public var baseDelay: Double
    /// No wait is longer than this, whatever the server asks (a longer `retryAfter` ends the
    /// attempts rather than block for it).
    public var maxDelay: Double

    public init(maxAttempts: Int = 6, baseDelay: Double = 0.5, maxDelay: Double = 60) {
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
    }

    /// Why the last attempt failed.
    public enum Failure: Sendable, Equatable {
        /// The server answered with an error dictionary.
        case server(retryAfter: Double?)
        /// No answer: the connection failed or was cut, or the server answered 5xx without
        /// an error dictionary.
        case transport
    }

    /// How long to wait before attempt `attempt + 1` after attempt `attempt` (1-based) failed
    /// with `failure`; nil when there is to be no further attempt. `random` gives a number
    /// in 0..<1 for the jitter.
    public func delay(after attempt: Int, failure: Failure, random: () -> Double = { Double.random(in: 0..<1) }) -> Double? {
        guard attempt < maxAttempts else { return nil }
        let backoff = min(maxDelay, baseDelay * pow(2, Double(attempt - 1)))
        // Full jitter over the upper half: waits spread out, and never collapse to nothing.
        let jittered = backoff * (0.5 + 0.5 * random())
        switch failure {
        case .server(let retryAfter?):
            guard retryAfter <= maxDelay else { return nil }
            return max(retryAfter, jittered)
        case .server(nil):
            return nil
        case .transport:
            return jittered
        }
    }
}
