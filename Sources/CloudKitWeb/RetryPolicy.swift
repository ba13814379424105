import Foundation

/// When to ask CloudKit again.
///
/// - An answer with `retryAfter` is retried after that many seconds, however long, up to
///   `longestWait`; a longer one ends the attempts (the error says how long CloudKit asked for).
/// - THROTTLED (429), TRY_AGAIN_LATER (503) and INTERNAL_ERROR (500) come with or without
///   `retryAfter`; without, they are retried after an exponential backoff with jitter, capped
///   at `maxDelay`. So is a connection that failed before an answer came, and a 429 or 5xx
///   without an error dictionary.
/// - Every other error dictionary without `retryAfter` is final.
///
/// Attempts stop at `maxAttempts`, the first included.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts in all, the first included.
    public var maxAttempts: Int
    /// The first backoff, in seconds; each further one doubles it.
    public var baseDelay: Double
    /// The longest backoff ckport chooses by itself.
    public var maxDelay: Double
    /// The longest `retryAfter` waited out, in seconds; CloudKit asking for more ends the
    /// attempts.
    public var longestWait: Double

    /// The defaults wait about two minutes in all before giving up on a busy server (1, 2, 4, …
    /// 60 seconds, with jitter): long enough for a passing outage, short enough for a nightly job.
    public init(maxAttempts: Int = 8, baseDelay: Double = 1, maxDelay: Double = 60, longestWait: Double = 900) {
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.longestWait = longestWait
    }

    /// Why the last attempt failed.
    public enum Failure: Sendable, Equatable {
        /// The server answered with an error dictionary: its `retryAfter`, and whether its
        /// code (or status) says a later attempt may succeed without one.
        case server(retryAfter: Double?, busy: Bool)
        /// No answer: the connection failed or was cut, or the server answered 429 or 5xx
        /// without an error dictionary.
        case transport
    }

    /// How long to wait before attempt `attempt + 1` after attempt `attempt` (1-based) failed
    /// with `failure`; nil when there is to be no further attempt. `random` gives a number
    /// in 0..<1 for the jitter.
    public func delay(after attempt: Int, failure: Failure, random: () -> Double = { Double.random(in: 0..<1) })
        -> Double?
    {
        guard attempt < maxAttempts else { return nil }
        let backoff = min(maxDelay, baseDelay * pow(2, Double(attempt - 1)))
        // Full jitter over the upper half: waits spread out, and never collapse to nothing.
        let jittered = backoff * (0.5 + 0.5 * random())
        switch failure {
        case .server(let retryAfter?, _):
            guard retryAfter <= longestWait else { return nil }
            return max(retryAfter, jittered)
        case .server(nil, let busy):
            return busy ? jittered : nil
        case .transport:
            return jittered
        }
    }
}
