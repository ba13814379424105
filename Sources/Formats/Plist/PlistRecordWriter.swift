import Foundation
import Records

/// A record that cannot be written as a property list, and why.
public struct PlistWriteError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }
    public var file: String
    public var recordName: String
    public var recordType: String
    public var field: String?
    public var message: String

    public init(file: String, recordName: String, recordType: String, field: String?, message: String) {
        self.file = file
        self.recordName = recordName
        self.recordType = recordType
        self.field = field
        self.message = message
    }

    public var description: String {
        "\(file): record '\(recordName)' (\(recordType))" + (field.map { ", field '\($0)'" } ?? "") + ": " + message
    }
}

/// Writes records as an XML property list (Apple's `PropertyList-1.0` DTD): an array with a
/// dictionary per record, in the plain style's keys, each value as the plist type that holds
/// it, streaming.
///
/// ```xml
/// <dict>
///     <key>recordName</key>       <string>task-1</string>
///     <key>recordType</key>       <string>Task</string>
///     <key>scope</key>            <string>shared</string>
///     <key>zoneName</key>         <string>Household-1</string>
///     <key>dueDate</key>          <date>2026-01-12T09:00:00Z</date>
///     <key>points</key>           <integer>5</integer>
///     <key>areaID</key>           <dict><key>recordName</key><string>area-1</string>…</dict>
/// </dict>
/// ```
///
/// STRING is `<string>`, INT64 `<integer>`, DOUBLE `<real>`, BYTES `<data>` (base64), a
/// LIST an `<array>`; REFERENCE, LOCATION and ASSET are dictionaries of their parts
/// (`recordName` and `action`; `latitude`, `longitude`…; `fileChecksum`, `size`…).
/// `parentRecordName` and `shareRecordName` are strings, and a share's details the JSON text of
/// `shareDetails` in the plain JSON style.
/// A field named like a system key (`createdBy`…) has no place beside it, as in the plain
/// JSON style: such a record is refused.
///
/// TIMESTAMP is a `<date>` when it falls on a whole second of the years 1–9999, the only
/// instants a plist `<date>` holds; any other is ISO-8601 text with its milliseconds
/// (`<string>2026-01-12T09:00:00.250Z</string>`), which ckport reads back as the same
/// timestamp, so that nothing is rounded away.
public final class PlistRecordWriter: RecordSink {
    private let output: OutputFile
    private var xml: XMLWriter
    private var count = 0
    /// The record being written, for messages.
    private var current: Record?

    public static let header: StaticString = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">

        """

    public init(output: OutputFile) {
        self.output = output
        xml = XMLWriter(output: output)
    }

    public var recordsWritten: Int { count }

    public func write(_ record: Record) throws {
        if count == 0 {
            xml.raw(PlistRecordWriter.header)
            xml.raw("<array>\n")
        }
        current = record
        xml.raw("\t<dict>\n")
        try text("recordName", record.recordName, depth: 2)
        try text("recordType", record.recordType, depth: 2)
        try text("scope", record.zone.scope.rawValue, depth: 2)
        try text("zoneName", record.zone.zoneName, depth: 2)
        if record.zone.ownerRecordName != ZoneID.defaultOwnerName {
            try text("ownerRecordName", record.zone.ownerRecordName, depth: 2)
        }
        if let tag = record.changeTag { try text("recordChangeTag", tag, depth: 2) }
        for (stamp, prefix) in [(record.created, "created"), (record.modified, "modified")] {
            guard let stamp else { continue }
            try key(prefix, depth: 2)
            timestamp(stamp.timestamp)
            if let user = stamp.userRecordName { try text(prefix + "By", user, depth: 2) }
            if let device = stamp.deviceID { try text(prefix + "Device", device, depth: 2) }
        }
        if record.isDeleted {
            try key("deleted", depth: 2)
            xml.raw("<true/>\n")
        } else {
            if let parent = record.parent { try text("parentRecordName", parent, depth: 2) }
            if let share = record.share { try text("shareRecordName", share, depth: 2) }
            // A share's details as the JSON text ckport keeps: a plist has no null, and the
            // details may hold one.
            if let details = record.shareDetails { try text("shareDetails", details, depth: 2) }
            for entry in record.fields.entries {
                guard !JSONRecordCodec.plainSystemKeys.contains(entry.name) else {
                    throw failure(
                        entry.name,
                        "has the name of a system key of the record's dictionary; a property list cannot tell them apart (export this type as JSON)"
                    )
                }
                do {
                    try key(entry.name, depth: 2)
                } catch {
                    throw failure(entry.name, error.message)
                }
                try value(entry.value, depth: 2, field: entry.name)
            }
        }
        xml.raw("\t</dict>\n")
        count += 1
        try xml.flushIfLarge()
    }

    public func finish() throws {
        if count == 0 {
            xml.raw(PlistRecordWriter.header)
            xml.raw("<array/>\n")
        } else {
            xml.raw("</array>\n")
        }
        xml.raw("</plist>\n")
        try xml.flush()
        try output.commit()
    }

    public func discard() {
        output.discard()
    }

    // MARK: Values

    private func failure(_ field: String?, _ message: String) -> PlistWriteError {
        PlistWriteError(
            file: output.path, recordName: current?.recordName ?? "", recordType: current?.recordType ?? "",
            field: field, message: message)
    }

    /// A key on a line of its own, and the indentation of its value's line.
    private func key(_ name: String, depth: Int) throws(XMLCharacterError) {
        xml.indent(depth)
        xml.raw("<key>")
        try xml.escaped(name)
        xml.raw("</key>\n")
        xml.indent(depth)
    }

    /// A key and a string value.
    private func text(_ name: String, _ value: String, depth: Int) throws {
        do {
            try key(name, depth: depth)
            xml.raw("<string>")
            try xml.escaped(value)
            xml.raw("</string>\n")
        } catch {
            throw failure(nil, "\(name) \(error.message)")
        }
    }

    /// A timestamp: `<date>` when a plist date holds it exactly, else ISO-8601 text.
    private func timestamp(_ ms: Int64) {
        // Whole seconds of the years 0001–9999 (-62135596800000 is 0001-01-01T00:00:00Z).
        if ms % 1000 == 0 && ms >= -62_135_596_800_000 && ms < 253_402_300_800_000 {
            xml.raw("<date>")
            ISO8601.append(milliseconds: ms, to: &xml.bytes)
            // "….000Z" → "…Z"
            xml.bytes.removeLast(5)
            xml.raw("Z</date>\n")
        } else {
            xml.raw("<string>")
            ISO8601.append(milliseconds: ms, to: &xml.bytes)
            xml.raw("</string>\n")
        }
    }

    private func real(_ value: Double) {
        xml.raw("<real>")
        if value.isNaN {
            xml.raw("nan")
        } else if value.isInfinite {
            xml.raw(value < 0 ? "-inf" : "inf")
        } else {
            xml.raw(value.description)
        }
        xml.raw("</real>\n")
    }

    private func value(_ value: FieldValue, depth: Int, field: String) throws {
        do {
            try write(value, depth: depth)
        } catch let error as XMLCharacterError {
            throw failure(field, error.message)
        }
    }

    /// One value, from the indentation its line already has.
    private func write(_ value: FieldValue, depth: Int) throws {
        switch value {
        case .string(let s):
            xml.raw("<string>")
            try xml.escaped(s)
            xml.raw("</string>\n")
        case .int64(let i):
            xml.raw("<integer>")
            xml.raw(String(i))
            xml.raw("</integer>\n")
        case .double(let d):
            real(d)
        case .timestamp(let t):
            timestamp(t)
        case .bytes(let b):
            xml.raw("<data>")
            Base64.append(b, to: &xml.bytes)
            xml.raw("</data>\n")
        case .reference(let r):
            xml.raw("<dict>\n")
            try text("recordName", r.recordName, depth: depth + 1)
            if r.action != .none { try text("action", r.action.rawValue, depth: depth + 1) }
            xml.indent(depth)
            xml.raw("</dict>\n")
        case .location(let l):
            xml.raw("<dict>\n")
            for (name, part) in [
                ("latitude", l.latitude), ("longitude", l.longitude), ("horizontalAccuracy", l.horizontalAccuracy),
                ("verticalAccuracy", l.verticalAccuracy), ("altitude", l.altitude), ("speed", l.speed),
                ("course", l.course),
            ] {
                guard let part else { continue }
                try key(name, depth: depth + 1)
                real(part)
            }
            if let t = l.timestamp {
                try key("timestamp", depth: depth + 1)
                timestamp(t)
            }
            xml.indent(depth)
            xml.raw("</dict>\n")
        case .asset(let a):
            xml.raw("<dict>\n")
            try text("fileChecksum", a.fileChecksum, depth: depth + 1)
            try key("size", depth: depth + 1)
            xml.raw("<integer>\(a.size)</integer>\n")
            for (name, part) in [
                ("referenceChecksum", a.referenceChecksum), ("wrappingKey", a.wrappingKey), ("receipt", a.receipt),
                ("downloadURL", a.downloadURL), ("localPath", a.localPath), ("sha256", a.sha256),
            ] {
                if let part { try text(name, part, depth: depth + 1) }
            }
            xml.indent(depth)
            xml.raw("</dict>\n")
        case .list(_, let elements):
            if elements.isEmpty {
                xml.raw("<array/>\n")
                return
            }
            xml.raw("<array>\n")
            for element in elements {
                xml.indent(depth + 1)
                try write(element, depth: depth + 1)
            }
            xml.indent(depth)
            xml.raw("</array>\n")
        }
    }
}
