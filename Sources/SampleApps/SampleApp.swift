import Records

/// The five sample apps ckport ships with: their schemas, and a seeded generator of realistic
/// records for each (the same seed always gives the same records, byte for byte).
public enum SampleApp: String, CaseIterable, Sendable {
    case familyTodo = "family-todo"
    case familyCalendar = "family-calendar"
    case relationshipCheckin = "relationship-checkin"
    case screenTimeRewards = "screen-time-rewards"
    case notes

    /// The schema in cktool's layout.
    public var schemaText: String {
        switch self {
        case .familyTodo: return SampleSchemas.familyTodo
        case .familyCalendar: return SampleSchemas.familyCalendar
        case .relationshipCheckin: return SampleSchemas.relationshipCheckin
        case .screenTimeRewards: return SampleSchemas.screenTimeRewards
        case .notes: return SampleSchemas.notes
        }
    }

    public var schema: Schema {
        // The texts are fixed and covered by tests.
        try! SchemaParser.parse(schemaText, file: "\(rawValue)/schema.ckdb")
    }

    /// What the app is, in a line.
    public var summary: String {
        switch self {
        case .familyTodo: return "households, members, areas, tasks and recurring chores"
        case .familyCalendar: return "families, members, events, participants, comments and notifications"
        case .relationshipCheckin: return "couples and their daily check-ins, one per user per day"
        case .screenTimeRewards:
            return "children, app rules, inventories, points ledgers, audits and redemption windows"
        case .notes: return "folders, notes in every field type, and legacy NoteV1 records awaiting migration"
        }
    }

    /// Calls `emit` with `count` records (exactly), generated from `seed`, streaming: memory
    /// stays flat for any count.
    public func generate(records count: Int, seed: UInt64, emit: (Record) throws -> Void) throws {
        try withoutActuallyEscaping(emit) { emit in
            // Each app draws its own sequence from a seed, so two apps never share user names.
            var salt: UInt64 = 0xCBF2_9CE4_8422_2325
            for byte in rawValue.utf8 { salt = (salt ^ UInt64(byte)) &* 0x100_0000_01B3 }
            var generator = SampleGenerator(seed: seed ^ salt, limit: count, emit: emit)
            switch self {
            case .familyTodo: try generator.familyTodo()
            case .familyCalendar: try generator.familyCalendar()
            case .relationshipCheckin: try generator.relationshipCheckin()
            case .screenTimeRewards: try generator.screenTimeRewards()
            case .notes: try generator.notes()
            }
        }
    }
}
