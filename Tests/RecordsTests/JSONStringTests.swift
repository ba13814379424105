import SampleApps
import Testing

@testable import Records

@Suite("JSON strings")
struct JSONStringTests {
    static let pieces = [
        "a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{01}", "é", "ü", "🥑", "日", "\u{7F}", "\u{2028}", "abcdefgh",
        "12345678",
    ]

    @Test(
        "every length around the eight-byte steps, with quotes, escapes, controls and non-ASCII anywhere, reads back unchanged"
    )
    func roundTrip() throws {
        // Seeded, so a failure names a case that can be run again.
        var generator = SeededRandom(state: 7)
        for length in 0..<40 {
            for _ in 0..<25 {
                var text = ""
                for _ in 0..<length { text += JSONStringTests.pieces[generator.below(JSONStringTests.pieces.count)] }
                var writer = JSONWriter()
                writer.string(text)
                let parsed = try JSONParser.parse(writer.bytes)
                #expect(parsed == .string(text), "length \(length): \(writer.text)")
            }
        }
    }

    @Test("a byte that is not UTF-8 is refused wherever it stands, inside or after an ASCII run")
    func invalidUTF8() throws {
        for length in 1..<24 {
            for position in 0..<length {
                for bad: [UInt8] in [[0xFF], [0xC3], [0xE2, 0x82], [0xED, 0xA0, 0x80], [0x80]] {
                    var content = [UInt8](repeating: UInt8(ascii: "x"), count: length)
                    content.replaceSubrange(position..<position + 1, with: bad)
                    let document = [UInt8(ascii: "\"")] + content + [UInt8(ascii: "\"")]
                    #expect(throws: JSONSyntaxError.self, "length \(length), position \(position), bytes \(bad)") {
                        try JSONParser.parse(document)
                    }
                }
            }
        }
    }

    @Test("a raw control character inside a long ASCII run is refused")
    func rawControl() throws {
        for position in 0..<20 {
            var content = [UInt8](repeating: UInt8(ascii: "y"), count: 20)
            content[position] = 0x0A
            #expect(throws: JSONSyntaxError.self) {
                try JSONParser.parse([UInt8(ascii: "\"")] + content + [UInt8(ascii: "\"")])
            }
        }
    }
}
