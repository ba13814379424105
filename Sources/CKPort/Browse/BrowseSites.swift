import CloudKitWeb
import Foundation
import NIOConcurrencyHelpers
import Records

/// Several ``BrowseSite``s over handles of their own to the same store, answering requests side
/// by side: a long request (a download of a large table, a migration's rehearsal) holds one of
/// them, and the next page is answered by another. A request waits (without holding a thread)
/// only when every site is busy.
///
/// A store handle is synchronous and used by one thread at a time: each site's work runs on a
/// serial queue of its own, off the server's event loops and Swift's cooperative pool, and the
/// request awaits it.
public final class BrowseSites: Sendable {
    private struct Pool {
        var free: [Int]
        var waiting: [CheckedContinuation<Int?, Never>] = []
    }

    private let pool: NIOLockedValueBox<Pool>
    private let queues: [DispatchQueue]
    /// Every site, busy or not.
    public let all: [BrowseSite]
    /// Requests that may wait for a site at once; more are answered "busy" at once.
    public let waitingLimit: Int

    /// `sites` must show the same store (each through a handle of its own).
    public init(_ sites: [BrowseSite], waitingLimit: Int = 64) {
        precondition(!sites.isEmpty, "BrowseSites needs a site")
        all = sites
        self.waitingLimit = waitingLimit
        queues = sites.indices.map { DispatchQueue(label: "ckport.browse.\($0)") }
        pool = NIOLockedValueBox(Pool(free: Array(sites.indices)))
    }

    /// `work`'s answer, from the first site that is free; `busy`'s when ``waitingLimit``
    /// requests wait already.
    func answer(
        _ work: @escaping @Sendable (BrowseSite) -> CloudKitHTTPResponse,
        busy: () -> CloudKitHTTPResponse = { CloudKitHTTPResponse(status: 503, body: Data()) }
    ) async -> CloudKitHTTPResponse {
        guard let index = await take() else { return busy() }
        defer { give(index) }
        let site = all[index]
        // The page works for an operation of its own inside the server's: stopping the server
        // (Ctrl-C) or cancelling the request stops its query at the next row. A dispatch queue
        // does not carry task-local values, so the operation is handed to the block.
        return await Cancellation.withOperation { operation in
            await withCheckedContinuation { continuation in
                queues[index].async {
                    Cancellation.$current.withValue(operation) { continuation.resume(returning: work(site)) }
                }
            }
        }
    }

    /// The index of a free site, waiting for one when all are busy (``give(_:)`` hands it
    /// back); nil at once when ``waitingLimit`` requests wait already.
    func take() async -> Int? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Int?, Never>) in
            let now = pool.withLockedValue { pool -> Int?? in
                if let index = pool.free.popLast() { return .some(index) }
                guard pool.waiting.count < waitingLimit else { return .some(nil) }
                pool.waiting.append(continuation)
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    /// Requests waiting for a site now.
    var waitingCount: Int { pool.withLockedValue { $0.waiting.count } }

    func give(_ index: Int) {
        let next = pool.withLockedValue { pool -> CheckedContinuation<Int?, Never>? in
            if pool.waiting.isEmpty {
                pool.free.append(index)
                return nil
            }
            return pool.waiting.removeFirst()
        }
        next?.resume(returning: index)
    }
}
