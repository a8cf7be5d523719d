"""What a password login costs the database (docs/performance.md#what-keeps-the-hot-paths-fast): one read
of the account with its password credential and its second factors, then the writes the login makes,
with no savepoint of its own, and the same answers as ever."""

from django.utils import timezone

from authn.models import Credential
from tests.conftest import err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory


def login(api, account, password=PASSWORD):
    return api.call("/auth/login", {"email": account.email, "password": password})


def test_a_login_reads_once_and_writes_five_rows(api, member, django_assert_num_queries):
    # The account (with its credential and factors); the credential's `last_used_at`, the session, its
    # refresh token, `last_login`, the audit entry; and the endpoint's own transaction (a savepoint here,
    # inside the test's).
    with django_assert_num_queries(8) as captured:
        ok(login(api, member))
    statements = [query["sql"].split(" ", 1)[0] for query in captured.captured_queries]
    assert statements.count("SAVEPOINT") == 1
    assert statements.count("SELECT") == 1
    # The password credential by one join (an account has at most one), the address unique: no ORDER BY.
    (read,) = [query["sql"] for query in captured.captured_queries if query["sql"].startswith("SELECT")]
    assert read.count('LEFT OUTER JOIN "authn_credential"') == 1
    assert 'FROM "authn_credential"' not in read
    assert "ORDER BY" not in read


def test_a_login_touches_its_own_credential_alone(api, member):
    other = AccountFactory()
    CredentialFactory(account=other)
    before = timezone.now()
    ok(login(api, member))
    touched = dict(Credential.objects.filter(kind="password").values_list("account_id", "last_used_at"))
    assert touched[member.pk] >= before
    assert touched[other.pk] is None


def test_a_login_reads_the_password_credential_among_the_accounts_others(api, member):
    oauth = CredentialFactory(
        account=member, kind=Credential.Kind.OAUTH, provider=Credential.Provider.IDP_A, provider_id="sub-1"
    )
    Credential.objects.filter(account=member, kind="password").update(status="revoked")
    err(login(api, member), 401, "invalid credentials")  # the active OAuth credential is not a password
    Credential.objects.filter(account=member, kind="password").update(status="active")
    ok(login(api, member))
    oauth.refresh_from_db()
    assert oauth.last_used_at is None
    assert Credential.objects.get(account=member, kind="password").last_used_at is not None


def test_a_revoked_password_credential_still_refuses(api, member):
    Credential.objects.filter(account=member, kind="password").update(status="revoked")
    err(login(api, member), 401, "invalid credentials")


def test_an_account_without_a_password_credential_is_refused(api, member):
    Credential.objects.filter(account=member, kind="password").delete()
    err(login(api, member), 401, "invalid credentials")


def test_the_answer_is_the_serializers_own(api, member):
    from accounts.models import Account
    from authn.api.auth import session_payload
    from authn.serializers import SessionWithAccount

    session = ok(login(api, member))
    account = Account.objects.get(pk=member.pk)
    pair = {"access_token": session["access_token"], "refresh_token": session["refresh_token"]}
    assert session == {**pair, "account": session["account"]}
    assert session_payload(account, pair) == SessionWithAccount({**pair, "account": account}).data
    assert session["account"] == {
        "id": str(member.pk),
        "email": member.email,
        "name": member.name,
        "verified": member.verified,
        "enabled": True,
    }


def test_a_login_with_no_failures_counted_makes_one_redis_read_and_no_write(api, member, monkeypatch):
    from iam.platform import cache

    calls = []
    for name in ("get_many", "delete_many"):
        real = getattr(cache, name)
        monkeypatch.setattr(
            cache, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k)
        )
    ok(login(api, member))
    assert calls == ["get_many"]
    err(login(api, member, "wrong password"), 401, "invalid credentials")
    calls.clear()
    ok(login(api, member))  # a failure was counted: the success resets it
    assert calls == ["get_many", "delete_many"]
