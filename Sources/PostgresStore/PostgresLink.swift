import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import Records

/// One connection to the server, used from ordinary (blocking) code: the store's API is
/// synchronous, like the SQLite store's, so each call waits for the server's answer on the
/// calling thread, while the connection's work runs on its NIO event loop.
final class PostgresLink: @unchecked Sendable {
    let location: PostgresLocation
    private let connection: PostgresConnection
    private let logger = Logger(label: "ckport.postgres")

    /// Connects to `location`, with its password, TLS as it asks.
    init(_ location: PostgresLocation, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        self.location = location
        let password = try location.password(environment: environment)
        var configuration: PostgresConnection.Configuration
        if let directory = location.socketDirectory {
            configuration = .init(unixSocketPath: "\(directory)/.s.PGSQL.\(location.port)", username: location.user, password: password,
                                  database: location.database)
        } else {
            let tls: PostgresConnection.Configuration.TLS
            switch location.tls {
            case .disable:
                tls = .disable
            case .prefer:
                tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
            case .require:
                tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            }
            configuration = .init(host: location.host, port: location.port, username: location.user, password: password,
                                  database: location.database, tls: tls)
        }
        configuration.options.connectTimeout = .seconds(15)
        let logger = self.logger
        do {
            connection = try PostgresConnection.connect(on: MultiThreadedEventLoopGroup.singleton.any(), configuration: configuration,
                                                        id: 1, logger: logger).wait()
        } catch {
            throw PostgresStoreError.unreachable("cannot connect to \(location): \(PostgresLink.explain(error))")
        }
    }

    deinit {
        try? connection.close().wait()
    }

    /// Runs statements that return nothing, one after another (each without parameters).
    func execute(_ statements: String...) throws {
        try settle()
        for sql in statements {
            _ = try wait(connection.query(PostgresQuery(unsafeSQL: sql), logger: logger))
        }
    }

    /// Runs a query and returns its rows, each column as text (nil for NULL); every column must
    /// be of a text type (cast others with `::text`).
    func rows(_ query: PostgresQuery) throws -> [[String?]] {
        try rows(of: send(query))
    }

    /// Sends a query and returns at once: ``rows(of:)`` waits for its answer. Other queries
    /// sent meanwhile run after it, in order (the connection queues them).
    func send(_ query: PostgresQuery) throws -> EventLoopFuture<PostgresQueryResult> {
        try settle()
        return connection.query(query, logger: logger)
    }

    /// The rows of a query ``send(_:)`` sent, each column as text.
    func rows(of answer: EventLoopFuture<PostgresQueryResult>) throws -> [[String?]] {
        do {
            return try wait(answer).rows.map { row in try row.map { cell in try cell.decode(String?.self) } }
        } catch let error as PostgresStoreError {
            throw error
        } catch {
            throw PostgresStoreError.server("\(location): a column of the answer is not text (\(error))")
        }
    }

    /// Runs a query and returns its rows as the server sent them.
    func rowsRaw(_ query: PostgresQuery) throws -> [PostgresRow] {
        try settle()
        return try wait(connection.query(query, logger: logger)).rows
    }

    /// False once the connection failed in a way that leaves it unusable (a rollback that did
    /// not go through): the pool then closes it instead of lending it again.
    private(set) var usable = true

    /// Runs `body` in one transaction: committed when it returns (rolled back instead with
    /// `rollback`, for a dry run), rolled back when it throws. `begin` says which kind.
    func transaction<T>(rollback: Bool = false, begin: String = "BEGIN", _ body: () throws -> T) throws -> T {
        try execute(begin)
        do {
            let result = try body()
            try execute(rollback ? "ROLLBACK" : "COMMIT")
            return result
        } catch {
            try? settle()
            do { try execute("ROLLBACK") } catch { usable = false }
            throw error
        }
    }

    /// A name for the next cursor of this connection (cursors of one transaction may be open
    /// at once: a body that reads while it walks the rows of another query).
    func nextCursorName() -> String {
        cursors += 1
        return "_ck_rows_\(cursors)"
    }
    private var cursors = 0

    /// Runs async work on the connection (COPY has only an async API) from blocking code. The
    /// work runs on threads of its own, so waiting here never holds a thread it needs, even when
    /// the caller is itself on Swift concurrency's pool.
    func run(_ work: @escaping @Sendable (PostgresConnection, Logger) async throws -> Void) throws {
        try start(work)
        try settle()
    }

    /// Starts async work on the connection and returns at once, so that this thread can prepare
    /// the next piece while the server takes this one in (a load's COPY). Whatever uses the
    /// connection next waits for it first, and gets its error if it failed.
    func start(_ work: @escaping @Sendable (PostgresConnection, Logger) async throws -> Void) throws {
        try settle()
        let done = DispatchSemaphore(value: 0)
        let failure = FailureBox()
        Task(executorPreference: PostgresLink.executor) { [connection, logger] in
            do { try await work(connection, logger) } catch { failure.error = error }
            done.signal()
        }
        pending = (done, failure)
    }

    /// Work started by ``start(_:)`` that nothing has waited for yet.
    private var pending: (done: DispatchSemaphore, failure: FailureBox)?

    /// Waits for the work ``start(_:)`` left running, and throws its error.
    func settle() throws {
        guard let (done, failure) = pending else { return }
        pending = nil
        done.wait()
        if let error = failure.error {
            if error is PostgresStoreError { throw error }
            throw PostgresStoreError.server("\(location): \(PostgresLink.explain(error))")
        }
    }

    private static let executor = DispatchTaskExecutor()

    /// Waits on this thread for the server's answer, with its errors in ckport's words. The
    /// work runs on the connection's event loop, so waiting never takes a thread the answer
    /// needs.
    private func wait<T: Sendable>(_ future: EventLoopFuture<T>) throws -> T {
        do {
            return try future.wait()
        } catch {
            throw PostgresStoreError.server("\(location): \(PostgresLink.explain(error))")
        }
    }

    /// The server's own message for an error it sent, else the client's.
    static func explain(_ error: Error) -> String {
        if let error = error as? PSQLError {
            if let info = error.serverInfo, let message = info[.message] {
                let state = info[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
                let detail = info[.detail].map { ": \($0)" } ?? ""
                return message + detail + state
            }
            if let underlying = error.underlying { return "\(underlying)" }
            return "\(error.code)"
        }
        return "\(error)"
    }
}

/// Connections to one server, lent one to a transaction: a process may hold several
/// transactions at once (a pull's writer beside its readers, a read inside a write), each on a
/// connection of its own; idle connections are kept for the next transaction.
final class PostgresPool: @unchecked Sendable {
    let location: PostgresLocation
    private let environment: [String: String]
    private let lock = NSLock()
    private var idle: [PostgresLink] = []
    /// Idle connections kept at most; more are closed when they come back.
    private let keep = 4

    init(_ location: PostgresLocation, environment: [String: String]) {
        self.location = location
        self.environment = environment
    }

    /// Runs `body` on a connection of the pool, opened when none is idle.
    func withLink<T>(_ body: (PostgresLink) throws -> T) throws -> T {
        let link = try take()
        defer { give(link) }
        return try body(link)
    }

    private func take() throws -> PostgresLink {
        lock.lock()
        let link = idle.popLast()
        lock.unlock()
        if let link { return link }
        return try PostgresLink(location, environment: environment)
    }

    private func give(_ link: PostgresLink) {
        guard link.usable else { return }
        lock.lock()
        defer { lock.unlock() }
        if idle.count < keep { idle.append(link) }
    }
}

/// A task executor on a dispatch queue of its own.
final class DispatchTaskExecutor: TaskExecutor, @unchecked Sendable {
    private let queue = DispatchQueue(label: "ckport.postgres", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}

/// Where a task run from blocking code leaves its error.
final class FailureBox: @unchecked Sendable {
    var error: Error?
}
