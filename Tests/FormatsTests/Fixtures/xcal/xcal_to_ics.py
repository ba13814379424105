"""Converts an xCal document into iCalendar text, as RFC 6321 Section 4 describes, with
nothing but Python's standard library: a reader of xCal that shares no code with ckport.

Usage: xcal_to_ics.py IN.xcal OUT.ics
"""
import sys
import xml.etree.ElementTree as ET

NS = "{urn:ietf:params:xml:ns:icalendar-2.0}"
TEXT_PROPERTIES = set("""calscale method prodid version categories class comment description location
resources status summary transp tzid tzname contact related-to uid action""".split())
DEFAULT_TYPES = {}
for name in TEXT_PROPERTIES:
    DEFAULT_TYPES[name] = "text"
for name in "attach tzurl url".split():
    DEFAULT_TYPES[name] = "uri"
for name in "percent-complete priority repeat sequence".split():
    DEFAULT_TYPES[name] = "integer"
for name in "completed created dtstamp last-modified dtend due dtstart recurrence-id exdate rdate".split():
    DEFAULT_TYPES[name] = "date-time"
for name in "duration trigger".split():
    DEFAULT_TYPES[name] = "duration"
DEFAULT_TYPES.update({"freebusy": "period", "tzoffsetfrom": "utc-offset", "tzoffsetto": "utc-offset",
                      "attendee": "cal-address", "organizer": "cal-address", "rrule": "recur", "exrule": "recur"})
RECUR_ORDER = "rscale freq until count interval bysecond byminute byhour byday bymonthday byyearday byweekno bymonth bysetpos wkst skip".split()


def local(element):
    return element.tag[len(NS):]


def escape(text):
    return text.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,").replace("\r\n", "\\n").replace("\n", "\\n")


def compact(value_type, text):
    """xCal's notation of a value → iCalendar's."""
    if value_type == "date":
        return text.replace("-", "")
    if value_type == "date-time":
        return text.replace("-", "").replace(":", "")
    if value_type == "time":
        return text.replace(":", "")
    if value_type == "utc-offset":
        return text.replace(":", "")
    if value_type == "boolean":
        return text.upper()
    return text


def value_text(element):
    kind = local(element)
    if kind == "period":
        parts = {local(child): child.text or "" for child in element}
        start = compact("date-time", parts["start"])
        end = compact("date-time", parts["end"]) if "end" in parts else parts["duration"]
        return start + "/" + end
    if kind == "recur":
        parts = {}
        for child in element:
            text = child.text or ""
            if local(child) == "until":
                text = compact("date-time" if "T" in text else "date", text)
            parts.setdefault(local(child), []).append(text)
        return ";".join(f"{key.upper()}={','.join(parts[key])}" for key in RECUR_ORDER if key in parts)
    text = element.text or ""
    if kind == "text":
        return escape(text)
    return compact(kind, text)


def quote(value):
    return f'"{value}"' if any(c in value for c in ":;,") else value


def fold(line):
    data = line.encode("utf-8")
    out = []
    while len(data) > 75:
        cut = 75 if not out else 74
        while cut > 0 and (data[cut] & 0xC0) == 0x80:
            cut -= 1
        out.append(data[:cut])
        data = data[cut:]
    out.append(data)
    return b"\r\n ".join(out) + b"\r\n"


def property_line(prop):
    name = local(prop)
    params = []
    values = []
    for child in prop:
        kind = local(child)
        if kind == "parameters":
            for param in child:
                params.append((local(param).upper(), [compact(local(v), v.text or "") for v in param]))
        else:
            values.append(child)
    if name == "geo":
        parts = {local(v): v.text for v in values}
        value = f"{parts['latitude']};{parts['longitude']}"
    elif name == "request-status":
        parts = {local(v): v.text or "" for v in values}
        value = parts["code"] + ";" + escape(parts["description"]) + (";" + escape(parts["data"]) if "data" in parts else "")
    else:
        kind = local(values[0])
        if kind not in ("unknown",) and kind != DEFAULT_TYPES.get(name, "text"):
            params.append(("VALUE", [kind.upper()]))
        value = ",".join(value_text(v) for v in values)
    head = name.upper() + "".join(f";{key}={','.join(quote(v) for v in vals)}" for key, vals in params)
    return head + ":" + value


def component(element, out):
    out.append(fold("BEGIN:" + local(element).upper()))
    for part in element:
        if local(part) == "properties":
            for prop in part:
                out.append(fold(property_line(prop)))
        elif local(part) == "components":
            for child in part:
                component(child, out)
    out.append(fold("END:" + local(element).upper()))


def main():
    root = ET.parse(sys.argv[1]).getroot()
    if root.tag != NS + "icalendar":
        print("xcal_to_ics: the root is not xCal's <icalendar>", file=sys.stderr)
        sys.exit(1)
    out = []
    for calendar in root:
        component(calendar, out)
    with open(sys.argv[2], "wb") as handle:
        handle.write(b"".join(out))


main()
