"""Writes to permissions, roles and memberships, and the owner set-up of a new workspace. Every change to
who may do what bumps the workspace's authorization generation (dropping its cached grants after commit)
and records the push event docs/integration.md#push-events owes, in the same transaction."""
