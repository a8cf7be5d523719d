from iam.api import routes

from . import api, workspaces

urlpatterns = routes(workspaces, api)
