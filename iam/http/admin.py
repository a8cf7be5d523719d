"""The operators' admin, its base: every change made there goes through the service
functions the API uses: the same validation (the API's request serializers check the changed fields),
the same events and the same cache purges. Secrets (password hashes, tokens, client secrets) are never
rendered."""

import functools
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import models
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from rest_framework import serializers

from iam.http.endpoint import validation_error
from iam.http.errors import ApiError

RESOURCE_READONLY = ("id", "created_at", "updated_at")
# Form field -> the API request's key, where they differ: a relation is sent by its id.
REQUEST_KEYS = {
    "account": "account_id",
    "project": "project_id",
    "permissions": "permission_ids",
    "roles": "role_ids",
}
FORM_FIELDS = {key: name for name, key in REQUEST_KEYS.items()}


def api_fields(serializer: type[serializers.ModelSerializer]) -> tuple[str, ...]:
    """The fields an API serializer shows, as the admin names them (`workspace_id` is the `workspace`
    relation): the admin lists what the API lists, from one source."""
    opts = serializer.Meta.model._meta
    return tuple(dict.fromkeys(opts.get_field(name).name for name in serializer.Meta.fields))


def request_value(value: Any) -> Any:
    """A form's cleaned value as the API receives it: a record by its id."""
    if isinstance(value, models.Model):
        return str(value.pk)
    if isinstance(value, models.QuerySet):
        return [str(record.pk) for record in value]
    return value


def check_with(
    form: forms.BaseForm,
    serializer_class: type[serializers.Serializer],
    data: dict[str, Any],
    *,
    partial: bool = True,
) -> None:
    """Runs the API's request serializer over `data` and puts its message (the docs/api.md#validation wording)
    on the form field it names, so the admin refuses exactly what the API refuses."""
    serializer = serializer_class(data=data, partial=partial)
    if serializer.is_valid():
        return
    error = validation_error(serializer)
    field = error.field.split(".")[0] if error.field else None
    field = FORM_FIELDS.get(field, field)
    if field in form.errors:
        return  # the form's own message stands (a field left out as failed is not "required" again)
    form.add_error(field if field in form.fields else None, error.message)


class ServiceForm(forms.ModelForm):
    """The base of every model form here: its fields are the admin's (derived from the API serializer).
    Each admin's form is a subclass that names the API requests it checks (`ProjectForm.create_request`,
    ...), so the admin refuses what the API refuses.

    `clean()` validates the form's values with the API's request serializer (`create_request` on the add
    form, `update_request` with the record's id and only the changed fields on the change form) and shows
    its message as a form error, so the admin refuses exactly what the API refuses, in the API's words.
    A form field goes to the request when the request takes it (under its `REQUEST_KEYS` name). Checks the
    serializer cannot make (a relation from another workspace) go in `clean_relations`, which runs first.
    `values()` and `changes()` are then the keyword arguments of the create and update services."""

    create_request: type[serializers.Serializer] | None = None
    update_request: type[serializers.Serializer] | None = None
    # A create request may omit what the form checks by itself (an account's password).
    create_partial = False
    # Form field -> the update request's and service's key, where the API renames (`code` -> `new_code`).
    renamed_on_update: dict[str, str] = {}

    @property
    def adding(self) -> bool:
        return self.instance._state.adding

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        self.clean_relations(cleaned)
        request = self.create_request if self.adding else self.update_request
        if request is None:
            return cleaned
        data = self.request_data(cleaned)
        if self.adding:
            check_with(self, request, data, partial=self.create_partial)
        elif data:
            check_with(self, request, {"id": str(self.instance.pk), **data})
        return cleaned

    def clean_relations(self, cleaned: dict[str, Any]) -> None:
        """Checks before the serializer's; none by default."""

    def request_keys(self) -> dict[str, str]:
        """The form's fields that the request (create or update) takes: form field -> request key."""
        request = self.create_request if self.adding else self.update_request
        taken = request().fields if request else {}
        renamed = {} if self.adding else self.renamed_on_update
        keys = {name: renamed.get(name, REQUEST_KEYS.get(name, name)) for name in self.fields}
        return {name: key for name, key in keys.items() if key in taken}

    def sent(self, cleaned: dict[str, Any]) -> list[str]:
        """The fields the request carries: on the add form every given one, on the change form the changed
        ones (a field that failed its own validation is left out: its error is already shown)."""
        if self.adding:
            return [name for name in self.request_keys() if cleaned.get(name) not in (None, "")]
        return [name for name in self.request_keys() if name in self.changed_data and name in cleaned]

    def request_data(self, cleaned: dict[str, Any]) -> dict[str, Any]:
        keys = self.request_keys()
        return {keys[name]: request_value(cleaned[name]) for name in self.sent(cleaned)}

    def service_arguments(self, names: list[str]) -> dict[str, Any]:
        renamed = {} if self.adding else self.renamed_on_update
        arguments = {}
        for name in names:
            value = self.cleaned_data[name]
            arguments[renamed.get(name, name)] = list(value) if isinstance(value, models.QuerySet) else value
        return arguments

    def values(self) -> dict[str, Any]:
        """The create service's keyword arguments: every field of the create request."""
        return self.service_arguments(list(self.request_keys()))

    def changes(self) -> dict[str, Any]:
        """The update service's keyword arguments: the changed fields of the update request (a relation
        that did not change is not passed, so the service leaves it)."""
        return self.service_arguments(self.sent(self.cleaned_data))


def adopt(obj: models.Model, created: models.Model) -> None:
    """The admin goes on with the instance its form built (log entry, redirect, inlines): make it the row
    the service created."""
    obj.__dict__.update(created.__dict__)


def refusal_shown(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A service's refusal (`ApiError`, say a conflict the form could not foresee, or one raised by an
    action) becomes an error message instead of a 500; the admin runs each view in a transaction, so
    nothing of the refused change stays."""

    @functools.wraps(view)
    def shown(admin_: "ServiceAdmin", request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            return view(admin_, request, *args, **kwargs)
        except ApiError as exc:
            admin_.message_user(request, exc.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    return shown


class ServiceAdmin(admin.ModelAdmin):
    """The base of every model admin here. Writes go through three hooks that call the domain's services:
    `create(request, form)` returns the new row, `update(request, current, form)` gets a fresh copy of the
    row (the form has already written its values onto the admin's instance, so the service could not see
    what changed) and `remove(request, obj)`. The form's many-to-many fields are passed to the services
    by those hooks, never saved by the form itself, so a role's permissions change with the same events
    and cache purges as over the API. A service's refusal is a message (`refusal_shown`).

    Its `form` is a `ServiceForm` subclass that names the API requests it checks (`create_request`,
    `update_request`); `add_form` is the add page's form where it differs (as in Django's `UserAdmin`);
    the add page shows no inlines (they list a saved record's relations). `fixed_on_change` are fields
    set on creation and read-only after. JSON fields start with the docs/api.md#validation `schema_version` on
    the add form."""

    form = ServiceForm
    add_form: type[forms.ModelForm] | None = None
    fixed_on_change: tuple[str, ...] = ()
    json_initial: dict[str, Any] = {}
    # The services the hooks call by default (`staticmethod(services.update_project)`): the update
    # service with the form's `changes()`, the delete service with the record, each with the operator.
    update_service: Callable[..., models.Model] | None = None
    delete_service: Callable[..., Any] | None = None

    def create(self, request: HttpRequest, form: ServiceForm) -> models.Model:
        raise NotImplementedError

    def update(self, request: HttpRequest, current: models.Model, form: ServiceForm) -> models.Model:
        assert self.update_service is not None, f"{type(self).__name__} changes nothing"
        return self.update_service(current, **form.changes(), actor=request.user)

    def remove(self, request: HttpRequest, obj: models.Model) -> None:
        assert self.delete_service is not None, f"{type(self).__name__} deletes nothing"
        self.delete_service(obj, actor=request.user)

    def get_form(self, request: HttpRequest, obj=None, **kwargs):
        if obj is None and self.add_form is not None:
            kwargs["form"] = self.add_form
        return super().get_form(request, obj, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        readonly = super().get_readonly_fields(request, obj)
        return readonly if obj is None else (*readonly, *self.fixed_on_change)

    def get_inlines(self, request: HttpRequest, obj=None):
        return () if obj is None else super().get_inlines(request, obj)

    def save_model(
        self, request: HttpRequest, obj: models.Model, form: forms.ModelForm, change: bool
    ) -> None:
        if change:
            if not form.has_changed():
                return
            self.update(request, type(obj)._default_manager.get(pk=obj.pk), form)
            obj.refresh_from_db()
        else:
            adopt(obj, self.create(request, form))

    def save_related(self, request: HttpRequest, form: forms.ModelForm, formsets, change: bool) -> None:
        # Not `form.save_m2m()`: the create and update hooks have passed the relations to the services.
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)

    def delete_model(self, request: HttpRequest, obj: models.Model) -> None:
        self.remove(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset) -> None:
        for obj in queryset:
            self.remove(request, obj)

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        return {**self.json_initial, **super().get_changeform_initial_data(request)}

    changeform_view = refusal_shown(admin.ModelAdmin.changeform_view)
    delete_view = refusal_shown(admin.ModelAdmin.delete_view)
    changelist_view = refusal_shown(admin.ModelAdmin.changelist_view)


class DeleteOnly:
    """An admin of records made elsewhere (through the API, or by their holder): listed and shown, never
    added or changed here; deleting one goes through its service."""

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


class ViewOnly(DeleteOnly):
    """An admin of records the service keeps by itself: listed and shown, never added, changed or deleted
    here (an action may be the one change)."""

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


class ReadOnlyInline(ViewOnly, admin.TabularInline):
    """A related list on a parent's page; each row links to its own page, where changes go through the
    services."""

    extra = 0
    can_delete = False
    show_change_link = True

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        return self.fields  # every one: nothing is edited here
