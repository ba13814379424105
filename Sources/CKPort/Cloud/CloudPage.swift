import CloudKitWeb
import Formats
import Foundation
import Records
import StoreCore

/// One answer of `records/changes` or `records/query`. The answer is walked once to find
/// each record's bytes, its name and whether it is a deletion; the records themselves are
/// read from those bytes as the writer asks for them, by the same reader as an import's.
struct CloudPage: Sendable {
    /// The answer's bytes, until the records are decoded.
    var bytes: [UInt8]
    /// Where each record (not deleted) lies in `bytes`, and its name.
    var records: [(range: Range<Int>, name: String?)] = []
    /// Records rewritten after the answer came (asset values pointed at downloaded files), by index.
    var rewritten: [Int: JSONValue] = [:]
    /// Asset files downloaded for the page's records, until the page is saved.
    var stagedFiles: [String] = []
    var deletedNames: [String] = []
    var syncToken: String?
    var moreComing = false
    var continuationMarker: String?
    /// The records decoded (or why one does not decode), in the page's order.
    var items: [SourceItem] = []
    /// What the page is to the writer.
    var kind = PageKind.fetched
    /// Whether a decoded record is a share (`cloudkit.share`): the store's schema gains
    /// CloudKit's share type with the page, if it lacks it.
    var holdsShares = false
    /// A page of a zone read again because an earlier pull left records out of it: a record
    /// the store holds with CloudKit's change tag is not saved again (CloudKit has not changed
    /// it, and an edit made here since stays, as an incremental pull would leave it).
    var keepsUnchanged = false

    init(_ data: Data, operation: String) throws {
        bytes = [UInt8](data)
        do {
            (records, deletedNames, syncToken, moreComing, continuationMarker) = try bytes.withUnsafeBytes { buffer in
                try CloudPage.walk(buffer)
            }
        } catch {
            throw CloudKitServerError(
                serverErrorCode: "BAD_ANSWER", reason: "\(operation) answered with JSON that does not parse (\(error))",
                status: 200)
        }
    }

    /// A page with nothing in it: what a zone that is gone, or about to be fetched again,
    /// hands the writer.
    init() { bytes = [] }
}

extension CloudPage {
    /// The answer's parts: where each record lies, the deleted records' names, and the paging keys.
    private static func walk(_ buffer: UnsafeRawBufferPointer) throws(JSONSyntaxError)
        -> ([(range: Range<Int>, name: String?)], [String], String?, Bool, String?)
    {
        var records: [(range: Range<Int>, name: String?)] = []
        var deletedNames: [String] = []
        var syncToken: String?
        var continuationMarker: String?
        var moreComing = false
        var parser = JSONParser(buffer)
        var keys: Set<String> = []
        if try parser.walkObject() {
            repeat {
                let key = try parser.walkKey()
                guard keys.insert(key).inserted else {
                    throw JSONSyntaxError(offset: parser.i, message: "key \"\(key)\" appears twice in one object")
                }
                switch key {
                case "records":
                    guard try parser.walkArray() else { continue }
                    repeat {
                        let start = parser.i
                        var name: String?
                        var deleted = false
                        if try parser.walkObject() {
                            repeat {
                                switch try parser.walkKey() {
                                case "recordName": name = try parser.parseValue().stringValue
                                case "deleted": deleted = try parser.parseValue() == .bool(true)
                                default: try parser.skipValue()
                                }
                            } while try parser.walkNextMember()
                        }
                        if deleted {
                            if let name { deletedNames.append(name) }
                        } else {
                            records.append((start..<parser.i, name))
                        }
                    } while try parser.walkNextElement()
                case "syncToken": syncToken = try parser.parseValue().stringValue
                case "continuationMarker": continuationMarker = try parser.parseValue().stringValue
                case "moreComing": moreComing = try parser.parseValue() == .bool(true)
                default: try parser.skipValue()
                }
            } while try parser.walkNextMember()
        }
        parser.skipWhitespace()
        if parser.i < buffer.count {
            throw JSONSyntaxError(offset: parser.i, message: "unexpected bytes after the answer's object")
        }
        return (records, deletedNames, syncToken, moreComing, continuationMarker)
    }

    /// Downloads every asset the page's records name into `directory` (an ASSETID, or each
    /// element of an ASSETID_LIST), and points each asset value at its file (`localPath`), for
    /// the import to store with the record.
    mutating func downloadAssets(_ client: CloudKitClient, into directory: String) async throws {
        let marker = Array("downloadURL".utf8)
        for index in records.indices {
            // Only a record that mentions a download URL can hold an asset to fetch.
            guard bytes[records[index].range].firstRange(of: marker) != nil else { continue }
            let json = try bytes[records[index].range].withUnsafeBytes { buffer in try JSONParser.parse(buffer) }
            guard case .object(var record) = json, case .object(var fields)? = record["fields"] else { continue }
            let recordName = record["recordName"]?.stringValue ?? "?"
            var changed = false
            for fieldIndex in fields.members.indices {
                guard case .object(var field) = fields.members[fieldIndex].value else { continue }
                let name = fields.members[fieldIndex].key
                switch field["value"] {
                case .object(let value)?:
                    guard
                        let fetched = try await download(
                            value, client: client, into: directory, record: recordName, field: name)
                    else { continue }
                    field.set("value", .object(fetched))
                case .array(var elements)?:
                    var any = false
                    for (position, element) in elements.enumerated() {
                        guard case .object(let value) = element,
                            let fetched = try await download(
                                value, client: client, into: directory, record: recordName,
                                field: "\(name)[\(position)]")
                        else { continue }
                        elements[position] = .object(fetched)
                        any = true
                    }
                    guard any else { continue }
                    field.set("value", .array(elements))
                default:
                    continue
                }
                fields.members[fieldIndex].value = .object(field)
                changed = true
            }
            if changed {
                record.set("fields", .object(fields))
                rewritten[index] = .object(record)
            }
        }
    }

    /// Downloads one asset value's file, if it names a download URL; returns the value pointed
    /// at the file.
    private mutating func download(
        _ value: JSONObject, client: CloudKitClient, into directory: String, record: String, field: String
    ) async throws -> JSONObject? {
        guard let address = value["downloadURL"]?.stringValue else { return nil }
        // CloudKit's download URLs may hold `${f}`, the file name to give the download.
        let fileName = field.prefix { $0 != "[" }
        guard let url = URL(string: address.replacingOccurrences(of: "${f}", with: String(fileName))) else {
            throw CloudKitServerError(
                serverErrorCode: "BAD_ANSWER",
                reason: "record \(record) field \(field): the download URL \(address) does not parse", status: 200)
        }
        let bytes = try await client.download(url)
        if case .number(let size)? = value["size"], Int(size) != bytes.count {
            throw CloudKitServerError(
                serverErrorCode: "BAD_ANSWER",
                reason:
                    "record \(record) field \(field): the asset downloaded holds \(bytes.count) bytes; the record says \(size)",
                status: 200)
        }
        let (fd, path) = try PrivateFiles.create("asset-", in: directory)
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        stagedFiles.append(path)
        do {
            try handle.write(contentsOf: bytes)
            try handle.close()
        } catch {
            throw OutputError(
                path: path, message: "cannot write the asset of record \(record) field \(field): \(error)")
        }
        var pointed = value
        pointed.set("localPath", .string((path as NSString).lastPathComponent))
        return pointed
    }

    /// Decodes the records, each placed in the page called `name` for an error, and each in
    /// `zone` (the zone asked about, whatever owner CloudKit names in the record); the
    /// answer's bytes are let go. A record that does not decode keeps its JSON, for a rejects
    /// file.
    mutating func decode(with codec: JSONRecordCodec, name: String, zone: ZoneID) {
        items.reserveCapacity(records.count)
        for (index, record) in records.enumerated() {
            let position = SourcePosition(file: name, line: index + 1)
            let decoded: Result<Record, RecordDecodingError>
            if let json = rewritten[index] {
                decoded = Result { () throws(RecordDecodingError) in try codec.decode(json) }
            } else {
                decoded = bytes[record.range].withUnsafeBytes { buffer in
                    Result { () throws(RecordDecodingError) in try codec.decode(bytes: buffer).0 }
                }
            }
            switch decoded {
            case .success(var decoded):
                decoded.id.zone = zone
                if decoded.isShare { holdsShares = true }
                // The answer's bytes for a rejects file: a slice that shares the page's buffer.
                items.append(.record(SourcedRecord(record: decoded, position: position, rawBytes: bytes[record.range])))
            case .failure(let error):
                var issue = InputIssue(
                    position: position, recordName: error.recordName ?? record.name, recordType: error.recordType,
                    field: error.field, message: error.message)
                // Its zone, for the zone's token (the next pull asks for it again) and the rejects file.
                issue.zone = zone
                items.append(.invalid(issue, raw: Array(bytes[record.range])))
            }
        }
        bytes = []
        rewritten = [:]
    }
}

/// The decoded records of pages, one page after another.
final class PagesRecordSource: RecordSource {
    private var pages: [CloudPage]
    private var page = 0
    private var index = 0

    init(_ pages: [CloudPage]) { self.pages = pages }

    var name: String { "CloudKit" }

    func next() throws -> SourceItem? {
        while page < pages.count {
            if index < pages[page].items.count {
                index += 1
                return pages[page].items[index - 1]
            }
            pages[page].items = []
            page += 1
            index = 0
        }
        return nil
    }

    var bytesRead: Int64 { 0 }
    var totalBytes: Int64? { nil }
}

extension JSONObject {
    /// Replaces the member `key`'s value, or adds the member.
    mutating func set(_ key: String, _ value: JSONValue) {
        if let index = members.firstIndex(where: { $0.key == key }) {
            members[index].value = value
        } else {
            members.append(JSONObject.Member(key: key, value: value))
        }
    }
}

/// One CloudKit answer page read as a pull reads it: its records decoded with `schema`, each in
/// `zone`, and what it says about paging. For checks that feed the reader answers nobody sent
/// (the `cloudkit-page` fuzz target).
public enum CloudAnswerPage {
    public static func read(_ data: Data, operation: String, schema: Schema, zone: ZoneID)
        throws -> (items: [SourceItem], deleted: [String], syncToken: String?, moreComing: Bool)
    {
        var page = try CloudPage(data, operation: operation)
        page.decode(
            with: JSONRecordCodec(schema: schema, readStyle: .canonical, defaultZone: zone), name: operation, zone: zone
        )
        return (page.items, page.deletedNames, page.syncToken, page.moreComing)
    }
}
