#!/usr/bin/env python3
"""The calendar half of ckport's benchmark (scripts/bench.sh runs it).

  bench_calendar.py data N OUT.jsonl     family-calendar records: one family, four users,
                                         N events with three participants each
  bench_calendar.py export IN.jsonl OUT.ics
                                         the reference export: Python's icalendar package
                                         turns the same records into VEVENTs with ATTENDEEs
                                         and VALARMs
  bench_calendar.py import IN.ics OUT.sqlite
                                         the reference import: icalendar parses the file and
                                         the events and their attendees go into SQLite
"""
import json
import random
import sqlite3
import sys
from datetime import datetime, timedelta, timezone

ZONE = {"zoneName": "family-1-zone", "ownerRecordName": "_4f00e3e229b648635c6f63dca8da05ef"}
USERS = [("user-1-1", "Amara", "amara.muller@icloud.com"), ("user-1-2", "Jonas", "jonas.muller@icloud.com"),
         ("user-1-3", "Hana", "hana.muller@icloud.com"), ("user-1-4", "Theo", "theo.muller@icloud.com")]
TITLES = ["Swim training", "Dentist", "Parent evening", "Grandma's birthday", "Piano lesson", "Football match",
          "Road trip to the lake", "School play", "Vet appointment", "Dinner with the Okafors"]
PLACES = ["Aquatic Centre, Pool B", "Lincoln Elementary; room 12", "Dr. Weiss", "Lake Tahoe", "", "Home"]
CATEGORIES = ["family", "school", "sports", "health", "social"]
STATUSES = ["pending", "accepted", "declined", "tentative"]
EPOCH = 1767225600000  # 2026-01-01T00:00:00Z


def field(value, kind):
    return {"value": value, "type": kind}


def data(count, path):
    rng = random.Random(7)
    with open(path, "w", encoding="utf-8") as out:
        def emit(name, kind, fields, zone=ZONE, scope="shared"):
            record = {"recordName": name, "recordType": kind, "scope": scope, "zoneID": zone, "fields": fields}
            out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")

        default_zone = {"zoneName": "_defaultZone", "ownerRecordName": "__defaultOwner__"}
        for name, nickname, email in USERS:
            emit(name, "User", {"nickname": field(nickname, "STRING"), "appleID": field(email, "STRING"),
                                "createdAt": field(EPOCH, "TIMESTAMP")}, zone=default_zone, scope="private")
        emit("family-1", "Family", {"name": field("The Müllers", "STRING"), "adminID": field("user-1-1", "STRING"),
                                    "createdAt": field(EPOCH, "TIMESTAMP")})
        for e in range(1, count + 1):
            start = EPOCH + rng.randrange(0, 365 * 24) * 3_600_000
            created = start - rng.randrange(1, 60) * 86_400_000
            name = f"event-{e:07d}"
            fields = {
                "title": field(rng.choice(TITLES), "STRING"),
                "category": field(rng.choice(CATEGORIES), "STRING"),
                "startDate": field(start, "TIMESTAMP"),
                "endDate": field(start + rng.choice([30, 60, 90, 120]) * 60_000, "TIMESTAMP"),
                "createdAt": field(created, "TIMESTAMP"),
                "updatedAt": field(created + 3_600_000, "TIMESTAMP"),
                "creatorID": field(rng.choice(USERS)[0], "STRING"),
                "familyID": field({"recordName": "family-1", "action": "DELETE_SELF"}, "REFERENCE"),
                "isDeleted": field(0, "INT64"),
            }
            place = rng.choice(PLACES)
            if place:
                fields["location"] = field(place, "STRING")
            if e % 3 == 0:
                fields["description"] = field("Bring water, a towel and the permission slip.\nPick-up at 6.", "STRING")
            if e % 2 == 0:
                fields["reminderTime"] = field(start - 3_600_000, "TIMESTAMP")
            emit(name, "Event", fields)
            for p, user in enumerate(rng.sample(USERS, 3), 1):
                emit(f"{name}-{p}", "EventParticipant", {
                    "eventID": field({"recordName": name, "action": "DELETE_SELF"}, "REFERENCE"),
                    "userID": field(user[0], "STRING"),
                    "status": field(rng.choice(STATUSES), "STRING"),
                    "createdAt": field(created, "TIMESTAMP"),
                })


def utc(ms):
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def export(source, target):
    from icalendar import Alarm, Calendar, Event, vCalAddress, vText

    users, events, participants = {}, [], {}
    family = None
    with open(source, encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            kind, fields = record["recordType"], record["fields"]
            if kind == "User":
                users[record["recordName"]] = (fields["nickname"]["value"], fields["appleID"]["value"])
            elif kind == "Family":
                family = fields["name"]["value"]
            elif kind == "Event":
                events.append(record)
            elif kind == "EventParticipant":
                participants.setdefault(fields["eventID"]["value"]["recordName"], []).append(fields)
    partstat = {"pending": "NEEDS-ACTION", "accepted": "ACCEPTED", "declined": "DECLINED", "tentative": "TENTATIVE"}
    calendar = Calendar()
    calendar.add("prodid", "-//ckport benchmark//icalendar//EN")
    calendar.add("version", "2.0")
    calendar.add("calscale", "GREGORIAN")
    calendar.add("x-wr-calname", family)
    stamp = utc(EPOCH)
    for record in events:
        fields = record["fields"]
        event = Event()
        event.add("uid", record["recordName"])
        event.add("dtstamp", stamp)
        event.add("summary", fields["title"]["value"])
        if "description" in fields:
            event.add("description", fields["description"]["value"])
        if "location" in fields:
            event.add("location", fields["location"]["value"])
        event.add("dtstart", utc(fields["startDate"]["value"]))
        event.add("dtend", utc(fields["endDate"]["value"]))
        event.add("categories", [fields["category"]["value"]])
        event.add("created", utc(fields["createdAt"]["value"]))
        event.add("last-modified", utc(fields["updatedAt"]["value"]))
        event.add("sequence", 0)
        nickname, email = users[fields["creatorID"]["value"]]
        organizer = vCalAddress("mailto:" + email)
        organizer.params["cn"] = vText(nickname)
        event["organizer"] = organizer
        for participant in participants.get(record["recordName"], []):
            nickname, email = users[participant["userID"]["value"]]
            attendee = vCalAddress("mailto:" + email)
            attendee.params["cn"] = vText(nickname)
            attendee.params["role"] = vText("REQ-PARTICIPANT")
            attendee.params["partstat"] = vText(partstat[participant["status"]["value"]])
            event.add("attendee", attendee, encode=0)
        if "reminderTime" in fields:
            alarm = Alarm()
            alarm.add("action", "DISPLAY")
            alarm.add("description", fields["title"]["value"])
            alarm.add("trigger", timedelta(milliseconds=fields["reminderTime"]["value"] - fields["startDate"]["value"]))
            event.add_component(alarm)
        calendar.add_component(event)
    with open(target, "wb") as out:
        out.write(calendar.to_ical())


def import_(source, target):
    from icalendar import Calendar

    with open(source, "rb") as handle:
        calendar = Calendar.from_ical(handle.read())
    db = sqlite3.connect(target)
    db.execute("CREATE TABLE IF NOT EXISTS event (uid TEXT PRIMARY KEY, title TEXT, description TEXT, location TEXT, "
               "category TEXT, start INTEGER, end INTEGER, created INTEGER, modified INTEGER, organizer TEXT, reminder INTEGER)")
    db.execute("CREATE TABLE IF NOT EXISTS participant (id TEXT PRIMARY KEY, event TEXT, address TEXT, status TEXT)")

    def ms(value):
        return int(value.dt.timestamp() * 1000) if value is not None else None

    events, attendees = [], []
    for component in calendar.walk("VEVENT"):
        uid = str(component.get("UID"))
        start = ms(component.get("DTSTART"))
        reminder = None
        for alarm in component.walk("VALARM"):
            reminder = start + int(alarm.get("TRIGGER").dt.total_seconds() * 1000)
        categories = component.get("CATEGORIES")
        events.append((uid, str(component.get("SUMMARY")), component.get("DESCRIPTION"), component.get("LOCATION"),
                       categories.cats[0] if categories is not None else None, start, ms(component.get("DTEND")),
                       ms(component.get("CREATED")), ms(component.get("LAST-MODIFIED")), str(component.get("ORGANIZER")), reminder))
        found = component.get("ATTENDEE") or []
        for attendee in (found if isinstance(found, list) else [found]):
            attendees.append((uid + "_" + str(attendee), uid, str(attendee), attendee.params.get("PARTSTAT")))
    with db:
        db.executemany("INSERT OR REPLACE INTO event VALUES (?,?,?,?,?,?,?,?,?,?,?)", events)
        db.executemany("INSERT OR REPLACE INTO participant VALUES (?,?,?,?)", attendees)
    db.close()


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "data" and len(sys.argv) == 4:
        data(int(sys.argv[2]), sys.argv[3])
    elif command == "export" and len(sys.argv) == 4:
        export(sys.argv[2], sys.argv[3])
    elif command == "import" and len(sys.argv) == 4:
        import_(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
