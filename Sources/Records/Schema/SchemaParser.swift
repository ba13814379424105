/// Reads CloudKit's schema language: the `DEFINE SCHEMA` text that `cktool export-schema` writes.
///
/// ```swift
/// let schema = try SchemaParser.parse(text, file: "schema.ckdb")
/// ```
///
/// The whole grammar is read: `CREATE ROLE`, `RECORD TYPE` with fields and `GRANT` lines mixed,
/// every field type (`LIST<…>`, `ENCRYPTED …`, `NUMBER PREFERRED AS …`), the index options,
/// quoted names and the three comment styles. Keywords are read in any case. After the syntax,
/// the meaning is checked (duplicate names, ENCRYPTED where CloudKit refuses it, indexes on
/// encrypted or unindexable fields, unknown roles); every problem is reported with its
/// line and column.
public struct SchemaParser {
    private var tokens: [SchemaToken]
    private var index = 0
    private var fieldPositions: [String: [String: TextPosition]] = [:]
    private var typePositions: [String: TextPosition] = [:]
    private var grantPositions: [(type: String, role: String, position: TextPosition)] = []
    private var rolePositions: [String: TextPosition] = [:]
    private var diagnostics: [SchemaDiagnostic] = []

    /// Parses and checks schema text. Warnings (ckport's advice on a schema CloudKit accepts)
    /// do not stop it; see ``check(_:file:)`` to read them.
    public static func parse(_ text: String, file: String? = nil) throws(SchemaError) -> Schema {
        try check(text, file: file).schema
    }

    /// Parses and checks schema text, and returns the schema with ckport's warnings about it.
    /// Throws only for what CloudKit's schema language refuses; the error lists the warnings
    /// too, in line order.
    public static func check(_ text: String, file: String? = nil) throws(SchemaError) -> (
        schema: Schema, warnings: [SchemaDiagnostic]
    ) {
        if !looksLikeSchema(text) {
            let position = firstSignificantPosition(text)
            var error = SchemaError(
                position,
                "a schema starts with 'DEFINE SCHEMA' (the text 'cktool export-schema' writes), found \(excerpt(text, at: position))"
            )
            error.file = file
            throw error
        }
        do {
            var lexer = SchemaLexer(text)
            var parser = SchemaParser(tokens: try lexer.tokenize())
            let schema = try parser.parseSchema()
            return (schema, parser.diagnostics.sortedByPosition())
        } catch {
            var error = error
            error.file = file
            throw error
        }
    }

    /// Whether `text` is schema-language text: its first word, after comments, is `DEFINE SCHEMA`.
    public static func looksLikeSchema(_ text: some StringProtocol) -> Bool {
        var lexer = SchemaLexer(String(text.prefix(16384)))
        guard let tokens = try? lexer.tokenize(limit: 2) else { return false }
        return tokens.count >= 2 && tokens[0].isKeyword("DEFINE") && tokens[1].isKeyword("SCHEMA")
    }

    /// Where the first character after whitespace and comments is.
    private static func firstSignificantPosition(_ text: String) -> TextPosition {
        var lexer = SchemaLexer(text)
        if let tokens = try? lexer.tokenize(limit: 1), let first = tokens.first { return first.position }
        var line = 1
        var column = 1
        for c in text.unicodeScalars {
            if c == "\n" {
                line += 1
                column = 1
            } else if c == " " || c == "\t" || c == "\r" {
                column += 1
            } else {
                break
            }
        }
        return TextPosition(line: line, column: column)
    }

    /// The start of what stands at `position` (the text the error's line and column point
    /// at, not the file's first line, which may be a comment).
    private static func excerpt(_ text: String, at position: TextPosition) -> String {
        guard !text.allSatisfy(\.isWhitespace) else { return "an empty file" }
        var lexer = SchemaLexer(text)
        if let tokens = try? lexer.tokenize(limit: 1), tokens.isEmpty { return "nothing but comments" }
        var line = 1
        var rest = Substring(text)
        while line < position.line, let newline = rest.firstIndex(of: "\n") {
            rest = rest[rest.index(after: newline)...]
            line += 1
        }
        let scalars = rest.unicodeScalars.dropFirst(position.column - 1)
        let found = String(String.UnicodeScalarView(scalars.prefix { $0 != "\n" && $0 != "\r" })).prefix(24)
        return found.isEmpty ? "nothing but comments" : "'" + found + "'"
    }

    private init(tokens: [SchemaToken]) {
        self.tokens = tokens
    }

    // MARK: Grammar

    private mutating func parseSchema() throws(SchemaError) -> Schema {
        try expectKeyword("DEFINE", "a schema starts with 'DEFINE SCHEMA'")
        try expectKeyword("SCHEMA", "a schema starts with 'DEFINE SCHEMA'")
        var schema = Schema()
        while !isAtEnd {
            if current.isKeyword("CREATE") {
                advance()
                try expectKeyword("ROLE", "expected 'ROLE' after 'CREATE'")
                let (role, position) = try parseName("a role name")
                if Names.implicitRoles.contains(role) {
                    report(position, "role '\(role)' is implicit in every schema and cannot be created")
                } else if rolePositions[role] != nil {
                    report(position, "role '\(role)' is created twice (first at \(rolePositions[role]!))")
                } else {
                    rolePositions[role] = position
                    schema.roles.append(role)
                }
            } else if current.isKeyword("RECORD") {
                advance()
                try expectKeyword("TYPE", "expected 'TYPE' after 'RECORD'")
                let namePosition = current.position
                let recordType = try parseRecordType()
                if schema.recordType(named: recordType.name) != nil {
                    report(
                        namePosition,
                        "record type '\(recordType.name)' is defined twice (first at \(typePositions[recordType.name]!))"
                    )
                } else {
                    schema.recordTypes.append(recordType)
                }
            } else {
                throw SchemaError(current.position, "expected 'RECORD TYPE' or 'CREATE ROLE', found \(current.display)")
            }
            try expectPunctuation(";", "expected ';' to end the statement")
        }
        checkGrants(schema)
        if diagnostics.contains(where: { $0.severity == .error }) {
            throw SchemaError(diagnostics: diagnostics.sortedByPosition())
        }
        return schema
    }

    private mutating func parseRecordType() throws(SchemaError) -> RecordTypeDefinition {
        let (name, namePosition) = try parseName("a record type name")
        if let problem = Names.recordTypeNameProblem(name) { report(namePosition, problem) }
        if typePositions[name] == nil { typePositions[name] = namePosition }
        var definition = RecordTypeDefinition(name: name)
        var declared: [String: TextPosition] = [:]
        try expectPunctuation("(", "expected '(' after the record type name")
        if case .punctuation(")") = current.kind {
            advance()
            return definition
        }
        repeat {
            if current.isKeyword("GRANT") {
                let grantPosition = current.position
                advance()
                var permissions: [Permission] = []
                repeat {
                    guard case .word(let word) = current.kind, let permission = Permission(rawValue: word.uppercased())
                    else {
                        throw SchemaError(current.position, "expected READ, CREATE or WRITE, found \(current.display)")
                    }
                    if permissions.contains(permission) {
                        report(current.position, "\(permission.rawValue) is granted twice in one GRANT")
                    }
                    permissions.append(permission)
                    advance()
                } while consumePunctuation(",")
                try expectKeyword("TO", "expected ',' or 'TO' after the permissions of a GRANT")
                let (role, _) = try parseName("a role name")
                definition.grants.append(Grant(permissions, to: role))
                grantPositions.append((name, role, grantPosition))
            } else {
                let (fieldName, fieldPosition) = try parseName("a field name or GRANT")
                let type = try parseFieldType()
                var options: FieldOptions = []
                while case .word(let word) = current.kind, let option = Self.option(word) {
                    if options.contains(option) {
                        report(current.position, "option \(word.uppercased()) is given twice")
                    }
                    options.insert(option)
                    advance()
                }
                let field = FieldDefinition(name: fieldName, type: type, options: options)
                check(field, at: fieldPosition, in: name)
                if let first = declared[fieldName] {
                    report(fieldPosition, "field '\(fieldName)' is declared twice in '\(name)' (first at \(first))")
                } else {
                    declared[fieldName] = fieldPosition
                    if let index = definition.fields.firstIndex(where: { $0.name == fieldName }) {
                        definition.fields[index] = field
                    } else {
                        definition.fields.append(field)
                    }
                }
            }
        } while consumePunctuation(",")
        if case .punctuation(")") = current.kind {
            advance()
        } else if case .word = current.kind {
            throw SchemaError(
                current.position, "expected ',' or ')' after a field, found \(current.display) (is a comma missing?)")
        } else {
            throw SchemaError(
                current.position, "expected ',' or ')' in record type '\(name)', found \(current.display)")
        }
        fieldPositions[name] = declared
        return definition
    }

    private static func option(_ word: String) -> FieldOptions? {
        switch word.uppercased() {
        case "QUERYABLE": return .queryable
        case "SORTABLE": return .sortable
        case "SEARCHABLE": return .searchable
        default: return nil
        }
    }

    private static let typeNames =
        "ASSET, BYTES, DOUBLE, INT64, LOCATION, NUMBER, REFERENCE, STRING, TIMESTAMP or LIST<…>"

    private mutating func parseFieldType() throws(SchemaError) -> FieldType {
        if current.isKeyword("LIST") {
            advance()
            try expectPunctuation("<", "expected '<' after LIST")
            if current.isKeyword("LIST") {
                throw SchemaError(current.position, "a LIST cannot hold another LIST")
            }
            var element = try parsePrimitiveType()
            try expectPunctuation(">", "expected '>' to close LIST<…>")
            element.isList = true
            return element
        }
        return try parsePrimitiveType()
    }

    private mutating func parsePrimitiveType() throws(SchemaError) -> FieldType {
        var encrypted = false
        if current.isKeyword("ENCRYPTED") {
            encrypted = true
            advance()
        }
        let position = current.position
        guard case .word(let word) = current.kind, let primitive = PrimitiveType(rawValue: word.uppercased()) else {
            throw SchemaError(
                current.position,
                "expected a field type (\(encrypted ? "BYTES, DOUBLE, INT64, LOCATION, STRING or TIMESTAMP" : Self.typeNames)), found \(current.display)"
            )
        }
        advance()
        if encrypted && !primitive.canBeEncrypted {
            let why: String
            switch primitive {
            case .reference: why = "REFERENCE fields stay readable so that CloudKit can follow them"
            case .asset: why = "ASSET files are always encrypted already"
            default: why = "only BYTES, STRING, DOUBLE, INT64, LOCATION and TIMESTAMP can be"
            }
            report(position, "\(primitive.rawValue) cannot be ENCRYPTED: \(why)")
        }
        var type = FieldType(primitive, encrypted: encrypted)
        if primitive == .number && current.isKeyword("PREFERRED") {
            advance()
            try expectKeyword("AS", "expected 'AS' after 'PREFERRED'")
            guard case .word(let word) = current.kind, let preference = NumberPreference(rawValue: word.uppercased())
            else {
                throw SchemaError(
                    current.position, "expected INT64 or DOUBLE after 'PREFERRED AS', found \(current.display)")
            }
            advance()
            type.numberPreference = preference
        }
        return type
    }

    // MARK: Meaning

    private mutating func check(_ field: FieldDefinition, at position: TextPosition, in typeName: String) {
        if field.isSystem {
            guard let system = Names.systemFields.first(where: { $0.name == field.name }) else {
                report(
                    position,
                    "'\(field.name)' is not a CloudKit system field (those are \(Names.systemFields.map(\.name).joined(separator: ", "))); names starting with '___' are reserved"
                )
                return
            }
            if field.type != FieldType(system.type) {
                report(position, "system field '\(field.name)' is \(system.type.rawValue), not \(field.type)")
            }
        } else if let problem = Names.fieldNameProblem(field.name, recordType: typeName) {
            report(position, problem)
        } else if typeName == Names.shareType, let given = Names.shareFields.first(where: { $0.name == field.name }),
            field.type != FieldType(given.type)
        {
            report(
                position,
                "CloudKit's field '\(field.name)' of \(Names.shareType) is \(given.type.rawValue), not \(field.type)")
        }
        // Index options CloudKit accepts but cannot use are ckport's advice, not errors:
        // cktool exports them for Core Data's fields (BYTES QUERYABLE SORTABLE, say), so every
        // schema CloudKit wrote must still read.
        let options = field.options
        guard !options.isEmpty else { return }
        let given = options.names.joined(separator: " ")
        if field.type.isEncrypted {
            report(
                position,
                "field '\(field.name)' is ENCRYPTED with \(given): CloudKit cannot query, sort or search encrypted values, so the index only costs space",
                severity: .warning)
        } else if !field.type.primitive.canBeIndexed {
            report(
                position,
                "field '\(field.name)' is \(field.type) with \(given): CloudKit query predicates cannot compare \(field.type.primitive.rawValue) values, so the index only costs space",
                severity: .warning)
        } else if options.contains(.searchable) && field.type.primitive != .string {
            report(
                position,
                "field '\(field.name)' is \(field.type) with SEARCHABLE: CloudKit searches only STRING fields, so SEARCHABLE does nothing here",
                severity: .warning)
        }
    }

    private mutating func checkGrants(_ schema: Schema) {
        let known = Names.implicitRoles.union(schema.roles)
        for grant in grantPositions where !known.contains(grant.role) {
            report(
                grant.position,
                "GRANT in '\(grant.type)' names role '\(grant.role)', which is not created (add CREATE ROLE \(SchemaPrinter.quoteIfNeeded(grant.role)); or use _world, _icloud or _creator)"
            )
        }
    }

    // MARK: Tokens

    private var current: SchemaToken { tokens[index] }
    private var isAtEnd: Bool { current.kind == .end }

    private mutating func advance() {
        if index < tokens.count - 1 { index += 1 }
    }

    private mutating func report(
        _ position: TextPosition, _ message: String, severity: SchemaDiagnostic.Severity = .error
    ) {
        diagnostics.append(SchemaDiagnostic(position: position, message: message, severity: severity))
    }

    private mutating func expectKeyword(_ keyword: String, _ message: String) throws(SchemaError) {
        guard current.isKeyword(keyword) else {
            throw SchemaError(current.position, "\(message), found \(current.display)")
        }
        advance()
    }

    private mutating func expectPunctuation(_ mark: Character, _ message: String) throws(SchemaError) {
        guard consumePunctuation(mark) else {
            throw SchemaError(current.position, "\(message), found \(current.display)")
        }
    }

    private mutating func consumePunctuation(_ mark: Character) -> Bool {
        if case .punctuation(let c) = current.kind, c == mark {
            advance()
            return true
        }
        return false
    }

    private mutating func parseName(_ what: String) throws(SchemaError) -> (String, TextPosition) {
        let position = current.position
        switch current.kind {
        case .word(let word):
            if word.uppercased() == "GRANT" && what != "a role name" {
                throw SchemaError(
                    position, "expected \(what), found the keyword GRANT (quote a field named grant: \"grant\")")
            }
            advance()
            return (word, position)
        case .quoted(let name):
            advance()
            return (name, position)
        default:
            throw SchemaError(position, "expected \(what), found \(current.display)")
        }
    }
}

extension Array where Element == SchemaDiagnostic {
    func sortedByPosition() -> [SchemaDiagnostic] {
        sorted { ($0.position.line, $0.position.column) < ($1.position.line, $1.position.column) }
    }
}
