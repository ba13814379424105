import GRDBSQLite
import Records
import StoreCore

/// A JSON Lines export on both cores: this thread steps through the rows and copies each one's
/// columns into a batch (``RowBatch``), while a second thread writes the batch before as JSON
/// (``RowJSON``, the same bytes as ``StoreSession/forEachCanonicalJSON(_:into:starting:_:)``)
/// and hands it to the output. SQLite's work and the text's are about even, so the export takes
/// about the time of the larger of them instead of their sum.
extension StoreSession {
    /// Writes each record `query` selects as one line of canonical JSON. `write` gets the lines
    /// a batch at a time, in order, on the second thread (never two at once); `progress` hears
    /// how many rows have been read, on this thread. An error of either thread ends the export
    /// with that error. Returns the number of records. ``canWriteJSONFromRows(_:)`` must have
    /// said yes to `query`.
    public func writeCanonicalJSONLines(
        _ query: RecordQuery, progress: ((Int) -> Void)? = nil,
        write: @escaping ([UInt8]) throws -> Void
    ) throws -> Int {
        let formatter = SideThread<Error?>(name: "ckport format")
        defer { formatter.stop() }
        // Two batches: one being filled here, one being written there; and the JSON buffer,
        // which only the second thread touches.
        var filling = RowBatch()
        var spare = RowBatch()
        let text = JSONText()
        var busy = false
        var count = 0
        var plans: [ObjectIdentifier: RowCapturePlan] = [:]
        var plan: RowCapturePlan?
        var layout: TableLayout?
        var zoneSerial = -1
        var zonePart: [UInt8] = []

        /// Waits for the batch the second thread has (which it leaves empty), and throws its error.
        func settle() throws {
            guard busy else { return }
            busy = false
            if let error = formatter.collect() { throw error }
        }
        func handOver() throws {
            try settle()
            // The second thread has let go of its batch: emptied here, it has the room back.
            spare.clear()
            swap(&filling, &spare)
            let batch = spare
            formatter.start {
                do {
                    // After a batch of huge values, the buffer goes back to its usual size.
                    if text.out.bytes.capacity > 4 * RowBatch.targetBytes {
                        text.out = JSONWriter(capacity: RowBatch.targetBytes + RowBatch.targetBytes / 2)
                    } else {
                        text.out.bytes.removeAll(keepingCapacity: true)
                    }
                    try batch.appendJSONLines(to: &text.out)
                    try write(text.out.bytes)
                } catch {
                    return error
                }
                return nil
            }
            busy = true
        }

        do {
            try forEachTableRow(query) { row in
                if layout !== row.layout {
                    layout = row.layout
                    let key = ObjectIdentifier(row.layout)
                    if plans[key] == nil { plans[key] = RowCapturePlan(row.layout) }
                    plan = plans[key]
                    zoneSerial = -1
                }
                // A run starts with a new zone or type, and a new batch goes on with the run the
                // last one ended in.
                var startsRun = filling.rowCount == 0
                if zoneSerial != row.zoneSerial {
                    zoneSerial = row.zoneSerial
                    zonePart = RowJSON.zonePart(row.zone)
                    startsRun = true
                }
                if startsRun { filling.startRun(layout: row.layout, names: plan!.names, zonePart: zonePart) }
                filling.copy(row.statement, plan: plan!)
                count += 1
                if filling.isFull { try handOver() }
                if count % 8192 == 0 { progress?(count) }
            }
            if filling.rowCount > 0 { try handOver() }
            try settle()
        } catch {
            // The second thread's error came from earlier rows than this one: it is the one to
            // report.
            try settle()
            throw error
        }
        return count
    }
}

/// The JSON text of the batch being written, kept by the writing thread from batch to batch.
private final class JSONText {
    var out = JSONWriter(capacity: RowBatch.targetBytes + RowBatch.targetBytes / 2)
}

/// Which SQLite accessor reads each column of a table's rows: the one ``RowJSON`` calls for it,
/// so that a copied row gives the bytes the statement would have.
struct RowCapturePlan {
    /// How a column is read; `skip` copies it as NULL without reading it.
    enum Read: UInt8 { case text, int64, double, number, blob, skip }
    let reads: [Read]
    let names: RowJSONNames
    /// Per column, the JSON it takes when it is not null, besides its text or bytes: its key,
    /// its type, and room for a number's digits (what sizes a batch).
    let jsonCost: [Int]

    /// `only`: per field, whether its columns are read (nil: all are), as
    /// ``TableLayout/decode(_:zone:only:)`` takes it; with it, of the system columns only
    /// those of ``TableLayout/systemColumnsForReads`` are.
    init(_ layout: TableLayout, only: [Bool]? = nil) {
        var reads: [Read] = [.int64, .text, .text, .int64, .text, .text, .int64, .text, .text, .text, .text, .text]
        precondition(reads.count == TableLayout.systemColumns.count)
        if only != nil {
            for (column, read) in TableLayout.systemColumnsForReads.enumerated() where !read { reads[column] = .skip }
        }
        for (position, kind) in layout.kinds.enumerated() {
            if let only, !only[position] {
                reads += kind == .reference ? [.skip, .skip] : [.skip]
                continue
            }
            switch kind {
            case .string, .json: reads.append(.text)
            case .int64, .timestamp: reads.append(.int64)
            case .double: reads.append(.double)
            case .number: reads.append(.number)
            case .bytes: reads.append(.blob)
            case .reference: reads += [.text, .int64]
            }
        }
        self.reads = reads
        names = layout.jsonNames
        // System fields: their keys and a timestamp's digits; a third more than the text for
        // Base64 and escapes is counted with the bytes copied.
        var costs = [Int](repeating: 48, count: TableLayout.systemColumns.count)
        costs[1] += names.recordType.count + 160
        for (position, kind) in layout.kinds.enumerated() {
            let keyAndType = names.fields[position].opening.count + names.fields[position].doubleClosing.count
            switch kind {
            case .reference: costs += [keyAndType + 32, 24]
            case .string, .bytes, .json: costs.append(keyAndType)
            case .int64, .timestamp, .double, .number: costs.append(keyAndType + 24)
            }
        }
        jsonCost = costs
    }
}

/// One column of a copied row: SQLite's type of the value, and the value — an integer, a
/// double's bits, or where its bytes start in the batch's bytes (and how many).
struct RowSlot {
    var type: Int32
    var count: Int32
    var value: Int64
}

/// Rows copied out of a statement, to be written as JSON on another thread. Runs of rows share
/// a table layout and a zone. A value, not an object: appending to a class's arrays is checked
/// for exclusive access at every call, which cost the copying a tenth of its time.
struct RowBatch: Sendable {
    /// About this many bytes of JSON make a batch.
    static let targetBytes = 1 << 19
    static let maximumRows = 2048

    private var slots: [RowSlot] = []
    private var bytes: [UInt8] = []
    /// About how many bytes of JSON the rows make (see ``RowCapturePlan/jsonCost``).
    private var estimate = 0
    /// Per row, its first slot.
    private var rowStarts: [Int] = []
    /// Where each run starts (a row index), and what its rows share.
    private var runs: [(firstRow: Int, layout: TableLayout, names: RowJSONNames, zonePart: [UInt8])] = []

    var rowCount: Int { rowStarts.count }
    /// Full by the JSON its rows will make, so that a table of many numeric fields makes
    /// batches no larger than one of long texts; or by its rows.
    var isFull: Bool { estimate >= RowBatch.targetBytes || rowStarts.count >= RowBatch.maximumRows }

    init() {
        slots.reserveCapacity(RowBatch.maximumRows * 24)
        bytes.reserveCapacity(RowBatch.targetBytes + (1 << 16))
        rowStarts.reserveCapacity(RowBatch.maximumRows)
    }

    /// Empties the batch, keeping its room.
    mutating func clear() {
        estimate = 0
        slots.removeAll(keepingCapacity: true)
        // After a batch of huge values, the buffer goes back to its usual size.
        if bytes.capacity > 4 * RowBatch.targetBytes {
            bytes = []
            bytes.reserveCapacity(RowBatch.targetBytes + (1 << 16))
        } else {
            bytes.removeAll(keepingCapacity: true)
        }
        rowStarts.removeAll(keepingCapacity: true)
        runs.removeAll(keepingCapacity: true)
    }

    /// The rows copied from here on are of `layout`'s table, in the zone `zonePart` names.
    mutating func startRun(layout: TableLayout, names: RowJSONNames, zonePart: [UInt8]) {
        runs.append((rowStarts.count, layout, names, zonePart))
    }

    /// Copies the statement's current row, each column read as `plan` says.
    mutating func copy(_ statement: PreparedStatement, plan: RowCapturePlan) {
        rowStarts.append(slots.count)
        let before = bytes.count
        var cost = 0
        defer { estimate += cost + (bytes.count - before) * 4 / 3 }
        let raw = statement.raw
        var index: Int32 = 0
        for read in plan.reads {
            defer { index += 1 }
            // One call into the statement per column, then the value's own accessors: each
            // sqlite3_column_ call looks the column up again and checks the connection's error
            // state on return, a third of this thread's time. (The value is only read here, on
            // the thread stepping the statement, before the next step.)
            let value = read == .skip ? nil : sqlite3_column_value(raw, index)
            let type = value.map { sqlite3_value_type($0) } ?? SQLITE_NULL
            guard let value, type != SQLITE_NULL else {
                slots.append(RowSlot(type: SQLITE_NULL, count: 0, value: 0))
                continue
            }
            cost += plan.jsonCost[Int(index)]
            // A NUMBER is read as what it holds, as ``RowJSON`` reads it.
            switch read == .number ? (type == SQLITE_INTEGER ? .int64 : .double) : read {
            case .int64:
                slots.append(RowSlot(type: type, count: 0, value: sqlite3_value_int64(value)))
            case .double, .number:
                slots.append(
                    RowSlot(type: type, count: 0, value: Int64(bitPattern: sqlite3_value_double(value).bitPattern)))
            case .skip:
                preconditionFailure("a skipped column is copied as NULL")
            case .text:
                // Text first, then its length in that encoding, as sqlite3_column_text's users do.
                let start = bytes.count
                if let text = sqlite3_value_text(value) {
                    let count = Int(sqlite3_value_bytes(value))
                    if count > 0 { bytes.append(contentsOf: UnsafeBufferPointer(start: text, count: count)) }
                }
                slots.append(RowSlot(type: type, count: Int32(bytes.count - start), value: Int64(start)))
            case .blob:
                let start = bytes.count
                if let pointer = sqlite3_value_blob(value) {
                    let count = Int(sqlite3_value_bytes(value))
                    if count > 0 { bytes.append(contentsOf: UnsafeRawBufferPointer(start: pointer, count: count)) }
                }
                slots.append(RowSlot(type: type, count: Int32(bytes.count - start), value: Int64(start)))
            }
        }
    }

    /// Each row, in order, by its number in the batch.
    func forEachRow(_ body: (Int, CopiedRow) throws -> Void) rethrows {
        try slots.withUnsafeBufferPointer { slots in
            try bytes.withUnsafeBufferPointer { bytes in
                for row in rowStarts.indices {
                    try body(row, CopiedRow(slots: slots.baseAddress! + rowStarts[row], bytes: bytes))
                }
            }
        }
    }

    /// Each row as a line of canonical JSON.
    func appendJSONLines(to out: inout JSONWriter) throws {
        try slots.withUnsafeBufferPointer { slots in
            try bytes.withUnsafeBufferPointer { bytes in
                for (number, run) in runs.enumerated() {
                    let end = number + 1 < runs.count ? runs[number + 1].firstRow : rowStarts.count
                    for row in run.firstRow..<end {
                        let copied = CopiedRow(slots: slots.baseAddress! + rowStarts[row], bytes: bytes)
                        try RowJSON.append(
                            copied, layout: run.layout, names: run.names, zonePart: run.zonePart, to: &out)
                        out.byte(0x0A)
                    }
                }
            }
        }
    }
}

/// A row of a ``RowBatch``, read as the statement it was copied from would be.
struct CopiedRow: RowColumns {
    let slots: UnsafePointer<RowSlot>
    let bytes: UnsafeBufferPointer<UInt8>

    @inline(__always) func isNull(_ index: Int32) -> Bool { slots[Int(index)].type == SQLITE_NULL }
    @inline(__always) func columnType(_ index: Int32) -> Int32 { slots[Int(index)].type }
    @inline(__always) func int64(_ index: Int32) -> Int64 { slots[Int(index)].value }
    @inline(__always) func double(_ index: Int32) -> Double {
        Double(bitPattern: UInt64(bitPattern: slots[Int(index)].value))
    }
    @inline(__always) func textBytes(_ index: Int32) -> UnsafeBufferPointer<UInt8> {
        let slot = slots[Int(index)]
        guard slot.count > 0 else { return UnsafeBufferPointer(start: nil, count: 0) }
        return UnsafeBufferPointer(rebasing: bytes[Int(slot.value)..<Int(slot.value) + Int(slot.count)])
    }
    @inline(__always) func blob(_ index: Int32) -> [UInt8] { Array(textBytes(index)) }
}
