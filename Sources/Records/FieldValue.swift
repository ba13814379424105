/// What a reference does when its target is deleted.
public enum ReferenceAction: String, Sendable, Hashable, CaseIterable {
    /// Nothing: the reference is left dangling.
    case none = "NONE"
    /// The record holding the reference is deleted with its target.
    case deleteSelf = "DELETE_SELF"
    /// The target cannot be deleted while the reference points at it.
    case validate = "VALIDATE"

    /// The code ckport stores in SQLite.
    public var code: Int64 {
        switch self {
        case .none: return 0
        case .deleteSelf: return 1
        case .validate: return 2
        }
    }

    public init?(code: Int64) {
        switch code {
        case 0: self = .none
        case 1: self = .deleteSelf
        case 2: self = .validate
        default: return nil
        }
    }
}

/// A reference to another record in the same zone.
public struct Reference: Hashable, Sendable {
    public var recordName: String
    public var action: ReferenceAction

    public init(recordName: String, action: ReferenceAction = .none) {
        self.recordName = recordName
        self.action = action
    }
}

/// An asset: a file kept beside the record, known by its checksum and size.
public struct Asset: Hashable, Sendable {
    public var fileChecksum: String
    public var size: Int64
    public var referenceChecksum: String?
    public var wrappingKey: String?
    public var receipt: String?
    public var downloadURL: String?
    /// Where a copy of the file lives on this machine, when ckport knows one.
    public var localPath: String?
    /// The SHA-256 (lowercase hex) of the file's bytes when a store holds them: the key of
    /// the bytes in the store and of the `assets/<sha256>` member of a bundle.
    public var sha256: String?

    public init(
        fileChecksum: String, size: Int64, referenceChecksum: String? = nil, wrappingKey: String? = nil,
        receipt: String? = nil, downloadURL: String? = nil, localPath: String? = nil, sha256: String? = nil
    ) {
        self.fileChecksum = fileChecksum
        self.size = size
        self.referenceChecksum = referenceChecksum
        self.wrappingKey = wrappingKey
        self.receipt = receipt
        self.downloadURL = downloadURL
        self.localPath = localPath
        self.sha256 = sha256
    }

    /// True when `text` is a SHA-256 in the form ckport keeps: 64 lowercase hex digits.
    public static func isSHA256(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

/// A geographic location as CloudKit stores it (`CLLocation`'s fields).
public struct Location: Sendable {
    public var latitude: Double
    public var longitude: Double
    public var horizontalAccuracy: Double?
    public var verticalAccuracy: Double?
    public var altitude: Double?
    public var speed: Double?
    public var course: Double?
    /// Milliseconds since 1970.
    public var timestamp: Int64?

    public init(
        latitude: Double, longitude: Double, horizontalAccuracy: Double? = nil, verticalAccuracy: Double? = nil,
        altitude: Double? = nil, speed: Double? = nil, course: Double? = nil, timestamp: Int64? = nil
    ) {
        self.latitude = latitude
        self.longitude = longitude
        self.horizontalAccuracy = horizontalAccuracy
        self.verticalAccuracy = verticalAccuracy
        self.altitude = altitude
        self.speed = speed
        self.course = course
        self.timestamp = timestamp
    }
}

extension Location: Hashable {
    // Doubles compare by bit pattern so that -0.0 and 0.0 stay apart: a store must notice
    // every change a user makes, however small.
    public static func == (lhs: Location, rhs: Location) -> Bool {
        sameBits(lhs.latitude, rhs.latitude) && sameBits(lhs.longitude, rhs.longitude)
            && sameBits(lhs.horizontalAccuracy, rhs.horizontalAccuracy)
            && sameBits(lhs.verticalAccuracy, rhs.verticalAccuracy)
            && sameBits(lhs.altitude, rhs.altitude) && sameBits(lhs.speed, rhs.speed)
            && sameBits(lhs.course, rhs.course) && lhs.timestamp == rhs.timestamp
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(latitude.bitPattern)
        hasher.combine(longitude.bitPattern)
        hasher.combine(timestamp)
    }
}

@inline(__always) func sameBits(_ a: Double, _ b: Double) -> Bool { a.bitPattern == b.bitPattern }

@inline(__always) func sameBits(_ a: Double?, _ b: Double?) -> Bool {
    switch (a, b) {
    case (nil, nil): return true
    case (let x?, let y?): return x.bitPattern == y.bitPattern
    default: return false
    }
}

/// One field value of a record.
///
/// There is no boolean: CloudKit apps store flags as INT64 0 and 1.
public enum FieldValue: Sendable {
    case string(String)
    case int64(Int64)
    case double(Double)
    /// Milliseconds since 1970-01-01T00:00:00Z; negative before 1970.
    case timestamp(Int64)
    case bytes([UInt8])
    case reference(Reference)
    case asset(Asset)
    case location(Location)
    /// A list of values of one primitive type; the type is kept so that an empty list keeps it.
    case list(PrimitiveType, [FieldValue])

    /// The Web Services type of this value (never encrypted: encryption belongs to the field).
    public var type: FieldType { FieldValue.type(of: self) }

    /// The bytes this value counts toward CloudKit's 1 MB record limit. Assets count only their
    /// metadata, since their files are stored apart.
    public var encodedSize: Int { FieldValue.size(of: self) }

    /// A value's type, looked at where it lies (borrowed: the validator asks this of every field
    /// in place, and a copy would retain the value's strings).
    package static func type(of value: borrowing FieldValue) -> FieldType {
        switch value {
        case .string: return .string
        case .int64: return .int64
        case .double: return .double
        case .timestamp: return .timestamp
        case .bytes: return .bytes
        case .reference: return .reference
        case .asset: return .asset
        case .location: return .location
        case .list(let element, _): return .list(element)
        }
    }

    /// ``encodedSize``, of a value borrowed where it lies.
    package static func size(of value: borrowing FieldValue) -> Int {
        switch value {
        case .string(let s): return s.utf8.count
        case .int64, .double, .timestamp: return 8
        case .bytes(let b): return b.count
        case .reference(let r): return r.recordName.utf8.count + 8
        case .asset(let a): return a.fileChecksum.utf8.count + 8
        case .location: return 64
        case .list(_, let values): return values.reduce(0) { $0 + $1.encodedSize }
        }
    }
}

extension FieldValue: Hashable {
    public static func == (lhs: FieldValue, rhs: FieldValue) -> Bool {
        switch (lhs, rhs) {
        case (.string(let a), .string(let b)): return a == b
        case (.int64(let a), .int64(let b)): return a == b
        case (.double(let a), .double(let b)): return a.bitPattern == b.bitPattern
        case (.timestamp(let a), .timestamp(let b)): return a == b
        case (.bytes(let a), .bytes(let b)): return a == b
        case (.reference(let a), .reference(let b)): return a == b
        case (.asset(let a), .asset(let b)): return a == b
        case (.location(let a), .location(let b)): return a == b
        case (.list(let ta, let a), .list(let tb, let b)): return ta == tb && a == b
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .string(let s):
            hasher.combine(0)
            hasher.combine(s)
        case .int64(let i):
            hasher.combine(1)
            hasher.combine(i)
        case .double(let d):
            hasher.combine(2)
            hasher.combine(d.bitPattern)
        case .timestamp(let t):
            hasher.combine(3)
            hasher.combine(t)
        case .bytes(let b):
            hasher.combine(4)
            hasher.combine(b)
        case .reference(let r):
            hasher.combine(5)
            hasher.combine(r)
        case .asset(let a):
            hasher.combine(6)
            hasher.combine(a)
        case .location(let l):
            hasher.combine(7)
            hasher.combine(l)
        case .list(let t, let v):
            hasher.combine(8)
            hasher.combine(t)
            hasher.combine(v)
        }
    }
}
