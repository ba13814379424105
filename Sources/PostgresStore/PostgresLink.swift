import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import Records
import StoreCore
import Synchronization

/// One connection to the server, used from ordinary (blocking) code: the store's API is
/// synchronous, like the SQLite store's, so each call waits for the server's answer on the
/// calling thread, while the connection's work runs on its NIO event loop.
///
/// `@unchecked Sendable`: a link is used by one transaction at a time. ``PostgresPool`` lends it
/// under its lock and takes it back the same way, so the mutable state here (what is pending,
/// held back, whether it is usable) is only ever touched by its borrower; what the event loop
/// touches (`closed`, `onLost`) is behind locks of its own.
final class PostgresLink: @unchecked Sendable {
    let location: PostgresLocation
    private let connection: PostgresConnection
    private let logger = Logger(label: "ckport.postgres")

    /// Connects to `location`, with its password, TLS as it asks.
    init(
        _ location: PostgresLocation, waitSeconds: Double = 300,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        self.location = location
        let password = try location.password(environment: environment)
        var configuration: PostgresConnection.Configuration
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        var socket: (any Channel)?
        if let directory = location.socketDirectory {
            configuration = .init(
                unixSocketPath: "\(directory)/.s.PGSQL.\(location.port)", username: location.user, password: password,
                database: location.database)
        } else {
            // As libpq does: only verify-ca and verify-full check who the server is (and require,
            // when given the roots to check against); the others encrypt without checking.
            var settings = TLSConfiguration.makeClientConfiguration()
            let verifying =
                location.tls.verifiesCertificate || (location.tls == .require && location.rootCertificates != nil)
            settings.certificateVerification =
                !verifying ? .none : location.tls == .verifyFull ? .fullVerification : .noHostnameVerification
            if let roots = location.rootCertificates { settings.trustRoots = .file(roots) }
            let tls: PostgresConnection.Configuration.TLS
            switch location.tls {
            case .disable:
                tls = .disable
            case .allow, .prefer:
                tls = .prefer(try NIOSSLContext(configuration: settings))
            case .require, .verifyCA, .verifyFull:
                tls = .require(try NIOSSLContext(configuration: settings))
            }
            // The socket is ckport's own, so that it can ask for TCP keepalives (a server host
            // that vanishes is then noticed in about two minutes of silence, not when the kernel
            // gives up hours later); TLS and the rest are PostgresNIO's, as for a host and port.
            do {
                let channel = try PostgresLink.connectTCP(host: location.host, port: location.port, on: loop)
                socket = channel
                configuration = .init(
                    establishedChannel: channel, tls: tls, username: location.user, password: password,
                    database: location.database)
            } catch {
                throw PostgresStoreError.unreachable(
                    "cannot connect to \(location): \(PostgresLink.explainConnecting(error, location))")
            }
            // What PostgresNIO names for SNI and verify-full when it makes the socket: the host,
            // unless it is an address.
            if !PostgresLink.isAddress(location.host) { configuration.options.tlsServerName = location.host }
        }
        configuration.options.connectTimeout = PostgresLink.connectTimeout
        let logger = self.logger
        do {
            connection = try PostgresConnection.connect(on: loop, configuration: configuration, id: 1, logger: logger)
                .wait()
        } catch {
            socket?.close(promise: nil)
            throw PostgresStoreError.unreachable(
                "cannot connect to \(location): \(PostgresLink.explainConnecting(error, location))")
        }
        connection.closeFuture.whenComplete { [closed, onLost] _ in
            closed.withLockedValue { $0 = true }
            loop.scheduleTask(in: PostgresLink.closingGrace) { onLost.withLockedValue { $0 }?() }
        }
        // What the store's text depends on, whatever the server, database or role sets: every
        // digit of a double (extra_float_digits), times in UTC and ISO form, bytes in hex; and
        // no wait for a lock without end, whatever the statement (see ``workWait(_:)``).
        _ = try wait(
            connection.query(PostgresQuery(unsafeSQL: PostgresLink.settings(waitSeconds: waitSeconds)), logger: logger))
    }

    static let connectTimeout = TimeAmount.seconds(15)

    /// TCP keepalive: the first probe after this many seconds of silence, then one every
    /// ``keepaliveInterval`` seconds, and the connection fails after ``keepaliveProbes``
    /// unanswered ones. A busy server's kernel answers the probes, so a long statement is never
    /// cut short.
    static let keepaliveIdle = 60
    static let keepaliveInterval = 10
    static let keepaliveProbes = 6

    /// A TCP connection to the server with keepalives on.
    static func connectTCP(host: String, port: Int, on loop: any EventLoop) throws -> any Channel {
        var bootstrap = ClientBootstrap(group: loop).connectTimeout(connectTimeout)
            .channelOption(ChannelOptions.socketOption(.so_keepalive), value: 1)
            .channelOption(
                ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: TCP_KEEPINTVL)),
                value: keepaliveInterval
            )
            .channelOption(
                ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: TCP_KEEPCNT)),
                value: keepaliveProbes)
        #if os(Linux)
            bootstrap = bootstrap.channelOption(
                ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: TCP_KEEPIDLE)),
                value: keepaliveIdle)
        #elseif canImport(Darwin)
            bootstrap = bootstrap.channelOption(
                ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: TCP_KEEPALIVE)),
                value: keepaliveIdle)
        #endif
        return try bootstrap.connect(host: host, port: port).wait()
    }

    /// Whether `host` is an IPv4 or IPv6 address rather than a name.
    static func isAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// The session settings every connection of the store runs with.
    static func settings(waitSeconds: Double) -> String {
        """
        SELECT set_config('extra_float_digits', '3', false), set_config('TimeZone', 'UTC', false),
               set_config('DateStyle', 'ISO, YMD', false), set_config('IntervalStyle', 'postgres', false),
               set_config('bytea_output', 'hex', false), set_config('standard_conforming_strings', 'on', false),
               set_config('lock_timeout', '\(lockTimeout(workWait(waitSeconds)))', false),
               set_config('default_transaction_isolation', 'read committed', false)
        """
    }

    /// The longest a statement that reads or writes records waits for a lock: the store's wait,
    /// but never under ``serverWaitFloor`` seconds.
    ///
    /// `--wait` is about the locks another process holds for a whole transaction: the store's
    /// tables during a schema change or migration (those statements wait exactly the store's
    /// wait, see `PostgresSession`). Writers side by side also meet the server's own locks, held
    /// for a moment: a table or index growing by a few pages (a relation extension lock), a row
    /// another writer is inserting into the same index page. With `--wait 0`, those would fail
    /// writers that never waited for each other.
    static func workWait(_ waitSeconds: Double) -> Double { max(waitSeconds, serverWaitFloor) }

    /// See ``workWait(_:)``.
    static let serverWaitFloor: Double = 10

    /// `lock_timeout` in milliseconds for a wait in seconds (at least 1: 0 would mean no limit).
    static func lockTimeout(_ waitSeconds: Double) -> Int {
        max(1, Int((min(waitSeconds, 2_000_000) * 1000).rounded()))
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
            do {
                try execute(rollback ? "ROLLBACK" : "COMMIT")
            } catch PostgresStoreError.unreachable where !rollback {
                // The server may have committed before the connection went: say so, rather
                // than "nothing was written".
                usable = false
                throw PostgresStoreError.unreachable(
                    "\(location): the connection to the server was lost while it committed this write, so whether the write is in the store cannot be told from here; look (ckport stats, ckport export) before running it again"
                )
            }
            return result
        } catch {
            heldBack = []
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
        let done = connection.eventLoop.makePromise(of: Void.self)
        Task(executorPreference: StoreThreads.shared) { [connection, logger] in
            do {
                try await work(connection, logger)
                done.succeed()
            } catch {
                done.fail(error)
            }
        }
        pending = done.futureResult
    }

    /// Work started by ``start(_:)`` that nothing has waited for yet.
    private var pending: EventLoopFuture<Void>?

    /// Work kept back to go with more of its kind (a load's COPY rows), by whom it is kept,
    /// in the order it was first kept: whatever uses the connection next starts it first. A
    /// transaction that fails drops it.
    private var heldBack: [(owner: ObjectIdentifier, release: () throws -> Void)] = []

    /// Keeps `release` (which starts the work `owner` holds back) until the connection is next
    /// used, unless `owner` has work kept already; the work of other owners stays kept too.
    func holdBack(for owner: AnyObject, _ release: @escaping () throws -> Void) {
        let id = ObjectIdentifier(owner)
        guard !heldBack.contains(where: { $0.owner == id }) else { return }
        heldBack.append((id, release))
    }

    /// Forgets the work `owner` held back (it is starting it itself).
    func letGo(of owner: AnyObject) {
        let id = ObjectIdentifier(owner)
        heldBack.removeAll { $0.owner == id }
    }

    /// Starts the work held back, then waits for the work ``start(_:)`` left running, and
    /// throws its error.
    func settle() throws {
        while !heldBack.isEmpty {
            try heldBack.removeFirst().release()
        }
        guard let work = pending else { return }
        pending = nil
        switch outcome(of: work) {
        case .success?:
            return
        case .failure(let error as PostgresStoreError)?:
            throw error
        case .failure(let error)? where !isClosed && !connection.isClosed:
            throw PostgresStoreError.server("\(location): \(PostgresLink.explain(error))")
        case .failure?, nil:
            // Records whose connection went under them (the server restarted mid-COPY): a
            // connection that closes under the work may never answer it.
            usable = false
            throw PostgresStoreError.unreachable(
                "\(location): the connection to the server was lost while records were on their way; nothing of this write was committed"
            )
        }
    }

    /// Waits on this thread for the server's answer, with its errors in ckport's words.
    ///
    /// A connection that closed under a query (the server restarted, the session was
    /// terminated) may leave the query without an answer for ever: its close ends the wait
    /// too, with an error, and the connection is not lent again.
    private func wait<T: Sendable>(_ future: EventLoopFuture<T>) throws -> T {
        switch outcome(of: future) {
        case .success(let value)?:
            return value
        case .failure(let error)? where !isClosed && !connection.isClosed:
            throw PostgresStoreError.server("\(location): \(PostgresLink.explain(error))")
        case .failure?, nil:
            // A query that failed because the connection went (the server restarted) says so.
            usable = false
            throw PostgresStoreError.unreachable(
                "\(location): the connection to the server was lost before it answered; nothing of this transaction was committed"
            )
        }
    }

    /// What `future` ended with, or nil when the connection closed first (an answer already on
    /// its way still gets ``closingGrace`` to arrive).
    ///
    /// This is where the store's synchronous API meets the connection: the calling thread (the
    /// store's caller, never an event loop) blocks in NIO's `wait()` as a SQLite store's caller
    /// blocks in a read of its file, while the work runs on the connection's event loop, so
    /// waiting never takes a thread the answer needs.
    private func outcome<T: Sendable>(of future: EventLoopFuture<T>) -> Result<T, Error>? {
        let loop = future.eventLoop
        let settled = loop.makePromise(of: Result<T, Error>?.self)
        future.whenComplete { settled.succeed($0) }
        let lost: @Sendable () -> Void = { settled.succeed(nil) }
        onLost.withLockedValue { $0 = lost }
        defer { onLost.withLockedValue { $0 = nil } }
        if closed.withLockedValue({ $0 }) {
            loop.scheduleTask(in: PostgresLink.closingGrace) { lost() }
        }
        // The promise only ever succeeds.
        return (try? settled.futureResult.wait()) ?? nil
    }

    /// How long an answer may still arrive after its connection closed.
    static let closingGrace = TimeAmount.seconds(1)

    /// Set once the connection has closed, whoever closed it.
    private let closed = NIOLockedValueBox(false)

    /// Ends the wait under way, if any, for a connection that closed: ``outcome(of:)`` sets it.
    private let onLost = NIOLockedValueBox<(@Sendable () -> Void)?>(nil)

    /// Whether the connection has closed.
    var isClosed: Bool { closed.withLockedValue { $0 } }

    /// Why a connection could not be made, with what to do about it.
    static func explainConnecting(_ error: Error, _ location: PostgresLocation) -> String {
        let text = explain(error).description
        if let psql = error as? PSQLError {
            if "\(psql.code)".contains("authMechanismRequiresPassword") {
                return
                    "the server asks for a password, and none was found: set PGPASSWORD, give passfile=FILE, or add a line for this server to ~/.pgpass"
            }
            if let underlying = psql.underlying, underlying is NIOSSLError || "\(type(of: underlying))".contains("SSL")
            {
                return tlsAdvice("\(underlying)", location)
            }
            if psql.serverInfo?[.sqlState] == "28P01" {
                return text
                    + " (ckport takes the password from PGPASSWORD, from passfile=FILE in the URL, or from a line for this server in ~/.pgpass or $PGPASSFILE; without one, the server refuses)"
            }
            if psql.serverInfo?[.sqlState] == "28000", text.contains("no encryption") {
                return text
                    + "; the server takes this connection only with TLS: add sslmode=require (or verify-full) to the URL"
            }
            if "\(psql.code)".contains("sslUnsupported") {
                return
                    "the server does not offer TLS, and sslmode=\(location.tls.rawValue) asks for it: use sslmode=prefer (TLS when offered) or set the server up for TLS"
            }
        }
        if error is NIOSSLError || "\(type(of: error))".contains("SSL") { return tlsAdvice(text, location) }
        return text
    }

    private static func tlsAdvice(_ raw: String, _ location: PostgresLocation) -> String {
        // BoringSSL's reason (OPENSSL_internal:CERTIFICATE_VERIFY_FAILED), in words.
        var detail = raw
        if let range = raw.range(of: "OPENSSL_internal:") {
            detail = raw[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" }.lowercased()
                .replacingOccurrences(of: "_", with: " ")
        }
        if raw.contains("CERTIFICATE_VERIFY_FAILED") || raw.contains("certificate") || raw.contains("handshakeFailed") {
            let authorities =
                location.rootCertificates.map { "an authority in \($0)" }
                ?? "an authority the system trusts (or give the server's authority as sslrootcert=FILE)"
            return
                "TLS: the server's certificate could not be checked (\(detail)); with sslmode=\(location.tls.rawValue) it must be signed by \(authorities)"
                + (location.tls == .verifyFull ? " and name the host the URL names" : "")
        }
        return "TLS: \(detail)"
    }

    /// The server's own message for an error it sent, else the client's; for a lock that was
    /// waited for too long or two writers in each other's way, what happened in ckport's words.
    static func explain(_ error: Error) -> Message {
        if let error = error as? PSQLError {
            switch error.serverInfo?[.sqlState] {
            case "55P03":
                return
                    "waited longer than \(Wording.storeWait) for a lock another transaction holds (another ckport's schema change or migration, or a session left open on the server); nothing was written (SQLSTATE 55P03)"
            case "40P01":
                return
                    "another ckport was writing the same records, in another order, at the same moment: the server stopped this write so that the other could finish, and nothing of this one was written; run it again (SQLSTATE 40P01)"
            default:
                break
            }
            if let info = error.serverInfo, let message = info[.message] {
                let state = info[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
                let detail = info[.detail].map { ": \($0)" } ?? ""
                return Message(message + detail + state)
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
final class PostgresPool: Sendable {
    let location: PostgresLocation
    private let environment: [String: String]
    private let idle = Mutex<[PostgresLink]>([])
    /// Idle connections kept at most; more are closed when they come back.
    private let keep = 4

    /// How long a statement waits for a lock before it fails.
    private let waitSeconds: Double

    init(_ location: PostgresLocation, waitSeconds: Double, environment: [String: String]) {
        self.location = location
        self.waitSeconds = waitSeconds
        self.environment = environment
    }

    /// Runs `body` on a connection of the pool, opened when none is idle.
    func withLink<T>(_ body: (PostgresLink) throws -> T) throws -> T {
        let link = try take()
        defer { give(link) }
        return try body(link)
    }

    private func take() throws -> PostgresLink {
        while let link = idle.withLock({ $0.popLast() }) {
            // One the server closed while it sat idle (a restart) is left to close.
            if link.usable && !link.isClosed { return link }
        }
        return try PostgresLink(location, waitSeconds: waitSeconds, environment: environment)
    }

    private func give(_ link: PostgresLink) {
        guard link.usable else { return }
        idle.withLock { idle in
            if idle.count < keep { idle.append(link) }
        }
    }
}
