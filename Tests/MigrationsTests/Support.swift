import Formats
import Foundation
import Migrations
import Records
import SQLiteStore
import SampleApps
import StoreCore
@_exported import TestSupport

func record(_ name: String, _ type: String, _ fields: RecordFields) -> Record {
    Record(id: RecordID(recordName: name), recordType: type, fields: fields)
}

func everything(_ store: RecordStore) throws -> [Record] {
    try store.read { session in
        var all: [Record] = []
        try session.forEach(RecordQuery()) { all.append($0) }
        return all
    }
}

func stored(_ store: RecordStore, _ name: String, zone: ZoneID = .defaultZone) throws -> Record? {
    try store.read { try $0.record(RecordID(recordName: name, zone: zone)) }
}

/// The store's records as canonical JSON Lines, as `ckport export` writes them.
func exportText(_ store: RecordStore) throws -> String {
    var writer = JSONWriter()
    try store.read { session in
        let codec = JSONRecordCodec(schema: session.schema)
        try session.forEach(RecordQuery()) { record in
            codec.encode(record, style: .canonical, to: &writer)
            writer.byte(0x0A)
        }
    }
    return writer.text
}
