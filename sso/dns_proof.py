"""The DNS proof of a domain (docs/api.md#sso): a TXT record `_iam-verification.<domain>` holding the domain's
verification token, read with dnspython from `IAM_DNS_NAMESERVERS` (sso.nameservers) when set, else from
the system's resolvers, within what is left of the request's network budget (`iam.platform.upstream`)."""

import dns.exception
import dns.nameserver
import dns.resolver

from iam.platform import upstream

from . import nameservers

RECORD_PREFIX = "_iam-verification."
LIFETIME_SECONDS = 5.0


class LookupUnavailable(Exception):
    """No nameserver answered: the proof cannot be checked now (not a wrong one)."""


def resolver() -> dns.resolver.Resolver:
    addresses = nameservers.configured()
    if not addresses:
        return dns.resolver.Resolver()
    configured = dns.resolver.Resolver(configure=False)
    configured.nameservers = [dns.nameserver.Do53Nameserver(address, port) for address, port in addresses]
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
