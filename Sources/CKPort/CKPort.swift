// The library's front door. `import CKPort` brings the operations of this module — import,
// export, backup, verify, restore, calendar import and export, migrations — and the modules
// they are built on: records and schemas (Records), the store protocols (StoreCore) and the SQLite store (SQLiteStore), readers and writers
// (Formats) and the migration engine (Migrations).
@_exported import Formats
@_exported import Migrations
@_exported import Records
@_exported import SQLiteStore
@_exported import StoreCore
