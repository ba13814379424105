import CloudKitWeb
import Foundation

/// Several ``BrowseSite``s over handles of their own to the same store, answering requests side
/// by side: a long request (a download of a large table, a migration's rehearsal) holds one of
/// them, and the next page is answered by another. A request waits only when every site is
/// busy. Each site answers one request at a time, as a store handle is used by one thread at a
/// time.
public final class BrowseSites: @unchecked Sendable {
    private let condition = NSCondition()
    private var free: [BrowseSite]
    /// Every site, busy or not.
    public let all: [BrowseSite]

    /// `sites` must show the same store (each through a handle of its own).
    public init(_ sites: [BrowseSite]) {
        precondition(!sites.isEmpty, "BrowseSites needs a site")
        all = sites
        free = sites
    }

    /// Tells every site the port and address they are served on (see
    /// ``BrowseSite/listening(on:bound:)``).
    public func listening(on port: Int, bound: String) {
        for site in all { site.listening(on: port, bound: bound) }
    }

    /// The answer to one request, from the first site that is free.
    public func respond(_ request: CloudKitHTTPRequest) -> CloudKitHTTPResponse {
        let site = take()
        defer { give(site) }
        return site.respond(request)
    }

    /// A free site, waiting for one when all are busy; ``give(_:)`` hands it back.
    func take() -> BrowseSite {
        condition.lock()
        defer { condition.unlock() }
        while free.isEmpty { condition.wait() }
        return free.removeLast()
    }

    func give(_ site: BrowseSite) {
        condition.lock()
        free.append(site)
        condition.signal()
        condition.unlock()
    }
}
