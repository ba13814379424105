import Records

/// The iCalendar mappings of the sample apps that have a calendar side. `samples/<app>/calendar.yaml`
/// holds the same text (a test keeps them equal).
enum SampleMappings {
    static let familyCalendar = """
        # How family-calendar records become iCalendar, and back.
        calendar:
          name: { reference: familyID, field: name }
        components:
          - recordType: Event
            component: VEVENT
            cancelled: "isDeleted == true"
            # An IANA zone (the times are written with its TZID), "floating" or "date".
            timeZone: timeZone
            properties:
              SUMMARY: title
              DESCRIPTION: description
              LOCATION: location
              DTSTART: startDate
              DTEND: endDate
              CATEGORIES: category
              CREATED: createdAt
              LAST-MODIFIED: updatedAt
            organizer: { field: creatorID, lookup: User, name: nickname, email: appleID }
            attendees:
              recordType: EventParticipant
              reference: eventID
              referenceAction: DELETE_SELF
              person: { field: userID, lookup: User, name: nickname, email: appleID }
              partstat:
                field: status
                values: { pending: NEEDS-ACTION, accepted: ACCEPTED, declined: DECLINED, tentative: TENTATIVE }
            alarms:
              - { trigger: reminderTime, action: DISPLAY }
            referenceActions: { familyID: DELETE_SELF }

        """

    static let familyTodo = """
        # How family-todo tasks and chores become iCalendar to-dos, and back.
        calendar:
          name: { reference: householdId, field: name }
        components:
          - recordType: Task
            component: VTODO
            timeZone: timeZone
            properties:
              SUMMARY: title
              DESCRIPTION: notes
              DUE: dueDate
              COMPLETED: completedAt
              STATUS:
                field: status
                values: { backlog: NEEDS-ACTION, next: IN-PROCESS, done: COMPLETED }
              CATEGORIES: { reference: areaId, field: name }
              CREATED: createdAt
              LAST-MODIFIED: updatedAt
            referenceActions: { householdId: DELETE_SELF }
          - recordType: RecurringChore
            component: VTODO
            where: "isActive == 1"
            timeZone: timeZone
            properties:
              SUMMARY: title
              DESCRIPTION: notes
              DTSTART: nextScheduledDate
              CATEGORIES: { reference: areaId, field: name }
              CREATED: createdAt
              LAST-MODIFIED: updatedAt
            recurrence: { type: recurrenceType, weekday: recurrenceDay, monthDay: recurrenceDayOfMonth }
            referenceActions: { householdId: DELETE_SELF }

        """

    static let relationshipCheckin = """
        # A couple's daily check-ins as journal entries, one per person per day.
        calendar:
          name: { value: "Daily check-ins" }
        components:
          - recordType: DailyEntry
            component: VJOURNAL
            properties:
              SUMMARY: { value: "Daily check-in" }
              DTSTART: { field: date, date: true }
              DESCRIPTION: gratitude
            organizer: { field: authorUserRecordID }

        """
}

extension SampleApp {
    /// The app's iCalendar mapping (YAML), for the apps that have one.
    public var calendarMappingText: String? {
        switch self {
        case .familyCalendar: return SampleMappings.familyCalendar
        case .familyTodo: return SampleMappings.familyTodo
        case .relationshipCheckin: return SampleMappings.relationshipCheckin
        case .screenTimeRewards, .notes: return nil
        }
    }
}

extension SampleApp {
    /// The sample app with a calendar mapping whose record types the schema all holds (a store
    /// its migrations took further still counts), if there is one.
    public static func withCalendar(holding schema: Schema) -> SampleApp? {
        allCases.first { app in
            app.calendarMappingText != nil
                && app.schema.recordTypes.allSatisfy { schema.recordType(named: $0.name) != nil }
        }
    }
}
