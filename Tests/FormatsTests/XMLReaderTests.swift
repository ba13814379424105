import Formats
import Foundation
import TestSupport
import Testing

@Suite("XML reader (libxml2)")
struct XMLReaderTests {
    func events(_ text: String, limits: XMLReader.Limits = XMLReader.Limits()) throws -> [XMLReader.Event] {
        let reader = try XMLReader(bytes: Array(text.utf8), name: "test.xml", limits: limits)
        var all: [XMLReader.Event] = []
        while let event = try reader.next() { all.append(event) }
        return all
    }

    func refusal(_ text: String, limits: XMLReader.Limits = XMLReader.Limits()) -> XMLInputError? {
        do {
            _ = try events(text, limits: limits)
            return nil
        } catch let error as XMLInputError {
            return error
        } catch {
            Issue.record("not an XMLInputError: \(error)")
            return nil
        }
    }

    @Test(
        "elements, attributes in order, self-closing elements, text, CDATA and XML's own entities; whitespace between elements left out"
    )
    func reading() throws {
        let text = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
                <entity name="Chore" representedClassName="Chore">
                    <attribute name="title" optional="YES" attributeType="String"/>
                </entity>
                <note>Tom &amp; Ana &lt;3 <![CDATA[<raw> & all]]></note>
            </model>
            """
        #expect(
            try events(text) == [
                .start(
                    "model",
                    attributes: [
                        .init("type", "com.apple.IDECoreDataModeler.DataModel"), .init("documentVersion", "1.0"),
                    ]),
                .start("entity", attributes: [.init("name", "Chore"), .init("representedClassName", "Chore")]),
                .start(
                    "attribute",
                    attributes: [.init("name", "title"), .init("optional", "YES"), .init("attributeType", "String")]),
                .end("attribute"),
                .end("entity"),
                .start("note", attributes: []),
                .text("Tom & Ana <3 <raw> & all"),
                .end("note"),
                .end("model"),
            ])
    }

    @Test("a document that is not well-formed: the file, the line and libxml2's reason")
    func malformed() throws {
        let error = try #require(refusal("<model>\n  <entity name=\"A\">\n  </model>\n"))
        #expect(error.file == "test.xml" && error.line == 3, "\(error)")
        #expect(error.description.hasPrefix("test.xml:3:"), "\(error)")
    }

    @Test("an external entity (XXE) is refused and the file it names is never read")
    func externalEntity() throws {
        let secret = Scratch()
        try "TOP SECRET".write(toFile: secret.path("secret.txt"), atomically: true, encoding: .utf8)
        let text = """
            <?xml version="1.0"?>
            <!DOCTYPE model [
              <!ENTITY leak SYSTEM "file://\(secret.path("secret.txt"))">
            ]>
            <model>&leak;</model>
            """
        let error = try #require(refusal(text))
        #expect(error.message.description.contains("declares entities") && error.line == 2, "\(error)")
        // Without its declaration, the reference is refused too, never read or expanded.
        let undeclared = try #require(refusal("<model>&leak;</model>"))
        #expect(!undeclared.description.contains("TOP SECRET"), "\(undeclared)")
    }

    @Test("a billion laughs is refused at once, without expanding anything")
    func billionLaughs() throws {
        var text = "<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n <!ENTITY lol \"lol\">\n"
        for level in 1...9 {
            text +=
                " <!ENTITY lol\(level) \"" + String(repeating: "&lol\(level == 1 ? "" : String(level - 1));", count: 10)
                + "\">\n"
        }
        text += "]>\n<lolz>&lol9;</lolz>\n"
        let error = try #require(refusal(text))
        #expect(error.message.description.contains("declares entities"), "\(error)")
        // Refused at the declarations (lines 2 to 12), before the reference that would expand
        // them (line 13) is reached.
        #expect(error.line >= 2 && error.line < 13, "line \(error.line)")
    }

    @Test("an entity reference the document did not declare is refused with its position")
    func undeclaredEntity() throws {
        let error = try #require(refusal("<model>\n<note>&copy;</note>\n</model>"))
        #expect(error.line == 2, "\(error)")
    }

    @Test("limits: nesting depth, input size and text size, each refused with where")
    func limits() throws {
        let deep = String(repeating: "<a>", count: 40) + String(repeating: "</a>", count: 40)
        #expect(try events(deep, limits: XMLReader.Limits(depth: 40)).count == 80)
        let tooDeep = try #require(refusal(deep, limits: XMLReader.Limits(depth: 39)))
        #expect(tooDeep.message.description.contains("nested more than 39 deep") && tooDeep.line == 1, "\(tooDeep)")
        let big = "<a>" + String(repeating: "x", count: 5000) + "</a>"
        #expect(
            refusal(big, limits: XMLReader.Limits(bytes: 1000))?.message.description.contains("limited to 1000 bytes")
                == true)
        #expect(
            refusal(big, limits: XMLReader.Limits(textBytes: 4000))?.message.description.contains(
                "limited to 4000 bytes") == true)
        #expect(try events(big, limits: XMLReader.Limits(textBytes: 5000)).count == 3)
    }

    @Test("a file is read in a stream: a large document of many elements, memory bounded")
    func file() throws {
        let scratch = Scratch()
        var text = "<?xml version=\"1.0\"?>\n<records>\n"
        for index in 0..<20_000 { text += "  <record name=\"r-\(index)\"><title>Task \(index)</title></record>\n" }
        text += "</records>\n"
        try text.write(toFile: scratch.path("many.xml"), atomically: true, encoding: .utf8)
        let reader = try XMLReader(path: scratch.path("many.xml"))
        var starts = 0
        var texts = 0
        var last: String?
        while let event = try reader.next() {
            switch event {
            case .start(let name, let attributes) where name == "record":
                starts += 1
                last = attributes.first?.value
            case .text: texts += 1
            default: break
            }
        }
        #expect(starts == 20_000 && texts == 20_000 && last == "r-19999")
        #expect(throws: XMLInputError.self) { try XMLReader(path: scratch.path("missing.xml")) }
    }
}
