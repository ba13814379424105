import CloudKitWeb
import Formats
import Foundation
import Hummingbird
import Records
import TestSupport
import Testing
import WebServing

/// Sends raw bytes to a loopback port and returns what came back before the server closed the
/// connection (or `wait` seconds passed: generous, for a suite that loads the machine). The
/// socket is read on a thread of its own: the server answers on Swift's cooperative pool, which
/// a blocking read must not hold.
func rawExchange(port: Int, _ text: String, wait: Double = 60, whole: Bool = false) async -> String {
    await rawExchangeClosing(port: port, text, wait: wait, whole: whole).answer
}

/// ``rawExchange(port:_:wait:whole:)``, and whether the server closed the connection (rather
/// than the wait running out).
func rawExchangeClosing(port: Int, _ text: String, wait: Double = 60, whole: Bool = false) async -> (
    answer: String, closed: Bool
) {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: blockingExchange(port: port, text, wait: wait, whole: whole)) }.start()
    }
}

private func blockingExchange(port: Int, _ text: String, wait: Double, whole: Bool) -> (answer: String, closed: Bool) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else { return ("", false) }
    var timeout = timeval(tv_sec: Int(wait), tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    _ = Array(text.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    var answer = [UInt8]()
    var chunk = [UInt8](repeating: 0, count: 4096)
    var closed = false
    while true {
        let n = read(fd, &chunk, chunk.count)
        if n <= 0 {
            closed = n == 0
            break
        }
        answer += chunk[0..<n]
        if !whole, let end = answer.firstRange(of: Array("\r\n\r\n".utf8)),
            let head = String(bytes: answer[..<end.lowerBound], encoding: .utf8),
            let length = head.split(separator: "\r\n").first(where: { $0.lowercased().hasPrefix("content-length:") })
                .flatMap({ Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }),
            answer.count >= end.upperBound + length
        {
            break
        }
    }
    return (String(decoding: answer, as: UTF8.self), closed)
}

@Suite("the sign-in callback and the loopback server")
struct SignInCallbackTests {
    /// Waits of an hour, each given two minutes to end: were cancellation or the token's
    /// arrival lost, the wait would go on and the test fail (it runs on a cooperative pool that
    /// other tests share, so no tighter bound holds).
    @Test("a wait under way wakes when the token comes, and a cancelled wait ends with nothing")
    func waiting() async throws {
        /// The wait's answer, once it has one: nil while it goes on.
        final class Outcome: @unchecked Sendable {  // `answer` only under `lock`
            private let lock = NSLock()
            private var answer: String??
            func set(_ value: String?) { lock.withLock { answer = .some(value) } }
            func get() async throws -> String?? {
                for _ in 0..<1200 {
                    if let answer = lock.withLock({ answer }) { return answer }
                    try await Task.sleep(for: .milliseconds(100))
                }
                return nil
            }
        }
        let callback = try await SignInCallback.start(
            port: 0, signInURL: { "https://idmsa.apple.com/IDMSWebAuth/auth?oauth_token=x" })
        let port = callback.callbackURL.port!
        let state = String(callback.startURL.query!.dropFirst("state=".count))
        let cancelledOutcome = Outcome()
        let cancelled = Task { cancelledOutcome.set(await callback.wait(seconds: 3600)) }
        try await Task.sleep(for: .milliseconds(50))
        cancelled.cancel()
        let afterCancel = try await cancelledOutcome.get()
        #expect(afterCancel != nil, "a cancelled wait went on")
        #expect(afterCancel == .some(nil))
        // A wait begun before the browser comes back gets the token it brings.
        let waitingOutcome = Outcome()
        let waiting = Task { waitingOutcome.set(await callback.wait(seconds: 3600)) }
        try await Task.sleep(for: .milliseconds(50))
        let answer = await rawExchange(
            port: port,
            "GET /callback?ckWebAuthToken=token-1 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nCookie: ckport-sign-in=\(state)\r\nConnection: close\r\n\r\n"
        )
        #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
        #expect(try await waitingOutcome.get() == .some("token-1"))
        waiting.cancel()
        await callback.stop()
    }

    @Test(
        "only the browser that started the sign-in delivers its token: no state cookie, a foreign Host, a second token are refused"
    )
    func forgedTokens() async throws {
        let callback = try await SignInCallback.start(
            port: 0, signInURL: { "https://idmsa.apple.com/IDMSWebAuth/auth?oauth_token=x" })
        let port = callback.callbackURL.port!
        let state = String(callback.startURL.query!.dropFirst("state=".count))
        #expect(state.count == 64)
        // Another local user, or a web page, sends its own account's token straight to the callback.
        let forged = await rawExchange(
            port: port,
            "GET /callback?ckWebAuthToken=attacker HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n")
        #expect(forged.hasPrefix("HTTP/1.1 403"), "\(forged)")
        let wrongCookie = await rawExchange(
            port: port,
            "GET /callback?ckWebAuthToken=attacker HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nCookie: ckport-sign-in=\(String(state.reversed()))\r\nConnection: close\r\n\r\n"
        )
        #expect(wrongCookie.hasPrefix("HTTP/1.1 403"), "\(wrongCookie)")
        // A page that pointed its own name at 127.0.0.1 (DNS rebinding) says so in Host.
        let rebound = await rawExchange(
            port: port,
            "GET /callback?ckWebAuthToken=attacker HTTP/1.1\r\nHost: evil.example:\(port)\r\nCookie: ckport-sign-in=\(state)\r\nConnection: close\r\n\r\n"
        )
        #expect(rebound.hasPrefix("HTTP/1.1 421"), "\(rebound)")
        #expect(await callback.wait(seconds: 0.2) == nil && callback.refusedCount == 2)
        // The start page: the browser gets the state, and goes on to Apple's page.
        let start = await rawExchange(
            port: port, "GET /start?state=\(state) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n")
        #expect(
            start.hasPrefix("HTTP/1.1 302")
                && start.contains("Location: https://idmsa.apple.com/IDMSWebAuth/auth?oauth_token=x"))
        #expect(start.contains("Set-Cookie: ckport-sign-in=\(state); Path=/; HttpOnly; SameSite=Lax"), "\(start)")
        #expect(
            await rawExchange(
                port: port, "GET /start?state=guess HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n"
            ).hasPrefix("HTTP/1.1 404"))
        // Back from Apple with the cookie: taken. A different token after it: refused.
        let good = await rawExchange(
            port: port,
            "GET /callback?ckWebAuthToken=106__54__a%2Bb%2Fc%3D HTTP/1.1\r\nHost: localhost:\(port)\r\nCookie: other=1; ckport-sign-in=\(state)\r\nConnection: close\r\n\r\n"
        )
        #expect(good.hasPrefix("HTTP/1.1 200"), "\(good)")
        #expect(await callback.wait(seconds: 1) == "106__54__a+b/c=")
        let second = await rawExchange(
            port: port,
            "GET /callback?ckWebAuthToken=another HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nCookie: ckport-sign-in=\(state)\r\nConnection: close\r\n\r\n"
        )
        #expect(second.hasPrefix("HTTP/1.1 409"), "\(second)")
        #expect(await callback.wait(seconds: 1) == "106__54__a+b/c=")
        await callback.stop()
        // Stopped: the port is let go of.
        #expect(
            await rawExchange(port: port, "GET /start HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n", wait: 1).isEmpty)
    }

    @Test(
        "the web server survives what a hostile client sends: a malformed request line, idle connections past the cap, a body over the limit, a hundred clients at once on kept-alive connections"
    )
    func hostileClients() async throws {
        let router = Router()
        router.get("/ok") { _, _ in "fine" }
        router.post("/x") { request, _ -> String in
            let body = try await WebServer.body(of: request, limit: 1024)
            return "took \(body.count)"
        }
        let server = try await WebServer.start(
            router, port: 0, limits: WebServer.Limits(connections: 8, body: 1024, idle: 2))
        let port = server.port
        // Not HTTP: answered 400 (or closed), and the server goes on.
        let garbage = await rawExchange(port: port, "GET x\r\n\r\n", wait: 2)
        #expect(garbage.isEmpty || garbage.hasPrefix("HTTP/1.1 400"), "\(garbage)")
        // Forty silent connections: at most eight are taken at once; once the silent ones time
        // out (2 s), the server answers again.
        var idle: [Int32] = []
        for _ in 0..<40 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            idle.append(fd)
        }
        // Every place is held by a silent connection: a request waits to be taken.
        let waiting = await rawExchange(
            port: port, "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", wait: 1)
        #expect(waiting.isEmpty, "answered past the cap of eight connections: \(waiting)")
        var answered = ""
        for _ in 0..<40 where !answered.hasPrefix("HTTP/1.1 200") {
            answered = await rawExchange(
                port: port, "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", wait: 5)
        }
        for fd in idle { close(fd) }
        #expect(answered.hasPrefix("HTTP/1.1 200"), "the server did not answer once the idle connections timed out")
        // A body over the limit: 413, nothing taken.
        let large = await rawExchange(
            port: port,
            "POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5000\r\nConnection: close\r\n\r\n"
                + String(repeating: "a", count: 5000))
        #expect(large.hasPrefix("HTTP/1.1 413"), "\(large)")
        // Two requests on one connection (keep-alive), then a hundred clients at once.
        let two = await rawExchange(
            port: port,
            "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            whole: true)
        #expect(two.components(separatedBy: "HTTP/1.1 200").count == 3, "\(two)")
        let transport = HTTPClientTransport(timeout: 60)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    try await transport.send(
                        CloudKitHTTPRequest(
                            method: "GET", url: URL(string: "http://127.0.0.1:\(port)/ok")!, headers: [], body: Data())
                    ).status
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.count == 100 && statuses.allSatisfy { $0 == 200 })
        await server.stop()
    }

    @Test(
        "HTTP/1.0: a request that does not ask to keep the connection is answered with Connection: close and the connection closes; one that asks is told keep-alive and may send another"
    )
    func http10() async throws {
        let router = Router()
        router.get("/ok") { _, _ in "fine" }
        // Idle connections are closed after 90 s: a close within the 30 s wait (a loaded CI
        // machine has taken more than 10 s to answer) is the answer's.
        let server = try await WebServer.start(router, port: 0, limits: WebServer.Limits(idle: 90))
        let host = "Host: 127.0.0.1:\(server.port)\r\n"
        let plain = await rawExchangeClosing(
            port: server.port, "GET /ok HTTP/1.0\r\n\(host)\r\n", wait: 30, whole: true)
        #expect(
            plain.answer.hasPrefix("HTTP/1.1 200") && plain.answer.lowercased().contains("\r\nconnection: close\r\n"))
        #expect(plain.closed, "the connection stayed open after an HTTP/1.0 answer: \(plain.answer)")
        let kept = await rawExchangeClosing(
            port: server.port,
            "GET /ok HTTP/1.0\r\n\(host)Connection: keep-alive\r\n\r\nGET /ok HTTP/1.0\r\n\(host)\r\n", wait: 30,
            whole: true)
        #expect(kept.answer.components(separatedBy: "HTTP/1.1 200").count == 3, "\(kept.answer)")
        #expect(kept.answer.lowercased().components(separatedBy: "\r\nconnection: keep-alive\r\n").count == 2)
        #expect(kept.closed, "the connection stayed open after the second request, which did not ask to keep it")
        // HTTP/1.1 keeps the connection unless told otherwise, and says nothing about it. (The
        // wait ends each read with nothing more to come: as long as the others, since the whole
        // suite shares the server's threads and once kept the answer past two seconds.)
        let modern = await rawExchangeClosing(
            port: server.port, "GET /ok HTTP/1.1\r\n\(host)\r\n", wait: 10, whole: true)
        #expect(modern.answer.hasPrefix("HTTP/1.1 200") && !modern.answer.lowercased().contains("connection:"))
        #expect(!modern.closed)
        await server.stop()
    }

    @Test(
        "a temporary body file is removed once its answer is let go of, sent or not (a HEAD drops the body unsent)"
    )
    func bodyFileRemoved() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ckport-body-\(UUID().uuidString)")
            .path
        #expect(FileManager.default.createFile(atPath: path, contents: Data("rows\n".utf8)))
        var answer = CloudKitHTTPResponse(status: 200, headers: [("Content-Type", "text/csv")], body: Data())
        answer.bodyFile = path
        answer.removesBodyFile = true
        do {
            var served: Response? = answer.served
            #expect(served?.headers[.contentLength] == nil || served?.headers[.contentLength] == "5")
            #expect(FileManager.default.fileExists(atPath: path))
            served = nil
            _ = served
        }
        #expect(!FileManager.default.fileExists(atPath: path), "the body file outlived its answer")
        // A file the answer does not own stays.
        #expect(FileManager.default.createFile(atPath: path, contents: Data("kept\n".utf8)))
        answer.removesBodyFile = false
        do { _ = answer.served }
        #expect(FileManager.default.fileExists(atPath: path))
        unlink(path)
    }

    @Test("a server's error page that echoes the request's address does not carry the tokens into a message")
    func tokensRedacted() async throws {
        final class EchoingProxy: CloudKitTransport, @unchecked Sendable {
            func send(_ request: CloudKitHTTPRequest) async throws -> CloudKitHTTPResponse {
                CloudKitHTTPResponse(
                    status: 403, body: Data("<html>Forbidden: \(request.url.absoluteString)</html>".utf8))
            }
        }
        let database = try CloudKitDatabase(
            container: "iCloud.com.example.Notes", environment: .development, scope: .private)
        let client = try CloudKitClient(
            database: database, credentials: .webToken(apiToken: "0123abcd-api", webAuthToken: "106__54__SECRET+x/y="),
            transport: EchoingProxy())
        do {
            _ = try await client.send("zones/list")
            Issue.record("a 403 page was taken")
        } catch let error as CloudKitServerError {
            #expect(error.description.contains("ckAPIToken=…&ckWebAuthToken=…"), "\(error.description)")
            #expect(
                !error.description.contains("SECRET") && !error.description.contains("0123abcd"), "\(error.description)"
            )
        }
        #expect(
            CloudKitCredentials.redactingTokens("a?ckAPIToken=abc&ckWebAuthToken=x%2By&other=1 and myToken=keep")
                == "a?ckAPIToken=…&ckWebAuthToken=…&other=1 and myToken=keep")
    }
}

@Suite("files set aside")
struct SetAsideTests {
    @Test("staged asset bytes never reach the disk in the clear, and no name reaches them; read back they are whole")
    func sealedStaging() throws {
        let marker = Array("FAMILY-PHOTO-\(UUID().uuidString)".utf8)
        let staged = try SealedBytes()
        for _ in 0..<2000 { try marker.withUnsafeBytes { try staged.append($0) } }
        #expect(staged.count == Int64(marker.count * 2000))
        // The file behind it: reachable only through this process's descriptor (unlinked), in
        // the private folder, and holding no clear bytes. Tests running beside this one keep
        // spool files of their own (elsewhere, or smaller): none may hold the marker, and one
        // in the private folder must be large enough to be this one's.
        var found = 0
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name),
                target.contains(".ckport-spool-"), target.hasSuffix("(deleted)"),
                let bytes = try? Data(contentsOf: URL(fileURLWithPath: "/proc/self/fd/" + name))
            else { continue }
            #expect(bytes.firstRange(of: Data(marker)) == nil, "\(target)")
            if target.contains("/ckport-\(getpid())-"), bytes.count >= marker.count * 2000 { found += 1 }
        }
        #expect(found >= 1)
        var back: [UInt8] = []
        try staged.read { back += $0 }
        #expect(back == Array((0..<2000).map { _ in marker }.joined()))
        // The private folder is its owner's alone.
        var info = stat()
        #expect(stat(try PrivateFiles.folder(), &info) == 0 && info.st_mode & 0o777 == 0o700 && info.st_uid == getuid())
    }

    @Test(
        "the token file's next token goes through a fresh, unguessable name: a link planted at any name ckport used before is never followed"
    )
    func tokenFileLinks() throws {
        let scratch = Scratch()
        let victim = scratch.write("precious.txt", "keep me\n")
        let path = scratch.path("web.txt")
        try WebAuthTokenFile.write(WebAuthTokenFile.Contents(token: "t-0", signedIn: Date()), to: path)
        // The names earlier versions used, for this process and its neighbours.
        for pid in [getpid() - 1, getpid(), getpid() + 1] {
            for n in 0..<3 { symlink(victim, scratch.path(".web.txt.ckport-\(pid)-\(n).tmp")) }
        }
        let file = WebAuthTokenFile(path: path)
        for n in 1...50 { file.keep("t-\(n)") }
        try file.checkKept()
        #expect(scratch.text("precious.txt") == "keep me\n")
        #expect(try CloudKitCredentials.token(fromFile: path) == "t-50")
        var info = stat()
        #expect(lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG && info.st_mode & 0o777 == 0o600)
        // Written with a umask that would have left it readable: still 0600.
        let old = umask(0)
        defer { umask(old) }
        file.keep("t-51")
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
    }
}
