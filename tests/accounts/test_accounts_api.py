import pytest
from django.db import connection

from accounts.models import Account
from authn.models import Credential
from tests.conftest import client_for, err, ok
from tests.factories import AccountFactory, MembershipFactory, RoleFactory

NEW = {
    "email": "New@Example.com",
    "password": "a-long-passphrase",
    "name": "New",
    "meta": {"schema_version": "1"},
}


@pytest.fixture
def root_member(root):
    """An account holding the given permissions through a role in the root workspace
    (docs/api.md#the-root-workspace)."""

    def make(*permissions: str):
        account = AccountFactory()
        MembershipFactory(
            account=account, workspace=root, roles=[RoleFactory(workspace=root, permissions=permissions)]
        )
        return account, client_for(account)

    return make


def test_create_returns_the_account_and_a_pending_password_credential(operator_api, root):
    data = ok(
        operator_api.call("/accounts/create", {**NEW, "tags": ["x"], "avatar_url": "https://a.example/p.png"})
    )
    assert data["email"] == "new@example.com"
    assert data["verified"] is False and data["enabled"] is True
    assert data["tags"] == ["x"] and data["meta"] == {"schema_version": "1"} and data["updated_at"] is None
    assert set(data) == set(
        [
            "id",
            "email",
            "name",
            "description",
            "avatar_url",
            "enabled",
            "verified",
            "tags",
            "meta",
            "created_at",
            "updated_at",
        ]
    )
    credential = Credential.objects.get(account_id=data["id"])
    assert (credential.kind, credential.provider, credential.status) == ("password", "local", "pending")
    assert credential.workspace == root
    assert Account.objects.get(pk=data["id"]).password.startswith("argon2$argon2id$v=19$m=19456,t=2,p=1$")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"email": None}, "email required"),
        ({"name": ""}, "name required"),
        ({"password": "short"}, "password must have at least 8 characters"),
        ({"password": "password123"}, "password is too common"),
        ({"password": "x" * 1025}, "password must have at most 1024 characters"),
        ({"meta": {}}, "meta.schema_version required"),
        ({"meta": {"schema_version": 1}}, "meta.schema_version must be a string"),
        ({"meta": {"schema_version": "1", "big": "x" * 17000}}, "meta must be at most 16 KiB"),
        ({"meta": []}, "meta must be an object"),
        ({"tags": [f"t{n}" for n in range(51)]}, "tags must have at most 50 items"),
        ({"tags": [""]}, "tags must be strings of 1 to 64 characters"),
        ({"tags": ["ok", "t" * 65]}, "tags must be strings of 1 to 64 characters"),
        ({"avatar_url": "javascript:alert(1)"}, "invalid avatar_url"),
    ],
)
def test_create_validation(operator_api, change, message):
    body = {**NEW, **change}
    if change.get("email", "") is None:
        del body["email"]
    err(operator_api.call("/accounts/create", body), 400, message)


def test_create_conflict_is_409_case_insensitive(operator_api):
    ok(operator_api.call("/accounts/create", NEW))
    body = err(
        operator_api.call("/accounts/create", {**NEW, "email": "NEW@example.COM"}),
        409,
        "email already exists",
    )
    assert body["field"] == "email"


def test_create_needs_accounts_create_in_the_root_workspace(account_api, root_member, member_of):
    err(account_api.call("/accounts/create", NEW), 403, "missing permission accounts:create")
    # the same permission in another workspace does not count
    _, elsewhere = member_of(None, "accounts:*")
    err(elsewhere.in_workspace("").call("/accounts/create", NEW), 403, "missing permission accounts:create")
    _, allowed = root_member("accounts:create")
    assert ok(allowed.call("/accounts/create", NEW))["email"] == "new@example.com"


def test_describe_self_by_id_or_email(account, account_api):
    assert ok(account_api.call("/accounts/describe", {"id": str(account.pk)}))["email"] == account.email
    assert ok(account_api.call("/accounts/describe", {"email": account.email.upper()}))["id"] == str(
        account.pk
    )


def test_describe_needs_an_identifier(account_api):
    err(account_api.call("/accounts/describe", {}), 400, "id or email required")


def test_describe_someone_else_needs_permission(account_api, root_member):
    other = AccountFactory()
    err(account_api.call("/accounts/describe", {"id": str(other.pk)}), 404, "account not found")
    _, reader = root_member("accounts:describe")
    assert ok(reader.call("/accounts/describe", {"id": str(other.pk)}))["email"] == other.email
    err(reader.call("/accounts/describe", {"email": "ghost@example.com"}), 404, "account not found")


def test_an_unknown_account_and_someone_elses_read_alike(account_api, root_member):
    """docs/api.md#conventions: what is not within the caller's reach (itself, or every account with
    the permission in the root workspace) is not found, so a caller without the permission cannot tell
    an unknown account from someone else's."""
    other = AccountFactory(email="someone@example.com")
    for path in ("/accounts/describe", "/accounts/update"):
        for email in ("ghost@example.com", other.email):
            err(account_api.call(path, {"email": email}), 404, "account not found")
    _, updater = root_member("accounts:update")
    err(updater.call("/accounts/update", {"email": "ghost@example.com"}), 404, "account not found")
    assert (
        ok(updater.call("/accounts/update", {"email": other.email, "name": "Renamed"}))["name"] == "Renamed"
    )


def test_update_self_but_not_own_flags(account, account_api):
    data = ok(account_api.call("/accounts/update", {"id": str(account.pk), "name": "Renamed", "tags": ["n"]}))
    assert data["name"] == "Renamed" and data["tags"] == ["n"] and data["updated_at"] is not None
    err(
        account_api.call("/accounts/update", {"id": str(account.pk), "verified": True}),
        403,
        "missing permission accounts:update",
    )
    err(
        account_api.call("/accounts/update", {"id": str(account.pk), "enabled": False}),
        403,
        "missing permission accounts:update",
    )


def test_update_tags_replace(account, account_api):
    ok(account_api.call("/accounts/update", {"id": str(account.pk), "tags": ["a", "b"]}))
    assert ok(account_api.call("/accounts/update", {"id": str(account.pk), "tags": ["c"]}))["tags"] == ["c"]


def test_disabling_an_account_refuses_its_tokens_at_once(operator_api, account, account_api):
    ok(account_api.call("/accounts/describe", {"id": str(account.pk)}))  # warms the auth cache
    data = ok(operator_api.call("/accounts/update", {"id": str(account.pk), "enabled": False}))
    assert data["enabled"] is False
    err(
        account_api.call("/accounts/describe", {"id": str(account.pk)}),
        401,
        "Authentication required or invalid credentials.",
    )
    assert Account.objects.get(pk=account.pk).updated_by_id is not None


def test_delete_cascades_and_answers_id_and_email(operator_api, account, root):
    from tests.factories import CredentialFactory

    CredentialFactory(account=account, workspace=root)
    MembershipFactory(account=account, workspace=root)
    data = ok(operator_api.call("/accounts/delete", {"email": account.email}))
    assert data == {"id": str(account.pk), "email": account.email}
    assert not Account.objects.filter(pk=account.pk).exists()
    assert not Credential.objects.filter(account_id=account.pk).exists()
    err(operator_api.call("/accounts/delete", {"email": account.email}), 404, "account not found")


def test_delete_needs_permission(account_api, account):
    err(
        account_api.call("/accounts/delete", {"id": str(account.pk)}),
        403,
        "missing permission accounts:delete",
    )


def test_list_needs_permission(account_api):
    err(account_api.call("/accounts/list", {}), 403, "missing permission accounts:list")


def test_list_filters_by_email_case_insensitively(operator_api):
    target = AccountFactory(email="findme@example.com")
    data = ok(operator_api.call("/accounts/list", {"filter": {"fields": {"email": "FindMe@example.com"}}}))
    assert [a["id"] for a in data["accounts"]] == [str(target.pk)]


def test_list_filters_by_creator(operator_api, operator):
    created = ok(operator_api.call("/accounts/create", NEW))
    data = ok(operator_api.call("/accounts/list", {"filter": {"fields": {"created_by": str(operator.pk)}}}))
    assert [a["id"] for a in data["accounts"]] == [created["id"]]


# Query budgets.


def test_describe_costs_at_most_two_queries_once_auth_is_cached(
    account, account_api, django_assert_max_num_queries
):
    body = {"id": str(account.pk)}
    ok(account_api.call("/accounts/describe", body))
    with django_assert_max_num_queries(2):
        ok(account_api.call("/accounts/describe", body))


@pytest.mark.parametrize("limit", [10, 100])
def test_list_of_100_accounts_costs_at_most_three_queries(operator_api, django_assert_max_num_queries, limit):
    AccountFactory.create_batch(100)
    ok(operator_api.call("/accounts/list", {"options": {"limit": 1}}))
    with django_assert_max_num_queries(3):
        data = ok(operator_api.call("/accounts/list", {"options": {"limit": limit}}))
    assert data["metadata"]["count"] == limit


def test_ten_thousand_accounts_page_without_repeats_or_gaps(operator_api, operator):
    password = operator.password
    # Identical timestamps force the id tie-break of docs/api.md#lists to do the work.
    stamp = operator.created_at
    Account.objects.bulk_create(
        [
            Account(
                email=f"bulk{n}@example.com",
                name=f"bulk {n}",
                password=password,
                created_at=stamp,
                tags=["bulk"],
            )
            for n in range(10_000)
        ],
        batch_size=2000,
    )
    body = {
        "filter": {"tags": ["bulk"], "fields": {"enabled": True}},
        "options": {"limit": 1000, "offset": 0},
    }
    seen: list[str] = []
    offset = 500  # start past the beginning: offsets must work anywhere
    while True:
        body["options"]["offset"] = offset
        data = ok(operator_api.call("/accounts/list", body))
        assert data["metadata"]["total"] == 10_000
        if not data["accounts"]:
            break
        seen.extend(a["id"] for a in data["accounts"])
        offset += len(data["accounts"])
    assert len(seen) == len(set(seen)) == 9_500
    everything = set(
        Account.objects.filter(tags__isnull=False).exclude(pk=operator.pk).values_list("pk", flat=True)
    )
    first_page = ok(operator_api.call("/accounts/list", {**body, "options": {"limit": 500, "offset": 0}}))
    assert {str(pk) for pk in everything} == set(seen) | {a["id"] for a in first_page["accounts"]}
    assert connection.vendor in ("sqlite", "postgresql")


@pytest.mark.parametrize("order", ["!created_at", "name", "!email"])
def test_a_deep_page_reads_its_ids_first_and_matches_the_shallow_page(
    operator_api, monkeypatch, django_assert_max_num_queries, order
):
    AccountFactory.create_batch(30)
    body = {
        "filter": {"fields": {"enabled": True}},
        "options": {"offset": 10, "limit": 7, "order_bys": order},
    }
    shallow = ok(operator_api.call("/accounts/list", body))
    monkeypatch.setattr("iam.http.list_endpoint.DEEP_OFFSET", 5)
    with django_assert_max_num_queries(3) as captured:
        deep = ok(operator_api.call("/accounts/list", body))
    assert deep == shallow and deep["metadata"]["count"] == 7
    page = captured.captured_queries[-1]["sql"]
    assert "IN (SELECT" in page and "OFFSET 10" in page  # the offset is taken over ids only
