"""Compares two iCalendar files component by component with Python's icalendar.

Usage: compare_calendars.py [--xcal] ORIGINAL EXPORTED
Exit 0 when every component of ORIGINAL (matched by kind, UID and RECURRENCE-ID, or TZID) is in
EXPORTED with the same properties (name, parameters and value, in order), the same
sub-components, and nothing more; and the calendar's own properties agree. Otherwise exit 1
and print each difference.

--xcal: EXPORTED went through xCal (RFC 6321), whose value elements say a value's type, so a
VALUE parameter that names the property's default type (ATTACH;VALUE=URI) cannot survive it
and is not compared.
"""
import sys
import icalendar


XCAL = "--xcal" in sys.argv
if XCAL:
    sys.argv.remove("--xcal")
DEFAULT_TYPES = {"ATTACH": "URI", "URL": "URI", "TZURL": "URI", "DTSTART": "DATE-TIME", "DTEND": "DATE-TIME",
                 "DUE": "DATE-TIME", "RECURRENCE-ID": "DATE-TIME", "EXDATE": "DATE-TIME", "RDATE": "DATE-TIME",
                 "TRIGGER": "DURATION", "DURATION": "DURATION", "ATTENDEE": "CAL-ADDRESS", "ORGANIZER": "CAL-ADDRESS"}


def properties(component):
    out = []
    for name, value in component.property_items(recursive=False, sorted=False):
        if name in ("BEGIN", "END"):
            continue
        params = sorted((k, str(v)) for k, v in getattr(value, "params", {}).items()
                        if not (XCAL and k == "VALUE" and str(v).upper() == DEFAULT_TYPES.get(name)))
        text = value.to_ical() if hasattr(value, "to_ical") else str(value).encode()
        out.append((name, params, text))
    return out


def describe(component):
    return {
        "properties": properties(component),
        "components": [(sub.name, describe(sub)) for sub in component.subcomponents],
    }


def key(component):
    uid = str(component.get("UID", ""))
    recurrence = component.get("RECURRENCE-ID")
    tzid = str(component.get("TZID", ""))
    return (component.name, uid, recurrence.to_ical() if recurrence is not None else b"", tzid)


def load(path):
    with open(path, "rb") as handle:
        calendar = icalendar.Calendar.from_ical(handle.read())
    parts = {}
    for component in calendar.subcomponents:
        parts.setdefault(key(component), []).append(describe(component))
    return calendar, parts


def main():
    original, want = load(sys.argv[1])
    exported, got = load(sys.argv[2])
    problems = []
    if properties(original) != properties(exported):
        problems.append(f"calendar properties differ:\n  {properties(original)}\n  {properties(exported)}")
    for k in want:
        if k not in got:
            problems.append(f"missing {k}")
        elif want[k] != got[k]:
            problems.append(f"differs {k}:\n  {want[k]}\n  {got[k]}")
    for k in got:
        if k not in want:
            problems.append(f"extra {k}")
    for problem in problems:
        print(problem)
    count = sum(len(v) for v in want.values())
    print(f"{sys.argv[1]}: {count} components compared, {len(problems)} differences")
    sys.exit(1 if problems else 0)


main()
