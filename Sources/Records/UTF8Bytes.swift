extension String {
    /// Calls `body` with the string's UTF-8 bytes in one buffer: a native string's own storage
    /// (no copy); a bridged or foreign one is copied first. Scanning the buffer costs a fraction
    /// of walking `utf8` index by index, which the hot paths of import and export do per field.
    @inlinable
    public func withUTF8Bytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        if let result = try utf8.withContiguousStorageIfAvailable(body) { return result }
        return try Array(utf8).withUnsafeBufferPointer(body)
    }
}
