"""The workspace and project endpoints, listed in tenancy/urls.py. Each states its permission and calls
its service by name. Who may reach a workspace or a project is `rbac.policy`'s rule (through
`rbac.api.access.get_object`), and a new workspace's owner set-up (its `*` permission, `owner` role and
the creator's membership) writes rbac's models, so it is `rbac.services.workspaces.create_workspace`: the HTTP
tier may use the domain tier of any app (docs/architecture.md)."""
