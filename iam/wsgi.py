import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "iam.settings")

application = get_wsgi_application()

# Import the URLconf, and with it every endpoint module, while the process starts rather than in its first
# request's time: a gunicorn worker's first request otherwise paid ~0.4 s of imports (a spike after every
# deploy or worker restart).
get_resolver().url_patterns  # noqa: B018
