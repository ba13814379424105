// swift-tools-version:6.1
// A program that uses ckport as a library: `swift run --package-path Examples FamilyBackup`.
import PackageDescription

let package = Package(
    name: "ckport-examples",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "ckport", path: "..")
    ],
    targets: [
        .executableTarget(name: "FamilyBackup", dependencies: [.product(name: "CKPort", package: "ckport")])
    ]
)
