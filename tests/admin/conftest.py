import pytest
from django.contrib import admin
from django.test import Client

from tenancy.workspace_cache import root_workspace

# The admin modules are imported with the URLconf (iam.apps.IamAdminConfig): the tests that read the site's
# registry without a request need them imported too.
admin.autodiscover()


@pytest.fixture
def admin_web(operator, root) -> Client:
    """A browser session of an operator signed in to the admin (with a password alone: while the root
    workspace requires MFA, the admin refuses it). The root workspace is there and cached, as in a running
    service: every admin page reads its policy."""
    root_workspace()
    client = Client()
    client.force_login(operator)
    return client


def form_data(response) -> dict:
    """The values a change form was rendered with, as its POST would send them (inline management forms
    included): tests then change only what they mean to."""
    form = response.context["adminform"].form
    data = {}
    for name in form.fields:
        value = form[name].value()  # already prepared: JSON as text, related rows as ids
        if value is None or value is False:
            continue  # an unchecked box is not sent
        if value is True:
            data[name] = "on"
        elif isinstance(value, list | tuple):
            data[name] = [str(item) for item in value]
        else:
            data[name] = str(value)
    for formset in response.context.get("inline_admin_formsets", []):
        management = formset.formset.management_form
        for name in management.fields:
            data[f"{management.prefix}-{name}"] = management[name].value()
    return data
