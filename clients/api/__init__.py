"""The client endpoints, listed by path in clients/urls.py: `clients/validate` and `clients/events`, which
a client service calls with its own id and secret (public, each with its fast body reader), and the
workspace's client management (create, describe, list, update, delete, regenerate-secret)."""
