import Crypto
import Foundation
import Records

/// A problem with an asset file: missing, unreadable, or not the bytes a record says.
public struct AssetError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension Record {
    /// Every asset value in the record's fields, lists included, with its field name.
    public func forEachAsset(_ body: (String, Asset) throws -> Void) rethrows {
        for (name, value) in fields {
            switch value {
            case .asset(let asset): try body(name, asset)
            case .list(_, let items):
                for case .asset(let asset) in items { try body(name, asset) }
            default: break
            }
        }
    }

    /// The record with each asset value replaced by `transform`'s answer.
    public func mappingAssets(_ transform: (String, Asset) throws -> Asset) rethrows -> Record {
        var copy = self
        for (name, value) in fields {
            switch value {
            case .asset(let asset): copy.fields[name] = .asset(try transform(name, asset))
            case .list(let type, let items) where type == .asset:
                copy.fields[name] = .list(
                    type,
                    try items.map { item in
                        if case .asset(let asset) = item { return .asset(try transform(name, asset)) }
                        return item
                    })
            default: break
            }
        }
        return copy
    }
}

/// Where an asset's bytes come from when a store takes them: a file, or bytes set aside (an
/// asset on its way from a bundle).
public enum AssetSource {
    case file(String)
    case staged(any StagedBytes, origin: String)

    /// The source in messages.
    public var name: String {
        switch self {
        case .file(let path): return path
        case .staged(_, let origin): return origin
        }
    }

    /// Hands out the bytes in order, a piece at a time, from the start each time it is called.
    public func read(_ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        switch self {
        case .staged(let bytes, _):
            try bytes.read(body)
        case .file(let path):
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw AssetError("\(path): cannot open the asset file")
            }
            defer { try? handle.close() }
            while let chunk = try handle.read(upToCount: AssetFile.chunkSize), !chunk.isEmpty {
                try chunk.withUnsafeBytes { try body($0) }
            }
        }
    }
}

/// An asset about to be stored, hashed and measured first (every store does this the same
/// way, so bytes the store already holds cost no writes, and bytes that differ from what their
/// record says are refused before anything is written).
public enum AssetFile {
    /// The largest asset a store takes: SQLite's limit on one value, and so every store's (a
    /// store's assets move between stores in backups).
    public static let maximumSize: Int64 = 1_000_000_000
    /// The piece an asset's bytes are read and written in.
    public static let chunkSize = 1 << 20

    /// Reads the bytes once: their SHA-256 and size, checked against what is expected when given.
    public static func measure(_ source: AssetSource, expectedSHA256: String?, expectedSize: Int64?) throws -> (
        sha256: String, size: Int64
    ) {
        var hasher = SHA256()
        var size: Int64 = 0
        try source.read { chunk in
            hasher.update(bufferPointer: chunk)
            size += Int64(chunk.count)
            guard size <= AssetFile.maximumSize else {
                throw AssetError(
                    "\(source.name): the asset is larger than \(AssetFile.maximumSize) bytes, the most a store keeps in one asset"
                )
            }
        }
        let sha256 = hasher.finalize().map { String(format: "%02x", $0) }.joined()
        if let expectedSize, expectedSize >= 0, expectedSize != size {
            throw AssetError("\(source.name): the asset is \(size) bytes; \(expectedSize) were expected")
        }
        if let expectedSHA256, expectedSHA256 != sha256 {
            throw AssetError("\(source.name): the asset's SHA-256 is \(sha256); \(expectedSHA256) was expected")
        }
        return (sha256, size)
    }
}
