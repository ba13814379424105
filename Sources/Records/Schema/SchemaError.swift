/// One problem in schema-language text, at a line and column.
public struct SchemaDiagnostic: Hashable, Sendable, CustomStringConvertible {
    /// An error is something CloudKit's schema language refuses; a warning is ckport's advice
    /// about a schema CloudKit accepts (an index CloudKit cannot use, say).
    public enum Severity: String, Sendable, Hashable {
        case error, warning
    }

    public var position: TextPosition
    public var message: String
    public var severity: Severity

    public init(position: TextPosition, message: String, severity: Severity = .error) {
        self.position = position
        self.message = message
        self.severity = severity
    }

    public var description: String { "\(position): " + (severity == .warning ? "warning: " : "") + message }
}

/// Schema-language text that cannot be read or does not make a valid CloudKit schema.
public struct SchemaError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

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

    /// The diagnostics that are errors (a schema with only warnings parses).
    public var errors: [SchemaDiagnostic] { diagnostics.filter { $0.severity == .error } }
}
