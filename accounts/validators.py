from django.core.exceptions import ValidationError


class MaximumLengthValidator:
    """docs/api.md#validation: passwords of at most 1024 characters (argon2 hashes any length; this caps the
    work)."""

    def __init__(self, max_length: int = 1024):
        self.max_length = max_length

    def validate(self, password: str, user=None) -> None:
        if len(password) > self.max_length:
            raise ValidationError(
                f"password must have at most {self.max_length} characters", code="password_too_long"
            )

    def get_help_text(self) -> str:
        return f"Your password must contain at most {self.max_length} characters."
