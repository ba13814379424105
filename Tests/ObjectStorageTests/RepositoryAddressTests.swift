import Foundation
import Testing

@testable import ObjectStorage

@Suite("repository addresses")
struct RepositoryAddressTests {
    @Test(
        "rclone:REMOTE:PATH is rclone's, never a folder named so; a remote's settings in the address are refused without showing them; a missing rclone is named"
    )
    func rclone() throws {
        let rclone = FileManager.default.temporaryDirectory.appendingPathComponent("rclone-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: rclone.path, contents: Data("#!/bin/sh\n".utf8))
        chmod(rclone.path, 0o700)
        defer { try? FileManager.default.removeItem(at: rclone) }
        let environment = ["CKPORT_RCLONE": rclone.path, "PATH": "/nonexistent"]
        let storage = try RepositoryAddress.storage("rclone:nas:backups/ckport", environment: environment)
        let found = try #require(storage as? RcloneStorage)
        #expect(found.remote == "nas:backups/ckport" && found.location == "rclone:nas:backups/ckport")
        #expect(found.target("config") == "nas:backups/ckport/config")
        #expect(
            try #require(try RepositoryAddress.storage("rclone:nas:", environment: environment) as? RcloneStorage)
                .target("data/x") == "nas:data/x")
        do {
            _ = try RepositoryAddress.storage("rclone:nas,pass=hunter2:backups", environment: environment)
            Issue.record("settings in the address were taken")
        } catch {
            #expect("\(error)".contains("settings in its address") && !"\(error)".contains("hunter2"), "\(error)")
        }
        #expect(throws: RepositoryError.self) {
            try RepositoryAddress.storage("rclone::backups", environment: environment)
        }
        do {
            _ = try RepositoryAddress.storage("rclone:nas:backups", environment: ["PATH": "/nonexistent"])
            Issue.record("a missing rclone was taken")
        } catch {
            #expect("\(error)".contains("needs rclone"), "\(error)")
        }
    }

    @Test("rclone's times, nanoseconds and all, in milliseconds")
    func times() {
        #expect(RcloneStorage.time("2026-12-07T13:14:18.087285009Z") == RcloneStorage.time("2026-12-07T13:14:18.087Z"))
        #expect(RcloneStorage.time("2026-12-07T13:14:18.087285009Z") == 1_796_649_258_087)
        #expect(RcloneStorage.time("2026-12-07T13:14:18Z") == 1_796_649_258_000)
        #expect(RcloneStorage.time("2026-12-07T14:14:18.5+01:00") == 1_796_649_258_500)
    }
}
