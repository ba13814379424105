import Records

/// The property names an iCalendar import looks up, numbered: the names ckport reads itself
/// first, then every name a mapping entry reads. Each component's properties are numbered
/// once (one hash per property); every lookup after that compares integers instead of
/// scanning the component with string comparisons.
struct PropertyNumbers {
    static let uid = 0, dtstart = 1, zone = 2, type = 3, created = 4, lastModified = 5, duration = 6, status = 7,
        organizer = 8, attendee = 9, categories = 10, rrule = 11, rdate = 12, exdate = 13, recurrenceID = 14,
        dtstamp = 15, sequence = 16, keptForm = 17
    /// The names of the numbers above, in their order.
    static let fixed = [
        "UID", "DTSTART", CalendarMapping.zoneProperty, CalendarMapping.typeProperty, "CREATED", "LAST-MODIFIED",
        "DURATION", "STATUS", "ORGANIZER", "ATTENDEE", "CATEGORIES", "RRULE", "RDATE", "EXDATE", "RECURRENCE-ID",
        "DTSTAMP", "SEQUENCE", CalendarMapping.keptFormProperty,
    ]
    /// What ckport reads whatever the mapping says: never reported as not kept.
    static let structural: [Int] = [
        zone, type, uid, dtstamp, sequence, rrule, rdate, exdate, recurrenceID, organizer,
        attendee, duration, status, created, lastModified, keptForm,
    ]

    private var byName: [String: Int] = [:]
    /// The name of each number.
    private(set) var names: [String] = []
    var count: Int { names.count }

    init(_ mapping: CalendarMapping) {
        for name in PropertyNumbers.fixed { number(name) }
        for component in mapping.components {
            for (name, _) in component.properties { number(name) }
        }
    }

    @discardableResult
    private mutating func number(_ name: String) -> Int {
        if let known = byName[name] { return known }
        byName[name] = names.count
        names.append(name)
        return names.count - 1
    }

    subscript(name: String) -> Int? { byName[name] }

    /// A component's properties with their numbers (-1 for a name no one reads).
    func number(_ component: ICalComponent) -> NumberedProperties {
        var numbers: [Int] = []
        numbers.reserveCapacity(component.properties.count)
        for property in component.properties { numbers.append(byName[property.name] ?? -1) }
        return NumberedProperties(properties: component.properties, numbers: numbers)
    }
}

/// A component's properties, each with its number in ``PropertyNumbers``.
struct NumberedProperties {
    let properties: [ContentLine]
    let numbers: [Int]

    func first(_ number: Int) -> ContentLine? {
        for index in numbers.indices where numbers[index] == number { return properties[index] }
        return nil
    }

    func count(_ number: Int) -> Int {
        var count = 0
        for each in numbers where each == number { count += 1 }
        return count
    }

    func all(_ number: Int) -> [ContentLine] {
        numbers.indices.filter { numbers[$0] == number }.map { properties[$0] }
    }
}

/// A mapping entry prepared for reading components: its fields looked up in the schema, its
/// renamed values upper-cased, and which property numbers it keeps, once per import instead
/// of once per component.
final class ComponentPlan {
    struct Mapped {
        var number: Int
        var name: String
        var value: CalendarMapping.Value
        var isTime: Bool
        /// The field the value fills, when the record type has it.
        var definition: FieldDefinition?
        /// For a renamed value: the iCalendar text upper-cased → the field's value.
        var renamed: [String: String]
    }

    let spec: CalendarMapping.Component
    let type: RecordTypeDefinition
    /// By property number: read by ckport or by this entry.
    let kept: [Bool]
    /// By property number: kept once, so that a second one in a component is not kept (a
    /// property RFC 5545 allows once, or one the mapping reads into a field).
    let once: [Bool]
    /// Whether this entry reads SEQUENCE and STATUS into fields of its own.
    let keepsSequence: Bool
    let keepsStatus: Bool
    let mapped: [Mapped]
    let startField: String?
    let endField: String?
    /// The CATEGORIES entry's value, if the mapping reads CATEGORIES.
    let categories: CalendarMapping.Value?
    /// The cancel flag: its field, the value a cancelled component sets and the one the others set.
    let cancelled: (field: String, whenCancelled: FieldValue?, otherwise: FieldValue?)?
    let organizer: FieldDefinition?
    let attendees: Attendees?

    struct Attendees {
        var spec: CalendarMapping.Attendees
        var type: RecordTypeDefinition
        var person: FieldDefinition?
        /// For a renamed PARTSTAT: the parameter upper-cased → the field's value.
        var partstat: [String: String]
    }

    /// The properties RFC 5545 allows once in a VEVENT, VTODO or VJOURNAL (§3.6.1–3.6.3;
    /// DESCRIPTION more than once in a VJOURNAL).
    static let allowedOnce: Set<String> = [
        "CLASS", "COMPLETED", "CREATED", "DESCRIPTION", "DTSTAMP", "DTSTART", "DTEND", "DUE", "DURATION", "GEO",
        "LAST-MODIFIED", "LOCATION", "ORGANIZER", "PERCENT-COMPLETE", "PRIORITY", "RECURRENCE-ID", "SEQUENCE",
        "STATUS", "SUMMARY", "TRANSP", "UID", "URL",
    ]

    init(spec: CalendarMapping.Component, type: RecordTypeDefinition, schema: Schema, numbers: PropertyNumbers) {
        self.spec = spec
        self.type = type
        var kept = [Bool](repeating: false, count: numbers.count)
        for number in PropertyNumbers.structural { kept[number] = true }
        var mapped: [Mapped] = []
        var startField: String?
        var endField: String?
        for (name, value) in spec.properties {
            let number = numbers[name]!  // every mapped name is numbered
            kept[number] = true
            if name == "DTSTART", let field = value.sourceField { startField = field }
            if name == "DTEND" || name == "DUE", let field = value.sourceField { endField = field }
            var renamed: [String: String] = [:]
            if case .mapped(_, let map) = value {
                for (key, text) in map where renamed[text.uppercased()] == nil { renamed[text.uppercased()] = key }
            }
            mapped.append(
                Mapped(
                    number: number, name: name, value: value, isTime: CalendarMapping.timeProperties.contains(name),
                    definition: value.sourceField.flatMap(type.field(named:)), renamed: renamed))
        }
        self.kept = kept
        var once = [Bool](repeating: false, count: numbers.count)
        for (number, name) in numbers.names.enumerated() where kept[number] {
            let read = spec.properties.contains { $0.name == name }
            once[number] =
                (read && name != "CATEGORIES")
                || ComponentPlan.allowedOnce.contains(name) && !(name == "DESCRIPTION" && spec.component == "VJOURNAL")
        }
        self.once = once
        keepsSequence = spec.property("SEQUENCE") != nil
        keepsStatus = spec.property("STATUS") != nil
        self.mapped = mapped
        self.startField = startField
        self.endField = endField
        categories = spec.properties.first { $0.name == "CATEGORIES" }?.value
        if let predicate = spec.cancelled, predicate.conditions.count == 1, predicate.conditions[0].op == .equal,
            let definition = type.field(named: predicate.conditions[0].field)
        {
            let condition = predicate.conditions[0]
            var otherwise: FieldValue?
            if case .bool(let flag) = condition.value { otherwise = .int64(flag ? 0 : 1) }
            cancelled = (condition.field, condition.value.fieldValue(as: definition.type), otherwise)
        } else {
            cancelled = nil
        }
        organizer = spec.organizer.flatMap { type.field(named: $0.field) }
        if let attendees = spec.attendees, let attendeeType = schema.recordType(named: attendees.recordType) {
            var partstat: [String: String] = [:]
            if case .mapped(_, let map)? = attendees.partstat {
                for (key, text) in map where partstat[text.uppercased()] == nil { partstat[text.uppercased()] = key }
            }
            self.attendees = Attendees(
                spec: attendees, type: attendeeType, person: attendeeType.field(named: attendees.person.field),
                partstat: partstat)
        } else {
            attendees = nil
        }
    }
}
