import Foundation
import Records

/// A Core Data model as Xcode keeps it: an `.xcdatamodeld` folder of versions (each an
/// `.xcdatamodel` folder holding a `contents` XML file), the current one named by
/// `.xccurrentversion`. What ckport needs of it to know the CloudKit schema that
/// `NSPersistentCloudKitContainer` derives from it, with the line of each element for messages.
public struct CoreDataModel: Sendable, Equatable {
    public struct Attribute: Sendable, Equatable {
        public var name: String
        /// Xcode's name for the type: `String`, `Integer 64`, `Date`, `Binary`, `Transformable`, …
        public var type: String
        public var optional: Bool
        /// The default as the model writes it: `defaultValueString`, or for a Date
        /// `defaultDateTimeInterval` (seconds from 2001-01-01).
        public var defaultValue: String?
        public var externalStorage: Bool
        /// Encrypted in CloudKit (`allowsCloudEncryption`).
        public var encrypted: Bool
        /// Never saved (`transient`): the store, and so CloudKit, never holds it.
        public var transient: Bool = false
        /// Computed by the store from other values (`derived`, with a `derivationExpression`).
        public var derived: Bool = false
        public var line: Int
    }

    public struct Relationship: Sendable, Equatable {
        public var name: String
        public var destination: String
        public var toMany: Bool
        public var ordered: Bool
        public var optional: Bool
        public var inverse: String?
        public var deletionRule: String
        public var line: Int
    }

    public struct Entity: Sendable, Equatable {
        public var name: String
        public var parent: String?
        public var isAbstract: Bool
        public var attributes: [Attribute]
        public var relationships: [Relationship]
        /// Each uniqueness constraint's attribute names.
        public var uniquenessConstraints: [[String]]
        public var line: Int
    }

    public struct Configuration: Sendable, Equatable {
        public var name: String
        public var entities: [String]
        public var usedWithCloudKit: Bool
        public var line: Int
    }

    /// The `contents` file the model was read from.
    public var file: String
    /// The version's name (`Model 2`), when the model came from an `.xcdatamodeld`.
    public var version: String?
    public var entities: [Entity]
    public var configurations: [Configuration]
    /// What reading chose where the model was unclear (a `.xccurrentversion` naming a version
    /// that is not there, in a model with one version).
    public var notes: [String] = []

    public func entity(named name: String) -> Entity? { entities.first { $0.name == name } }

    /// The entity at the top of `entity`'s inheritance chain.
    public func root(of entity: Entity) -> Entity {
        var current = entity
        var seen: Set<String> = [entity.name]
        while let parent = current.parent, let next = self.entity(named: parent), seen.insert(parent).inserted {
            current = next
        }
        return current
    }

    /// Attributes and relationships of `entity` with those it inherits, parents' first.
    public func allProperties(of entity: Entity) -> (attributes: [Attribute], relationships: [Relationship]) {
        var chain: [Entity] = [entity]
        var seen: Set<String> = [entity.name]
        while let parent = chain.last?.parent, let next = self.entity(named: parent), seen.insert(parent).inserted {
            chain.append(next)
        }
        return (chain.reversed().flatMap(\.attributes), chain.reversed().flatMap(\.relationships))
    }
}

extension CoreDataModel {
    /// Reads a model: an `.xcdatamodeld` folder (its current version, or `version`), an
    /// `.xcdatamodel` folder, or a `contents` file.
    public static func read(_ path: String, version: String? = nil) throws -> CoreDataModel {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw XMLInputError(
                file: path, line: 0, column: 0,
                message: "no such model (a .xcdatamodeld or .xcdatamodel folder, or its contents file)")
        }
        guard isDirectory.boolValue else { return try parse(contents: path, version: version) }
        if path.hasSuffix(".xcdatamodel") || path.hasSuffix(".xcdatamodel/") {
            return try parse(contents: (path as NSString).appendingPathComponent("contents"), version: version)
        }
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter {
            $0.hasSuffix(".xcdatamodel")
        }
        .map { String($0.dropLast(".xcdatamodel".count)) }.sorted()
        guard !versions.isEmpty else {
            throw XMLInputError(file: path, line: 0, column: 0, message: "holds no .xcdatamodel version")
        }
        let chosen: String
        let currentFile = (path as NSString).appendingPathComponent(".xccurrentversion")
        let hasCurrentFile = FileManager.default.fileExists(atPath: currentFile)
        var note: String?
        if let version {
            guard versions.contains(version) else {
                throw XMLInputError(
                    file: path, line: 0, column: 0,
                    message: "has no version \"\(version)\" (its versions: \(versions.joined(separator: ", ")))")
            }
            chosen = version
        } else if let current = try currentVersion(path), versions.contains(current) {
            chosen = current
        } else if versions.count == 1 {
            // Xcode reads the only version whatever the file says (a version renamed or
            // removed leaves .xccurrentversion behind); so does ckport, and says so.
            chosen = versions[0]
            if hasCurrentFile {
                let named = try currentVersion(path)
                note =
                    ".xccurrentversion "
                    + (named.map { "names the version \"\($0)\", which the model does not hold" } ?? "names no version")
                    + "; its only version, \"\(chosen)\", was read"
            }
        } else if let current = try currentVersion(path) {
            throw XMLInputError(
                file: currentFile, line: 0, column: 0,
                message:
                    "names the version \"\(current)\", which the model does not hold (its versions: \(versions.joined(separator: ", "))); \(Wording.chooseModelVersion)"
            )
        } else if hasCurrentFile {
            throw XMLInputError(
                file: currentFile, line: 0, column: 0,
                message:
                    "names no version (no _XCCurrentVersionName), and the model has several (\(versions.joined(separator: ", "))); \(Wording.chooseModelVersion)"
            )
        } else {
            throw XMLInputError(
                file: path, line: 0, column: 0,
                message:
                    "has several versions (\(versions.joined(separator: ", "))) and no .xccurrentversion; \(Wording.chooseModelVersion)"
            )
        }
        var model = try parse(
            contents: (path as NSString).appendingPathComponent("\(chosen).xcdatamodel/contents"), version: chosen)
        if let note { model.notes.append(note) }
        return model
    }

    /// The current version `.xccurrentversion` names (a property list: `_XCCurrentVersionName`).
    static func currentVersion(_ bundle: String) throws -> String? {
        let file = (bundle as NSString).appendingPathComponent(".xccurrentversion")
        guard FileManager.default.fileExists(atPath: file) else { return nil }
        // An empty file names nothing (the XML reader would call it not XML).
        if let size = (try? FileManager.default.attributesOfItem(atPath: file))?[.size] as? Int, size == 0 {
            return nil
        }
        let reader = try XMLReader(path: file, limits: XMLReader.Limits(depth: 16, bytes: 1 << 20))
        var lastKey: String?
        var element: String?
        while let event = try reader.next() {
            switch event {
            case .start(let name, _): element = name
            case .text(let text) where element == "key": lastKey = text
            case .text(let text) where element == "string" && lastKey == "_XCCurrentVersionName":
                return text.hasSuffix(".xcdatamodel") ? String(text.dropLast(".xcdatamodel".count)) : text
            default: break
            }
        }
        return nil
    }

    /// Reads a version's `contents` XML.
    static func parse(contents path: String, version: String?) throws -> CoreDataModel {
        let reader = try XMLReader(path: path, limits: XMLReader.Limits(depth: 16, bytes: 64 << 20))
        var model = CoreDataModel(file: path, version: version, entities: [], configurations: [])
        var sawModel = false
        var entity: CoreDataModel.Entity?
        var configuration: CoreDataModel.Configuration?
        var constraint: [String]?
        func bool(_ value: String?) -> Bool { value == "YES" }
        func fail(_ message: Message) -> XMLInputError {
            XMLInputError(file: path, line: reader.line, column: 0, message: message)
        }
        while let event = try reader.next() {
            switch event {
            case .start(let name, let list):
                var attributes: [String: String] = [:]
                for attribute in list { attributes[attribute.name] = attribute.value }
                switch name {
                case "model":
                    sawModel = true
                case "entity":
                    guard let entityName = attributes["name"], !entityName.isEmpty else {
                        throw fail("an entity without a name")
                    }
                    entity = Entity(
                        name: entityName, parent: attributes["parentEntity"],
                        isAbstract: bool(attributes["isAbstract"]),
                        attributes: [], relationships: [], uniquenessConstraints: [], line: reader.line)
                case "attribute":
                    guard entity != nil else { break }
                    guard let attributeName = attributes["name"], let type = attributes["attributeType"] else {
                        throw fail("an attribute of entity \(entity!.name) without a name or an attributeType")
                    }
                    entity!.attributes.append(
                        Attribute(
                            name: attributeName, type: type, optional: bool(attributes["optional"]),
                            defaultValue: attributes["defaultValueString"] ?? attributes["defaultDateTimeInterval"],
                            externalStorage: bool(attributes["allowsExternalBinaryDataStorage"]),
                            encrypted: bool(attributes["allowsCloudEncryption"]),
                            transient: bool(attributes["transient"]),
                            derived: bool(attributes["derived"]), line: reader.line))
                case "relationship":
                    guard entity != nil else { break }
                    guard let relationshipName = attributes["name"], let destination = attributes["destinationEntity"]
                    else {
                        throw fail("a relationship of entity \(entity!.name) without a name or a destinationEntity")
                    }
                    entity!.relationships.append(
                        Relationship(
                            name: relationshipName, destination: destination, toMany: bool(attributes["toMany"]),
                            ordered: bool(attributes["ordered"]), optional: bool(attributes["optional"]),
                            inverse: attributes["inverseName"], deletionRule: attributes["deletionRule"] ?? "Nullify",
                            line: reader.line))
                case "uniquenessConstraint":
                    constraint = []
                case "constraint":
                    if let value = attributes["value"] { constraint?.append(value) }
                case "configuration":
                    configuration = Configuration(
                        name: attributes["name"] ?? "", entities: [],
                        usedWithCloudKit: bool(attributes["usedWithCloudKit"]), line: reader.line)
                case "memberEntity":
                    if let member = attributes["name"] { configuration?.entities.append(member) }
                default:
                    break
                }
            case .end(let name):
                switch name {
                case "entity":
                    if let finished = entity { model.entities.append(finished) }
                    entity = nil
                case "uniquenessConstraint":
                    if let finished = constraint, !finished.isEmpty { entity?.uniquenessConstraints.append(finished) }
                    constraint = nil
                case "configuration":
                    if let finished = configuration { model.configurations.append(finished) }
                    configuration = nil
                default:
                    break
                }
            case .text:
                break
            }
        }
        guard sawModel else {
            throw XMLInputError(
                file: path, line: 1, column: 0, message: "is not a Core Data model (no <model> element)")
        }
        return model
    }
}
