// swift-tools-version:6.1
import Foundation
import PackageDescription

// CI builds ckport's own targets with warnings as errors (CKPORT_WARNINGS_AS_ERRORS=1);
// dependencies are not affected.
let strict: [SwiftSetting] = ProcessInfo.processInfo.environment["CKPORT_WARNINGS_AS_ERRORS"] == nil ? [] : [.unsafeFlags(["-warnings-as-errors"])]

// Intel's ISA-L inflates gzip in about half the time zlib takes (restore, verify and every
// other read of a bundle). It is used when its headers are installed (Debian: libisal-dev;
// Homebrew: isa-l), zlib otherwise; CKPORT_ISAL=0 builds without it even so.
let isalHeaders = ["/usr/include", "/usr/local/include", "/opt/homebrew/include"].map { $0 + "/isa-l/igzip_lib.h" }
let withISAL = ProcessInfo.processInfo.environment["CKPORT_ISAL"] != "0" && isalHeaders.contains { FileManager.default.fileExists(atPath: $0) }
let isal: [Target.Dependency] = withISAL ? ["CISAL"] : []
let isalTarget: [Target] = withISAL ? [.systemLibrary(name: "CISAL", pkgConfig: "libisal", providers: [.apt(["libisal-dev"]), .brew(["isa-l"])])] : []

let crypto: Target.Dependency = .product(name: "Crypto", package: "swift-crypto")

let package = Package(
    name: "ckport",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "CKPort", targets: ["CKPort"]),
        // The record store on a PostgreSQL server, for programs that want it (postgres-nio).
        .library(name: "CKPortPostgreSQL", targets: ["PostgresStore"]),
        // The checks every store must pass, for the authors of a store of their own (as
        // swift-nio ships NIOTestUtils): each part of the session protocol has its group.
        .library(name: "CKPortStoreConformance", targets: ["StoreConformance"]),
        .executable(name: "ckport", targets: ["ckport"]),
        .executable(name: "ckport-emulator", targets: ["ckport-emulator"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-crypto", "4.5.2"..<"5.0.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // The HTTP server under `serve`, the emulator and the sign-in callback (on SwiftNIO).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // `swift package generate-documentation --target CKPort` builds the DocC catalog.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        .target(name: "Records", swiftSettings: strict),
        .target(name: "CSQLiteConfig", linkerSettings: [.linkedLibrary("sqlite3")]),
        // Signals, writeback and exclusive renames: the system calls Swift cannot make itself.
        .target(name: "CPlatform"),
        // SQLite's C API for the core's working files (sets that outgrow memory), without GRDB.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]),
        // libxml2, the XML layer's parser (streaming reader, no network, no entity expansion).
        .systemLibrary(name: "CLibXML2", pkgConfig: "libxml-2.0", providers: [.apt(["libxml2-dev"]), .brew(["libxml2"])]),
        // The store contract: the protocols every store implements, queries, change tokens,
        // errors, statistics, capabilities, the importer and opening a store by location. No
        // store lives here: neither GRDB nor PostgresNIO.
        .target(name: "StoreCore", dependencies: ["Records", "CPlatform", "CSQLite", crypto], swiftSettings: strict),
        // The record store in a SQLite file (GRDB).
        .target(
            name: "SQLiteStore",
            dependencies: [
                "Records", "StoreCore", "CSQLiteConfig", "CPlatform", crypto,
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            swiftSettings: strict),
        // The record store on a PostgreSQL server (postgres-nio): a peer of SQLiteStore.
        .target(
            name: "PostgresStore",
            dependencies: [
                "Records", "StoreCore", crypto,
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        // The checks every store passes, one group per part of the session protocol.
        .target(name: "StoreConformance", dependencies: ["Records", "StoreCore"], swiftSettings: strict),
        .target(
            name: "Formats",
            dependencies: [
                "Records", "StoreCore", "CPlatform", "CZlib", "CLibXML2", crypto,
                .product(name: "Yams", package: "Yams"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ] + isal,
            swiftSettings: strict),
        .target(
            name: "Migrations", dependencies: ["Records", "StoreCore", .product(name: "Yams", package: "Yams"), crypto],
            swiftSettings: strict),
        // The library's front door: the operations (import, export, backup, verify, restore,
        // migrate) over the modules above, which it re-exports, with the SQLite store.
        .target(
            name: "CKPort",
            dependencies: [
                "Records", "StoreCore", "SQLiteStore", "Formats", "Migrations", "CloudKitWeb", "WebServing",
                "ObjectStorage", .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict),
        // ckport's web servers (serve, the emulator, the sign-in callback) on Hummingbird: where
        // they listen, how much a client may ask, the headers every answer carries.
        .target(
            name: "WebServing",
            dependencies: [
                "Records", .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        // CloudKit Web Services: addresses, server-to-server signatures, error dictionaries,
        // retries and request batching.
        .target(
            name: "CloudKitWeb",
            dependencies: [
                "Records", "WebServing", crypto,
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "_NIOFileSystem", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict),
        // CloudKit Web Services over an in-memory container, for tests and offline scripts.
        .target(
            name: "CloudKitEmulator",
            dependencies: [
                "CloudKitWeb", "WebServing", "Records", crypto, .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strict),
        .target(
            name: "ObjectStorage",
            dependencies: [
                "Records", "Formats", crypto, .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ], swiftSettings: strict),
        .target(name: "SampleApps", dependencies: ["Records"], swiftSettings: strict),
        .executableTarget(
            name: "ckport",
            dependencies: [
                "CKPort", "CloudKitWeb", "Records", "StoreCore", "SQLiteStore", "Formats", "Migrations", "SampleApps",
                "PostgresStore", "ObjectStorage", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict),
        .executableTarget(
            name: "ckport-emulator",
            dependencies: [
                "CloudKitEmulator", "CloudKitWeb", "Records",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict),
        // libFuzzer targets: scripts/fuzz.sh builds this with the fuzzer and address sanitizers.
        .executableTarget(
            name: "ckport-fuzz",
            dependencies: ["Records", "StoreCore", "SQLiteStore", "Formats", "Migrations", "CKPort", "SampleApps"],
            swiftSettings: strict),
        // What the test targets share: the package's root, scratch folders, sample stores.
        .target(
            name: "TestSupport", dependencies: ["CKPort", "Records", "StoreCore", "SQLiteStore", "Formats", "SampleApps"],
            path: "Tests/TestSupport", swiftSettings: strict),
        .testTarget(name: "RecordsTests", dependencies: ["TestSupport", "Records", "SampleApps"], swiftSettings: strict),
        .testTarget(
            name: "StoreTests",
            dependencies: [
                "TestSupport", "Records", "StoreCore", "SQLiteStore", "StoreConformance", "Formats", "SampleApps",
            ],
            exclude: ["SchemaCorpus"], swiftSettings: strict),
        .testTarget(
            name: "FormatsTests",
            dependencies: [
                "TestSupport", "Records", "StoreCore", "SQLiteStore", "Formats", "SampleApps", crypto,
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            exclude: ["Fixtures"], swiftSettings: strict),
        .testTarget(
            name: "MigrationsTests",
            dependencies: [
                "TestSupport", "Records", "StoreCore", "SQLiteStore", "Formats", "Migrations", "SampleApps",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "CloudKitWebTests",
            dependencies: [
                "TestSupport", "CloudKitWeb", "CloudKitEmulator", "CKPort", "Records", "Formats", "StoreCore",
                "SQLiteStore", "SampleApps", "WebServing", crypto, .product(name: "Hummingbird", package: "hummingbird"),
            ],
            exclude: ["Fixtures"], swiftSettings: strict),
        .testTarget(
            name: "PostgresStoreTests",
            dependencies: [
                "TestSupport", "PostgresStore", "Records", "StoreCore", "SQLiteStore", "StoreConformance", "SampleApps",
                crypto,
            ],
            swiftSettings: strict),
        .testTarget(
            name: "ObjectStorageTests", dependencies: ["TestSupport", "ObjectStorage"], exclude: ["Fixtures"],
            swiftSettings: strict),
        .testTarget(
            name: "CKPortTests",
            dependencies: [
                "TestSupport", "CKPort", "CloudKitWeb", "SampleApps", "WebServing", "ObjectStorage",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "ckportTests",
            dependencies: [
                "TestSupport", "ckport", "CloudKitWeb", "Records", "StoreCore", "SQLiteStore", "Formats", "SampleApps", "WebServing",
                "ObjectStorage",
            ],
            swiftSettings: strict),
    ] + isalTarget
)
