import Foundation
import Records

/// How one record type lives in PostgreSQL: a table named after the type (in the store's
/// schema), keyed by zone and record name, with the system fields in CloudKit's `___` names
/// and one typed column per field, so that other services can query the mirror with plain SQL.
///
/// | field type          | column                                                          |
/// |---------------------|-----------------------------------------------------------------|
/// | STRING              | text (collation "C": compared and sorted by bytes, as SQLite)    |
/// | INT64               | bigint                                                          |
/// | TIMESTAMP           | timestamptz (CloudKit's milliseconds fit its microseconds)      |
/// | DOUBLE              | double precision (keeps -0.0, NaN and the infinities)           |
/// | NUMBER              | numeric (keeps 3 and 3.0 apart, as the SQLite store does)       |
/// | BYTES               | bytea                                                           |
/// | REFERENCE           | text (the target's record name) + `field:action` smallint       |
/// | ASSET, LOCATION     | jsonb (the Web Services value: `->>'latitude'` works in SQL)    |
/// | LIST<…>             | jsonb                                                           |
///
/// Lists are jsonb rather than arrays: one representation for every element type (a list of
/// references or of locations has no array type of its own), element types kept as the JSON
/// has them, and containment (`@>`) and GIN indexes for queries.
///
/// PostgreSQL names hold at most 63 bytes; a longer CloudKit name becomes its first 50 bytes, a
/// `~` and a hash of the whole, the same in every process.
struct PostgresLayout {
    let type: RecordTypeDefinition
    let schema: String

    /// The qualified table name.
    var table: String { "\(schema).\(PostgresLayout.identifier(type.name))" }

    static let systemColumns: [(name: String, sqlType: String)] =
        [
            ("___zone", "bigint NOT NULL"), ("___recordID", "text COLLATE \"C\" NOT NULL"),
            ("___etag", "text COLLATE \"C\""),
            ("___createTime", "timestamptz"), ("___createdBy", "text COLLATE \"C\""),
            ("___createdDevice", "text COLLATE \"C\""),
            ("___modTime", "timestamptz"), ("___modifiedBy", "text COLLATE \"C\""),
            ("___modifiedDevice", "text COLLATE \"C\""),
        ] + linkColumns

    /// The system columns that store format 1 lacked; an upgrade adds them.
    static let linkColumns: [(name: String, sqlType: String)] = [
        ("___parent", "text COLLATE \"C\""), ("___share", "text COLLATE \"C\""), ("___shareDetails", "text"),
    ]

    /// The columns a row of ``PostgresLoad/appendRow(_:zone:fields:position:timestampsAsText:to:)``
    /// fills, in its order: the system columns, then each of `fields` (a reference's action after it).
    static func rowColumns(_ fields: [FieldDefinition]) -> [String] {
        var columns = systemColumns.map(\.name)
        for field in fields {
            columns.append(field.name)
            if field.type == .reference { columns.append(field.name + ":action") }
        }
        return columns
    }

    /// PostgreSQL's column type for a field.
    static func sqlType(_ type: FieldType) -> String {
        if type.isList { return "jsonb" }
        switch type.primitive {
        case .string: return "text"
        case .int64: return "bigint"
        case .timestamp: return "timestamptz"
        case .double: return "double precision"
        case .number: return "numeric"
        case .bytes: return "bytea"
        case .reference: return "text"
        case .asset, .location: return "jsonb"
        }
    }

    /// The column definitions one field takes (a reference also keeps its action). Text
    /// compares and sorts by its bytes (collation "C"), as SQLite's does, whatever the
    /// database's locale: exports come in the same order from both stores.
    static func columnDefinitions(_ field: FieldDefinition) -> [String] {
        let type = sqlType(field.type)
        var definitions = ["\(identifier(field.name)) \(type)\(type == "text" ? " COLLATE \"C\"" : "")"]
        if field.type == .reference { definitions.append("\(identifier(field.name + ":action")) smallint") }
        return definitions
    }

    /// How many columns a type takes (PostgreSQL allows 1,600 to a table).
    var columnCount: Int {
        PostgresLayout.systemColumns.count + type.userFields.reduce(0) { $0 + ($1.type == .reference ? 2 : 1) }
    }

    func createStatements() -> [String] {
        var definitions = PostgresLayout.systemColumns.map { "\(PostgresLayout.identifier($0.name)) \($0.sqlType)" }
        for field in type.userFields { definitions += PostgresLayout.columnDefinitions(field) }
        // Named where no type can take the name (types start with a letter): PostgreSQL's own
        // choice, "<table>_pkey", is the name of a table a type `Foo_pkey` would want.
        definitions.append(
            "CONSTRAINT \(PostgresLayout.primaryKeyName(type.name)) PRIMARY KEY (\"___zone\", \"___recordID\")")
        var statements = ["CREATE TABLE \(table) (\n  \(definitions.joined(separator: ",\n  "))\n)"]
        for field in type.userFields where PostgresLayout.needsIndex(field) {
            statements.append(PostgresLayout.indexStatement(schema: schema, type: type.name, field: field))
        }
        return statements
    }

    /// QUERYABLE and SORTABLE fields are indexed, and so is every single REFERENCE (CloudKit
    /// indexes those itself, and cascading deletes look them up): as in the SQLite store.
    static func needsIndex(_ field: FieldDefinition) -> Bool {
        field.options.needsIndex || field.type == .reference
    }

    /// The name of a type's primary key (and of its index).
    static func primaryKeyName(_ table: String) -> String {
        identifier("_ck_pkey " + table)
    }

    static func indexName(type: String, field: String) -> String {
        identifier("\(type).\(field)")
    }

    static func indexStatement(schema: String, type: String, field: FieldDefinition) -> String {
        let method = sqlType(field.type) == "jsonb" ? " USING gin" : ""
        return
            "CREATE INDEX \(indexName(type: type, field: field.name)) ON \(schema).\(identifier(type))\(method) (\(identifier(field.name)))"
    }

    /// A CloudKit name as a quoted PostgreSQL identifier, shortened to 63 bytes when longer.
    static func identifier(_ name: String) -> String {
        var text = name
        if name.utf8.count > 63 {
            var prefix = ""
            for character in name {
                if prefix.utf8.count + String(character).utf8.count > 50 { break }
                prefix.append(character)
            }
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in name.utf8 {
                hash ^= UInt64(byte)
                hash = hash &* 0x0000_0100_0000_01b3
            }
            text = prefix + "~" + String(hash & 0xffff_ffff_ffff, radix: 16)
        }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
