from iam.api import routes

from . import api

urlpatterns = routes(api)  # `clients/validate`, the hot path, is defined first there and so tried first
