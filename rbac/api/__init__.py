"""The RBAC endpoints: permissions, roles, memberships, invitations and `permissions/check`, listed by
path in rbac/urls.py. Each states on its class the permission it needs (`permission = "roles:update"`), its
workspace scoping, its serializers and an example request, and has a short `handle` that loads the object
the body names through the one policy (`rbac.api.access.get_object`: what does not depend on the object is
refused first, then a 404, then the decision on the object), calls its service and answers."""
