import Foundation
import ObjectStorage
import TestSupport
import Testing

/// The S3 client against SeaweedFS (a real S3 gateway that checks every signature), started by
/// the README's test command.
@Suite("S3 client on SeaweedFS", .enabled(if: S3TestServer.enabled))
struct S3ClientTests {
    func client(_ tag: String, keys file: String = "credentials", secret: String? = nil) throws -> S3Client {
        guard let endpoint = S3TestServer.endpoint else { throw S3TestServerMissing() }
        let keys = try S3TestServer.keys(file)
        return S3Client(
            endpoint: S3Endpoint(url: endpoint, region: "us-east-1", bucket: S3TestServer.bucket(tag), pathStyle: true),
            credentials: AWSCredentials(accessKeyID: keys.id, secretAccessKey: secret ?? keys.secret), attempts: 2,
            firstWait: 0.05)
    }

    @Test("objects put, read, sized, listed a page at a time and deleted; keys with spaces and slashes and non-ASCII")
    func objects() async throws {
        let s3 = try client("objects")
        try await s3.createBucket()
        try await s3.createBucket()  // there already, and ours: fine
        let keys = [
            "snapshots/a b+c", "snapshots/ünïcödé/x", "locks/1", "data/00/" + String(repeating: "f", count: 64),
        ]
        for (index, key) in keys.enumerated() {
            try await s3.put(key, Array("object \(index): \(key)".utf8))
        }
        for (index, key) in keys.enumerated() {
            let read = try #require(try await s3.get(key, limit: 1 << 20), "\(key)")
            #expect(String(decoding: read, as: UTF8.self) == "object \(index): \(key)")
            #expect(try await s3.size(of: key) == Int64(read.count))
        }
        #expect(try await s3.get("snapshots/none", limit: 100) == nil)
        #expect(try await s3.size(of: "snapshots/none") == nil)
        #expect(try await s3.list(prefix: "snapshots/").map(\.key) == ["snapshots/a b+c", "snapshots/ünïcödé/x"])
        #expect(try await s3.list(prefix: "").count == 4)
        try await s3.delete("locks/1")
        try await s3.delete("locks/1")  // nothing there: fine
        #expect(try await s3.list(prefix: "locks/").isEmpty)
        // More than a page (1,000 keys): every one listed once, in order.
        let many = (0..<1_100).map { String(format: "many/%05d", $0) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for chunk in stride(from: 0, to: many.count, by: 100) {
                group.addTask { for key in many[chunk..<min(chunk + 100, many.count)] { try await s3.put(key, [1]) } }
            }
            try await group.waitForAll()
        }
        #expect(try await s3.list(prefix: "many/").map(\.key) == many)
        // An answer larger than the caller takes is refused, not read whole.
        try await s3.put("big", [UInt8](repeating: 7, count: 4096))
        await #expect(throws: (any Error).self) { try await s3.get("big", limit: 1000) }
    }

    @Test("a multipart upload appears whole only when completed; an aborted one leaves nothing")
    func multipart() async throws {
        let s3 = try client("parts")
        try await s3.createBucket()
        let part = [UInt8](repeating: 0xAB, count: 5 << 20)
        let id = try await s3.startUpload("snapshots/whole")
        let first = try await s3.uploadPart("snapshots/whole", uploadID: id, number: 1, part)
        let second = try await s3.uploadPart("snapshots/whole", uploadID: id, number: 2, [1, 2, 3])
        #expect(try await s3.size(of: "snapshots/whole") == nil)
        try await s3.completeUpload("snapshots/whole", uploadID: id, parts: [(1, first), (2, second)])
        let whole = try #require(try await s3.get("snapshots/whole", limit: 6 << 20))
        #expect(whole.count == part.count + 3 && whole.suffix(3) == [1, 2, 3])
        let abandoned = try await s3.startUpload("snapshots/half")
        _ = try await s3.uploadPart("snapshots/half", uploadID: abandoned, number: 1, [9])
        try await s3.abortUpload("snapshots/half", uploadID: abandoned)
        #expect(try await s3.size(of: "snapshots/half") == nil)
    }

    @Test(
        "the server checks the signature: a wrong secret, an unknown key and a key that may only read are refused, clearly, and the secret is never in the message"
    )
    func refusals() async throws {
        let owner = try client("refused")
        try await owner.createBucket()
        try await owner.put("kept", [1])
        let wrong = S3Client(
            endpoint: owner.endpoint,
            credentials: AWSCredentials(
                accessKeyID: try S3TestServer.keys().id, secretAccessKey: "not-the-secret-at-all"), attempts: 1)
        do {
            try await wrong.put("x", [1])
            Issue.record("a wrong secret was accepted")
        } catch let error as ObjectStorageError {
            #expect(error.kind == .refused && error.code == "SignatureDoesNotMatch", "\(error)")
            #expect(error.category == .authentication)
            #expect("\(error)".contains(owner.endpoint.bucket) && !"\(error)".contains("not-the-secret"), "\(error)")
        }
        let unknown = S3Client(
            endpoint: owner.endpoint, credentials: AWSCredentials(accessKeyID: "AKIDUNKNOWN", secretAccessKey: "x"),
            attempts: 1)
        await #expect(throws: ObjectStorageError.self) { _ = try await unknown.get("kept", limit: 10) }
        let reader = S3Client(
            endpoint: owner.endpoint,
            credentials: AWSCredentials(
                accessKeyID: try S3TestServer.keys("read-only-credentials").id,
                secretAccessKey: try S3TestServer.keys("read-only-credentials").secret), attempts: 1)
        #expect(try await reader.get("kept", limit: 10) == [1])
        do {
            try await reader.put("x", [1])
            Issue.record("a key that may only read wrote")
        } catch let error as ObjectStorageError {
            #expect(error.kind == .refused, "\(error)")
        }
        // A bucket that is not there is named as such.
        var missing = owner.endpoint
        missing.bucket = "no-such-bucket-\(UUID().uuidString.prefix(6).lowercased())"
        let lost = S3Client(
            endpoint: missing,
            credentials: AWSCredentials(
                accessKeyID: try S3TestServer.keys().id, secretAccessKey: try S3TestServer.keys().secret), attempts: 1)
        do {
            _ = try await lost.list(prefix: "")
            Issue.record("a missing bucket listed")
        } catch let error as ObjectStorageError {
            #expect(error.kind == .noBucket && "\(error)".contains(missing.bucket), "\(error)")
        }
    }

    @Test("nothing listening: tried again a bounded number of times, then a clear error")
    func noServer() async throws {
        let closed = S3Client(
            endpoint: S3Endpoint(
                url: URL(string: "http://127.0.0.1:9")!, region: "us-east-1", bucket: "b", pathStyle: true),
            credentials: AWSCredentials(accessKeyID: "a", secretAccessKey: "b"), attempts: 3, firstWait: 0.01)
        do {
            _ = try await closed.get("x", limit: 10)
            Issue.record("answered with nothing listening")
        } catch let error as ObjectStorageError {
            #expect(error.kind == .unavailable && "\(error)".contains("after 3 tries"), "\(error)")
        }
    }
}
