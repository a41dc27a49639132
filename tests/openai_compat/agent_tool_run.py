"""Run an OpenAI Agents SDK agent with one function tool against our API (argv: base url,
api key, model); prints the tool's calls and the final output. A separate process: the tests'
own `agents` package shadows the SDK's."""

from __future__ import annotations

import asyncio
import json
import sys

from agents import (
    Agent,
    ModelSettings,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

SCRIPT = [
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
    {"text": "It is sunny in Paris."},
]
calls: list[str] = []


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    calls.append(city)
    return f"sunny in {city}"


async def main(base_url: str, api_key: str, model: str) -> str:
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    agent = Agent(
        name="weather",
        instructions="Answer with the tool.",
        model=OpenAIResponsesModel(model=model, openai_client=client),
        model_settings=ModelSettings(metadata={"script": json.dumps(SCRIPT)}),
        tools=[get_weather],
    )
    result = await Runner.run(agent, "What is the weather in Paris?", max_turns=4)
    return json.dumps({"calls": calls, "output": str(result.final_output)})


if __name__ == "__main__":
    print(asyncio.run(main(*sys.argv[1:4])))
