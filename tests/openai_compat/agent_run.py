"""Run an OpenAI Agents SDK agent against our API (argv: base url, api key, model); prints
its final output. A separate process: the tests' own `agents` package shadows the SDK's."""

from __future__ import annotations

import asyncio
import sys

from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI


async def main(base_url: str, api_key: str, model: str) -> str:
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    agent = Agent(
        name="helper",
        instructions="Answer briefly.",
        model=OpenAIResponsesModel(model=model, openai_client=client),
    )
    result = await Runner.run(agent, "Say hello.")
    return str(result.final_output)


if __name__ == "__main__":
    print(asyncio.run(main(*sys.argv[1:4])))
