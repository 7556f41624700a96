"""The string formats a grammar can say, as regular expressions over the decoded string.

Each is the format's RFC syntax (RFC 3339 dates and times and Appendix A durations, RFC 4122
UUIDs, RFC 5321 mailboxes, RFC 1123 host names, RFC 6901 pointers); what a grammar cannot count
(days in a month, leap seconds, a host name's total length, IPv6's group count) is left to the check after decoding,
and ``EXACT`` says which are whole in the grammar.
"""

from __future__ import annotations

__all__ = ["EXACT", "FORMATS"]

_DATE = r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
_TIME = r"([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([zZ]|[+-]([01]\d|2[0-3]):[0-5]\d)"
_OCTET = r"(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = rf"({_OCTET}\.){{3}}{_OCTET}"
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = rf"{_LABEL}(\.{_LABEL})*"
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_DUR_TIME = r"T(\d+H(\d+M)?(\d+S)?|\d+M(\d+S)?|\d+S)"
_DUR_DATE = r"(\d+Y(\d+M)?(\d+D)?|\d+M(\d+D)?|\d+D)"
_HEX4 = r"[0-9a-fA-F]"

FORMATS: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": rf"{_DATE}[tT]{_TIME}",
    "duration": rf"P({_DUR_DATE}({_DUR_TIME})?|{_DUR_TIME}|\d+W)",
    "uuid": rf"{_HEX4}{{8}}-{_HEX4}{{4}}-{_HEX4}{{4}}-{_HEX4}{{4}}-{_HEX4}{{12}}",
    "ipv4": _IPV4,
    "hostname": _HOST,
    "email": rf'({_ATOM}(\.{_ATOM})*|"([^"\\]|\\.)*")@({_HOST}|\[{_IPV4}\]|\[IPv6:[0-9A-Fa-f:.]+\])',
    # Narrowed: groups of up to four hex digits, two to eight of them, an IPv4 tail; the check
    # counts the groups and the "::".
    "ipv6": rf"(({_HEX4}{{1,4}})?:){{2,7}}({_HEX4}{{1,4}}|{_IPV4})?",
    "json-pointer": r"(/([^~/]|~[01])*)*",
    "relative-json-pointer": r"(0|[1-9]\d*)(#|(/([^~/]|~[01])*)*)",
}

#: Formats the grammar says whole: nothing is left for the check.
EXACT = frozenset({"uuid", "ipv4", "json-pointer", "relative-json-pointer"})
