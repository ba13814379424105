import Foundation
import GRDB
import Records

/// A SQLite database for one process's working data, which nothing needs after it: a file of
/// its own in a new folder of this process's private folder (``PrivateFiles``), with neither
/// journal nor syncing (a crash loses it, which is all right), removed with the object.
final class ScratchDatabase {
    let folder: String
    let queue: DatabaseQueue

    /// Makes the folder and the database, and runs `schema` in it (removing the folder again
    /// when something fails). `prefix` begins the folder's name, to tell what it is for.
    init(prefix: String, schema: String) throws {
        folder = try PrivateFiles.makeFolder(prefix)
        do {
            var configuration = Configuration()
            configuration.journalMode = .default
            queue = try DatabaseQueue(path: folder + "/scratch.sqlite", configuration: configuration)
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF")
                try db.execute(sql: schema)
            }
        } catch {
            PrivateFiles.removeFolder(folder)
            throw error
        }
    }

    deinit {
        try? queue.close()
        PrivateFiles.removeFolder(folder)
    }
}
