// The hosted pages' one script (docs/pages.md#passkeys): it runs the browser's WebAuthn ceremony for the
// passkey forms (templates/authn/passkey_form.html) and posts the result in the form. It decides nothing:
// the service makes the options and checks the credential. Without it (or without WebAuthn in the
// browser) the passkey forms stay hidden and every other form of the page works as before.
(function () {
  "use strict";

  if (!window.PublicKeyCredential || !navigator.credentials) {
    return;
  }

  // base64url (the service's JSON) <-> ArrayBuffer (the browser's WebAuthn API)
  function toBuffer(text) {
    var base64 = text.replace(/-/g, "+").replace(/_/g, "/");
    var binary = atob(base64 + "===".slice((base64.length + 3) % 4));
    var bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i += 1) {
      bytes[i] = binary.charCodeAt(i);
    }
    return bytes.buffer;
  }

  function toText(buffer) {
    var bytes = new Uint8Array(buffer);
    var binary = "";
    for (var i = 0; i < bytes.length; i += 1) {
      binary += String.fromCharCode(bytes[i]);
    }
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function withIds(descriptors) {
    return (descriptors || []).map(function (descriptor) {
      return Object.assign({}, descriptor, { id: toBuffer(descriptor.id) });
    });
  }

  function creationOptions(options) {
    return Object.assign({}, options, {
      challenge: toBuffer(options.challenge),
      user: Object.assign({}, options.user, { id: toBuffer(options.user.id) }),
      excludeCredentials: withIds(options.excludeCredentials),
    });
  }

  function requestOptions(options) {
    return Object.assign({}, options, {
      challenge: toBuffer(options.challenge),
      allowCredentials: withIds(options.allowCredentials),
    });
  }

  // PublicKeyCredential.toJSON(), written out for browsers that lack it.
  function credentialJson(credential) {
    if (typeof credential.toJSON === "function") {
      return credential.toJSON();
    }
    var response = credential.response;
    var json = {
      id: credential.id,
      rawId: toText(credential.rawId),
      type: credential.type,
      authenticatorAttachment: credential.authenticatorAttachment || undefined,
      clientExtensionResults: credential.getClientExtensionResults(),
      response: { clientDataJSON: toText(response.clientDataJSON) },
    };
    if (response.attestationObject) {
      json.response.attestationObject = toText(response.attestationObject);
      json.response.transports = response.getTransports ? response.getTransports() : [];
    } else {
      json.response.authenticatorData = toText(response.authenticatorData);
      json.response.signature = toText(response.signature);
      if (response.userHandle) {
        json.response.userHandle = toText(response.userHandle);
      }
    }
    return json;
  }

  function fetchOptions(form) {
    var body = new URLSearchParams();
    body.set("for", form.dataset.passkey);
    return fetch(form.dataset.options, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRFToken": form.elements.csrfmiddlewaretoken.value },
      body: body,
    }).then(function (response) {
      return response.json().then(function (json) {
        if (!response.ok) {
          throw new Error(json.message || form.dataset.error);
        }
        return json;
      });
    });
  }

  function ceremony(form, options) {
    if (form.dataset.passkey === "register") {
      return navigator.credentials.create({ publicKey: creationOptions(options) });
    }
    return navigator.credentials.get({ publicKey: requestOptions(options) });
  }

  // The form's own error line, made the first time it is needed (role="alert": read out when shown).
  function showError(form, message) {
    var error = form.querySelector("[data-passkey-error]");
    if (!error) {
      error = document.createElement("p");
      error.className = "field-error";
      error.setAttribute("role", "alert");
      error.setAttribute("data-passkey-error", "");
      form.insertBefore(error, form.querySelector(".actions"));
    }
    error.textContent = message;
  }

  document.querySelectorAll("form[data-passkey]").forEach(function (form) {
    form.hidden = false;
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var button = form.querySelector("button[type=submit]");
      button.disabled = true;
      fetchOptions(form)
        .then(function (options) {
          if (options.redirect) {
            // the service asks for something first (a recent sign-in): its own page
            window.location.assign(options.redirect);
            return new Promise(function () {});
          }
          return ceremony(form, options);
        })
        .then(function (credential) {
          form.elements.credential.value = JSON.stringify(credentialJson(credential));
          form.submit(); // an ordinary POST: the page the service answers is shown
        })
        .catch(function (error) {
          // A refusal of the browser (cancelled, timed out, no passkey) says nothing worth showing.
          var own = error && error.name === "Error" && error.message;
          showError(form, own || form.dataset.error);
          button.disabled = false;
        });
    });
  });
})();
