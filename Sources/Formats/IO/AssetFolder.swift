import Foundation
import Records
import StoreCore

/// Writes the asset files that exported records name into a folder, one file per SHA-256
/// (`DIR/<sha256>`), which `import --assets DIR` reads back.
///
/// Records are noted as they stream past (only the hashes are kept), and the files are copied
/// out of the store afterwards in the same read transaction. Each file is written under a
/// temporary name and renamed into place, so a folder never holds half a file; a file already
/// there with the right size is left alone.
public final class AssetFolderWriter {
    public let directory: String?
    private var hashes = Set<String>()
    public private(set) var written = 0
    public private(set) var alreadyThere = 0
    public private(set) var bytesWritten: Int64 = 0
    /// Assets the records name whose bytes the store does not hold.
    public private(set) var missing: [String] = []

    public init(directory: String?) {
        self.directory = directory
    }

    /// Remembers the assets `record` names.
    public func note(_ record: Record) {
        guard directory != nil else { return }
        record.forEachAsset { _, asset in if let sha256 = asset.sha256 { hashes.insert(sha256) } }
    }

    /// Copies every noted asset out of the store.
    public func write(from session: any RecordSession) throws {
        guard let directory, !hashes.isEmpty else { return }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for sha256 in hashes.sorted() {
            guard let size = try session.assetSize(sha256) else {
                missing.append(sha256)
                continue
            }
            let target = (directory as NSString).appendingPathComponent(sha256)
            if let existing = (try? FileManager.default.attributesOfItem(atPath: target)[.size] as? NSNumber)?
                .int64Value, existing == size
            {
                alreadyThere += 1
                continue
            }
            let output = try OutputFile(path: target)
            do {
                try session.readAsset(sha256) { chunk in try output.write(Array(chunk)) }
                try output.commit()
            } catch {
                output.discard()
                throw error
            }
            written += 1
            bytesWritten += size
        }
        hashes.removeAll()
    }
}
