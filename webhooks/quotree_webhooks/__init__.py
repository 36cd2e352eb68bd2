"""quotree's admission webhooks, served by the operator's process through Kopf.

- `handlers`: the Kopf handlers (registered when the entry point imports them);
- `decisions`: what they answer, as pure functions of the engine and a request;
- `settings`: the webhooks' own settings and the typed state on Kopf's memo;
- `configurations`: the webhook configurations quotree writes;
- `server`: certificates, Kopf's HTTPS server, writing the configurations
  (`configure(settings, state, api)` is called by the entry point at start-up);
- `tls`: the CA and serving certificate.

This package never imports the operator (an import-linter contract says so): the entry
point, quotree_main, gives it its settings and the shared API client. See docs/webhooks.md.
"""
