import Foundation
import Testing

@testable import Records

@Suite("Timestamps")
struct TimestampTests {
    @Test(
        "format and parse round trip, before 1970 and far from it",
        arguments: [
            Int64(0), 1_768_208_400_000, -1, -236_131_200_000, -62_135_596_800_000, 253_402_300_799_999,
            951_782_400_000, Int64.min, Int64.max, -1_000_000_000_000_001,
        ])
    func roundTrip(ms: Int64) throws {
        let text = ISO8601.format(milliseconds: ms)
        #expect(ISO8601.parse(text) == ms, "\(text)")
    }

    @Test("known instants")
    func known() {
        #expect(ISO8601.format(milliseconds: 1_768_208_400_000) == "2026-01-12T09:00:00.000Z")
        #expect(ISO8601.format(milliseconds: -1) == "1969-12-31T23:59:59.999Z")
        #expect(ISO8601.format(milliseconds: 951_782_400_000) == "2000-02-29T00:00:00.000Z")
        #expect(ISO8601.format(milliseconds: -62_167_219_200_000) == "0000-01-01T00:00:00.000Z")
        #expect(ISO8601.format(milliseconds: -62_167_219_200_001) == "-0001-12-31T23:59:59.999Z")
        #expect(ISO8601.format(milliseconds: 1_768_208_400_000, offsetSeconds: 3600) == "2026-01-12T10:00:00.000+01:00")
    }

    @Test("the extremes and offsets, written exactly")
    func extremes() {
        // Int64's bounds as instants (the same text java.time gives for them).
        #expect(ISO8601.format(milliseconds: Int64.max) == "+292278994-08-17T07:12:55.807Z")
        #expect(ISO8601.format(milliseconds: Int64.min) == "-292275055-05-16T16:47:04.192Z")
        #expect(ISO8601.format(milliseconds: 253_402_300_799_999) == "9999-12-31T23:59:59.999Z")
        #expect(ISO8601.format(milliseconds: 253_402_300_800_000) == "+10000-01-01T00:00:00.000Z")
        #expect(
            ISO8601.format(milliseconds: 1_768_208_400_000, offsetSeconds: -19_800) == "2026-01-12T03:30:00.000-05:30")
        #expect(
            ISO8601.format(milliseconds: 1_768_208_400_007, offsetSeconds: 45_900) == "2026-01-12T21:45:00.007+12:45")
        var out: [UInt8] = Array("at ".utf8)
        ISO8601.append(milliseconds: 86_399_999, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == "at 1970-01-01T23:59:59.999Z")
    }

    @Test(
        "appendDigits: a magnitude's digits, at least as many as asked, after what is there",
        arguments: [
            (Int64(0), 0, "0"), (7, 1, "7"), (-42, 5, "00042"), (123_456, 3, "123456"), (1_000, 4, "1000"),
            (Int64.max, 0, "9223372036854775807"), (Int64.min, 0, "9223372036854775808"),
            (7, 25, String(repeating: "0", count: 24) + "7"),
        ])
    func digits(value: Int64, minWidth: Int, expected: String) {
        var out: [UInt8] = Array("n=".utf8)
        ISO8601.appendDigits(value, minWidth: minWidth, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == "n=" + expected)
        #expect(
            String(String(decoding: out.dropFirst(2), as: UTF8.self).drop { $0 == "0" })
                == (value == 0 ? "" : String(value.magnitude)))
    }

    @Test("agrees with Foundation's ISO 8601 formatter from 1600 to 9999")
    func foundation() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        // Whole seconds, so that Foundation's fraction (made from a Double, rounded or cut off
        // depending on the version) is exactly .000; a fixed sequence (SplitMix64), so that a
        // failure comes back. The milliseconds themselves are checked by `known` and `extremes`.
        var state: UInt64 = 0x2026_1128
        for _ in 0..<5_000 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            // 1600-01-01T00:00:00Z to 9999-12-31T23:59:59Z, in seconds.
            let seconds = -11_676_096_000 + Int64(z % 265_078_396_800)
            let expected = formatter.string(from: Date(timeIntervalSince1970: Double(seconds)))
            #expect(ISO8601.format(milliseconds: seconds * 1000) == expected, "\(seconds)")
        }
    }

    @Test("the forms people write")
    func forms() {
        #expect(ISO8601.parse("2026-01-12") == 1_768_176_000_000)
        #expect(ISO8601.parse("2026-01-12T09:00Z") == 1_768_208_400_000)
        #expect(ISO8601.parse("2026-01-12 09:00") == 1_768_208_400_000)
        #expect(ISO8601.parse("2026-01-12T09:00:00.5Z") == 1_768_208_400_500)
        #expect(ISO8601.parse("2026-01-12T10:00:00+01:00") == 1_768_208_400_000)
        #expect(ISO8601.parse("2026-01-12T10:00:00+0100") == 1_768_208_400_000)
        #expect(ISO8601.parse("2026-01-12T09:00:00.123000Z") == 1_768_208_400_123)
        #expect(ISO8601.parse("2026-01-12T10:00", timeZone: TimeZone(identifier: "Europe/Berlin")) == 1_768_208_400_000)
        #expect(
            ISO8601.parse("2026-07-12T11:00", timeZone: TimeZone(identifier: "Europe/Berlin"))
                == ISO8601.parse("2026-07-12T09:00Z"))
    }

    @Test(
        "text that is not a timestamp",
        arguments: [
            "", "2026-13-01", "2026-02-30", "2025-02-29", "26-01-12", "2026-01-12T24:00", "2026-01-12T09:00:00.1234Z",
            "next tuesday", "2026-01-12T09:00:00Zjunk",
        ])
    func invalid(text: String) {
        #expect(ISO8601.parse(text) == nil)
    }
}

@Suite("JSON")
struct JSONTests {
    @Test("numbers keep their text; strings, escapes and surrogate pairs decode")
    func values() throws {
        let value = try JSONParser.parse(
            #"{"a": 9223372036854775807, "b": -0.0, "c": "tab\there \u00e9 \ud83d\ude00", "d": [true, false, null]}"#)
        guard case .object(let object) = value else {
            Issue.record("not an object")
            return
        }
        #expect(object["a"] == .number("9223372036854775807"))
        #expect(object["b"] == .number("-0.0"))
        #expect(object["c"] == .string("tab\there é 😀"))
        #expect(object["d"] == .array([.bool(true), .bool(false), .null]))
    }

    struct Bad: Sendable, CustomStringConvertible {
        var bytes: [UInt8]
        var offset: Int
        var message: String
        var description: String { message }
    }

    static let bad: [Bad] = [
        Bad(bytes: Array(#"{"a": 1, "a": 2}"#.utf8), offset: 9, message: "key \"a\" appears twice"),
        Bad(bytes: [0x22, 0x61, 0xFF, 0x22], offset: 2, message: "not valid UTF-8"),
        Bad(bytes: [0x22, 0xC0, 0xAF, 0x22], offset: 1, message: "not valid UTF-8"),
        Bad(bytes: [0x22, 0xED, 0xA0, 0x80, 0x22], offset: 1, message: "not valid UTF-8"),
        Bad(bytes: Array(#""\ud800""#.utf8), offset: 1, message: "half a surrogate pair"),
        Bad(bytes: Array("\"a\nb\"".utf8), offset: 2, message: "control character"),
        Bad(bytes: Array("[1, 2,]".utf8), offset: 6, message: "expected a value"),
        Bad(bytes: Array("01".utf8), offset: 1, message: "cannot start with 0"),
        Bad(bytes: Array("{\"a\": 1} x".utf8), offset: 9, message: "after the JSON value"),
        Bad(bytes: Array(String(repeating: "[", count: 600).utf8), offset: 512, message: "deeper than 512"),
    ]

    @Test("malformed JSON is refused at the right byte", arguments: bad)
    func malformed(_ bad: Bad) {
        #expect(throws: JSONSyntaxError.self) { try JSONParser.parse(bad.bytes) }
        do { _ = try JSONParser.parse(bad.bytes) } catch {
            #expect(error.offset == bad.offset, "\(error)")
            #expect(error.message.description.contains(bad.message), "\(error)")
        }
    }

    @Test("a path is located in the text")
    func locate() {
        let text = Array(#"{"fields": {"title": {"value": 5}}, "x": [0, {"y": 1}]}"#.utf8)
        text.withUnsafeBytes { raw in
            #expect(JSONParser.offset(of: [.key("fields"), .key("title"), .key("value")], in: raw) == 31)
            #expect(JSONParser.offset(of: [.key("x"), .index(1), .key("y")], in: raw) == 51)
            #expect(JSONParser.offset(of: [.key("nope")], in: raw) == nil)
        }
    }

    @Test("the writer escapes what JSON requires and nothing else")
    func writer() throws {
        var out = JSONWriter()
        out.string("quote \" backslash \\ newline \n control \u{01} emoji 😀 é")
        #expect(out.text == #""quote \" backslash \\ newline \n control \u0001 emoji 😀 é""#)
        #expect(try JSONParser.parse(out.bytes) == .string("quote \" backslash \\ newline \n control \u{01} emoji 😀 é"))
        for value in [Int64.min, Int64.max, 0, -7, 1_000_000] {
            var w = JSONWriter()
            w.int(value)
            #expect(w.text == String(value))
        }
    }

    @Test("Base64 both ways, padding optional, garbage refused")
    func base64() {
        for length in 0..<10 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
            let text = Base64.encode(bytes)
            #expect(Base64.decode(text) == bytes)
            #expect(text == Data(bytes).base64EncodedString())
        }
        #expect(Base64.decode("AQID") == [1, 2, 3])
        #expect(Base64.decode("AQ") == [1])
        #expect(Base64.decode("A") == nil)
        #expect(Base64.decode("AQ!D") == nil)
        #expect(Base64.decode("AR==") == nil)
    }
}

@Suite("Predicates")
struct PredicateTests {
    @Test("the CloudKit subset parses")
    func parses() throws {
        let predicate = try RecordPredicate.parse(
            "familyID == 'family-1' AND startDate >= 2026-03-01 AND isDeleted == false AND status IN ['a', \"b\"] AND recordName BEGINSWITH 'DailyEntry_' AND tags CONTAINS 'x' AND n < -1.5e3"
        )
        #expect(predicate.conditions.count == 7)
        #expect(
            predicate.conditions[0]
                == Condition(field: "familyID", op: .equal, value: .string("family-1"), fieldColumn: 1, valueColumn: 13)
        )
        #expect(predicate.conditions[1].value == .date("2026-03-01"))
        #expect(predicate.conditions[2].value == .bool(false))
        #expect(predicate.conditions[3].value == .list([.string("a"), .string("b")]))
        #expect(predicate.conditions[4].op == .beginsWith)
        #expect(predicate.conditions[5].op == .contains)
        #expect(predicate.conditions[6].value == .number("-1.5e3"))
        #expect(try RecordPredicate.parse("title == 'it''s'").conditions[0].value == .string("it's"))
        #expect(try RecordPredicate.parse("\"grant\" == 1").conditions[0].field == "grant")
    }

    @Test(
        "errors say where",
        arguments: [
            ("title == ", 10, "expected a value"),
            ("title = 'x' OR a = 1", 13, "OR is not supported"),
            ("title ~ 'x'", 7, "unexpected character '~'"),
            ("title 'x'", 7, "expected an operator"),
            ("status IN 'a'", 11, "IN needs a list"),
            ("title == 'open", 10, "not closed"),
            ("", 1, "empty"),
            ("a == 1 b == 2", 8, "expected AND"),
        ])
    func errors(text: String, column: Int, message: String) {
        do {
            _ = try RecordPredicate.parse(text)
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.column == column, "\(error)")
            #expect(error.message.description.contains(message), "\(error)")
        }
    }
}

@Suite("Record fields")
struct RecordFieldsTests {
    @Test(
        "fields set in any order are kept in UTF-8 byte order, found, replaced and removed; a name set twice is one field"
    )
    func sortedFields() {
        // Byte order, not Unicode's or the locale's: "Z" < "a" < "é" (C3 A9) < "ü" (C3 BC).
        let names = ["ü", "title", "a", "Z", "é", "startDate", "b", "aa", "", "title2"]
        var fields = RecordFields()
        for (index, name) in names.enumerated() { fields[name] = .int64(Int64(index)) }
        #expect(fields.names == ["", "Z", "a", "aa", "b", "startDate", "title", "title2", "é", "ü"])
        for (index, name) in names.enumerated() { #expect(fields[name] == .int64(Int64(index)), "\(name)") }
        #expect(fields["titl"] == nil && fields["zz"] == nil && fields["ü2"] == nil)
        fields["a"] = .string("again")
        #expect(fields.count == names.count && fields["a"] == .string("again"))
        #expect(!fields.insertNew("b", .int64(9)) && fields["b"] == .int64(6))
        #expect(fields.insertNew("ab", .int64(9)) && fields.names.prefix(5) == ["", "Z", "a", "aa", "ab"])
        #expect(fields.removeValue(forName: "aa") == .int64(7) && fields.removeValue(forName: "aa") == nil)
        fields["Z"] = nil
        fields["never"] = nil
        #expect(fields.names == ["", "a", "ab", "b", "startDate", "title", "title2", "é", "ü"])
        #expect(
            RecordFields(Dictionary(uniqueKeysWithValues: names.map { ($0, FieldValue.int64(0)) })).names
                == ["", "Z", "a", "aa", "b", "startDate", "title", "title2", "é", "ü"])
    }

    @Test("byte order of names, long and short, against the standard library's")
    func precedes() {
        let names = [
            "", "a", "A", "ab", "abc", "abcdefghijklmnop", "abcdefghijklmnoq", "abcdefghijklmnopq", "é", "e\u{301}",
            "ü", "z", "\u{1F600}",
        ]
        for a in names {
            for b in names {
                #expect(RecordFields.precedes(a, b) == a.utf8.lexicographicallyPrecedes(b.utf8), "\(a) < \(b)")
            }
        }
    }
}
