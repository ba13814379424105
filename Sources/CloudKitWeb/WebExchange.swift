import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOFoundationCompat
import WebServing
import _NIOFileSystem

extension CloudKitHTTPRequest {
    /// A request as a ``WebServer`` received it: its body read in full (413 past `bodyLimit`
    /// bytes), its address as the client named it on `port`, its Host among the headers.
    public init(_ request: Request, port: Int, bodyLimit: Int) async throws {
        let body = try await WebServer.body(of: request, limit: bodyLimit)
        var headers: [(name: String, value: String)] = []
        if let authority = request.head.authority { headers.append(("Host", authority)) }
        for field in request.headers { headers.append((field.name.canonicalName, field.value)) }
        guard let url = URL(string: "http://127.0.0.1:\(port)\(request.uri.description)") else {
            throw HTTPError(.badRequest, message: "not an address: \(request.uri.description)")
        }
        self.init(method: request.method.rawValue, url: url, headers: headers, body: body)
    }
}

extension CloudKitHTTPResponse {
    /// The answer as a ``WebServer`` sends it. A body in a file (``bodyFile``) is read from it a
    /// piece at a time, so memory stays flat however large it is, and removed once sent when
    /// ``removesBodyFile``.
    public var served: Response {
        var fields = HTTPFields()
        for (name, value) in headers {
            if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) }
        }
        let status = HTTPResponse.Status(code: self.status)
        guard let path = bodyFile else {
            return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(data: body)))
        }
        // Removed when the answer is let go of, whether its body was sent or not (a HEAD, or a
        // client gone before the head was written).
        let file = BodyFile(path: path, removes: removesBodyFile)
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue
        return Response(
            status: status, headers: fields,
            body: ResponseBody(contentLength: size) { writer in
                try await FileSystem.shared.withFileHandle(forReadingAt: FilePath(file.path)) { handle in
                    for try await chunk in handle.readChunks(chunkLength: .kibibytes(64)) {
                        try await writer.write(chunk)
                    }
                }
                try await writer.finish(nil)
            })
    }

    /// An answer that cuts the connection instead: its head promises a body that never comes,
    /// so the client sees the connection closed mid-answer, as on a network fault.
    public static var cutConnection: Response {
        Response(
            status: .ok, headers: [.contentLength: "1"],
            body: ResponseBody(contentLength: 1) { _ in throw CancellationError() })
    }
}

/// A body's file, removed (when it is a temporary one) once nothing holds it.
private final class BodyFile: Sendable {
    let path: String
    let removes: Bool

    init(path: String, removes: Bool) {
        self.path = path
        self.removes = removes
    }

    deinit { if removes { unlink(path) } }
}
