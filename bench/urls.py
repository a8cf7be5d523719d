from django.http import JsonResponse
from django.urls import path

from iam.urls import urlpatterns as service_urlpatterns


def ping(request):
    """The floor: a Django view that does nothing, through the same middleware."""
    return JsonResponse({"success": True, "status": 200, "data": "pong"})


urlpatterns = [path("bench/ping", ping), *service_urlpatterns]
