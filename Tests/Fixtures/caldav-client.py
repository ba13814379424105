#!/usr/bin/env python3
"""What a CalDAV collection holds, and changes to it, through the python `caldav` client
(3.6.0, https://github.com/python-caldav/caldav) and `icalendar`: a client nobody on ckport
wrote, for the tests of `ckport calendar publish` and `pull`.

    caldav-client.py list URL            each event of the collection, as JSON by UID:
                                         its ETag, SUMMARY, DTSTART, DTEND, RRULE, attendees
    caldav-client.py file PATH           the same of an .ics file (ckport export's)
    caldav-client.py dump URL DIR        each resource's text into DIR/N.ics
    caldav-client.py mkcalendar URL
    caldav-client.py create URL UID SUMMARY START END [LINE]
    caldav-client.py edit URL UID SUMMARY
    caldav-client.py delete URL UID

The user and password, where the server wants them, come from $CALDAV_USER and the file named
by $CALDAV_PASSWORD_FILE.
"""
import base64
import json
import os
import sys
import urllib.request

import caldav
import icalendar


def client(url):
    user = os.environ.get("CALDAV_USER")
    password = None
    if os.environ.get("CALDAV_PASSWORD_FILE"):
        with open(os.environ["CALDAV_PASSWORD_FILE"]) as f:
            password = f.readline().strip()
    return caldav.DAVClient(url=url, username=user, password=password)


def raw(url):
    """A resource's bytes as the server sends them, with urllib (no client between)."""
    request = urllib.request.Request(url)
    authorize(request)
    with urllib.request.urlopen(request) as answer:
        return answer.read()


def authorize(request):
    user = os.environ.get("CALDAV_USER")
    if user:
        with open(os.environ["CALDAV_PASSWORD_FILE"]) as f:
            password = f.readline().strip()
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")


def collection(url):
    return caldav.Calendar(client=client(url), url=url)


def text(value):
    if value is None:
        return None
    if hasattr(value, "to_ical"):
        return value.to_ical().decode()
    return str(value)


def describe(component):
    attendees = component.get("ATTENDEE") or []
    if not isinstance(attendees, list):
        attendees = [attendees]
    start = component.get("DTSTART")
    end = component.get("DTEND")
    return {
        "summary": str(component.get("SUMMARY")) if component.get("SUMMARY") is not None else None,
        "dtstart": start.dt.isoformat() if start is not None else None,
        "dtend": end.dt.isoformat() if end is not None else None,
        "rrule": text(component.get("RRULE")),
        "attendees": sorted(
            f"{str(a)} {a.params.get('PARTSTAT', '')}" for a in attendees
        ),
    }


def events_of(calendar_text):
    calendar = icalendar.Calendar.from_ical(calendar_text)
    return [c for c in calendar.walk() if c.name in ("VEVENT", "VTODO")]


def main():
    command = sys.argv[1]
    if command == "file":
        with open(sys.argv[2], "rb") as f:
            found = {str(c["UID"]): describe(c) for c in events_of(f.read())}
        print(json.dumps(found, sort_keys=True))
    elif command == "list":
        found = {}
        for event in collection(sys.argv[2]).events():
            for component in events_of(event.data):
                entry = describe(component)
                entry["href"] = str(event.url)
                entry["etag"] = event.props.get("{DAV:}getetag") if hasattr(event, "props") else None
                found[str(component["UID"])] = entry
        # ETags as the server gives them now, by PROPFIND of each resource.
        for uid, entry in found.items():
            resource = caldav.CalendarObjectResource(client=client(sys.argv[2]), url=entry["href"])
            props = resource.get_properties([caldav.elements.dav.GetEtag()])
            entry["etag"] = props.get("{DAV:}getetag")
        print(json.dumps(found, sort_keys=True))
    elif command == "dump":
        # The bytes as the server sends them (the client's `data` has its line ends made LF).
        os.makedirs(sys.argv[3], exist_ok=True)
        for number, event in enumerate(collection(sys.argv[2]).events()):
            with open(os.path.join(sys.argv[3], f"{number}.ics"), "wb") as f:
                f.write(raw(str(event.url)))
    elif command == "mkcalendar":
        request = urllib.request.Request(sys.argv[2], method="MKCALENDAR")
        authorize(request)
        with urllib.request.urlopen(request) as answer:
            assert answer.status == 201, answer.status
    elif command == "create":
        url, uid, summary, start, end = sys.argv[2:7]
        # An optional line more in the event, as another program might write it.
        extra = sys.argv[7] + "\r\n" if len(sys.argv) > 7 else ""
        collection(url).save_event(
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//python caldav test//EN\r\nBEGIN:VEVENT\r\n"
            f"UID:{uid}\r\nDTSTAMP:20260301T080000Z\r\nDTSTART:{start}\r\nDTEND:{end}\r\n"
            f"SUMMARY:{summary}\r\n{extra}END:VEVENT\r\nEND:VCALENDAR\r\n"
        )
    elif command == "edit":
        url, uid, summary = sys.argv[2:5]
        event = collection(url).event_by_uid(uid)
        calendar = icalendar.Calendar.from_ical(event.data)
        for component in calendar.walk("VEVENT"):
            component["SUMMARY"] = icalendar.vText(summary)
            component["SEQUENCE"] = int(component.get("SEQUENCE", 0)) + 1
        event.data = calendar.to_ical().decode()
        event.save()
    elif command == "delete":
        url, uid = sys.argv[2:4]
        collection(url).event_by_uid(uid).delete()
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
