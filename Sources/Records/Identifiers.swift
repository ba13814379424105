import Foundation

/// A CloudKit database scope: every zone belongs to one of them.
///
/// The declaration order is the order ckport exports in.
public enum DatabaseScope: String, Sendable, CaseIterable, Comparable, Codable {
    case `private`
    case shared
    case `public`

    public static func < (lhs: DatabaseScope, rhs: DatabaseScope) -> Bool {
        lhs.rank < rhs.rank
    }

    var rank: Int { DatabaseScope.allCases.firstIndex(of: self)! }

    /// Reads a scope the way people write it: `private`, `PRIVATE`, `Private`.
    public init?(text: String) {
        self.init(rawValue: text.lowercased())
    }
}

/// A record zone inside a database scope.
///
/// CloudKit names a zone by `zoneName` and `ownerRecordName`; ckport adds the scope because a
/// store holds the private, shared and public databases side by side.
public struct ZoneID: Hashable, Sendable, Comparable, CustomStringConvertible, Codable {
    /// The zone every database has, which needs no creating.
    public static let defaultZoneName = "_defaultZone"
    /// The owner CloudKit reports for zones of the current user (`CKCurrentUserDefaultName`).
    public static let defaultOwnerName = "__defaultOwner__"

    public var scope: DatabaseScope
    public var zoneName: String
    public var ownerRecordName: String

    public init(
        scope: DatabaseScope = .private,
        zoneName: String = ZoneID.defaultZoneName,
        ownerRecordName: String = ZoneID.defaultOwnerName
    ) {
        self.scope = scope
        self.zoneName = zoneName
        self.ownerRecordName = ownerRecordName
    }

    public static let defaultZone = ZoneID()

    public static func < (lhs: ZoneID, rhs: ZoneID) -> Bool {
        if lhs.scope != rhs.scope { return lhs.scope < rhs.scope }
        if !lhs.zoneName.hasSameBytes(as: rhs.zoneName) {
            return lhs.zoneName.utf8.lexicographicallyPrecedes(rhs.zoneName.utf8)
        }
        return lhs.ownerRecordName.utf8.lexicographicallyPrecedes(rhs.ownerRecordName.utf8)
    }

    /// Zones are told apart by the bytes of their names, as CloudKit and the stores tell them
    /// apart (Swift's own `String` equality would take "é" and "e" + U+0301 for one name).
    public static func == (lhs: ZoneID, rhs: ZoneID) -> Bool {
        lhs.scope == rhs.scope && lhs.zoneName.hasSameBytes(as: rhs.zoneName)
            && lhs.ownerRecordName.hasSameBytes(as: rhs.ownerRecordName)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(scope)
        zoneName.hashBytes(into: &hasher)
        ownerRecordName.hashBytes(into: &hasher)
    }

    public var description: String {
        ownerRecordName == ZoneID.defaultOwnerName
            ? "\(scope.rawValue)/\(zoneName)"
            : "\(scope.rawValue)/\(zoneName)(\(ownerRecordName))"
    }
}

/// The identity of a record: its name inside a zone. Record names are unique per zone,
/// whatever the record type.
public struct RecordID: Hashable, Sendable, CustomStringConvertible {
    public var zone: ZoneID
    public var recordName: String

    public init(recordName: String, zone: ZoneID = .defaultZone) {
        self.recordName = recordName
        self.zone = zone
    }

    /// By the bytes of the name, as ``ZoneID`` compares.
    public static func == (lhs: RecordID, rhs: RecordID) -> Bool {
        lhs.recordName.hasSameBytes(as: rhs.recordName) && lhs.zone == rhs.zone
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(zone)
        recordName.hashBytes(into: &hasher)
    }

    public var description: String { "\(zone)/\(recordName)" }
}

extension String {
    /// Whether the two hold the same UTF-8 bytes: names compared as CloudKit and the stores
    /// compare them, where `==` takes canonically equivalent text ("é", "e" + U+0301) as equal.
    @inlinable
    public func hasSameBytes(as other: String) -> Bool {
        let count = utf8.count
        guard count == other.utf8.count else { return false }
        let compared = utf8.withContiguousStorageIfAvailable { mine in
            other.utf8.withContiguousStorageIfAvailable { theirs in
                count == 0 || memcmp(mine.baseAddress!, theirs.baseAddress!, count) == 0
            }
        }
        if let compared = compared ?? nil { return compared }
        return utf8.elementsEqual(other.utf8)
    }

    /// Feeds the UTF-8 bytes to `hasher`, for a hash that agrees with ``hasSameBytes(as:)``.
    @inlinable
    public func hashBytes(into hasher: inout Hasher) {
        var text = self
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        hasher.combine(utf8.count)
    }
}

/// A string as a dictionary key compared byte for byte (``String/hasSameBytes(as:)``).
public struct ExactText: Hashable, Sendable {
    public let text: String
    public init(_ text: String) { self.text = text }

    public static func == (lhs: ExactText, rhs: ExactText) -> Bool { lhs.text.hasSameBytes(as: rhs.text) }
    public func hash(into hasher: inout Hasher) { text.hashBytes(into: &hasher) }
}
