import CloudKitWeb
import Foundation
import Records
import Synchronization

/// A page of the browser view: what it shows, as a model. ``BrowseSite``'s pages read the store
/// and return one; the route renders it once, as HTML or, at the page's path with `.json`, as
/// the model's JSON (its keys sorted). A model's JSON is what it encodes, never its HTML.
protocol BrowsePage: Encodable {
    /// The answer's status: 200, or the status of the problem the page reports.
    var status: Int { get }
    /// The page's title and heading.
    var title: String { get }
    /// The address of the page's JSON form, linked from its HTML (nil: no link).
    var jsonAddress: String? { get }
    /// The page's content as HTML, every value escaped, between its heading and its JSON link.
    func body() -> String
}

extension BrowsePage {
    var status: Int { 200 }

    /// The whole page, as the browser gets it.
    func html() -> String {
        var html =
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>\(escape(title)) · ckport</title>"
        html +=
            "<link rel=\"stylesheet\" href=\"/style.css\"></head><body><header><a href=\"/\">ckport</a> · read-only</header><main><h1>\(escape(title))</h1>"
        html += body()
        if let jsonAddress {
            html += "<p class=\"json\"><a href=\"\(attribute(jsonAddress))\">this page as JSON</a></p>"
        }
        return html + "</main></body></html>\n"
    }

    /// The page as an answer: its HTML, or its JSON for a `.json` path; `extra` headers first.
    func rendered(json: Bool, extra: [(name: String, value: String)] = []) -> CloudKitHTTPResponse {
        guard json else {
            return CloudKitHTTPResponse(
                status: status, headers: extra + [("Content-Type", "text/html; charset=utf-8")],
                body: Data(html().utf8))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let raw = RawJSONFragments()
        encoder.userInfo[RawJSONFragments.key] = raw
        do {
            return CloudKitHTTPResponse(
                status: status, headers: extra + [("Content-Type", "application/json; charset=utf-8")],
                body: raw.splice(try encoder.encode(self)))
        } catch {
            return ProblemPage(500, "Could not write the page", "\(error)").rendered(json: true, extra: extra)
        }
    }

    // The pieces every page's HTML is made of.

    /// Text as HTML shows it in a text node.
    func escape(_ text: String) -> String { BrowseSite.escape(text) }
    /// Text as an attribute's value (quoted with `"`).
    func attribute(_ text: String) -> String { BrowseSite.escape(text) }
    /// A path component or query value, percent-encoded.
    func component(_ text: String) -> String { BrowseSite.component(text) }
    /// `name=value&…`, each part percent-encoded.
    func queryString(_ items: [(String, String)]) -> String { BrowseSite.queryString(items) }
    /// A zone as the record table's `zone` parameter: SCOPE:OWNER:ZONE.
    func zoneKey(_ zone: ZoneID) -> String { BrowseSite.zoneKey(zone) }
    /// A record's page.
    func idLink(_ id: RecordID) -> String { BrowseSite.idLink(id) }
    func recordLink(_ record: Record) -> String { BrowseSite.idLink(record.id) }
    /// A type's table in a zone.
    func tableLink(_ type: String, _ zone: ZoneID) -> String {
        "/records/\(component(type))?zone=\(component(zoneKey(zone)))"
    }
    /// A table (`dl`) row.
    func item(_ term: String, _ definition: String) -> String { "<dt>\(term)</dt><dd>\(definition)</dd>" }

    /// A value as a table cell: text escaped, references as links into the same zone.
    func cell(_ value: FieldValue, zone: ZoneID) -> String {
        switch value {
        case .reference(let reference):
            return
                "<a href=\"\(attribute(idLink(RecordID(recordName: reference.recordName, zone: zone))))\">\(escape(reference.recordName))</a>"
        case .list(_, let items)
        where items.contains(where: { if case .reference = $0 { return true } else { return false } }):
            return items.map { cell($0, zone: zone) }.joined(separator: ", ")
        case .string(let string):
            return escape(string.count > 200 ? String(string.prefix(200)) + "…" : string)
        case .timestamp(let milliseconds):
            return escape(ISO8601.format(milliseconds: milliseconds))
        default:
            var out = JSONWriter()
            FieldValueJSON.write(value, style: .plain, to: &out)
            var text = out.text
            if text.count > 200 { text = String(text.prefix(200)) + "…" }
            return escape(text)
        }
    }
}

/// What went wrong with a request: `{"status":404,"error":"…"}` as JSON, a line in red as a
/// page.
struct ProblemPage: BrowsePage {
    let status: Int
    let title: String
    let error: String
    var jsonAddress: String? { nil }

    init(_ status: Int, _ title: String, _ error: String) {
        self.status = status
        self.title = title
        self.error = error
    }

    static func notFound(_ why: String) -> ProblemPage { ProblemPage(404, "Not found", why) }

    func body() -> String { "<p class=\"error\">\(escape(error))</p><p><a href=\"/\">Back to the store</a></p>" }

    private enum CodingKeys: String, CodingKey { case status, error }
}

/// A record in a page's JSON: the canonical form `ckport export` writes, byte for byte as its
/// codec writes it (its keys in the export's order, `3.0` as `3.0`), put in place after the
/// page is encoded (``RawJSONFragments``).
struct RecordJSON: Encodable {
    let record: Record
    let codec: JSONRecordCodec

    func encode(to encoder: Encoder) throws {
        var out = JSONWriter()
        codec.encode(record, style: .canonical, to: &out)
        guard let raw = encoder.userInfo[RawJSONFragments.key] as? RawJSONFragments else {
            // An encoder that does not splice: the same value, as JSONEncoder writes it.
            try JSONParser.parse(out.bytes).encode(to: encoder)
            return
        }
        var container = encoder.singleValueContainer()
        try container.encode(raw.placeholder(for: out.bytes))
    }
}

/// JSON written elsewhere, put into a JSONEncoder's output: each fragment is encoded as a
/// placeholder string that names this page's random token, then ``splice(_:)`` replaces every
/// placeholder with its bytes. No value of the page can hold a placeholder: the token is new
/// for every page.
final class RawJSONFragments: Sendable {
    static let key = CodingUserInfoKey(rawValue: "ckport.rawJSONFragments")!
    private let token = UUID().uuidString
    private let fragments = Mutex<[[UInt8]]>([])

    /// The placeholder of `bytes`.
    func placeholder(for bytes: [UInt8]) -> String {
        let index = fragments.withLock { list in
            list.append(bytes)
            return list.count - 1
        }
        return "ckport-raw-\(token)-\(index)"
    }

    /// `encoded` with every placeholder (a JSON string) replaced by its fragment.
    func splice(_ encoded: Data) -> Data {
        let list = fragments.withLock { $0 }
        guard !list.isEmpty else { return encoded }
        let marker = Array("\"ckport-raw-\(token)-".utf8)
        let bytes = [UInt8](encoded)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + list.reduce(0) { $0 + $1.count })
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "\""), bytes[i...].starts(with: marker) {
                var j = i + marker.count
                var index = 0
                while j < bytes.count, bytes[j] != UInt8(ascii: "\"") {
                    index = index * 10 + Int(bytes[j] &- UInt8(ascii: "0"))
                    j += 1
                }
                out += list[index]
                i = j + 1
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return Data(out)
    }
}

extension BrowseSite {
    /// Text as HTML shows it in a text node or an attribute's value: `&`, `<`, `>`, `"` and `'`
    /// escaped, everything else as it is.
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// A path component or query value, percent-encoded.
    static func component(_ text: String) -> String {
        var allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        allowed.insert(charactersIn: "-_~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    /// `name=value&…`, each part percent-encoded (a '+' too, which a form would read as a space).
    static func queryString(_ items: [(String, String)]) -> String {
        items.map { component($0.0) + "=" + component($0.1) }.joined(separator: "&")
    }

    /// A zone as the record table's `zone` parameter: SCOPE:OWNER:ZONE.
    static func zoneKey(_ zone: ZoneID) -> String { "\(zone.scope.rawValue):\(zone.ownerRecordName):\(zone.zoneName)" }

    /// A record's page.
    static func idLink(_ id: RecordID) -> String {
        "/record/\(component(id.zone.scope.rawValue))/\(component(id.zone.ownerRecordName))/\(component(id.zone.zoneName))/\(component(id.recordName))"
    }
}
