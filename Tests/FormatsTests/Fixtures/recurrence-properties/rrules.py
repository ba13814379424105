"""Expands recurrence rules with python-dateutil's rrule, an implementation of RFC 5545 that
is not ckport's: reads a JSON list of {"start": "YYYYMMDDTHHMMSS", "rule": "FREQ=..."} (floating
times) and prints, per case, the occurrences up to 2100-01-01 as basic date-times, one JSON list
per line."""
import json
import sys
from datetime import datetime

from dateutil.rrule import rrulestr

END = datetime(2100, 1, 1)

def main():
    cases = json.load(open(sys.argv[1]))
    for case in cases:
        start = datetime.strptime(case["start"], "%Y%m%dT%H%M%S")
        rule = rrulestr(case["rule"], dtstart=start)
        found = []
        for occurrence in rule:
            if occurrence >= END or len(found) > 5000:
                break
            found.append(occurrence.strftime("%Y%m%dT%H%M%S"))
        print(json.dumps(found))

main()
