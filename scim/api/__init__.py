"""SCIM tokens' endpoints (`tokens.py`) and the SCIM 2.0 service of each workspace
(`endpoint.py`, the base of its views; `users.py`, `groups.py`, `discovery.py`), listed in
scim/urls.py."""
