"""`IAM_DNS_NAMESERVERS`: the nameservers a domain's DNS proof asks (sso.dns_proof), `address` or
`address:port`, comma-separated; none for the system's resolvers. Read apart from dnspython, so that every
process checks the setting at its start (sso.apps) without importing dnspython, which only a domain's
verification needs (a worker never does: 25 ms of its start)."""

import ipaddress

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def configured() -> list[tuple[str, int]]:
    """Each configured nameserver's address and port; ImproperlyConfigured names the first malformed one."""
    return [_address_and_port(entry) for entry in settings.IAM_DNS_NAMESERVERS]


def _address_and_port(entry: str) -> tuple[str, int]:
    """`address` or `address:port`; an IPv6 address with a port in brackets, `[::1]:5353`."""
    address, port = entry, 53
    try:
        if entry.startswith("["):
            address, _, rest = entry[1:].partition("]")
            if rest:
                port = int(rest.removeprefix(":"))
        elif entry.count(":") == 1:
            address, port_text = entry.split(":")
            port = int(port_text)
        ipaddress.ip_address(address)
        if not 0 < port < 65536:
            raise ValueError(port)
    except ValueError as exc:
        raise ImproperlyConfigured(f"IAM_DNS_NAMESERVERS: not an address or address:port: {entry!r}") from exc
    return address, port
