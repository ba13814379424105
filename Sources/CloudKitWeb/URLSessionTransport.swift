import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// HTTP through Foundation's URLSession (libcurl on Linux). CloudKit's answers are small JSON
/// pages (at most a few hundred records) and assets of at most 15 MB, so a client that reads
/// each answer whole serves as well as a streaming one, and it comes with the toolchain: no
/// event-loop library to build, and TLS from the system.
public final class URLSessionTransport: CloudKitTransport, Sendable {
    private let session: URLSession

    /// `timeout`: seconds a request may wait for its answer before it counts as failed.
    public init(timeout: TimeInterval = 60) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        session = URLSession(configuration: configuration)
    }

    deinit { session.finishTasksAndInvalidate() }

    public func send(_ request: CloudKitHTTPRequest) async throws -> CloudKitHTTPResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        if request.method != "GET" { urlRequest.httpBody = request.body }
        let (data, response) = try await session.data(for: urlRequest)
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        let headers = http.allHeaderFields.compactMap { key, value -> (name: String, value: String)? in
            guard let name = key as? String, let text = value as? String else { return nil }
            return (name, text)
        }
        return CloudKitHTTPResponse(status: http.statusCode, headers: headers, body: data)
    }
}
