"""The account page's "check access" form: `POST /permissions/check`'s answer for operators."""

import pytest

from tests.factories import AccountFactory, MembershipFactory, ProjectFactory, RoleFactory, WorkspaceFactory

pytestmark = pytest.mark.django_db


def page(admin_web, account, **query):
    response = admin_web.get(f"/admin/accounts/account/{account.pk}/check-access/", query)
    assert response.status_code == 200
    return response


def test_the_account_page_links_to_the_form(admin_web):
    account = AccountFactory()
    content = admin_web.get(f"/admin/accounts/account/{account.pk}/change/").content.decode()
    assert f"/admin/accounts/account/{account.pk}/check-access/" in content


def test_check_access_answers_like_the_api(admin_web):
    workspace, other = WorkspaceFactory(), WorkspaceFactory()
    account = AccountFactory()
    role = RoleFactory(workspace=workspace, name="editor", permissions=["projects:*"])
    membership = MembershipFactory(account=account, workspace=workspace, roles=[role])

    answer = page(admin_web, account, workspace=workspace.slug, permission="projects:update").context[
        "answer"
    ]
    assert answer["allowed"] is True
    assert [(path["membership_id"], path["role"], path["pattern"]) for path in answer["matched"]] == [
        (str(membership.pk), "editor", "projects:*")
    ]
    assert (
        "Allowed"
        in page(admin_web, account, workspace=workspace.slug, permission="projects:update").content.decode()
    )

    denied = page(admin_web, account, workspace=workspace.slug, permission="roles:update")
    assert denied.context["answer"] == {"allowed": False, "matched": [], "reason": "no_matching_permission"}
    assert "Not allowed: no_matching_permission" in denied.content.decode()
    assert page(admin_web, account, workspace=other.slug, permission="roles:update").context["answer"][
        "reason"
    ] == ("not_a_member")


def test_check_access_validation(admin_web):
    workspace, other = WorkspaceFactory(), WorkspaceFactory()
    account = AccountFactory()
    bad = page(admin_web, account, workspace=workspace.slug, permission="not a permission")
    assert bad.context["answer"] is None and bad.context["form"].errors == {
        "permission": ["permission must have the form resource:action (each side a name or *), or *"]
    }
    foreign = ProjectFactory(workspace=other)
    wrong = page(
        admin_web, account, workspace=workspace.slug, permission="projects:update", project=foreign.pk
    )
    assert wrong.context["form"].errors == {"project": ["project_id must name a project of this workspace"]}
    assert page(admin_web, account).context["answer"] is None  # the empty form
