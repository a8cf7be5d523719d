from django.urls import path

from .api import accounts

urlpatterns = [
    path("accounts/create", accounts.AccountCreate.as_view()),
    path("accounts/describe", accounts.AccountDescribe.as_view()),
    path("accounts/list", accounts.AccountList.as_view()),
    path("accounts/update", accounts.AccountUpdate.as_view()),
    path("accounts/delete", accounts.AccountDelete.as_view()),
]
