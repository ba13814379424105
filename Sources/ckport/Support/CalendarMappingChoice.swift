import CKPort
import Formats
import Records
import SQLiteStore
import SampleApps
import StoreCore

/// Which calendar mapping an iCalendar import or export uses: the file `--mapping` names, else
/// the mapping of the sample app whose record types the store holds — and then it says so.
enum CalendarMappingChoice {
    static func resolve(_ path: String?, store: any RecordStoring, schema: Schema? = nil, quiet: Bool) throws
        -> CalendarMapping
    {
        let schema = schema ?? store.schema
        if let path {
            try InputFiles.check(path, as: "a mapping")
            do { return try CalendarMapping.load(path: path, schema: schema) } catch {
                throw CommandFailure.invalid(error.description)
            }
        }
        guard let app = SampleApp.withCalendar(holding: schema), let text = app.calendarMappingText else {
            throw CommandFailure.usage(
                "iCalendar needs a mapping from record types to calendar components: pass --mapping FILE (see samples/family-calendar/calendar.yaml)"
            )
        }
        let mapping: CalendarMapping
        do {
            mapping = try CalendarMapping.parse(text, file: "\(app.rawValue) mapping", schema: schema)
        } catch {
            throw CommandFailure.invalid(
                """
                the store holds the \(app.rawValue) sample's record types, but its mapping does not fit them: \(error.description)
                (a store made from an older sample: add the missing fields with `ckport generate --app \(app.rawValue) --schema -o new.ckdb && ckport schema import new.ckdb`, or pass --mapping FILE)
                """)
        }
        if !quiet {
            Console.error(
                "mapping: the \(app.rawValue) sample's (samples/\(app.rawValue)/calendar.yaml); --mapping FILE uses another"
            )
        }
        return mapping
    }
}
