"""quotree's admission webhooks: Kopf's handlers in the operator's process, served over HTTPS
by a webhook process the operator starts and supervises (docs/webhooks.md).

- `handlers`: the Kopf handlers (registered when the entry point imports them);
- `decisions`: what they answer, as pure functions of the engine and a request;
- `settings`: the webhooks' own settings and the typed state on Kopf's memo;
- `configurations`: the webhook configurations quotree writes;
- `server`: certificates, Kopf's server (behind the webhook process), the configurations
  (`configure(settings, state, api)` is called by the entry point at start-up);
- `tls`: the CA and serving certificate;
- `process`, `worker`, `wire`: the webhook process (the operator's side, the process
  itself, and their messages); the pod CREATE review is answered there (`fastpath`).

This package never imports the operator (an import-linter contract says so): the entry
point, quotree_main, gives it its settings and the shared API client. See docs/webhooks.md.
"""
