"""Webhooks: events signed per Standard Webhooks and sent through the SSRF guard
(docs/webhooks.md). Subscriptions, the outbox and the delivery log are in `store.webhooks`."""
