"""docs/operations.md#postgresql-prepared-statements: on PostgreSQL a connection prepares a statement it
runs a fifth time, so that the hot paths' statements are planned once per connection, not at every
request."""

import pytest
from django.db import connection

from accounts.models import Account
from tests.factories import AccountFactory

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's prepared statements")


def prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [statement for (statement,) in cursor.fetchall()]


@pytest.mark.django_db
def test_a_statement_run_a_fifth_time_is_prepared_with_its_parameters_bound_on_the_server():
    first, second = AccountFactory(), AccountFactory()
    for _ in range(4):
        assert Account.objects.get(pk=first.pk).email == first.email
    assert not [statement for statement in prepared() if '"accounts_account"' in statement]
    # The fifth run, with another account's id: the same statement, prepared once, answers for each.
    assert Account.objects.get(pk=second.pk).email == second.email
    assert Account.objects.get(pk=first.pk).email == first.email
    statements = [statement for statement in prepared() if '"accounts_account"' in statement]
    assert len(statements) == 1
    assert "$1" in statements[0]
