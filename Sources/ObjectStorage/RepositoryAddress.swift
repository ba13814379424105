import AsyncHTTPClient
import Foundation
import NIOSSL
import Records
import Synchronization

/// Where a repository is, as a user writes it: a folder (`/mnt/nas/ckport`, `file:///…`),
/// `rclone:REMOTE:PATH` through the user's rclone (``RcloneStorage``), or
/// `s3://BUCKET/PREFIX` in S3-compatible object storage, set up as AWS's own tools set up: the
/// key from `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN`, else the
/// `AWS_PROFILE` (or `default`) profile of `~/.aws/credentials`; the region from `AWS_REGION`
/// (or `AWS_DEFAULT_REGION`, or the profile's in `~/.aws/config`; else us-east-1); the endpoint
/// from the caller, `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL` (else AWS's); certificates
/// checked, against `AWS_CA_BUNDLE` too when it names a file.
public enum RepositoryAddress {
    /// The storage `address` names.
    public static func storage(
        _ address: String, endpoint: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> any RepositoryStorage {
        if address.hasPrefix("s3://") {
            let rest = address.dropFirst("s3://".count)
            let bucket = String(rest.prefix { $0 != "/" })
            let prefix = String(rest.dropFirst(bucket.count)).trimmingCharacters(in: CharacterSet(charactersIn: "/"))
            guard isBucketName(bucket) else {
                throw RepositoryError.storage(
                    location: address,
                    message: "'\(bucket)' is not a bucket name (3 to 63 lower-case letters, digits, dots and hyphens)")
            }
            let settings = try S3Settings(environment: environment, endpoint: endpoint)
            let client = S3Client(
                endpoint: settings.endpoint(bucket: bucket), credentials: settings.credentials,
                http: try settings.httpClient(location: address))
            return S3Storage(client: client, prefix: prefix)
        }
        if address.hasPrefix("rclone:") {
            return try RcloneStorage(remote: String(address.dropFirst("rclone:".count)), environment: environment)
        }
        if address.contains("://") && !address.hasPrefix("file://") {
            throw RepositoryError.storage(
                location: address,
                message:
                    "is not a repository address ckport knows: give a folder, s3://BUCKET/PREFIX or rclone:REMOTE:PATH")
        }
        let path = address.hasPrefix("file://") ? String(address.dropFirst("file://".count)) : address
        guard !path.isEmpty else { throw RepositoryError.storage(location: address, message: "names no folder") }
        return FolderStorage(root: path)
    }

    static func isBucketName(_ name: String) -> Bool {
        (3...63).contains(name.count)
            && name.allSatisfy { ($0.isASCII && ($0.isLowercase || $0.isNumber)) || $0 == "." || $0 == "-" }
    }
}

/// AWS's settings for S3, read as the AWS CLI reads them.
public struct S3Settings: Sendable {
    public var credentials: AWSCredentials
    public var region: String
    /// A custom endpoint (MinIO, SeaweedFS, R2, B2, …); nil for AWS.
    public var endpointURL: URL?
    /// A file of certificates to trust beside the system's.
    public var caFile: String?

    public init(environment: [String: String], endpoint: String? = nil) throws {
        let home = environment["HOME"] ?? NSHomeDirectory()
        let profile = environment["AWS_PROFILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "default"
        if let id = environment["AWS_ACCESS_KEY_ID"], !id.isEmpty {
            guard let secret = environment["AWS_SECRET_ACCESS_KEY"], !secret.isEmpty else {
                throw RepositoryError.storage(
                    location: "s3", message: "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")
            }
            credentials = AWSCredentials(
                accessKeyID: id, secretAccessKey: secret,
                sessionToken: environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 })
        } else {
            let file = environment["AWS_SHARED_CREDENTIALS_FILE"] ?? home + "/.aws/credentials"
            let sections = S3Settings.ini(file)
            guard let section = sections[profile], let id = section["aws_access_key_id"],
                let secret = section["aws_secret_access_key"]
            else {
                throw RepositoryError.storage(
                    location: "s3",
                    message:
                        "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give the profile '\(profile)' a key in \(file)"
                )
            }
            credentials = AWSCredentials(
                accessKeyID: id, secretAccessKey: secret, sessionToken: section["aws_session_token"])
        }
        let config = S3Settings.ini(environment["AWS_CONFIG_FILE"] ?? home + "/.aws/config")
        let profileConfig = config[profile == "default" ? "default" : "profile " + profile] ?? [:]
        region =
            [environment["AWS_REGION"], environment["AWS_DEFAULT_REGION"], profileConfig["region"]]
            .compactMap { $0 }.first { !$0.isEmpty } ?? "us-east-1"
        let endpointText =
            [
                endpoint, environment["AWS_ENDPOINT_URL_S3"], environment["AWS_ENDPOINT_URL"],
                profileConfig["endpoint_url"],
            ]
            .compactMap { $0 }.first { !$0.isEmpty }
        if let endpointText {
            guard let url = URL(string: endpointText), let scheme = url.scheme, ["http", "https"].contains(scheme),
                url.host != nil
            else {
                throw RepositoryError.storage(
                    location: endpointText, message: "is not an endpoint address (https://HOST[:PORT])")
            }
            endpointURL = url
        }
        caFile = environment["AWS_CA_BUNDLE"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The bucket's endpoint: path-style on a custom endpoint (which most S3-compatible
    /// servers on a private address need), virtual-hosted on AWS (path-style for a bucket with
    /// dots, which AWS's certificates do not cover as a host name).
    public func endpoint(bucket: String) -> S3Endpoint {
        if let endpointURL {
            return S3Endpoint(url: endpointURL, region: region, bucket: bucket, pathStyle: true)
        }
        let url = URL(string: "https://s3.\(region).amazonaws.com")!
        return S3Endpoint(url: url, region: region, bucket: bucket, pathStyle: bucket.contains("."))
    }

    /// The HTTP client: the shared one, or one that trusts the CA file too.
    func httpClient(location: String) throws -> HTTPClient {
        guard let caFile else { return S3Client.sharedHTTP }
        guard FileManager.default.isReadableFile(atPath: caFile) else {
            throw RepositoryError.storage(location: location, message: "cannot read AWS_CA_BUNDLE's file \(caFile)")
        }
        // One client per file for the process, never shut down (as the shared one).
        return try S3Settings.clients.withLock { clients in
            if let client = clients[caFile] { return client }
            let client = try S3Settings.makeClient(caFile: caFile)
            clients[caFile] = client
            return client
        }
    }

    private static let clients = Mutex<[String: HTTPClient]>([:])

    private static func makeClient(caFile: String) throws -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(caFile)
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.tlsConfiguration = tls
        configuration.timeout.connect = .seconds(30)
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    /// An INI file's sections (`[name]`) and their `key = value` lines; nothing for a file
    /// that is not there.
    static func ini(_ path: String) -> [String: [String: String]] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [:] }
        var sections: [String: [String: String]] = [:]
        var current = ""
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                current = String(line.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces)
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            sections[current, default: [:]][key] = value
        }
        return sections
    }
}
