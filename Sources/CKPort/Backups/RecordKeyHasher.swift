import Records

/// 64-bit keys for (zone, record name) pairs, for telling which references point inside a
/// bundle. The zone's share is worked out once per zone, the name's with a multiply-and-mix
/// over eight bytes at a time: cheap enough to run twice per record at a million records.
public struct RecordKeyHasher {
    private var lastZone: ZoneID?
    private var lastZoneSeed: UInt64 = 0

    public init() {}

    public mutating func key(_ zone: ZoneID, _ name: String) -> Int {
        if zone != lastZone {
            lastZone = zone
            var seed: UInt64 = 0x243F_6A88_85A3_08D3
            for part in [zone.scope.rawValue, zone.zoneName, zone.ownerRecordName] {
                seed = RecordKeyHasher.mix(part, seed)
            }
            lastZoneSeed = seed
        }
        return Int(bitPattern: UInt(RecordKeyHasher.mix(name, lastZoneSeed)))
    }

    private static func mix(_ text: String, _ seed: UInt64) -> UInt64 {
        if let hash = text.utf8.withContiguousStorageIfAvailable({ mix($0, seed) }) { return hash }
        var copy = text
        return copy.withUTF8 { mix($0, seed) }
    }

    private static func mix(_ bytes: UnsafeBufferPointer<UInt8>, _ seed: UInt64) -> UInt64 {
        var hash = seed ^ (UInt64(bytes.count) &* 0x9E37_79B9_7F4A_7C15)
        var index = 0
        while index + 8 <= bytes.count {
            let word = UnsafeRawPointer(bytes.baseAddress! + index).loadUnaligned(as: UInt64.self)
            hash = (hash ^ word) &* 0xBF58_476D_1CE4_E5B9
            hash ^= hash >> 31
            index += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while index < bytes.count {
            tail |= UInt64(bytes[index]) << shift
            shift += 8
            index += 1
        }
        hash = (hash ^ tail) &* 0x94D0_49BB_1331_11EB
        // The finalizer of SplitMix64, so that every input bit reaches every output bit.
        hash ^= hash >> 30
        hash = hash &* 0xBF58_476D_1CE4_E5B9
        hash ^= hash >> 27
        hash = hash &* 0x94D0_49BB_1331_11EB
        return hash ^ (hash >> 31)
    }
}
