import CloudKitEmulator
import CloudKitWeb
import Foundation
import TestSupport
import Testing

/// The emulator answers the requests of Fixtures/reference-shapes.json with the keys CloudKit
/// Web Services documents, in order, as one signed-in user whose token turns over each time.
@Suite("the emulator against the reference's request and answer shapes")
struct ReferenceShapeTests {
    @Test("every exchange in the fixture: status, keys and values")
    func exchanges() async throws {
        let url = packageRoot.appendingPathComponent("Tests/CloudKitWebTests/Fixtures/reference-shapes.json")
        let fixture = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let exchanges = try #require(fixture["exchanges"] as? [[String: Any]])
        #expect(exchanges.count == 11)
        let emulator = CloudKitEmulator(container: "iCloud.com.example.Family")
        emulator.registerUser(apiToken: "api", webAuthToken: "web-0")
        let database = try CloudKitDatabase(
            container: "iCloud.com.example.Family", environment: .development, scope: .private)
        var token = "web-0"
        for exchange in exchanges {
            let name = exchange["name"] as! String
            let operation = exchange["operation"] as! String
            var body = Data()
            if let request = exchange["request"] as? [String: Any] {
                body = try JSONSerialization.data(withJSONObject: request)
            } else if exchange["request"] as? String == "201 operations" {
                let operations = (0..<201).map {
                    ["operationType": "create", "record": ["recordName": "r-\($0)", "recordType": "Chore"]]
                }
                body = try JSONSerialization.data(withJSONObject: [
                    "zoneID": ["zoneName": "Family"], "operations": operations,
                ])
            }
            let method = operation == "zones/list" ? "GET" : "POST"
            let address = database.url(
                operation,
                query: [
                    URLQueryItem(name: "ckAPIToken", value: "api"), URLQueryItem(name: "ckWebAuthToken", value: token),
                ])
            let response = try emulator.respond(
                CloudKitHTTPRequest(method: method, url: address, headers: [], body: method == "GET" ? Data() : body))
            token = try #require(response.header("X-Apple-CloudKit-Web-Auth-Token"), "\(name): no new web auth token")
            #expect(response.status == exchange["status"] as? Int, "\(name): HTTP \(response.status)")
            let answer = try JSONSerialization.jsonObject(with: response.body)
            for path in exchange["keys"] as? [[Any]] ?? [] {
                #expect(
                    jsonValue(at: path, in: answer) != nil,
                    "\(name): no \(path) in \(String(decoding: response.body.prefix(600), as: UTF8.self))")
            }
            for (dotted, expected) in exchange["values"] as? [String: Any] ?? [:] {
                let path: [Any] = dotted.split(separator: ".").map { Int($0).map { $0 as Any } ?? String($0) }
                let found = jsonValue(at: path, in: answer)
                #expect(
                    found.map { "\($0)" } == "\(expected)",
                    "\(name): \(dotted) is \(String(describing: found)), expected \(expected)")
            }
        }
    }
}
