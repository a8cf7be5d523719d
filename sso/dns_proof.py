"""The DNS proof of a domain (docs/api.md#sso): a TXT record `_iam-verification.<domain>` holding the domain's
verification token, read with dnspython from `IAM_DNS_NAMESERVERS` (`address` or `address:port`,
comma-separated) when set, else from the system's resolvers, within what is left of the request's network
budget (`iam.platform.upstream`)."""

import ipaddress

import dns.exception
import dns.nameserver
import dns.resolver
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from iam.platform import upstream

RECORD_PREFIX = "_iam-verification."
LIFETIME_SECONDS = 5.0


class LookupUnavailable(Exception):
    """No nameserver answered: the proof cannot be checked now (not a wrong one)."""


def _nameserver(entry: str) -> dns.nameserver.Do53Nameserver:
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
    return dns.nameserver.Do53Nameserver(address, port)


def resolver() -> dns.resolver.Resolver:
    entries = settings.IAM_DNS_NAMESERVERS
    if not entries:
        return dns.resolver.Resolver()
    configured = dns.resolver.Resolver(configure=False)
    configured.nameservers = [_nameserver(entry) for entry in entries]
    return configured


def txt_values(domain: str) -> list[str]:
    """The TXT strings of `_iam-verification.<domain>` (each record's strings joined, RFC 7208 3.3); none
    when the name or the record does not exist."""
    try:
        lifetime = upstream.remaining(LIFETIME_SECONDS)
        answer = resolver().resolve(RECORD_PREFIX + domain, "TXT", lifetime=lifetime, search=False)
    except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
        return []
    except TimeoutError as exc:  # the budget was spent before the lookup
        raise LookupUnavailable("budget spent") from exc
    except (dns.resolver.NoNameservers, dns.exception.Timeout) as exc:
        raise LookupUnavailable(type(exc).__name__) from exc
    except dns.exception.DNSException as exc:  # a malformed name or answer: no proof
        raise LookupUnavailable(type(exc).__name__) from exc
    return [b"".join(record.strings).decode("utf-8", "replace") for record in answer]


def holds(domain: str, token: str) -> bool:
    return any(value.strip() == token for value in txt_values(domain))
