"""Egress policy: parse `permissions.network` entries and decide which (host, port, address) an extension may reach.

Entry syntax (case-insensitive; a trailing dot is ignored):
  api.example.com            that host, port 443
  api.example.com:8080       that host, that port
  *.example.com[:port]       any name strictly beneath example.com (not example.com itself), port 443 or the given
  203.0.113.7[:port]         that IPv4 address literal
  [2001:db8::1][:port]       that IPv6 address literal (brackets required when a port follows; optional otherwise)

Invariants:
  - A name is allowed only when an entry matches it and the port; an IP literal only when an IP entry lists it
    (a name entry never allows an address typed directly).
  - After resolution, an address in a special range (loopback, private, link-local, CGNAT, unique-local,
    multicast, unspecified, reserved, cloud metadata) is refused unless that exact address is listed as an IP
    entry. IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry.
  - The caller connects to an address this module accepted (never re-resolves), so DNS rebinding can't swap it.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from .._errors import EgressEntryError

DEFAULT_PORT = 443

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_METADATA = (ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254"))
_SPECIAL_NETS = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
        "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
        "::/128", "::1/128", "fc00::/7", "fe80::/10", "ff00::/8", "64:ff9b:1::/48",
    )
)


@dataclass(frozen=True)
class EgressRule:
    """One parsed entry: `kind` is "host" (exact name), "suffix" (`*.name`) or "ip" (an address literal)."""

    kind: str
    host: str  # lower-case name without trailing dot, suffix without the `*.`, or the address's canonical text
    port: int
    entry: str  # as written in the manifest (for messages)


def parse_ip(text: str) -> IPAddress | None:
    """The address for an IP literal (`1.2.3.4`, `::1`, `[::1]`), IPv4-mapped IPv6 unwrapped; None for a name."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def normalize_host(text: str) -> str:
    """Lower-case, without a trailing dot, IP literals in canonical form (no brackets)."""
    addr = parse_ip(text)
    if addr is not None:
        return str(addr)
    return text.strip().lower().rstrip(".")


def valid_name(name: str) -> bool:
    """A DNS name made of letters, digits, `-` and `_` labels (at most 253 characters)."""
    return 0 < len(name) <= 253 and all(_LABEL.fullmatch(label) for label in name.split("."))


def split_host_port(text: str, default_port: int | None = DEFAULT_PORT) -> tuple[str, int | None]:
    """`host[:port]` / `[v6]:port` / bare v6 -> (host, port); raises ValueError for a bad port."""
    text = text.strip()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError("unclosed '[' in an IPv6 literal")
        host, rest = text[1:end], text[end + 1:]
        if rest and not rest.startswith(":"):
            raise ValueError(f"unexpected {rest!r} after the IPv6 literal")
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:  # a name, or a bare IPv6 literal (several colons, no port)
        host, port_text = text, None
    if port_text is None:
        return host, default_port
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"port {port_text!r} is not a number from 1 to 65535")
    return host, int(port_text)


def parse_entry(entry: str) -> EgressRule:
    """Parse one `permissions.network` entry; raises EgressEntryError saying what is wrong."""
    if not isinstance(entry, str) or not entry.strip():
        raise EgressEntryError(f"{entry!r} is empty; write a host name like 'api.example.com'")
    if "/" in entry or "@" in entry:
        raise EgressEntryError(f"{entry!r}: write a host (optionally ':port'), not a URL")
    try:
        host, port = split_host_port(entry)
    except ValueError as exc:
        raise EgressEntryError(f"{entry!r}: {exc}") from None
    assert port is not None
    addr = parse_ip(host)
    if addr is not None:
        return EgressRule("ip", str(addr), port, entry)
    name = host.lower().rstrip(".")
    if name.startswith("*."):
        suffix = name[2:]
        if "*" in suffix or not valid_name(suffix) or "." not in suffix:
            raise EgressEntryError(
                f"{entry!r}: a wildcard is '*.' followed by a domain with at least two labels, like '*.example.com'"
            )
        return EgressRule("suffix", suffix, port, entry)
    if "*" in name:
        raise EgressEntryError(f"{entry!r}: '*' is allowed only as the first label ('*.example.com')")
    if not valid_name(name):
        raise EgressEntryError(f"{entry!r} is not a valid host name, IP address or '*.domain' pattern")
    return EgressRule("host", name, port, entry)


def is_special(addr: IPAddress) -> bool:
    """True for addresses that reach the host itself or its private networks (never allowed by a name)."""
    if addr in _METADATA:
        return True
    return any(addr.version == net.version and addr in net for net in _SPECIAL_NETS)


class EgressPolicy:
    """The parsed `permissions.network` list of one extension."""

    def __init__(self, entries: list[str]) -> None:
        self.rules = [parse_entry(e) for e in entries]

    def allows_target(self, host: str, port: int) -> EgressRule | None:
        """The rule allowing a requested `host:port` (a name or an IP literal), or None."""
        addr = parse_ip(host)
        if addr is not None:
            text = str(addr)
            return next((r for r in self.rules if r.kind == "ip" and r.host == text and r.port == port), None)
        name = normalize_host(host)
        for rule in self.rules:
            if rule.port != port:
                continue
            if rule.kind == "host" and rule.host == name:
                return rule
            if rule.kind == "suffix" and name.endswith("." + rule.host):
                return rule
        return None

    def address_refusal(self, addr: IPAddress, port: int) -> str | None:
        """Why a resolved address may not be used (None when it may): special ranges need an explicit IP entry."""
        if not is_special(addr):
            return None
        if any(r.kind == "ip" and r.host == str(addr) and r.port == port for r in self.rules):
            return None
        return f"resolves to {addr}, a loopback/private/link-local/metadata address that is not listed"
