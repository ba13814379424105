import Foundation
import GRDB
import GRDBSQLite
import StoreCore

/// Writes the records a migration changed back to their table a run at a time: the rows of a
/// run of consecutive records (in the table's key order) are updated by one UPDATE over their
/// key range, and their registry rows take new change sequence numbers by another.
///
/// One statement per record would pay SQLite's statement start and finish and a descent from
/// the B-tree's root for every record; a range pays them once. The values reach SQLite through
/// two SQL functions registered while the migration step runs: `ckport_staged(recordName, slot)`
/// hands over the value staged for that record and column, and refuses a record that was not
/// staged; `ckport_next_seq()` numbers the registry rows. Each statement must also change
/// exactly as many rows as the run has records, or the migration stops as the store being
/// damaged.
final class RunUpdate {
    static let valueFunction = "ckport_staged"
    static let sequenceFunction = "ckport_next_seq"
    /// The most records one run stages before it is written; a run may go on from one batch
    /// of rows into the next. Measured on 1M records: runs of 2,048 (in batches of 2,048 read
    /// rows) took 7% less time than runs of 512 ending with each batch of 512, and runs of 4,096
    /// no less (BENCHMARKS.md).
    static let longestRun = 2048

    /// A value as it goes into a column.
    enum StagedValue {
        case null
        case integer(Int64)
        case real(Double)
        case text(String)
        case blob([UInt8])
    }

    /// The run being staged, and the sequence numbers handed out; SQLite's callbacks reach it
    /// through the functions' user data.
    final class Staging: ColumnSink {
        var lastSequence: Int64 = 0
        /// Values staged per record: one per column the UPDATE sets.
        let width: Int
        private(set) var names: [String] = []
        private(set) var values: [StagedValue] = []
        private var cursor = 0

        init(width: Int) {
            self.width = width
        }

        var count: Int { names.count }

        func begin(_ name: String) {
            names.append(name)
        }

        func clear() {
            names.removeAll(keepingCapacity: true)
            values.removeAll(keepingCapacity: true)
            cursor = 0
        }

        // The values of the record begun last, in column order (the index is the order).
        func bind(_ index: Int32, _ value: String) { values.append(.text(value)) }
        func bind(_ index: Int32, _ value: Int64?) { values.append(value.map(StagedValue.integer) ?? .null) }
        func bind(_ index: Int32, _ value: Double) { values.append(.real(value)) }
        func bind(_ index: Int32, blob: [UInt8]) { values.append(.blob(blob)) }
        func bindNull(_ index: Int32) { values.append(.null) }

        /// The staged record named by `bytes`: rows come in key order, so the one after the
        /// last is tried first.
        fileprivate func row(named bytes: UnsafeRawBufferPointer) -> Int? {
            if cursor < names.count, Staging.same(names[cursor], bytes) { return cursor }
            if cursor + 1 < names.count, Staging.same(names[cursor + 1], bytes) {
                cursor += 1
                return cursor
            }
            guard let found = names.firstIndex(where: { Staging.same($0, bytes) }) else { return nil }
            cursor = found
            return found
        }

        fileprivate func value(row: Int, slot: Int) -> StagedValue? {
            guard slot >= 0, slot < width else { return nil }
            return values[row * width + slot]
        }

        private static func same(_ name: String, _ bytes: UnsafeRawBufferPointer) -> Bool {
            guard name.utf8.count == bytes.count else { return false }
            guard let base = bytes.baseAddress else { return true }
            return name.utf8.withContiguousStorageIfAvailable { utf8 in
                memcmp(utf8.baseAddress!, base, bytes.count) == 0
            } ?? name.utf8.elementsEqual(bytes)
        }
    }

    let staging: Staging
    private let connection: OpaquePointer

    /// `width`: the columns the run's UPDATE sets, each record's values staged in that order.
    init(_ db: Database, width: Int) throws {
        staging = Staging(width: width)
        connection = db.sqliteConnection!
        try register(RunUpdate.sequenceFunction, arguments: 0) { call, _, _ in
            let staging = Unmanaged<Staging>.fromOpaque(sqlite3_user_data(call)!).takeUnretainedValue()
            staging.lastSequence += 1
            sqlite3_result_int64(call, staging.lastSequence)
        }
        try register(RunUpdate.valueFunction, arguments: 2) { call, _, arguments in
            let staging = Unmanaged<Staging>.fromOpaque(sqlite3_user_data(call)!).takeUnretainedValue()
            guard let arguments, let name = arguments[0], let slot = arguments[1] else {
                sqlite3_result_error(call, "\(RunUpdate.valueFunction) needs a record name and a slot", -1)
                return
            }
            let text = sqlite3_value_text(name)
            let bytes = UnsafeRawBufferPointer(start: text, count: Int(sqlite3_value_bytes(name)))
            guard let row = staging.row(named: bytes),
                let value = staging.value(row: row, slot: Int(sqlite3_value_int64(slot)))
            else {
                sqlite3_result_error(
                    call, "record '\(String(decoding: bytes, as: UTF8.self))' was not staged for this update", -1)
                return
            }
            switch value {
            case .null: sqlite3_result_null(call)
            case .integer(let integer): sqlite3_result_int64(call, integer)
            case .real(let real): sqlite3_result_double(call, real)
            case .text(var text):
                text.withUTF8 { utf8 in
                    sqlite3_result_text(
                        call,
                        UnsafeRawPointer(utf8.baseAddress ?? UnsafePointer(bitPattern: 1)!).assumingMemoryBound(
                            to: CChar.self), Int32(utf8.count), sqliteTransient)
                }
            case .blob(let blob):
                blob.withUnsafeBytes { buffer in
                    if buffer.isEmpty {
                        sqlite3_result_zeroblob(call, 0)
                    } else {
                        sqlite3_result_blob(call, buffer.baseAddress, Int32(buffer.count), sqliteTransient)
                    }
                }
            }
        }
    }

    private func register(
        _ name: String, arguments: Int32,
        _ function: @escaping @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void
    ) throws {
        let context = Unmanaged.passRetained(staging).toOpaque()
        // On failure SQLite has already called the destructor, which released the context.
        let status = sqlite3_create_function_v2(connection, name, arguments, SQLITE_UTF8, context, function, nil, nil) {
            context in
            if let context { Unmanaged<Staging>.fromOpaque(context).release() }
        }
        guard status == SQLITE_OK else {
            throw StoreError.corrupt(
                "cannot register the SQL function \(name): \(String(cString: sqlite3_errmsg(connection)))")
        }
    }

    /// Removes the functions (SQLite releases what they held). While a statement still runs
    /// SQLite keeps them until the connection closes, which does no harm.
    func remove() {
        for (name, arguments) in [(RunUpdate.sequenceFunction, Int32(0)), (RunUpdate.valueFunction, Int32(2))] {
            _ = sqlite3_create_function_v2(connection, name, arguments, SQLITE_UTF8, nil, nil, nil, nil, nil)
        }
    }
}
