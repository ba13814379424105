import Foundation
import Records
import Testing

@testable import Formats

/// JSON documents that RFC 8259 refuses, and ones it allows, placed in every position a record
/// file has: a field's value, a member of a record, a member of the top-level object beside
/// "records" (before and after it), an element of a bare array, and a JSON Lines line.
private enum JSONCorpus {
    static let schema = try! SchemaParser.parse("DEFINE SCHEMA RECORD TYPE Folder (name STRING);")

    /// Fragments that are not JSON, each with why.
    static let invalid: [(String, String)] = [
        ("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("01", "leading zero"),
        ("1.", "a point without digits"),
        (".5", "no digit before the point"), ("1e", "an exponent without digits"), ("+1", "a plus sign"),
        ("tru", "a cut word"),
        ("nul", "a cut null"), ("\"a\tb\"", "a raw tab"), ("\"a\u{1}b\"", "a raw control character"),
        (#""\x""#, "an unknown escape"),
        (#""\u12G4""#, "a bad \\u escape"), ("[1,]", "a trailing comma in an array"),
        (#"{"a":1,}"#, "a trailing comma in an object"),
        (#"{"a" 1}"#, "a missing colon"), ("{a:1}", "an unquoted key"), ("'single'", "single quotes"),
        ("/*c*/1", "a block comment"),
        ("// c\n1", "a line comment"), ("[1 2]", "a missing comma"),
        (#"{"a":1 "b":2}"#, "a missing comma between members"),
        (#""unterminated"#, "an unclosed string"), ("[", "an unclosed array"),
    ]
    /// The same, as raw bytes for the ones Swift strings cannot carry.
    static let invalidBytes: [([UInt8], String)] = [
        ([0x22, 0xFF, 0x22], "0xFF"), ([0x22, 0xC0, 0x80, 0x22], "an overlong encoding"),
        ([0x22, 0xED, 0xA0, 0x80, 0x22], "a UTF-8 surrogate"),
        ([0x22, 0xE2, 0x82, 0x22], "a cut sequence"),
    ]
    /// Fragments that are JSON.
    static let valid = [
        "null", "true", "false", "-0", "1.5e-3", "0", "-12.25E+2", #""é\u00e9\n\"\\\/""#, "[]", "{}",
        #"[{"a":[1,{"b":null}]},"x"]"#, #""\ud83d\ude00""#, #"{"":""}"#,
    ]

    static let record = #"{"recordName":"f1","recordType":"Folder","fields":{"name":{"value":"Home"}}}"#

    /// Every placement of a fragment: (file extension, bytes, whether a valid fragment there
    /// still makes a valid record file).
    static func placements(_ x: [UInt8]) -> [(String, String, [UInt8], Bool)] {
        func b(_ s: String) -> [UInt8] { Array(s.utf8) }
        return [
            (
                "field value", "json",
                b(#"{"records":[{"recordName":"f1","recordType":"Folder","fields":{"name":{"value":"#) + x + b("}}}]}"),
                false
            ),
            (
                "record member", "json",
                b(#"{"records":[{"recordName":"f1","recordType":"Folder","extra":"#) + x
                    + b(#","fields":{"name":{"value":"Home"}}}]}"#), false
            ),
            (
                "top level, before", "json", b(#"{"continuationMarker":"#) + x + b(#","records":["# + record + "]}"),
                true
            ),
            ("top level, after", "json", b(#"{"records":["# + record + #"],"syncToken":"#) + x + b("}"), true),
            ("array element", "json", b("[" + record + ",") + x + b("]"), false),
            (
                "JSON Lines field", "jsonl",
                b(#"{"recordName":"f1","recordType":"Folder","fields":{"name":{"value":"#) + x + b("}}}\n"), false
            ),
            (
                "JSON Lines member", "jsonl",
                b(#"{"recordName":"f1","recordType":"Folder","extra":"#) + x
                    + b(#","fields":{"name":{"value":"Home"}}}"# + "\n"), false
            ),
        ]
    }

    /// Reads a file to the end; every problem's text, whether thrown or reported per record.
    static func problems(_ bytes: [UInt8], ext: String) -> (records: Int, problems: [String]) {
        let scratch = Scratch()
        let path = scratch.path("doc.\(ext)")
        _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
        var records = 0
        var problems: [String] = []
        do {
            let reader = JSONRecordReader(
                input: try ByteInput(path: path), layout: ext == "json" ? .document : .lines,
                codec: JSONRecordCodec(schema: schema, defaultZone: .defaultZone))
            while let item = try reader.next() {
                switch item {
                case .record: records += 1
                case .invalid(let issue, _): problems.append(issue.description)
                case .asset: break
                }
            }
        } catch {
            problems.append("\(error)")
        }
        return (records, problems)
    }
}

@Suite("JSON conformance")
struct JSONConformanceTests {
    @Test(
        "every byte of a record file is JSON: invalid JSON is refused in every position, with 'not valid JSON', line and column"
    )
    func invalidEverywhere() {
        let fragments = JSONCorpus.invalid.map { (Array($0.0.utf8), $0.1) } + JSONCorpus.invalidBytes
        for (fragment, why) in fragments {
            for (place, ext, bytes, _) in JSONCorpus.placements(fragment) {
                let (_, problems) = JSONCorpus.problems(bytes, ext: ext)
                #expect(
                    problems.contains { $0.contains("not valid JSON") && $0.contains("doc.\(ext):1:") },
                    "\(why) as \(place): \(problems)")
            }
        }
    }

    @Test("valid JSON around the records is read, whatever it holds")
    func validAround() {
        for fragment in JSONCorpus.valid {
            for (place, ext, bytes, recordStaysValid) in JSONCorpus.placements(Array(fragment.utf8))
            where recordStaysValid {
                let (records, problems) = JSONCorpus.problems(bytes, ext: ext)
                #expect(records == 1 && problems.isEmpty, "\(fragment) as \(place): \(problems)")
            }
        }
    }

    @Test("a key given twice is refused in any object: the top level, beside the records, a record, its fields")
    func duplicateKeys() {
        let r = JSONCorpus.record
        let documents: [(String, String)] = [
            ("json", #"{"records":["# + r + #"],"records":["# + r + "]}"),
            ("json", #"{"moreComing":false,"records":["# + r + #"],"moreComing":true}"#),
            ("json", #"{"syncToken":{"a":1,"a":2},"records":["# + r + "]}"),
            ("json", #"{"records":[{"recordName":"f1","recordName":"f2","recordType":"Folder","fields":{}}]}"#),
            (
                "jsonl",
                #"{"recordName":"f1","recordType":"Folder","fields":{"name":{"value":"A"},"name":{"value":"B"}}}"#
                    + "\n"
            ),
            ("jsonl", #"{"recordName":"f1","recordType":"Folder","name":"A","name":"B"}"# + "\n"),
        ]
        for (ext, text) in documents {
            let (_, problems) = JSONCorpus.problems(Array(text.utf8), ext: ext)
            #expect(problems.contains { $0.contains("appears twice") }, "\(text): \(problems)")
        }
    }
}
