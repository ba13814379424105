"""The occurrences of an iCalendar file's events, to-dos and journal entries in a window, worked out with
Python's icalendar and dateutil (nothing of ckport's): what a calendar app shows.

Usage: occurrences.py FILE FROM TO ZONE
FROM and TO are UTC times (2026-03-01T00:00:00Z), TO exclusive; ZONE (an IANA name) is the
viewer's, in which DATE values and floating times are read. Prints, per occurrence that
overlaps the window, its UID and its start in UTC milliseconds, tab-separated. Components with
STATUS:CANCELLED are left out. A to-do without DTSTART starts at its DUE.
"""
import datetime
import sys
import zoneinfo

from dateutil.rrule import rrulestr
from icalendar import Calendar

path, low, high, zone_name = sys.argv[1:5]
zone = zoneinfo.ZoneInfo(zone_name)
low = datetime.datetime.fromisoformat(low.replace("Z", "+00:00"))
high = datetime.datetime.fromisoformat(high.replace("Z", "+00:00"))


def aware(value):
    """A DATE as midnight, a floating time as a wall clock, both in the viewer's zone."""
    if not isinstance(value, datetime.datetime):
        value = datetime.datetime(value.year, value.month, value.day)
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone)
    return value


calendar = Calendar.from_ical(open(path, "rb").read())
for component in calendar.walk():
    if component.name not in ("VEVENT", "VTODO", "VJOURNAL") or str(component.get("STATUS", "")) == "CANCELLED":
        continue
    first = component.get("DTSTART") or component.get("DUE")
    if first is None:
        continue
    start = aware(first.dt)
    length = datetime.timedelta(0)
    if component.get("DTSTART") is not None and component.get("DTEND") is not None:
        length = max(aware(component["DTEND"].dt) - start, datetime.timedelta(0))
    starts = [start]
    if component.get("RRULE") is not None:
        rule = rrulestr(component["RRULE"].to_ical().decode("ascii"), dtstart=start)
        # Wall-clock arithmetic in the start's zone, as RFC 5545 counts; the window in UTC.
        starts = rule.between(low - length - datetime.timedelta(days=1), high + datetime.timedelta(days=1), inc=True)
    for at in starts:
        if at < high and (at >= low or at + length > low):
            print(f"{component['UID']}\t{int(at.timestamp() * 1000)}")
