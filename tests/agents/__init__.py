"""Tests of agents (cards, python handlers, A2A). A regular package, so that `agents` here is
this directory and not the OpenAI Agents SDK of the same name (a dev dependency)."""
