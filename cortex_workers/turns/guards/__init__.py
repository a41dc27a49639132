"""The guards of a step: what decides, before and around a provider call or a tool call,
whether and where it runs (budget, route and mode, redaction and restoration, rate limits,
the loop's guards, anomalies and the recovery that follows). Each reads the step's plan and
appends what it learns to the step's record; none writes on its own."""
