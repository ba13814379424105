import Foundation
import Records

/// How an incoming record combines with a stored record of the same name.
public enum WriteMode: String, Sendable, CaseIterable {
    /// A new record only: an existing record name is an error.
    case insert
    /// Set the fields given, keep the others.
    case upsert
    /// The record becomes exactly what is given: fields not given are cleared.
    case replace
    /// Last writer wins: whichever side has the later `modified` timestamp is kept; a tie, or
    /// an incoming record without a `modified` time, keeps the stored record.
    case newer
}

/// What saving one record did.
public enum SaveOutcome: Sendable {
    case inserted
    case updated
    case unchanged
    case deleted
}

extension WriteMode {
    /// What saving `incoming` in this mode over the stored `existing` record (of the same name
    /// and type) makes of it, whatever the store: nil when the stored record stays as it is
    /// (``newer`` with an incoming record that is not later).
    ///
    /// - Throws: ``SaveRefusal`` for ``insert``, which takes new records only.
    public func combine(_ existing: Record, with incoming: Record) throws -> Record? {
        var result: Record
        switch self {
        case .insert:
            throw SaveRefusal(message: "record '\(incoming.recordName)' already exists (\(Wording.updatingModes))")
        case .upsert:
            result = existing
            for (name, value) in incoming.fields { result.fields[name] = value }
            // Like a field, a link or a share's details the incoming record lacks stays.
            if let parent = incoming.parent { result.parent = parent }
            if let share = incoming.share { result.share = share }
            if let details = incoming.shareDetails { result.shareDetails = details }
        case .replace:
            result = incoming
        case .newer:
            guard let incomingTime = incoming.modified?.timestamp,
                incomingTime > (existing.modified?.timestamp ?? Int64.min)
            else { return nil }
            result = incoming
        }
        result.changeTag = incoming.changeTag ?? existing.changeTag
        result.created = RecordStamp.merged(existing.created, incoming.created)
        result.modified = RecordStamp.merged(existing.modified, incoming.modified)
        return result
    }
}

/// A record the store refuses as it stands (an insert over an existing record, a record name
/// already used by another type). The transaction can go on without it.
public struct SaveRefusal: CKPortError, Sendable {
    public var category: ErrorCategory { .invalidInput }

    public var message: Message
    public var explanation: Message { message }
    public var description: String { message.description }

    public init(message: Message) { self.message = message }
}

extension RecordStamp {
    /// System stamps merge part by part: a source that knows a time but not who or which
    /// device (an .ics, a CSV without those columns) does not erase them.
    public static func merged(_ existing: RecordStamp?, _ incoming: RecordStamp?) -> RecordStamp? {
        guard let incoming else { return existing }
        guard let existing else { return incoming }
        return RecordStamp(
            timestamp: incoming.timestamp, userRecordName: incoming.userRecordName ?? existing.userRecordName,
            deviceID: incoming.deviceID ?? existing.deviceID)
    }
}
