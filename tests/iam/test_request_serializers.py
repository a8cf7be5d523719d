"""The strict `Choice` and the request bases of `iam.http.serializers`."""

import pytest
from rest_framework import serializers

from clients.serializers import ClientCreateRequest, ClientUpdateRequest
from iam.http.fields import Choice
from iam.http.serializers import UpdateRequest
from rbac.serializers import MembershipCreateRequest, MembershipUpdateRequest
from tenancy.serializers import ProjectUpdateRequest


def test_choice_takes_a_string_only():
    field = Choice(["1", "2"])
    field.bind("level", serializers.Serializer())
    assert field.run_validation("1") == "1"
    with pytest.raises(serializers.ValidationError) as refused:
        field.run_validation(1)  # DRF's ChoiceField takes it as "1"
    assert refused.value.detail == ["level must be one of 1, 2"]


def test_an_unlisted_choice_refusal_is_drfs_invalid_choice():
    serializer = MembershipCreateRequest(data={"scope": 1})
    assert not serializer.is_valid()
    assert serializer.errors["scope"][0].code == "invalid_choice"  # rendered as "invalid scope"


def test_an_update_request_is_the_reference_then_the_create_request_optional():
    fields = ClientUpdateRequest().fields
    assert list(fields) == ["id", *ClientCreateRequest().fields]
    assert fields["id"].required
    assert not any(field.required for name, field in fields.items() if name != "id")
    assert ClientCreateRequest().fields["name"].required  # the create request's own field is untouched


def test_an_update_request_replaces_or_removes_a_create_field():
    fields = MembershipUpdateRequest().fields
    assert list(fields) == ["id", "scope", "status", "project_id", "role_ids", "tags", "meta"]
    assert fields["meta"].require_schema_version is False


def test_record_fields_come_last():
    assert list(ProjectUpdateRequest().fields)[-2:] == ["tags", "meta"]
    assert list(ClientCreateRequest().fields)[-2:] == ["tags", "meta"]


def test_an_update_request_needs_its_create_request():
    with pytest.raises(TypeError):

        class Broken(UpdateRequest):  # no create request to take the fields from
            pass
