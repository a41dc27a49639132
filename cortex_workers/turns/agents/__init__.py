"""Agents in a turn: a `<name>_agent` tool call starts a task (`calls`), its end becomes the
call's result or a follow-up turn (`results`, `follow_up`), a python or A2A agent runs on the
`agents` queue (`runner`), and the sweeps end what was left (`sweep`, `cancel`). What a model
step reads of agents comes with its claim (`context`)."""
