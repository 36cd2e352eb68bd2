"""quotree's admission webhooks, served by the operator's process through Kopf.

- `handlers`: the Kopf handlers (registered when imported by the operator);
- `decisions`: what they answer, as pure functions of the engine and a request;
- `configurations`: the webhook configurations quotree writes;
- `server`: certificates, Kopf's HTTPS server, writing the configurations
  (`configure(settings, config)` is called by the operator at start-up);
- `tls`: the CA and serving certificate; `kube`: the few API calls.

See docs/webhooks.md.
"""
