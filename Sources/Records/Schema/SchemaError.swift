/// One problem in schema-language text, at a line and column.
public struct SchemaDiagnostic: Hashable, Sendable, CustomStringConvertible {
    public var position: TextPosition
    public var message: String

    public var description: String { "\(position): \(message)" }
}

/// Schema-language text that cannot be read or does not make a valid CloudKit schema.
public struct SchemaError: Error, Sendable, CustomStringConvertible {
    /// The file the text came from, when known.
    public var file: String?
    public var diagnostics: [SchemaDiagnostic]

    init(_ position: TextPosition, _ message: String) {
        diagnostics = [SchemaDiagnostic(position: position, message: message)]
    }

    init(diagnostics: [SchemaDiagnostic]) {
        self.diagnostics = diagnostics
    }

    public var description: String {
        diagnostics.map { "\(file.map { $0 + ":" } ?? "")\($0)" }.joined(separator: "\n")
    }
}
