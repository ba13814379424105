/// The schemas of the five sample apps, in cktool's export layout. `samples/<app>/schema.ckdb`
/// holds the same text (a test keeps them equal).
enum SampleSchemas {
    /// CloudKit's share type, as cktool exports it into the schema of an app that shares.
    static let shareType = """
            RECORD TYPE "cloudkit.share" (
                "___createTime"               TIMESTAMP,
                "___createdBy"                REFERENCE,
                "___etag"                     STRING,
                "___modTime"                  TIMESTAMP,
                "___modifiedBy"               REFERENCE,
                "___recordID"                 REFERENCE,
                "cloudkit.thumbnailImageData" BYTES,
                "cloudkit.title"              STRING,
                "cloudkit.type"               STRING,
                GRANT WRITE TO "_creator",
                GRANT CREATE TO "_icloud",
                GRANT READ TO "_world"
            );
        """

    static let familyTodo = """
        DEFINE SCHEMA

            RECORD TYPE Area (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                createdAt       TIMESTAMP SORTABLE,
                householdId     REFERENCE QUERYABLE,
                icon            STRING,
                id              STRING QUERYABLE,
                name            STRING,
                sortOrder       INT64 SORTABLE,
                GRANT WRITE TO "_creator",
                GRANT READ, CREATE, WRITE TO "_icloud"
            );

            RECORD TYPE Household (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                createdAt       TIMESTAMP QUERYABLE SORTABLE,
                id              STRING QUERYABLE,
                name            STRING,
                ownerId         STRING QUERYABLE,
                updatedAt       TIMESTAMP,
                GRANT WRITE TO "_creator",
                GRANT READ, CREATE, WRITE TO "_icloud"
            );

            RECORD TYPE Member (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                displayName     STRING,
                householdId     REFERENCE QUERYABLE,
                id              STRING QUERYABLE,
                isActive        INT64 QUERYABLE,
                joinedAt        TIMESTAMP SORTABLE,
                role            STRING QUERYABLE,
                userId          STRING QUERYABLE,
                GRANT WRITE TO "_creator",
                GRANT READ, CREATE, WRITE TO "_icloud"
            );

            RECORD TYPE RecurringChore (
                "___createTime"      TIMESTAMP,
                "___createdBy"       REFERENCE,
                "___etag"            STRING,
                "___modTime"         TIMESTAMP,
                "___modifiedBy"      REFERENCE,
                "___recordID"        REFERENCE QUERYABLE,
                areaId               REFERENCE QUERYABLE,
                createdAt            TIMESTAMP,
                defaultAssigneeId    REFERENCE,
                householdId          REFERENCE QUERYABLE,
                id                   STRING QUERYABLE,
                isActive             INT64 QUERYABLE,
                lastGeneratedDate    TIMESTAMP QUERYABLE,
                nextScheduledDate    TIMESTAMP QUERYABLE SORTABLE,
                notes                STRING,
                recurrenceDay        INT64,
                recurrenceDayOfMonth INT64,
                recurrenceType       STRING QUERYABLE,
                timeZone             STRING,
                title                STRING,
                updatedAt            TIMESTAMP,
                GRANT WRITE TO "_creator",
                GRANT READ, CREATE, WRITE TO "_icloud"
            );

            RECORD TYPE Task (
                "___createTime"  TIMESTAMP,
                "___createdBy"   REFERENCE,
                "___etag"        STRING,
                "___modTime"     TIMESTAMP,
                "___modifiedBy"  REFERENCE,
                "___recordID"    REFERENCE QUERYABLE,
                areaId           REFERENCE QUERYABLE,
                assigneeId       REFERENCE QUERYABLE,
                completedAt      TIMESTAMP,
                completedById    STRING,
                createdAt        TIMESTAMP,
                dueDate          TIMESTAMP QUERYABLE SORTABLE,
                householdId      REFERENCE QUERYABLE,
                id               STRING,
                notes            STRING,
                recurringChoreId REFERENCE QUERYABLE,
                status           STRING QUERYABLE,
                taskType         STRING,
                timeZone         STRING,
                title            STRING SEARCHABLE,
                updatedAt        TIMESTAMP,
                GRANT WRITE TO "_creator",
                GRANT READ, CREATE, WRITE TO "_icloud"
            );

        \(shareType)

        """

    static let familyCalendar = """
        DEFINE SCHEMA

            CREATE ROLE FamilyAdmin;

            RECORD TYPE Comment (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                content         STRING,
                createdAt       TIMESTAMP SORTABLE,
                eventID         REFERENCE QUERYABLE SORTABLE,
                userID          STRING QUERYABLE,
                GRANT WRITE TO "_creator",
                GRANT READ, CREATE TO "_icloud"
            );

            RECORD TYPE Event (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                category        STRING QUERYABLE,
                createdAt       TIMESTAMP,
                creatorID       STRING QUERYABLE,
                description     STRING,
                endDate         TIMESTAMP,
                familyID        REFERENCE QUERYABLE SORTABLE,
                isDeleted       INT64 QUERYABLE,
                location        STRING,
                reminderTime    TIMESTAMP,
                startDate       TIMESTAMP QUERYABLE SORTABLE,
                timeZone        STRING,
                title           STRING SEARCHABLE,
                updatedAt       TIMESTAMP,
                GRANT WRITE TO FamilyAdmin,
                GRANT WRITE TO "_creator",
                GRANT READ, CREATE TO "_icloud"
            );

            RECORD TYPE EventParticipant (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                comment         STRING,
                createdAt       TIMESTAMP,
                eventID         REFERENCE QUERYABLE,
                respondedAt     TIMESTAMP,
                status          STRING QUERYABLE,
                userID          STRING QUERYABLE,
                GRANT WRITE TO "_creator",
                GRANT READ, CREATE TO "_icloud"
            );

            RECORD TYPE Family (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                adminID         STRING QUERYABLE,
                createdAt       TIMESTAMP,
                inviteCode      STRING QUERYABLE,
                memberCount     INT64,
                name            STRING,
                GRANT WRITE TO FamilyAdmin,
                GRANT WRITE TO "_creator",
                GRANT READ TO "_icloud"
            );

            RECORD TYPE FamilyMember (
                "___createTime"     TIMESTAMP,
                "___createdBy"      REFERENCE,
                "___etag"           STRING,
                "___modTime"        TIMESTAMP,
                "___modifiedBy"     REFERENCE,
                "___recordID"       REFERENCE QUERYABLE,
                familyID            REFERENCE QUERYABLE,
                joinedAt            TIMESTAMP,
                nickname            STRING,
                notificationEnabled INT64,
                role                STRING,
                userID              STRING QUERYABLE,
                GRANT WRITE TO FamilyAdmin,
                GRANT WRITE TO "_creator",
                GRANT READ, CREATE TO "_icloud"
            );

            RECORD TYPE Notification (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                body            STRING,
                createdAt       TIMESTAMP SORTABLE,
                eventID         STRING,
                isRead          INT64,
                readAt          TIMESTAMP,
                title           STRING,
                type            STRING,
                userID          STRING QUERYABLE,
                GRANT READ, CREATE, WRITE TO "_creator"
            );

            RECORD TYPE User (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                appleID         STRING QUERYABLE,
                avatarURL       STRING,
                createdAt       TIMESTAMP,
                lastLoginAt     TIMESTAMP,
                nickname        STRING,
                phoneNumber     ENCRYPTED STRING,
                GRANT READ, CREATE, WRITE TO "_creator"
            );

        \(shareType)

        """

    static let relationshipCheckin = """
        DEFINE SCHEMA

            RECORD TYPE Couple (
                "___createTime"     TIMESTAMP,
                "___createdBy"      REFERENCE,
                "___etag"           STRING,
                "___modTime"        TIMESTAMP,
                "___modifiedBy"     REFERENCE,
                "___recordID"       REFERENCE QUERYABLE,
                ownerUserRecordID   REFERENCE,
                partnerUserRecordID REFERENCE,
                GRANT READ, CREATE, WRITE TO "_creator"
            );

            RECORD TYPE DailyEntry (
                "___createTime"    TIMESTAMP,
                "___createdBy"     REFERENCE,
                "___etag"          STRING,
                "___modTime"       TIMESTAMP,
                "___modifiedBy"    REFERENCE,
                "___recordID"      REFERENCE QUERYABLE,
                authorUserRecordID REFERENCE QUERYABLE,
                couple             REFERENCE,
                date               TIMESTAMP QUERYABLE SORTABLE,
                eveningMood        INT64,
                gratitude          ENCRYPTED STRING,
                morningNeed        ENCRYPTED STRING,
                tomorrowGreat      ENCRYPTED STRING,
                GRANT READ, CREATE, WRITE TO "_creator"
            );

        """

    static let screenTimeRewards = """
        DEFINE SCHEMA

            RECORD TYPE AppRule (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                appToken        STRING QUERYABLE,
                categoryId      STRING,
                childRef        REFERENCE QUERYABLE,
                classification  STRING QUERYABLE,
                createdAt       TIMESTAMP,
                familyRef       REFERENCE QUERYABLE,
                isCategory      INT64,
                modifiedAt      TIMESTAMP QUERYABLE SORTABLE,
                modifiedBy      STRING,
                GRANT READ, CREATE, WRITE TO "_creator"
            );

            RECORD TYPE AuditEntry (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                action          STRING QUERYABLE,
                actorDeviceId   STRING,
                childRef        REFERENCE,
                familyRef       REFERENCE QUERYABLE,
                metadata        STRING,
                timestamp       TIMESTAMP QUERYABLE SORTABLE,
                GRANT READ, CREATE TO "_creator"
            );

            RECORD TYPE ChildAppInventory (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                appCount        INT64,
                appTokens       LIST<STRING>,
                categoryTokens  LIST<STRING>,
                childRef        REFERENCE QUERYABLE,
                deviceId        STRING QUERYABLE,
                familyRef       REFERENCE QUERYABLE,
                lastUpdated     TIMESTAMP QUERYABLE SORTABLE,
                GRANT READ, CREATE, WRITE TO "_creator"
            );

            RECORD TYPE ChildContext (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                childOpaqueId   STRING,
                createdAt       TIMESTAMP,
                displayName     STRING,
                familyRef       REFERENCE QUERYABLE,
                modifiedAt      TIMESTAMP QUERYABLE SORTABLE,
                pairedDeviceIds LIST<STRING>,
                storeName       STRING,
                GRANT READ, CREATE, WRITE TO "_creator"
            );

            RECORD TYPE Family (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                createdAt       TIMESTAMP QUERYABLE,
                familyName      STRING,
                modifiedAt      TIMESTAMP QUERYABLE SORTABLE,
                parentDeviceIds LIST<STRING>,
                GRANT READ, CREATE, WRITE TO "_creator"
            );

            RECORD TYPE PointsLedgerEntry (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                amount          INT64,
                childRef        REFERENCE QUERYABLE,
                deviceId        STRING,
                familyRef       REFERENCE QUERYABLE,
                reason          STRING,
                syncedAt        TIMESTAMP,
                timestamp       TIMESTAMP QUERYABLE SORTABLE,
                type            STRING QUERYABLE,
                GRANT READ, CREATE TO "_creator"
            );

            RECORD TYPE RedemptionWindow (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                childRef        REFERENCE QUERYABLE,
                createdAt       TIMESTAMP,
                deviceId        STRING,
                durationSeconds DOUBLE,
                expiresAt       TIMESTAMP QUERYABLE SORTABLE,
                familyRef       REFERENCE QUERYABLE,
                isActive        INT64 QUERYABLE,
                pointsSpent     INT64,
                startTime       TIMESTAMP QUERYABLE,
                GRANT READ, CREATE, WRITE TO "_creator"
            );

        """

    static let notes = """
        DEFINE SCHEMA

            RECORD TYPE Folder (
                "___createTime" TIMESTAMP,
                "___createdBy"  REFERENCE,
                "___etag"       STRING,
                "___modTime"    TIMESTAMP,
                "___modifiedBy" REFERENCE,
                "___recordID"   REFERENCE QUERYABLE,
                color           BYTES,
                createdAt       TIMESTAMP,
                name            STRING QUERYABLE SORTABLE,
                GRANT READ, CREATE, WRITE TO "_creator"
            );

            RECORD TYPE Note (
                "___createTime"  TIMESTAMP,
                "___createdBy"   REFERENCE,
                "___etag"        STRING,
                "___modTime"     TIMESTAMP,
                "___modifiedBy"  REFERENCE,
                "___recordID"    REFERENCE QUERYABLE,
                "_appVersion"    STRING,
                "_schemaVersion" INT64 QUERYABLE,
                attachment       ASSET,
                content          STRING,
                createdAt        TIMESTAMP QUERYABLE SORTABLE,
                folder           REFERENCE QUERYABLE,
                location         LOCATION,
                pinned           INT64,
                priorityLevel    STRING QUERYABLE,
                privateTags      LIST<ENCRYPTED STRING>,
                readingMinutes   NUMBER PREFERRED AS DOUBLE,
                related          LIST<REFERENCE>,
                reminders        LIST<TIMESTAMP>,
                secret           ENCRYPTED STRING,
                tags             LIST<STRING> QUERYABLE,
                thumbnail        BYTES,
                title            STRING QUERYABLE SEARCHABLE SORTABLE,
                visitedPlace     ENCRYPTED LOCATION,
                GRANT READ, CREATE, WRITE TO "_creator"
            );

            RECORD TYPE NoteV1 (
                "___createTime"  TIMESTAMP,
                "___createdBy"   REFERENCE,
                "___etag"        STRING,
                "___modTime"     TIMESTAMP,
                "___modifiedBy"  REFERENCE,
                "___recordID"    REFERENCE QUERYABLE,
                "_appVersion"    STRING,
                "_schemaVersion" INT64 QUERYABLE,
                body             STRING,
                createdAt        TIMESTAMP QUERYABLE SORTABLE,
                folder           REFERENCE QUERYABLE,
                priority         INT64,
                title            STRING QUERYABLE SORTABLE,
                GRANT READ, CREATE, WRITE TO "_creator"
            );

        """
}
