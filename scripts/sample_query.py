"""How many records of a sample app answer the quick start's query, counted from the sample's
own file by Python (nothing of ckport's), as the check of the count ckport's --where gives.

Usage: sample_query.py APP RECORDS.jsonl
"""
import datetime
import json
import sys


def ms(day):
    """Midnight UTC of an ISO day, in milliseconds."""
    moment = datetime.datetime.fromisoformat(day).replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


def value(record, name):
    field = record.get("fields", {}).get(name)
    if field is None:
        return None
    v = field["value"]
    return v["recordName"] if isinstance(v, dict) and "recordName" in v else v


QUERIES = {
    "family-todo": ("Task", lambda r: value(r, "status") == "next" and value(r, "householdId") == "household-1"),
    "family-calendar": ("Event", lambda r: value(r, "familyID") == "family-1" and (value(r, "startDate") or -1) >= ms("2026-03-01")
                        and value(r, "isDeleted") == 0),
    "relationship-checkin": ("DailyEntry", lambda r: r["recordName"].startswith("DailyEntry_2026-01-0") and (value(r, "eveningMood") or 0) >= 1),
    "screen-time-rewards": ("PointsLedgerEntry", lambda r: value(r, "type") in ("redemption", "adjustment")),
    "notes": ("Note", lambda r: "trip" in (value(r, "tags") or [])),
}

app, path = sys.argv[1:3]
record_type, matches = QUERIES[app]
count = 0
with open(path, encoding="utf-8") as handle:
    for line in handle:
        record = json.loads(line)
        if record.get("recordType") == record_type and not record.get("deleted") and matches(record):
            count += 1
print(count)
