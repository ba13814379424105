import Foundation
import Records

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A small HTTP/1.1 server on a loopback port: persistent connections (until the client
/// closes one or sends `Connection: close`), bodies by Content-Length, each request answered by `handler` (which
/// throws to cut the connection without an answer). Enough for CloudKit clients, browsers
/// and curl on the same machine; not a general web server. The emulator serves on it, and
/// `ckport cloud login` waits on it for the sign-in callback.
public final class LoopbackHTTPServer: @unchecked Sendable {
    public typealias Handler = @Sendable (CloudKitHTTPRequest) throws -> CloudKitHTTPResponse
    /// The port it listens on (chosen by the system when 0 was asked for).
    public let port: Int
    private let socket: Int32
    private let handler: Handler
    private let running = LockedFlag()

    /// How much a client may ask of the server.
    public struct Limits: Sendable {
        /// Connections served at once; more are closed at once.
        public var connections = 64
        /// The largest request body taken; a larger one closes the connection.
        public var body = 64 << 20
        /// Seconds a connection may stay silent before it is closed.
        public var idle: Int = 30
        public init(connections: Int = 64, body: Int = 64 << 20, idle: Int = 30) {
            self.connections = connections
            self.body = body
            self.idle = idle
        }
    }

    private let limits: Limits
    private let open = ConnectionCount()

    /// The IPv4 address listened on: 127.0.0.1 unless another was asked for.
    public let host: String

    /// - Parameter host: the IPv4 address to listen on; 127.0.0.1 (this machine only) unless a
    ///   caller asks for another, such as 0.0.0.0 for every interface.
    public init(port: Int = 0, host: String = "127.0.0.1", limits: Limits = Limits(), handler: @escaping Handler) throws
    {
        self.handler = handler
        self.limits = limits
        self.host = host
        guard (0...65535).contains(port) else { throw ServerError("\(port) is not a port (0 to 65535)") }
        var parsed = in_addr()
        guard inet_pton(AF_INET, host, &parsed) == 1 else {
            throw ServerError("\(host) is not an IPv4 address to listen on")
        }
        #if canImport(Glibc)
            let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let fd = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw ServerError("cannot open a socket: \(String(cString: strerror(errno)))") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        #if canImport(Darwin)
            address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr = parsed
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            let inUse = errno == EADDRINUSE
            let reason = String(cString: strerror(errno))
            close(fd)
            throw ServerError(
                "cannot listen on \(host):\(port): \(reason)"
                    + (inUse
                        ? " (another program listens there, another ckport serve or cloud login perhaps: --port chooses another port)"
                        : ""))
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.port = Int(UInt16(bigEndian: address.sin_port))
        socket = fd
    }

    /// The port could not be had (taken, or not allowed).
    public struct ServerError: CKPortError, Sendable {
        public var description: String
        public var category: ErrorCategory { .environment }
        public init(_ description: String) { self.description = description }
    }

    /// The server's base URL.
    public var baseURL: URL { URL(string: "http://\(host == "0.0.0.0" ? "127.0.0.1" : host):\(port)")! }

    /// Accepts connections on a thread of its own, each answered on a thread of its own.
    public func start() {
        let thread = Thread { [self] in
            while running.value {
                let client = accept(socket, nil, nil)
                if client < 0 { if errno == EINTR { continue } else { return } }
                // A silent client is let go after a while; past the cap, connections are refused.
                var timeout = timeval(tv_sec: limits.idle, tv_usec: 0)
                setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                guard open.enter(limit: limits.connections) else {
                    close(client)
                    continue
                }
                let worker = Thread { [self] in
                    defer { open.leave() }
                    serve(client)
                }
                worker.start()
            }
        }
        thread.name = "ckport loopback server"
        thread.start()
    }

    public func stop() {
        running.value = false
        shutdown(socket, Int32(SHUT_RDWR))
        close(socket)
    }

    /// Answers the requests of one connection in turn, until the client closes it or asks to
    /// (`Connection: close`), or the handler cuts it.
    private func serve(_ client: Int32) {
        defer { close(client) }
        var buffer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            var headerEnd = buffer.firstRange(of: [13, 10, 13, 10])?.upperBound
            while headerEnd == nil {
                let count = read(client, &chunk, chunk.count)
                guard count > 0 else { return }
                buffer += chunk[0..<count]
                headerEnd = buffer.firstRange(of: [13, 10, 13, 10])?.upperBound
                if buffer.count > 1 << 20 && headerEnd == nil { return }
            }
            let head = String(decoding: buffer[0..<headerEnd!], as: UTF8.self).components(separatedBy: "\r\n")
            let requestLine = head[0].split(separator: " ")
            // An origin-form target only ("/path?query"): anything else is not for this server.
            guard requestLine.count >= 2, requestLine[1].hasPrefix("/"),
                let url = URL(string: "http://127.0.0.1:\(port)\(requestLine[1])")
            else {
                _ = Array("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
                    .withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
                return
            }
            var headers: [(name: String, value: String)] = []
            for line in head.dropFirst() where !line.isEmpty {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers.append(
                    (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
            let length = Int(headers.first { $0.name.lowercased() == "content-length" }?.value ?? "0") ?? 0
            guard length >= 0, length <= limits.body else { return }
            while buffer.count - headerEnd! < length {
                let count = read(client, &chunk, chunk.count)
                guard count > 0 else { return }
                buffer += chunk[0..<count]
            }
            let body = Data(buffer[headerEnd!..<(headerEnd! + length)])
            buffer.removeFirst(headerEnd! + length)
            let closing = headers.contains { $0.name.lowercased() == "connection" && $0.value.lowercased() == "close" }
            let request = CloudKitHTTPRequest(method: String(requestLine[0]), url: url, headers: headers, body: body)
            guard let response = try? handler(request) else { return }  // a dropped connection
            let phrase = response.status < 300 ? "OK" : response.status < 400 ? "Found" : "Error"
            // A body in a file is sent from it a piece at a time (and the file removed after):
            // memory stays flat however large the body.
            var file: Int32 = -1
            var bodyLength = Int64(response.body.count)
            defer {
                if file >= 0 { close(file) }
                if let path = response.bodyFile, response.removesBodyFile { unlink(path) }
            }
            if let path = response.bodyFile {
                file = openForReading(path)
                var info = stat()
                guard file >= 0, fstat(file, &info) == 0 else { return }
                bodyLength = Int64(info.st_size)
            }
            var text = "HTTP/1.1 \(response.status) \(phrase)\r\nContent-Length: \(bodyLength)\r\n"
            if closing { text += "Connection: close\r\n" }
            for (name, value) in response.headers { text += "\(name): \(value)\r\n" }
            func send(_ bytes: [UInt8]) -> Bool {
                var sent = 0
                while sent < bytes.count {
                    let count = bytes[sent...].withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
                    guard count > 0 else { return false }
                    sent += count
                }
                return true
            }
            guard
                send(Array((text + "\r\n").utf8) + (file >= 0 || request.method == "HEAD" ? [] : Array(response.body)))
            else { return }
            if file >= 0 && request.method != "HEAD" {
                var piece = [UInt8](repeating: 0, count: 1 << 16)
                while true {
                    let count = read(file, &piece, piece.count)
                    if count <= 0 { break }
                    guard send(Array(piece[0..<count])) else { return }
                }
            }
            if closing { return }
        }
    }
}

/// A file opened to be read (the server's own `open` is its connection count).
private func openForReading(_ path: String) -> Int32 {
    open(path, O_RDONLY | O_CLOEXEC)
}

/// The connections being served.
final class ConnectionCount: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0

    /// Counts one more, unless `limit` are open already.
    func enter(limit: Int) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard count < limit else { return false }
        count += 1
        return true
    }

    func leave() {
        lock.lock()
        count -= 1
        lock.unlock()
    }
}

/// A flag two threads read and write.
final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = true
    var value: Bool {
        get {
            lock.lock()
            defer { lock.unlock() }
            return flag
        }
        set {
            lock.lock()
            flag = newValue
            lock.unlock()
        }
    }
}
