from django.urls import path

from . import api

urlpatterns = [
    path("accounts/create", api.AccountCreate.as_view()),
    path("accounts/describe", api.AccountDescribe.as_view()),
    path("accounts/list", api.AccountList.as_view()),
    path("accounts/update", api.AccountUpdate.as_view()),
    path("accounts/delete", api.AccountDelete.as_view()),
]
