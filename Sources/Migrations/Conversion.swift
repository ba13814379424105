import Foundation
import Records

extension Conversion {
    /// The converted value (nil: no value), or a reason it does not convert when `onError`
    /// says the record fails.
    ///
    /// Built in: INT64 ⇄ STRING, INT64 ⇄ DOUBLE (a DOUBLE only when it is whole), STRING →
    /// TIMESTAMP (ISO 8601), TIMESTAMP → STRING (ISO 8601, UTC), DOUBLE ⇄ STRING, INT64 ⇄
    /// TIMESTAMP (milliseconds). A `map` is looked up by the value's text first.
    public func apply(_ value: FieldValue?) -> Result<FieldValue?, ConversionProblem> {
        guard let value else { return .success(defaultValue) }
        let converted: Result<FieldValue, ConversionProblem>
        if let map {
            let key = Conversion.keyText(value)
            if let mapped = map[key] {
                converted = .success(mapped)
            } else {
                converted = .failure(
                    ConversionProblem(
                        "\(Conversion.describe(value)) is not in the map (it has \(map.keys.sorted().joined(separator: ", ")))"
                    ))
            }
        } else {
            converted = Conversion.builtIn(value, to: to)
        }
        switch converted {
        case .success(let result): return .success(result)
        case .failure(let problem):
            switch onError {
            case .fail: return .failure(problem)
            case .null: return .success(nil)
            case .useDefault: return .success(defaultValue)
            }
        }
    }

    static func keyText(_ value: FieldValue) -> String {
        switch value {
        case .string(let s): return s
        case .int64(let i): return String(i)
        case .double(let d): return d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
        case .timestamp(let t): return ISO8601.format(milliseconds: t)
        case .reference(let r): return r.recordName
        default: return FieldValueJSON.canonicalText(value)
        }
    }

    static func describe(_ value: FieldValue) -> String {
        switch value {
        case .string(let s): return "\"\(s.count > 40 ? String(s.prefix(37)) + "..." : s)\""
        default: return keyText(value)
        }
    }

    static func builtIn(_ value: FieldValue, to target: FieldType) -> Result<FieldValue, ConversionProblem> {
        func fail(_ message: String) -> Result<FieldValue, ConversionProblem> { .failure(ConversionProblem(message)) }
        if target.isList {
            guard case .list = value, value.type.primitive == target.primitive else {
                return fail("\(value.type) does not convert to \(target)")
            }
            return .success(value)
        }
        switch (value, target.primitive) {
        case (.string, .string), (.int64, .int64), (.double, .double), (.timestamp, .timestamp), (.bytes, .bytes),
            (.reference, .reference), (.asset, .asset), (.location, .location):
            return .success(value)
        case (.int64(let i), .string): return .success(.string(String(i)))
        case (.int64(let i), .double): return .success(.double(Double(i)))
        case (.int64(let i), .timestamp): return .success(.timestamp(i))
        case (.timestamp(let t), .int64): return .success(.int64(t))
        case (.double(let d), .int64):
            guard d == d.rounded(), abs(d) < 9.2e18 else { return fail("\(d) is not a whole number") }
            return .success(.int64(Int64(d)))
        case (.double(let d), .string): return .success(.string(keyText(.double(d))))
        case (.string(let s), .int64):
            guard let i = Int64(s.trimmingCharacters(in: .whitespaces)) else {
                return fail("\(describe(value)) is not a whole number")
            }
            return .success(.int64(i))
        case (.string(let s), .double):
            guard let d = Double(s.trimmingCharacters(in: .whitespaces)) else {
                return fail("\(describe(value)) is not a number")
            }
            return .success(.double(d))
        case (.string(let s), .timestamp):
            guard let t = ISO8601.parse(s.trimmingCharacters(in: .whitespaces)) else {
                return fail("\(describe(value)) is not an ISO 8601 time")
            }
            return .success(.timestamp(t))
        case (.timestamp(let t), .string): return .success(.string(ISO8601.format(milliseconds: t)))
        default:
            return fail(
                "there is no built-in conversion from \(value.type) to \(target) (give a map, or a custom step)")
        }
    }
}

/// Why a value does not convert.
public struct ConversionProblem: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
