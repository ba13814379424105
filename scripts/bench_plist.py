#!/usr/bin/env python3
"""The property-list reference of ckport's benchmark (scripts/bench.sh runs it): Python's
plistlib doing the work ckport's plist export and import do, on the same records.

  bench_plist.py export IN.jsonl OUT.plist   reads ckport's JSON Lines export and writes each
                                             record as a dictionary, values as plist types
                                             (dates as datetime, bytes as data, references
                                             and locations as dictionaries), with plistlib.dump
  bench_plist.py import IN.plist OUT.sqlite  reads the plist with plistlib.load and inserts
                                             each record (name, type, zone, its fields as
                                             JSON) into SQLite in one transaction
"""
import base64
import datetime
import json
import plistlib
import sqlite3
import sys

EPOCH = datetime.datetime(1970, 1, 1)


def plist_value(value, kind):
    if kind.endswith("_LIST"):
        return [plist_value(v, kind[:-5]) for v in value]
    kind = kind.replace("ENCRYPTED_", "")
    if kind == "TIMESTAMP":
        return EPOCH + datetime.timedelta(milliseconds=value)
    if kind == "BYTES":
        return base64.b64decode(value)
    return value


def export(source, target):
    records = []
    with open(source, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            out = {"recordName": record["recordName"], "recordType": record["recordType"],
                   "scope": record.get("scope", "private"), "zoneName": record["zoneID"]["zoneName"]}
            for name, field in record.get("fields", {}).items():
                out[name] = plist_value(field["value"], field["type"])
            records.append(out)
    with open(target, "wb") as handle:
        plistlib.dump(records, handle)


def default(value):
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(type(value).__name__)


def load(source, target):
    with open(source, "rb") as handle:
        records = plistlib.load(handle)
    db = sqlite3.connect(target)
    db.execute("CREATE TABLE IF NOT EXISTS record (recordName TEXT, recordType TEXT, zoneName TEXT, fields TEXT, PRIMARY KEY (recordType, zoneName, recordName))")
    system = {"recordName", "recordType", "scope", "zoneName", "ownerRecordName", "recordChangeTag", "created", "createdBy",
              "createdDevice", "modified", "modifiedBy", "modifiedDevice", "deleted"}
    with db:
        db.executemany("INSERT OR REPLACE INTO record VALUES (?, ?, ?, ?)",
                       ((r["recordName"], r["recordType"], r["zoneName"],
                         json.dumps({k: v for k, v in r.items() if k not in system}, default=default)) for r in records))
    db.close()


if __name__ == "__main__":
    {"export": export, "import": load}[sys.argv[1]](sys.argv[2], sys.argv[3])
