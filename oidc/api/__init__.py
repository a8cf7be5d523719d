"""The OpenID Provider's management API, one module per resource (`applications`)."""
