import uuid
from functools import cache

import factory
from django.contrib.auth.hashers import make_password
from django.utils import timezone

from accounts.models import Account
from authn.models import Credential
from clients.models import Client, Delivery, DeliveryAttempt
from iam.platform import crypto
from rbac.models import Membership, Permission, Role
from tenancy.models import Project, Workspace
from tenancy.workspace_cache import root_workspace

PASSWORD = "correct horse battery staple"


@cache
def hashed(password: str) -> str:
    return make_password(password)


def schema_v1() -> dict:
    return {"schema_version": "1"}


class ResourceFactory(factory.django.DjangoModelFactory):
    """The API's resources carry a `meta` with its schema version."""

    class Meta:
        abstract = True

    meta = factory.LazyFunction(schema_v1)


class AccountFactory(ResourceFactory):
    class Meta:
        model = Account

    email = factory.Sequence(lambda n: f"user{n}@example.com")
    name = factory.Sequence(lambda n: f"User {n}")
    verified = True

    password = factory.LazyFunction(lambda: hashed(PASSWORD))  # one argon2 run per test session


class WorkspaceFactory(ResourceFactory):
    class Meta:
        model = Workspace

    name = factory.Sequence(lambda n: f"Workspace {n}")
    slug = factory.Sequence(lambda n: f"ws-{n}")
    config = factory.LazyFunction(schema_v1)


class ProjectFactory(ResourceFactory):
    class Meta:
        model = Project

    workspace = factory.SubFactory(WorkspaceFactory)
    name = factory.Sequence(lambda n: f"Project {n}")
    code = factory.Sequence(lambda n: f"p{n}")
    config = factory.LazyFunction(schema_v1)


class PermissionFactory(ResourceFactory):
    class Meta:
        model = Permission

    workspace = factory.SubFactory(WorkspaceFactory)
    name = factory.Sequence(lambda n: f"resource{n}:read")


class RoleFactory(ResourceFactory):
    class Meta:
        model = Role
        skip_postgeneration_save = True

    workspace = factory.SubFactory(WorkspaceFactory)
    name = factory.Sequence(lambda n: f"role-{n}")

    @factory.post_generation
    def permissions(self, create, names, **kwargs):
        """`RoleFactory(permissions=["projects:*"])` attaches permissions of the role's workspace by name."""
        for name in names or []:
            permission, _ = Permission.objects.get_or_create(
                workspace=self.workspace, name=name, defaults={"meta": schema_v1()}
            )
            self.permissions.add(permission)


class MembershipFactory(ResourceFactory):
    class Meta:
        model = Membership
        skip_postgeneration_save = True

    account = factory.SubFactory(AccountFactory)
    workspace = factory.SubFactory(WorkspaceFactory)
    scope = Membership.Scope.WORKSPACE
    status = Membership.Status.ACTIVE
    # docs/api.md#invitations: a membership made active is one its account accepted.
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
    # docs/api.md#the-root-workspace: credentials live in the root workspace
    workspace = factory.LazyFunction(root_workspace)
    kind = Credential.Kind.PASSWORD
    provider = Credential.Provider.LOCAL
    status = Credential.Status.ACTIVE
    email = factory.SelfAttribute("account.email")


class ClientFactory(ResourceFactory):
    """A client whose secret is stored as `clients.services` stores it: encrypted (to sign pushes) and
    digested (to compare in validate), never in plaintext (docs/security.md#secrets-at-rest). The plaintext,
    which the service shows once, is on `client.secret`; `ClientFactory(secret="...")` chooses it."""

    class Meta:
        model = Client

    workspace = factory.SubFactory(WorkspaceFactory)
    name = factory.Sequence(lambda n: f"client-{n}")
    secret = factory.LazyFunction(crypto.new_client_secret)
    secret_encrypted = factory.LazyAttribute(lambda client: crypto.encrypt(client.secret))
    secret_digest = factory.LazyAttribute(lambda client: crypto.digest(client.secret))

    @classmethod
    def _create(cls, model_class, *args, secret: str, **kwargs) -> Client:
        client = super()._create(model_class, *args, **kwargs)
        client.secret = secret  # not a column: the plaintext stays with the test
        return client

    @classmethod
    def _build(cls, model_class, *args, secret: str, **kwargs) -> Client:
        client = super()._build(model_class, *args, **kwargs)
        client.secret = secret
        return client


def backdate(instance, field: str, when) -> None:
    """`auto_now_add` ignores a value given to create(): an UPDATE sets the past time."""
    if when is not None:
        type(instance).objects.filter(pk=instance.pk).update(**{field: when})
        setattr(instance, field, when)


class DeliveryFactory(factory.django.DjangoModelFactory):
    """One event owed to a client, as the push fan-out makes it: the client's endpoint and encrypted secret
    are copied at the event, so the delivery outlives the client. `created_at=` backdates it."""

    class Meta:
        model = Delivery
        skip_postgeneration_save = True

    client = factory.SubFactory(ClientFactory)
    workspace = factory.SelfAttribute("client.workspace")
    event_id = factory.LazyFunction(uuid.uuid4)
    event_type = "role.updated"
    endpoint = factory.LazyAttribute(lambda delivery: delivery.client.endpoint or "")
    secret_encrypted = factory.SelfAttribute("client.secret_encrypted")
    payload = factory.LazyAttribute(
        lambda delivery: {
            "id": str(delivery.event_id),
            "type": delivery.event_type,
            "workspace_id": str(delivery.workspace.pk),
        }
    )
    status = Delivery.Status.PENDING

    @factory.post_generation
    def created_at(self, create, when, **kwargs):
        backdate(self, "created_at", when)


class DeliveryAttemptFactory(factory.django.DjangoModelFactory):
    """One recorded try of a delivery (a 503 unless told); `attempted_at=` backdates it."""

    class Meta:
        model = DeliveryAttempt
        skip_postgeneration_save = True

    delivery = factory.SubFactory(DeliveryFactory)
    status_code = 503
    duration_ms = 10

    @factory.post_generation
    def attempted_at(self, create, when, **kwargs):
        backdate(self, "attempted_at", when)
