"""Removes the extension properties and parameters from an xCal document, so that the rest
can be validated with RFC 6321's RELAX NG schema, and checks their form on the way.

Usage: xcal_extensions.py IN.xcal OUT.xml

RFC 6321 Section 5 writes a property or parameter RFC 5545 does not define as an element of
its lower-cased name holding typed values (<unknown> when the type is not known); the
appendix's schema has no place for them. Exit 1, naming the element, when one has another
form; else write OUT and print how many were removed. Elements of other namespaces (which
xCal readers leave out) are removed too.
"""
import sys
import xml.etree.ElementTree as ET

NS = "{urn:ietf:params:xml:ns:icalendar-2.0}"
PROPERTIES = set("""calscale method prodid version attach categories class comment description geo
location percent-complete priority resources status summary completed dtend due dtstart duration
freebusy transp tzid tzname tzoffsetfrom tzoffsetto tzurl attendee contact organizer recurrence-id
related-to url uid exdate rdate rrule action repeat trigger created dtstamp last-modified sequence
request-status""".split())
PARAMETERS = set("""altrep cn cutype delegated-from delegated-to dir encoding fmttype fbtype
language member partstat range related reltype role rsvp sent-by tzid""".split())
VALUES = set("""binary boolean cal-address date date-time duration float integer period recur
text time uri utc-offset unknown""".split())


def local(element):
    return element.tag[len(NS):] if element.tag.startswith(NS) else None


def fail(message):
    print("xcal_extensions: " + message, file=sys.stderr)
    sys.exit(1)


def check_values(element, what, allow_parameters):
    children = list(element)
    if allow_parameters and children and local(children[0]) == "parameters":
        for parameter in children[0]:
            check_values(parameter, f"parameter <{local(parameter)}> of {what}", False)
        children = children[1:]
    if not children:
        fail(f"{what} has no value")
    for child in children:
        if local(child) not in VALUES:
            fail(f"{what} holds <{child.tag}>, which is not an xCal value type")


def main():
    tree = ET.parse(sys.argv[1])
    removed = {"properties": 0, "parameters": 0, "foreign": 0}
    for holder in list(tree.iter()):
        for child in list(holder):
            if not child.tag.startswith(NS):
                holder.remove(child)
                removed["foreign"] += 1
    for holder in tree.iter():
        name = local(holder)
        if name == "properties":
            for prop in list(holder):
                if local(prop) not in PROPERTIES:
                    check_values(prop, f"property <{local(prop)}>", True)
                    holder.remove(prop)
                    removed["properties"] += 1
        elif name == "parameters":
            for param in list(holder):
                if local(param) not in PARAMETERS:
                    check_values(param, f"parameter <{local(param)}>", False)
                    holder.remove(param)
                    removed["parameters"] += 1
    # A <parameters> left empty goes too (the schema allows it only for some properties).
    for holder in tree.iter():
        for child in list(holder):
            if local(child) == "parameters" and len(child) == 0:
                holder.remove(child)
    ET.register_namespace("", NS[1:-1])
    tree.write(sys.argv[2], encoding="UTF-8", xml_declaration=True)
    print(f"removed {removed['properties']} extension properties, {removed['parameters']} extension parameters"
          f" and {removed['foreign']} elements of other namespaces")


main()
