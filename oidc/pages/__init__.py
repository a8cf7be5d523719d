"""The OpenID Provider's hosted pages (templates under templates/oidc/): the authorization endpoint with
its workspace chooser and consent page, and RP-Initiated Logout."""
