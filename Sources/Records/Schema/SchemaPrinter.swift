import Foundation

/// Writes a schema in the layout `cktool export-schema` uses.
///
/// Roles come first, one line each in the order they were created (the order a schema file
/// gives them, which CloudKit does not sort), then record types sorted by name, each indented
/// four spaces with its fields indented eight, all of them (the six system fields too) sorted
/// by the bytes of their names as cktool sorts them — so `CD_` fields come before
/// `"___createTime"`, and lower-case names after it — the type column aligned one space after
/// the longest name, options in QUERYABLE SEARCHABLE SORTABLE order, and grants last, one per
/// role, sorted by role. A blank line comes before the roles and before each record type.
/// Names that start with `_`, are keywords or are not plain identifiers are double-quoted.
public enum SchemaPrinter {
    public static func print(_ schema: Schema) -> String {
        var out = "DEFINE SCHEMA\n"
        if !schema.roles.isEmpty {
            out += "\n" + schema.roles.map { "    CREATE ROLE \(quoteIfNeeded($0));\n" }.joined()
        }
        for type in schema.recordTypes.sorted(by: { byteOrder($0.name, $1.name) }) {
            out += "\n" + print(type)
        }
        return out
    }

    /// A field as the schema language declares it: `STRING QUERYABLE SORTABLE`.
    public static func describe(_ field: FieldDefinition) -> String {
        ([field.type.description] + field.options.names).joined(separator: " ")
    }

    static func print(_ type: RecordTypeDefinition) -> String {
        let fields = type.fields.sorted { byteOrder($0.name, $1.name) }
        let width = fields.map { quoteIfNeeded($0.name).count }.max() ?? 0
        var lines: [String] = fields.map { field in
            let name = quoteIfNeeded(field.name)
            var line =
                "        " + name + String(repeating: " ", count: width - name.count + 1) + field.type.description
            for option in field.options.names { line += " " + option }
            return line
        }
        var permissionsByRole: [String: Set<Permission>] = [:]
        for grant in type.grants { permissionsByRole[grant.role, default: []].formUnion(grant.permissions) }
        for role in permissionsByRole.keys.sorted(by: byteOrder) {
            let permissions = Permission.allCases.filter { permissionsByRole[role]!.contains($0) }
            lines.append(
                "        GRANT \(permissions.map(\.rawValue).joined(separator: ", ")) TO \(quoteIfNeeded(role))")
        }
        return "    RECORD TYPE \(quoteIfNeeded(type.name)) (\n" + lines.joined(separator: ",\n") + "\n    );\n"
    }

    /// Names that must be quoted to be read as names: GRANT starts a grant where a field could
    /// start. Other keywords are unambiguous where names stand, and cktool leaves them bare.
    static let keywords: Set<String> = ["GRANT"]

    /// `name` as it must appear in schema text.
    public static func quoteIfNeeded(_ name: String) -> String {
        let bytes = Array(name.utf8)
        let plain =
            !bytes.isEmpty && Names.isLetter(bytes[0])
            && bytes.allSatisfy { Names.isLetter($0) || Names.isDigit($0) || $0 == UInt8(ascii: "_") }
        if plain && !keywords.contains(name.uppercased()) { return name }
        return "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    static func byteOrder(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }
}
