import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Records
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One of ckport's web servers (`serve`, the CloudKit emulator, the sign-in callback): a
/// Hummingbird application over SwiftNIO on one address and port, running until ``stop()``.
/// Connections stay open between requests (HTTP/1.1 keep-alive) and are served by SwiftNIO's
/// event loops, not a thread each; what a client may ask for is bounded by ``Limits``.
public final class WebServer: Sendable {
    /// How much clients may ask of the server.
    public struct Limits: Sendable {
        /// Connections open at once; while that many are open, new ones wait to be accepted.
        public var connections: Int
        /// The largest request body a handler takes (see ``WebServer/body(of:limit:)``).
        public var body: Int
        /// Seconds a connection may stay silent before it is closed.
        public var idle: Int
        /// Seconds a client may leave an answer unread (nothing more can be sent to it) before
        /// its connection is closed: a client that stops reading does not hold a place forever.
        public var stalled: Int

        public init(connections: Int = 64, body: Int = 64 << 20, idle: Int = 30, stalled: Int = 60) {
            self.connections = connections
            self.body = body
            self.idle = idle
            self.stalled = stalled
        }
    }

    /// The address could not be listened on (taken, or not allowed).
    public struct ServerError: CKPortError, Sendable {
        public var description: String
        public var category: ErrorCategory { .environment }
        public init(_ description: String) { self.description = description }
    }

    /// The port it listens on (the system's choice when 0 was asked for).
    public let port: Int
    /// The IPv4 address listened on.
    public let host: String
    private let running: Task<Void, Never>
    private let group: ServiceGroup

    private init(port: Int, host: String, running: Task<Void, Never>, group: ServiceGroup) {
        self.port = port
        self.host = host
        self.running = running
        self.group = group
    }

    /// The server's base URL (127.0.0.1 when it listens on every interface).
    public var baseURL: URL { URL(string: "http://\(host == "0.0.0.0" ? "127.0.0.1" : host):\(port)")! }

    /// Starts serving `router` on `host`:`port` and returns once the port is listened on.
    ///
    /// - Parameters:
    ///   - host: an IPv4 address; 127.0.0.1 (this machine only) unless the caller asks for
    ///     another, such as 0.0.0.0 for every interface.
    ///   - address: set to where the server listens as soon as it does, before any request is
    ///     answered (the routes' ``HostCheckMiddleware`` reads it).
    public static func start<Context: RequestContext>(
        _ router: Router<Context>, host: String = "127.0.0.1", port: Int = 0, limits: Limits = Limits(),
        address: ListeningAddress? = nil
    ) async throws -> WebServer where Context.Source == ApplicationRequestContextSource {
        guard (0...65535).contains(port) else { throw ServerError("\(port) is not a port (0 to 65535)") }
        var parsed = in_addr()
        guard inet_pton(AF_INET, host, &parsed) == 1 else {
            throw ServerError("\(host) is not an IPv4 address to listen on")
        }
        let listening = Listening()
        // Hummingbird's own log lines (startup, each request) are not ckport's output.
        let quiet = Logger(label: "ckport.web") { _ in SwiftLogNoOpLogHandler() }
        let application = Application(
            router: router,
            server: HTTPServerBuilder { responder in
                ConnectionRules(
                    inner: HTTP1Channel(
                        responder: responder,
                        configuration: .init(
                            additionalChannelHandlers: [
                                IdleStateHandler(writeTimeout: .seconds(Int64(limits.stalled))), StalledClientHandler(),
                            ],
                            idleTimeout: .seconds(Int64(limits.idle)))))
            },
            configuration: ApplicationConfiguration(
                address: .hostname(host, port: port), serverName: nil,
                availableConnectionsDelegate: MaximumAvailableConnections(limits.connections)),
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? port
                address?.set(port: bound, bound: host)
                listening.resume(.success(bound))
            },
            logger: quiet)
        // No signal handlers of its own: the program that runs the server decides when it stops.
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [application], gracefulShutdownSignals: [], logger: quiet))
        let running = Task {
            do {
                try await group.run()
                listening.resume(.failure(ServerError("the server on \(host):\(port) stopped before it listened")))
            } catch {
                listening.resume(.failure(Self.explained(error, host: host, port: port)))
            }
        }
        do {
            let bound = try await listening.wait()
            return WebServer(port: bound, host: host, running: running, group: group)
        } catch {
            running.cancel()
            _ = await running.result
            throw error
        }
    }

    /// Stops listening, lets the answers under way finish (an answer the browser is still
    /// being sent, such as the sign-in callback's page) for up to `grace` seconds, closes every
    /// connection, and returns once the server has stopped.
    public func stop(grace: Double = 5) async {
        await group.triggerGracefulShutdown()
        let running = self.running
        await withTaskGroup(of: Void.self) { waiting in
            waiting.addTask { await running.value }
            waiting.addTask {
                try? await Task.sleep(for: .seconds(grace))
                running.cancel()
            }
            await waiting.next()
            waiting.cancelAll()
        }
        _ = await running.result
    }

    /// A bind error in words a user acts on.
    private static func explained(_ error: any Error, host: String, port: Int) -> ServerError {
        if let error = error as? IOError {
            let reason = String(cString: strerror(error.errnoCode))
            return ServerError(
                "cannot listen on \(host):\(port): \(reason)"
                    + (error.errnoCode == EADDRINUSE
                        ? " (another program listens there, another ckport serve or cloud login perhaps: --port chooses another port)"
                        : ""))
        }
        return ServerError("cannot listen on \(host):\(port): \(error)")
    }

    /// A request's body, refused with 413 when it is longer than `limit` bytes.
    public static func body(of request: Request, limit: Int) async throws -> Data {
        var buffer = try await request.body.collect(upTo: limit)
        return buffer.readData(length: buffer.readableBytes) ?? Data()
    }
}

/// The port the server came to listen on, or why it did not: whoever comes first.
private final class Listening: Sendable {
    private let state = NIOLockedValueBox<
        (waiter: CheckedContinuation<Int, any Error>?, result: Result<Int, any Error>?)
    >(
        (nil, nil))

    func resume(_ result: Result<Int, any Error>) {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Int, any Error>? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(with: result)
    }

    func wait() async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in
            let ready = state.withLockedValue { state -> Result<Int, any Error>? in
                if let result = state.result { return result }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }
}

/// Hummingbird's HTTP/1 channel, with HTTP/1.0's rules for when a connection ends (RFC 9112
/// §9.3): Hummingbird keeps every connection open after an answer, which an HTTP/1.0 client
/// (ApacheBench, simple scripts and monitors) reads as "more may come" and waits on until the
/// idle limit closes it — 15 to 30 seconds a request.
private struct ConnectionRules: HTTPChannelHandler {
    let inner: HTTP1Channel
    var responder: HTTPChannelHandler.Responder { inner.responder }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<HTTP1Channel.Value> {
        inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            // Between the request decoder and Hummingbird's codec, where requests still carry
            // their version and Connection header.
            let decoder = try channel.pipeline.syncOperations.handler(
                type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try channel.pipeline.syncOperations.addHandler(HTTP10Connections(), position: .after(decoder))
            return value
        }
    }

    func handle(value: HTTP1Channel.Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}

/// An answer to a request that did not ask to keep its connection (HTTP/1.0 without
/// `Connection: keep-alive`, or any request with `Connection: close`) says `Connection: close`
/// and the connection closes once it is written; an HTTP/1.0 request that asked to keep it is
/// told `Connection: keep-alive`, without which an HTTP/1.0 client does not reuse it.
final class HTTP10Connections: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// Each request's wish, in order, until its answer's end is written (requests may be
    /// pipelined).
    private var asked: [(keepAlive: Bool, oldVersion: Bool)] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) {
            asked.append((head.isKeepAlive, head.version.major == 1 && head.version.minor == 0))
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where head.status.code >= 200:
            if let request = asked.first {
                if !request.keepAlive {
                    head.headers.replaceOrAdd(name: "connection", value: "close")
                } else if request.oldVersion {
                    head.headers.replaceOrAdd(name: "connection", value: "keep-alive")
                }
            }
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .end:
            guard !asked.isEmpty, !asked.removeFirst().keepAlive else {
                context.write(data, promise: promise)
                return
            }
            let written = promise ?? context.eventLoop.makePromise()
            context.writeAndFlush(data, promise: written)
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            written.futureResult.whenComplete { _ in bound.value.close(promise: nil) }
        default:
            context.write(data, promise: promise)
        }
    }
}

/// Closes a connection whose client stopped reading: nothing was written for the stalled time
/// (``IdleStateHandler``'s write event) while the connection could take no more. A connection
/// waiting for a slow page is still writable, and stays.
private final class StalledClientHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case IdleStateHandler.IdleStateEvent.write = event, !context.channel.isWritable {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
