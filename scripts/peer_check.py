"""Reads ckport's outputs with tools ckport did not write, and compares what they see.

    python3 scripts/peer_check.py jsonl FILE.jsonl COUNT
    python3 scripts/peer_check.py json FILE.json COUNT
    python3 scripts/peer_check.py csv FILE.csv RECORDS.jsonl TYPE
    python3 scripts/peer_check.py bundle FILE.ckbundle COUNT
    python3 scripts/peer_check.py plist-types RECORDS.jsonl
    python3 scripts/peer_check.py plist FILE.plist RECORDS.jsonl

Each prints one line saying what it checked, or exits 1 naming the first difference.
Only the standard library: json, csv, tarfile, gzip, hashlib, base64, plistlib.
"""
import base64
import csv
import datetime
import plistlib
import gzip
import hashlib
import json
import sys
import tarfile


def fail(message):
    print("peer check: " + message, file=sys.stderr)
    sys.exit(1)


def check_jsonl(path, count):
    records = 0
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            try:
                record = json.loads(line)
            except ValueError as error:
                fail(f"{path}:{number}: Python's json cannot read the line: {error}")
            if "recordName" not in record or "recordType" not in record:
                fail(f"{path}:{number}: a record without recordName or recordType")
            records += 1
    if records != count:
        fail(f"{path}: {records} records, expected {count}")
    print(f"json (Python): {path}: {records} records, every line a JSON object")


def check_json(path, count):
    with open(path, encoding="utf-8") as handle:
        try:
            document = json.load(handle)
        except ValueError as error:
            fail(f"{path}: Python's json cannot read the document: {error}")
    records = document.get("records") if isinstance(document, dict) else None
    if not isinstance(records, list) or len(records) != count:
        fail(f"{path}: expected {{\"records\": [...]}} with {count} records")
    print(f"json (Python): {path}: one document, {len(records)} records")


def cell_of(value, field_type):
    """The text ckport's CSV holds for a canonical JSON value, for the types compared here
    (lists, locations and assets are not): a DOUBLE as a float to compare, the others as text."""
    if field_type == "STRING":
        return value
    if field_type == "INT64":
        return str(value)
    if field_type == "BYTES":
        return value  # Base64 in both
    if field_type == "TIMESTAMP":
        # UTC with milliseconds, as RFC 3339 writes it: 2026-02-22T21:45:00.000Z.
        moment = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(milliseconds=value)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value % 1000:03d}Z"
    if field_type == "DOUBLE":
        return float(value)
    if field_type == "REFERENCE":
        return value["recordName"]
    return None


def check_csv(path, jsonl_path, record_type):
    expected = {}
    with open(jsonl_path, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if record["recordType"] == record_type:
                # A name may stand in several zones (a zone-wide share is cloudkit.zoneshare
                # in each): both files keep the export's order, so the first one left matches.
                expected.setdefault(record["recordName"], []).append(record.get("fields", {}))
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        fail(f"{path}: no header")
    header = rows[0]
    if "recordName" not in header:
        fail(f"{path}: no recordName column")
    name_column = header.index("recordName")
    compared = 0
    for number, row in enumerate(rows[1:], 2):
        if len(row) != len(header):
            fail(f"{path}:{number}: {len(row)} cells, the header has {len(header)}")
        name = row[name_column]
        if name not in expected:
            fail(f"{path}:{number}: record {name!r} is not in {jsonl_path}")
        fields = expected[name].pop(0)
        if not expected[name]:
            del expected[name]
        for column, text in zip(header, row):
            field = fields.get(column)
            if field is None:
                continue
            wanted = cell_of(field["value"], field.get("type"))
            if isinstance(wanted, float):
                try:
                    same = float(text) == wanted
                except ValueError:
                    same = False
                if not same:
                    fail(f"{path}:{number}: {name}.{column}: Python's csv reads {text!r}, the JSON export says {wanted!r}")
            elif wanted is not None and wanted != text:
                fail(f"{path}:{number}: {name}.{column}: Python's csv reads {text!r}, the JSON export says {wanted!r}")
            if wanted is not None:
                compared += 1
    if expected:
        fail(f"{path}: {len(expected)} {record_type} records missing, e.g. {next(iter(expected))}")
    if len(rows) < 2 or compared == 0:
        fail(f"{path}: no {record_type} cell was compared ({len(rows) - 1} rows): an empty sheet proves nothing")
    print(f"csv (Python): {path}: {len(rows) - 1} rows × {len(header)} columns, {compared} STRING/INT64/BYTES/TIMESTAMP/DOUBLE/REFERENCE cells equal to the JSON export")


def check_bundle(path, count):
    with gzip.open(path, "rb") as handle:
        while handle.read(1 << 20):
            pass
    with tarfile.open(path, "r:gz") as archive:
        members = archive.getmembers()
        if not members or members[0].name != "manifest.json":
            fail(f"{path}: manifest.json is not the first member")
        manifest = json.load(archive.extractfile(members[0]))
        listed = {member["path"]: member for member in manifest["members"]}
        seen = 0
        records = 0
        for member in members[1:]:
            if not member.isfile():
                fail(f"{path}: {member.name} is not a regular file")
            entry = listed.get(member.name)
            if entry is None:
                fail(f"{path}: {member.name} is not in the manifest")
            data = archive.extractfile(member).read()
            if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
                fail(f"{path}: {member.name}: size or SHA-256 differs from the manifest")
            if member.name.endswith(".jsonl"):
                lines = data.decode("utf-8").splitlines()
                for line in lines:
                    json.loads(line)
                if entry.get("records") != len(lines):
                    fail(f"{path}: {member.name} holds {len(lines)} records, the manifest says {entry.get('records')}")
                records += len(lines)
            seen += 1
        if seen != len(listed):
            fail(f"{path}: {len(listed) - seen} manifest members missing")
    if records != count:
        fail(f"{path}: {records} records, expected {count}")
    print(f"tar and gzip (Python): {path}: {seen + 1} members, every size and SHA-256 as the manifest says, {records} records")


# Keys of a plain record (and of a property list's record dictionary) that are not fields.
SYSTEM_KEYS = {"recordName", "recordType", "scope", "zoneName", "ownerRecordName", "recordChangeTag", "created",
               "createdBy", "createdDevice", "modified", "modifiedBy", "modifiedDevice", "deleted",
               "parentRecordName", "shareRecordName", "shareDetails"}


def plist_type_set(jsonl_path):
    """The record types a property list can hold: those without a field named like a system key."""
    types, refused = set(), set()
    with open(jsonl_path, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            types.add(record["recordType"])
            if SYSTEM_KEYS & set(record.get("fields", {})):
                refused.add(record["recordType"])
    return types - refused


def plist_types(jsonl_path):
    print(" ".join(sorted(plist_type_set(jsonl_path))))


def plist_value(value, field_type):
    """What plistlib should read for a canonical JSON value of a CloudKit type."""
    if field_type.endswith("_LIST") or field_type == "LIST":
        element = field_type[:-5] if field_type.endswith("_LIST") else "STRING"
        return [plist_value(v, element) for v in value]
    field_type = field_type.replace("ENCRYPTED_", "")
    if field_type == "TIMESTAMP":
        return plist_time(value)
    if field_type == "BYTES":
        return base64.b64decode(value)
    if field_type == "REFERENCE":
        out = {"recordName": value["recordName"]}
        if value.get("action", "NONE") != "NONE":
            out["action"] = value["action"]
        return out
    if field_type == "LOCATION":
        return {k: (plist_time(v) if k == "timestamp" else v) for k, v in value.items()}
    return value


def plist_time(ms):
    """A whole second is a plist date; other instants are ISO-8601 text with milliseconds."""
    moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=ms)
    if ms % 1000 == 0:
        return moment
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def check_plist(path, jsonl_path):
    with open(path, "rb") as handle:
        try:
            records = plistlib.load(handle)
        except Exception as error:
            fail(f"{path}: Python's plistlib cannot read it: {error}")
    if not isinstance(records, list):
        fail(f"{path}: the top level is not an array")
    expected = {}
    with open(jsonl_path, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            expected[(record["recordType"], record["recordName"], record["zoneID"]["zoneName"], record["zoneID"].get("ownerRecordName", "__defaultOwner__"))] = record
    # Every record of the types the property list holds must be in it, once.
    types = plist_type_set(jsonl_path)
    wanted_keys = {key for key in expected if key[0] in types}
    found_keys = set()
    compared = 0
    for index, record in enumerate(records):
        # The plist leaves the default owner out.
        key = (record.get("recordType"), record.get("recordName"), record.get("zoneName"), record.get("ownerRecordName", "__defaultOwner__"))
        want = expected.get(key)
        if want is None:
            fail(f"{path}: record {index} {key} is not in {jsonl_path}")
        if key in found_keys:
            fail(f"{path}: record {index} {key} is there twice")
        found_keys.add(key)
        if record.get("zoneName") != want["zoneID"]["zoneName"] or record.get("scope") != want.get("scope", "private"):
            fail(f"{path}: {key}: zone or scope differs")
        if "created" in want and record.get("created") != plist_time(want["created"]["timestamp"]):
            fail(f"{path}: {key}: created is {record.get('created')!r}, expected {plist_time(want['created']['timestamp'])!r}")
        # Links as strings, a share's details as the JSON text of what the JSON export has
        # beside the record's own keys.
        for plist_key, json_key in (("parentRecordName", "parent"), ("shareRecordName", "share")):
            if record.get(plist_key) != (want.get(json_key) or {}).get("recordName"):
                fail(f"{path}: {key}: {plist_key} is {record.get(plist_key)!r}, the JSON export says {want.get(json_key)!r}")
        own = {"recordName", "recordType", "scope", "zoneID", "recordChangeTag", "created", "modified", "deleted", "fields", "parent", "share"}
        details = {k: v for k, v in want.items() if k not in own}
        if (json.loads(record["shareDetails"]) if "shareDetails" in record else {}) != details:
            fail(f"{path}: {key}: shareDetails {record.get('shareDetails')!r} differ from the JSON export's {details!r}")
        fields = {k: v for k, v in record.items() if k not in SYSTEM_KEYS}
        if set(fields) != set(want.get("fields", {})):
            fail(f"{path}: {key}: fields {sorted(fields)} differ from {sorted(want.get('fields', {}))}")
        for name, field in want.get("fields", {}).items():
            wanted = plist_value(field["value"], field["type"])
            if fields[name] != wanted:
                fail(f"{path}: {key}.{name}: plistlib reads {fields[name]!r}, the JSON export says {wanted!r}")
            compared += 1
    if not records or compared == 0:
        fail(f"{path}: no record was compared: an empty array proves nothing")
    if found_keys != wanted_keys:
        fail(f"{path}: {len(wanted_keys - found_keys)} records of its types are missing, e.g. {sorted(wanted_keys - found_keys)[:1]}")
    print(f"plistlib (Python): {path}: {len(records)} records, {compared} fields equal to the JSON export, each as its plist type")


def main(arguments):
    if len(arguments) < 2:
        fail(__doc__)
    kind = arguments[0]
    if kind == "jsonl":
        check_jsonl(arguments[1], int(arguments[2]))
    elif kind == "json":
        check_json(arguments[1], int(arguments[2]))
    elif kind == "csv":
        check_csv(arguments[1], arguments[2], arguments[3])
    elif kind == "bundle":
        check_bundle(arguments[1], int(arguments[2]))
    elif kind == "plist-types":
        plist_types(arguments[1])
    elif kind == "plist":
        check_plist(arguments[1], arguments[2])
    else:
        fail(f"unknown check {kind}")


if __name__ == "__main__":
    main(sys.argv[1:])
