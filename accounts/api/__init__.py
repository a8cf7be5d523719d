"""The account endpoints, listed in accounts/urls.py. Accounts are global: no `X-Workspace` header, and
the permissions are held in the root workspace, except that an account may describe and change itself
(not its `enabled` and `verified` flags): `rbac.policy.authorize` decides that once the account is
loaded (`decided_on_object`). While the root workspace requires MFA, its rights need a session that
meets it (403 `mfa required by this workspace`); an account's own record does not. Creating an account
also makes its password credential, so `accounts/create` calls
`authn.services.create_password_account`: the HTTP tier may use the domain tier of any app
(docs/architecture.md)."""
