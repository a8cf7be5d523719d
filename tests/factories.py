from functools import cache

import factory
from django.contrib.auth.hashers import make_password
from django.utils import timezone

from accounts.models import Account
from authn.models import Credential
from rbac.models import Membership, Permission, Role
from tenancy.models import Project, Workspace
from tenancy.workspace_cache import root_workspace

PASSWORD = "correct horse battery staple"


@cache
def hashed(password: str) -> str:
    return make_password(password)


class AccountFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Account

    email = factory.Sequence(lambda n: f"user{n}@example.com")
    name = factory.Sequence(lambda n: f"User {n}")
    verified = True
    meta = factory.LazyFunction(lambda: {"schema_version": "1"})

    password = factory.LazyFunction(lambda: hashed(PASSWORD))  # one argon2 run per test session


class WorkspaceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Workspace

    name = factory.Sequence(lambda n: f"Workspace {n}")
    slug = factory.Sequence(lambda n: f"ws-{n}")
    config = factory.LazyFunction(lambda: {"schema_version": "1"})
    meta = factory.LazyFunction(lambda: {"schema_version": "1"})


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project

    workspace = factory.SubFactory(WorkspaceFactory)
    name = factory.Sequence(lambda n: f"Project {n}")
    code = factory.Sequence(lambda n: f"p{n}")
    config = factory.LazyFunction(lambda: {"schema_version": "1"})
    meta = factory.LazyFunction(lambda: {"schema_version": "1"})


class PermissionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Permission

    workspace = factory.SubFactory(WorkspaceFactory)
    name = factory.Sequence(lambda n: f"resource{n}:read")
    meta = factory.LazyFunction(lambda: {"schema_version": "1"})


class RoleFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Role
        skip_postgeneration_save = True

    workspace = factory.SubFactory(WorkspaceFactory)
    name = factory.Sequence(lambda n: f"role-{n}")
    meta = factory.LazyFunction(lambda: {"schema_version": "1"})

    @factory.post_generation
    def permissions(self, create, names, **kwargs):
        """`RoleFactory(permissions=["projects:*"])` attaches permissions of the role's workspace by name."""
        for name in names or []:
            permission, _ = Permission.objects.get_or_create(
                workspace=self.workspace, name=name, defaults={"meta": {"schema_version": "1"}}
            )
            self.permissions.add(permission)


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership
        skip_postgeneration_save = True

    account = factory.SubFactory(AccountFactory)
    workspace = factory.SubFactory(WorkspaceFactory)
    scope = Membership.Scope.WORKSPACE
    status = Membership.Status.ACTIVE
    meta = factory.LazyFunction(lambda: {"schema_version": "1"})
    # CONTRACT 15: a membership made active is one its account accepted.
    accepted_at = factory.LazyAttribute(
        lambda membership: None if membership.status == Membership.Status.INVITED else timezone.now()
    )

    @factory.post_generation
    def roles(self, create, roles, **kwargs):
        for role in roles or []:
            self.roles.add(role)


class CredentialFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Credential

    account = factory.SubFactory(AccountFactory)
    workspace = factory.LazyFunction(root_workspace)  # CONTRACT 3: credentials live in the root workspace
    kind = Credential.Kind.PASSWORD
    provider = Credential.Provider.LOCAL
    status = Credential.Status.ACTIVE
    email = factory.SelfAttribute("account.email")
