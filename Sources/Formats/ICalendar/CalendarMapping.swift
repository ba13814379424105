import Foundation
import Records
import Yams

/// A mapping file that says how records become iCalendar components and back.
///
/// ```yaml
/// calendar:
///   name: { reference: familyID, field: name }       # X-WR-CALNAME
/// components:
///   - recordType: Event
///     component: VEVENT
///     cancelled: "isDeleted == true"                 # STATUS:CANCELLED, left out by default
///     properties:
///       SUMMARY: title
///       DTSTART: startDate
///       DTEND: endDate
///       CATEGORIES: category
///     organizer: { field: creatorID, lookup: User, name: nickname, email: appleID }
///     attendees:
///       recordType: EventParticipant
///       reference: eventID
///       person: { field: userID, lookup: User, name: nickname, email: appleID }
///       partstat: { field: status, values: { accepted: ACCEPTED, declined: DECLINED } }
///     alarms:
///       - { trigger: reminderTime, action: DISPLAY }
/// ```
///
/// YAML or JSON (JSON is YAML too). Every record type and field named is checked against the
/// schema, and a problem is reported with the file's line.
public struct CalendarMapping: Sendable {
    /// How a property gets its value.
    public enum Value: Sendable, Equatable {
        /// A field of the record.
        case field(String)
        /// A field whose values are renamed: `{ field: status, values: { done: COMPLETED } }`.
        case mapped(String, values: [String: String])
        /// A TIMESTAMP written as a DATE: `{ field: date, date: true }`.
        case date(String)
        /// A field of the record a REFERENCE points at: `{ reference: areaId, field: name }`.
        case reference(String, field: String)
        /// A fixed text: `{ value: "Daily check-in" }`.
        case constant(String)

        /// The record's own field this value reads, if any.
        var sourceField: String? {
            switch self {
            case .field(let f), .mapped(let f, _), .date(let f), .reference(let f, _): return f
            case .constant: return nil
            }
        }
    }

    /// A person: a field holding a record name, looked up in a record type for CN and mailto.
    public struct Person: Sendable, Equatable {
        public var field: String
        public var lookup: String?
        public var name: String?
        public var email: String?
    }

    public struct Attendees: Sendable, Equatable {
        public var recordType: String
        /// The attendee record's REFERENCE to the component's record.
        public var reference: String
        /// The action imported attendee references get.
        public var referenceAction: ReferenceAction
        public var person: Person
        public var partstat: Value?
    }

    public struct Alarm: Sendable, Equatable {
        /// A TIMESTAMP field: when the alarm rings.
        public var trigger: String
        public var action: String
        public var description: Value?
    }

    /// Where a repeating record's rule comes from.
    public enum Recurrence: Sendable, Equatable {
        /// A field holding RRULE text.
        case rule(String)
        /// family-todo's chores: a type field (daily, weekly, biweekly, monthly), a weekday
        /// field (1 = Monday … 7 = Sunday) and a day-of-month field.
        case chore(type: String, weekday: String?, monthDay: String?)
    }

    /// The words a `timeZone` field holds besides a TZID.
    public static let keptUTC = "UTC", keptFloating = "floating", keptDate = "date"
    public static let keptForms: Set<String> = [keptUTC, keptFloating, keptDate]

    public struct Component: Sendable {
        public var recordType: String
        public var component: String
        public var filter: RecordPredicate?
        public var filterText: String?
        public var cancelled: RecordPredicate?
        public var properties: [(name: String, value: Value)]
        public var organizer: Person?
        public var attendees: Attendees?
        public var alarms: [Alarm]
        public var recurrence: Recurrence?
        /// Actions for REFERENCE fields an import fills (`--set familyID=family-1`).
        public var referenceActions: [String: ReferenceAction]
        /// A STRING field that keeps how the component's times were written: a TZID
        /// (`Europe/Zurich`), `UTC`, `floating` or `date`; export writes them the same way
        /// (a zone unless `--tz` names another). Floating times and dates are stored as their
        /// wall clock, as if UTC. Empty, or without the field, times come back in UTC (or
        /// `--tz`), and an event from midnight to midnight as dates.
        public var timeZone: String?

        public func property(_ name: String) -> Value? {
            properties.first { $0.name == name }?.value
        }
    }

    public var calendarName: Value?
    public var components: [Component]
    public var file: String

    /// The component mapping for an iCalendar component name (VEVENT, …), the first one listed.
    public func component(named name: String) -> Component? {
        components.first { $0.component == name }
    }

    /// Whether more than one record type becomes components called `name` (Task and
    /// RecurringChore both as VTODO), so that a file must say which one each is.
    public func isShared(_ name: String) -> Bool {
        components.lazy.filter { $0.component == name }.count > 1
    }

    /// The entry that reads a component: the only one for its name; else the record type a
    /// ckport file names (X-CKPORT-TYPE); else, for a recurring component, the entry that keeps
    /// rules; else the first.
    public func component(for ical: ICalComponent) -> Component? {
        componentIndex(for: ical).map { components[$0] }
    }

    /// Where in ``components`` the entry that reads a component stands (see ``component(for:)``).
    public func componentIndex(for ical: ICalComponent) -> Int? {
        guard let first = components.firstIndex(where: { $0.component == ical.name }) else { return nil }
        guard components[(first + 1)...].contains(where: { $0.component == ical.name }) else { return first }
        let candidates = components.indices[first...].filter { components[$0].component == ical.name }
        if let type = ical.property(CalendarMapping.typeProperty)?.value,
            let match = candidates.first(where: { components[$0].recordType == ICalText.unescape(type) })
        {
            return match
        }
        if ical.property("RRULE") != nil, let match = candidates.first(where: { components[$0].recurrence != nil }) {
            return match
        }
        return candidates.first { components[$0].recurrence == nil } ?? first
    }

    /// The property naming the record type of a component, written when the component's name
    /// is shared by several record types.
    public static let typeProperty = "X-CKPORT-TYPE"
    /// The property naming the zone of a record outside the private default zone:
    /// `X-CKPORT-ZONE;SCOPE=shared;OWNER=_4f00…:family-1-zone`.
    public static let zoneProperty = "X-CKPORT-ZONE"
    /// What a record's `timeZone` field holds when the times written say otherwise (an export
    /// with `--tz`, a record that keeps no form): `X-CKPORT-TIMEZONE:Europe/Zurich`, `UTC`,
    /// `floating`, or `X-CKPORT-EMPTY=TRUE:none` for none (with `;TZID=ZONE` when its dates are
    /// ZONE's midnights).
    public static let keptFormProperty = "X-CKPORT-TIMEZONE"
    /// The zone an export with `--tz` wrote its dates and floating times in, on the calendar:
    /// importing the file without `--tz` reads them in it, as the export wrote them.
    public static let exportZoneProperty = "X-CKPORT-TZ"
    /// ``keptFormProperty``'s value for a record whose field holds nothing, with
    /// ``keptEmptyParameter`` (so that a field that holds the word `none` is told apart).
    public static let keptNone = "none"
    public static let keptEmptyParameter = "X-CKPORT-EMPTY"
}

/// A mapping file that cannot be read or does not fit the schema.
public struct MappingError: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var file: String
    public var line: Int?
    public var message: String

    public var description: String { "\(file)\(line.map { ":\($0)" } ?? ""): \(message)" }
}

extension CalendarMapping {
    public static let componentNames: Set<String> = ["VEVENT", "VTODO", "VJOURNAL"]
    static let timeProperties: Set<String> = [
        "DTSTART", "DTEND", "DUE", "COMPLETED", "CREATED", "LAST-MODIFIED", "RECURRENCE-ID",
    ]

    /// Reads a mapping and checks it against the schema.
    public static func load(path: String, schema: Schema) throws(MappingError) -> CalendarMapping {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw MappingError(file: path, line: nil, message: "cannot read: \(error.localizedDescription)")
        }
        return try parse(text, file: path, schema: schema)
    }

    public static func parse(_ text: String, file: String, schema: Schema) throws(MappingError) -> CalendarMapping {
        let root: Node
        do {
            guard let node = try Yams.compose(yaml: text) else {
                throw MappingError(file: file, line: nil, message: "the mapping is empty")
            }
            root = node
        } catch let error as MappingError {
            throw error
        } catch {
            throw MappingError(file: file, line: nil, message: "not YAML or JSON: \(error)")
        }
        var reader = MappingReader(file: file, schema: schema)
        return try reader.read(root)
    }
}

private struct MappingReader {
    let file: String
    let schema: Schema

    func fail(_ node: Node?, _ message: String) -> MappingError {
        MappingError(file: file, line: node?.mark.map { $0.line }, message: message)
    }

    func mapping(_ node: Node, _ what: String) throws(MappingError) -> Node.Mapping {
        guard let mapping = node.mapping else { throw fail(node, "\(what) must be a mapping (key: value)") }
        return mapping
    }

    func string(_ node: Node?, _ what: String) throws(MappingError) -> String {
        guard let node, let text = node.scalar?.string else { throw fail(node, "\(what) must be text") }
        return text
    }

    func keys(_ mapping: Node.Mapping, allowed: Set<String>, _ what: String) throws(MappingError) {
        for (key, _) in mapping {
            let name = key.string ?? ""
            if !allowed.contains(name) {
                throw fail(key, "\(what) has no key '\(name)' (its keys: \(allowed.sorted().joined(separator: ", ")))")
            }
        }
    }

    func field(
        _ name: String, in type: RecordTypeDefinition, _ node: Node?, types allowed: [PrimitiveType]? = nil,
        list: Bool? = nil
    ) throws(MappingError) -> FieldDefinition {
        guard let field = type.field(named: name), !field.isSystem else {
            throw fail(
                node,
                "record type \(type.name) has no field '\(name)' (its fields: \(type.userFields.map(\.name).joined(separator: ", ")))"
            )
        }
        if let allowed, !allowed.contains(field.type.primitive) || (list != nil && field.type.isList != list!) {
            throw fail(
                node,
                "field \(type.name).\(name) is \(field.type); here it must be \(allowed.map(\.rawValue).joined(separator: " or "))"
            )
        }
        return field
    }

    func recordType(_ name: String, _ node: Node?) throws(MappingError) -> RecordTypeDefinition {
        guard let type = schema.recordType(named: name) else {
            throw fail(
                node,
                "the schema has no record type '\(name)' (it has \(schema.recordTypes.map(\.name).sorted().joined(separator: ", ")))"
            )
        }
        return type
    }

    mutating func read(_ root: Node) throws(MappingError) -> CalendarMapping {
        let top = try mapping(root, "the mapping")
        try keys(top, allowed: ["calendar", "components"], "the mapping")
        guard let componentsNode = top["components"], let list = componentsNode.sequence, !list.isEmpty else {
            throw fail(root, "the mapping needs a list of components")
        }
        var components: [CalendarMapping.Component] = []
        for node in list { components.append(try component(node)) }
        var name: CalendarMapping.Value?
        if let calendar = top["calendar"] {
            let fields = try mapping(calendar, "calendar")
            try keys(fields, allowed: ["name"], "calendar")
            if let nameNode = fields["name"] {
                name = try value(
                    nameNode, type: try recordType(components[0].recordType, nameNode), property: "X-WR-CALNAME")
            }
        }
        return CalendarMapping(calendarName: name, components: components, file: file)
    }

    mutating func component(_ node: Node) throws(MappingError) -> CalendarMapping.Component {
        let fields = try mapping(node, "a component")
        try keys(
            fields,
            allowed: [
                "recordType", "component", "where", "cancelled", "properties", "organizer", "attendees", "alarms",
                "recurrence", "referenceActions", "timeZone",
            ], "a component")
        let typeName = try string(fields["recordType"], "recordType")
        let type = try recordType(typeName, fields["recordType"])
        let componentName = try string(fields["component"], "component").uppercased()
        guard CalendarMapping.componentNames.contains(componentName) else {
            throw fail(fields["component"], "component is VEVENT, VTODO or VJOURNAL, found \(componentName)")
        }
        var result = CalendarMapping.Component(
            recordType: typeName, component: componentName, properties: [], alarms: [], referenceActions: [:])
        if let whereNode = fields["where"] {
            let text = try string(whereNode, "where")
            result.filter = try predicate(text, whereNode, type: type)
            result.filterText = text
        }
        if let cancelledNode = fields["cancelled"] {
            result.cancelled = try predicate(try string(cancelledNode, "cancelled"), cancelledNode, type: type)
        }
        if let propertiesNode = fields["properties"] {
            for (key, valueNode) in try mapping(propertiesNode, "properties") {
                let property = try string(key, "a property name").uppercased()
                guard property.allSatisfy({ $0.isLetter || $0 == "-" }) else {
                    throw fail(key, "'\(property)' is not a property name")
                }
                if ["UID", "DTSTAMP", "BEGIN", "END"].contains(property) {
                    throw fail(
                        key,
                        "\(property) is written by ckport itself (UID from the record name, DTSTAMP from the export time)"
                    )
                }
                result.properties.append((property, try value(valueNode, type: type, property: property)))
            }
        }
        if let organizer = fields["organizer"] { result.organizer = try person(organizer, type: type) }
        if let attendeesNode = fields["attendees"] {
            let attendee = try mapping(attendeesNode, "attendees")
            try keys(
                attendee, allowed: ["recordType", "reference", "referenceAction", "person", "partstat"], "attendees")
            let attendeeTypeName = try string(attendee["recordType"], "attendees.recordType")
            let attendeeType = try recordType(attendeeTypeName, attendee["recordType"])
            let reference = try string(attendee["reference"], "attendees.reference")
            _ = try field(reference, in: attendeeType, attendee["reference"], types: [.reference], list: false)
            var action = ReferenceAction.none
            if let actionNode = attendee["referenceAction"] {
                guard let parsed = ReferenceAction(rawValue: try string(actionNode, "referenceAction").uppercased())
                else {
                    throw fail(actionNode, "referenceAction is NONE, DELETE_SELF or VALIDATE")
                }
                action = parsed
            }
            guard let personNode = attendee["person"] else { throw fail(attendeesNode, "attendees need a person") }
            result.attendees = CalendarMapping.Attendees(
                recordType: attendeeTypeName, reference: reference, referenceAction: action,
                person: try person(personNode, type: attendeeType),
                partstat: try attendee["partstat"].map { node throws(MappingError) in
                    try value(node, type: attendeeType, property: "PARTSTAT")
                })
        }
        if let alarmsNode = fields["alarms"] {
            guard let list = alarmsNode.sequence else { throw fail(alarmsNode, "alarms must be a list") }
            for alarmNode in list {
                let alarm = try mapping(alarmNode, "an alarm")
                try keys(alarm, allowed: ["trigger", "action", "description"], "an alarm")
                let trigger = try string(alarm["trigger"], "trigger")
                _ = try field(trigger, in: type, alarm["trigger"], types: [.timestamp], list: false)
                let action =
                    try alarm["action"].map { node throws(MappingError) in try string(node, "action").uppercased() }
                    ?? "DISPLAY"
                guard ["DISPLAY", "AUDIO"].contains(action) else {
                    throw fail(alarm["action"], "an alarm's action is DISPLAY or AUDIO")
                }
                result.alarms.append(
                    CalendarMapping.Alarm(
                        trigger: trigger, action: action,
                        description: try alarm["description"].map { node throws(MappingError) in
                            try value(node, type: type, property: "DESCRIPTION")
                        }))
            }
        }
        if let recurrenceNode = fields["recurrence"] {
            let recurrence = try mapping(recurrenceNode, "recurrence")
            try keys(recurrence, allowed: ["rule", "type", "weekday", "monthDay"], "recurrence")
            if let ruleNode = recurrence["rule"] {
                let name = try string(ruleNode, "rule")
                _ = try field(name, in: type, ruleNode, types: [.string], list: false)
                result.recurrence = .rule(name)
            } else {
                let typeField = try string(recurrence["type"], "recurrence.type")
                _ = try field(typeField, in: type, recurrence["type"], types: [.string], list: false)
                var weekday: String?
                var monthDay: String?
                if let node = recurrence["weekday"] {
                    weekday = try string(node, "weekday")
                    _ = try field(weekday!, in: type, node, types: [.int64], list: false)
                }
                if let node = recurrence["monthDay"] {
                    monthDay = try string(node, "monthDay")
                    _ = try field(monthDay!, in: type, node, types: [.int64], list: false)
                }
                result.recurrence = .chore(type: typeField, weekday: weekday, monthDay: monthDay)
            }
        }
        if let zoneNode = fields["timeZone"] {
            let name = try string(zoneNode, "timeZone")
            _ = try field(name, in: type, zoneNode, types: [.string], list: false)
            result.timeZone = name
        }
        if let actionsNode = fields["referenceActions"] {
            for (key, valueNode) in try mapping(actionsNode, "referenceActions") {
                let name = try string(key, "a field name")
                _ = try field(name, in: type, key, types: [.reference], list: false)
                guard let action = ReferenceAction(rawValue: try string(valueNode, "an action").uppercased()) else {
                    throw fail(valueNode, "a reference action is NONE, DELETE_SELF or VALIDATE")
                }
                result.referenceActions[name] = action
            }
        }
        if componentName == "VEVENT" && result.property("DTSTART") == nil {
            throw fail(node, "a VEVENT needs DTSTART (a TIMESTAMP field)")
        }
        return result
    }

    func predicate(_ text: String, _ node: Node, type: RecordTypeDefinition) throws(MappingError) -> RecordPredicate {
        let predicate: RecordPredicate
        do { predicate = try RecordPredicate.parse(text) } catch {
            throw fail(node, "\"\(text)\" at column \(error.column): \(error.message)")
        }
        for condition in predicate.conditions
        where type.field(named: condition.field) == nil
            && !["recordName", "___createTime", "___modTime"].contains(condition.field)
        {
            throw fail(node, "\"\(text)\": record type \(type.name) has no field '\(condition.field)'")
        }
        return predicate
    }

    func person(_ node: Node, type: RecordTypeDefinition) throws(MappingError) -> CalendarMapping.Person {
        let fields = try mapping(node, "a person")
        try keys(fields, allowed: ["field", "lookup", "name", "email"], "a person")
        let fieldName = try string(fields["field"], "field")
        _ = try field(fieldName, in: type, fields["field"], types: [.string, .reference], list: false)
        var person = CalendarMapping.Person(field: fieldName)
        if let lookupNode = fields["lookup"] {
            let lookupType = try recordType(try string(lookupNode, "lookup"), lookupNode)
            person.lookup = lookupType.name
            if let nameNode = fields["name"] {
                person.name = try string(nameNode, "name")
                _ = try field(person.name!, in: lookupType, nameNode, types: [.string], list: false)
            }
            if let emailNode = fields["email"] {
                person.email = try string(emailNode, "email")
                _ = try field(person.email!, in: lookupType, emailNode, types: [.string], list: false)
            }
        }
        return person
    }

    func value(_ node: Node, type: RecordTypeDefinition, property: String) throws(MappingError) -> CalendarMapping.Value
    {
        let isTime = CalendarMapping.timeProperties.contains(property)
        if let name = node.scalar?.string {
            let definition = try field(name, in: type, node)
            if isTime && definition.type != .timestamp {
                throw fail(node, "\(property) needs a TIMESTAMP field; \(type.name).\(name) is \(definition.type)")
            }
            return .field(name)
        }
        let fields = try mapping(node, "the value of \(property)")
        try keys(fields, allowed: ["field", "values", "date", "reference", "value"], "the value of \(property)")
        if let constant = fields["value"] { return .constant(try string(constant, "value")) }
        if let referenceNode = fields["reference"] {
            let reference = try string(referenceNode, "reference")
            let definition = try field(reference, in: type, referenceNode, types: [.reference], list: false)
            _ = definition
            return .reference(reference, field: try string(fields["field"], "field"))
        }
        let name = try string(fields["field"], "field")
        let definition = try field(name, in: type, fields["field"])
        if fields["date"]?.bool == true {
            guard definition.type == .timestamp else {
                throw fail(node, "date: true needs a TIMESTAMP field; \(type.name).\(name) is \(definition.type)")
            }
            return .date(name)
        }
        if let valuesNode = fields["values"] {
            var values: [String: String] = [:]
            for (key, value) in try mapping(valuesNode, "values") {
                values[try string(key, "a value")] = try string(value, "a value")
            }
            return .mapped(name, values: values)
        }
        if isTime && definition.type != .timestamp {
            throw fail(node, "\(property) needs a TIMESTAMP field; \(type.name).\(name) is \(definition.type)")
        }
        return .field(name)
    }
}
